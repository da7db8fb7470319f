/* test_sink_pg.c - the fencing rules of the PostgreSQL sink, driven
 * directly against a real PostgreSQL: a batch committed twice is written
 * once, and a zombie whose batch was fenced cannot commit. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "pg_target.h"
#include "sink_case.h"
#include "sink_pg.h"

TestSuite(sink_pg, .fini = sc_teardown, .timeout = 120);

/* pipeline: the batch sent (left in flight), then finished: it commits,
 * every job done. */
static void
send_then_finish_ok(struct sink_pg *s, struct job *jobs,
    struct handler_result *res, int n, const char *key)
{
	char err[256];
	bool sent;

	cr_assert_eq(sink_pg_send(s, jobs, res, n, key, &sent, err,
	    sizeof(err)), HANDLER_DONE, "%s", err);
	cr_assert(sent, "the batch was not left in flight");
	cr_assert_eq(sink_pg_finish(s, jobs, res, n, key, err, sizeof(err)),
	    HANDLER_DONE, "%s", err);
	sc_assert_all(res, n, HANDLER_OK);
}

/* The COMMIT's reply was lost: the same batch key again writes nothing. */
Test(sink_pg, same_batch_twice_is_written_once)
{
	const struct queue_config *q = sc_setup();
	struct job jobs[10];
	struct handler_result res[10];
	char els[10][128], err[256];

	struct sink_pg *s = sink_pg_new(&sc_cfg, q);
	sc_make_jobs(jobs, els, 0, 10, NULL);
	memset(res, 0, sizeof(res));
	cr_assert_eq(sink_pg_run(s, jobs, res, 10, "w1:1", err, sizeof(err)),
	    HANDLER_DONE, "%s", err);
	sc_assert_all(res, 10, HANDLER_OK);
	memset(res, 0, sizeof(res));
	cr_assert_eq(sink_pg_run(s, jobs, res, 10, "w1:1", err, sizeof(err)),
	    HANDLER_DONE, "%s", err);
	sc_assert_all(res, 10, HANDLER_OK);
	cr_assert_eq(h_pg_int(&sc_d, "SELECT count(*) FROM events"), 10);
	h_jobs_free(jobs, 10);
	sink_pg_free(s);
	h_stop(&sc_d);
}

/* Worker A took batch "a:1" and froze before writing it. Its list was
 * reclaimed; worker B got the jobs stamped with "a:1", fenced that key and
 * wrote them. A wakes up and tries to commit "a:1": refused, nothing is
 * written twice. */
Test(sink_pg, zombie_commit_is_rejected)
{
	const struct queue_config *q = sc_setup();
	struct job jobs[5], stamped[5];
	struct handler_result res[5];
	char els[5][128], sels[5][128], err[256];

	struct sink_pg *a = sink_pg_new(&sc_cfg, q), *b = sink_pg_new(&sc_cfg, q);
	sc_make_jobs(jobs, els, 0, 5, NULL);
	sc_make_jobs(stamped, sels, 0, 5, "\"a:1\"");
	for (int i = 0; i < 5; i++) {       /* recovered jobs run alone */
		memset(res, 0, sizeof(res));
		char key[16];
		snprintf(key, sizeof(key), "b:%d", i + 1);
		cr_assert_eq(sink_pg_run(b, &stamped[i], res, 1, key, err,
		    sizeof(err)), HANDLER_DONE, "%s", err);
		sc_assert_all(res, 1, HANDLER_OK);
	}
	cr_assert_eq(h_pg_int(&sc_d, "SELECT count(*) FROM events"), 5);
	char *state = h_pg_text(&sc_d, "SELECT state FROM ferry_batches WHERE "
	    "key = 'a:1'");
	cr_assert_str_eq(state, "fenced");
	free(state);

	memset(res, 0, sizeof(res));
	cr_assert_eq(sink_pg_run(a, jobs, res, 5, "a:1", err, sizeof(err)),
	    HANDLER_HANDED_BACK, "%s", err);
	sc_assert_all(res, 5, HANDLER_PENDING);
	cr_assert_eq(h_pg_int(&sc_d, "SELECT count(*) FROM events"), 5,
	    "the zombie's commit went through");
	cr_assert_eq(h_pg_int(&sc_d, "SELECT count(DISTINCT n) FROM events"), 5);
	h_jobs_free(jobs, 5);
	h_jobs_free(stamped, 5);
	sink_pg_free(a);
	sink_pg_free(b);
	h_stop(&sc_d);
}

