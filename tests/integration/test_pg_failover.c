/* test_pg_failover.c - a postgres queue on a PostgreSQL primary and its
 * streaming standby (pg_host = 127.0.0.1,127.0.0.1, pg_port = P1,P2): the
 * primary stopped -m immediate under load and the standby promoted loses
 * no job, writes none twice and spends no attempt; asynchronous commits
 * with several hosts make ferryd warn, or refuse with require_sync_commit. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "harness.h"

static struct ferryd d;
static struct test_pg standby, old_primary;

static void
teardown(void)
{
	h_teardown(&d);
	test_pg_stop(&standby);
	test_pg_stop(&old_primary);
}

TestSuite(pg_failover, .fini = teardown, .timeout = 600);

#define QUEUE "[queue q]\nhandler = postgres\ntable = events\n" \
	"columns = n\nworkers = 2\nbatch_size = 20\nmax_attempts = 1\n"

static void
ctl_init_db(void)
{
	struct h_run r;

	cr_assert_eq(h_ctl(&r, d.config, NULL, "init-db", NULL), 0, "%s%s",
	    r.out, r.err);
	h_run_free(&r);
}

/* Redis and a primary with table events. */
static void
setup(void)
{
	h_setup(&d, NULL, "");
	h_pg_start(&d);
	h_pg_exec(&d, "CREATE TABLE events (n bigint)");
}

/* The config for queue q: the [ferryd] lines `hosts` (printf format with
 * up to two ports, pg_database and pg_user added), then `extra`. */
static void
config(const char *hosts, int port1, int port2, const char *extra)
{
	char global[512], h[256];

	snprintf(h, sizeof(h), hosts, port1, port2);
	snprintf(global, sizeof(global), "%spg_database = ferry\n"
	    "pg_user = postgres\nrestart_backoff_min = 10ms\n%s", h,
	    extra ? extra : "");
	h_config(&d, global, QUEUE);
}

#define ONE_HOST "pg_host = 127.0.0.1\npg_port = %d\n"
#define TWO_HOSTS "pg_host = 127.0.0.1, 127.0.0.1\npg_port = %d, %d\n"
#define TWO_HOSTS_ONE_PORT "pg_host = 127.0.0.1,127.0.0.1\npg_port = %d\n"

/* The primary and a synchronous standby: every COMMIT the primary
 * acknowledges is on the standby. The standby itself has no
 * synchronous_standby_names (ALTER SYSTEM comes after the base backup), so
 * once promoted, alone, it does not wait for anyone. */
static void
start_sync_standby(void)
{
	cr_assert_eq(test_pg_standby_start(&standby, &d.pg), 0);
	h_pg_exec(&d, "ALTER SYSTEM SET synchronous_standby_names = '*'");
	h_pg_exec(&d, "SELECT pg_reload_conf()");
	long long end = h_now_ms() + H_DEADLINE_MS;
	while (h_pg_int(&d, "SELECT count(*) FROM pg_stat_replication WHERE "
	    "sync_state = 'sync'") != 1) {
		cr_assert_lt(h_now_ms(), end, "the standby never became "
		    "synchronous");
		h_sleep_ms(50);
	}
}

/* 6,000 jobs; once 1,000 are done the primary stops -m immediate and,
 * after promote_after_ms, the standby is promoted: every job once in the
 * promoted standby's table, nothing dead, nothing retried. */
static void
failover(const char *extra, long promote_after_ms)
{
	int n = 6000;

	setup();
	/* init-db on the primary, before the standby copies it */
	config(ONE_HOST, d.pg.port, 0, NULL);
	ctl_init_db();
	start_sync_standby();
	config(TWO_HOSTS, d.pg.port, standby.port, extra);
	h_push_jobs(&d, "q", 0, n);
	h_start(&d, 2);
	long long end = h_now_ms() + H_DEADLINE_MS;
	while (h_redis_int(&d, "HGET ferry:{q}:stats done") < 1000) {
		cr_assert_lt(h_now_ms(), end, "too slow before the failover");
		h_sleep_ms(10);
	}
	cr_assert_eq(test_pg_kill_immediate(&d.pg), 0);
	long long killed = h_now_ms();
	cr_assert_lt(h_redis_int(&d, "HGET ferry:{q}:stats done"), n,
	    "all done before the failover: nothing tested");
	h_sleep_ms(promote_after_ms);
	cr_assert_eq(test_pg_promote(&standby), 0);
	/* the promoted standby is the database now */
	old_primary = d.pg;
	d.pg = standby;
	memset(&standby, 0, sizeof(standby));
	h_wait_redis_int(&d, n, "HGET ferry:{q}:stats done");
	cr_log_info("failover: %lld ms from the kill to all %d jobs done",
	    h_now_ms() - killed, n);
	cr_assert_eq(h_pg_int(&d, "SELECT count(*) FROM events"), n,
	    "a job is missing or was written twice");
	cr_assert_eq(h_pg_int(&d, "SELECT count(DISTINCT n) FROM events"), n,
	    "some job was written twice");
	cr_assert_eq(h_pg_int(&d, "SELECT min(n) FROM events"), 0);
	cr_assert_eq(h_pg_int(&d, "SELECT max(n) FROM events"), n - 1);
	h_assert_queue_empty(&d, "q");
	cr_assert_eq(h_redis_int(&d, "LLEN ferry:{q}:dead"), 0);
	cr_assert_eq(h_redis_int(&d, "HGET ferry:{q}:stats retried"), 0,
	    "the failover spent attempts");
	cr_assert_eq(h_redis_int(&d, "HGET ferry:{q}:stats dead"), 0);
	/* synchronous at start: no warning then; the promoted standby has
	 * no standby of its own, and the workers say so */
	cr_assert_gt(h_count_in_file(d.log, "in a failover, a COMMIT the "
	    "primary acknowledged before its standby had it is lost"), 0,
	    "no warning about the unprotected new primary");
}

