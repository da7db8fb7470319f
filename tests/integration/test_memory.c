/* test_memory.c - Redis memory safety against a real redis-server with a
 * small maxmemory: the queue drains at maxmemory, enqueue backs off above
 * memory_refuse_percent without half-written batches, the eviction policy
 * and persistence checks, and completed jobs leave no memory behind. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>

#include "harness.h"
#include "lua_scripts.h"

static struct ferryd d;

static void
teardown(void)
{
	h_teardown(&d);
}

TestSuite(memory, .fini = teardown, .timeout = 600);

static const char *const maxmem[] = { "--maxmemory", "20mb",
    "--maxmemory-policy", "noeviction", NULL };

/* Run `ferryctl -c d.config ARGS...` with `input` on stdin; its exit
 * status, and its stdout and stderr (malloc'd) when asked. */
static int
ctl(const char *input, char **out, char **err, ...)
{
	struct h_run r;
	va_list ap;

	va_start(ap, err);
	h_ctl_v(&r, d.config, input, ap);
	va_end(ap);
	if (out != NULL) {
		*out = r.out;
		r.out = NULL;
	}
	if (err != NULL) {
		*err = r.err;
		r.err = NULL;
	}
	h_run_free(&r);
	return r.status;
}

static long long
info_int(const char *field)
{
	redisReply *r = h_redis(&d, "INFO memory");
	char *p = strstr(r->str, field);
	long long v = p != NULL ? atoll(p + strlen(field) + 1) : -1;

	freeReplyObject(r);
	return v;
}

/* LPUSH jobs of ~100 bytes, 1000 a pipeline, until Redis says OOM (or
 * `limit` jobs); returns how many went in. */
static long
fill(const char *queue, long limit)
{
	char job[160];
	long pushed = 0;
	bool oom = false;

	freeReplyObject(h_redis(&d, "PING"));
	while (!oom && pushed < limit) {
		for (int i = 0; i < 1000; i++) {
			snprintf(job, sizeof(job), "{\"n\":%ld,\"pad\":\"%080d\"}",
			    pushed + i, 0);
			redisAppendCommand(d.rc, "LPUSH ferry:{%s}:ready %s", queue,
			    job);
		}
		for (int i = 0; i < 1000; i++) {
			redisReply *r;
			cr_assert_eq(redisGetReply(d.rc, (void **)&r), REDIS_OK);
			if (r->type == REDIS_REPLY_ERROR) {
				cr_assert(strncmp(r->str, "OOM", 3) == 0, "%s", r->str);
				oom = true;
			} else {
				pushed++;
			}
			freeReplyObject(r);
		}
	}
	return pushed;
}

/* Full Redis (noeviction) with a backlog: ferryd drains it to empty, with
 * no job recovered, retried or dead, and used_memory falls; the master
 * says it is full, then that it is below memory_warn_percent again. */
Test(memory, drains_at_maxmemory)
{
	h_setup_redis(&d, "memory_check_interval = 1s\n",
	    "[queue q]\nworkers = 2\nbatch_size = 100\n", maxmem);
	long pushed = fill("q", 10000000);
	long long full = info_int("used_memory");
	cr_assert_gt(pushed, 10000);
	cr_assert_geq(full, info_int("maxmemory") - 1024 * 1024);
	h_start(&d, 2);
	h_wait_redis_int(&d, 0, "LLEN ferry:{q}:ready");
	h_wait_redis_int(&d, pushed, "HGET ferry:{q}:stats done");
	h_assert_queue_empty(&d, "q");
	cr_assert_eq(h_redis_int(&d, "HGET ferry:{q}:stats recovered"), 0);
	cr_assert_eq(h_redis_int(&d, "HGET ferry:{q}:stats retried"), 0);
	cr_assert_eq(h_redis_int(&d, "LLEN ferry:{q}:dead"), 0);
	long long after = info_int("used_memory");
	cr_assert_lt(after, full / 2, "used_memory %lld after, %lld full",
	    after, full);
	h_wait_log(&d, "% full, used_memory ", 1);
	h_wait_log(&d, "producers are refused until the queues drain", 1);
	h_wait_log(&d, "below memory_warn_percent 80 again", 1);
	h_stop(&d);
}

