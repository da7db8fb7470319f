/* test_json_scan.c - the strict JSON scanner: what it accepts, where and why
 * it refuses, walking objects and arrays, unescaping. Inputs are copied to
 * buffers of their exact size, so ASan catches any read past the end. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "json_scan.h"
#include "util.h"

static char *
exact(const char *s, size_t n)
{
	return memcpy(xmalloc(n), s, n);
}

static int
scan(const char *s, size_t n, struct json_scan_span *v,
    struct json_scan_error *e)
{
	char *b = exact(s, n);
	int r = json_scan_document(b, n, v, e);

	free(b);
	return r;
}

static char *
nested(int depth)
{
	char *s = xmalloc(2 * (size_t)depth + 1);

	memset(s, '[', (size_t)depth);
	memset(s + depth, ']', (size_t)depth);
	s[2 * depth] = '\0';
	return s;
}

Test(json_scan, accepts)
{
	static const char *ok[] = {
		"0", "-0", "1.5e-3", "-1E+10", "12345678901234567890", "1e400",
		"true", "false", "null", "\"\"", "[]", "{}", " \t\r\n[ ] ",
		" [ 1 , {\"a\" : [null, -2]} ] ",
		"\"\\u00e9\\ud83d\\ude00\\\"\\\\\\/\\b\\f\\n\\r\\t\"",
		"\"\\u0000\"", "\"\xc3\xa9\x7f\xf4\x8f\xbf\xbf\xef\xbf\xbf\"",
		"{\"a\":1,\"a\":2}", "[[],[[]],{\"\":{}}]",
	};
	struct json_scan_span v;
	struct json_scan_error e;
	char *deep = nested(JSON_SCAN_MAX_DEPTH);
	size_t i;

	for (i = 0; i < FERRY_ARRAY_LEN(ok); i++)
		cr_assert_eq(scan(ok[i], strlen(ok[i]), &v, &e), 0,
		    "%s: %s at %zu", ok[i], e.what, e.pos);
	cr_assert_eq(scan(deep, strlen(deep), &v, &e), 0);
	cr_assert_eq(v.type, JSON_SCAN_ARRAY);
	cr_assert_eq(v.len, 2 * JSON_SCAN_MAX_DEPTH);
	free(deep);
}

Test(json_scan, refuses)
{
	static const struct {
		const char *in;
		size_t pos;
		const char *what;
	} bad[] = {
		{ "[1,]", 3, "expected a value" },
		{ "{\"a\":1,}", 7, "expected a string key" },
		{ "{\"a\":1,,}", 7, "expected a string key" },
		{ "{,}", 1, "expected a string key" },
		{ "[,1]", 1, "expected a value" },
		{ "{\"a\":1 \"b\":2}", 7, "expected ',' or '}'" },
		{ "[1 2]", 3, "expected ',' or ']'" },
		{ "{\"a\" 1}", 5, "expected ':'" },
		{ "{\"a\"::1}", 5, "expected a value" },
		{ "{'a':1}", 1, "expected a string key" },
		{ "{1:2}", 1, "expected a string key" },
		{ "\"abc", 0, "unterminated string" },
		{ "[\"abc\\", 1, "unterminated string" },
		{ "[\"ab\\\"]", 1, "unterminated string" },
		{ "\"\\x\"", 1, "bad escape" },
		{ "\"\\U00e9\"", 1, "bad escape" },
		{ "\"\\u12g4\"", 1, "bad \\u escape" },
		{ "\"\\u12\"", 1, "bad \\u escape" },
		{ "01", 0, "leading zero" },
		{ "-01", 0, "leading zero" },
		{ "[00]", 1, "leading zero" },
		{ "\"\\ud800\"", 1, "lone surrogate" },
		{ "\"\\udc00\\ud800\"", 1, "lone surrogate" },
		{ "\"\\ud800\\u0041\"", 1, "lone surrogate" },
		{ "\"\\ud800\\n\"", 1, "lone surrogate" },
		{ "\"x\\ud83d\"", 2, "lone surrogate" },
		{ "", 0, "unexpected end of input" },
		{ "  ", 2, "unexpected end of input" },
		{ "[", 1, "unexpected end of input" },
		{ "[1", 2, "unexpected end of input" },
		{ "{\"a\"", 4, "unexpected end of input" },
		{ "{\"a\":", 5, "unexpected end of input" },
		{ "// c\n1", 0, "expected a value" },
		{ "/*x*/[]", 0, "expected a value" },
		{ "[1]/*x*/", 3, "unexpected data after the value" },
		{ "{\"a\":1}}", 7, "unexpected data after the value" },
		{ "\"a\" \"b\"", 4, "unexpected data after the value" },
		{ "truex", 4, "unexpected data after the value" },
		{ "1.5.2", 3, "unexpected data after the value" },
		{ "NaN", 0, "expected a value" },
		{ "Infinity", 0, "expected a value" },
		{ "+1", 0, "expected a value" },
		{ ".5", 0, "expected a value" },
		{ "True", 0, "expected a value" },
		{ "1.", 0, "bad number" },
		{ "1.e5", 0, "bad number" },
		{ "1e", 0, "bad number" },
		{ "1e+", 0, "bad number" },
		{ "-", 0, "bad number" },
		{ "-a", 0, "bad number" },
		{ "tru", 0, "invalid literal" },
		{ "nul", 0, "invalid literal" },
		{ "[fals]", 1, "invalid literal" },
		{ "\"a\tb\"", 2, "control character in string" },
		{ "\"a\nb\"", 2, "control character in string" },
		{ "\"\xff\"", 1, "invalid UTF-8" },
		{ "\"\xc0\xaf\"", 1, "invalid UTF-8" },
		{ "\"\xe0\x80\xaf\"", 1, "invalid UTF-8" },
		{ "\"\xed\xa0\x80\"", 1, "invalid UTF-8" },
		{ "\"\xf4\x90\x80\x80\"", 1, "invalid UTF-8" },
		{ "\"\xe6\xbc\"", 1, "invalid UTF-8" },
		{ "\"\x80\"", 1, "invalid UTF-8" },
		{ "\"\xc3", 1, "invalid UTF-8" },
		{ "\xef\xbb\xbf{}", 0, "expected a value" },
	};
	struct json_scan_span v;
	struct json_scan_error e;
	size_t i;

	for (i = 0; i < FERRY_ARRAY_LEN(bad); i++) {
		e.pos = 999;
		e.what = NULL;
		cr_assert_eq(scan(bad[i].in, strlen(bad[i].in), &v, &e), -1,
		    "%s", bad[i].in);
		cr_assert_str_eq(e.what, bad[i].what, "%s", bad[i].in);
		cr_assert_eq(e.pos, bad[i].pos, "%s: at %zu", bad[i].in, e.pos);
	}
}

