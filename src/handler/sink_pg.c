/* sink_pg.c - one transaction per batch: the fences of recovered jobs
 * first, in a transaction of their own (src/handler/sink_pg_fence.c), then
 * the batch's ferry_batches row (a key already there means this batch
 * committed before, or was fenced by a worker that took its jobs over),
 * COPY, COMMIT. Without recovered jobs the statements go as one query
 * string (two round trips a batch); when the COPY refuses a row (or a
 * deferred constraint fails at COMMIT, or an update found no row) the
 * batch is redone statement by statement (src/handler/sink_pg_slow.c).
 * Errors are sorted by SQLSTATE: data errors dead-letter their job, an
 * unreachable server (or a table renamed away, a grant revoked: 42P01,
 * 42501, 42703, 3F000) keeps the batch, a conflict with another
 * transaction (40001, 40P01) sends it again in place. A queue with
 * several tables (tables =) has a target and a row buffer per table: each
 * job's rows go to the table its table_member names, or one "data" array
 * per table, and the batch's statements cover every table in one
 * transaction (pg_target_statements). The tables, their columns and SQL:
 * src/pg/pg_target.c; the connection and SQLSTATE classes:
 * src/pg/pg_conn.c. */
#include "sink_pg.h"

#include <jansson.h>
#include <libpq-fe.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "copy.h"
#include "log.h"
#include "pg_conn.h"
#include "pg_target.h"
#include "sink_pg_int.h"
#include "util.h"

#define PRUNE_EVERY_MS 60000
#define SINK_ROWS_KEEP (4 << 20)   /* larger row buffers are not kept */
/* A batch that lost a conflict with another transaction (a deadlock
 * between two workers' upserts, a serialization failure) goes again in
 * place this many times, no attempt spent, before its jobs are retried. */
#define SINK_CONFLICT_AGAIN 5


/* A statement without parameters or rows. */
bool
sink_pg_sql(struct sink_pg *s, const char *sql, struct pg_failure *f)
{
	return pg_conn_exec(s->conn, sql, 0, NULL, NULL, f, NULL);
}

/* Connect, check the commit settings, describe the table. */
static enum pg_status
connect_db(struct sink_pg *s, char *err, size_t errsize)
{
	char sql[96];
	const char *risk = NULL;

	s->ahead_key[0] = '\0';       /* the columns are described again */
	if ((s->conn = pg_conn_open(s->cfg, s->q, err, errsize)) == NULL)
		return PG_UNAVAILABLE;
	/* a lock wait ends first, as 55P03: an outage (the batch waits,
	 * no attempt spent), where a statement timeout (57014) is a batch
	 * too slow of its own and spends one */
	snprintf(sql, sizeof(sql), "SET statement_timeout = %ld",
	    s->cfg->pg_statement_timeout_ms);
	enum pg_status st = sink_pg_sql(s, sql, NULL) ? PG_OK : PG_UNAVAILABLE;
	snprintf(sql, sizeof(sql), "SET lock_timeout = %ld",
	    s->cfg->pg_statement_timeout_ms / 2);
	if (st == PG_OK && !sink_pg_sql(s, sql, NULL))
		st = PG_UNAVAILABLE;
	if (st == PG_OK)
		st = pg_conn_commit_check(s->conn, s->cfg, s->q, &risk, err,
		    errsize);
	if (st == PG_OK) {
		pg_conn_note_commits(s->conn, s->cfg, s->q, risk,
		    &s->commits_safe);
		/* a table, column or ferry_batches missing now (renamed away
		 * by a migration, dropped) is an outage, also at this
		 * worker's first batch: ferryd found them all at its start
		 * (main.c), so the jobs wait until they are back */
		for (int t = 0; t < s->ntargets && st == PG_OK; t++)
			st = pg_target_describe(&s->targets[t], s->conn, err,
			    errsize);
		if (st == PG_OK)
			st = pg_target_batches_check(s->conn, &s->batches, err,
			    errsize);
		for (int t = 0; t < s->ntargets && st == PG_OK; t++)
			st = pg_target_prepare(&s->targets[t], s->conn, err,
			    errsize);
		if (st == PG_FATAL)
			st = PG_UNAVAILABLE;
	}
	if (st != PG_OK) {
		pg_conn_close(s->conn);
		s->conn = NULL;
	}
	return st;
}

