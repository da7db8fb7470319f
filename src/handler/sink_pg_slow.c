/* sink_pg_slow.c - a batch statement by statement, when the one-query
 * path cannot (recovered jobs to fence, a job that failed to encode) or
 * failed on a row: the fences of recovered jobs first (sink_pg_fence.c,
 * a transaction of their own), then BEGIN, constraints checked
 * immediately, the batch row, the COPY under a savepoint that is rolled
 * back and split in halves until the refused rows are isolated (dead with
 * their SQLSTATE); for upsert and update the staged rows applied per
 * part, and for update with missing = dead the jobs whose key has no row
 * failed and the part redone without them; the failed record, COMMIT.
 * With several tables a part is a set of jobs, its rows in every table
 * (parents first, deletes children first): a refused row fails its whole
 * job. */
#include "sink_pg_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "log.h"
#include "util.h"

/* Job j is dead with msg, named in the batch row's record. */
static bool
fail_job(struct sink_pg *s, struct job *j, struct handler_result *r,
    const char *msg, struct pg_failure *f)
{
	sink_pg_set_result(r, HANDLER_FAIL, msg);
	if (sink_pg_record_failure(s, j, msg) < 0) {
		snprintf(f->msg, sizeof(f->msg), "XX000: cannot record a "
		    "refused row in the batch row");
		f->cls = PG_ERR_OTHER;
		pg_failure_set_state(f, "XX000");
		return false;
	}
	return true;
}

/* With version: of the jobs missing_sql named in *r, the staged rows
 * whose key still has no row as new as theirs (t->recheck_sql, a snapshot
 * of its own; the others are stale, not missing), in place of *r. */
static bool
still_missing(struct sink_pg *s, const struct pg_target *t, PGresult **r,
    struct pg_failure *f)
{
	struct buf list = BUF_INIT;
	PGresult *again = NULL;

	if (t->recheck_sql == NULL || PQntuples(*r) == 0)
		return true;
	buf_append(&list, "{", 1);
	for (int k = 0; k < PQntuples(*r); k++)
		buf_printf(&list, "%s%s", k ? "," : "", PQgetvalue(*r, k, 0));
	buf_append(&list, "}", 1);
	char *text = buf_take(&list);
	bool ok = pg_conn_exec(s->conn, t->recheck_sql, 1, text, NULL, f,
	    &again);
	free(text);
	if (ok) {
		PQclear(*r);
		*r = again;
	}
	return ok;
}

/* mode = update, missing = dead: fail the jobs of target t's staged
 * updates whose key has no row. The number of jobs failed, or -1 with f. */
static int
find_missing(struct sink_pg *s, const struct pg_target *t, struct job *jobs,
    struct handler_result *res, struct pg_failure *f)
{
	PGresult *r = NULL;
	int failed = 0;

	if (t->missing_sql == NULL)
		return 0;
	if (!pg_conn_exec(s->conn, t->missing_sql, 0, NULL, NULL, f, &r))
		return -1;
	if (!still_missing(s, t, &r, f)) {
		PQclear(r);
		return -1;
	}
	for (int k = 0; k < PQntuples(r) && failed >= 0; k++) {
		int i = atoi(PQgetvalue(r, k, 0));
		if (res[i].outcome == HANDLER_FAIL)
			continue;       /* another row of the same job */
		failed = fail_job(s, &jobs[i], &res[i], PQgetvalue(r, k, 1), f) ?
		    failed + 1 : -1;
	}
	PQclear(r);
	return failed;
}

/* After the part's statements: for update with missing = dead the jobs
 * whose key has no row failed, then (none failed) the staging tables
 * emptied. The number failed (the part must go again without them), 0,
 * or -1 with f. */
static int
after_part(struct sink_pg *s, struct job *jobs, struct handler_result *res,
    struct pg_failure *f)
{
	int missing = 0, m;

	for (int t = 0; t < s->ntargets && s->by_key; t++) {
		if ((m = find_missing(s, &s->targets[t], jobs, res, f)) < 0)
			return -1;
		missing += m;
	}
	for (int t = 0; t < s->ntargets && missing == 0; t++)
		if (s->targets[t].clear_sql != NULL &&
		    !sink_pg_sql(s, s->targets[t].clear_sql, f))
			return -1;
	return missing;
}

/* COPY the rows of jobs idx[0..n) for target t. False with f. */
static bool
copy_rows(struct sink_pg *s, int t, const int *idx, int n,
    struct pg_failure *f)
{
	PGresult *r = PQexec(s->conn, s->targets[t].copy_sql);
	bool sent = true;

	if (PQresultStatus(r) == PGRES_COPY_IN) {
		PQclear(r);
		sent = sink_pg_put_rows(s, t, idx, n);
		PQputCopyEnd(s->conn, sent ? NULL : "ferry: sending the rows failed");
		r = PQgetResult(s->conn);
	}
	/* else the COPY did not start (a table renamed, a grant revoked):
	 * r is its error, with the SQLSTATE that classifies it */
	bool copied = PQresultStatus(r) == PGRES_COMMAND_OK;
	if (!copied)
		pg_conn_failure(s->conn, r, f);
	PQclear(r);
	while ((r = PQgetResult(s->conn)) != NULL)
		PQclear(r);
	if (!sent)
		pg_conn_lost(s->conn, f);
	return copied && sent;
}

