/* test_pg_target_row.c - a job's op (pg_target_job_op) and the staging
 * columns appended to its rows (pg_target_row_suffix): pure, no server. */
#include <criterion/criterion.h>
#include <string.h>

#include "config.h"
#include "copy.h"
#include "pg_target.h"

static struct queue_config q;
static struct pg_target t;

static void
target(int mode, const char *op_member)
{
	memset(&q, 0, sizeof(q));
	snprintf(q.name, sizeof(q.name), "q");
	q.mode = mode;
	q.op_member = (char *)op_member;
	memset(&t, 0, sizeof(t));
	t.q = &q;
	t.mode = mode == CONFIG_MODE_UPDATE ? PG_TARGET_UPDATE :
	    PG_TARGET_UPSERT;
}

/* 1: deletes, 0: writes, -1: refused (why starts with want). */
static int
op(const char *doc, const char *want)
{
	char why[256] = "";
	bool del;
	int rc = pg_target_job_op(&t, doc, strlen(doc), &del, why, sizeof(why));

	if (rc == -1) {
		cr_assert_not_null(want, "%s: %s", doc, why);
		cr_assert_eq(strncmp(why, want, strlen(want)), 0, "%s: \"%s\"", doc,
		    why);
		return -1;
	}
	cr_assert_null(want, "%s: not refused", doc);
	return del;
}

Test(pg_target_row, op_values)
{
	target(CONFIG_MODE_UPSERT, "op");
	cr_expect_eq(op("{\"op\":\"delete\",\"k\":1}", NULL), 1);
	cr_expect_eq(op("{\"k\":1,\"data\":{\"k\":2},\"op\":\"delete\"}", NULL),
	    1);
	cr_expect_eq(op("{\"op\":\"upsert\",\"k\":1}", NULL), 0);
	cr_expect_eq(op("{\"op\":null,\"k\":1}", NULL), 0);
	cr_expect_eq(op("{\"k\":1}", NULL), 0);
	/* only the top level counts; an escaped key is the same key */
	cr_expect_eq(op("{\"data\":{\"op\":\"delete\"}}", NULL), 0);
	cr_expect_eq(op("{\"\\u006fp\":\"del\\u0065te\"}", NULL), 1);
	/* of duplicate members the last, as jansson reads them */
	cr_expect_eq(op("{\"op\":\"delete\",\"op\":\"upsert\"}", NULL), 0);
	cr_expect_eq(op("{\"op\":\"remove\"}", "op: \"remove\" is not an "
	    "operation of mode = upsert (allowed: \"delete\", \"upsert\", null, "
	    "or no op member)"), -1);
	cr_expect_eq(op("{\"op\":\"update\"}", "op: \"update\" is not"), -1);
	cr_expect_eq(op("{\"op\":[1]}", "op: [1] is not"), -1);
	cr_expect_eq(op("{\"op\":\"DELETE\"}", "op: \"DELETE\" is not"), -1);
	/* not JSON: for the COPY encoder to refuse */
	cr_expect_eq(op("{\"op\":", NULL), 0);
}

Test(pg_target_row, op_member_and_update)
{
	target(CONFIG_MODE_UPDATE, "action");
	cr_expect_eq(op("{\"action\":\"delete\",\"op\":\"x\"}", NULL), 1);
	cr_expect_eq(op("{\"action\":\"update\"}", NULL), 0);
	cr_expect_eq(op("{\"action\":\"upsert\"}", NULL), 0);
	cr_expect_eq(op("{\"action\":\"insert\"}", "action: \"insert\" is not "
	    "an operation of mode = update (allowed: \"delete\", \"upsert\", "
	    "\"update\", null, or no action member)"), -1);
	target(CONFIG_MODE_UPSERT, "");
	cr_expect_eq(op("{\"op\":\"delete\"}", NULL), 0);
	cr_expect_eq(op("{\"op\":\"remove\"}", NULL), 0);
}

Test(pg_target_row, suffix_on_each_row)
{
	struct copy_buf b = { 0 };
	static const char rows[] = "1\ta\\nb\n2\t\\N\n";

	memcpy((b.data = malloc(4)), "x\ty\n", 4);
	b.len = b.cap = 4;
	pg_target_row_suffix(&b, 0, false, 0);
	size_t from = b.len;
	b.data = realloc(b.data, b.len + sizeof(rows));
	memcpy(b.data + b.len, rows, sizeof(rows) - 1);
	b.len += sizeof(rows) - 1;
	b.cap = b.len;
	pg_target_row_suffix(&b, from, true, 12);
	pg_target_row_suffix(&b, b.len, true, 13);      /* no rows: nothing */
	cr_assert_eq(b.len, strlen("x\ty\tf\t0\n1\ta\\nb\tt\t12\n2\t\\N\tt\t12\n"));
	cr_assert_eq(memcmp(b.data, "x\ty\tf\t0\n1\ta\\nb\tt\t12\n2\t\\N\tt\t12\n",
	    b.len), 0, "%.*s", (int)b.len, b.data);
	copy_buf_free(&b);
}

/* A member's text that fits though its escaped form does not (fuzz_pg_row
 * found it refused): "\u00e9" is 6 bytes in the document, 2 in the text. */
Test(pg_target_row, escaped_member_longer_than_its_text)
{
	char buf[16], doc[256];
	int n = snprintf(doc, sizeof(doc), "{\"table\":\"%s\"}",
	    "\\u00e9\\u00e9\\u00e9t\\u00e9");

	cr_assert_eq(pg_target_member_text("table", doc, (size_t)n, buf,
	    sizeof(buf)), 1);
	cr_assert_str_eq(buf, "\xc3\xa9\xc3\xa9\xc3\xa9t\xc3\xa9");
	n = snprintf(doc, sizeof(doc), "{\"table\":\"%s\"}",
	    "0123456789\\u00e9\\u00e9\\u00e9");
	cr_assert_eq(pg_target_member_text("table", doc, (size_t)n, buf,
	    sizeof(buf)), -1, "16 bytes of text do not fit 16 with the NUL");
}
