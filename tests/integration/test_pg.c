/* test_pg.c - the PostgreSQL sink through a real ferryd, redis-server and
 * PostgreSQL: exactly one row per job through kills and outages, bad rows
 * isolated, every awkward value stored as sent, missing tables refused. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "harness_http.h"
#include "pg_events.h"

static struct ferryd d;
static pid_t in_namespace;      /* unshare, when ferryd runs in one */

static void
teardown(void)
{
	if (in_namespace > 0)
		h_stop_in_pid_namespace(in_namespace);
	in_namespace = 0;
	h_teardown(&d);
}

TestSuite(pg, .fini = teardown, .timeout = 600);

/* Redis + PostgreSQL + config for one postgres queue `q` into `events`. */
static void
setup(const char *ferryd_extra, const char *queue_extra)
{
	pe_setup(&d, ferryd_extra, queue_extra);
}

static void
assert_rows_once(int n)
{
	pe_assert_rows_once(&d, n);
}

/* After an outage that `workers` waited through: all n jobs done, each
 * worker said so, every row once, no attempt spent. */
static void
assert_recovered(int n, int workers)
{
	h_wait_redis_int(&d, n, "HGET ferry:{q}:stats done");
	h_wait_log(&d, "postgres reachable again", workers);
	assert_rows_once(n);
	cr_assert_eq(h_redis_int(&d, "HGET ferry:{q}:stats retried"), 0);
}

Test(pg, init_db_then_rows_arrive)
{
	char *out;

	setup(NULL, "workers = 2\n");
	cr_assert_eq(pe_ctl(&d, "init-db", &out), 0, "%s", out);
	cr_assert(strstr(out, "queue q: table events ready") != NULL, "%s", out);
	free(out);
	h_push_jobs(&d, "q", 0, 1000);
	h_start(&d, 2);
	h_wait_redis_int(&d, 1000, "HGET ferry:{q}:stats done");
	assert_rows_once(1000);
	cr_assert_gt(h_pg_int(&d, "SELECT count(*) FROM ferry_batches"), 0);
	h_stop(&d);
}

/* 50,000 jobs, 4 workers, one killed with SIGKILL every 300 ms: exactly
 * 50,000 rows. Each COPY is made to take 10 ms longer (a statement
 * trigger), so that the run lasts long enough for kills to land inside
 * transactions, between COMMIT and ack, and between batches. */
Test(pg, exactly_once_while_workers_are_killed)
{
	setup("restart_backoff_min = 10ms\nrestart_backoff_max = 100ms\n",
	    "workers = 4\nbatch_size = 20\nmax_recoveries = 1000\n");
	h_pg_slow(&d, "events", "INSERT");
	cr_assert_eq(pe_ctl(&d, "init-db", NULL), 0);
	h_push_jobs(&d, "q", 0, 50000);
	h_start(&d, 4);
	h_kill_workers_until_done(&d, "q", 50000);
	assert_rows_once(50000);
	cr_assert_gt(h_redis_int(&d, "HGET ferry:{q}:stats recovered"), 0);
	h_stop(&d);
}

/* The worker dies right after COMMIT, before the Redis ack (test hook),
 * 300 jobs waiting, batches of 100. Its jobs come back stamped with the
 * batch key, the fence finds the batch committed, and they are acked
 * without being written again. recovered: the jobs the master handed
 * back. */
static void
die_between_commit_and_ack(const char *pipeline, int recovered,
    int max_recoveries)
{
	char hook[400], env[450];

	pe_arm_exit_after_commit(&d, hook, sizeof(hook), env, sizeof(env), pipeline,
	    max_recoveries);
	/* the installed ferryd has no fault points: the tests' one has */
	setenv("FERRYD", TEST_BUILDDIR "/tests/ferryd-hooks", 1);
	h_push_jobs(&d, "q", 0, 300);
	h_start(&d, 1);
	h_wait_log(&d, "test hook: exiting between COMMIT and ack", 1);
	h_wait_redis_int(&d, 300, "HGET ferry:{q}:stats done");
	unsetenv("FERRY_TEST_EXIT_AFTER_COMMIT");
	unsetenv("FERRYD");
	assert_rows_once(300);
	cr_assert_eq(h_redis_int(&d, "HGET ferry:{q}:stats recovered"),
	    recovered);
	cr_assert_eq(access(hook, F_OK), -1, "the hook did not fire");
	h_stop(&d);
}

