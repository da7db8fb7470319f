/* test_eviction.c - the setup ferry is made for: one Redis holds an
 * application's cache (keys with a TTL, churning) and the queue, at
 * maxmemory with a volatile-* policy, so Redis evicts all the time. No key
 * ferry relies on has a TTL, so none is evicted: every job runs once, no
 * live worker is taken for dead. A master whose heartbeat entry is deleted
 * by hand does not take its own workers for dead either, and the entry of
 * a master that died is reaped by another and then removed. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "harness_churn.h"

#define MASTERS "ferry:{q}:masters"
/* heartbeats every second; the reaper runs five times between two */
#define FAST_REAPER "heartbeat_ttl = 3s\nreaper_interval = 200ms\n"

static struct ferryd d, d2;
static struct h_churn churn;

static void
teardown(void)
{
	h_churn_stop(&churn);
	h_teardown(&d2);
	h_teardown(&d);
}

TestSuite(eviction, .fini = teardown, .timeout = 300);

static long long
info_stat(struct ferryd *f, const char *field)
{
	redisReply *r = h_redis(f, "INFO");
	const char *p = strstr(r->str, field);
	long long v = p != NULL ? atoll(p + strlen(field) + 1) : -1;

	freeReplyObject(r);
	cr_assert_geq(v, 0, "INFO has no %s", field);
	return v;
}

/* Queue q with two exec workers that record every delivery in the
 * done.txt of `rec` (d: one file for all hosts). */
static void
config_recorded(struct ferryd *f, struct ferryd *rec)
{
	char cmd[400], queues[600];

	h_write_recorder(rec, cmd, sizeof(cmd));
	snprintf(queues, sizeof(queues), "[queue q]\nworkers = 2\n"
	    "batch_size = 20\nhandler = exec\ncommand = %s\n", cmd);
	h_config(f, FAST_REAPER, queues);
}

/* Wait until Redis has evicted keys (it is at maxmemory). */
static void
wait_evicting(struct ferryd *f)
{
	long long end = h_now_ms() + H_DEADLINE_MS;

	while (info_stat(f, "evicted_keys") == 0 && h_now_ms() < end)
		h_sleep_ms(50);
	cr_assert_gt(info_stat(f, "evicted_keys"), 0, "Redis never evicted: "
	    "used_memory %lld", info_stat(f, "used_memory"));
}

/* Push n jobs in steps of 100 every step_ms, calling between(f) after
 * each step: the jobs flow for n / 100 steps. */
static void
push_slowly(struct ferryd *f, int n, long step_ms,
    void (*between)(struct ferryd *))
{
	for (int i = 0; i < n; i += 100) {
		h_push_jobs(f, "q", i, n - i < 100 ? n - i : 100);
		for (long long end = h_now_ms() + step_ms; h_now_ms() < end;
		    h_sleep_ms(20))
			if (between != NULL)
				between(f);
	}
}

/* Each of the n jobs was delivered exactly once and done, none dead or
 * recovered, and no master said it handed anything back. */
static void
assert_once(struct ferryd *f, int n)
{
	char path[400];

	h_wait_redis_int(f, n, "HGET ferry:{q}:stats done");
	snprintf(path, sizeof(path), "%s/done.txt", f->dir);
	char *text = h_read_file(path);
	cr_assert_eq(h_count_lines(text), n, "%d deliveries of %d jobs",
	    h_count_lines(text), n);
	free(text);
	cr_assert_eq(h_distinct_done(f, n), n);
	cr_assert_eq(h_redis_int(f, "HGET ferry:{q}:stats recovered"), 0);
	cr_assert_eq(h_redis_int(f, "HGET ferry:{q}:stats dead"), 0);
	cr_assert_eq(h_redis_int(f, "LLEN ferry:{q}:dead"), 0);
	h_assert_queue_empty(f, "q");
	cr_assert_eq(h_count_in_file(f->log, "handed back"), 0);
}

/* Every key of ferry's in the Redis of f: none has a TTL. */
static void
assert_no_ferry_ttl(struct ferryd *f)
{
	redisReply *r = h_redis(f, "KEYS ferry:*");

	cr_assert_gt(r->elements, 0);
	for (size_t i = 0; i < r->elements; i++)
		cr_assert_eq(h_redis_int(f, "PTTL %s", r->element[i]->str), -1,
		    "%s has a TTL", r->element[i]->str);
	freeReplyObject(r);
}

/* The single master of f has a live entry "TOKEN DEADLINE", its token
 * "PID:..." naming the master's pid. */
static void
assert_one_live_entry(struct ferryd *f)
{
	char want[32];

	cr_assert_eq(h_redis_int(f, "HLEN " MASTERS), 1);
	redisReply *r = h_redis(f, "HVALS " MASTERS);
	snprintf(want, sizeof(want), "%d:", (int)f->pid);
	cr_assert_eq(strncmp(r->element[0]->str, want, strlen(want)), 0,
	    "entry %s", r->element[0]->str);
	freeReplyObject(r);
}

/* A churning cache keeps Redis at maxmemory under `policy` while 4,000
 * jobs flow through one ferryd for 20 s: Redis evicts thousands of keys,
 * none of ferry's. */
