/* test_update.c - [queue] mode = update and deletes by key (op_member)
 * against a real PostgreSQL: the sink driven directly (missing keys
 * ignored or dead, deletes and writes of one key in one batch in queue
 * order, a stale delete with version, bad op values), runs through
 * ferryd whose workers are killed with SIGKILL, ending with exact rows,
 * and a batch whose worker died between COMMIT and ack replayed after
 * newer writes of its keys (updates, deletes with and without version). */
#include <criterion/criterion.h>
#include <libpq-fe.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "pg_case.h"
#include "pg_target.h"
#include "sink_pg.h"

TestSuite(update, .fini = pc_teardown, .timeout = 300);

/* Queue q with the lines, rows (1,a) and (2,b) in profiles; a sink. */
static struct sink_pg *
setup(const char *queue)
{
	struct sink_pg *s = pc_sink(&pc_cfg, pc_setup(&pc_d, &pc_cfg, queue));

	h_pg_exec(&pc_d, "INSERT INTO profiles VALUES (1, 'a', 0, NULL), "
	    "(2, 'b', 0, NULL)");
	return s;
}

static const char *const updates[] = {
	"{\"k\":1,\"name\":\"x\"}", "{\"k\":3,\"name\":\"y\"}",
	"{\"k\":2,\"name\":\"z\"}",
	"{\"data\":[{\"k\":2,\"name\":\"q\"},{\"k\":4,\"name\":\"r\"}]}",
	"{\"k\":3,\"name\":\"u\"}",
};

/* missing = ignore: an update of a key without a row changes nothing and
 * is done; the others apply, the last of a key winning. */
Test(update, missing_key_ignored)
{
	struct sink_pg *s = setup("mode = update\nkey = k\nmissing = ignore\n");

	pc_run(s, updates, 5, "w:1", NULL);
	pc_assert_rows(&pc_d, "1=x,2=q");
	sink_pg_free(s);
	h_stop(&pc_d);
}

/* missing = dead (the default): every job with an update of a key that
 * has no row is dead with the key, and none of its rows is applied (job 3
 * also names key 2, which keeps job 2's value); the rest commits; a
 * replay of the batch says the same from its record; a later batch with
 * no missing key commits whole. */
Test(update, missing_key_dead)
{
	static const char *const dead[] = {
		NULL, "update: no row with key (k)=(3)", NULL,
		"update: no row with key (k)=(4)", "update: no row with key (k)=(3)",
	};
	static const char *const later[] = {
		"{\"k\":2,\"name\":\"w\"}", "{\"k\":1,\"name\":\"v\"}",
	};
	struct sink_pg *s = setup("mode = update\nkey = k\n");

	for (int round = 0; round < 2; round++) {
		pc_run(s, updates, 5, "w:1", dead);
		pc_assert_rows(&pc_d, "1=x,2=z");
	}
	cr_assert_eq(h_pg_int(&pc_d, "SELECT count(*) FROM json_object_keys("
	    "(SELECT failed::json FROM ferry_batches WHERE key = 'w:1')) k "
	    "WHERE k <> ''"), 3);
	pc_run(s, later, 2, "w:2", NULL);
	pc_assert_rows(&pc_d, "1=v,2=w");
	sink_pg_free(s);
	h_stop(&pc_d);
}

/* update with version: a stale update of an existing row is not missing
 * (done, not applied); a delete before an update of its key in the batch
 * leaves the update without a row. */
Test(update, version_and_deletes)
{
	static const char *const batch[] = {
		"{\"k\":1,\"name\":\"old\",\"v\":4}",
		"{\"k\":2,\"name\":\"new\",\"v\":6}",
		"{\"op\":\"delete\",\"k\":1,\"v\":9}",
		"{\"k\":1,\"name\":\"gone\",\"v\":10}",
	};
	static const char *const dead[] = { NULL, NULL, NULL,
	    "update: no row with key (k)=(1)" };
	struct sink_pg *s = setup("mode = update\nkey = k\nversion = v\n");

	h_pg_exec(&pc_d, "UPDATE profiles SET v = 5");
	pc_run(s, batch, 2, "w:1", NULL);
	pc_assert_rows(&pc_d, "1=a/5,2=new/6");
	pc_run(s, batch + 2, 2, "w:2", dead + 2);
	pc_assert_rows(&pc_d, "2=new/6");
	sink_pg_free(s);
	h_stop(&pc_d);
}