/* A recovered job whose old batch did commit is acknowledged unwritten. */
Test(sink_pg, fence_finds_committed_batch)
{
	const struct queue_config *q = sc_setup();
	struct job jobs[3], stamped[3];
	struct handler_result res[3];
	char els[3][128], sels[3][128];

	struct sink_pg *s = sink_pg_new(&sc_cfg, q);
	sc_make_jobs(jobs, els, 0, 3, NULL);
	sc_make_jobs(stamped, sels, 0, 3, "\"w:7\"");
	sc_run_ok(s, jobs, res, 3, "w:7");
	for (int i = 0; i < 3; i++)
		sc_run_ok(s, &stamped[i], res, 1, "v:1");
	cr_assert_eq(h_pg_int(&sc_d, "SELECT count(*) FROM events"), 3);
	h_jobs_free(jobs, 3);
	h_jobs_free(stamped, 3);
	sink_pg_free(s);
	h_stop(&sc_d);
}

/* A job whose rows cannot be encoded fails before any SQL, a row the table
 * refuses fails by SQLSTATE, the rest commit; both failures are recorded
 * in the batch row, so a repeat of the batch (its ack lost) gives the same
 * answers without writing anything. The same again for a batch where only
 * the table refuses a row (the one-query-string attempt is abandoned and
 * redone statement by statement). */
Test(sink_pg, failures_are_recorded_and_replayed)
{
	const struct queue_config *q = sc_setup();
	struct job jobs[6];
	struct handler_result res[6];
	char els[6][128], err[256];

	h_pg_exec(&sc_d, "ALTER TABLE events ADD CHECK (n <> 3)");
	struct sink_pg *s = sink_pg_new(&sc_cfg, q);
	sc_make_jobs(jobs, els, 0, 6, NULL);
	job_free(&jobs[1]);
	snprintf(els[1], 128, "{\"id\":\"bad\",\"data\":5}");
	job_parse(&jobs[1], els[1], strlen(els[1]), 1 << 20);
	for (int round = 0; round < 2; round++) {
		memset(res, 0, sizeof(res));
		cr_assert_eq(sink_pg_run(s, jobs, res, 6, "w1:9", err,
		    sizeof(err)), HANDLER_DONE, "%s", err);
		for (int i = 0; i < 6; i++)
			cr_assert_eq(res[i].outcome, i == 1 || i == 3 ?
			    HANDLER_FAIL : HANDLER_OK, "round %d job %d: %s", round,
			    i, res[i].message);
		cr_assert_str_eq(res[1].message,
		    "data is not an object or an array of objects");
		cr_assert_eq(strncmp(res[3].message, "23514: ", 7), 0, "%s",
		    res[3].message);
		cr_assert_eq(h_pg_int(&sc_d, "SELECT count(*) FROM events"), 4);
	}
	char *failed = h_pg_text(&sc_d, "SELECT failed FROM ferry_batches WHERE "
	    "key = 'w1:9'");
	/* named by the SHA-1 of its document, as a fence asks */
	char name[48];
	snprintf(name, sizeof(name), "\"%s\":", job_digest(&jobs[1]));
	cr_assert_not_null(strstr(failed, name), "%s", failed);
	free(failed);

	/* only a refused row: the fast attempt rolls back, nothing half done */
	memset(res, 0, sizeof(res));
	h_jobs_free(jobs, 6);
	sc_make_jobs(jobs, els, 0, 6, NULL);
	cr_assert_eq(sink_pg_run(s, jobs, res, 6, "w1:10", err, sizeof(err)),
	    HANDLER_DONE, "%s", err);
	for (int i = 0; i < 6; i++)
		cr_assert_eq(res[i].outcome, i == 3 ? HANDLER_FAIL : HANDLER_OK,
		    "job %d: %s", i, res[i].message);
	cr_assert_eq(h_pg_int(&sc_d, "SELECT count(*) FROM events"), 9);
	cr_assert_eq(h_pg_int(&sc_d, "SELECT count(*) FROM ferry_batches WHERE "
	    "key = 'w1:10' AND failed IS NOT NULL"), 1);
	h_jobs_free(jobs, 6);
	sink_pg_free(s);
	h_stop(&sc_d);
}

/* Six jobs under `key`: all but job 3 written, job 3 refused by a foreign
 * key (23503). */
static void
run_six_job_3_refused(struct sink_pg *s, struct job *jobs,
    struct handler_result *res, const char *key)
{
	char err[256];

	memset(res, 0, 6 * sizeof(*res));
	cr_assert_eq(sink_pg_run(s, jobs, res, 6, key, err, sizeof(err)),
	    HANDLER_DONE, "%s", err);
	for (int i = 0; i < 6; i++)
		cr_assert_eq(res[i].outcome, i == 3 ? HANDLER_FAIL : HANDLER_OK,
		    "job %d: %s", i, res[i].message);
	cr_assert_eq(strncmp(res[3].message, "23503: ", 7), 0, "%s",
	    res[3].message);
	cr_assert_eq(h_pg_int(&sc_d, "SELECT count(*) FROM events"), 5);
}