/* The part's statements one by one (pg_target_statements), until one
 * fails. */
struct slow_fn {
	struct pg_target_stmt_fn fn;
	struct sink_pg *s;
	const int *idx;
	int n;
	struct pg_failure *f;
	bool ok;
};

static void
slow_copy(struct pg_target_stmt_fn *fn, int t)
{
	struct slow_fn *sf = (struct slow_fn *)fn;

	sf->ok = sf->ok && copy_rows(sf->s, t, sf->idx, sf->n, sf->f);
}

static void
slow_sql(struct pg_target_stmt_fn *fn, int t, const char *sql)
{
	struct slow_fn *sf = (struct slow_fn *)fn;

	(void)t;
	sf->ok = sf->ok && sink_pg_sql(sf->s, sql, sf->f);
}

static bool copy_rest(struct sink_pg *, const int *, int, struct job *,
    struct handler_result *, struct pg_failure *);

/* The rows of jobs idx[0..n), every table's, under a savepoint; rows that
 * violate a table are isolated by halving (a job's rows in every table
 * go or fail together). False (with f) when the whole transaction must be
 * abandoned. */
static bool
copy_part(struct sink_pg *s, const int *idx, int n, struct job *jobs,
    struct handler_result *res, struct pg_failure *f)
{
	struct slow_fn sf = { { slow_copy, slow_sql }, s, idx, n, f, true };
	int missing;

	if (!sink_pg_sql(s, "SAVEPOINT ferry_part", f))
		return false;
	pg_target_statements(s->targets, s->ntargets, s->b.enc.deletes, false,
	    &sf.fn);
	missing = sf.ok ? after_part(s, jobs, res, f) : -1;
	if (missing == 0)
		return sink_pg_sql(s, "RELEASE SAVEPOINT ferry_part", f);
	if (missing > 0)        /* a dead job writes nothing */
		return sink_pg_sql(s, "ROLLBACK TO SAVEPOINT ferry_part", f) &&
		    copy_rest(s, idx, n, jobs, res, f);
	if (f->cls != PG_ERR_DATA)
		return false;
	if (!sink_pg_sql(s, "ROLLBACK TO SAVEPOINT ferry_part", f))
		return false;
	if (n == 1)
		return fail_job(s, &jobs[idx[0]], &res[idx[0]], f->msg, f);
	return copy_part(s, idx, n / 2, jobs, res, f) &&
	    copy_part(s, idx + n / 2, n - n / 2, jobs, res, f);
}

/* The jobs of idx[0..n) that did not fail, again. */
static bool
copy_rest(struct sink_pg *s, const int *idx, int n, struct job *jobs,
    struct handler_result *res, struct pg_failure *f)
{
	int *rest = xmalloc(sizeof(*rest) * (size_t)n), k = 0;
	bool ok;

	for (int i = 0; i < n; i++)
		if (res[idx[i]].outcome != HANDLER_FAIL)
			rest[k++] = idx[i];
	ok = k == 0 || copy_part(s, rest, k, jobs, res, f);
	free(rest);
	return ok;
}

/* Job i has rows (or deletes) for an upsert or update table. */
static bool
writes_by_key(const struct sink_pg *s, int i)
{
	if (!s->by_key)
		return false;
	if (!s->routed)
		return true;
	for (int t = 0; t < s->ntargets; t++)
		if (PG_TARGET_BY_KEY(&s->targets[t]) && s->b.enc.parts[t].len[i] > 0)
			return true;
	return false;
}

/* A row refused only because of a row after it (a foreign key to a later
 * row of the batch, checked per part when halving) goes in once the others
 * are in: COPY the refused rows again while that lets some in. Not a job
 * with rows for an upsert or update table: applied after the later rows
 * of its keys it would undo them (out of queue order), so such a job stays
 * refused; a job whose rows all go to insert tables (the order lines of an
 * upserted order) is tried again. */
/* The jobs again[0..n) go in again: their failures leave the record.
 * Another job of the same digest that still failed (a byte-identical
 * document a fence decided dead, or refused) keeps the entry, with its own
 * reason. One pass over the batch, not one per job again. False (f) when
 * the record cannot hold a failure. */