struct sink_pg *
sink_pg_new(const struct ferry_config *cfg, const struct queue_config *q)
{
	struct sink_pg *s = xcalloc(1, sizeof(*s));
	s->cfg = cfg;
	s->q = q;
	s->commits_safe = -1;
	s->ntargets = pg_target_count(q);
	s->routed = *q->tables != '\0';
	s->targets = xcalloc((size_t)s->ntargets, sizeof(*s->targets));
	s->b.enc.parts = xcalloc((size_t)s->ntargets, sizeof(*s->b.enc.parts));
	s->ahead.parts = xcalloc((size_t)s->ntargets, sizeof(*s->ahead.parts));
	s->copies = xcalloc((size_t)s->ntargets, sizeof(*s->copies));
	for (int t = 0; t < s->ntargets; t++) {
		/* the config checked that every table has its entry */
		pg_target_init(&s->targets[t], pg_target_config(cfg, q, t), t);
		s->by_key |= PG_TARGET_BY_KEY(&s->targets[t]);
	}
	pg_target_batches_init(&s->batches, cfg);
	return s;
}

static void
encoded_free(struct sink_pg_encoded *e, int ntargets)
{
	for (int t = 0; t < ntargets; t++) {
		copy_buf_free(&e->parts[t].rows);
		free(e->parts[t].off);
		free(e->parts[t].len);
	}
	free(e->parts);
	json_decref(e->failed);
	free(e->idx);
	free(e->skip);
}

void
sink_pg_free(struct sink_pg *s)
{
	if (s == NULL)
		return;
	pg_conn_close(s->conn);
	for (int t = 0; t < s->ntargets; t++)
		pg_target_free(&s->targets[t]);
	free(s->targets);
	free(s->copies);
	encoded_free(&s->b.enc, s->ntargets);
	encoded_free(&s->ahead, s->ntargets);
	free(s);
}

/* Grow the per-job arrays to hold a batch of n. */
static void
reserve(struct sink_pg *s, int n)
{
	if (n <= s->b.enc.cap)
		return;
	for (int t = 0; t < s->ntargets; t++) {
		struct sink_pg_rows *p = &s->b.enc.parts[t];
		p->off = xrealloc(p->off, sizeof(*p->off) * (size_t)n);
		p->len = xrealloc(p->len, sizeof(*p->len) * (size_t)n);
	}
	s->b.enc.idx = xrealloc(s->b.enc.idx, sizeof(*s->b.enc.idx) * (size_t)n);
	s->b.enc.skip = xrealloc(s->b.enc.skip, sizeof(*s->b.enc.skip) * (size_t)n);
	s->b.enc.cap = n;
}

/* Until this transaction holds the batch's row, an earlier attempt of the
 * batch (its connection lost, its COMMIT still waiting on the server) may
 * commit: whatever kept the row out (a lock or statement timeout, BEGIN
 * failing) is waited out as an outage under the same key, never retried
 * under another (doc/design.md, I4). */