/* A deferred foreign key fails only at COMMIT: the batch is redone with
 * constraints checked at once, and the job whose parent is missing is
 * isolated like any refused row. */
Test(sink_pg, deferred_constraint_is_isolated)
{
	const struct queue_config *q = sc_setup();
	struct job jobs[6];
	struct handler_result res[6];
	char els[6][128];

	h_pg_exec(&sc_d, "CREATE TABLE parents (id bigint PRIMARY KEY)");
	h_pg_exec(&sc_d, "INSERT INTO parents VALUES (0), (1), (2), (4), (5)");
	h_pg_exec(&sc_d, "ALTER TABLE events ADD FOREIGN KEY (n) REFERENCES "
	    "parents (id) DEFERRABLE INITIALLY DEFERRED");
	struct sink_pg *s = sink_pg_new(&sc_cfg, q);
	sc_make_jobs(jobs, els, 0, 6, NULL);
	run_six_job_3_refused(s, jobs, res, "w1:20");
	h_jobs_free(jobs, 6);
	sink_pg_free(s);
	h_stop(&sc_d);
}

/* A deferred foreign key to a row later in the same batch: when the batch
 * is split, the part with the child is checked before the parent is in;
 * the child is tried again after the others and goes in. Only the orphan
 * is refused. */
Test(sink_pg, row_whose_parent_comes_later_is_not_refused)
{
	const struct queue_config *q = sc_setup();
	struct job jobs[6];
	struct handler_result res[6];
	char els[6][128];
	const char *docs[6] = {
		"{\"n\":0,\"parent\":5}", "{\"n\":1}", "{\"n\":2,\"parent\":1}",
		"{\"n\":3,\"parent\":99}", "{\"n\":4}", "{\"n\":5}",
	};

	h_pg_exec(&sc_d, "ALTER TABLE events ADD PRIMARY KEY (n), ADD COLUMN "
	    "parent bigint REFERENCES events (n) DEFERRABLE INITIALLY DEFERRED");
	struct sink_pg *s = sink_pg_new(&sc_cfg, q);
	for (int i = 0; i < 6; i++) {
		snprintf(els[i], 128, "%s", docs[i]);
		job_parse(&jobs[i], els[i], strlen(els[i]), 1 << 20);
	}
	run_six_job_3_refused(s, jobs, res, "w1:30");
	char *failed = h_pg_text(&sc_d, "SELECT failed FROM ferry_batches WHERE "
	    "key = 'w1:30'");
	cr_assert_not_null(failed);
	json_t *f = json_loads(failed, 0, NULL);
	/* the job, and the member that says jobs are named by digest */
	cr_assert_eq(json_object_size(f), 2, "%s", failed);
	cr_assert_not_null(json_object_get(f, ""), "%s", failed);
	json_decref(f);
	free(failed);
	h_jobs_free(jobs, 6);
	sink_pg_free(s);
	h_stop(&sc_d);
}

/* Batch K1 committed the jobs and its worker died
 * before the ack; W2 took them under K2 and died while its fence of K1
 * waited; W3 gets them stamped with both. It must fence both and find K1
 * committed: nothing is written twice, whatever the order of the stamps. */
Test(sink_pg, job_recovered_twice_is_written_once)
{
	const struct queue_config *q = sc_setup();
	struct job jobs[4], twice[4];
	struct handler_result res[4];
	char els[4][128], tels[4][128], err[256];

	struct sink_pg *s = sink_pg_new(&sc_cfg, q);
	sc_make_jobs(jobs, els, 0, 4, NULL);
	sc_run_ok(s, jobs, res, 4, "K1");
	sc_make_jobs(twice, tels, 0, 2, "\"K1\",\"K2\"");
	sc_make_jobs(twice + 2, tels + 2, 2, 2, "\"K2\",\"K1\"");
	memset(res, 0, sizeof(res));
	cr_assert_eq(sink_pg_run(s, twice, res, 4, "K3", err, sizeof(err)),
	    HANDLER_DONE, "%s", err);
	sc_assert_all(res, 4, HANDLER_OK);
	cr_assert_eq(h_pg_int(&sc_d, "SELECT count(*) FROM events"), 4,
	    "a job recovered twice was written twice");
	cr_assert_eq(h_pg_int(&sc_d, "SELECT count(*) FROM ferry_batches WHERE "
	    "key = 'K2' AND state = 'fenced'"), 1, "K2 can never commit now");
	h_jobs_free(jobs, 4);
	h_jobs_free(twice, 4);
	sink_pg_free(s);
	h_stop(&sc_d);
}

