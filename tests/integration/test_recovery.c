/* test_recovery.c - the failures ferry exists for: a whole host dying, Redis
 * killed and restarted, graceful and fast stops, a hung worker. Each test
 * counts every job at the end. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

static struct ferryd d, d2;

static void
teardown(void)
{
	h_teardown(&d2);
	h_teardown(&d);
}

TestSuite(recovery, .fini = teardown, .timeout = 600);

/* An exec handler that sleeps `secs` per batch, then records and acks. */
static void
slow_recorder(struct ferryd *f, const char *secs, char *cmd, size_t size)
{
	char path[400];

	snprintf(path, sizeof(path), "%s/slow.sh", f->dir);
	h_write_file(path,
	    "#!/bin/sh\n"
	    "sleep %s\n"
	    "exec awk -F'\"' -v out=%s/done.txt '{ print $0 >> out; "
	    "print \"ok \" $4; fflush() }'\n", secs, f->dir);
	chmod(path, 0755);
	snprintf(cmd, size, "%s", path);
}

/* Wait until some processing list of q holds jobs; its name in key. */
static void
wait_held(struct ferryd *f, const char *q, char *key, size_t size)
{
	long long end = h_now_ms() + H_DEADLINE_MS;

	while (h_now_ms() < end) {
		redisReply *r = h_redis(f, "KEYS ferry:{%s}:proc:*", q);
		for (size_t i = 0; i < r->elements; i++) {
			if (h_redis_int(f, "LLEN %s", r->element[i]->str) > 0) {
				snprintf(key, size, "%s", r->element[i]->str);
				freeReplyObject(r);
				return;
			}
		}
		freeReplyObject(r);
		h_sleep_ms(10);
	}
	h_dump_log(f);
	cr_assert_fail("no worker of %s ever held a batch", q);
}

/* What start_holding sets up. */
struct holding {
	const char *secs;       /* the exec handler sleeps this long a batch */
	int workers, batch, jobs;
	const char *ferryd_extra, *queue_extra;
	bool peer;              /* d2: a second host on d's redis-server */
};

/* d serves queue q with the workers of an exec handler that sleeps
 * h->secs per batch; h->jobs jobs are pushed; returns once a worker holds
 * a batch (its processing list in held). */
static void
start_holding(const struct holding *h, char *held, size_t size)
{
	char cmd[400], queues[800];

	h_setup(&d, h->ferryd_extra, "");
	slow_recorder(&d, h->secs, cmd, sizeof(cmd));
	snprintf(queues, sizeof(queues), "[queue q]\nworkers = %d\n"
	    "batch_size = %d\nhandler = exec\ncommand = %s\n%s", h->workers,
	    h->batch, cmd, h->queue_extra ? h->queue_extra : "");
	h_config(&d, h->ferryd_extra, queues);
	if (h->peer)
		h_setup_peer(&d2, &d, h->ferryd_extra, queues);
	h_push_jobs(&d, "q", 0, h->jobs);
	h_start(&d, h->workers);
	wait_held(&d, "q", held, size);
}

/* Send sig to the master; it must exit 0. */
static void
stop_master(int sig)
{
	kill(d.pid, sig);
	int status = h_wait_exit(d.pid, H_DEADLINE_MS);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	    "status %d", status);
	d.pid = 0;
}

/* Two masters serve one queue; one host dies (master stopped, workers
 * killed, then the master killed): the other reaps its processing lists
 * once the dead master's heartbeat deadline passes, and finishes every
 * job. */