void
sink_pg_row_failed(const char *key, struct pg_failure *f)
{
	char why[sizeof(f->msg)], text[2 * sizeof(f->msg)];

	snprintf(why, sizeof(why), "%s", f->msg);
	if (strcmp(f->sqlstate, "55P03") == 0 ||
	    strcmp(f->sqlstate, "57014") == 0) {
		snprintf(text, sizeof(text), "%s: waiting (no attempt spent, "
		    "no job written twice): pg_blocking_pids() names the session "
		    "holding the row of batch %s (an earlier attempt of this "
		    "batch whose connection was lost, or a worker fencing it), or "
		    "its insert was cancelled", f->sqlstate, key);
	} else {
		snprintf(text, sizeof(text), "the row of batch %s did not go in "
		    "(the batch waits, no attempt spent): %s", key, why);
		/* an outage now, whatever the statement's SQLSTATE was */
		pg_failure_set_state(f, NULL);
	}
	snprintf(f->msg, sizeof(f->msg), "%.*s", (int)sizeof(f->msg) - 1, text);
	util_utf8_fix(f->msg);
	f->cls = PG_ERR_UNAVAILABLE;
}

/* The batch row already exists: this batch committed before (its reply
 * was lost), or another worker fenced it. Results from its record, for
 * every job: one refused now (its cache key gone since, a lowered
 * max_job_bytes) was written if the record does not name it (I4, I5). */
bool
sink_pg_replay(struct sink_pg *s, const char *key, struct job *jobs,
    struct handler_result *res, int n, struct pg_failure *f)
{
	char state[16];
	json_t *failed;

	if (!pg_target_batches_read(s->conn, &s->batches, key, state,
	    sizeof(state), &failed, f)) {
		/* the batch may have committed: never let its jobs retry
		 * under another key; keep the batch and ask again */
		f->cls = PG_ERR_UNAVAILABLE;
		return false;
	}
	/* Fenced: another worker took these jobs over, so this worker was
	 * handed back as dead. Nothing of this batch was written: its jobs
	 * must not be acked (they are another worker's now), so no result
	 * is given at all and the worker stops. */
	if (strcmp(state, "fenced") == 0) {
		log_warn("batch %s was fenced by another worker: its jobs were "
		    "handed back, this worker stops without settling", key);
		json_decref(failed);
		s->b.fenced = true;
		snprintf(f->msg, sizeof(f->msg), "batch %s was fenced by another "
		    "worker", key);
		f->cls = PG_ERR_OTHER;
		pg_failure_set_state(f, NULL);
		return false;
	}
	for (int i = 0; i < n; i++)
		sink_pg_record_result(failed, key, &jobs[i], &res[i]);
	json_decref(failed);
	return true;
}

/* How far the write of a batch went: the one-query path's answer, and
 * the whole write's. */
enum write_state {
	WRITE_COMMITTED,    /* every job has its result (committed, or
	                     * replayed from the batch row) */
	WRITE_FAILED,       /* not committed: f says why */
	WRITE_SLOW,         /* one query: a row was refused; the batch goes
	                     * statement by statement to isolate it */
	WRITE_SENT,         /* the last COPY's rows went: the COMMIT's reply
	                     * is still to come (fast_results again) */
};

/* The replies of the fast query string (pg_target_fast_sql), in order:
 * BEGIN, the batch row, the COPY, (upsert: the apply), COMMIT. With
 * leave_in_flight, stop once the last COPY's rows are sent (WRITE_SENT:
 * s->b.fast keeps where the replies are); else read them to the end. */