/* update with version, one batch: a delete older than an update of its
 * key before it is stale (as if applied one by one), so it must not take
 * the newer row with it; nor may one of an equal version. Both jobs are
 * done. (The delete went first and the update then found no row: the row
 * was gone and the update dead as missing.) */
Test(update, stale_delete_after_newer_update_in_one_batch)
{
	static const char *const batch[] = {
		"{\"k\":1,\"name\":\"new\",\"v\":10}",
		"{\"op\":\"delete\",\"k\":1,\"v\":3}",
		"{\"k\":2,\"name\":\"same\",\"v\":7}",
		"{\"op\":\"delete\",\"k\":2,\"v\":7}",
	};
	static const char *const newer[] = {
		"{\"k\":1,\"name\":\"mid\",\"v\":11}",
		"{\"op\":\"delete\",\"k\":1,\"v\":12}",
	};
	struct sink_pg *s = setup("mode = update\nkey = k\nversion = v\n");

	h_pg_exec(&pc_d, "UPDATE profiles SET v = 0");
	pc_run(s, batch, 4, "w:1", NULL);
	pc_assert_rows(&pc_d, "1=new/10,2=same/7");
	/* a delete newer than the update before it still applies */
	pc_run(s, newer, 2, "w:2", NULL);
	pc_assert_rows(&pc_d, "2=same/7");
	sink_pg_free(s);
	h_stop(&pc_d);
}

/* update with version, missing = dead: another transaction commits a
 * newer version of the row while the batch's UPDATE waits for its lock
 * (here statement by statement, which a bad row in the batch forces).
 * The UPDATE rechecks the newer row and leaves it (the job's version is
 * stale); the missing check must see that row too, not the statement's
 * older snapshot, or the stale job is dead as "no row" while its row is
 * there. */
Test(update, stale_update_racing_a_newer_commit_is_not_missing)
{
	static const char *const doc[] = {
		"{\"k\":2,\"name\":\"bad\",\"v\":\"not a number\"}",
		"{\"k\":1,\"name\":\"y\",\"v\":15}",
	};
	struct sink_pg *s = setup("mode = update\nkey = k\nversion = v\n");
	struct job jobs[2];
	struct handler_result res[2];
	char el[2][128], err[256];

	h_pg_exec(&pc_d, "UPDATE profiles SET v = 0");
	pid_t pid = fork();
	cr_assert_neq(pid, -1);
	if (pid == 0) {           /* the other writer, holding the row */
		h_pg_exec(&pc_d, "BEGIN; UPDATE profiles SET name = 'other', v = 20 "
		    "WHERE k = 1; SELECT pg_sleep(2); COMMIT");
		_exit(0);
	}
	h_sleep_ms(700);
	for (int i = 0; i < 2; i++)
		h_job_parse(&jobs[i], el[i], sizeof(el[i]), false, "%s", doc[i]);
	memset(res, 0, sizeof(res));
	cr_assert_eq(sink_pg_run(s, jobs, res, 2, "w:1", err, sizeof(err)),
	    HANDLER_DONE, "%s", err);
	int st;
	waitpid(pid, &st, 0);
	cr_expect_eq(res[0].outcome, HANDLER_FAIL, "the bad row: %d",
	    res[0].outcome);
	cr_expect_eq(strncmp(res[0].message, "22P02", 5), 0, "%s",
	    res[0].message);
	cr_expect_eq(res[1].outcome, HANDLER_OK, "the stale job is %d: %s",
	    res[1].outcome, res[1].message);
	pc_assert_rows(&pc_d, "1=other/20,2=b/0");
	h_jobs_free(jobs, 2);
	sink_pg_free(s);
	h_stop(&pc_d);
}

