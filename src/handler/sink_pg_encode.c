/* sink_pg_encode.c - a batch's jobs as COPY rows, one buffer per target
 * table (a job's rows go to the table its table_member names, or one
 * "data" array per table), and the batch row's record of the jobs that
 * failed, named by the SHA-1 of their documents. */
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "copy.h"
#include "json_scan.h"
#include "log.h"
#include "pg_target.h"
#include "sink_pg_int.h"
#include "util.h"

void
sink_pg_set_result(struct handler_result *r, int outcome, const char *msg)
{
	r->outcome = outcome;
	r->unanswered = false;
	/* cut long server messages short, at a character boundary */
	util_utf8_copy(r->message, sizeof(r->message), msg, strlen(msg));
}

/* Name job j's failure in the batch row's record (doc/design.md, I5), by
 * the SHA-1 of its document (job_digest), which a reload of max_job_bytes
 * does not change, unlike job_id. The message is valid UTF-8 (set_result),
 * so json_string cannot fail; if it ever did, the batch must not commit
 * without the record: -1. */
int
sink_pg_record_failure(struct sink_pg *s, struct job *j, const char *msg)
{
	char clean[sizeof(((struct handler_result *)0)->message)];

	util_utf8_copy(clean, sizeof(clean), msg, strlen(msg));
	if (json_object_set_new(s->b.enc.failed, job_digest(j),
	    json_string(clean)) != 0) {
		log_error("cannot record the failure of job %s in its batch row",
		    job_id(j));
		return -1;
	}
	return 0;
}

/* What a batch's record says of job j: why it failed, or NULL (written).
 * By digest (a producer can give a job any id, the SHA-1 name of another
 * job's document too) in a record that says so (SINK_PG_BY_DIGEST), else
 * by id: an older ferryd's record, read after an upgrade. */
json_t *
sink_pg_recorded(json_t *failed, struct job *j)
{
	if (failed == NULL)
		return NULL;
	return json_object_get(failed, json_object_get(failed,
	    SINK_PG_BY_DIGEST) != NULL ? job_digest(j) : job_id(j));
}

/* Job j's result from the record of committed batch key (doc/design.md,
 * I5): written (HANDLER_OK, true) unless the record names it, else
 * HANDLER_FAIL with the recorded reason. */
bool
sink_pg_record_result(json_t *failed, const char *key, struct job *j,
    struct handler_result *res)
{
	json_t *why = sink_pg_recorded(failed, j);
	char unnamed[200];

	if (why == NULL) {
		sink_pg_set_result(res, HANDLER_OK, "");
		return true;
	}
	snprintf(unnamed, sizeof(unnamed), "failed (the reason in the row of "
	    "batch %s is not a string)", key);
	sink_pg_set_result(res, HANDLER_FAIL, json_is_string(why) ?
	    json_string_value(why) : unnamed);
	return false;
}

/* Job j's (number i) rows of doc into target t's buffer, for upsert and
 * update with the job's op and index. -1 with why (the buffer as it
 * was). */
static int
encode_rows(struct sink_pg *s, int t, struct job *j, int i, const char *doc,
    size_t len, char *why, size_t whysize)
{
	struct pg_target *tg = &s->targets[t];
	struct copy_buf *rows = &s->b.enc.parts[t].rows;
	size_t at = rows->len;
	bool del = false;
	/* job_check validated the producer's document: not again */
	bool scanned = j->scanned && doc == j->raw && len == j->raw_len;

	/* its op from the producer's document */
	if (PG_TARGET_BY_KEY(tg) && pg_target_job_op(tg, j->raw, j->raw_len,
	    &del, why, whysize) == -1)
		return -1;
	if ((scanned ? copy_encode_scanned(doc, len, &tg->cols, rows, why,
	    whysize) : copy_encode_job(doc, len, &tg->cols, rows, why,
	    whysize)) == -1)
		return -1;
	if (PG_TARGET_BY_KEY(tg))
		pg_target_row_suffix(rows, at, del, i);
	s->b.enc.deletes |= del;
	return 0;
}

static int
find_target(const struct sink_pg *s, const char *name)
{
	for (int t = 0; t < s->ntargets; t++)
		if (strcmp(s->targets[t].q->table, name) == 0)
			return t;
	return -1;
}

static void
unknown_table(const struct sink_pg *s, const char *name, char *why,
    size_t whysize)
{
	snprintf(why, whysize, "table \"%s\" is not one of this queue's tables "
	    "(%s)", name, s->q->tables);
	util_utf8_fix(why);
}

struct route {
	struct sink_pg *s;
	char *why;
	size_t whysize;
	struct route_rows {
		const char *p;  /* NULL: the job has none for this table */
		size_t n;
	} *rows;                /* per target */
};

/* One member of a job's "data": the rows of the table it names; of
 * duplicate members the last, as of "data" itself and of op_member. */
static int
route_member(void *ctx, const char *name, const char *p, size_t n)
{
	struct route *r = ctx;
	int t = find_target(r->s, name);

	if (t < 0) {
		unknown_table(r->s, name, r->why, r->whysize);
		return -1;
	}
	r->rows[t].p = p;
	r->rows[t].n = n;
	return 0;
}

/* False with why when doc is not JSON ferry can read (malformed, or
 * nested deeper than json_scan allows), as copy_encode_job says it. */
static bool
doc_scans(const char *doc, size_t len, char *why, size_t whysize)
{
	struct json_scan_span d;
	struct json_scan_error e;

	if (json_scan_document(doc, len, &d, &e) == 0)
		return true;
	snprintf(why, whysize, "malformed JSON at byte %zu: %s", e.pos, e.what);
	return false;
}