static enum write_state
fast_results(struct sink_pg *s, struct job *jobs, struct handler_result *res,
    int n, const char *key, struct pg_failure *f, bool leave_in_flight)
{
	const int insert_stage = 1, copy_stage = 2;
	struct sink_pg_fast *fs = &s->b.fast;
	PGresult *r;

	while ((r = PQgetResult(s->conn)) != NULL) {
		ExecStatusType st = PQresultStatus(r);
		if (st != PGRES_COPY_IN && st != PGRES_COMMAND_OK &&
		    fs->failed_stage < 0) {
			pg_conn_failure(s->conn, r, &fs->f);
			fs->failed_stage = fs->stage;
		}
		PQclear(r);
		if (st == PGRES_COPY_IN) {
			fs->rows_sent = sink_pg_put_rows(s, s->copies[fs->ncopy++],
			    s->b.enc.idx, s->b.enc.nidx);
			if (PQputCopyEnd(s->conn, fs->rows_sent ? NULL :
			    "ferry: sending the rows failed") != 1) {
				pg_conn_lost(s->conn, f);
				return WRITE_FAILED;
			}
			/* after the last COPY the server needs nothing more
			 * from us (with several tables, not before: the next
			 * COPY would wait for our rows, its transaction open) */
			if (leave_in_flight && fs->rows_sent &&
			    fs->ncopy == s->ncopies)
				return WRITE_SENT;
			continue;
		}
		fs->stage++;
	}
	if (!fs->rows_sent) {
		pg_conn_lost(s->conn, f);
		return WRITE_FAILED;
	}
	*f = fs->f;
	if (fs->failed_stage < 0)
		return WRITE_COMMITTED;
	if (PQstatus(s->conn) != CONNECTION_OK)
		return WRITE_FAILED;
	PQclear(PQexec(s->conn, "ROLLBACK"));
	if (fs->failed_stage == insert_stage && strcmp(f->sqlstate, "23505") == 0)
		return sink_pg_replay(s, key, jobs, res, n, f) ? WRITE_COMMITTED :
		    WRITE_FAILED;
	/* a refused row (in the COPY or the apply), or a deferred constraint
	 * that failed at COMMIT */
	if (fs->failed_stage >= copy_stage && f->cls == PG_ERR_DATA)
		return WRITE_SLOW;
	if (fs->failed_stage < copy_stage)
		sink_pg_row_failed(key, f);
	return WRITE_FAILED;
}

/* The common case, a batch without recovered jobs whose rows all encoded,
 * in two round trips (the statements, then the rows and the COMMIT's
 * reply), like a bare COPY in autocommit. */
static enum write_state
write_fast(struct sink_pg *s, struct job *jobs, struct handler_result *res,
    int n, const char *key, struct pg_failure *f, bool leave_in_flight)
{
	char *sql = pg_target_fast_sql(s->targets, s->ntargets, &s->batches,
	    s->conn, key, s->b.enc.deletes, s->copies, &s->ncopies);

	if (sql == NULL)
		return WRITE_SLOW;     /* text the escaping refused */
	bool sent = PQsendQuery(s->conn, sql) == 1;
	free(sql);
	if (!sent) {
		pg_conn_lost(s->conn, f);
		return WRITE_FAILED;
	}
	memset(&s->b.fast, 0, sizeof(s->b.fast));
	s->b.fast.failed_stage = -1;
	s->b.fast.rows_sent = true;
	return fast_results(s, jobs, res, n, key, f, leave_in_flight);
}

/* The end of a batch's write, once its result is known. */
static enum write_state
write_done(struct sink_pg *s, bool ok)
{
	/* do not hold a huge batch's memory */
	for (int t = 0; t < s->ntargets; t++)
		if (s->b.enc.parts[t].rows.cap > SINK_ROWS_KEEP)
			copy_buf_free(&s->b.enc.parts[t].rows);
	return ok ? WRITE_COMMITTED : WRITE_FAILED;
}

/* After the fast path: committed, failed, or a row refused (then the
 * batch statement by statement). */
static enum write_state
write_after_fast(struct sink_pg *s, enum write_state fr, struct job *jobs,
    struct handler_result *res, int n, const char *key, struct pg_failure *f)
{
	if (fr == WRITE_SENT)
		return fr;
	if (fr == WRITE_SLOW)
		return write_done(s, sink_pg_write_slow(s, jobs, res, n, key, f));
	return write_done(s, fr == WRITE_COMMITTED);
}

/* Recovered jobs are checked against their batches first (the slow
 * path), where the rows are encoded around what the fences found. */
static bool
has_fences(const struct job *jobs, int n)
{
	for (int i = 0; i < n; i++)
		if (jobs[i].invalid == NULL && (jobs[i].nstamps > 0 ||
		    jobs[i].bury))
			return true;
	return false;
}