/* Above memory_refuse_percent: exit 75, nothing pushed. */
Test(memory, enqueue_refused_when_full)
{
	char *out, *err;

	h_setup_redis(&d, NULL, "[queue q]\nworkers = 0\n", maxmem);
	fill("q", 10000000);
	long long before = h_redis_int(&d, "LLEN ferry:{q}:ready");
	int rc = ctl("{\"a\":1}\n{\"a\":2}\n", &out, &err, "enqueue", "q", "-",
	    NULL);
	cr_assert_eq(rc, 75, "exit %d: %s", rc, err);
	cr_assert(strstr(err, "% full (maxmemory 20.0 MiB, noeviction), queue q "
	    "holds ") != NULL && strstr(err, " MiB of it (its jobs and protected "
	    "cache keys); memory_refuse_percent 90: not enqueueing; drain the "
	    "queue") != NULL, "%s", err);
	cr_assert(strstr(err, "redis at 127.0.0.1:") != NULL, "%s", err);
	cr_assert_str_eq(out, "");
	cr_assert_eq(h_redis_int(&d, "LLEN ferry:{q}:ready"), before);
	free(out);
	free(err);

	/* stats shows how full it is */
	cr_assert_eq(ctl(NULL, &out, NULL, "stats", "q", NULL), 0);
	cr_assert(strstr(out, " of maxmemory 20.0 MiB (10") != NULL, "%s", out);
	cr_assert(strstr(out, "%), maxmemory-policy noeviction\n") != NULL,
	    "%s", out);
	cr_assert(strstr(out, "\n  refusing     redis is ") != NULL, "%s", out);
	free(out);
	cr_assert_eq(ctl(NULL, &out, NULL, "stats", "--json", "q", NULL), 0);
	json_t *root = json_loads(out, 0, NULL), *r;
	r = json_object_get(json_object_get(root, "q"), "redis");
	cr_assert_eq(json_integer_value(json_object_get(r, "maxmemory")),
	    20 << 20, "%s", out);
	cr_assert_geq(json_integer_value(json_object_get(r, "percent")), 99);
	cr_assert_gt(json_integer_value(json_object_get(r, "used_memory")), 0);
	json_decref(root);
	free(out);
	h_stop(&d);
}

static char *
many_jobs(int n)
{
	char *input = malloc((size_t)n * 128 + 1), *p = input;

	for (int i = 0; i < n; i++)
		p += sprintf(p, "{\"id\":\"j%d\",\"pad\":\"%090d\"}\n", i, 0);
	return input;
}

/* The jobs do not fit: enqueue stops with 75 after some transactions,
 * each one whole (by the refusal threshold or an OOM refusal). */
Test(memory, enqueue_stops_between_whole_chunks)
{
	char *out, *err, *input = many_jobs(20000);

	h_setup_redis(&d, "memory_warn_percent = 100\n"
	    "memory_refuse_percent = 100\n", "[queue q]\nworkers = 0\n", maxmem);
	while (info_int("used_memory") < info_int("maxmemory") * 90 / 100)
		fill("filler", 1000);
	int rc = ctl(input, &out, &err, "enqueue", "q", "-", NULL);
	free(input);
	cr_assert_eq(rc, 75, "exit %d: %s", rc, err);
	long long n = h_redis_int(&d, "LLEN ferry:{q}:ready");
	cr_assert_eq(n % 1000, 0, "%lld jobs: a partial chunk", n);
	cr_assert(n > 0 && n < 20000, "%lld jobs", n);
	char want[160];
	snprintf(want, sizeof(want), "%lld of 20000 jobs were pushed to queue q "
	    "in %lld whole transactions", n, n / 1000);
	cr_assert(strstr(err, want) != NULL, "%s", err);
	int lines = 0;
	for (char *q = out; *q; q++)
		lines += *q == '\n';
	cr_assert_eq(lines, n, "%d ids printed, %lld pushed", lines, n);
	free(out);
	free(err);
	h_stop(&d);
}

/* Just below maxmemory, so the threshold lets the transaction through:
 * Redis refuses it (OOM) while it is queued, and none of it goes in. */