/* update with version, missing = dead: a job of two rows, key 1 (a row,
 * updated) and key 3 (no row), is dead with key 3, and its key 1 update
 * is not applied. The missing check's second look (a new snapshot, for
 * the race above) asked per job: the job's key 1 row, updated by the
 * statement, made its key 3 row count as stale, and the job was done with
 * half of it applied. Statement by statement, as a bad row forces. */
Test(update, a_missing_row_of_a_job_is_not_hidden_by_its_other_row)
{
	static const char *const batch[] = {
		"{\"k\":2,\"name\":\"bad\",\"v\":\"not a number\"}",
		"{\"data\":[{\"k\":1,\"name\":\"x\",\"v\":5},"
		"{\"k\":3,\"name\":\"y\",\"v\":5}]}",
	};
	static const char *const dead[] = {
		"22P02", "update: no row with key (k)=(3)",
	};
	struct sink_pg *s = setup("mode = update\nkey = k\nversion = v\n");

	h_pg_exec(&pc_d, "UPDATE profiles SET v = 0");
	pc_run(s, batch, 2, "w:1", dead);
	pc_assert_rows(&pc_d, "1=a/0,2=b/0");
	sink_pg_free(s);
	h_stop(&pc_d);
}

/* A version column of a type without max() (uuid): deletes in a batch
 * worked only with types that have it (the stale-delete check took the
 * greatest version before a delete with max() OVER; 42883 on uuid, and
 * every job of the batch dead as a bad row). */
Test(update, version_of_a_type_without_max_and_deletes)
{
	static const char *const batch[] = {
		"{\"k\":1,\"name\":\"new\",\"v\":"
		"\"00000000-0000-7000-8000-000000000009\"}",
		"{\"op\":\"delete\",\"k\":1,\"v\":"
		"\"00000000-0000-7000-8000-000000000003\"}",
		"{\"op\":\"delete\",\"k\":2,\"v\":"
		"\"00000000-0000-7000-8000-000000000005\"}",
	};
	const struct queue_config *q = pc_setup(&pc_d, &pc_cfg,
	    "mode = update\nkey = k\nversion = v\n");

	h_pg_exec(&pc_d, "ALTER TABLE profiles ALTER COLUMN v TYPE uuid USING "
	    "NULL");
	h_pg_exec(&pc_d, "INSERT INTO profiles (k, name, v) VALUES (1, 'a', "
	    "'00000000-0000-7000-8000-000000000001'), (2, 'b', "
	    "'00000000-0000-7000-8000-000000000001')");
	struct sink_pg *s = pc_sink(&pc_cfg, q);
	pc_run(s, batch, 3, "w:1", NULL);
	cr_assert_eq(h_pg_int(&pc_d, "SELECT count(*) FROM profiles WHERE k = 1 "
	    "AND name = 'new'"), 1);
	cr_assert_eq(h_pg_int(&pc_d, "SELECT count(*) FROM profiles"), 1);
	sink_pg_free(s);
	h_stop(&pc_d);
}

/* Review: missing = dead promises that an update whose key has no row is
 * dead, never done unapplied. The UPDATE and the missing check are two
 * statements, so under READ COMMITTED each has its own snapshot: a row
 * that another transaction commits between them (here while a statement
 * trigger on the UPDATE sleeps; in production another queue's insert of
 * that key committing at that moment) is not updated by the UPDATE, yet
 * seen by the check, and the job is acked as done with its update lost. */