Test(recovery, dead_host_is_reaped_by_the_other_master)
{
	char held[256];
	pid_t pids[H_MAX_PIDS];

	start_holding(&(struct holding){ .secs = "0.1", .workers = 2,
	    .batch = 20, .jobs = 1000, .peer = true, .ferryd_extra =
	    "heartbeat_ttl = 1s\nreaper_interval = 500ms\n" }, held,
	    sizeof(held));

	kill(d.pid, SIGSTOP);           /* the host freezes... */
	int n = h_children(d.pid, pids, H_MAX_PIDS);
	for (int i = 0; i < n; i++)
		kill(pids[i], SIGKILL);
	kill(d.pid, SIGKILL);           /* ...and dies */
	waitpid(d.pid, NULL, 0);
	d.pid = 0;
	long long died = h_now_ms();
	cr_assert_gt(h_redis_int(&d, "LLEN %s", held), 0);

	h_start(&d2, 2);
	h_wait_redis_int(&d, 0, "EXISTS %s", held);
	long long reaped_ms = h_now_ms() - died;
	h_wait_log(&d2, "reaper: ", 1);
	h_wait_redis_int(&d, 1000, "HGET ferry:{q}:stats done");
	cr_assert_eq(h_distinct_done(&d, 1000), 1000);
	h_assert_queue_empty(&d, "q");
	cr_assert_eq(h_redis_int(&d, "LLEN ferry:{q}:dead"), 0);
	cr_assert_gt(h_redis_int(&d, "HGET ferry:{q}:stats recovered"), 0);
	/* only the live host's two workers are left as owners */
	cr_assert_eq(h_live_owners(&d, "q"), 2);
	/* heartbeat_ttl + reaper_interval = 1.5 s; generous for a slow box */
	cr_assert_lt(reaped_ms, 15000, "reaped after %lld ms", reaped_ms);
	h_stop(&d2);
	h_stop(&d);
}

/* Redis killed with SIGKILL mid-run (AOF, fsync always) and restarted on
 * the same port: the workers and the master reconnect, nothing is lost,
 * nothing is counted twice. */
Test(recovery, redis_killed_and_restarted)
{
	const char *aof[] = { "--appendonly", "yes", "--appendfsync", "always",
	    NULL };
	char cmd[400], queues[800];

	h_setup_redis(&d, NULL, "", aof);
	h_write_recorder(&d, cmd, sizeof(cmd));
	snprintf(queues, sizeof(queues), "[queue q]\nworkers = 2\n"
	    "batch_size = 20\nhandler = exec\ncommand = %s\n", cmd);
	h_config(&d, NULL, queues);
	h_push_jobs(&d, "q", 0, 3000);
	h_start(&d, 2);
	long long end = h_now_ms() + H_DEADLINE_MS;
	while (h_redis_int(&d, "HGET ferry:{q}:stats done") < 300 &&
	    h_now_ms() < end)
		h_sleep_ms(5);
	test_redis_kill9(&d.redis);
	h_wait_log(&d, "lost during", 1);       /* a worker saw it go */
	cr_assert_eq(test_redis_restart(&d.redis, aof), 0);
	h_wait_redis_int(&d, 3000, "HGET ferry:{q}:stats done");
	cr_assert_eq(h_distinct_done(&d, 3000), 3000);
	h_assert_queue_empty(&d, "q");
	cr_assert_eq(h_redis_int(&d, "LLEN ferry:{q}:dead"), 0);
	h_wait_log(&d, "redis reachable again", 1);
	h_stop(&d);
}

/* TERM: the batch in hand is finished, the rest stays in ready. */
Test(recovery, term_finishes_the_batch_in_hand)
{
	char held[256];

	start_holding(&(struct holding){ .secs = "1", .workers = 1, .batch = 10,
	    .jobs = 100 }, held, sizeof(held));
	stop_master(SIGTERM);
	long long done = h_redis_int(&d, "HGET ferry:{q}:stats done");
	cr_assert_eq(done, 10, "the batch in hand: %lld done", done);
	cr_assert_eq(h_distinct_done(&d, 100), 10);
	cr_assert_eq(h_redis_int(&d, "LLEN ferry:{q}:ready"), 90);
	cr_assert_eq(h_redis_int(&d, "EXISTS %s", held), 0);
	cr_assert_eq(h_live_owners(&d, "q"), 0);
	h_stop(&d);
}

/* QUIT: workers are killed now and their jobs handed back with no
 * recovery counted (the master killed them; they did not die), stamped
 * only with their batch key. */
Test(recovery, quit_hands_the_batch_back)
{
	char held[256];

	start_holding(&(struct holding){ .secs = "30", .workers = 2,
	    .batch = 10, .jobs = 100 }, held, sizeof(held));
	stop_master(SIGQUIT);
	long long requeued = h_redis_int(&d, "LLEN ferry:{q}:requeue");
	cr_assert_eq(h_redis_int(&d, "LLEN ferry:{q}:ready") + requeued, 100);
	cr_assert_gt(requeued, 0, "the held batches go to requeue");
	redisReply *r = h_redis(&d, "KEYS ferry:{q}:proc:*");
	cr_assert_eq(r->elements, 0, "a processing list is left");
	freeReplyObject(r);
	r = h_redis(&d, "LRANGE ferry:{q}:ready 0 -1");
	for (size_t i = 0; i < r->elements; i++)
		cr_assert(strncmp(r->element[i]->str, "{\"n\":", 5) == 0,
		    "job changed: %s", r->element[i]->str);
	freeReplyObject(r);
	r = h_redis(&d, "LRANGE ferry:{q}:requeue 0 -1");
	for (size_t i = 0; i < r->elements; i++)
		cr_assert(strncmp(r->element[i]->str, "{\"ferry\":1,"
		    "\"recoveries\":0,\"attempts\":0,\"stamps\":[", 49) == 0,
		    "not stamped, or a recovery counted: %s", r->element[i]->str);
	freeReplyObject(r);
	cr_assert_eq(h_live_owners(&d, "q"), 0);
	h_stop(&d);
}