Test(json_scan, depth_limit_and_embedded_nul)
{
	struct json_scan_span v;
	struct json_scan_error e;
	char *deep = nested(JSON_SCAN_MAX_DEPTH + 1);

	cr_assert_eq(scan(deep, strlen(deep), &v, &e), -1);
	cr_assert_str_eq(e.what, "nesting deeper than 64");
	cr_assert_eq(e.pos, JSON_SCAN_MAX_DEPTH);
	free(deep);
	cr_assert_eq(scan("[1]\0", 4, &v, &e), -1);
	cr_assert_eq(e.pos, 3);
	cr_assert_eq(scan("\"a\0\"", 4, &v, &e), -1);
	cr_assert_str_eq(e.what, "control character in string");
	cr_assert_eq(scan("[1]]", 3, &v, &e), 0);
	cr_assert_eq(scan("\"ab\"", 3, &v, &e), -1);
	cr_assert_str_eq(e.what, "unterminated string");
}

/* What jansson reads otherwise is noted, exactly: a \u0000 escape, a run of
 * more than 18 digits, an exponent of more than 2; digits in strings and
 * other escapes are not. */
static unsigned
notes_of(const char *doc)
{
	struct json_scan_span v;
	struct json_scan_error e;
	unsigned notes = 99;

	cr_assert_eq(json_scan_document_noted(doc, strlen(doc), &v, &e, &notes),
	    0, "%s: %s", doc, e.what);
	return notes;
}

