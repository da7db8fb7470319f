/* test_copy.c - job documents to COPY text rows, byte for byte; the columns
 * setting; a throughput figure (printed, not asserted). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "copy.h"
#include "util.h"

/* Documents are written with ' for " so they stay readable. The copy has
 * no NUL after it: ASan catches any read past its end. */
static char *
dq(const char *s, size_t *n)
{
	char *d, *p;

	*n = strlen(s);
	d = memcpy(xmalloc(*n), s, *n);
	for (p = d; p < d + *n; p++)
		if (*p == '\'')
			*p = '"';
	return d;
}

static void
parse_ok(const char *spec, struct copy_columns *c)
{
	char err[256] = "";

	cr_assert_eq(copy_columns_parse(spec, c, err, sizeof(err)), 0,
	    "%s: %s", spec, err);
}

struct row_case {
	const char *doc;
	int rows;
	const char *want;
};

struct err_case {
	const char *doc;
	const char *msg;
};

static void
check_rows(const struct copy_columns *c, struct copy_buf *b, const char *d,
    size_t len, const struct row_case *rc)
{
	char err[256] = "";
	int rows;

	rows = copy_encode_job(d, len, c, b, err, sizeof(err));
	cr_assert_eq(rows, rc->rows, "%s: %d rows (%s)", rc->doc, rows, err);
	cr_assert(b->len == strlen(rc->want) && (b->len == 0 ||
	    memcmp(b->data, rc->want, b->len) == 0),
	    "%s:\n got [%.*s]\nwant [%s]", rc->doc, (int)b->len,
	    b->len ? b->data : "", rc->want);
}

/* On error the message is exact and out keeps what it held. */
static void
check_error(const struct copy_columns *c, struct copy_buf *b, const char *d,
    size_t len, const struct err_case *ec)
{
	char err[256];
	int rows;

	cr_assert_eq(copy_encode_job("{\"a\":\"keep\"}", 12, c, b, err,
	    sizeof(err)), 1);
	rows = copy_encode_job(d, len, c, b, err, sizeof(err));
	cr_assert_eq(rows, -1, "%s: %d rows", ec->doc, rows);
	cr_assert_str_eq(err, ec->msg, "%s", ec->doc);
	cr_assert(b->len == 5 && memcmp(b->data, "keep\n", 5) == 0, "%s",
	    ec->doc);
}

/* The n cases of rc (or, when rc is NULL, of ec) with spec's columns,
 * each into a buffer emptied first. */
static void
expect_cases(const char *spec, const struct row_case *rc,
    const struct err_case *ec, size_t n)
{
	struct copy_columns c;
	struct copy_buf b = { 0 };
	char *d;
	size_t i, len;

	parse_ok(spec, &c);
	for (i = 0; i < n; i++) {
		d = dq(rc != NULL ? rc[i].doc : ec[i].doc, &len);
		b.len = 0;
		if (rc != NULL)
			check_rows(&c, &b, d, len, &rc[i]);
		else
			check_error(&c, &b, d, len, &ec[i]);
		free(d);
	}
	copy_buf_free(&b);
	copy_columns_free(&c);
}

#define ROWS(spec, cases) \
	expect_cases(spec, cases, NULL, FERRY_ARRAY_LEN(cases))
#define ERRORS(spec, cases) \
	expect_cases(spec, NULL, cases, FERRY_ARRAY_LEN(cases))