/* One batch at a time: only the committed batch is handed back. */
Test(pg, death_between_commit_and_ack_writes_nothing_twice)
{
	die_between_commit_and_ack("no", 100, 3);
}

/* pipeline: when the first batch's COMMIT arrives, the second is already
 * in the worker's second processing list (fetched, not written): the
 * master hands back both lists, 200 jobs; the committed batch is acked
 * by its fence, the other written once. Without the second list's
 * hand-back its 100 jobs would never be done. */
Test(pg, pipeline_death_between_commit_and_ack_hands_back_both_lists)
{
	die_between_commit_and_ack("yes", 200, 3);
}

/* ... and only the batch the worker was working on is given a recovery:
 * with max_recoveries = 0 a recovered job is buried unless a batch of its
 * wrote it. The committed batch's jobs are (done, by their fence); the
 * batch that waited, fetched but never sent, comes back as it was and is
 * written: none dead. Given a recovery too, its 100 jobs would be dead
 * ("worker died while processing") without ever having run. */
Test(pg, pipeline_batch_waiting_behind_a_death_gets_no_recovery)
{
	die_between_commit_and_ack("yes", 200, 0);
}

/* A worker id is its master's id and its pid, and both can come again:
 * here the master id is forced to one value (FERRYD_TEST_MASTER_ID) and
 * ferryd runs as pid 1 of a new PID namespace, twice, so that the second
 * start's worker has the first one's id (once its tombstone is forgotten)
 * and counts its batches from 1 again. The random part of the batch key keeps its first batch from
 * finding the first start's row and acking its jobs unwritten
 * (doc/design.md, R1). */
Test(pg, reused_worker_id_gets_new_batch_keys)
{
	setup("", "workers = 1\n");
	cr_assert_eq(pe_ctl(&d, "init-db", NULL), 0);
	setenv("FERRYD_TEST_MASTER_ID", "reused", 1);
	for (int run = 0; run < 2; run++) {
		h_push_jobs(&d, "q", run * 10, 10);
		in_namespace = h_start_in_pid_namespace(&d);
		h_wait_redis_int(&d, 10 * (run + 1), "HGET ferry:{q}:stats done");
		int status = h_stop_in_pid_namespace(in_namespace);
		in_namespace = 0;
		cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		    "status %d", status);
		/* the stopped worker's tombstone, forgotten 30 s later */
		freeReplyObject(h_redis(&d, "DEL ferry:{q}:owners"));
	}
	unsetenv("FERRYD_TEST_MASTER_ID");
	/* both starts' batches under one worker id: the case is made */
	cr_assert_eq(h_pg_int(&d, "SELECT count(DISTINCT regexp_replace(key, "
	    "':[^:]*:[0-9]+$', '')) FROM ferry_batches"), 1);
	assert_rows_once(20);
	h_stop(&d);
}

/* The ferryd that `make install` installs ignores the tests' fault points:
 * the same variable and file, and nothing happens. */
Test(pg, installed_ferryd_has_no_test_hooks)
{
	char hook[400], env[450];

	pe_arm_exit_after_commit(&d, hook, sizeof(hook), env, sizeof(env), "yes", 3);
	h_push_jobs(&d, "q", 0, 300);
	h_start(&d, 1);
	h_wait_redis_int(&d, 300, "HGET ferry:{q}:stats done");
	unsetenv("FERRY_TEST_EXIT_AFTER_COMMIT");
	assert_rows_once(300);
	cr_assert_eq(h_redis_int(&d, "HGET ferry:{q}:stats recovered"), 0);
	cr_assert_eq(access(hook, F_OK), 0, "the installed ferryd fired a hook");
	cr_assert_eq(h_count_in_file(d.log, "test hook"), 0);
	h_stop(&d);
}

/* Queue q of the reload tests: one worker into events, these columns. */
#define RELOAD_Q(columns) "[queue q]\nhandler = postgres\ntable = events\n" \
	"columns = " columns "\nworkers = 1\n"

/* Reload ferryd to `global` and `queues`; once the old worker has
 * stopped, 100 jobs are pushed; returns when the log says `then`. */
static void
reload_then_push(const char *global, const char *queues, const char *then)
{
	h_config(&d, global, queues);
	kill(d.pid, SIGHUP);
	h_wait_log(&d, "reload: done", 1);
	h_wait_log(&d, "exited with status 0; stopped", 1);  /* the old one */
	h_push_jobs(&d, "q", 0, 100);
	h_wait_log(&d, then, 1);
}