/* A fence row under this worker's own batch key
 * (forged, or made by a worker that took our jobs over) must never make
 * the batch's jobs count as done: nothing is decided, the worker stops. */
Test(sink_pg, own_key_found_fenced_decides_nothing)
{
	const struct queue_config *q = sc_setup();
	struct job jobs[3];
	struct handler_result res[3];
	char els[3][128], err[256];

	h_pg_exec(&sc_d, "INSERT INTO ferry_batches (key, state) VALUES "
	    "('w:5', 'fenced')");
	struct sink_pg *s = sink_pg_new(&sc_cfg, q);
	sc_make_jobs(jobs, els, 0, 3, NULL);
	memset(res, 0, sizeof(res));
	cr_assert_eq(sink_pg_run(s, jobs, res, 3, "w:5", err, sizeof(err)),
	    HANDLER_HANDED_BACK, "%s", err);
	sc_assert_all(res, 3, HANDLER_PENDING);
	cr_assert_eq(h_pg_int(&sc_d, "SELECT count(*) FROM events"), 0);
	h_jobs_free(jobs, 3);
	sink_pg_free(s);
	h_stop(&sc_d);
}

/* A job recovered past max_recoveries is buried only if none of its
 * batches committed it; either way nothing is written, and the batch row
 * records the burial so that a replay buries it again. */
Test(sink_pg, bury_checks_the_stamps_first)
{
	const struct queue_config *q = sc_setup();
	struct job jobs[2], buried[2];
	struct handler_result res[2];
	char els[2][128], bels[2][128], err[256];

	struct sink_pg *s = sink_pg_new(&sc_cfg, q);
	sc_make_jobs(jobs, els, 0, 1, NULL);
	memset(res, 0, sizeof(res));
	cr_assert_eq(sink_pg_run(s, jobs, res, 1, "K1", err, sizeof(err)),
	    HANDLER_DONE, "%s", err);
	sc_make_jobs(buried, bels, 0, 1, "\"K1\"");      /* written under K1 */
	sc_make_jobs(buried + 1, bels + 1, 1, 1, "\"K9\"");  /* K9 never did */
	buried[0].bury = buried[1].bury = true;
	for (int round = 0; round < 2; round++) {
		memset(res, 0, sizeof(res));
		cr_assert_eq(sink_pg_run(s, buried, res, 2, "K5", err,
		    sizeof(err)), HANDLER_DONE, "%s", err);
		cr_assert_eq(res[0].outcome, HANDLER_OK, "round %d", round);
		cr_assert_eq(res[1].outcome, HANDLER_FAIL, "round %d", round);
		cr_assert_str_eq(res[1].message, "worker died while processing");
	}
	cr_assert_eq(h_pg_int(&sc_d, "SELECT count(*) FROM events"), 1);
	cr_assert_eq(h_pg_int(&sc_d, "SELECT count(*) FROM ferry_batches WHERE "
	    "key = 'K9' AND state = 'fenced'"), 1);
	h_jobs_free(jobs, 1);
	h_jobs_free(buried, 2);
	sink_pg_free(s);
	h_stop(&sc_d);
}

/* A server message cut inside a multibyte character must still be
 * recorded: were json_string() to fail, the refused job would be missing
 * from the batch row's record, and a replay (ack lost) would ack it
 * unwritten. */
Test(sink_pg, long_multibyte_message_is_recorded)
{
	const struct queue_config *q = sc_setup();
	struct job jobs[4];
	struct handler_result res[4];
	char els[4][128], err[256];

	h_pg_exec(&sc_d, "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql "
	    "AS $$ BEGIN IF NEW.n = 2 THEN RAISE EXCEPTION USING ERRCODE = "
	    "'23514', MESSAGE = 'x' || repeat(U&'\\00e9', 300); END IF; "
	    "RETURN NEW; END $$");
	h_pg_exec(&sc_d, "CREATE TRIGGER refuse BEFORE INSERT ON events FOR EACH "
	    "ROW EXECUTE FUNCTION refuse()");
	struct sink_pg *s = sink_pg_new(&sc_cfg, q);
	sc_make_jobs(jobs, els, 0, 4, NULL);
	for (int round = 0; round < 2; round++) {
		memset(res, 0, sizeof(res));
		cr_assert_eq(sink_pg_run(s, jobs, res, 4, "w:8", err, sizeof(err)),
		    HANDLER_DONE, "%s", err);
		for (int i = 0; i < 4; i++)
			cr_assert_eq(res[i].outcome, i == 2 ? HANDLER_FAIL :
			    HANDLER_OK, "round %d job %d: %s", round, i,
			    res[i].message);
		json_t *m = json_string(res[2].message);
		cr_assert_not_null(m, "not valid UTF-8: %s", res[2].message);
		json_decref(m);
	}
	cr_assert_eq(h_pg_int(&sc_d, "SELECT count(*) FROM events"), 3);
	h_jobs_free(jobs, 4);
	sink_pg_free(s);
	h_stop(&sc_d);
}