Test(copy, text_escaping)
{
	static const struct row_case rc[] = {
		{ "{'a':'plain text'}", 1, "plain text\n" },
		{ "{'a':'x\\ty'}", 1, "x\\ty\n" },
		{ "{'a':'l1\\nl2'}", 1, "l1\\nl2\n" },
		{ "{'a':'a\\r\\nb'}", 1, "a\\r\\nb\n" },
		{ "{'a':'\\b\\f'}", 1, "\\b\\f\n" },
		{ "{'a':'\\u0009\\u000A\\u000d\\u0008\\u000c\\u000b'}", 1,
		    "\\t\\n\\r\\b\\f\\v\n" },
		{ "{'a':'c:\\\\tmp\\\\new'}", 1, "c:\\\\tmp\\\\new\n" },
		{ "{'a':'\\u005c'}", 1, "\\\\\n" },
		{ "{'a':'\\\\N'}", 1, "\\\\N\n" },
		{ "{'a':'N'}", 1, "N\n" },
		{ "{'a':'say \\'hi\\' \\/ .'}", 1, "say \"hi\" / .\n" },
		{ "{'a':'\\\\.'}", 1, "\\\\.\n" },
		{ "{'a':''}", 1, "\n" },
		{ "{'a':'\x01'}", -1, "" },
	};

	ROWS("a", rc);
}

Test(copy, null_missing_and_empty)
{
	static const struct row_case rc[] = {
		{ "{'a':null,'b':null}", 1, "\\N\t\\N\n" },
		{ "{'b':1}", 1, "\\N\t1\n" },
		{ "{}", 1, "\\N\t\\N\n" },
		{ "{'a':'','b':''}", 1, "\t\n" },
		{ "{'a':'\\\\N','b':null}", 1, "\\\\N\t\\N\n" },
	};

	ROWS("a, b", rc);
}

Test(copy, numbers_are_their_text)
{
	static const struct row_case rc[] = {
		{ "{'a':12345678901234567890,'b':0.1000000000000000055511151231257827"
		    ",'c':1e400,'d':-12,'e':-0.5e-3,'f':0,'g':1E+2}", 1,
		    "12345678901234567890\t0.1000000000000000055511151231257827\t"
		    "1e400\t-12\t-0.5e-3\t0\t1E+2\n" },
		{ "{'g':-0,'a':-99999999999999999999999.000}", 1,
		    "-99999999999999999999999.000\t\\N\t\\N\t\\N\t\\N\t\\N\t-0\n" },
	};

	ROWS("a,b,c,d,e,f,g", rc);
}

Test(copy, booleans_and_nested)
{
	static const struct row_case rc[] = {
		{ "{'a':true,'b':false}", 1, "t\tf\n" },
		{ "{'a':{'x':[1, 2.50],'y':'q\\\\z\\'w'},'b':[]}", 1,
		    "{\"x\":[1, 2.50],\"y\":\"q\\\\\\\\z\\\\\"w\"}\t[]\n" },
		{ "{'a':[1,\n\t{'k' : null}\r\n], 'b':{}}", 1,
		    "[1,\\n\\t{\"k\" : null}\\r\\n]\t{}\n" },
		{ "{'a':['\\u0000', '\\ud83d\\ude00'],'b':[[[]]]}", 1,
		    "[\"\\\\u0000\", \"\\\\ud83d\\\\ude00\"]\t[[[]]]\n" },
		{ "{'a':{'t':'\\t'},'b':'{}'}", 1, "{\"t\":\"\\\\t\"}\t{}\n" },
	};

	ROWS("a, b", rc);
}

Test(copy, utf8_and_unicode_escapes)
{
	static const struct row_case rc[] = {
		{ "{'a':'\xc3\xa9\xe6\xbc\xa2\xf0\x9f\x98\x80'}", 1,
		    "\xc3\xa9\xe6\xbc\xa2\xf0\x9f\x98\x80\n" },
		{ "{'a':'\\u00e9\\u6F22\\ud83d\\ude00!'}", 1,
		    "\xc3\xa9\xe6\xbc\xa2\xf0\x9f\x98\x80!\n" },
		{ "{'a':'\\u007f\\u0080\\u07ff\\u0800\\uffff\\udbff\\udfff'}", 1,
		    "\x7f\xc2\x80\xdf\xbf\xe0\xa0\x80\xef\xbf\xbf"
		    "\xf4\x8f\xbf\xbf\n" },
	};

	ROWS("a", rc);
}