/* A reload to require_sync_commit = yes on a server that commits without
 * a standby: the queue's new worker exits with the fatal code; `ferryctl
 * status`, /api/workers and the dashboard show it fatal with the reason;
 * it is started again on its own after restart_backoff_max (and exits
 * fatal again while the cause lasts); reloaded without it, every job is
 * done once. */
Test(pg, fatal_worker_shows_why_and_is_tried_again)
{
	char global[512], *out = NULL;

	int port = test_free_port();

	h_setup(&d, NULL, "");
	snprintf(global, sizeof(global), "%shttp_listen = 127.0.0.1:%d\n"
	    "restart_backoff_max = 1s\n", h_pg_start(&d), port);
	h_pg_exec(&d, PE_EVENTS_TABLE);
	h_config(&d, global, RELOAD_Q("n, payload"));
	h_expect_log(&d, "require_sync_commit");
	h_expect_log(&d, "exited with fatal code");
	cr_assert_eq(pe_ctl(&d, "init-db", NULL), 0);
	h_start(&d, 1);
	char sync_global[600];
	snprintf(sync_global, sizeof(sync_global), "%srequire_sync_commit = "
	    "yes\n", global);
	reload_then_push(sync_global, RELOAD_Q("n, payload"),
	    "exited with fatal code");
	cr_assert_eq(pe_ctl(&d, "status", &out), 0, "%s", out);
	cr_assert(strstr(out, "state=fatal") != NULL, "%s", out);
	char *line = strstr(out, "worker queue=q");
	cr_assert(line != NULL && strstr(line, "last_error=") != NULL &&
	    strstr(strstr(line, "last_error="), "require_sync_commit") != NULL,
	    "the fatal worker's status does not say why: %s", out);
	free(out);
	/* /api/workers: fatal (not its last state), with the reason */
	json_t *o = h_http_json(port, "/api/workers");
	json_t *w = json_array_get(json_object_get(o, "workers"), 0);
	cr_assert_str_eq(h_jstr(w, "state"), "fatal");
	cr_assert(strstr(h_jstr(w, "last_error"), "require_sync_commit") !=
	    NULL, "%s", h_jstr(w, "last_error"));
	json_decref(o);
	/* the dashboard's page (it works without JavaScript) says so too */
	char *page = NULL;
	cr_assert_eq(h_http(port, "GET", "/", NULL, &page), 200);
	cr_assert(strstr(page, "data-k=\"state\" class=\"t\">fatal<") != NULL,
	    "the dashboard does not show the worker fatal");
	free(page);
	/* tried again on its own, restart_backoff_max (1 s) apart */
	h_wait_log(&d, "exited with fatal code", 3);
	cr_assert_eq(h_redis_int(&d, "HGET ferry:{q}:stats done"), 0);
	cr_assert_eq(h_redis_int(&d, "HGET ferry:{q}:stats recovered"), 0);
	h_config(&d, global, RELOAD_Q("n, payload"));
	kill(d.pid, SIGHUP);
	h_wait_redis_int(&d, 100, "HGET ferry:{q}:stats done");
	assert_rows_once(100);
	cr_assert_eq(h_redis_int(&d, "HGET ferry:{q}:stats recovered"), 0);
	h_stop(&d);
}

/* A reload to columns that name a column the table lacks (valid INI,
 * which `ferryd -t` cannot check against the table) is an outage like a
 * column dropped by a migration: the jobs wait, the worker's status
 * names the column; fixed and reloaded, every job is done once. */
Test(pg, reload_to_a_missing_column_waits)
{
	char *out = NULL;
	const char *pg;

	h_setup(&d, NULL, "");
	pg = h_pg_start(&d);
	h_pg_exec(&d, PE_EVENTS_TABLE);
	h_config(&d, pg, RELOAD_Q("n, payload"));
	cr_assert_eq(pe_ctl(&d, "init-db", NULL), 0);
	h_start(&d, 1);
	h_wait_blocked(&d, 1);  /* running: a reload at its start is not this */
	reload_then_push(pg, RELOAD_Q("n, nosuch"), "waits in Redis");
	cr_assert_eq(pe_ctl(&d, "status", &out), 0, "%s", out);
	char *line = strstr(out, "worker queue=q");
	cr_assert(line != NULL && strstr(line, "nosuch") != NULL, "%s", out);
	cr_assert(strstr(out, "state=fatal") == NULL, "%s", out);
	free(out);
	h_config(&d, pg, RELOAD_Q("n, payload"));
	kill(d.pid, SIGHUP);
	h_wait_redis_int(&d, 100, "HGET ferry:{q}:stats done");
	assert_rows_once(100);
	h_stop(&d);
}