Test(update, missing_check_sees_the_same_rows_as_the_update)
{
	static const char *const doc[] = { "{\"k\":3,\"name\":\"y\"}" };
	struct sink_pg *s = setup("mode = update\nkey = k\n");
	struct job jobs[1];
	struct handler_result res[1];
	char el[128], err[256];

	h_pg_exec(&pc_d, "CREATE FUNCTION nap() RETURNS trigger LANGUAGE "
	    "plpgsql AS $$ BEGIN PERFORM pg_sleep(2); RETURN NULL; END $$");
	h_pg_exec(&pc_d, "CREATE TRIGGER nap AFTER UPDATE ON profiles FOR EACH "
	    "STATEMENT EXECUTE FUNCTION nap()");
	pid_t pid = fork();
	cr_assert_neq(pid, -1);
	if (pid == 0) {           /* the other writer, during the UPDATE */
		sleep(1);
		h_pg_exec(&pc_d, "INSERT INTO profiles VALUES (3, 'late', 0, NULL)");
		_exit(0);
	}
	h_job_parse(&jobs[0], el, sizeof(el), false, "%s", doc[0]);
	memset(res, 0, sizeof(res));
	cr_assert_eq(sink_pg_run(s, jobs, res, 1, "w:1", err, sizeof(err)),
	    HANDLER_DONE, "%s", err);
	int st;
	waitpid(pid, &st, 0);
	char *row = h_pg_text(&pc_d, "SELECT name FROM profiles WHERE k = 3");
	cr_expect(res[0].outcome == HANDLER_FAIL || strcmp(row, "y") == 0,
	    "job done (outcome %d) but its update was never applied: row 3 "
	    "holds \"%s\"", res[0].outcome, row);
	free(row);
	h_jobs_free(jobs, 1);
	sink_pg_free(s);
	h_stop(&pc_d);
}

/* ferryd's start and init-db refuse an update with nothing to update. */
Test(update, nothing_to_update_is_refused)
{
	char err[512];
	const struct queue_config *q = pc_setup(&pc_d, &pc_cfg, "mode = update\n"
	    "key = k\ncolumns = k\n");

	cr_assert_eq(pg_target_check(&pc_cfg, q, true, NULL, err, sizeof(err)),
	    PG_FATAL, "%s", err);
	cr_assert_str_eq(err, "[queue q] mode: update has no column to update: "
	    "every column written is in key (allowed: write columns besides the "
	    "key, or use mode = upsert)");
	h_stop(&pc_d);
}

TestSuite(delete, .fini = pc_teardown, .timeout = 300);

/* A delete and writes of one key in one batch apply in queue order: the
 * last decides whether the row exists and what it holds; a delete of a
 * key without a row is done. */
Test(delete, delete_and_upsert_in_one_batch)
{
	static const char *const docs[] = {
		"{\"op\":\"delete\",\"k\":1}", "{\"k\":1,\"name\":\"n1\"}",
		"{\"k\":2,\"name\":\"n2\",\"op\":\"upsert\"}",
		"{\"k\":2,\"op\":\"delete\"}",
		"{\"k\":3,\"name\":\"n3\"}", "{\"op\":\"delete\",\"k\":3}",
		"{\"op\":\"delete\",\"k\":4}",
		"{\"k\":5,\"name\":\"x\"}", "{\"op\":\"delete\",\"k\":5}",
		"{\"k\":5,\"name\":\"y\"}",
	};
	struct sink_pg *s = setup("mode = upsert\nkey = k\n");

	pc_run(s, docs, 10, "w:1", NULL);
	pc_assert_rows(&pc_d, "1=n1,5=y");
	pc_run(s, docs + 1, 2, "w:2", NULL);
	pc_assert_rows(&pc_d, "1=n1,2=n2,5=y");
	pc_run(s, docs + 3, 1, "w:3", NULL);
	pc_assert_rows(&pc_d, "1=n1,5=y");
	sink_pg_free(s);
	h_stop(&pc_d);
}

/* With version a delete applies only when newer than the row: one from
 * an older batch committed later is ignored, as is one older than a write
 * of its key in the same batch; a replay changes nothing. */