/* A batch row's record of failed jobs that does not parse neither acks
 * the jobs it names nor lets them retry: on a replay of that batch, and on
 * a fence of it by a recovered job, the batch is kept (an outage) and
 * nothing is written. A record that parses decides: on a replay the job it
 * names is dead with its message, the others done, nothing written again;
 * a recovered job it names was not written there, and is written now. An
 * older ferryd's record (jobs named by id) is read by id. */
Test(sink_pg, failed_record_of_a_batch_row)
{
	const struct queue_config *q = sc_setup();
	struct job jobs[3], stamped[1];
	struct handler_result res[3];
	char els[3][128], sels[1][128], err[256], sql[256];

	struct sink_pg *s = sink_pg_new(&sc_cfg, q);
	sc_make_jobs(jobs, els, 0, 3, NULL);
	sc_make_jobs(stamped, sels, 3, 1, "\"w1:1\"");
	sc_run_ok(s, jobs, res, 3, "w1:1");
	h_pg_exec(&sc_d, "UPDATE ferry_batches SET failed = 'not json' "
	    "WHERE key = 'w1:1'");
	memset(res, 0, sizeof(res));
	cr_assert_eq(sink_pg_run(s, jobs, res, 3, "w1:1", err, sizeof(err)),
	    HANDLER_WAIT, "%s", err);
	cr_assert_not_null(strstr(err, "postgres: XX000: ferry_batches row "
	    "w1:1: its record of failed jobs (column failed) does not parse "),
	    "%s", err);
	cr_assert_eq(sink_pg_run(s, stamped, res, 1, "w1:2", err, sizeof(err)),
	    HANDLER_WAIT, "%s", err);
	cr_assert_not_null(strstr(err, "does not parse"), "%s", err);
	cr_assert_eq(h_pg_int(&sc_d, "SELECT count(*) FROM ferry_batches"), 1);

	snprintf(sql, sizeof(sql), "UPDATE ferry_batches SET failed = "
	    "'{\"\": \"by digest\", \"%s\": \"boom\", \"%s\": 7}' WHERE key = "
	    "'w1:1'", job_digest(&jobs[1]), job_digest(&stamped[0]));
	h_pg_exec(&sc_d, sql);
	memset(res, 0, sizeof(res));
	cr_assert_eq(sink_pg_run(s, jobs, res, 3, "w1:1", err, sizeof(err)),
	    HANDLER_DONE, "%s", err);
	cr_assert_eq(res[0].outcome, HANDLER_OK);
	cr_assert_eq(res[1].outcome, HANDLER_FAIL);
	cr_assert_str_eq(res[1].message, "boom");
	cr_assert_eq(res[2].outcome, HANDLER_OK);
	memset(res, 0, sizeof(res));
	cr_assert_eq(sink_pg_run(s, stamped, res, 1, "w1:2", err, sizeof(err)),
	    HANDLER_DONE, "%s", err);
	/* a recovered job its batch failed was not written there: now */
	cr_assert_eq(res[0].outcome, HANDLER_OK, "%s", res[0].message);
	cr_assert_eq(h_pg_int(&sc_d, "SELECT count(*) FROM events"), 4);

	/* an older ferryd's record names jobs by id (no "" member); a
	 * record by digest does not answer to an id */
	struct job own[1];
	char oels[1][128];
	h_job_parse(&own[0], oels[0], 128, false, "{\"id\":\"old\",\"n\":9}");
	sc_run_ok(s, own, res, 1, "w1:3");
	h_pg_exec(&sc_d, "UPDATE ferry_batches SET failed = '{\"old\": \"older\"}' "
	    "WHERE key = 'w1:3'");
	memset(res, 0, sizeof(res));
	cr_assert_eq(sink_pg_run(s, own, res, 1, "w1:3", err, sizeof(err)),
	    HANDLER_DONE, "%s", err);
	cr_assert_eq(res[0].outcome, HANDLER_FAIL);
	cr_assert_str_eq(res[0].message, "older");
	h_pg_exec(&sc_d, "UPDATE ferry_batches SET failed = '{\"\": \"by digest\", "
	    "\"old\": \"older\"}' WHERE key = 'w1:3'");
	memset(res, 0, sizeof(res));
	cr_assert_eq(sink_pg_run(s, own, res, 1, "w1:3", err, sizeof(err)),
	    HANDLER_DONE, "%s", err);
	cr_assert_eq(res[0].outcome, HANDLER_OK, "%s", res[0].message);
	cr_assert_eq(h_pg_int(&sc_d, "SELECT count(*) FROM events"), 5);
	h_jobs_free(own, 1);
	h_jobs_free(jobs, 3);
	h_jobs_free(stamped, 1);
	sink_pg_free(s);
	h_stop(&sc_d);
}

