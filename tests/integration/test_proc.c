/* test_proc.c - what ferryd's processes say about themselves: the titles
 * ps shows (/proc/PID/cmdline) and comm, the worker states of `ferryctl
 * status` while a batch waits for PostgreSQL or Redis, and a pause that
 * holds for a job enqueued right after `ferryctl pause` answered. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"

static struct ferryd d;

static void
teardown(void)
{
	h_teardown(&d);
}

TestSuite(proc, .fini = teardown, .timeout = 300);

#define CTL(r, ...) \
	h_ctl((r), d.config, NULL, __VA_ARGS__, (const char *)NULL)

static char *
comm_of(pid_t pid)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
	char *s = h_read_file(path);
	s[strcspn(s, "\n")] = '\0';
	return s;
}

/* The state `ferryctl status` gives the first worker of q. */
static char *
status_state(void)
{
	struct h_run r;

	CTL(&r, "status");
	cr_assert_eq(r.status, 0, "ferryctl status: %s", r.err);
	char *w = strstr(r.out, "worker queue=q "), *s = w ? strstr(w, " state=")
	    : NULL;
	cr_assert_not_null(s, "no worker of q in: %s", r.out);
	s += 7;
	char *state = strndup(s, strcspn(s, " \n"));
	h_run_free(&r);
	return state;
}

static void
wait_state(const char *want)
{
	long long end = h_now_ms() + H_DEADLINE_MS;
	char *st = status_state();

	while (strcmp(st, want) != 0 && h_now_ms() < end) {
		free(st);
		h_sleep_ms(20);
		st = status_state();
	}
	cr_assert_str_eq(st, want, "worker state %s, expected %s", st, want);
	free(st);
}

/* Does `ferryctl metrics` have exactly this line? */
static bool
metrics_line(const char *line)
{
	struct h_run r;
	char want[256];

	CTL(&r, "metrics");
	cr_assert_eq(r.status, 0, "ferryctl metrics: %s", r.err);
	snprintf(want, sizeof(want), "\n%s\n", line);
	bool found = strstr(r.out, want) != NULL;
	h_run_free(&r);
	return found;
}

static pid_t
only_worker(void)
{
	pid_t kids[H_MAX_PIDS];

	cr_assert_eq(h_children(d.pid, kids, H_MAX_PIDS), 1);
	return kids[0];
}

/* An exec handler that takes `secs` per batch, then answers ok. */
static void
write_slow_handler(char *cmd, size_t size, int secs)
{
	snprintf(cmd, size, "%s/slow.sh", d.dir);
	h_write_file(cmd, "#!/bin/sh\nsleep %d\n"
	    "exec awk -F'\"' '{ print \"ok \" $4; fflush() }'\n", secs);
	chmod(cmd, 0755);
}

Test(proc, titles_in_each_state)
{
	char cmd[400], queues[600];
	struct h_run r;

	h_setup(&d, NULL, "");
	write_slow_handler(cmd, sizeof(cmd), 2);
	snprintf(queues, sizeof(queues), "[queue q]\nworkers = 1\n"
	    "handler = exec\ncommand = %s\n", cmd);
	h_config(&d, NULL, queues);
	h_start(&d, 1);
	pid_t w = only_worker();
	h_wait_title(&d, d.pid, "ferryd: master");
	char *t = h_title(d.pid);
	cr_assert_str_eq(t, "ferryd: master");
	free(t);
	h_wait_title(&d, w, "ferryd: worker q/1 idle");
	char *comm = comm_of(w);
	cr_assert_str_eq(comm, "ferry:q");
	free(comm);

	h_push_jobs(&d, "q", 0, 3);
	h_wait_title(&d, w, "ferryd: worker q/1 busy batch of 3 since ");
	wait_state("busy");
	CTL(&r, "pause", "q");
	cr_assert_eq(r.status, 0);
	h_run_free(&r);
	h_wait_title(&d, w, "ferryd: worker q/1 paused");      /* after its batch */
	cr_assert_eq(h_redis_int(&d, "HGET ferry:{q}:stats done"), 3);
	CTL(&r, "resume", "q");
	cr_assert_eq(r.status, 0);
	h_run_free(&r);
	h_wait_title(&d, w, "ferryd: worker q/1 idle");
	h_stop(&d);
}

#define EVENTS_TABLE "CREATE TABLE events (n bigint, payload text)"

Test(proc, waiting_for_postgres)
{
	char global[512];
	struct h_run r;

	h_setup(&d, NULL, "");
	snprintf(global, sizeof(global), "%s", h_pg_start(&d));
	h_config(&d, global, "[queue q]\nhandler = postgres\nworkers = 1\n"
	    "batch_size = 50\ntable = events\ncolumns = n, payload\n");
	h_pg_exec(&d, EVENTS_TABLE);
	h_ctl(&r, d.config, NULL, "init-db", (const char *)NULL);
	cr_assert_eq(r.status, 0, "init-db: %s", r.err);
	h_run_free(&r);
	h_start(&d, 1);
	pid_t w = only_worker();
	h_push_jobs(&d, "q", 0, 100);
	h_wait_redis_int(&d, 100, "HGET ferry:{q}:stats done");
	wait_state("idle");

	cr_assert_eq(test_pg_pause(&d.pg), 0);
	h_push_jobs(&d, "q", 100, 400);
	wait_state("waiting-postgres");
	h_wait_title(&d, w, "ferryd: worker q/1 waiting for postgres");
	cr_assert(metrics_line("ferry_workers_waiting{queue=\"q\","
	    "for=\"postgres\"} 1"));
	cr_assert(metrics_line("ferry_workers_waiting{queue=\"q\","
	    "for=\"redis\"} 0"));
	cr_assert_eq(h_redis_int(&d, "HGET ferry:{q}:stats done"), 100);
	cr_assert_eq(test_pg_resume(&d.pg), 0);
	h_wait_redis_int(&d, 500, "HGET ferry:{q}:stats done");
	wait_state("idle");
	h_wait_title(&d, w, "ferryd: worker q/1 idle");
	cr_assert(metrics_line("ferry_workers_waiting{queue=\"q\","
	    "for=\"postgres\"} 0"));
	cr_assert_eq(h_pg_int(&d, "SELECT count(*) FROM events"), 500);
	cr_assert_eq(h_pg_int(&d, "SELECT count(DISTINCT n) FROM events"), 500,
	    "some job was written twice");
	h_assert_queue_empty(&d, "q");
	h_stop(&d);
}