static void
swap_ahead(struct sink_pg *s)
{
	struct sink_pg_encoded e = s->b.enc;

	s->b.enc = s->ahead;
	s->ahead = e;
}

/* The batch under key was encoded ahead (sink_pg_prepare): its rows into
 * s->b.enc. Whatever was ahead is dropped either way. */
static bool
take_ahead(struct sink_pg *s, const char *key)
{
	bool mine = s->ahead_key[0] != '\0' && strcmp(s->ahead_key, key) == 0;

	s->ahead_key[0] = '\0';
	if (mine)
		swap_ahead(s);
	return mine;
}

void
sink_pg_prepare(struct sink_pg *s, struct job *jobs,
    struct handler_result *results, int n, const char *batch_key)
{
	s->ahead_key[0] = '\0';
	/* the columns are known once connected; a fence needs the server */
	if (s->conn == NULL || strlen(batch_key) >= sizeof(s->ahead_key) ||
	    has_fences(jobs, n))
		return;
	swap_ahead(s);
	reserve(s, n);
	sink_pg_encode(s, jobs, results, n, NULL);
	swap_ahead(s);
	snprintf(s->ahead_key, sizeof(s->ahead_key), "%s", batch_key);
}

/* BEGIN .. COMMIT of one batch: WRITE_FAILED with f when it did not
 * commit. With leave_in_flight the one-query path returns WRITE_SENT
 * once the rows are sent (write_end reads the rest). */
static enum write_state
write_begin(struct sink_pg *s, struct job *jobs, struct handler_result *res,
    int n, const char *key, struct pg_failure *f, bool leave_in_flight)
{
	bool fences = has_fences(jobs, n);

	/* encoded ahead: never with fences (sink_pg_prepare) */
	if (!take_ahead(s, key)) {
		reserve(s, n);
		if (!fences)
			sink_pg_encode(s, jobs, res, n, NULL);
	}
	/* a job that failed to encode is recorded in the batch row: that
	 * text goes as a parameter, on the slow path */
	if (!fences && s->b.enc.nidx > 0 &&
	    json_object_size(s->b.enc.failed) == 0 && !s->b.enc.record_failed)
		return write_after_fast(s, write_fast(s, jobs, res, n, key, f,
		    leave_in_flight), jobs, res, n, key, f);
	return write_done(s, sink_pg_write_slow(s, jobs, res, n, key, f));
}

/* The rest of a batch write_begin left in flight. */
static enum write_state
write_end(struct sink_pg *s, struct job *jobs, struct handler_result *res,
    int n, const char *key, struct pg_failure *f)
{
	return write_after_fast(s, fast_results(s, jobs, res, n, key, f,
	    false), jobs, res, n, key, f);
}

/* What a write that did not commit means for the batch. */
static enum handler_status
write_failed(struct sink_pg *s, struct job *jobs,
    struct handler_result *results, int n, const struct pg_failure *f,
    char *err, size_t errsize)
{
	if (s->b.fenced) {
		for (int i = 0; i < n; i++)     /* nothing was decided */
			if (jobs[i].invalid == NULL)
				sink_pg_set_result(&results[i], HANDLER_PENDING, "");
		snprintf(err, errsize, "postgres: %s", f->msg);
		return HANDLER_HANDED_BACK;
	}
	if (f->cls == PG_ERR_UNAVAILABLE || PQstatus(s->conn) != CONNECTION_OK) {
		snprintf(err, errsize, "postgres: %s%s", f->msg,
		    strcmp(f->sqlstate, "55P03") == 0 ? " (a lock another session "
		    "holds, e.g. a migration's: the batch waits, no attempt "
		    "spent; pg_blocking_pids() names the session)" : "");
		pg_conn_close(s->conn);
		s->conn = NULL;
		return HANDLER_WAIT;
	}
	/* a conflict with another transaction: nothing of the jobs is at
	 * fault, and the batch (rolled back, its row with it) goes again
	 * under its key, in queue order, the connection kept */
	if (f->cls == PG_ERR_TRANSIENT && s->b.conflicts++ < SINK_CONFLICT_AGAIN) {
		snprintf(err, errsize, "postgres: %s (a conflict with another "
		    "transaction: the batch goes again, no attempt spent)", f->msg);
		return HANDLER_WAIT;
	}
	s->b.conflicts = 0;       /* the jobs are retried: a new start */
	/* transient past that, or unknown: retry the jobs, but those the
	 * fences (committed) found done or dead */
	for (int i = 0; i < n; i++)
		if (jobs[i].invalid == NULL && !(s->b.decided && s->b.enc.skip[i]))
			sink_pg_set_result(&results[i], HANDLER_RETRY, f->msg);
	return HANDLER_DONE;
}