/* The table renamed away under a running sink, on the statement-by-
 * statement path (a recovered job): the COPY that fails to start keeps
 * its SQLSTATE (it used to be "no SQLSTATE", the jobs retried until
 * dead) and is an outage; the reconnect then finds no table, an outage
 * too (fatal only before the sink ever described it); renamed back, the
 * job is written. */
Test(sink_pg, copy_that_cannot_start_is_an_outage)
{
	const struct queue_config *q = sc_setup();
	struct job jobs[1], stamped[1];
	struct handler_result res[1];
	char els[1][128], sels[1][128], err[256];

	struct sink_pg *s = sink_pg_new(&sc_cfg, q);
	sc_make_jobs(jobs, els, 0, 1, NULL);
	sc_make_jobs(stamped, sels, 1, 1, "\"x:1\"");
	sc_run_ok(s, jobs, res, 1, "w:1");
	h_pg_exec(&sc_d, "ALTER TABLE events RENAME TO events_away");
	memset(res, 0, sizeof(res));
	cr_assert_eq(sink_pg_run(s, stamped, res, 1, "w:2", err, sizeof(err)),
	    HANDLER_WAIT, "%s (outcome %d %s)", err, res[0].outcome,
	    res[0].message);
	cr_assert_not_null(strstr(err, "42P01: "), "%s", err);
	cr_assert_neq(res[0].outcome, HANDLER_RETRY);
	cr_assert_neq(res[0].outcome, HANDLER_FAIL);
	cr_assert_eq(sink_pg_run(s, stamped, res, 1, "w:2", err, sizeof(err)),
	    HANDLER_WAIT, "%s", err);
	cr_assert_not_null(strstr(err, "does not exist"), "%s", err);
	h_pg_exec(&sc_d, "ALTER TABLE events_away RENAME TO events");
	sc_run_ok(s, stamped, res, 1, "w:2");
	cr_assert_eq(h_pg_int(&sc_d, "SELECT count(DISTINCT n) FROM events"), 2);
	h_jobs_free(jobs, 1);
	h_jobs_free(stamped, 1);
	sink_pg_free(s);
	h_stop(&sc_d);
}

/* ferry_batches is "public".ferry_batches (pg_batches_schema), whatever
 * search_path says: a role whose search_path puts another schema with a
 * ferry_batches first does not move the batch rows there. Another schema
 * is used when configured, and its absence is named at start. */
Test(sink_pg, ferry_batches_is_pinned_to_its_schema)
{
	const struct queue_config *q = sc_setup();
	struct job jobs[10];
	struct handler_result res[10];
	char els[10][128], err[256];

	h_pg_exec(&sc_d, "CREATE SCHEMA decoy");
	h_pg_exec(&sc_d, "CREATE TABLE decoy.ferry_batches (LIKE "
	    "public.ferry_batches INCLUDING ALL)");
	h_pg_exec(&sc_d, "ALTER ROLE CURRENT_USER SET search_path = decoy, public");
	struct sink_pg *s = sink_pg_new(&sc_cfg, q);
	sc_make_jobs(jobs, els, 0, 10, NULL);
	sc_run_ok(s, jobs, res, 10, "w1:1");
	sink_pg_free(s);
	cr_assert_eq(h_pg_int(&sc_d, "SELECT count(*) FROM public.ferry_batches "
	    "WHERE key = 'w1:1'"), 1);
	cr_assert_eq(h_pg_int(&sc_d, "SELECT count(*) FROM decoy.ferry_batches"), 0,
	    "search_path moved the batch rows");

	/* a schema of ferry's own */
	h_pg_exec(&sc_d, "CREATE SCHEMA ferry");
	free(sc_cfg.pg_batches_schema);
	sc_cfg.pg_batches_schema = strdup("ferry");
	cr_assert_eq(pg_target_check(&sc_cfg, q, false, NULL, err, sizeof(err)),
	    PG_FATAL);
	cr_assert_str_eq(err, "table \"ferry\".ferry_batches does not exist: run "
	    "ferryctl init-db (or set [ferryd] pg_batches_schema to the schema "
	    "that has ferry_batches)");
	cr_assert_eq(pg_target_check(&sc_cfg, q, true, NULL, err, sizeof(err)),
	    PG_OK, "%s", err);
	s = sink_pg_new(&sc_cfg, q);
	sc_run_ok(s, jobs, res, 10, "w1:2");
	sink_pg_free(s);
	cr_assert_eq(h_pg_int(&sc_d, "SELECT count(*) FROM ferry.ferry_batches "
	    "WHERE key = 'w1:2'"), 1);
	cr_assert_eq(h_pg_int(&sc_d, "SELECT count(*) FROM public.ferry_batches "
	    "WHERE key = 'w1:2'"), 0);
	cr_assert_eq(h_pg_int(&sc_d, "SELECT count(*) FROM events"), 20);
	h_jobs_free(jobs, 10);
	h_stop(&sc_d);
}