Test(delete, stale_delete_ignored_with_version)
{
	static const char *const first[] = {
		"{\"k\":1,\"name\":\"a\",\"v\":5}", "{\"k\":2,\"name\":\"b\",\"v\":5}",
	};
	static const char *const second[] = {
		"{\"op\":\"delete\",\"k\":1,\"v\":3}",
		"{\"op\":\"delete\",\"k\":2,\"v\":6}",
	};
	static const char *const third[] = {
		"{\"k\":1,\"name\":\"c\",\"v\":7}",
		"{\"op\":\"delete\",\"k\":1,\"v\":6}",
	};
	struct sink_pg *s = pc_sink(&pc_cfg, pc_setup(&pc_d, &pc_cfg, "mode = upsert\n"
	    "key = k\nversion = v\n"));

	pc_run(s, first, 2, "w:1", NULL);
	pc_run(s, second, 2, "w:2", NULL);
	pc_assert_rows(&pc_d, "1=a/5");
	pc_run(s, third, 2, "w:3", NULL);
	pc_assert_rows(&pc_d, "1=c/7");
	pc_run(s, first, 2, "w:1", NULL);
	pc_run(s, second, 2, "w:2", NULL);
	pc_assert_rows(&pc_d, "1=c/7");
	sink_pg_free(s);
	h_stop(&pc_d);
}

/* With version, of the jobs of a key's greatest version the first applies
 * and a later equal one is stale, except after a delete: the row is gone,
 * so the next write of that version inserts it (one by one: key 1 deleted
 * then written, key 3 written, key 2 kept by its write, key 4 none). The
 * delete used to win, and its key's write was done unapplied. */
Test(delete, write_after_delete_of_an_equal_version_applies)
{
	static const char *const docs[] = {
		"{\"op\":\"delete\",\"k\":1,\"v\":5}",
		"{\"k\":1,\"name\":\"n1\",\"v\":5}",
		"{\"k\":2,\"name\":\"w2\",\"v\":5}",
		"{\"op\":\"delete\",\"k\":2,\"v\":5}",
		"{\"op\":\"delete\",\"k\":3,\"v\":5}",
		"{\"k\":3,\"name\":\"n3\",\"v\":5}",
		"{\"k\":3,\"name\":\"x3\",\"v\":5}",
		"{\"op\":\"delete\",\"k\":4,\"v\":5}",
		"{\"op\":\"delete\",\"k\":4,\"v\":5}",
	};
	struct sink_pg *s = setup("mode = upsert\nkey = k\nversion = v\n");

	h_pg_exec(&pc_d, "UPDATE profiles SET v = 3");
	pc_run(s, docs, 9, "w:1", NULL);
	pc_assert_rows(&pc_d, "1=n1/5,2=w2/5,3=n3/5");
	/* a replay changes nothing */
	pc_run(s, docs, 9, "w:1", NULL);
	pc_assert_rows(&pc_d, "1=n1/5,2=w2/5,3=n3/5");
	sink_pg_free(s);
	h_stop(&pc_d);
}

/* The same with mode = update: after the delete, the update of an equal
 * version finds no row (missing, dead), as one by one; it was done. */
Test(delete, update_after_delete_of_an_equal_version_is_missing)
{
	static const char *const docs[] = {
		"{\"op\":\"delete\",\"k\":1,\"v\":5}",
		"{\"k\":1,\"name\":\"n1\",\"v\":5}",
		"{\"k\":2,\"name\":\"w2\",\"v\":5}",
		"{\"op\":\"delete\",\"k\":2,\"v\":5}",
	};
	static const char *const dead[] = {
		NULL, "update: no row with key (k)=(1)", NULL, NULL,
	};
	struct sink_pg *s = setup("mode = update\nkey = k\nversion = v\n");

	h_pg_exec(&pc_d, "UPDATE profiles SET v = 3");
	pc_run(s, docs, 4, "w:1", dead);
	pc_assert_rows(&pc_d, "2=w2/5");
	sink_pg_free(s);
	h_stop(&pc_d);
}

/* An op that is not an operation is dead, naming it; null and "upsert"
 * write; the rest commits. */
Test(delete, bad_op_is_dead)
{
	static const char *const docs[] = {
		"{\"k\":1,\"op\":\"remove\",\"name\":\"a\"}",
		"{\"k\":2,\"name\":\"b\",\"op\":\"upsert\"}",
		"{\"k\":3,\"op\":5}", "{\"k\":4,\"op\":null,\"name\":\"d\"}",
		"{\"k\":2,\"op\":\"update\"}",
	};
	static const char *const dead[] = {
		"op: \"remove\" is not an operation of mode = upsert (allowed: "
		"\"delete\", \"upsert\", null, or no op member)", NULL,
		"op: 5 is not an operation of mode = upsert", NULL,
		"op: \"update\" is not an operation of mode = upsert",
	};
	struct sink_pg *s = setup("mode = upsert\nkey = k\n");

	pc_run(s, docs, 5, "w:1", dead);
	pc_assert_rows(&pc_d, "1=a,2=b,4=d");
	sink_pg_free(s);
	h_stop(&pc_d);
}