/* What the write of a batch came to (*sent: left in flight). */
static enum handler_status
write_status(struct sink_pg *s, enum write_state w, struct job *jobs,
    struct handler_result *results, int n, const struct pg_failure *f,
    bool *sent, char *err, size_t errsize)
{
	s->b.in_flight = w == WRITE_SENT;
	*sent = s->b.in_flight;
	return w != WRITE_FAILED ? HANDLER_DONE : write_failed(s, jobs, results,
	    n, f, err, errsize);
}

/* The batch written, or with leave_in_flight left in flight (*sent). */
static enum handler_status
write_batch(struct sink_pg *s, struct job *jobs,
    struct handler_result *results, int n, const char *batch_key,
    bool leave_in_flight, bool *sent, char *err, size_t errsize)
{
	struct pg_failure f;
	enum pg_status st;

	*sent = false;
	if (s->conn == NULL && (st = connect_db(s, err, errsize)) != PG_OK)
		return st == PG_FATAL ? HANDLER_FATAL : HANDLER_WAIT;
	s->b.fenced = false;
	s->b.decided = false;
	if (strcmp(s->b.conflict_key, batch_key) != 0) {
		snprintf(s->b.conflict_key, sizeof(s->b.conflict_key), "%s", batch_key);
		s->b.conflicts = 0;
	}
	return write_status(s, write_begin(s, jobs, results, n, batch_key, &f,
	    leave_in_flight), jobs, results, n, &f, sent, err, errsize);
}

enum handler_status
sink_pg_send(struct sink_pg *s, struct job *jobs,
    struct handler_result *results, int n, const char *batch_key,
    bool *sent, char *err, size_t errsize)
{
	return write_batch(s, jobs, results, n, batch_key, true, sent, err,
	    errsize);
}

enum handler_status
sink_pg_finish(struct sink_pg *s, struct job *jobs,
    struct handler_result *results, int n, const char *batch_key,
    char *err, size_t errsize)
{
	struct pg_failure f;
	bool sent;

	if (!s->b.in_flight) {
		snprintf(err, errsize, "postgres: no batch in flight");
		return HANDLER_FATAL;
	}
	return write_status(s, write_end(s, jobs, results, n, batch_key, &f),
	    jobs, results, n, &f, &sent, err, errsize);
}

enum handler_status
sink_pg_run(struct sink_pg *s, struct job *jobs,
    struct handler_result *results, int n, const char *batch_key,
    char *err, size_t errsize)
{
	bool sent;

	return write_batch(s, jobs, results, n, batch_key, false, &sent, err,
	    errsize);
}

void
sink_pg_prune(struct sink_pg *s)
{
	int64_t now = util_monotonic_ms();
	char sql[200];

	if (s->conn == NULL || now - s->last_prune_ms < PRUNE_EVERY_MS)
		return;
	s->last_prune_ms = now;
	snprintf(sql, sizeof(sql), "DELETE FROM %s WHERE created_at < "
	    "now() - interval '%ld milliseconds'", s->batches.name,
	    s->cfg->done_retention_ms);
	sink_pg_sql(s, sql, NULL);
}