/* A worker stuck in its batch (stopped with SIGSTOP) past job_timeout is
 * killed by the master; its jobs come back and are done by the next one. */
Test(recovery, hung_worker_is_killed_after_job_timeout)
{
	char held[256];
	pid_t pids[H_MAX_PIDS];

	start_holding(&(struct holding){ .secs = "0.3", .workers = 1,
	    .batch = 10, .jobs = 50, .ferryd_extra = "kill_grace = 300ms\n",
	    .queue_extra = "handler_timeout = 900ms\njob_timeout = 1s\n" },
	    held, sizeof(held));
	cr_assert_eq(h_children(d.pid, pids, H_MAX_PIDS), 1);
	kill(pids[0], SIGSTOP);
	h_wait_stopped(&d, pids[0], true);
	h_wait_log(&d, "over job_timeout", 1);
	h_wait_log(&d, "sending SIGKILL", 1);
	h_wait_redis_int(&d, 50, "HGET ferry:{q}:stats done");
	cr_assert_eq(h_distinct_done(&d, 50), 50);
	h_assert_queue_empty(&d, "q");
	cr_assert_geq(h_redis_int(&d, "HGET ferry:{q}:stats recovered"), 1);
	h_stop(&d);
}

/* A worker frozen right after a fetch moved jobs into its list, before its
 * batch clock starts (test hook: it stops itself there), is stopped by the
 * master once job_timeout has passed since the fetch: its jobs come back
 * and are done once each. Without the fetch clock they would stay in the
 * list of a stopped process for ever. */
Test(recovery, worker_frozen_between_fetch_and_batch_is_killed)
{
	char cmd[400], queues[800], hook[400], env[450];

	h_setup(&d, "kill_grace = 300ms\n", "");
	slow_recorder(&d, "0", cmd, sizeof(cmd));
	snprintf(queues, sizeof(queues), "[queue q]\nworkers = 1\n"
	    "batch_size = 10\nhandler = exec\ncommand = %s\n"
	    "handler_timeout = 900ms\njob_timeout = 1s\n", cmd);
	h_config(&d, "kill_grace = 300ms\n", queues);
	snprintf(hook, sizeof(hook), "%s/freeze-after-fetch", d.dir);
	h_write_file(hook, "once\n");
	snprintf(env, sizeof(env), "FERRY_TEST_FREEZE_AFTER_FETCH=%s", hook);
	putenv(env);
	/* the installed ferryd has no fault points: the tests' one has */
	setenv("FERRYD", TEST_BUILDDIR "/tests/ferryd-hooks", 1);
	h_push_jobs(&d, "q", 0, 50);
	h_start(&d, 1);
	h_wait_log(&d, "test hook: freezing after a fetch of 10 jobs", 1);
	h_wait_log(&d, "has not come back from a fetch", 1);
	h_wait_log(&d, "sending SIGKILL", 1);
	h_wait_redis_int(&d, 50, "HGET ferry:{q}:stats done");
	unsetenv("FERRY_TEST_FREEZE_AFTER_FETCH");
	unsetenv("FERRYD");
	cr_assert_eq(h_distinct_done(&d, 50), 50);
	/* a fetch is held to 12 s at least (a stalled Redis), not 1 s */
	cr_assert_eq(h_count_in_file(d.log, "a fetch is given 12.0 s"), 1,
	    "only the frozen worker is stopped: %d", h_count_in_file(d.log,
	    "a fetch is given"));
	cr_assert_eq(h_count_in_file(d.log, "has run its batch"), 0);
	cr_assert_eq(h_redis_int(&d, "HGET ferry:{q}:stats recovered"), 10);
	h_assert_queue_empty(&d, "q");
	cr_assert_eq(access(hook, F_OK), -1, "the hook did not fire");
	h_stop(&d);
}

