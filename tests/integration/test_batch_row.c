/* test_batch_row.c - what a batch's transaction may conclude when it
 * fails, driven directly against a real PostgreSQL: a batch whose row is
 * still held by an earlier attempt of its own waits (its jobs are not
 * retried under another key, which would write them twice); a lock
 * another session holds on the table waits too (no job is at fault), and
 * so does a batch row whose insert was cancelled by statement_timeout;
 * and what the fences of recovered jobs found stands when the batch then
 * fails. */
#include <criterion/criterion.h>
#include <libpq-fe.h>
#include <string.h>

#include "harness.h"
#include "sink_case.h"
#include "sink_pg.h"

TestSuite(batch_row, .fini = sc_teardown, .timeout = 120);

#define exec_ok(c, sql) h_pq_exec((c), (sql))

/* The first attempt of batch `key`, sent before the connection was lost
 * and still open on the server (its COMMIT waiting for a lock or a
 * synchronous standby): its batch row and rows n = first.. in. */
static PGconn *
open_attempt(const char *key, int first, int n)
{
	char sql[160];
	PGconn *c = PQconnectdb(sc_d.pg.conninfo);

	cr_assert_eq(PQstatus(c), CONNECTION_OK, "%s", PQerrorMessage(c));
	exec_ok(c, "BEGIN");
	snprintf(sql, sizeof(sql), "INSERT INTO ferry_batches (key, state) "
	    "VALUES ('%s', 'committed')", key);
	exec_ok(c, sql);
	snprintf(sql, sizeof(sql), "INSERT INTO events SELECT "
	    "generate_series(%d, %d)", first, first + n - 1);
	exec_ok(c, sql);
	return c;
}

/* A session that keeps batch `key` (jobs n = first..first+2) from going
 * in until it commits. */
typedef PGconn *holder_fn(const char *key, int first);

static PGconn *
hold_row(const char *key, int first)
{
	return open_attempt(key, first, 3);
}

static PGconn *
hold_table(const char *key, int first)
{
	PGconn *c = PQconnectdb(sc_d.pg.conninfo);

	(void)key;
	(void)first;
	cr_assert_eq(PQstatus(c), CONNECTION_OK, "%s", PQerrorMessage(c));
	exec_ok(c, "BEGIN");
	exec_ok(c, "LOCK TABLE events IN ACCESS EXCLUSIVE MODE");
	return c;
}

/* Batches of fresh jobs (the one-query path) and of recovered ones
 * (statement by statement) while hold keeps them out: each attempt is an
 * outage naming `want` (the sink's lock_timeout, half of
 * pg_statement_timeout, ends its wait), no job retried; once the holder
 * commits the batch goes in (or is replayed), each row once. */
static void
held_batches_wait(holder_fn *hold, const char *prefix, const char *want)
{
	const struct queue_config *q = sc_setup();
	struct job fresh[3], stamped[3];
	struct handler_result res[3];
	char els[3][128], sels[3][128], err[256], key[2][16];

	sc_cfg.pg_statement_timeout_ms = 400;
	struct sink_pg *s = sink_pg_new(&sc_cfg, q);
	sc_make_jobs(fresh, els, 0, 3, NULL);
	sc_make_jobs(stamped, sels, 10, 3, "\"x:1\"");
	struct job *jobs[2] = { fresh, stamped };
	for (int c = 0; c < 2; c++) {
		snprintf(key[c], sizeof(key[c]), "%s:%d", prefix, c + 1);
		PGconn *holder = hold(key[c], c * 10);
		for (int round = 0; round < 2; round++) {
			memset(res, 0, sizeof(res));
			cr_assert_eq(sink_pg_run(s, jobs[c], res, 3, key[c], err,
			    sizeof(err)), HANDLER_WAIT, "%s: %s (job 0: %d %s)",
			    key[c], err, res[0].outcome, res[0].message);
			cr_assert_not_null(strstr(err, want), "%s", err);
			for (int i = 0; i < 3; i++)
				cr_assert_neq(res[i].outcome, HANDLER_RETRY,
				    "job %d: %s", i, res[i].message);
		}
		exec_ok(holder, "COMMIT");
		PQfinish(holder);
		sc_run_ok(s, jobs[c], res, 3, key[c]);
	}
	cr_assert_eq(h_pg_int(&sc_d, "SELECT count(*) FROM events"), 6);
	cr_assert_eq(h_pg_int(&sc_d, "SELECT count(DISTINCT n) FROM events"),
	    6);
	h_jobs_free(fresh, 3);
	h_jobs_free(stamped, 3);
	sink_pg_free(s);
	h_stop(&sc_d);
}

/* The attempt after the reconnection cannot take the batch's row: it
 * used to answer "retry" to every job, and their next batch wrote them
 * again once the first attempt committed. */
Test(batch_row, row_held_by_an_earlier_attempt_is_an_outage)
{
	held_batches_wait(hold_row, "a", "earlier attempt of this batch");
}

/* Another session holds a lock on the table (a migration's ALTER TABLE,
 * here LOCK TABLE): 55P03 is an outage, waited out with no attempt spent,
 * not a statement timeout (57014) that retries every job, an attempt each,
 * until the innocent jobs are dead. */
Test(batch_row, lock_held_by_another_session_is_an_outage)
{
	held_batches_wait(hold_table, "l", "55P03: canceling statement due to "
	    "lock timeout (a lock another session holds");
}