Test(memory, enqueue_oom_refusal_pushes_nothing)
{
	char *out, *err, *input = many_jobs(3000);

	h_setup_redis(&d, "memory_warn_percent = 100\n"
	    "memory_refuse_percent = 100\n", "[queue q]\nworkers = 0\n", maxmem);
	/* ferryctl's scripts in Redis' script cache first: loading them
	 * takes room too */
	freeReplyObject(h_redis(&d, "SCRIPT LOAD %s",
	    lua_script_source[LUA_MEMORY]));
	freeReplyObject(h_redis(&d, "SCRIPT LOAD %s",
	    lua_script_source[LUA_ENQUEUE]));
	fill("filler", 100000000);
	/* room for ferryctl's connection, not for 1000 jobs (115 KB) */
	while (info_int("used_memory") >= info_int("maxmemory") - 64 * 1024)
		freeReplyObject(h_redis(&d, "RPOP ferry:{filler}:ready 100"));
	long long filler = h_redis_int(&d, "LLEN ferry:{filler}:ready");
	int rc = ctl(input, &out, &err, "enqueue", "q", "-", NULL);
	free(input);
	cr_assert_eq(rc, 75, "exit %d: %s", rc, err);
	/* Redis refused the script (OOM): ferryctl says how full it is */
	cr_assert(strstr(err, "redis is 100% full (maxmemory 20.0 MiB, "
	    "noeviction), queue q holds 0 B of it") != NULL ||
	    strstr(err, "OOM command not allowed") != NULL, "%s", err);
	cr_assert(strstr(err, "nothing was pushed to queue q") != NULL, "%s",
	    err);
	cr_assert_eq(h_redis_int(&d, "EXISTS ferry:{q}:ready"), 0);
	cr_assert_eq(h_redis_int(&d, "EXISTS ferry:{q}:stats"), 0);
	cr_assert_eq(h_redis_int(&d, "LLEN ferry:{filler}:ready"), filler);
	cr_assert_str_eq(out, "");
	free(out);
	free(err);
	h_stop(&d);
}

static const char *const allkeys[] = { "--maxmemory", "20mb",
    "--maxmemory-policy", "allkeys-lru", NULL };

Test(memory, allkeys_policy_refuses_to_start)
{
	char *out;

	h_setup_redis(&d, NULL, "[queue q]\nworkers = 1\n", allkeys);
	h_expect_log(&d, "maxmemory-policy is allkeys-lru: a full Redis "
	    "evicts any key");      /* the refused start */
	int st = h_run_ferryd((const char *const[]){ "-f", "-c", d.config,
	    NULL }, &out);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 1, "status %d: %s", st,
	    out);
	cr_assert(strstr(out, "maxmemory-policy is allkeys-lru: a full Redis "
	    "evicts any key, queue lists included, and their jobs are lost") !=
	    NULL, "%s", out);
	cr_assert(strstr(out, "allow_unsafe_eviction = yes") != NULL, "%s",
	    out);
	cr_assert(strstr(out, "not started") != NULL, "%s", out);
	free(out);
	cr_assert_eq(access(d.pidfile, F_OK), -1, "a pidfile was written");

	h_config(&d, "allow_unsafe_eviction = yes\n", "[queue q]\nworkers = 1\n");
	h_start(&d, 1);
	h_wait_log(&d, "level=warn", 1);
	h_wait_log(&d, "maxmemory-policy is allkeys-lru: a full Redis may evict "
	    "queue lists and lose their jobs (running anyway: "
	    "allow_unsafe_eviction = yes)", 1);
	h_stop(&d);
}

/* volatile-* is the setup ferry is made for: nothing to say about it (no
 * key ferry relies on has a TTL; cache keys of live jobs are protected).
 * allkeys-* set at run time is shouted, once. */
Test(memory, volatile_policy_is_accepted)
{
	static const char *const args[] = { "--maxmemory-policy",
	    "volatile-lru", NULL };

	h_setup_redis(&d, "memory_check_interval = 200ms\n", "[queue q]\n"
	    "workers = 1\n", args);
	h_expect_log(&d, "maxmemory-policy is allkeys-lfu: a full Redis evicts "
	    "any key");             /* shouted once at runtime */
	h_start(&d, 1);
	h_sleep_ms(600);
	cr_assert_eq(h_count_in_file(d.log, "volatile-lru"), 0);
	/* the policy changes at runtime: the periodic check says so, once */
	freeReplyObject(h_redis(&d, "CONFIG SET maxmemory-policy allkeys-lfu"));
	h_wait_log(&d, "maxmemory-policy is allkeys-lfu: a full Redis evicts "
	    "any key", 1);
	h_wait_log(&d, "ferryd keeps running", 1);
	freeReplyObject(h_redis(&d, "CONFIG SET maxmemory-policy noeviction"));
	h_wait_log(&d, "maxmemory-policy is noeviction now", 1);
	h_sleep_ms(600);        /* the point: three more checks say nothing */
	cr_assert_eq(h_count_in_file(d.log, "allkeys-lfu"), 1);
	cr_assert_eq(h_count_in_file(d.log, "volatile-lru"), 0);
	h_stop(&d);
}

