/* test_sentinel.c - a postgres queue on a Redis primary with two replicas
 * and three sentinels (redis_sentinels, redis_wait_replicas = 1): the
 * primary killed -9 under load, a SENTINEL FAILOVER under load (the old
 * primary stays up as a replica) and one while the workers wait in BLMOVE,
 * and the replicas frozen before the primary dies: ferry follows the new
 * primary, every job whose enqueue reached a replica is in PostgreSQL
 * exactly once, nothing dead, no attempt spent. Without WAIT, the last
 * case writes jobs twice: the hazard redis_wait_replicas closes. */
#include <criterion/criterion.h>
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "harness.h"
#include "servers_ha.h"

static struct ferryd d;
static struct test_redis rep[2];
static struct test_sentinels ss;
static char redis_lines[512];

static void
teardown(void)
{
	h_teardown(&d);
	for (int i = 0; i < 2; i++)
		test_redis_stop(&rep[i]);
	test_sentinels_stop(&ss);
}

TestSuite(sentinel, .fini = teardown, .timeout = 600);

#define QUEUE "[queue q]\nhandler = postgres\ntable = events\n" \
	"columns = n\nworkers = 2\nbatch_size = 20\nmax_attempts = 1\n"

static const char *queue_lines = QUEUE;   /* setup's queue */

static const char *const fast_sync[] = { "--repl-diskless-sync", "yes",
	"--repl-diskless-sync-delay", "0", NULL };

/* Primary (d.redis), two replicas, three sentinels (quorum 2), a
 * PostgreSQL with table events, and the config: ferryd asks the sentinels;
 * `extra` adds [ferryd] lines. */
static void
setup(const char *extra)
{
	char global[1024];
	struct h_run r;

	h_setup_redis(&d, NULL, "", fast_sync);
	for (int i = 0; i < 2; i++)
		cr_assert_eq(test_redis_replica_start(&rep[i], &d.redis,
		    fast_sync), 0);
	cr_assert_eq(test_sentinels_start(&ss, 3, "m", d.redis.port, 2, 1000,
	    5000, 2), 0);
	snprintf(redis_lines, sizeof(redis_lines), "redis_sentinels = "
	    "127.0.0.1:%d, 127.0.0.1:%d, 127.0.0.1:%d\n"
	    "redis_sentinel_master = m\n", ss.s[0].port, ss.s[1].port,
	    ss.s[2].port);
	d.redis_lines = redis_lines;
	const char *pg = h_pg_start(&d);
	h_pg_exec(&d, "CREATE TABLE events (n bigint)");
	snprintf(global, sizeof(global), "%srestart_backoff_min = 10ms\n%s", pg,
	    extra != NULL ? extra : "");
	h_config(&d, global, queue_lines);
	cr_assert_eq(h_ctl(&r, d.config, NULL, "init-db", NULL), 0, "%s%s",
	    r.out, r.err);
	h_run_free(&r);
}

#define WAIT_ONE "redis_wait_replicas = 1\nredis_wait_timeout = 300ms\n"
#define WAIT_ALL "redis_wait_replicas = 2\nredis_wait_timeout = 300ms\n"

/* n jobs on the primary, on both replicas before anything runs. */
static void
push(int first, int n)
{
	h_push_jobs(&d, "q", first, n);
	cr_assert_eq(h_redis_int(&d, "WAIT 2 10000"), 2,
	    "the enqueues did not reach both replicas");
}

/* Wait until at least `want` jobs are done on the primary. */
static void
wait_done(long long want, const char *why)
{
	long long end = h_now_ms() + H_DEADLINE_MS;

	while (h_redis_int(&d, "HGET ferry:{q}:stats done") < want) {
		cr_assert_lt(h_now_ms(), end, "%s", why);
		h_sleep_ms(5);
	}
}

/* After a failover away from old_port: wait until every sentinel names the
 * new primary, point the test's connection at it, and return its port. */
