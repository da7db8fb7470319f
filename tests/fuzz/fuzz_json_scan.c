/* fuzz_json_scan.c - the strict scanner (src/format/json_scan.c,
 * json_scan_text.c) against jansson, the reference job.c keeps: what the
 * scanner accepts jansson accepts too, with the same values, unless
 * its notes say the two may differ ("\u0000", numbers beyond a double,
 * integers beyond 64 bits: the rule job_check uses), and it notes nothing
 * the conservative textual rule does not flag; what jansson accepts the scanner accepts unless
 * it nests deeper than JSON_SCAN_MAX_DEPTH. Walking a validated container
 * finds exactly jansson's members and elements. */
#include "fuzz.h"

#include "json_scan.h"

static int
depth_of(json_t *v)
{
	int d = 0, k;
	size_t i;
	const char *key;
	json_t *x;

	if (json_is_array(v)) {
		json_array_foreach(v, i, x)
			if ((k = depth_of(x)) > d)
				d = k;
		return d + 1;
	}
	if (json_is_object(v)) {
		json_object_foreach(v, key, x)
			if ((k = depth_of(x)) > d)
				d = k;
		return d + 1;
	}
	return 0;
}

/* The text of string span s, unescaped (malloc'd), or NULL for \u0000. */
static char *
text_of(const struct json_scan_span *s, size_t *n)
{
	struct json_scan_error e;
	char *buf = malloc(s->len);

	CHECK(buf != NULL);
	CHECK(s->len >= 2 && s->p[0] == '"' && s->p[s->len - 1] == '"');
	if (json_scan_unescape(s->p + 1, s->len - 2, buf, n, &e) == -1) {
		CHECK(strcmp(e.what, "string holds \\u0000") == 0);
		free(buf);
		return NULL;
	}
	CHECK(*n <= s->len - 2);
	CHECK(fuzz_utf8_ok(buf, *n));
	return buf;
}

static void same(const struct json_scan_span *s, json_t *v);

static void
same_object(const struct json_scan_span *s, json_t *v)
{
	struct json_scan_iter it, later;
	struct json_scan_span k, x, k2, x2;
	size_t distinct = 0, n, n2;
	char *key, *key2;
	bool last;

	json_scan_iter_init(&it, s);
	while (json_scan_object_next(&it, &k, &x)) {
		CHECK(k.type == JSON_SCAN_STRING);
		key = text_of(&k, &n);
		CHECK(key != NULL);
		last = true;
		later = it;
		while (last && json_scan_object_next(&later, &k2, &x2)) {
			key2 = text_of(&k2, &n2);
			last = !(n2 == n && memcmp(key, key2, n) == 0);
			free(key2);
		}
		if (last) {
			json_t *jx = json_object_getn(v, key, n);
			CHECK(jx != NULL);
			same(&x, jx);
			distinct++;
		}
		free(key);
	}
	CHECK(distinct == json_object_size(v));
}

static void
same(const struct json_scan_span *s, json_t *v)
{
	struct json_scan_iter it;
	struct json_scan_span x;
	size_t i = 0, n;
	char *t, num[64];

	switch (s->type) {
	case JSON_SCAN_NULL:
		CHECK(json_is_null(v) && s->len == 4);
		break;
	case JSON_SCAN_TRUE:
		CHECK(json_is_true(v) && s->len == 4);
		break;
	case JSON_SCAN_FALSE:
		CHECK(json_is_false(v) && s->len == 5);
		break;
	case JSON_SCAN_NUMBER:
		CHECK(json_is_number(v));
		CHECK(s->len < sizeof(num));    /* not noted: few digits */
		memcpy(num, s->p, s->len);
		num[s->len] = '\0';
		if (json_is_integer(v))
			CHECK(strpbrk(num, ".eE") == NULL &&
			    strtoll(num, NULL, 10) == json_integer_value(v));
		else
			CHECK(strtod(num, NULL) == json_real_value(v));
		break;
	case JSON_SCAN_STRING:
		CHECK(json_is_string(v));
		t = text_of(s, &n);
		CHECK(t != NULL);   /* \u0000 is noted */
		CHECK(n == json_string_length(v) &&
		    memcmp(t, json_string_value(v), n) == 0);
		free(t);
		break;
	case JSON_SCAN_ARRAY:
		CHECK(json_is_array(v));
		CHECK(s->p[0] == '[' && s->p[s->len - 1] == ']');
		json_scan_iter_init(&it, s);
		while (json_scan_array_next(&it, &x)) {
			CHECK(i < json_array_size(v));
			same(&x, json_array_get(v, i++));
		}
		CHECK(i == json_array_size(v));
		break;
	case JSON_SCAN_OBJECT:
		CHECK(json_is_object(v));
		CHECK(s->p[0] == '{' && s->p[s->len - 1] == '}');
		same_object(s, v);
		break;
	}
}

/* The scanner's idea of one UTF-8 character is jansson's. */
static void
check_utf8(const char *p, size_t size)
{
	for (size_t i = 0; i < size && i < 64; i++) {
		size_t k = json_scan_utf8_len(p + i, size - i);
		unsigned char c = (unsigned char)p[i];

		if (k > 0) {
			CHECK(k <= 4 && k <= size - i);
			CHECK(fuzz_utf8_ok(p + i, k));
			CHECK((c >= 0x20 && c < 0x80) == (k == 1));
		} else if (c >= 0x80) {
			for (size_t l = 1; l <= 4 && l <= size - i; l++)
				CHECK(!fuzz_utf8_ok(p + i, l));
		}
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *p = (const char *)data;
	struct json_scan_span v;
	struct json_scan_error e;
	json_error_t jerr;
	json_t *doc;
	unsigned notes;
	int scan = json_scan_document_noted(p, size, &v, &e, &notes);

	check_utf8(p, size);
	/* jansson stops at a NUL byte and accepts what came before: job_load
	 * refuses such documents first, and so does the scanner */
	doc = memchr(p, '\0', size) != NULL ? NULL :
	    json_loadb(p, size, JSON_DECODE_ANY, &jerr);
	if (memchr(p, '\0', size) != NULL)
		CHECK(scan == -1);
	if (scan == 0) {
		size_t lead = json_scan_ws(p, size, 0);
		CHECK(v.p == p + lead && v.len > 0 && v.len <= size - lead);
		CHECK(json_scan_ws(p, size, lead + v.len) == size);
		CHECK(notes == 0 || fuzz_text_unlike_jansson(p, size));
		if (notes == 0) {
			CHECK(doc != NULL);
			same(&v, doc);
		}
	} else {
		CHECK(e.pos <= size && e.what != NULL);
		CHECK(doc == NULL || depth_of(doc) > JSON_SCAN_MAX_DEPTH);
	}
	json_decref(doc);
	return 0;
}