static const char *const op_docs[] = {
	"{\"k\":1,\"action\":\"delete\",\"op\":\"bogus\"}",
	"{\"k\":2,\"op\":\"delete\",\"name\":\"c\"}",
};

/* op_member names the member (another one called op is not read). */
Test(delete, op_member_names_the_member)
{
	struct sink_pg *s = setup("mode = upsert\nkey = k\n"
	    "op_member = action\n");

	pc_run(s, op_docs, 2, "w:1", NULL);
	pc_assert_rows(&pc_d, "2=c");
	sink_pg_free(s);
	h_stop(&pc_d);
}

/* op_member empty: no member deletes (job 0 writes key 1, its name
 * NULL). */
Test(delete, op_member_empty_deletes_nothing)
{
	struct sink_pg *s = setup("mode = upsert\nkey = k\nop_member =\n");

	pc_run(s, op_docs, 2, "w:1", NULL);
	pc_assert_rows(&pc_d, "1=-,2=c");
	sink_pg_free(s);
	h_stop(&pc_d);
}

/* A delete needs only its key, even when other columns are NOT NULL; a
 * write without them is still refused. */
Test(delete, delete_needs_only_the_key)
{
	static const char *const docs[] = {
		"{\"op\":\"delete\",\"k\":1}", "{\"k\":3}",
		"{\"k\":2,\"name\":\"n\",\"score\":1}",
	};
	static const char *const dead[] = { NULL, "23", NULL };
	struct sink_pg *s;

	pc_setup(&pc_d, &pc_cfg, "mode = upsert\nkey = k\n");
	h_pg_exec(&pc_d, "ALTER TABLE profiles ALTER name SET NOT NULL, ALTER "
	    "score SET NOT NULL");
	h_pg_exec(&pc_d, "INSERT INTO profiles VALUES (1, 'a', 0, NULL), "
	    "(2, 'b', 0, NULL)");
	s = pc_sink(&pc_cfg, &pc_cfg.queues[0]);
	pc_run(s, docs, 3, "w:1", dead);
	pc_assert_rows(&pc_d, "2=n");
	sink_pg_free(s);
	h_stop(&pc_d);
}

TestSuite(update_ferryd, .fini = pc_teardown, .timeout = 600);

#define KILLED "restart_backoff_min = 10ms\nrestart_backoff_max = 100ms\n"
#define KILLED_QUEUE "workers = 4\nbatch_size = 10\nmax_recoveries = 1000\n" \
	"version = v\nkey = k\n"

/* 20,000 upserts and deletes over 500 keys (every 7th job a delete, the
 * last job of each key a write), 4 workers, one killed with SIGKILL every
 * 300 ms: every key ends with its last job, none is dead, deletes
 * happened and no write was applied twice. */
Test(update_ferryd, upserts_and_deletes_survive_killed_workers)
{
	pc_setup_ferryd(&pc_d, KILLED, KILLED_QUEUE "mode = upsert\n");
	h_pg_slow(&pc_d, "profiles", "INSERT OR DELETE");
	h_pg_exec(&pc_d, "CREATE TABLE deleted (v bigint)");
	h_pg_exec(&pc_d, "CREATE FUNCTION record() RETURNS trigger LANGUAGE "
	    "plpgsql AS $$ BEGIN INSERT INTO deleted VALUES (OLD.v); RETURN "
	    "NULL; END $$");
	h_pg_exec(&pc_d, "CREATE TRIGGER record AFTER DELETE ON profiles "
	    "FOR EACH ROW EXECUTE FUNCTION record()");
	pc_push(&pc_d, 20000, 500, 7);
	h_start(&pc_d, 4);
	h_kill_workers_until_done(&pc_d, "q", 20000);
	pc_assert_last_of_each_key(&pc_d, 20000, 500);
	/* deletes happened, and no write was applied twice (a row, once
	 * deleted, could only come back with the same v by a replay) */
	cr_assert_gt(h_pg_int(&pc_d, "SELECT count(*) FROM deleted"), 100);
	cr_assert_eq(h_pg_int(&pc_d, "SELECT count(*) - count(DISTINCT v) FROM "
	    "deleted"), 0, "a write was applied twice");
	cr_assert_gt(h_redis_int(&pc_d, "HGET ferry:{q}:stats recovered"), 0);
	h_stop(&pc_d);
}