/* A Redis that accepts elements far larger than any queue's max_job_bytes
 * is named at start (an oversized element blocks Redis while it is
 * dead-lettered); one bounded by proto-max-bulk-len is not. */
Test(memory, bulk_limit_named_at_start)
{
	static const char *const bounded[] = { "--proto-max-bulk-len", "4mb",
	    NULL };

	h_setup(&d, NULL, "[queue q]\nworkers = 1\n");
	h_start(&d, 1);
	h_wait_log(&d, "accepts elements of up to 512.0 MiB (proto-max-bulk-len)",
	    1);
	h_stop(&d);
	h_teardown(&d);
	h_setup_redis(&d, NULL, "[queue q]\nworkers = 1\n", bounded);
	h_start(&d, 1);
	h_wait_log(&d, "started as", 1);
	cr_assert_eq(h_count_in_file(d.log, "proto-max-bulk-len"), 0);
	h_stop(&d);
}

/* Managed Redis without CONFIG: the policy comes from INFO, said once. */
Test(memory, config_disabled_falls_back_to_info)
{
	static const char *const args[] = { "--maxmemory-policy", "allkeys-lru",
	    "--rename-command", "CONFIG", "", NULL };

	h_setup_redis(&d, "memory_check_interval = 200ms\n"
	    "allow_unsafe_eviction = yes\n", "[queue q]\nworkers = 1\n", args);
	h_start(&d, 1);
	h_wait_log(&d, "refuses CONFIG GET (ERR unknown command", 1);
	h_wait_log(&d, "maxmemory-policy is allkeys-lru: a full Redis may evict",
	    1);
	h_wait_log(&d, "RDB snapshots cannot be verified", 1);
	h_sleep_ms(800);        /* the point: four more checks say nothing */
	cr_assert_eq(h_count_in_file(d.log, "refuses CONFIG GET"), 1);
	cr_assert_eq(h_count_in_file(d.log, "allkeys-lru"), 1);
	h_stop(&d);
}

Test(memory, persistence_checked)
{
	static const char *const aof[] = { "--appendonly", "yes", NULL };
	char *out;

	/* the test servers run with neither AOF nor RDB */
	h_setup_redis(&d, "require_persistence = yes\n", "[queue q]\n", NULL);
	h_expect_log(&d, "redis has neither AOF");  /* the refused start */
	int st = h_run_ferryd((const char *const[]){ "-f", "-c", d.config,
	    NULL }, &out);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 1, "status %d", st);
	cr_assert(strstr(out, "redis has neither AOF (appendonly no) nor RDB "
	    "snapshots (save \"\")") != NULL, "%s", out);
	cr_assert(strstr(out, "(require_persistence = yes); not started") !=
	    NULL, "%s", out);
	free(out);
	h_config(&d, NULL, "[queue q]\n");
	h_start(&d, 1);
	h_wait_log(&d, "redis has neither AOF", 1);
	h_stop(&d);
	h_teardown(&d);

	h_setup_redis(&d, "require_persistence = yes\n", "[queue q]\n", aof);
	h_start(&d, 1);
	h_wait_log(&d, "started as", 1);
	cr_assert_eq(h_count_in_file(d.log, "AOF"), 0);
	h_stop(&d);
}

/* The periodic check asks CONFIG GET save as three words (sent as one,
 * "CONFIG GET save", Redis refuses it as an unknown command and the check
 * can never see that RDB snapshots are off): persistence turned off at
 * runtime is noticed, as neither AOF nor RDB, not as a refused CONFIG GET.
 * A warning, with require_persistence = no. */
Test(memory, persistence_lost_at_runtime)
{
	static const char *const aof[] = { "--appendonly", "yes", NULL };

	h_setup_redis(&d, "memory_check_interval = 200ms\n", "[queue q]\n"
	    "workers = 1\n", aof);
	h_start(&d, 1);
	h_wait_log(&d, "started as", 1);
	cr_assert_eq(h_count_in_file(d.log, "AOF"), 0);
	freeReplyObject(h_redis(&d, "CONFIG SET appendonly no"));
	freeReplyObject(h_redis(&d, "CONFIG SET save %s", ""));
	h_wait_log(&d, "redis has neither AOF (appendonly no) nor RDB "
	    "snapshots", 1);
	h_sleep_ms(600);        /* three more checks */
	cr_assert_eq(h_count_in_file(d.log, "refuses CONFIG GET"), 0);
	cr_assert_eq(h_count_in_file(d.log, "CONFIG GET save is refused"), 0);
	cr_assert_eq(h_count_in_file(d.log, "redis has neither AOF"), 1);
	h_stop(&d);
}