static int
follow(int old_port)
{
	long long end = h_now_ms() + 30000;
	int port;

	while ((port = test_sentinels_master_port(&ss)) == old_port ||
	    port < 0) {
		cr_assert_lt(h_now_ms(), end, "the sentinels promoted nobody");
		h_sleep_ms(20);
	}
	cr_assert_eq(test_sentinels_wait_master(&ss, port, 30000), 0);
	/* h_redis reconnects to d.redis.port after a dropped connection (the
	 * sentinels of a loaded machine may fail over once more on their
	 * own): the new primary's, then; the old server is stopped by pid */
	d.redis.port = port;
	redisFree(d.rc);
	struct timeval tv = { 10, 0 };
	d.rc = redisConnectWithTimeout("127.0.0.1", port, tv);
	cr_assert(d.rc != NULL && d.rc->err == 0);
	return port;
}

/* The new primary's done counter moves: the time it took since `since`.
 * The workers may find the new primary before every sentinel names it (all
 * that follow() waits for) and finish all n jobs first: then the counter
 * never moves again, and the time is an upper bound. */
static long long
first_done_after(long long since, int n)
{
	long long base = h_redis_int(&d, "HGET ferry:{q}:stats done");
	long long end = h_now_ms() + 30000;

	while (base < n &&
	    h_redis_int(&d, "HGET ferry:{q}:stats done") == base) {
		cr_assert_lt(h_now_ms(), end, "no job done on the new primary");
		h_sleep_ms(5);
	}
	return h_now_ms() - since;
}

/* Every one of n jobs once in events, nothing dead, nothing retried, the
 * queue empty on the new primary. */
static void
assert_once(int n)
{
	h_wait_redis_int(&d, n, "HGET ferry:{q}:stats done");
	cr_assert_eq(h_pg_int(&d, "SELECT count(DISTINCT n) FROM events"), n,
	    "a job is missing");
	cr_assert_eq(h_pg_int(&d, "SELECT count(*) FROM events"), n,
	    "a job was written twice");
	cr_assert_eq(h_pg_int(&d, "SELECT max(n) FROM events"), n - 1);
	h_assert_queue_empty(&d, "q");
	cr_assert_eq(h_redis_int(&d, "LLEN ferry:{q}:dead"), 0);
	cr_assert_eq(h_redis_int(&d, "HGET ferry:{q}:stats retried"), 0,
	    "the failover spent attempts");
}

/* kill -9 of the primary once 1,000 of 6,000 jobs are done. */
Test(sentinel, primary_killed_every_job_once)
{
	int n = 6000, old = 0;

	setup(WAIT_ONE);
	push(0, n);
	h_start(&d, 2);
	wait_done(1000, "too slow before the failover");
	old = d.redis.port;
	test_redis_kill9(&d.redis);
	long long killed = h_now_ms();
	follow(old);
	long long first = first_done_after(killed, n);
	assert_once(n);
	fprintf(stderr, "sentinel: kill -9 of the primary: first job done on the "
	    "new primary %lld ms after the kill, all %d done %lld ms after\n",
	    first, n, h_now_ms() - killed);
	/* the workers may have finished every job before the master's own
	 * connection followed (it retries on its own clock): wait for it */
	h_wait_log(&d, "redis primary of m moved from 127.0.0.1:", 1);
	cr_assert_eq(h_count_in_file(d.log, "min-replicas-to-write is 0: a "
	    "primary cut off from its replicas keeps taking enqueues"), 1,
	    "the start check did not say what min-replicas-to-write 0 means");
	h_stop(&d);
}

/* SENTINEL FAILOVER under load: the old primary is demoted (its writes
 * refused with READONLY) and stays up as a replica of the new one. Until
 * the sentinels demote it, it takes writes that the other replica
 * acknowledges and then discards when it follows the new primary: only
 * WAIT for every replica (here 2) keeps a batch from running on them. */