/* The same with mode = update over rows that exist (missing = dead: a
 * replayed or reordered batch must never find a key missing). */
Test(update_ferryd, updates_survive_killed_workers)
{
	pc_setup_ferryd(&pc_d, KILLED, KILLED_QUEUE "mode = update\n");
	h_pg_exec(&pc_d, "INSERT INTO profiles SELECT k, 'init', 0, -1 FROM "
	    "generate_series(0, 499) k");
	h_pg_slow(&pc_d, "profiles", "UPDATE");
	pc_push(&pc_d, 20000, 500, 0);
	h_start(&pc_d, 4);
	h_kill_workers_until_done(&pc_d, "q", 20000);
	pc_assert_last_of_each_key(&pc_d, 20000, 500);
	cr_assert_gt(h_redis_int(&pc_d, "HGET ferry:{q}:stats recovered"), 0);
	h_stop(&pc_d);
}

/* LPUSH jobs first..first+n-1 as pc_push numbers them (key i % 50, name
 * "n<i>", v i), deletes when del. */
static void
push_range(int first, int n, bool del)
{
	for (int i = first; i < first + n; i++)
		freeReplyObject(del ? h_redis(&pc_d, "LPUSH ferry:{q}:ready "
		    "{\"op\":\"delete\",\"k\":%d,\"v\":%d}", i % 50, i) :
		    h_redis(&pc_d, "LPUSH ferry:{q}:ready {\"k\":%d,\"name\":"
		    "\"n%d\",\"v\":%d}", i % 50, i, i));
}

/* The replay held back behind newer writes. Queue q (2 workers, the
 * lines); keys 0..49 as rows ("init", v -1). Jobs 0..49 (deletes when
 * del) are the first batch, whose worker dies between its COMMIT and the
 * ack (test hook). Their jobs come back stamped, and the batch that takes
 * them waits in its first fence (a trigger on ferry_batches waits for an
 * advisory lock the test holds, for fence rows only) while the other
 * worker commits jobs 50..99: newer values of the same keys. Then the
 * fence goes on. A statement trigger on profiles records each transaction
 * that ran a statement on it: the replay must have run none. */