Test(proc, waiting_for_redis)
{
	h_setup(&d, NULL, "[queue q]\nworkers = 1\n");
	h_start(&d, 1);
	pid_t w = only_worker();
	h_wait_title(&d, w, "ferryd: worker q/1 idle");
	test_redis_kill9(&d.redis);
	h_wait_title(&d, w, "ferryd: worker q/1 waiting for redis");
	wait_state("waiting-redis");
	cr_assert(metrics_line("ferry_workers_waiting{queue=\"q\","
	    "for=\"redis\"} 1"));
	cr_assert_eq(test_redis_restart(&d.redis, NULL), 0);
	h_wait_title(&d, w, "ferryd: worker q/1 idle");
	h_push_jobs(&d, "q", 0, 10);
	h_wait_redis_int(&d, 10, "HGET ferry:{q}:stats done");
	wait_state("idle");
	h_stop(&d);
}

/* redis_wait_replicas = 1 on a Redis without replicas: the batch waits,
 * unrun, and the worker says what for. */
Test(proc, waiting_for_replicas)
{
	h_setup(&d, "redis_wait_replicas = 1\nredis_wait_timeout = 100ms\n",
	    "[queue q]\nworkers = 1\n");
	h_start(&d, 1);
	pid_t w = only_worker();
	h_push_jobs(&d, "q", 0, 5);
	h_wait_title(&d, w, "ferryd: worker q/1 waiting for replicas");
	wait_state("waiting-replicas");
	cr_assert(metrics_line("ferry_workers_waiting{queue=\"q\","
	    "for=\"replicas\"} 1"));
	cr_assert_eq(h_redis_int(&d, "HGET ferry:{q}:stats done"), 0);
	h_stop(&d);
}

/* The workers wait in BLMOVE (a second at a time) when the queue is empty:
 * one under way when `pause` answers used to take the jobs enqueued just
 * after, and run them. Each worker reads the flag again when its fetch
 * returns and gives such a batch back, unrun, in its order. */
Test(proc, pause_holds_for_jobs_enqueued_right_after)
{
	char cmd[400], queues[600];
	struct h_run r;
	const int n = 200;

	h_setup(&d, NULL, "");
	h_write_recorder(&d, cmd, sizeof(cmd));
	snprintf(queues, sizeof(queues), "[queue q]\nworkers = 4\n"
	    "batch_size = 10\nhandler = exec\ncommand = %s\n", cmd);
	h_config(&d, NULL, queues);
	h_start(&d, 4);
	for (int round = 0; round < 3; round++) {
		h_sleep_ms(300);        /* every worker waits in BLMOVE */
		CTL(&r, "pause", "q");
		cr_assert_eq(r.status, 0);
		h_run_free(&r);
		h_sleep_ms(10);
		h_push_jobs(&d, "q", round * n, n);
		h_sleep_ms(2000);       /* the point: nothing runs meanwhile */
		cr_assert_eq(h_redis_int(&d, "HGET ferry:{q}:stats done"),
		    (long long)round * n, "round %d: jobs ran while paused", round);
		cr_assert_eq(h_redis_int(&d, "LLEN ferry:{q}:ready"), n,
		    "round %d: jobs left ready while paused", round);
		/* batches given back are at the end workers take from (each in
		 * its order; workers give back in any order): the next job to
		 * run is one of the first 4 x batch_size enqueued */
		redisReply *next = h_redis(&d, "LINDEX ferry:{q}:ready -1");
		cr_assert_eq(next->type, REDIS_REPLY_STRING);
		int first = atoi(strchr(next->str, ':') + 1);
		cr_assert(first >= round * n && first < round * n + 40,
		    "round %d: %s is next, behind younger jobs", round, next->str);
		freeReplyObject(next);
		CTL(&r, "resume", "q");
		cr_assert_eq(r.status, 0);
		h_run_free(&r);
		h_wait_redis_int(&d, (long long)(round + 1) * n,
		    "HGET ferry:{q}:stats done");
	}
	h_assert_queue_empty(&d, "q");
	cr_assert_eq(h_distinct_done(&d, 3 * n), 3 * n);
	/* a batch given back is counted as arrived once, when it runs */
	cr_assert_gt(h_count_in_file(d.log, "paused while fetching: gave a "
	    "batch of "), 0, "no batch was given back: nothing tested");
	cr_assert_eq(h_redis_int(&d, "HGET ferry:{q}:stats enqueued"), 3 * n);
	char path[400];
	snprintf(path, sizeof(path), "%s/done.txt", d.dir);
	char *text = h_read_file(path);
	cr_assert_eq(h_count_lines(text), 3 * n, "some job ran twice");
	free(text);
	h_stop(&d);
}