static bool
unrecord(struct sink_pg *s, struct job *jobs, struct handler_result *res,
    int njobs, const int *again, int n, struct pg_failure *f)
{
	json_t *gone = json_object();
	bool ok = true;

	for (int k = 0; k < n; k++) {
		const char *d = job_digest(&jobs[again[k]]);
		if (json_object_get(s->b.enc.failed, d) != NULL) {
			json_object_set_new(gone, d, json_true());
			json_object_del(s->b.enc.failed, d);
		}
	}
	for (int i = 0; i < njobs && ok && json_object_size(gone) > 0; i++)
		if ((res[i].outcome == HANDLER_FAIL || jobs[i].invalid != NULL) &&
		    json_object_get(gone, job_digest(&jobs[i])) != NULL &&
		    sink_pg_record_failure(s, &jobs[i], jobs[i].invalid != NULL ?
		    jobs[i].invalid : res[i].message) < 0) {
			snprintf(f->msg, sizeof(f->msg), "XX000: cannot record a "
			    "failed job in the batch row");
			f->cls = PG_ERR_OTHER;
			pg_failure_set_state(f, "XX000");
			ok = false;
		}
	json_decref(gone);
	return ok;
}

static bool
copy_again(struct sink_pg *s, struct job *jobs, struct handler_result *res,
    int njobs, struct pg_failure *f)
{
	int *again = xmalloc(sizeof(*again) * (size_t)s->b.enc.nidx), n, still;
	bool ok = true;

	for (still = -1; ok; ) {
		n = 0;
		for (int k = 0; k < s->b.enc.nidx; k++)
			if (res[s->b.enc.idx[k]].outcome == HANDLER_FAIL &&
			    !writes_by_key(s, s->b.enc.idx[k]))
				again[n++] = s->b.enc.idx[k];
		if (n == 0 || n == still)
			break;          /* all in, or no progress */
		for (int k = 0; k < n; k++)
			sink_pg_set_result(&res[again[k]], HANDLER_OK, "");
		ok = unrecord(s, jobs, res, njobs, again, n, f) &&
		    copy_part(s, again, n, jobs, res, f);
		still = n;
	}
	free(again);
	return ok;
}

/* Statement by statement: recovered jobs checked against their batches
 * first (sink_pg_fence.c, a transaction of its own), then the COPY under a
 * savepoint that is split until the refused rows are isolated. */
bool
sink_pg_write_slow(struct sink_pg *s, struct job *jobs,
    struct handler_result *res, int n, const char *key, struct pg_failure *f)
{
	bool ok = false;

	for (int i = 0; i < n; i++)
		s->b.enc.skip[i] = false;
	if (!sink_pg_fence(s, jobs, res, n, f))
		return false;
	/* deferred constraints are checked after each statement here, so
	 * that the halving finds the rows that break them */
	if (!sink_pg_sql(s, "BEGIN", f) ||
	    !sink_pg_sql(s, "SET CONSTRAINTS ALL IMMEDIATE", f)) {
		sink_pg_row_failed(key, f);
		goto out;
	}
	if (!pg_conn_exec(s->conn, s->batches.insert_sql, 1, key, NULL, f,
	    NULL)) {
		if (strcmp(f->sqlstate, "23505") != 0) {
			sink_pg_row_failed(key, f);
			goto out;
		}
		ok = sink_pg_sql(s, "ROLLBACK", f) &&
		    sink_pg_replay(s, key, jobs, res, n, f);
		goto out;
	}
	sink_pg_encode(s, jobs, res, n, s->b.enc.skip);
	/* what the fences decided is part of this batch's record too */
	for (int i = 0; i < n; i++)
		if (s->b.enc.skip[i] && res[i].outcome == HANDLER_FAIL &&
		    sink_pg_record_failure(s, &jobs[i], res[i].message) < 0)
			s->b.enc.record_failed = true;
	if (s->b.enc.record_failed) {
		snprintf(f->msg, sizeof(f->msg), "XX000: cannot record a failed "
		    "job in the batch row");
		f->cls = PG_ERR_OTHER;
		pg_failure_set_state(f, "XX000");
		goto out;
	}
	if (s->b.enc.nidx > 0 && (!copy_part(s, s->b.enc.idx, s->b.enc.nidx, jobs,
	    res, f) || !copy_again(s, jobs, res, n, f)))
		goto out;
	if (json_object_size(s->b.enc.failed) > 0) {
		char *text = NULL;
		if (json_object_set_new(s->b.enc.failed, SINK_PG_BY_DIGEST,
		    json_string("failed jobs are named by the SHA-1 of their "
		    "documents")) != 0 ||
		    (text = json_dumps(s->b.enc.failed, JSON_COMPACT)) == NULL) {
			/* a NULL record would read as "none failed", one
			 * without the marker by job id */
			snprintf(f->msg, sizeof(f->msg), "XX000: cannot encode the "
			    "record of failed jobs of batch %s (out of memory?)",
			    key);
			f->cls = PG_ERR_OTHER;
			pg_failure_set_state(f, "XX000");
			goto out;
		}
		bool set = pg_conn_exec(s->conn, s->batches.set_failed_sql, 2, key,
		    text, f, NULL);
		free(text);
		if (!set)
			goto out;
	}
	ok = sink_pg_sql(s, "COMMIT", f);
out:
	if (!ok && s->conn != NULL && PQstatus(s->conn) == CONNECTION_OK)
		PQclear(PQexec(s->conn, "ROLLBACK"));
	return ok;
}