/* The keys of queue q but its owners hash (the workers) and the masters'
 * heartbeats and clock, space-separated. */
static void
queue_keys(char *got, size_t size)
{
	redisReply *r = h_redis(&d, "KEYS ferry:{q}:*");

	got[0] = '\0';
	for (size_t i = 0; i < r->elements; i++)
		if (strstr(r->element[i]->str, ":owners") == NULL &&
		    strstr(r->element[i]->str, "}:masters") == NULL &&
		    strstr(r->element[i]->str, "}:clock") == NULL)
			snprintf(got + strlen(got), size - strlen(got), "%s ",
			    r->element[i]->str);
	freeReplyObject(r);
}

static void
queue_keys_are(const char *want)
{
	char got[512];

	queue_keys(got, sizeof(got));
	cr_assert_str_eq(got, want);
}

/* Until the keys of q are `want`, then as queue_keys_are. */
static void
wait_queue_keys(const char *want)
{
	char got[512];

	for (long long end = h_now_ms() + H_DEADLINE_MS; h_now_ms() < end;
	    h_sleep_ms(50)) {
		queue_keys(got, sizeof(got));
		if (strcmp(got, want) == 0)
			return;
	}
	queue_keys_are(want);
}

/* used_memory without the clients' buffers, which Redis shrinks lazily. */
static long long
memory_without_clients(void)
{
	return info_int("used_memory") - info_int("mem_clients_normal");
}

/* 100,000 jobs through noop workers, twice: the queue's keys end as they
 * were (only the stats hash) after each round, and the second round leaves
 * used_memory within 64 KiB of where the first left it. A leak grows with
 * the jobs, so it shows in both rounds; what Redis keeps once for its own
 * (the scripts it caches, buffers of its clients, blocked clients' state
 * under load) does not grow again. A first small round warms up. */
static long long
round_of_jobs(long long first)
{
	for (int i = 0; i < 10; i++)
		h_push_jobs(&d, "q", (int)first + i * 10000, 10000);
	h_wait_redis_int(&d, first + 100000, "HGET ferry:{q}:stats done");
	queue_keys_are("ferry:{q}:stats ");
	h_sleep_ms(1000);       /* the last settles and heartbeats are through */
	return memory_without_clients();
}

Test(memory, completed_jobs_leave_nothing)
{
	h_setup_redis(&d, NULL, "[queue q]\nworkers = 2\nbatch_size = 500\n",
	    maxmem);
	/* a command slower than 10 ms (a 500-job fetch on a loaded machine)
	 * leaves a slowlog entry of up to 4 KiB: that is Redis' memory, not
	 * the queue's */
	freeReplyObject(h_redis(&d, "CONFIG SET slowlog-max-len 0"));
	freeReplyObject(h_redis(&d, "SLOWLOG RESET"));
	h_start(&d, 2);
	h_push_jobs(&d, "q", 0, 1000);
	h_wait_redis_int(&d, 1000, "HGET ferry:{q}:stats done");
	wait_queue_keys("ferry:{q}:stats ");    /* the last acks are through */
	long long start = memory_without_clients();
	long long first = round_of_jobs(1000), second = 0;
	redisReply *info_first = h_redis(&d, "INFO memory");
	for (long long end = h_now_ms() + 20000; h_now_ms() < end;
	    h_sleep_ms(200)) {
		second = second == 0 ? round_of_jobs(101000) :
		    memory_without_clients();
		if (second - first < 64 * 1024)
			break;
	}
	fprintf(stderr, "memory: used_memory (without clients) %lld at the "
	    "start, %lld after 100,000 jobs, %lld after 100,000 more\n", start,
	    first, second);
	if (second - first >= 64 * 1024) {
		redisReply *r = h_redis(&d, "INFO memory");
		fprintf(stderr, "INFO memory after the first round:\n%s\nafter "
		    "the second:\n%s\n", info_first->str, r->str);
		freeReplyObject(r);
	}
	freeReplyObject(info_first);
	cr_assert_lt(second - first, 64 * 1024, "used_memory grew by %lld bytes "
	    "over 100,000 more jobs", second - first);
	cr_assert_lt(first - start, 1024 * 1024, "used_memory grew by %lld bytes "
	    "over the first 100,000 jobs", first - start);
	h_stop(&d);
}
