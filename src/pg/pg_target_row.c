/* pg_target_row.c - what mode = upsert and update add to a job's rows in
 * the staging table: whether the job deletes (the member [queue]
 * op_member names, read from the producer's document) and which job of
 * the batch the row is from, so that one set-based statement resolves
 * deletes and writes in queue order and the update that found no row
 * names its job; for a queue with several tables, the member naming a
 * job's table and the arrays of its "data". Pure code: no libpq, no I/O. */
#include "pg_target.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json_scan.h"
#include "util.h"

/* The text of a string span into buf (size bytes), or false when its
 * text is longer or it does not unescape. The escaped form may be longer
 * than the text ("\u00e9" is 2 bytes): a long one is unescaped aside. */
static bool
span_text(const struct json_scan_span *s, char *buf, size_t size)
{
	struct json_scan_error e;
	size_t n = s->len - 2;
	char *out = buf;
	bool ok;

	if (s->type != JSON_SCAN_STRING)
		return false;
	if (n >= size)
		out = xmalloc(n + 1);
	ok = json_scan_unescape(s->p + 1, n, out, &n, &e) == 0 && n < size;
	if (ok && out != buf)
		memcpy(buf, out, n);
	if (out != buf)
		free(out);
	if (ok)
		buf[n] = '\0';
	return ok;
}

/* The op member of the document's top level, or a NULL span: none. */
static bool
find_op(const char *name, const char *doc, size_t len,
    struct json_scan_span *op)
{
	struct json_scan_span d, k, v;
	struct json_scan_error e;
	struct json_scan_iter it;
	char key[64];

	op->type = JSON_SCAN_NULL;
	if (json_scan_document(doc, len, &d, &e) == -1 ||
	    d.type != JSON_SCAN_OBJECT)
		return false;
	json_scan_iter_init(&it, &d);
	while (json_scan_object_next(&it, &k, &v))
		if (span_text(&k, key, sizeof(key)) && strcmp(key, name) == 0)
			*op = v;        /* the last of duplicates, as jansson */
	return true;
}

/* False when the document cannot have the member: without a backslash
 * a key is written as its own text, "name" with the quotes. */
static bool
may_have(const char *name, const char *doc, size_t len)
{
	char quoted[72];
	int n = snprintf(quoted, sizeof(quoted), "\"%s\"", name);

	return memchr(doc, '\\', len) != NULL ||
	    memmem(doc, len, quoted, (size_t)n) != NULL;
}

int
pg_target_job_op(const struct pg_target *t, const char *doc, size_t len,
    bool *del, char *why, size_t whysize)
{
	const struct queue_config *q = t->q;
	struct json_scan_span op;
	char text[16];

	*del = false;
	if (*q->op_member == '\0' || !may_have(q->op_member, doc, len) ||
	    !find_op(q->op_member, doc, len, &op) || op.type == JSON_SCAN_NULL)
		return 0;       /* (a document that does not scan fails in copy) */
	if (span_text(&op, text, sizeof(text))) {
		if (strcmp(text, "delete") == 0) {
			*del = true;
			return 0;
		}
		if (strcmp(text, "upsert") == 0 || (t->mode == PG_TARGET_UPDATE &&
		    strcmp(text, "update") == 0))
			return 0;
	}
	snprintf(why, whysize, "%s: %.*s is not an operation of mode = %s "
	    "(allowed: \"delete\", \"%s\"%s, null, or no %s member)",
	    q->op_member, op.len > 64 ? 64 : (int)op.len, op.p,
	    config_mode_name(q->mode), "upsert",
	    t->mode == PG_TARGET_UPDATE ? ", \"update\"" : "", q->op_member);
	util_utf8_fix(why);
	return -1;
}

void
pg_target_row_suffix(struct copy_buf *rows, size_t from, bool del, int job)
{
	char suffix[32];
	size_t slen, nl = 0, end = rows->len;

	slen = (size_t)snprintf(suffix, sizeof(suffix), "\t%c\t%d",
	    del ? 't' : 'f', job);
	for (size_t i = from; i < end; i++)
		nl += rows->data[i] == '\n';
	if (nl == 0)
		return;
	if (rows->cap - rows->len < nl * slen) {
		rows->cap = rows->len + nl * slen + rows->cap;
		rows->data = xrealloc(rows->data, rows->cap);
	}
	rows->len += nl * slen;
	/* from the end backwards: each row's bytes move by the suffixes of
	 * the rows after it (COPY text has no other newline byte) */
	size_t dst = rows->len;
	for (size_t i = end; i > from; i--) {
		char c = rows->data[i - 1];
		if (c == '\n') {
			rows->data[--dst] = '\n';
			dst -= slen;
			memcpy(rows->data + dst, suffix, slen);
		} else
			rows->data[--dst] = c;
	}
}

int
pg_target_member_text(const char *name, const char *doc, size_t len,
    char *buf, size_t size)
{
	struct json_scan_span v;

	if (!may_have(name, doc, len) || !find_op(name, doc, len, &v) ||
	    v.type == JSON_SCAN_NULL)
		return 0;
	return span_text(&v, buf, size) ? 1 : -1;
}

int
pg_target_data_members(const char *doc, size_t len,
    int (*fn)(void *ctx, const char *name, const char *p, size_t n),
    void *ctx)
{
	struct json_scan_span d, k, v, data;
	struct json_scan_error e;
	struct json_scan_iter it;
	char key[128];

	if (json_scan_document(doc, len, &d, &e) == -1 ||
	    d.type != JSON_SCAN_OBJECT)
		return -1;
	data = d;               /* a bare document: the tables themselves */
	json_scan_iter_init(&it, &d);
	while (json_scan_object_next(&it, &k, &v))
		if (span_text(&k, key, sizeof(key)) && strcmp(key, "data") == 0)
			data = v;       /* the last of duplicates, as copy.c */
	if (data.type != JSON_SCAN_OBJECT)
		return -1;
	json_scan_iter_init(&it, &data);
	while (json_scan_object_next(&it, &k, &v)) {
		if (!span_text(&k, key, sizeof(key)))
			snprintf(key, sizeof(key), "%.*s", k.len > 64 ? 64 :
			    (int)k.len, k.p);
		if (fn(ctx, key, v.p, v.len) == -1)
			return -2;
	}
	return 0;
}