/* PostgreSQL stopped for 20 s mid-run: every row arrives, nothing is dead,
 * no attempt is spent (no retries). */
Test(pg, outage_spends_no_attempt)
{
	setup(NULL, "workers = 2\nbatch_size = 50\n");
	/* a connection that dies while a worker describes the table is an
	 * outage, not a missing table (it used to stop the worker with the
	 * fatal code 100: no "does not exist" and no fatal exit allowed) */
	cr_assert_eq(pe_ctl(&d, "init-db", NULL), 0);
	h_push_jobs(&d, "q", 0, 2000);
	h_start(&d, 2);
	long long end = h_now_ms() + H_DEADLINE_MS;
	while (h_redis_int(&d, "HGET ferry:{q}:stats done") == 0 &&
	    h_now_ms() < end)
		h_sleep_ms(5);
	cr_assert_eq(test_pg_pause(&d.pg), 0);
	h_push_jobs(&d, "q", 2000, 3000);
	h_wait_log(&d, "waits in Redis", 1);
	h_sleep_ms(20000);      /* the point: a long outage */
	cr_assert_eq(test_pg_resume(&d.pg), 0);
	assert_recovered(5000, 1);
	h_stop(&d);
}

/* The queue connects as ferry_writer (not the superuser the tests use),
 * which may write events and own ferry_batches. 1000 jobs are done, then
 * `breaking` makes the table unwritable (no data of any job is at fault)
 * while 2000 more are pushed: no job is done, none dead, no attempt spent
 * (max_attempts = 2 with a short backoff would dead-letter them within
 * seconds if they were retried), each worker logs the SQLSTATE once; after
 * `mending` every job is in the table once. The COPY that failed to start
 * used to lose its SQLSTATE ("no SQLSTATE") and retry the jobs. */
static void
schema_outage(const char *breaking, const char *sqlstate, const char *mending)
{
	setup(NULL, "workers = 2\nbatch_size = 50\nmax_attempts = 2\n"
	    "backoff_base_ms = 10\nbackoff_max_ms = 50\npg_user = ferry_writer\n");
	h_pg_exec(&d, "CREATE ROLE ferry_writer LOGIN");
	h_pg_exec(&d, "GRANT USAGE, CREATE ON SCHEMA public TO ferry_writer");
	h_pg_exec(&d, "GRANT SELECT, INSERT ON events TO ferry_writer");
	cr_assert_eq(pe_ctl(&d, "init-db", NULL), 0);
	h_push_jobs(&d, "q", 0, 1000);
	h_start(&d, 2);
	h_wait_redis_int(&d, 1000, "HGET ferry:{q}:stats done");
	h_pg_exec(&d, breaking);
	h_push_jobs(&d, "q", 1000, 2000);
	h_wait_log(&d, "waits in Redis", 2);     /* both workers hold a batch */
	cr_assert_eq(h_count_in_file(d.log, sqlstate), 2, "the SQLSTATE, once "
	    "per worker");
	long long done = h_redis_int(&d, "HGET ferry:{q}:stats done");
	h_sleep_ms(5000);       /* many retries of the batch meanwhile */
	cr_assert_eq(h_redis_int(&d, "HGET ferry:{q}:stats done"), done,
	    "jobs were done while the table could not be written");
	cr_assert_eq(h_redis_int(&d, "LLEN ferry:{q}:dead"), 0);
	cr_assert_eq(h_redis_int(&d, "HGET ferry:{q}:stats retried"), 0);
	cr_assert_eq(h_count_in_file(d.log, "waits in Redis"), 2,
	    "logged once per worker while it lasts");
	cr_assert_eq(h_count_in_file(d.log, "no SQLSTATE"), 0);
	h_pg_exec(&d, mending);
	assert_recovered(3000, 2);
	h_stop(&d);
}

/* A grant revoked from ferry's user (42501) is an outage, not bad data. */
Test(pg, revoked_grant_waits)
{
	schema_outage("REVOKE INSERT ON events FROM ferry_writer", "42501",
	    "GRANT INSERT ON events TO ferry_writer");
}

/* The table renamed away (42P01 at the COPY; at a reconnect, a table that
 * does not exist) is an outage too: the running workers wait for it. */
Test(pg, renamed_table_waits)
{
	schema_outage("ALTER TABLE events RENAME TO events_away", "42P01",
	    "ALTER TABLE events_away RENAME TO events");
}