/* A fetch script that keeps failing (here `ready` is not a list) makes
 * the worker back off, up to 5 s between tries: that wait is not a fetch
 * that has not come back, so job_timeout = 1s does not kill it, and the
 * error is logged once while it repeats. Once the key is fixed, every job
 * is done once. */
Test(recovery, fetch_error_backoff_is_not_a_hung_fetch)
{
	h_setup(&d, NULL, "[queue q]\nworkers = 1\njob_timeout = 1s\n"
	    "handler_timeout = 900ms\n");
	freeReplyObject(h_redis(&d, "SET ferry:{q}:ready notalist"));
	h_expect_log(&d, "fetch failed: WRONGTYPE");
	h_start(&d, 1);
	h_wait_log(&d, "fetch failed", 1);
	h_sleep_ms(9000);       /* backoff 0.1, 0.2, ... 3.2, then 5 s */
	cr_assert_eq(h_count_in_file(d.log, "has not come back from a fetch"),
	    0, "a worker backing off was stopped as a hung fetch");
	cr_assert_eq(h_count_in_file(d.log, "fetch failed"), 1,
	    "the repeating error is logged once: %d", h_count_in_file(d.log,
	    "fetch failed"));
	freeReplyObject(h_redis(&d, "DEL ferry:{q}:ready"));
	h_push_jobs(&d, "q", 0, 100);
	h_wait_redis_int(&d, 100, "HGET ferry:{q}:stats done");
	h_assert_queue_empty(&d, "q");
	cr_assert_eq(h_count_in_file(d.log, "; restart "), 0, "no worker died");
	h_stop(&d);
}

/* Redis stalls (SIGSTOP) for 4 s, over job_timeout = 1s, while the
 * workers wait in BLMOVE: they are alive, waiting on Redis, and are not
 * stopped as hung fetches (a stalled Redis holds a fetch up to the 10 s
 * request timeout; the fetch limit is 12 s at least). Then every job is
 * done once. */
Test(recovery, redis_stall_does_not_kill_waiting_workers)
{
	char cmd[400], queues[600];

	h_setup(&d, NULL, "");
	h_write_recorder(&d, cmd, sizeof(cmd));
	snprintf(queues, sizeof(queues), "[queue q]\nworkers = 2\n"
	    "job_timeout = 1s\nhandler_timeout = 900ms\nhandler = exec\n"
	    "command = %s\n", cmd);
	h_config(&d, NULL, queues);
	h_start(&d, 2);
	h_push_jobs(&d, "q", 0, 10);
	h_wait_redis_int(&d, 10, "HGET ferry:{q}:stats done");
	/* a batch over job_timeout before the stall (a loaded machine) is
	 * stopped rightly, and its worker may exit only once Redis is back:
	 * only what the stall does counts */
	int stopped = h_count_in_file(d.log, "over job_timeout");
	cr_assert_eq(kill(d.redis.pid, SIGSTOP), 0);
	h_sleep_ms(4000);
	cr_assert_eq(kill(d.redis.pid, SIGCONT), 0);
	h_sleep_ms(1500);
	cr_assert_eq(h_count_in_file(d.log, "has not come back from a fetch"),
	    0, "a worker waiting on a stalled Redis was stopped");
	h_push_jobs(&d, "q", 10, 90);
	h_wait_redis_int(&d, 100, "HGET ferry:{q}:stats done");
	cr_assert_eq(h_distinct_done(&d, 100), 100);
	h_assert_queue_empty(&d, "q");
	int restarts = h_count_in_file(d.log, "; restart ");
	if (restarts > stopped ||
	    h_count_in_file(d.log, "over job_timeout") != stopped) {
		char cmd[600];      /* why it died, for the failure below */
		snprintf(cmd, sizeof(cmd), "grep -E 'restart|exit|SIG|error|warn' "
		    "%s | tail -20 >&2", d.log);
		(void)system(cmd);
	}
	cr_assert_eq(h_count_in_file(d.log, "over job_timeout"), stopped,
	    "a worker waiting on a stalled Redis was stopped as hung");
	cr_assert_leq(restarts, stopped, "a worker died during or after the "
	    "stall: %d restarts, %d stopped before it", restarts, stopped);
	h_stop(&d);
}