/* target_session_attrs=read-write (the default with two hosts): the
 * workers find the promoted standby. */
Test(pg_failover, sync_standby_promoted_every_job_once)
{
	failover(NULL, 500);
	h_stop(&d);
}

/* target_session_attrs=any: with the primary gone the workers reach the
 * standby before it is promoted, and its refusal to write (25006, read-only
 * transaction) is an outage like any other, not a failed job. */
Test(pg_failover, read_only_standby_is_an_outage)
{
	char log[300];

	failover("pg_target_session_attrs = any\n", 3000);
	snprintf(log, sizeof(log), "%s/postgres.log", d.pg.dir);
	cr_assert_gt(h_count_in_file(log, "read-only transaction"), 0,
	    "no worker met the read-only standby");
	cr_assert_gt(h_count_in_file(d.log, "25006"), 0);
	h_stop(&d);
}

/* Asynchronous commits (the default) with two hosts: ferryd warns once
 * at start, naming what a failover loses; it starts and writes. */
Test(pg_failover, async_commits_with_two_hosts_warn)
{
	setup();
	config(TWO_HOSTS_ONE_PORT, d.pg.port, 0, NULL);
	ctl_init_db();
	h_push_jobs(&d, "q", 0, 100);
	h_start(&d, 2);
	h_wait_redis_int(&d, 100, "HGET ferry:{q}:stats done");
	cr_assert_eq(h_count_in_file(d.log, "commits do not wait for a standby "
	    "(synchronous_standby_names is empty): in a failover, a COMMIT the "
	    "primary acknowledged before its standby had it is lost, and ferry "
	    "has already acked its jobs in Redis: those jobs are lost"), 1,
	    "not one warning (the master's, at start)");
	cr_assert_eq(h_pg_int(&d, "SELECT count(*) FROM events"), 100);
	h_stop(&d);
}

/* One host: nothing to fail over to, no warning. */
Test(pg_failover, one_host_no_warning)
{
	setup();
	config(ONE_HOST, d.pg.port, 0, NULL);
	ctl_init_db();
	h_start(&d, 2);
	cr_assert_eq(h_count_in_file(d.log, "do not wait for a standby"), 0);
	h_stop(&d);
}

/* require_sync_commit = yes and asynchronous commits: ferryd does not
 * start (exit 1, the reason on stderr). */
Test(pg_failover, require_sync_commit_refuses_async)
{
	char *out;

	setup();
	config(TWO_HOSTS_ONE_PORT, d.pg.port, 0, "require_sync_commit = yes\n");
	ctl_init_db();
	int status = h_run_ferryd((const char *const[]){ "-f", "-c", d.config,
	    NULL }, &out);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 1,
	    "status %d: %s", status, out);
	cr_assert(strstr(out, "ferryd: queue q: postgres 127.0.0.1 (port ") !=
	    NULL, "%s", out);
	cr_assert(strstr(out, "commits do not wait for a standby "
	    "(synchronous_standby_names is empty) and require_sync_commit = "
	    "yes: refused") != NULL, "%s", out);
	cr_assert(strstr(out, "not started") != NULL, "%s", out);
	free(out);
	/* with a synchronous standby it starts */
	start_sync_standby();
	h_start(&d, 2);
	h_push_jobs(&d, "q", 0, 50);
	h_wait_redis_int(&d, 50, "HGET ferry:{q}:stats done");
	h_stop(&d);
}