/* pipeline: sink_pg_send leaves a batch that goes in one query string in
 * flight (left in flight, nothing decided yet) and sink_pg_finish gives its
 * result; the same key sent again is a replay, answered without a flight;
 * a batch with a row PostgreSQL refuses is sent whole and finish isolates
 * the row (dead, its SQLSTATE) as run would. */
Test(sink_pg, send_then_finish_is_run_in_two_halves)
{
	const struct queue_config *q = sc_setup();
	struct job jobs[10], bad[3];
	struct handler_result res[10];
	char els[10][128], bels[3][128], err[256];
	bool sent;

	struct sink_pg *s = sink_pg_new(&sc_cfg, q);
	sc_make_jobs(jobs, els, 0, 10, NULL);
	memset(res, 0, sizeof(res));
	send_then_finish_ok(s, jobs, res, 10, "p:1");
	cr_assert_eq(h_pg_int(&sc_d, "SELECT count(*) FROM events"), 10);

	/* its ack lost: the same key again, answered from the batch row */
	memset(res, 0, sizeof(res));
	cr_assert_eq(sink_pg_send(s, jobs, res, 10, "p:1", &sent, err,
	    sizeof(err)), HANDLER_DONE, "%s", err);
	cr_assert(!sent, "the batch was left in flight");
	sc_assert_all(res, 10, HANDLER_OK);
	cr_assert_eq(h_pg_int(&sc_d, "SELECT count(*) FROM events"), 10);

	/* {"n":"x"} is refused by the COPY (22P02) once the rows are sent */
	h_job_parse(&bad[0], bels[0], 128, false, "{\"n\":%d}", 100);
	h_job_parse(&bad[1], bels[1], 128, false, "{\"n\":\"x\"}");
	h_job_parse(&bad[2], bels[2], 128, false, "{\"n\":%d}", 102);
	memset(res, 0, sizeof(res));
	cr_assert_eq(sink_pg_send(s, bad, res, 3, "p:2", &sent, err,
	    sizeof(err)), HANDLER_DONE, "%s", err);
	cr_assert(sent, "the batch was not left in flight");
	cr_assert_eq(sink_pg_finish(s, bad, res, 3, "p:2", err, sizeof(err)),
	    HANDLER_DONE, "%s", err);
	cr_assert_eq(res[0].outcome, HANDLER_OK);
	cr_assert_eq(res[1].outcome, HANDLER_FAIL);
	cr_assert(strncmp(res[1].message, "22P02", 5) == 0, "%s",
	    res[1].message);
	cr_assert_eq(res[2].outcome, HANDLER_OK);
	cr_assert_eq(h_pg_int(&sc_d, "SELECT count(*) FROM events"), 12);
	cr_assert_eq(h_pg_int(&sc_d, "SELECT count(*) FROM ferry_batches"), 2);
	h_jobs_free(jobs, 10);
	h_jobs_free(bad, 3);
	sink_pg_free(s);
	h_stop(&sc_d);
}

/* pipeline: while one batch is in flight the next one's rows are encoded
 * ahead (sink_pg_prepare) and its send writes those rows; a job whose
 * rows cannot be encoded fails at the prepare as at a send; a send under
 * another key drops what was ahead, so one batch's rows are never
 * written for another. (The documents are changed in place after the
 * prepare to tell which encoding was written.) */