/* Redis down when ferryd starts: it says so, keeps trying, and works as
 * soon as Redis is there. */
Test(recovery, redis_unreachable_at_start)
{
	h_setup(&d, NULL, "[queue q]\nworkers = 2\n");
	test_redis_kill9(&d.redis);
	h_start(&d, 2);
	h_wait_log(&d, "cannot connect to redis at 127.0.0.1:", 2);
	h_wait_log(&d, "unreachable", 1);
	cr_assert_eq(test_redis_restart(&d.redis, NULL), 0);
	h_push_jobs(&d, "q", 0, 500);
	h_wait_redis_int(&d, 500, "HGET ferry:{q}:stats done");
	h_assert_queue_empty(&d, "q");
	h_wait_log(&d, "redis reachable again", 2);
	cr_assert_eq(h_count_in_file(d.log, "cannot connect to redis at"), 2,
	    "each worker logs the outage once, not once per retry");
	h_stop(&d);
}

/* A job that lands in a worker's list after that worker was handed back
 * (a BLMOVE it left blocked in Redis is served by a later push) is swept
 * back by the reaper, and the tombstone is not a live owner. */
Test(recovery, job_moved_to_a_dead_worker_is_swept_back)
{
	h_setup(&d, "reaper_interval = 200ms\n", "[queue q]\nworkers = 1\n");
	h_start(&d, 1);
	long long now = h_redis_int(&d, "EVAL %s 0",
	    "local t = redis.call('TIME') return t[1] * 1000");
	freeReplyObject(h_redis(&d, "HSET ferry:{q}:owners ghost.1 dead:%lld",
	    now));
	freeReplyObject(h_redis(&d, "RPUSH ferry:{q}:proc:ghost.1 {\"n\":1}"));
	h_wait_redis_int(&d, 1, "HGET ferry:{q}:stats done");
	cr_assert_eq(h_redis_int(&d, "EXISTS ferry:{q}:proc:ghost.1"), 0);
	cr_assert_eq(h_live_owners(&d, "q"), 1);
	/* handed back without a recovery: the dead worker never saw it */
	cr_assert_eq(h_redis_int(&d, "HGET ferry:{q}:stats recovered"), 1);
	h_stop(&d);
}

/* A frozen host wakes up after another master took its jobs over: its
 * workers are refused by Redis (their ids are tombstoned) and exit; its
 * master starts new ones; every job is done. */
Test(recovery, frozen_host_wakes_up_and_its_workers_step_down)
{
	char held[256];
	pid_t pids[H_MAX_PIDS];

	start_holding(&(struct holding){ .secs = "0.1", .workers = 1,
	    .batch = 20, .jobs = 400, .peer = true, .ferryd_extra =
	    "heartbeat_ttl = 1s\nreaper_interval = 300ms\n" }, held,
	    sizeof(held));
	int n = h_children(d.pid, pids, H_MAX_PIDS);
	kill(d.pid, SIGSTOP);
	for (int i = 0; i < n; i++)
		kill(pids[i], SIGSTOP);
	h_wait_stopped(&d, d.pid, true);        /* the host is frozen */
	for (int i = 0; i < n; i++)
		h_wait_stopped(&d, pids[i], true);
	h_start(&d2, 1);
	h_wait_redis_int(&d, 0, "EXISTS %s", held);      /* reaped */
	for (int i = 0; i < n; i++)
		kill(pids[i], SIGCONT);
	kill(d.pid, SIGCONT);
	h_wait_log(&d, "is not registered: it was handed back as dead", 1);
	h_wait_redis_int(&d, 400, "HGET ferry:{q}:stats done");
	cr_assert_eq(h_distinct_done(&d, 400), 400);
	h_assert_queue_empty(&d, "q");
	cr_assert_eq(h_redis_int(&d, "LLEN ferry:{q}:dead"), 0);
	h_stop(&d2);
	h_stop(&d);
}

/* The master handed a live worker back (as if its host had frozen) while
 * the worker waited in BLMOVE; a job pushed then lands in its list. The
 * worker learns it was handed back from its next fetch and must exit
 * without running that job: the reaper sweeps it back and a new worker
 * runs it, once. */