Test(sentinel, forced_failover_every_job_once)
{
	int n = 30000;

	setup(WAIT_ALL);
	push(0, n);
	h_start(&d, 2);
	wait_done(1000, "too slow before the failover");
	int old = d.redis.port;
	long long started = h_now_ms();
	cr_assert_eq(test_sentinels_failover(&ss), 0);
	cr_assert_lt(h_redis_int(&d, "HGET ferry:{q}:stats done"), n,
	    "all done before the failover: nothing tested");
	follow(old);
	fprintf(stderr, "sentinel: SENTINEL FAILOVER: first job done on the new "
	    "primary %lld ms after it\n", first_done_after(started, n));
	assert_once(n);
	cr_assert_eq(test_redis_wait_role(old, "slave", 30000), 0,
	    "the old primary did not become a replica");
	h_stop(&d);
}

/* ferryctl enqueue --wait of 30,000 jobs on a queue that keeps ids, a
 * SENTINEL FAILOVER during its calls: a call counts as answered only once
 * both replicas have it (WAIT after each call); one the old primary took
 * after the promotion (WAIT fails, READONLY, or the connection closed) is
 * sent again to the primary the sentinels name, and the wait ends with
 * every job written once. */
Test(sentinel, enqueue_through_a_failover_every_job_once)
{
	char input[300], outp[300], errp[300];
	int n = 30000, status;

	queue_lines = QUEUE "idempotency_window = 10m\n";
	setup(WAIT_ALL);        /* WAIT 1 of 2: see doc/redis.md's table */
	h_start(&d, 2);
	snprintf(input, sizeof(input), "%s/jobs.jsonl", d.dir);
	snprintf(outp, sizeof(outp), "%s/ctl.out", d.dir);
	snprintf(errp, sizeof(errp), "%s/ctl.err", d.dir);
	FILE *f = fopen(input, "w");
	cr_assert_not_null(f);
	for (int i = 0; i < n; i++)
		fprintf(f, "{\"id\":\"e%d\",\"n\":%d}\n", i, i);
	fclose(f);
	pid_t pid = h_ctl_spawn(d.config, input, outp, errp, "enqueue", "-q",
	    "--wait", "5m", "q", "-", NULL);
	while (h_redis_int(&d, "ZCARD ferry:{q}:ids") < 3000)
		h_sleep_ms(1);
	int old = d.redis.port;
	cr_assert_eq(test_sentinels_failover(&ss), 0);
	follow(old);
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	char *err = h_read_file(errp);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "exit %d: %s",
	    status, err);
	cr_assert_not_null(strstr(err, "30000 done, 0 dead, 0 pending, 0 "
	    "unknown"), "%s", err);
	fprintf(stderr, "sentinel: enqueue through a failover: %s", err);
	free(err);
	assert_once(n);
	h_stop(&d);
}

/* The workers wait in BLMOVE when the primary is demoted: Redis unblocks
 * them (UNBLOCKED) or the master's +switch-master sends them over; jobs
 * pushed to the new primary are all written once. */
Test(sentinel, failover_while_blocked_in_blmove)
{
	int n = 500;

	setup(WAIT_ONE);
	h_start(&d, 2);
	h_wait_blocked(&d, 2);
	int old = d.redis.port;
	cr_assert_eq(test_sentinels_failover(&ss), 0);
	follow(old);
	push(0, n);
	assert_once(n);
	cr_assert_eq(h_count_in_file(d.log, "the primary moved from") +
	    h_count_in_file(d.log, "following the redis primary from"), 2,
	    "not both workers said they followed the primary");
	h_stop(&d);
}

/* Every sentinel down when ferryd starts: it starts (an outage, said
 * once per process), and once two are back the jobs are done once; one
 * sentinel that stays dead costs only its timeout. */