/* The table renamed by a migration after ferryd started but before a
 * worker's first batch, and back 5 s later, with 3 reloads meanwhile (each
 * replaces the workers, whose first batch then finds no table): the job
 * waits like in any outage, no worker exits fatal, nothing is counted
 * recovered or retried, and the job is written once when the table is
 * back; the worker's last error is cleared once a batch commits. */
Test(pg, renamed_before_the_first_batch_waits)
{
	struct h_run r;

	setup(NULL, "workers = 2\nbatch_size = 10\n");
	cr_assert_eq(pe_ctl(&d, "init-db", NULL), 0);
	h_start(&d, 2);
	h_pg_exec(&d, "ALTER TABLE events RENAME TO events_away");
	h_push_jobs(&d, "q", 0, 1);
	h_wait_log(&d, "waits in Redis", 1);
	for (int i = 0; i < 3; i++) {
		cr_assert_eq(h_ctl(&r, d.config, NULL, "reload", NULL), 0);
		h_run_free(&r);
		h_sleep_ms(1000);
	}
	h_sleep_ms(1500);
	cr_assert_eq(h_count_in_file(d.log, "fatal"), 0, "a worker exited fatal");
	cr_assert_eq(h_redis_int(&d, "HGET ferry:{q}:stats done"), 0);
	h_pg_exec(&d, "ALTER TABLE events_away RENAME TO events");
	h_wait_redis_int(&d, 1, "HGET ferry:{q}:stats done");
	assert_rows_once(1);
	cr_assert_eq(h_redis_int(&d, "HGET ferry:{q}:stats recovered"), 0);
	cr_assert_eq(h_redis_int(&d, "HGET ferry:{q}:stats retried"), 0);
	h_ctl(&r, d.config, NULL, "status", NULL);
	cr_assert_eq(r.status, 0);
	cr_assert_null(strstr(r.out, "state=fatal"), "%s", r.out);
	cr_assert_null(strstr(r.out, "does not exist"), "%s", r.out);
	h_run_free(&r);
	h_stop(&d);
}

/* One batch of 500: 3 rows break a CHECK constraint, 1 has a wrong type.
 * 496 commit, 4 are dead with their SQLSTATE. */
Test(pg, bad_rows_are_isolated)
{
	setup(NULL, "workers = 1\nbatch_size = 500\n");
	cr_assert_eq(pe_ctl(&d, "init-db", NULL), 0);
	for (int i = 0; i < 500; i++) {
		char job[64];
		if (i == 10 || i == 250 || i == 499)
			snprintf(job, sizeof(job), "{\"n\":-%d}", i);
		else if (i == 77)
			snprintf(job, sizeof(job), "{\"n\":\"seventy-seven\"}");
		else
			snprintf(job, sizeof(job), "{\"n\":%d}", i);
		freeReplyObject(h_redis(&d, "LPUSH ferry:{q}:ready %s", job));
	}
	h_start(&d, 1);
	h_wait_redis_int(&d, 496, "HGET ferry:{q}:stats done");
	h_wait_redis_int(&d, 4, "LLEN ferry:{q}:dead");
	cr_assert_eq(h_pg_int(&d, "SELECT count(*) FROM events"), 496);
	json_t *dead = h_dead_entries(&d, "q");
	int check = 0, type = 0;
	for (size_t i = 0; i < json_array_size(dead); i++) {
		const char *why = h_jstr(json_array_get(dead, i), "last_error");
		check += strncmp(why, "23514", 5) == 0;
		type += strncmp(why, "22P02", 5) == 0;
	}
	json_decref(dead);
	cr_assert_eq(check, 3, "3 dead with 23514 (check_violation)");
	cr_assert_eq(type, 1, "1 dead with 22P02 (invalid text representation)");
	cr_assert_eq(h_redis_int(&d, "HGET ferry:{q}:stats retried"), 0);
	h_stop(&d);
}