Test(recovery, handed_back_worker_does_not_run_what_blmove_gave_it)
{
	char cmd[400], queues[600];

	h_setup(&d, "reaper_interval = 200ms\n", "");
	h_write_recorder(&d, cmd, sizeof(cmd));
	snprintf(queues, sizeof(queues), "[queue q]\nworkers = 1\n"
	    "handler = exec\ncommand = %s\n", cmd);
	h_config(&d, "reaper_interval = 200ms\n", queues);
	h_start(&d, 1);
	h_wait_redis_int(&d, 1, "HLEN ferry:{q}:owners");
	redisReply *keys = h_redis(&d, "HKEYS ferry:{q}:owners");
	cr_assert_eq(keys->elements, 1);
	char wid[128];
	snprintf(wid, sizeof(wid), "%s", keys->element[0]->str);
	freeReplyObject(keys);
	pid_t old;
	cr_assert_eq(h_children(d.pid, &old, 1), 1);
	h_wait_blocked(&d, 1);           /* the worker is in BLMOVE now */
	long long now = h_redis_int(&d, "EVAL %s 0",
	    "local t = redis.call('TIME') return t[1] * 1000");
	freeReplyObject(h_redis(&d, "MULTI"));
	freeReplyObject(h_redis(&d, "HSET ferry:{q}:owners %s dead:%lld", wid,
	    now));
	freeReplyObject(h_redis(&d, "LPUSH ferry:{q}:ready {\"n\":7}"));
	freeReplyObject(h_redis(&d, "EXEC"));
	h_wait_log(&d, "is not registered", 1);
	h_wait_redis_int(&d, 1, "HGET ferry:{q}:stats done");
	/* the race happened: BLMOVE put the job in the handed-back worker's
	 * list, and the reaper swept it back from there */
	cr_assert_eq(h_redis_int(&d, "HGET ferry:{q}:stats recovered"), 1,
	    "the job never reached the handed-back worker's list");
	/* nothing can run it again once the old worker is gone, the new one
	 * waits in BLMOVE and no list holds a job */
	h_wait_gone(&d, old);
	h_wait_children(&d, 1);
	h_wait_blocked(&d, 1);
	h_assert_queue_empty(&d, "q");
	char path[400];
	snprintf(path, sizeof(path), "%s/done.txt", d.dir);
	cr_assert_eq(h_count_in_file(path, "{\"n\":7}"), 1,
	    "the job ran %d times", h_count_in_file(path, "{\"n\":7}"));
	cr_assert_eq(h_redis_int(&d, "HGET ferry:{q}:stats done"), 1);
	h_assert_queue_empty(&d, "q");
	h_stop(&d);
}

/* Until `n` processing lists of q hold jobs. */
static void
wait_held_lists(struct ferryd *f, const char *q, int n)
{
	long long end = h_now_ms() + H_DEADLINE_MS;
	int held = 0;

	while (h_now_ms() < end) {
		redisReply *r = h_redis(f, "KEYS ferry:{%s}:proc:*", q);
		held = 0;
		for (size_t i = 0; i < r->elements; i++)
			held += h_redis_int(f, "LLEN %s", r->element[i]->str) > 0;
		freeReplyObject(r);
		if (held == n)
			return;
		h_sleep_ms(10);
	}
	cr_assert_fail("%d processing lists of %s hold jobs, not %d", held, q,
	    n);
}

/* The processing list of f's worker (its only one). */
static void
worker_list(struct ferryd *f, char *key, size_t size)
{
	pid_t pids[H_MAX_PIDS];
	redisReply *r = h_redis(f, "HGETALL ferry:{q}:owners");

	cr_assert_eq(h_children(f->pid, pids, H_MAX_PIDS), 1);
	key[0] = '\0';
	for (size_t i = 0; i + 1 < r->elements; i += 2) {
		const char *wid = r->element[i]->str, *dot = strrchr(wid, '.');
		if (dot != NULL && atoi(dot + 1) == (int)pids[0])
			snprintf(key, size, "ferry:{q}:proc:%s", wid);
	}
	freeReplyObject(r);
	cr_assert(key[0] != '\0', "no owner entry for worker %d", (int)pids[0]);
}

static bool
handed_back(struct ferryd *f)
{
	return h_count_in_file(f->log, "handed back") +
	    h_count_in_file(f->log, "jobs back in ready") +
	    h_count_in_file(f->log, "is not registered") > 0;
}

/* Redis blocked (DEBUG SLEEP) longer than heartbeat_ttl passes the
 * heartbeat deadline of every master; once Redis is free, a reaper may run
 * before a live master's queued beat. No reaper may then take a live
 * master for dead (its worker is still running its batch: the jobs would
 * run twice), while a master that really died is still reaped soon after
 * the block: within heartbeat_ttl (the wait after a gap) + reaper_interval
 * and a margin for this box. */