Test(json_scan, notes_what_jansson_reads_otherwise)
{
	cr_assert_eq(notes_of("{\"id\":123456789012345678,\"a\":1.5e99}"), 0);
	cr_assert_eq(notes_of("{\"a\":\"1234567890123456789012\"}"), 0);
	cr_assert_eq(notes_of("[\"\\u0001\\\\u0000\"]"), 0);
	cr_assert_eq(notes_of("{\"a\":\"x\\u0000\"}"), JSON_SCAN_NOTE_NUL);
	cr_assert_eq(notes_of("{\"\\u0000\":1}"), JSON_SCAN_NOTE_NUL);
	cr_assert_eq(notes_of("[1234567890123456789]"),
	    JSON_SCAN_NOTE_LONG_NUMBER);
	cr_assert_eq(notes_of("[-1234567890123456789]"),
	    JSON_SCAN_NOTE_LONG_NUMBER);
	cr_assert_eq(notes_of("[0.1234567890123456789]"),
	    JSON_SCAN_NOTE_LONG_NUMBER);
	cr_assert_eq(notes_of("[1e400]"), JSON_SCAN_NOTE_LONG_NUMBER);
	cr_assert_eq(notes_of("[1E-007]"), JSON_SCAN_NOTE_LONG_NUMBER);
	cr_assert_eq(notes_of("[\"\\u0000\",1e+100]"),
	    JSON_SCAN_NOTE_NUL | JSON_SCAN_NOTE_LONG_NUMBER);
	/* json_scan_document itself is unchanged by it */
	struct json_scan_span v;
	struct json_scan_error e;
	cr_assert_eq(json_scan_document("[1e400]", 7, &v, &e), 0);
}

Test(json_scan, values_one_after_another)
{
	const char *s = "  [1, \"x\"] -2.5e1\t\"s\"  ";
	struct json_scan_span v;
	struct json_scan_error e;
	size_t pos = 0, n = strlen(s);

	cr_assert_eq(json_scan_value(s, n, &pos, &v, &e), 0);
	cr_assert(v.type == JSON_SCAN_ARRAY && v.p == s + 2 && v.len == 8);
	cr_assert_eq(pos, 10);
	cr_assert_eq(json_scan_value(s, n, &pos, &v, &e), 0);
	cr_assert(v.type == JSON_SCAN_NUMBER && v.len == 6);
	cr_assert_eq(json_scan_value(s, n, &pos, &v, &e), 0);
	cr_assert(v.type == JSON_SCAN_STRING && v.len == 3 && *v.p == '"');
	cr_assert_eq(json_scan_ws(s, n, pos), n);
	cr_assert_eq(json_scan_ws(s, n, n + 5), n);
	cr_assert_eq(json_scan_value(s, n, &pos, &v, &e), -1);
	cr_assert_eq(e.pos, n);
}

Test(json_scan, walks_objects)
{
	static const char doc[] = "{ \"a\" : 1 , \"b\\\"}\" : \"x]}\\\\\" , "
	    "\"c\":[1,{\"d\":\"}\"}], \"e\":{}, \"f\":true,\"g\":false,"
	    "\"h\":null,\"i\":-1.5e3\n}";
	static const struct {
		const char *key, *val;
		enum json_scan_type type;
	} want[] = {
		{ "\"a\"", "1", JSON_SCAN_NUMBER },
		{ "\"b\\\"}\"", "\"x]}\\\\\"", JSON_SCAN_STRING },
		{ "\"c\"", "[1,{\"d\":\"}\"}]", JSON_SCAN_ARRAY },
		{ "\"e\"", "{}", JSON_SCAN_OBJECT },
		{ "\"f\"", "true", JSON_SCAN_TRUE },
		{ "\"g\"", "false", JSON_SCAN_FALSE },
		{ "\"h\"", "null", JSON_SCAN_NULL },
		{ "\"i\"", "-1.5e3", JSON_SCAN_NUMBER },
	};
	char *b = exact(doc, sizeof(doc) - 1);
	struct json_scan_span obj, k, v;
	struct json_scan_error e;
	struct json_scan_iter it;
	size_t i = 0;

	cr_assert_eq(json_scan_document(b, sizeof(doc) - 1, &obj, &e), 0,
	    "%s at %zu", e.what, e.pos);
	json_scan_iter_init(&it, &obj);
	while (json_scan_object_next(&it, &k, &v)) {
		cr_assert_lt(i, FERRY_ARRAY_LEN(want));
		cr_assert(k.len == strlen(want[i].key) &&
		    memcmp(k.p, want[i].key, k.len) == 0, "key %zu: %.*s", i,
		    (int)k.len, k.p);
		cr_assert(v.len == strlen(want[i].val) &&
		    memcmp(v.p, want[i].val, v.len) == 0, "val %zu: %.*s", i,
		    (int)v.len, v.p);
		cr_assert_eq(k.type, JSON_SCAN_STRING);
		cr_assert_eq(v.type, want[i].type);
		i++;
	}
	cr_assert_eq(i, FERRY_ARRAY_LEN(want));
	cr_assert_eq(json_scan_object_next(&it, &k, &v), 0);
	free(b);
}