static void
replay_after_newer(const char *queue, bool del)
{
	char hook[400], env[450], body[512];

	snprintf(body, sizeof(body), "workers = 2\nbatch_size = 100\n"
	    "max_recoveries = 1000\nkey = k\n%s", queue);
	pc_setup_ferryd(&pc_d, KILLED, body);
	h_pg_exec(&pc_d, "INSERT INTO profiles SELECT k, 'init', 0, -1 FROM "
	    "generate_series(0, 49) k");
	h_pg_exec(&pc_d, "CREATE TABLE stmts (tx bigint)");
	h_pg_exec(&pc_d, "CREATE FUNCTION stmt() RETURNS trigger LANGUAGE "
	    "plpgsql AS $$ BEGIN INSERT INTO stmts VALUES (txid_current()); "
	    "RETURN NULL; END $$");
	h_pg_exec(&pc_d, "CREATE TRIGGER stmt AFTER INSERT OR UPDATE OR DELETE "
	    "ON profiles FOR EACH STATEMENT EXECUTE FUNCTION stmt()");
	h_pg_exec(&pc_d, "CREATE FUNCTION hold() RETURNS trigger LANGUAGE "
	    "plpgsql AS $$ BEGIN IF NEW.state = 'fenced' THEN PERFORM "
	    "pg_advisory_xact_lock_shared(7); END IF; RETURN NEW; END $$");
	h_pg_exec(&pc_d, "CREATE TRIGGER hold BEFORE INSERT ON ferry_batches "
	    "FOR EACH ROW EXECUTE FUNCTION hold()");
	PGconn *lock = PQconnectdb(pc_d.pg.conninfo);
	cr_assert_eq(PQstatus(lock), CONNECTION_OK, "%s", PQerrorMessage(lock));
	PGresult *r = PQexec(lock, "SELECT pg_advisory_lock(7)");
	cr_assert_eq(PQresultStatus(r), PGRES_TUPLES_OK, "%s",
	    PQerrorMessage(lock));
	PQclear(r);
	snprintf(hook, sizeof(hook), "%s/exit-after-commit", pc_d.dir);
	h_write_file(hook, "once\n");
	snprintf(env, sizeof(env), "FERRY_TEST_EXIT_AFTER_COMMIT=%s", hook);
	putenv(env);
	setenv("FERRYD", TEST_BUILDDIR "/tests/ferryd-hooks", 1);
	push_range(0, 50, del);
	h_start(&pc_d, 2);
	h_wait_log(&pc_d, "test hook: exiting between COMMIT and ack", 1);
	h_wait_pg_int(&pc_d, 1, "SELECT count(*) FROM pg_locks WHERE locktype "
	    "= 'advisory' AND NOT granted");
	/* the first batch committed whole, and nothing else yet */
	cr_assert_eq(h_pg_int(&pc_d, del ? "SELECT count(*) FROM profiles" :
	    "SELECT count(*) FROM profiles WHERE name = 'n' || k AND v = k"),
	    del ? 0 : 50);
	cr_assert_eq(h_pg_int(&pc_d, "SELECT count(DISTINCT tx) FROM stmts"), 1);
	push_range(50, 50, false);
	h_wait_redis_int(&pc_d, 50, "HGET ferry:{q}:stats done");
	long long before = h_pg_int(&pc_d, "SELECT count(DISTINCT tx) FROM "
	    "stmts");
	PQfinish(lock);           /* the fence goes on */
	h_wait_redis_int(&pc_d, 100, "HGET ferry:{q}:stats done");
	unsetenv("FERRY_TEST_EXIT_AFTER_COMMIT");
	unsetenv("FERRYD");
	pc_assert_last_of_each_key(&pc_d, 100, 50);
	cr_assert_eq(h_pg_int(&pc_d, "SELECT count(DISTINCT tx) FROM stmts"),
	    before, "the replay ran a statement on profiles");
	cr_assert_eq(h_redis_int(&pc_d, "HGET ferry:{q}:stats recovered"), 50);
	cr_assert_eq(access(hook, F_OK), -1, "the hook did not fire");
	h_stop(&pc_d);
}

/* mode = update with version: the first batch's updates are replayed
 * after newer ones committed; every key keeps the newer value (the
 * version would refuse the older one too, so what this tests is that the
 * replay applies nothing: no statement; every job done, none dead). */
Test(update_ferryd, replay_after_newer_updates_applies_nothing)
{
	replay_after_newer("mode = update\nversion = v\n", false);
}

/* Deletes with version: the first batch deleted every key, a newer write
 * re-created each before the replay; the rows stay, with the newer
 * values (the stale delete is not re-applied; the version would ignore
 * it too, so again: no statement). */
Test(update_ferryd, replay_of_deletes_after_newer_writes_with_version)
{
	replay_after_newer("mode = upsert\nversion = v\n", true);
}

/* Deletes without version: nothing but the batch row stands between the
 * replay and the re-created rows (a DELETE re-run would remove them all):
 * the replay finds the batch committed, applies nothing again and acks
 * the deletes as done; the rows stay with the newer values. */
Test(update_ferryd, replay_of_deletes_after_newer_writes_without_version)
{
	replay_after_newer("mode = upsert\n", true);
}