Test(copy, keys)
{
	static const struct row_case rc[] = {
		{ "{'a':1,'a':2}", 1, "2\t\\N\n" },
		{ "{'a':1,'a':null}", 1, "\\N\t\\N\n" },
		{ "{'zz':'\\u0000','a':1,'q':{'x':1},'json_b':'B'}", 1, "1\tB\n" },
		{ "{'\\u0061':5,'json\\u005fb':6}", 1, "5\t6\n" },
		{ "{'\\u0000':1,'a':2,'b':3}", 1, "2\t\\N\n" },
		{ "{'A':1,'Json_b':2}", 1, "\\N\t\\N\n" },
	};
	static const struct row_case twice[] = {
		{ "{'a':'v','x':1}", 1, "v\tv\t1\n" },
	};

	ROWS("a, b=json_b", rc);
	ROWS("x=a, y=a, a=x", twice);
}

Test(copy, envelope)
{
	static const struct row_case rc[] = {
		{ "{'id':'j1','data':{'a':1},'attempts':0}", 1, "1\n" },
		{ "{'data':[{'a':1},{'a':'two'},{}]}", 3, "1\ntwo\n\\N\n" },
		{ "{'id':1,'data':[]}", 0, "" },
		{ "{'data':[ ]}", 0, "" },
		{ "[{'a':1},{'a':'x'}]", 2, "1\nx\n" },
		{ "[]", 0, "" },
		{ "{'a':1,'data':{'a':2}}", 1, "2\n" },
		{ "{'data':{'a':1},'data':{'a':3}}", 1, "3\n" },
		{ "{'d\\u0061ta':{'a':4}}", 1, "4\n" },
		{ " \n{'a':1} \t", 1, "1\n" },
	};

	ROWS("a", rc);
}

Test(copy, errors)
{
	static const struct err_case ec[] = {
		{ "{'data':'x'}",
		    "data is not an object or an array of objects" },
		{ "{'data':null}",
		    "data is not an object or an array of objects" },
		{ "{'data':[{'a':1},5]}", "row 2 is not an object" },
		{ "[{'a':1},[]]", "row 2 is not an object" },
		{ "[[]]", "row 1 is not an object" },
		{ "'str'", "document is not an object or an array of objects" },
		{ "42", "document is not an object or an array of objects" },
		{ "{'data':[{'a':1},{'a':'x\\u0000'}]}",
		    "row 2: column \"amount\": string holds \\u0000" },
		{ "{'a':'\\u0000'}",
		    "row 1: column \"amount\": string holds \\u0000" },
		{ "{'a' 1}", "malformed JSON at byte 5: expected ':'" },
		{ "", "malformed JSON at byte 0: unexpected end of input" },
		{ "{'a':1,}", "malformed JSON at byte 7: expected a string key" },
		{ "{'a':1} x",
		    "malformed JSON at byte 8: unexpected data after the value" },
		{ "{'a':'x\ty'}",
		    "malformed JSON at byte 7: control character in string" },
		{ "{'a':'\xff'}", "malformed JSON at byte 6: invalid UTF-8" },
		{ "{'a':01}", "malformed JSON at byte 5: leading zero" },
		{ "{'a':'\\ud800'}", "malformed JSON at byte 6: lone surrogate" },
	};

	ERRORS("amount=a", ec);
}

Test(copy, appends_and_reads_only_len_bytes)
{
	struct copy_columns c;
	struct copy_buf b = { 0 };
	char err[256];
	const char *doc = "{\"a\":1}{\"a\":2}";

	parse_ok("a", &c);
	cr_assert_eq(copy_encode_job(doc, 7, &c, &b, err, sizeof(err)), 1);
	cr_assert_eq(copy_encode_job(doc + 7, 7, &c, &b, err, sizeof(err)), 1);
	cr_assert(b.len == 4 && memcmp(b.data, "1\n2\n", 4) == 0);
	copy_buf_free(&b);
	cr_assert(b.data == NULL && b.len == 0 && b.cap == 0);
	copy_columns_free(&c);
}