static void
evicting(const char *policy)
{
	const char *args[] = { "--maxmemory", "24mb", "--maxmemory-policy",
	    policy, NULL };
	const int n = 4000;

	h_setup_redis(&d, NULL, "", args);
	config_recorded(&d, &d);
	/* 1 KiB values with a 60 s TTL, 24 MB in 3 s: full before ferryd
	 * starts, and evicting all along */
	cr_assert_eq(h_churn_start(&churn, d.redis.port, &(struct h_churn_opts){
	    .prefix = "app:cache:", .value_size = 1024, .ttl_ms = 60000,
	    .bytes_per_s = 8 << 20 }), 0);
	wait_evicting(&d);
	h_start(&d, 2);
	/* the reaper judges masters from here on (it waits a heartbeat_ttl
	 * on a Redis without the service clock) */
	h_wait_log(&d, "reaper: reaping again", 1);
	long long evicted = info_stat(&d, "evicted_keys");
	push_slowly(&d, n, 500, NULL);
	assert_once(&d, n);
	cr_assert_gt(info_stat(&d, "evicted_keys") - evicted, 1000,
	    "Redis evicted too little to prove anything");
	cr_assert_gt(h_churn_stop(&churn), 0);
	cr_assert_eq(churn.errors, 0, "%lld SETs refused", churn.errors);
	assert_one_live_entry(&d);
	assert_no_ferry_ttl(&d);
	cr_assert_eq(h_live_owners(&d, "q"), 2);
	h_stop(&d);
}

Test(eviction, volatile_ttl_evicts_no_ferry_key)
{
	evicting("volatile-ttl");
}

Test(eviction, volatile_random_evicts_no_ferry_key)
{
	evicting("volatile-random");
}

static void
delete_entry(struct ferryd *f)
{
	freeReplyObject(h_redis(f, "DEL " MASTERS));
}

/* The master's entry deleted by hand every 20 ms while jobs flow: the
 * master is alive (it runs the reaper), so it takes none of its workers
 * for dead, and its next beat writes the entry again. */
Test(eviction, deleted_heartbeat_is_no_death)
{
	const int n = 2000;

	h_setup(&d, NULL, "");
	config_recorded(&d, &d);
	h_start(&d, 2);
	h_wait_log(&d, "reaper: reaping again", 1);
	push_slowly(&d, n, 500, delete_entry);
	assert_once(&d, n);
	h_wait_redis_int(&d, 1, "HLEN " MASTERS);
	assert_one_live_entry(&d);
	h_stop(&d);
}

/* The masters' entries in f's Redis whose token starts with "pid:". */
static void
entry_of(struct ferryd *f, pid_t pid, char *id, size_t size)
{
	redisReply *r = h_redis(f, "HGETALL " MASTERS);
	char want[32];

	snprintf(want, sizeof(want), "%d:", (int)pid);
	id[0] = '\0';
	for (size_t i = 0; i + 1 < r->elements; i += 2)
		if (strncmp(r->element[i + 1]->str, want, strlen(want)) == 0)
			snprintf(id, size, "%s", r->element[i]->str);
	freeReplyObject(r);
	cr_assert_neq(id[0], '\0', "no entry of pid %d", (int)pid);
}

/* Jobs in the processing lists of master id's workers. */
static long long
held_by(struct ferryd *f, const char *id)
{
	redisReply *r = h_redis(f, "HGETALL ferry:{q}:owners");
	long long n = 0;

	for (size_t i = 0; i + 1 < r->elements; i += 2)
		if (strcmp(r->element[i + 1]->str, id) == 0)
			n += h_redis_int(f, "LLEN ferry:{q}:proc:%s",
			    r->element[i]->str);
	freeReplyObject(r);
	return n;
}

/* Two masters; one host dies (master frozen, its workers killed, then
 * the master killed with SIGKILL, holding batches): the other reaps its
 * lists, every job held is recovered once, and then the dead master's
 * entry leaves the masters hash. */
Test(eviction, dead_master_entry_is_reaped_then_removed)
{
	const int n = 3000;
	char id[200];
	pid_t pids[H_MAX_PIDS];

	h_setup(&d, NULL, "");
	config_recorded(&d, &d);
	h_setup_peer(&d2, &d, NULL, "");
	config_recorded(&d2, &d);
	h_start(&d, 2);
	h_start(&d2, 2);
	h_wait_redis_int(&d, 2, "HLEN " MASTERS);
	h_wait_log(&d2, "reaper: reaping again", 1);
	entry_of(&d, d.pid, id, sizeof(id));
	h_push_jobs(&d, "q", 0, n);
	for (long long end = h_now_ms() + H_DEADLINE_MS; held_by(&d, id) == 0;
	    h_sleep_ms(5))
		cr_assert_lt(h_now_ms(), end, "the master's workers hold nothing");

	kill(d.pid, SIGSTOP);           /* the host freezes... */
	int k = h_children(d.pid, pids, H_MAX_PIDS);
	for (int i = 0; i < k; i++)
		kill(pids[i], SIGKILL);
	for (int i = 0; i < k; i++)
		h_wait_gone(&d, pids[i]);
	h_sleep_ms(200);        /* what they sent before dying is through */
	long long held = held_by(&d, id);
	kill(d.pid, SIGKILL);           /* ...and dies */
	waitpid(d.pid, NULL, 0);
	d.pid = 0;
	cr_assert_gt(held, 0, "the dead master held no jobs");

	h_wait_redis_int(&d, 0, "HEXISTS " MASTERS " %s", id);
	/* gone only after its lists were handed back */
	cr_assert_eq(held_by(&d, id), 0);
	cr_assert_eq(h_redis_int(&d, "HLEN " MASTERS), 1);
	assert_one_live_entry(&d2);
	h_wait_redis_int(&d, n, "HGET ferry:{q}:stats done");
	cr_assert_eq(h_distinct_done(&d, n), n);
	cr_assert_eq(h_redis_int(&d, "HGET ferry:{q}:stats recovered"), held);
	cr_assert_eq(h_redis_int(&d, "LLEN ferry:{q}:dead"), 0);
	cr_assert_gt(h_count_in_file(d2.log, "jobs handed back"), 0);
	h_stop(&d2);
	h_stop(&d);
}