Test(recovery, blocked_redis_takes_no_live_master_for_dead)
{
	const char *debug[] = { "--enable-debug-command", "yes", NULL };
	const char *extra = "heartbeat_ttl = 1s\nreaper_interval = 200ms\n";
	char held[256], path[400], flag[400], dead_list[256], queues[800];
	pid_t pids[H_MAX_PIDS];
	const int jobs = 30;

	/* an exec handler whose batches take 3 s while DIR/slow exists */
	h_setup_redis(&d, extra, "", debug);
	snprintf(path, sizeof(path), "%s/slow.sh", d.dir);
	snprintf(flag, sizeof(flag), "%s/slow", d.dir);
	h_write_file(flag, "\n");
	h_write_file(path,
	    "#!/bin/sh\n"
	    "[ -e %s ] && sleep 3\n"
	    "exec awk -F'\"' -v out=%s/done.txt '{ print $0 >> out; "
	    "print \"ok \" $4; fflush() }'\n", flag, d.dir);
	chmod(path, 0755);
	snprintf(queues, sizeof(queues), "[queue q]\nworkers = 1\n"
	    "batch_size = 5\nhandler = exec\ncommand = %s\n", path);
	h_config(&d, extra, queues);
	h_setup_peer(&d2, &d, extra, queues);
	h_push_jobs(&d, "q", 0, jobs);
	h_start(&d, 1);
	wait_held(&d, "q", held, sizeof(held));
	h_start(&d2, 1);
	wait_held_lists(&d, "q", 2);            /* both workers in a batch */
	worker_list(&d2, dead_list, sizeof(dead_list));

	/* 1. both masters alive: Redis blocked for 2.5 heartbeat_ttl */
	freeReplyObject(h_redis(&d, "DEBUG SLEEP 2.5"));
	/* the point: 2 s in which no reaper may take a live master for dead
	 * (the wait after the gap, and then some) */
	h_sleep_ms(2000);
	cr_assert_eq(h_redis_int(&d, "HGET ferry:{q}:stats recovered"), 0,
	    "a live master's jobs were handed back");
	cr_assert_not(handed_back(&d), "d handed back or was handed back");
	cr_assert_not(handed_back(&d2), "d2 handed back or was handed back");
	cr_assert_eq(h_redis_int(&d, "HLEN ferry:{q}:owners"), 2);
	cr_assert_eq(h_live_owners(&d, "q"), 2);
	cr_assert_gt(h_count_in_file(d.log, "ran no heartbeat of any ferryd") +
	    h_count_in_file(d2.log, "ran no heartbeat of any ferryd"), 0,
	    "the gap was not noticed");

	/* 2. d2's host dies while Redis is blocked: reaped after the block */
	wait_held_lists(&d, "q", 2);
	worker_list(&d2, dead_list, sizeof(dead_list));
	long long in_batch = h_redis_int(&d, "LLEN %s", dead_list);
	cr_assert_gt(in_batch, 0);
	int n = h_children(d2.pid, pids, H_MAX_PIDS);
	for (int i = 0; i < n; i++)
		kill(pids[i], SIGKILL);
	kill(d2.pid, SIGKILL);
	waitpid(d2.pid, NULL, 0);
	d2.pid = 0;
	freeReplyObject(h_redis(&d, "DEBUG SLEEP 2.5"));
	long long freed = h_now_ms();
	h_wait_redis_int(&d, 0, "EXISTS %s", dead_list);
	long long reaped_ms = h_now_ms() - freed;
	/* heartbeat_ttl (1 s) + reaper_interval (0.2 s) + margin */
	cr_assert_lt(reaped_ms, 4000, "reaped %lld ms after the block",
	    reaped_ms);
	cr_assert_geq(h_redis_int(&d, "HGET ferry:{q}:stats recovered"),
	    in_batch);
	cr_assert_eq(h_count_in_file(d.log, "is not registered"), 0,
	    "the live master's worker was handed back");
	unlink(flag);
	h_wait_redis_int(&d, jobs, "HGET ferry:{q}:stats done");
	cr_assert_eq(h_distinct_done(&d, jobs), jobs);
	h_assert_queue_empty(&d, "q");
	h_stop(&d2);
	h_stop(&d);
}