/* Documents json_scan accepted: the same rows and errors without the
 * second validation, whitespace around the document and all. */
Test(copy, scanned_documents_encode_the_same)
{
	static const char *docs[] = {
		" {\"a\":1,\"b\":\"x\\ty\"}\n", "[{\"a\":null},{\"b\":[1,2]}]",
		"{\"data\":{\"a\":true}}", "{\"data\":3}", "\t[1]\r\n", "\"s\"",
		"{\"a\":\"\\u0000\"}", "{}",
	};
	struct copy_columns c;
	char err[256], err2[256];

	parse_ok("a, b", &c);
	for (size_t i = 0; i < sizeof(docs) / sizeof(docs[0]); i++) {
		struct copy_buf b = { 0 }, b2 = { 0 };
		size_t len = strlen(docs[i]);
		int n = copy_encode_job(docs[i], len, &c, &b, err, sizeof(err));
		int n2 = copy_encode_scanned(docs[i], len, &c, &b2, err2,
		    sizeof(err2));
		cr_assert_eq(n, n2, "%s: %d rows, scanned %d", docs[i], n, n2);
		if (n < 0)
			cr_assert_str_eq(err, err2);
		else
			cr_assert(b.len == b2.len && (b.len == 0 ||
			    memcmp(b.data, b2.data, b.len) == 0), "%s", docs[i]);
		copy_buf_free(&b);
		copy_buf_free(&b2);
	}
	copy_columns_free(&c);
}

Test(copy, many_columns)
{
	struct copy_columns c;
	struct copy_buf b = { 0 };
	char *names[100], err[256];
	int i;

	for (i = 0; i < 100; i++)
		names[i] = xasprintf("c%d", i);
	copy_columns_same(&c, names, 100);
	cr_assert_eq(copy_encode_job("{\"c99\":9,\"c0\":0}", 16, &c, &b, err,
	    sizeof(err)), 1);
	/* 0, 98 times \N, 9: 1 + 98 * 2 + 1 bytes, 99 tabs, a newline */
	cr_assert_eq(b.len, 1 + 98 * 2 + 1 + 99 + 1);
	cr_assert(memcmp(b.data, "0\t\\N\t", 5) == 0);
	cr_assert(memcmp(b.data + b.len - 5, "\\N\t9\n", 5) == 0);
	for (i = 0; i < 100; i++)
		free(names[i]);
	copy_buf_free(&b);
	copy_columns_free(&c);
}

Test(copy, columns_parse)
{
	struct copy_columns c;

	parse_ok("a, b=json_b, c", &c);
	cr_assert_eq(c.n, 3);
	cr_assert_str_eq(c.columns[0], "a");
	cr_assert_str_eq(c.keys[0], "a");
	cr_assert_str_eq(c.columns[1], "b");
	cr_assert_str_eq(c.keys[1], "json_b");
	cr_assert_str_eq(c.keys[2], "c");
	copy_columns_free(&c);
	cr_assert(c.n == 0 && c.columns == NULL && c.keys == NULL);
	parse_ok(" _x9 ,\tB = k_1 ", &c);
	cr_assert_eq(c.n, 2);
	cr_assert_str_eq(c.columns[0], "_x9");
	cr_assert_str_eq(c.columns[1], "B");
	cr_assert_str_eq(c.keys[1], "k_1");
	copy_columns_free(&c);
	parse_ok("abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijk",
	    &c);
	copy_columns_free(&c);
}

/* One column, no comma: the loop ends after the only item (it computed
 * NULL + 1 there, undefined behaviour that UBSan reports; found by
 * fuzz_copy). */
