/* test_kill_waiting.c - a worker killed with SIGKILL (an OOM kill, a
 * deploy, an operator) while its batch waits for a server: PostgreSQL down
 * or its table gone (HANDLER_WAIT), Redis gone while the batch is to be
 * settled or read back, the replicas behind. Its jobs are handed back
 * stamped but without a recovery, however often it happens: none is buried
 * or dead for it, and each is written once. A worker killed while it may
 * be running its batch still gives it one (doc/design.md, R23). */
#include <criterion/criterion.h>
#include <libpq-fe.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

#include "harness.h"
#include "pg_events.h"

static struct ferryd d;
static struct test_redis replica;

static void
teardown(void)
{
	if (replica.pid > 0)
		test_redis_stop(&replica);
	h_teardown(&d);
}

TestSuite(kill_waiting, .fini = teardown, .timeout = 600);

#define JOBS 10                 /* one batch */
#define BURY_MARGIN 3           /* src/redis/lua/common.lua */
/* kills while waiting: each one that gave a recovery would bring the jobs
 * nearer to a bury, and past max_recoveries + BURY_MARGIN the hand-back
 * would dead-letter them unchecked */
#define KILLS(max_recoveries) ((max_recoveries) + BURY_MARGIN + 1)
#define WAITING(what) "ferryd: worker q/1 waiting for " what

static const char *const aof[] = { "--appendonly", "yes", "--appendfsync",
	"always", NULL };

/* Queue q into events: one worker (restarted at once when killed),
 * batches of JOBS, max_recoveries; Redis keeps its data over a kill -9. */
static void
setup(int max_recoveries, const char *ferryd_extra, const char *queue_extra)
{
	char global[256], queue[256];

	snprintf(global, sizeof(global), "restart_backoff_min = 10ms\n"
	    "restart_backoff_max = 100ms\n%s", ferryd_extra);
	snprintf(queue, sizeof(queue), "workers = 1\nbatch_size = %d\n"
	    "max_recoveries = %d\n%s", JOBS, max_recoveries, queue_extra);
	pe_setup_redis(&d, aof, global, queue);
	cr_assert_eq(pe_ctl(&d, "init-db", NULL), 0);
}

/* After the n-th kill: every job handed back (counted recovered: its
 * worker died) and held again, each recovered `recoveries` times. */
static void
handed_back(int n, int recoveries)
{
	h_wait_redis_int(&d, (long long)JOBS * n,
	    "HGET ferry:{q}:stats recovered");
	int held = h_held_jobs(&d, "q", recoveries);
	cr_assert_eq(held, JOBS, "after kill %d, %d of %d jobs held with %d "
	    "recoveries (%d with one more)", n, held, JOBS, recoveries,
	    h_held_jobs(&d, "q", recoveries + 1));
}

/* On c, a transaction holding ferry_batches in SHARE mode: a batch's own
 * row and the fences of its stamps (INSERTs) wait for it, the worker
 * inside its handler. */
static void
lock_batches(PGconn *c)
{
	h_pq_exec(c, "BEGIN");
	h_pq_exec(c, "LOCK TABLE ferry_batches IN SHARE MODE");
}

static PGconn *
batches_locked(void)
{
	PGconn *c = PQconnectdb(d.pg.conninfo);

	cr_assert_eq(PQstatus(c), CONNECTION_OK, "%s", PQerrorMessage(c));
	lock_batches(c);
	return c;
}

/* Wait until the worker's handler waits for that lock. */
static void
wait_for_the_lock(void)
{
	h_wait_pg_int(&d, 1, "SELECT count(*) FROM pg_locks WHERE relation = "
	    "'ferry_batches'::regclass AND NOT granted");
}

/* PostgreSQL stopped, then back without the table (renamed away): the
 * batch waits out the outage in its worker (waiting-postgres), which is
 * killed each time it waits, KILLS(1) times; the next worker takes the
 * batch back and waits in turn. No kill counts a recovery. Then the table
 * is back and the worker that waited runs the batch again, its fences held
 * up by a lock: killed now, it may be writing the batch, and the jobs are
 * recovered once (max_recoveries = 1: they still run). Each is written
 * once. Given a recovery each time they waited, they would have been
 * buried, and then dead-lettered unchecked by the hand-back. */
static void
outage_kills(const char *pipeline)
{
	char queue[64];

	snprintf(queue, sizeof(queue), "pipeline = %s\n", pipeline);
	setup(1, "", queue);
	h_start(&d, 1);
	h_wait_blocked(&d, 1);      /* idle, in BLMOVE */
	h_pg_exec(&d, "ALTER TABLE events RENAME TO events_away");
	cr_assert_eq(test_pg_pause(&d.pg), 0);
	h_push_jobs(&d, "q", 0, JOBS);
	for (int n = 1; n <= KILLS(1); n++) {
		if (n == KILLS(1))   /* the server back, the table not */
			cr_assert_eq(test_pg_resume(&d.pg), 0);
		h_kill_worker_in(&d, WAITING("postgres"));
		handed_back(n, 0);
	}
	h_wait_worker(&d, WAITING("postgres"));
	PGconn *lock = batches_locked();
	h_pg_exec(&d, "ALTER TABLE events_away RENAME TO events");
	wait_for_the_lock();
	h_kill_worker_in(&d, "ferryd: worker q/1 busy");
	handed_back(KILLS(1) + 1, 1);
	PQfinish(lock);
	h_wait_redis_int(&d, JOBS, "HGET ferry:{q}:stats done");
	pe_assert_rows_once(&d, JOBS);
	h_stop(&d);
}