Test(sentinel, dead_sentinels_are_an_outage)
{
	int n = 500;

	setup(WAIT_ONE);
	push(0, n);
	for (int i = 0; i < 3; i++)
		test_sentinel_kill9(&ss.s[i]);
	h_start(&d, 2);
	h_wait_log(&d, "none of 3 sentinels gave a primary for m", 3);
	h_sleep_ms(500);
	cr_assert_eq(h_redis_int(&d, "HGET ferry:{q}:stats done"), 0);
	for (int i = 1; i < 3; i++)
		cr_assert_eq(test_sentinel_restart(&ss.s[i]), 0);
	assert_once(n);
	h_stop(&d);
}

/* Cut both replicas off the primary for good: frozen (SIGSTOP), they
 * would still read what the kernel buffered for them once thawed, so the
 * primary is made to drop their links first (a write far over a 1 MB
 * replica output buffer limit). They keep the state from before. */
static void
cut_replicas(void)
{
	size_t big = 8u << 20;
	char *junk = malloc(big);

	cr_assert_not_null(junk);
	memset(junk, 'x', big);
	freeReplyObject(h_redis(&d, "CONFIG SET client-output-buffer-limit "
	    "%s", "replica 1mb 0 0"));
	for (int i = 0; i < 2; i++)
		cr_assert_eq(test_redis_sigstop(&rep[i]), 0);
	freeReplyObject(h_redis(&d, "SET ferry-test:junk %b", junk, big));
	free(junk);
	long long end = h_now_ms() + H_DEADLINE_MS;
	for (;;) {
		redisReply *r = h_redis(&d, "INFO replication");
		bool cut = strstr(r->str, "connected_slaves:0") != NULL;
		freeReplyObject(r);
		if (cut)
			break;
		cr_assert_lt(h_now_ms(), end, "the primary kept its replicas");
		h_sleep_ms(20);
	}
}

/* Both replicas cut off before ferryd starts; it runs for 2 s, then the
 * primary is killed and the replicas thawed: one is promoted with the
 * state from before the cut, every job in ready. Fetches made on the
 * cut-off primary are lost with it; with redis_wait_replicas = 1 no batch
 * ran on them. Returns how many jobs the cut-off primary counted done. */
static long long
frozen_replicas_then_kill(const char *extra, int n)
{
	setup(extra);
	push(0, n);
	cut_replicas();
	h_start(&d, 2);
	h_sleep_ms(2000);
	long long done = h_redis_int(&d, "HGET ferry:{q}:stats done");
	int old = d.redis.port;
	test_redis_kill9(&d.redis);
	for (int i = 0; i < 2; i++)
		cr_assert_eq(test_redis_sigcont(&rep[i]), 0);
	follow(old);
	h_wait_redis_int(&d, n, "HGET ferry:{q}:stats done");
	cr_assert_eq(h_pg_int(&d, "SELECT count(DISTINCT n) FROM events"), n,
	    "a job is missing");
	return done;
}

Test(sentinel, frozen_replicas_with_wait_every_job_once)
{
	cr_assert_eq(frozen_replicas_then_kill(WAIT_ONE, 6000), 0,
	    "batches ran on a primary cut off from its replicas");
	cr_assert_gt(h_count_in_file(d.log, "reached 0 of 1 replicas"), 0);
	assert_once(6000);
	h_stop(&d);
}

/* The same without redis_wait_replicas: the cut-off primary runs every
 * job, the failover forgets it, and the new primary runs them all again:
 * each row twice. What doc/redis.md's table says a failover costs without
 * WAIT, shown to be real. */
Test(sentinel, frozen_replicas_without_wait_write_twice)
{
	int n = 3000;

	cr_assert_eq(frozen_replicas_then_kill(NULL, n), n,
	    "the cut-off primary did not run every job in 2 s");
	cr_assert_eq(h_pg_int(&d, "SELECT count(*) FROM events"), 2 * n,
	    "%lld rows, %lld of them distinct, %lld done on the new primary",
	    h_pg_int(&d, "SELECT count(*) FROM events"),
	    h_pg_int(&d, "SELECT count(DISTINCT n) FROM events"),
	    h_redis_int(&d, "HGET ferry:{q}:stats done"));
	h_stop(&d);
}