Test(copy, columns_parse_one_column)
{
	static const char *const specs[] = { "a", " a ", "a=k", " a = k " };
	struct copy_columns c;

	for (size_t i = 0; i < FERRY_ARRAY_LEN(specs); i++) {
		parse_ok(specs[i], &c);
		cr_assert_eq(c.n, 1, "%s", specs[i]);
		cr_assert_str_eq(c.columns[0], "a", "%s", specs[i]);
		cr_assert_str_eq(c.keys[0], strchr(specs[i], '=') != NULL ? "k" :
		    "a", "%s", specs[i]);
		copy_columns_free(&c);
	}
}

Test(copy, columns_parse_errors)
{
	static const struct {
		const char *spec, *msg;
	} ec[] = {
		{ "", "columns is empty" },
		{ " \t", "columns is empty" },
		{ "a,,b", "item 2 of columns is empty" },
		{ "a,", "item 2 of columns is empty" },
		{ ",a", "item 1 of columns is empty" },
		{ "1a", "bad column name \"1a\" in columns" },
		{ "a b", "bad column name \"a b\" in columns" },
		{ "a-b", "bad column name \"a-b\" in columns" },
		{ "\"a\"", "bad column name \"\"a\"\" in columns" },
		{ "=k", "bad column name \"\" in columns" },
		{ "a=", "bad key name \"\" in columns" },
		{ "a=b=c", "bad key name \"b=c\" in columns" },
		{ "a=b c", "bad key name \"b c\" in columns" },
		{ "a, b, a", "duplicate column \"a\" in columns" },
		{ "b=x, b=y", "duplicate column \"b\" in columns" },
		{ "abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijkl",
		    "column name \"abcdefghijklmnopqrstuvwxyzabcdef...\" is longer "
		    "than 63 bytes" },
	};
	struct copy_columns c;
	char err[256];
	size_t i;

	for (i = 0; i < FERRY_ARRAY_LEN(ec); i++) {
		cr_assert_eq(copy_columns_parse(ec[i].spec, &c, err,
		    sizeof(err)), -1, "%s", ec[i].spec);
		cr_assert_str_eq(err, ec[i].msg, "%s", ec[i].spec);
		cr_assert(c.n == 0 && c.columns == NULL);
	}
}

static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* 100,000 jobs of ~100 bytes, in batches of 1,000 rows. */
Test(copy, throughput)
{
	enum { JOBS = 100000, SLOT = 160 };
	struct copy_columns c;
	struct copy_buf b = { 0 };
	char *docs = xmalloc((size_t)JOBS * SLOT), err[256];
	size_t *lens = xmalloc(JOBS * sizeof(size_t)), bytes = 0;
	double t;
	int i, rows = 0;

	for (i = 0; i < JOBS; i++) {
		int n = snprintf(docs + (size_t)i * SLOT, SLOT, "{\"id\":\"job-%06d"
		    "\",\"data\":{\"user_id\":%d,\"name\":\"user %d\",\"amount\":"
		    "%d.%02d,\"note\":\"a\\tb\",\"ok\":true}}", i, i * 7, i,
		    i % 977, i % 100);
		lens[i] = (size_t)n;
		bytes += (size_t)n;
	}
	parse_ok("user_id, name, amount, note, ok", &c);
	t = now_s();
	for (i = 0; i < JOBS; i++) {
		if (i % 1000 == 0)
			b.len = 0;
		rows += copy_encode_job(docs + (size_t)i * SLOT, lens[i],
		    &c, &b, err, sizeof(err));
	}
	t = now_s() - t;
	cr_assert_eq(rows, JOBS);
	fprintf(stderr, "copy_encode_job: %d jobs, %.0f bytes/job: %.1f MB/s, "
	    "%.0f rows/s\n", JOBS, (double)bytes / JOBS, bytes / t / 1e6,
	    rows / t);
	free(docs);
	free(lens);
	copy_buf_free(&b);
	copy_columns_free(&c);
}