Test(json_scan, walks_arrays)
{
	static const char doc[] = "[ 1, \"a,b\" ,[2,3],{\"x\":[]} ,null,\"\\\\\"]";
	static const char *want[] = { "1", "\"a,b\"", "[2,3]", "{\"x\":[]}",
	    "null", "\"\\\\\"" };
	char *b = exact(doc, sizeof(doc) - 1);
	struct json_scan_span arr, v;
	struct json_scan_error e;
	struct json_scan_iter it;
	size_t i = 0;

	cr_assert_eq(json_scan_document(b, sizeof(doc) - 1, &arr, &e), 0);
	json_scan_iter_init(&it, &arr);
	while (json_scan_array_next(&it, &v)) {
		cr_assert(i < FERRY_ARRAY_LEN(want) &&
		    v.len == strlen(want[i]) && memcmp(v.p, want[i], v.len) == 0,
		    "element %zu: %.*s", i, (int)v.len, v.p);
		i++;
	}
	cr_assert_eq(i, FERRY_ARRAY_LEN(want));
	free(b);
	cr_assert_eq(json_scan_document("[ ]", 3, &arr, &e), 0);
	json_scan_iter_init(&it, &arr);
	cr_assert_eq(json_scan_array_next(&it, &v), 0);
	cr_assert_eq(json_scan_document("{\n}", 3, &arr, &e), 0);
	json_scan_iter_init(&it, &arr);
	cr_assert_eq(json_scan_object_next(&it, &v, &v), 0);
}

Test(json_scan, unescapes)
{
	static const char in[] = "a\\nb\\u00e9\\ud83d\\ude00\\\\\\/\\\"\\t\\u0041";
	static const char want[] = "a\nb\xc3\xa9\xf0\x9f\x98\x80\\/\"\tA";
	char out[sizeof(in)], u[4];
	struct json_scan_error e;
	const char *what;
	size_t n, used;

	cr_assert_eq(json_scan_unescape(in, sizeof(in) - 1, out, &n, &e), 0);
	cr_assert(n == sizeof(want) - 1 && memcmp(out, want, n) == 0,
	    "%.*s", (int)n, out);
	cr_assert_eq(json_scan_unescape("ab\\u0000", 8, out, &n, &e), -1);
	cr_assert_str_eq(e.what, "string holds \\u0000");
	cr_assert_eq(e.pos, 2);
	cr_assert_eq(json_scan_unescape("\\q", 2, out, &n, &e), -1);
	cr_assert_str_eq(e.what, "bad escape");
	cr_assert_eq(json_scan_unescape("x\\", 2, out, &n, &e), -1);
	cr_assert_eq(json_scan_unescape("", 0, out, &n, &e), 0);
	cr_assert_eq(n, 0);
	cr_assert_eq(json_scan_escape("\\ud83d\\ude00", 12, u, &used, &what), 4);
	cr_assert_eq(used, 12);
	cr_assert_eq(json_scan_escape("\\u07ff", 6, u, &used, &what), 2);
	cr_assert(memcmp(u, "\xdf\xbf", 2) == 0);
	cr_assert_eq(json_scan_escape("\\ud83d", 6, u, &used, &what), -1);
	cr_assert_str_eq(what, "lone surrogate");
}