/* Awkward values land exactly as sent, column by column. */
Test(pg, awkward_values_round_trip)
{
	char global[512];

	h_setup(&d, NULL, "");
	snprintf(global, sizeof(global), "%s", h_pg_start(&d));
	h_config(&d, global, "[queue q]\nhandler = postgres\ntable = t\n");
	h_pg_exec(&d, "CREATE TABLE t (id int, s text, nul text, big numeric, "
	    "r double precision, b boolean, j jsonb, u text)");
	cr_assert_eq(pe_ctl(&d, "init-db", NULL), 0);
	const char *job = "{\"id\":1,\"s\":\"tab\\there\\nnew\\rcr \\\\ back "
	    "\\\\N\",\"nul\":null,\"big\":123456789012345678901234567890,"
	    "\"r\":0.1000000000000000055511151231257827,\"b\":true,"
	    "\"j\":{\"a\":[1,\"x\\\\y\"]},\"u\":\"h\\u00e9llo \\ud83d\\ude00 "
	    "\xe2\x82\xac\"}";
	freeReplyObject(h_redis(&d, "LPUSH ferry:{q}:ready %s", job));
	h_start(&d, 1);
	h_wait_redis_int(&d, 1, "HGET ferry:{q}:stats done");
	struct { const char *sql, *want; } cols[] = {
		{ "SELECT s FROM t", "tab\there\nnew\rcr \\ back \\N" },
		{ "SELECT big::text FROM t", "123456789012345678901234567890" },
		{ "SELECT b::text FROM t", "true" },
		{ "SELECT (j->'a'->>1) FROM t", "x\\y" },
		{ "SELECT u FROM t", "h\xc3\xa9llo \xf0\x9f\x98\x80 \xe2\x82\xac" },
		{ "SELECT (r = 0.1)::text FROM t", "true" },
	};
	for (size_t i = 0; i < sizeof(cols) / sizeof(cols[0]); i++) {
		char *v = h_pg_text(&d, cols[i].sql);
		cr_assert_not_null(v, "%s is null", cols[i].sql);
		cr_assert_str_eq(v, cols[i].want, "%s", cols[i].sql);
		free(v);
	}
	cr_assert_eq(h_pg_int(&d, "SELECT count(*) FROM t WHERE nul IS NULL"), 1);
	h_stop(&d);
}

Test(pg, missing_table_or_column_refuses_to_start)
{
	char *out;

	setup(NULL, "workers = 1\n");
	h_pg_exec(&d, "DROP TABLE events");
	cr_assert_eq(pe_ctl(&d, "init-db", &out), 65, "%s", out);
	cr_assert(strstr(out, "\"events\" does not exist") != NULL, "%s", out);
	free(out);
	const char *args[] = { "-f", "-c", d.config, NULL };
	int status = h_run_ferryd(args, &out);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 1, "%s", out);
	cr_assert(strstr(out, "does not exist") != NULL, "%s", out);
	free(out);

	h_pg_exec(&d, "CREATE TABLE events (n bigint)");   /* no payload */
	cr_assert_eq(pe_ctl(&d, "init-db", &out), 65, "%s", out);
	cr_assert(strstr(out, "has no column \"payload\"") != NULL, "%s", out);
	free(out);
	status = h_run_ferryd(args, &out);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 1, "%s", out);
	free(out);
	h_stop(&d);
}

/* pipeline: SIGTERM while the first batch's COMMIT is awaited (its first
 * row sleeps 3 s in a trigger) and the second is fetched behind it. The
 * worker sends the second, settles the first, and before it exits reads
 * the second's COMMIT and settles it too (doc/design.md, R18: the batch
 * in flight is landed): 20 done, each row once, nothing handed back. */
Test(pg, pipeline_term_lands_the_batch_in_flight)
{
	setup(NULL, "workers = 1\nbatch_size = 10\npipeline = yes\n");
	cr_assert_eq(pe_ctl(&d, "init-db", NULL), 0);
	/* the first row into an empty table sleeps */
	h_pg_exec(&d, "CREATE FUNCTION slow_first() RETURNS trigger AS $$ BEGIN "
	    "PERFORM pg_sleep(3) WHERE NOT EXISTS (SELECT 1 FROM events); "
	    "RETURN NEW; END $$ LANGUAGE plpgsql; CREATE TRIGGER slow BEFORE "
	    "INSERT ON events FOR EACH ROW EXECUTE FUNCTION slow_first()");
	h_push_jobs(&d, "q", 0, 20);
	h_start(&d, 1);
	/* the second batch fetched while the first one's COMMIT waits */
	h_wait_redis_int(&d, 0, "LLEN ferry:{q}:ready");
	h_stop(&d);
	long long done = h_redis_int(&d, "HGET ferry:{q}:stats done");
	cr_assert_eq(done, 20, "%lld done, %lld handed back", done,
	    h_redis_int(&d, "LLEN ferry:{q}:requeue"));
	cr_assert_eq(h_redis_int(&d, "HGET ferry:{q}:stats recovered"), 0);
	pe_assert_rows_once(&d, 20);
}