/* A recovered job J whose batch a:1 committed it, beside a job K whose
 * row fails with a serialization failure (40001, a conflict): the batch
 * rolls back and goes again in place (SINK_CONFLICT_AGAIN times), then K is
 * retried, but J stays done, and J's other stamp b:1 (never committed)
 * stays fenced. The fences went in the batch's transaction: J was retried
 * too, an attempt spent each time, until dead "failed N attempts"
 * although written. */
Test(batch_row, what_the_fences_found_stands_when_the_batch_fails)
{
	const struct queue_config *q = sc_setup();
	struct job j[1], k[1], batch[2];
	struct handler_result res[2];
	char jels[1][128], kels[1][128], err[256];

	struct sink_pg *s = sink_pg_new(&sc_cfg, q);
	sc_make_jobs(j, jels, 1, 1, NULL);
	sc_run_ok(s, j, res, 1, "a:1");
	h_jobs_free(j, 1);
	h_pg_exec(&sc_d, "CREATE FUNCTION boom() RETURNS trigger LANGUAGE "
	    "plpgsql AS $$ BEGIN IF NEW.n = 99 THEN RAISE EXCEPTION 'try again' "
	    "USING ERRCODE = '40001'; END IF; RETURN NEW; END $$");
	h_pg_exec(&sc_d, "CREATE TRIGGER boom BEFORE INSERT ON events FOR EACH "
	    "ROW EXECUTE FUNCTION boom()");
	sc_make_jobs(j, jels, 1, 1, "\"b:1\",\"a:1\"");
	sc_make_jobs(k, kels, 99, 1, NULL);
	batch[0] = j[0];
	batch[1] = k[0];
	/* a conflict: the batch goes again in place, no attempt spent, five
	 * times, then its jobs are retried */
	for (int run = 0; run < 5; run++) {
		memset(res, 0, sizeof(res));
		cr_assert_eq(sink_pg_run(s, batch, res, 2, "c:1", err,
		    sizeof(err)), HANDLER_WAIT, "run %d: %s", run, err);
		cr_assert_not_null(strstr(err, "40001"), "%s", err);
		cr_assert_not_null(strstr(err, "no attempt spent"), "%s", err);
	}
	memset(res, 0, sizeof(res));
	cr_assert_eq(sink_pg_run(s, batch, res, 2, "c:1", err, sizeof(err)),
	    HANDLER_DONE, "%s", err);
	cr_assert_eq(res[0].outcome, HANDLER_OK, "J: %d %s", res[0].outcome,
	    res[0].message);
	cr_assert_eq(res[1].outcome, HANDLER_RETRY, "K: %d %s", res[1].outcome,
	    res[1].message);
	cr_assert_not_null(strstr(res[1].message, "40001"), "%s",
	    res[1].message);
	char *state = h_pg_text(&sc_d, "SELECT string_agg(key || '=' || state, "
	    "',' ORDER BY key) FROM ferry_batches");
	cr_assert_str_eq(state, "a:1=committed,b:1=fenced");
	free(state);
	cr_assert_eq(h_pg_int(&sc_d, "SELECT count(*) FROM events"), 1);
	h_jobs_free(j, 1);
	h_jobs_free(k, 1);
	sink_pg_free(s);
	h_stop(&sc_d);
}

/* The batch row's insert cancelled by statement_timeout (57014, a class
 * that alone would retry the jobs; a trigger on ferry_batches sleeps
 * here): the batch waits as an outage under its key, no job retried, and
 * goes in once the row can (doc/design.md, R4). */
Test(batch_row, statement_timeout_on_the_row_is_an_outage)
{
	const struct queue_config *q = sc_setup();
	struct job jobs[3];
	struct handler_result res[3];
	char els[3][128], err[256];

	sc_cfg.pg_statement_timeout_ms = 400;
	sc_make_jobs(jobs, els, 0, 3, NULL);
	memset(res, 0, sizeof(res));
	struct sink_pg *s = sink_pg_new(&sc_cfg, q);
	h_pg_exec(&sc_d, "CREATE FUNCTION slow_key() RETURNS trigger LANGUAGE "
	    "plpgsql AS $$ BEGIN PERFORM pg_sleep(2); RETURN NEW; END $$");
	h_pg_exec(&sc_d, "CREATE TRIGGER slow_key BEFORE INSERT ON ferry_batches "
	    "FOR EACH ROW EXECUTE FUNCTION slow_key()");
	cr_assert_eq(sink_pg_run(s, jobs, res, 3, "t:1", err, sizeof(err)),
	    HANDLER_WAIT, "%s (job 0: %d %s)", err, res[0].outcome,
	    res[0].message);
	cr_assert_not_null(strstr(err, "57014"), "%s", err);
	for (int i = 0; i < 3; i++)
		cr_assert_neq(res[i].outcome, HANDLER_RETRY, "job %d: %s", i,
		    res[i].message);
	h_pg_exec(&sc_d, "DROP TRIGGER slow_key ON ferry_batches");
	sc_run_ok(s, jobs, res, 3, "t:1");
	cr_assert_eq(h_pg_int(&sc_d, "SELECT count(*) FROM events"), 3);
	h_jobs_free(jobs, 3);
	sink_pg_free(s);
	h_stop(&sc_d);
}