/* The table a job's table_member names: its index, or -1 with why. */
static int
member_target(struct sink_pg *s, struct job *j, char *why, size_t whysize)
{
	const char *member = s->q->table_member;
	char name[128];
	int rc = pg_target_member_text(member, j->raw, j->raw_len, name,
	    sizeof(name)), t = -1;

	if (rc <= 0 && !doc_scans(j->raw, j->raw_len, why, whysize))
		return -1;
	if (rc <= 0)
		snprintf(why, whysize, "%s: %s (allowed: a string naming one of "
		    "this queue's tables: %s)", member, rc == 0 ? "the job has no "
		    "such member, or it is null" : "is not a string of at most "
		    "127 bytes", s->q->tables);
	else if ((t = find_target(s, name)) < 0)
		unknown_table(s, name, why, whysize);
	return t;
}

/* Several tables: job i's rows into the buffers of its tables, the one
 * its table_member names or one per member of its "data"; nothing of it
 * when a part fails (-1 with why). */
static int
encode_tables(struct sink_pg *s, struct job *j, int i, char *why,
    size_t whysize)
{
	const char *doc = j->rows ? j->rows : j->raw;
	size_t len = j->rows ? j->rows_len : j->raw_len;
	struct route r = { s, why, whysize, NULL };
	int t, rc;

	for (t = 0; t < s->ntargets; t++)
		s->b.enc.parts[t].off[i] = s->b.enc.parts[t].rows.len;
	if (*s->q->table_member != '\0') {
		rc = (t = member_target(s, j, why, whysize)) < 0 ? -1 :
		    encode_rows(s, t, j, i, doc, len, why, whysize);
	} else {
		r.rows = xcalloc((size_t)s->ntargets, sizeof(*r.rows));
		if ((rc = pg_target_data_members(doc, len, route_member,
		    &r)) == -1 && doc_scans(doc, len, why, whysize))
			snprintf(why, whysize, "data is not an object of one array "
			    "of rows per table (allowed members: %s)", s->q->tables);
		for (t = 0; t < s->ntargets && rc == 0; t++)
			if (r.rows[t].p != NULL)
				rc = encode_rows(s, t, j, i, r.rows[t].p, r.rows[t].n,
				    why, whysize);
		free(r.rows);
	}
	for (t = 0; t < s->ntargets; t++) {
		struct sink_pg_rows *p = &s->b.enc.parts[t];
		if (rc != 0)
			p->rows.len = p->off[i];
		p->len[i] = p->rows.len - p->off[i];
	}
	return rc == 0 ? 0 : -1;
}

/* Encode the rows of every job to write into each target's buffer (job
 * i's rows at off[i], len[i] bytes; idx lists the jobs, in order). A job
 * whose rows cannot be encoded (or name a table not configured) fails
 * here and is named in s->b.enc.failed. skip: jobs a fence found written
 * already (NULL: none). */
void
sink_pg_encode(struct sink_pg *s, struct job *jobs, struct handler_result *res,
    int n, const bool *skip)
{
	struct sink_pg_rows *p0 = &s->b.enc.parts[0];
	char why[256];
	int rc;

	json_decref(s->b.enc.failed);
	s->b.enc.failed = json_object();
	for (int t = 0; t < s->ntargets; t++)
		s->b.enc.parts[t].rows.len = 0;
	s->b.enc.nidx = 0;
	s->b.enc.deletes = false;
	s->b.enc.record_failed = false;
	for (int i = 0; i < n; i++) {
		/* every refused job is named in the batch's record: recovered
		 * later (its worker died before the ack) and refused for
		 * another reason (a malformed document over a max_job_bytes
		 * lowered since is buried: refusal_varies), or no longer
		 * refused, a fence must not take it for written */
		if (jobs[i].invalid != NULL && (skip == NULL || !skip[i]) &&
		    sink_pg_record_failure(s, &jobs[i], jobs[i].invalid) < 0)
			s->b.enc.record_failed = true;
		if (jobs[i].invalid != NULL || (skip != NULL && skip[i]))
			continue;
		size_t at = p0->rows.len;
		/* rows from the job's cache key (src/redis/cache.c) when it has one */
		if (!s->routed)
			rc = encode_rows(s, 0, &jobs[i], i, jobs[i].rows ?
			    jobs[i].rows : jobs[i].raw, jobs[i].rows ?
			    jobs[i].rows_len : jobs[i].raw_len, why, sizeof(why));
		else
			rc = encode_tables(s, &jobs[i], i, why, sizeof(why));
		if (rc == -1) {
			sink_pg_set_result(&res[i], HANDLER_FAIL, why);
			if (sink_pg_record_failure(s, &jobs[i], why) < 0)
				s->b.enc.record_failed = true;
			continue;
		}
		sink_pg_set_result(&res[i], HANDLER_OK, "");
		if (!s->routed) {
			p0->off[i] = at;
			p0->len[i] = p0->rows.len - at;
		}
		s->b.enc.idx[s->b.enc.nidx++] = i;
	}
}

/* Send the rows of jobs idx[0..n) for target t as COPY data, adjacent
 * ones in one message of at most 1 MB. */
bool
sink_pg_put_rows(struct sink_pg *s, int t, const int *idx, int n)
{
	const struct sink_pg_rows *p = &s->b.enc.parts[t];

	for (int i = 0; i < n;) {
		size_t from = p->off[idx[i]], to = from + p->len[idx[i]];
		for (i++; i < n && p->off[idx[i]] == to &&
		    to - from + p->len[idx[i]] <= (1 << 20); i++)
			to += p->len[idx[i]];
		if (to > from && PQputCopyData(s->conn, p->rows.data + from,
		    (int)(to - from)) != 1)
			return false;
	}
	return true;
}