Test(sink_pg, rows_encoded_ahead_are_written_by_that_batch_only)
{
	const struct queue_config *q = sc_setup();
	struct job a[10], b[10], c[10], e[10], f[10];
	struct handler_result ra[10], rb[10], rc[10], re[10], rf[10];
	char ea[10][128], eb[10][128], ec[10][128], ee[10][128], ef[10][128];
	char err[256];
	bool sent;
	struct sink_pg *s = sink_pg_new(&sc_cfg, q);

	/* not connected yet: nothing is done ahead */
	sc_make_jobs(a, ea, 0, 10, NULL);
	memset(ra, 0, sizeof(ra));
	sink_pg_prepare(s, a, ra, 10, "p:a");
	sc_assert_all(ra, 10, HANDLER_PENDING);
	cr_assert_eq(sink_pg_send(s, a, ra, 10, "p:a", &sent, err,
	    sizeof(err)), HANDLER_DONE, "%s", err);
	cr_assert(sent, "the batch was not left in flight");

	/* b ahead while a is in flight, then b's first document changed */
	sc_make_jobs(b, eb, 100, 10, NULL);
	memset(rb, 0, sizeof(rb));
	sink_pg_prepare(s, b, rb, 10, "p:b");
	sc_assert_all(rb, 10, HANDLER_OK);
	cr_assert_str_eq(eb[0], "{\"n\":100}");
	eb[0][5] = '9';
	cr_assert_eq(sink_pg_finish(s, a, ra, 10, "p:a", err, sizeof(err)),
	    HANDLER_DONE, "%s", err);
	sc_assert_all(ra, 10, HANDLER_OK);
	send_then_finish_ok(s, b, rb, 10, "p:b");
	cr_assert_eq(h_pg_int(&sc_d, "SELECT count(*) FROM events WHERE n = 100"),
	    1, "the send did not write the rows encoded ahead");
	cr_assert_eq(h_pg_int(&sc_d, "SELECT count(*) FROM events WHERE n = 900"),
	    0);

	/* c ahead, then another key sent: its own rows, not c's */
	sc_make_jobs(c, ec, 200, 10, NULL);
	memset(rc, 0, sizeof(rc));
	sink_pg_prepare(s, c, rc, 10, "p:c");
	sc_make_jobs(e, ee, 300, 10, NULL);
	memset(re, 0, sizeof(re));
	cr_assert_eq(sink_pg_run(s, e, re, 10, "p:e", err, sizeof(err)),
	    HANDLER_DONE, "%s", err);
	sc_assert_all(re, 10, HANDLER_OK);
	cr_assert_eq(h_pg_int(&sc_d, "SELECT count(*) FROM events WHERE n >= 300 "
	    "AND n < 400"), 10);
	cr_assert_eq(h_pg_int(&sc_d, "SELECT count(*) FROM events WHERE n >= 200 "
	    "AND n < 300"), 0, "rows encoded ahead for p:c written by p:e");

	/* f ahead, its job 4 without a row to write: failed at the prepare,
	 * and again by its send (a failed job goes the slow way) */
	sc_make_jobs(f, ef, 400, 10, NULL);
	job_free(&f[4]);
	h_job_parse(&f[4], ef[4], 128, false, "{\"data\":[1]}");
	memset(rf, 0, sizeof(rf));
	sink_pg_prepare(s, f, rf, 10, "p:f");
	cr_assert_eq(rf[4].outcome, HANDLER_FAIL);
	cr_assert(strstr(rf[4].message, "not an object") != NULL, "%s",
	    rf[4].message);
	cr_assert_eq(sink_pg_send(s, f, rf, 10, "p:f", &sent, err,
	    sizeof(err)), HANDLER_DONE, "%s", err);
	cr_assert(!sent, "the batch was left in flight");
	cr_assert_eq(rf[4].outcome, HANDLER_FAIL);
	cr_assert_eq(h_pg_int(&sc_d, "SELECT count(*) FROM events WHERE n >= 400"),
	    9);

	/* c's own send encodes it again (what was ahead is gone) */
	ec[0][5] = '9';
	memset(rc, 0, sizeof(rc));
	send_then_finish_ok(s, c, rc, 10, "p:c");
	cr_assert_eq(h_pg_int(&sc_d, "SELECT count(*) FROM events WHERE n >= 200 "
	    "AND n < 300"), 9);
	cr_assert_eq(h_pg_int(&sc_d, "SELECT count(*) FROM events WHERE n = 900"),
	    1);
	cr_assert_eq(h_pg_int(&sc_d, "SELECT count(*) FROM events"), 49);
	cr_assert_eq(h_pg_int(&sc_d, "SELECT count(*) FROM ferry_batches"), 5);
	h_jobs_free(a, 10);
	h_jobs_free(b, 10);
	h_jobs_free(c, 10);
	h_jobs_free(e, 10);
	h_jobs_free(f, 10);
	sink_pg_free(s);
	h_stop(&sc_d);
}