Test(kill_waiting, postgres_outage_gives_no_recovery)
{
	outage_kills("no");
}

/* ... with lanes: the lane whose batch waits is not busy meanwhile. */
Test(kill_waiting, postgres_outage_with_lanes_gives_no_recovery)
{
	outage_kills("yes");
}

/* The batch committed (or, run again, found committed by its fences), its
 * settle waiting for Redis (killed while the handler was held up by a
 * lock): the worker reconnects to settle (waiting-redis) and is killed,
 * KILLS(0) times. With max_recoveries = 0 one recovery would bury the
 * jobs (done all the same: their batch committed), and the last kills
 * would dead-letter them, unchecked, although written. */
Test(kill_waiting, reconnecting_to_settle_gives_no_recovery)
{
	setup(0, "", "pipeline = no\n");
	PGconn *lock = batches_locked();
	h_push_jobs(&d, "q", 0, JOBS);
	h_start(&d, 1);
	for (int n = 1; n <= KILLS(0); n++) {
		wait_for_the_lock();
		test_redis_kill9(&d.redis);
		h_pq_exec(lock, "ROLLBACK");    /* the batch goes on */
		h_kill_worker_in(&d, WAITING("redis"));
		lock_batches(lock);             /* for the next worker */
		cr_assert_eq(test_redis_restart(&d.redis, aof), 0);
		handed_back(n, 0);
	}
	PQfinish(lock);
	h_wait_redis_int(&d, JOBS, "HGET ferry:{q}:stats done");
	pe_assert_rows_once(&d, JOBS);
	h_stop(&d);
}

/* The worker stops itself right after each fetch (test hook) and Redis is
 * killed meanwhile: let go, it reads the jobs' cache keys (hashes in the
 * queue's cache space), loses its connection, and reconnects to read its
 * list back (waiting-redis), where it is killed, KILLS(0) times. */
Test(kill_waiting, reconnecting_to_resume_gives_no_recovery)
{
	char hook[400], env[450];

	setup(0, "", "pipeline = no\n");
	snprintf(hook, sizeof(hook), "%s/freeze-after-fetch", d.dir);
	snprintf(env, sizeof(env), "FERRY_TEST_FREEZE_AFTER_FETCH=%s", hook);
	putenv(env);
	setenv("FERRYD", TEST_BUILDDIR "/tests/ferryd-hooks", 1);
	for (int i = 0; i < JOBS; i++) {
		freeReplyObject(h_redis(&d, "HSET ferry:{q}:cache:c%d n %d", i,
		    i));
		freeReplyObject(h_redis(&d, "LPUSH ferry:{q}:ready "
		    "{\"cache_key\":\"ferry:{q}:cache:c%d\"}", i));
	}
	h_write_file(hook, "once\n");
	h_start(&d, 1);
	for (int n = 1; n <= KILLS(0); n++) {
		pid_t w = h_wait_worker(&d, "ferryd: worker q/1 ");
		h_wait_stopped(&d, w, true);
		test_redis_kill9(&d.redis);
		kill(w, SIGCONT);
		h_kill_worker_in(&d, WAITING("redis"));
		if (n < KILLS(0))
			h_write_file(hook, "once\n");  /* the next worker's */
		cr_assert_eq(test_redis_restart(&d.redis, aof), 0);
		handed_back(n, 0);
	}
	h_wait_redis_int(&d, JOBS, "HGET ferry:{q}:stats done");
	unsetenv("FERRY_TEST_FREEZE_AFTER_FETCH");
	unsetenv("FERRYD");
	pe_assert_rows_once(&d, JOBS);
	h_stop(&d);
}

/* redis_wait_replicas = 1 with no replica: the batch waits, unrun
 * (waiting-replicas), and the worker is killed; or Redis is killed during
 * that wait and the worker, its connection gone, reconnects to read its
 * list back (waiting-redis), and is killed. KILLS(0) kills, none counts a
 * recovery. Once a replica follows, each job is written once. */
Test(kill_waiting, waiting_for_replicas_gives_no_recovery)
{
	char port[16];

	setup(0, "redis_wait_replicas = 1\nredis_wait_timeout = 100ms\n",
	    "pipeline = no\n");
	h_push_jobs(&d, "q", 0, JOBS);
	h_start(&d, 1);
	for (int n = 1; n <= KILLS(0); n++) {
		if (n % 2 == 0) {
			h_wait_worker(&d, WAITING("replicas"));
			test_redis_kill9(&d.redis);
			h_kill_worker_in(&d, WAITING("redis"));
			cr_assert_eq(test_redis_restart(&d.redis, aof), 0);
		} else {
			h_kill_worker_in(&d, WAITING("replicas"));
		}
		handed_back(n, 0);
	}
	snprintf(port, sizeof(port), "%d", d.redis.port);
	cr_assert_eq(test_redis_start(&replica, (const char *const[]){
	    "--replicaof", "127.0.0.1", port, NULL }), 0);
	h_wait_redis_int(&d, JOBS, "HGET ferry:{q}:stats done");
	pe_assert_rows_once(&d, JOBS);
	h_stop(&d);
}
