/* test_delayed.c - producers' delayed jobs (ferryctl enqueue --delay/--at,
 * enqueue.lua's due markers, promote.lua) on a real redis-server and
 * ferryd: a job runs no earlier than asked by the Redis clock and once; a
 * time past runs at once; 1,000 random delays each run exactly once;
 * scheduled jobs survive a restart and a kill -9 of the master in the
 * middle of promoting them; a backlog due at once is promoted call after
 * call; identical documents stay distinct; bad values are refused (exit
 * 64); stats and metrics count them. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "harness.h"
#include "lua_scripts.h"
#include "queue.h"
#include "script_args.h"

#define SCHEDULED "ferry:{q}:scheduled"
#define READY "ferry:{q}:ready"

static struct ferryd d;

static void
teardown(void)
{
	h_teardown(&d);
}

TestSuite(delayed, .fini = teardown, .timeout = 300);

#define CTL(r, input, ...) \
	h_ctl((r), d.config, (input), __VA_ARGS__, (const char *)NULL)

/* Redis' clock in ms. */
static long long
redis_ms(void)
{
	redisReply *r = h_redis(&d, "TIME");
	long long ms = atoll(r->element[0]->str) * 1000 +
	    atoll(r->element[1]->str) / 1000;
	freeReplyObject(r);
	return ms;
}

/* Jobs the recorder ran (lines of done.txt, repeats counted). */
static int
runs(void)
{
	char path[400];
	snprintf(path, sizeof(path), "%s/done.txt", d.dir);
	return h_count_in_file(path, "\"job\":{\"n\":");
}

static void
setup_recorder(int workers)
{
	char cmd[400], queues[600];

	h_setup(&d, NULL, "");
	h_write_recorder(&d, cmd, sizeof(cmd));
	snprintf(queues, sizeof(queues), "[queue q]\nworkers = %d\n"
	    "batch_size = 50\nhandler = exec\ncommand = %s\n", workers, cmd);
	h_config(&d, NULL, queues);
}

static void
wait_runs(int n)
{
	long long end = h_now_ms() + H_DEADLINE_MS;
	while (runs() < n && h_now_ms() < end)
		h_sleep_ms(10);
	cr_assert_eq(runs(), n, "the recorder ran %d jobs, expected %d", runs(),
	    n);
}

/* ferryctl enqueue OPT WHEN (--delay D or --at TIME) of {"n":first} ..
 * {"n":first+n-1}. */
static void
enqueue_when(int first, int n, const char *opt, const char *when)
{
	struct h_run r;
	char *input = malloc((size_t)n * 16);
	size_t off = 0;

	for (int i = first; i < first + n; i++)
		off += (size_t)sprintf(input + off, "{\"n\":%d}\n", i);
	CTL(&r, input, "enqueue", "-q", opt, when, "q", "-");
	free(input);
	h_run_expect(&r, 0);
	h_run_free(&r);
}

static void
enqueue_delayed(int first, int n, const char *delay)
{
	enqueue_when(first, n, "--delay", delay);
}

Test(delayed, waits_by_the_redis_clock_then_runs_once)
{
	struct h_run r;

	setup_recorder(1);
	h_start(&d, 1);
	long long t0 = redis_ms();
	CTL(&r, NULL, "enqueue", "--delay", "2s", "q", "{\"n\":0}");
	h_run_expect(&r, 0);
	cr_assert_eq(strlen(r.out), 41, "an id: %s", r.out);
	h_run_free(&r);
	cr_assert_eq(h_redis_int(&d, "ZCARD " SCHEDULED), 1);
	cr_assert_eq(h_redis_int(&d, "LLEN " READY), 0);
	redisReply *z = h_redis(&d, "ZRANGE " SCHEDULED " 0 -1 WITHSCORES");
	cr_assert_eq(z->elements, 2);
	cr_assert_geq(atoll(z->element[1]->str), t0 + 2000);
	cr_assert_leq(atoll(z->element[1]->str), t0 + 2000 + 5000);
	/* the member is "<us>-<n>:" and the document as it was given */
	const char *colon = strchr(z->element[0]->str, ':');
	cr_assert_not_null(colon);
	cr_assert_str_eq(colon + 1, "{\"n\":0}");
	freeReplyObject(z);
	/* runs read before the clock: a run seen then happened before it */
	for (;;) {
		int seen = runs();
		long long now = redis_ms();
		if (now >= t0 + 2000)
			break;
		cr_assert_eq(seen, 0, "the job ran %lld ms after it was enqueued "
		    "with --delay 2s", now - t0);
		h_sleep_ms(20);
	}
	wait_runs(1);
	cr_assert_lt(redis_ms(), t0 + 2000 + 5000, "the job ran late");
	h_sleep_ms(500);
	cr_assert_eq(runs(), 1);
	h_wait_redis_int(&d, 1, "HGET ferry:{q}:stats done");
	cr_assert_eq(h_redis_int(&d, "EXISTS " SCHEDULED), 0);
	h_assert_queue_empty(&d, "q");
	h_stop(&d);
}

Test(delayed, at_in_the_past_runs_at_once_in_the_future_waits)
{
	struct h_run r;

	h_setup(&d, NULL, "[queue q]\nworkers = 0\n");
	CTL(&r, NULL, "enqueue", "--at", "2020-01-01T00:00:00Z", "q",
	    "{\"n\":1}");
	h_run_expect(&r, 0);
	h_run_free(&r);
	cr_assert_eq(h_redis_int(&d, "LLEN " READY), 1);
	cr_assert_eq(h_redis_int(&d, "EXISTS " SCHEDULED), 0);
	/* an offset and a fraction: 2100-01-01T00:00:00.250Z */
	CTL(&r, NULL, "enqueue", "--at", "2100-01-01T01:30:00.25+01:30", "q",
	    "{\"n\":2}");
	h_run_expect(&r, 0);
	h_run_free(&r);
	cr_assert_eq(h_redis_int(&d, "LLEN " READY), 1);
	redisReply *z = h_redis(&d, "ZRANGE " SCHEDULED " 0 -1 WITHSCORES");
	cr_assert_eq(z->elements, 2);
	cr_assert_str_eq(z->element[1]->str, "4102444800250");
	freeReplyObject(z);
	/* ferryd's promoter leaves it there */
	h_start(&d, 0);
	h_sleep_ms(500);
	cr_assert_eq(h_redis_int(&d, "ZCARD " SCHEDULED), 1);
	cr_assert_eq(h_redis_int(&d, "LLEN " READY), 1);
	h_stop(&d);
}

Test(delayed, a_thousand_random_delays_run_exactly_once)
{
	char delay[32];

	setup_recorder(2);
	h_start(&d, 2);
	srand(16);
	for (int call = 0; call < 100; call++) {
		snprintf(delay, sizeof(delay), "%dms", rand() % 3000);
		enqueue_delayed(call * 10, 10, delay);
	}
	wait_runs(1000);
	cr_assert_eq(h_distinct_done(&d, 1000), 1000);
	h_wait_redis_int(&d, 1000, "HGET ferry:{q}:stats done");
	h_sleep_ms(300);
	cr_assert_eq(runs(), 1000);
	cr_assert_eq(h_redis_int(&d, "EXISTS " SCHEDULED), 0);
	h_assert_queue_empty(&d, "q");
	h_stop(&d);
}

/* ferryctl --json stats of q, parsed. */
static json_t *
stats_json(void)
{
	struct h_run r;
	CTL(&r, NULL, "stats", "--json", "q");
	h_run_expect(&r, 0);
	json_t *j = json_loads(r.out, 0, NULL);
	cr_assert_not_null(j, "stats --json: %s", r.out);
	h_run_free(&r);
	return j;
}

static bool
has_line(const char *text, const char *line)
{
	size_t n = strlen(line);
	for (const char *p = text; (p = strstr(p, line)) != NULL; p += n)
		if ((p == text || p[-1] == '\n') && (p[n] == '\n' || p[n] == '\0'))
			return true;
	return false;
}

Test(delayed, scheduled_jobs_survive_a_restart_and_are_counted)
{
	struct h_run r;

	setup_recorder(1);
	h_start(&d, 1);
	enqueue_delayed(0, 10, "4s");
	CTL(&r, NULL, "stats", "q");
	h_run_expect(&r, 0);
	cr_assert(strstr(r.out, "  scheduled    10\n") != NULL, "%s", r.out);
	h_run_free(&r);
	json_t *j = stats_json();
	cr_assert_eq(json_integer_value(json_object_get(json_object_get(j, "q"),
	    "scheduled")), 10);
	json_decref(j);
	/* the gauge (the figures are refreshed every second) */
	char *m = NULL;
	long long end = h_now_ms() + H_DEADLINE_MS;
	do {
		free(m);
		h_sleep_ms(100);
		CTL(&r, NULL, "metrics");
		m = strdup(r.out);
		h_run_free(&r);
	} while (!has_line(m, "ferry_queue_scheduled{queue=\"q\"} 10") &&
	    h_now_ms() < end);
	cr_assert(has_line(m, "ferry_queue_scheduled{queue=\"q\"} 10"), "%s", m);
	free(m);
	h_stop(&d);
	cr_assert_eq(runs(), 0);
	cr_assert_eq(h_redis_int(&d, "ZCARD " SCHEDULED), 10);
	h_start(&d, 1);
	wait_runs(10);
	cr_assert_eq(h_distinct_done(&d, 10), 10);
	h_wait_redis_int(&d, 10, "HGET ferry:{q}:stats done");
	cr_assert_eq(runs(), 10);
	h_assert_queue_empty(&d, "q");
	h_stop(&d);
}

/* Each {"n":i}, 0 <= i < n, is once in ready or scheduled (prefix cut),
 * nothing else is there; returns how many are in ready. */
static long long
each_once(int n)
{
	char *seen = calloc((size_t)n, 1);
	redisReply *ready = h_redis(&d, "LRANGE " READY " 0 -1");
	redisReply *sched = h_redis(&d, "ZRANGE " SCHEDULED " 0 -1");
	long long in_ready = (long long)ready->elements;

	for (int pass = 0; pass < 2; pass++) {
		redisReply *l = pass == 0 ? ready : sched;
		for (size_t i = 0; i < l->elements; i++) {
			const char *doc = l->element[i]->str;
			if (pass == 1) {
				cr_assert_not_null(strchr(doc, ':'));
				doc = strchr(doc, ':') + 1;
			}
			int v = -1;
			cr_assert_eq(sscanf(doc, "{\"n\":%d}", &v), 1, "%s", doc);
			cr_assert(v >= 0 && v < n && !seen[v], "job %d twice", v);
			seen[v] = 1;
		}
	}
	cr_assert_eq(ready->elements + sched->elements, (size_t)n);
	freeReplyObject(ready);
	freeReplyObject(sched);
	free(seen);
	return in_ready;
}

Test(delayed, master_killed_while_promoting_loses_nothing)
{
	/* enough that a backlog promoted call after call (1,000 a call) is
	 * still being moved when the test gets to kill the master */
	enum { N = 100000 };

	h_setup(&d, NULL, "[queue q]\nworkers = 0\n");
	h_start(&d, 0);
	enqueue_delayed(0, N, "2s");
	cr_assert_eq(h_redis_int(&d, "ZCARD " SCHEDULED), N);
	long long end = h_now_ms() + H_DEADLINE_MS;
	while (h_redis_int(&d, "LLEN " READY) < 3000 && h_now_ms() < end)
		h_sleep_ms(2);
	kill(d.pid, SIGKILL);
	cr_assert_neq(h_wait_exit(d.pid, H_DEADLINE_MS), -1);
	long long moved = each_once(N);
	cr_assert(moved >= 3000 && moved < N, "killed after %lld of %d", moved,
	    N);
	h_start(&d, 0);
	h_wait_redis_int(&d, 0, "ZCARD " SCHEDULED);
	cr_assert_eq(each_once(N), N);
	h_stop(&d);
}

/* EVAL calls Redis has served (INFO commandstats). */
static long long
evals(void)
{
	redisReply *r = h_redis(&d, "INFO commandstats");
	const char *at = strstr(r->str, "cmdstat_eval:calls=");
	long long n = at != NULL ? atoll(at + strlen("cmdstat_eval:calls=")) : 0;
	freeReplyObject(r);
	return n;
}

/* A backlog due at once is promoted call after call, not 1,000 a tick:
 * 100,000 made due in one step (scheduled for 2100, then every score set
 * to 0 by one ZUNIONSTORE, so however long enqueueing took) would need at
 * least 99 ticks of 0.1 s (9.9 s) at one call per tick, however fast the
 * machine; they are all in ready within 9 s (typically 0.4 s; the margin
 * is for loaded CI machines, not a speed figure). Once drained, the master is
 * back to one call per tick: over 2 s (about 20 ticks, plus heartbeats and
 * reaper runs) it sends far fewer than the hundreds of EVALs a re-run that
 * did not stop would. */
Test(delayed, a_backlog_due_at_once_is_promoted_call_after_call)
{
	enum { N = 100000 };

	h_setup(&d, NULL, "[queue q]\nworkers = 0\n");
	h_start(&d, 0);
	enqueue_when(0, N, "--at", "2100-01-01T00:00:00Z");
	cr_assert_eq(h_redis_int(&d, "ZCARD " SCHEDULED), N);
	long long due = redis_ms();
	cr_assert_eq(h_redis_int(&d, "ZUNIONSTORE " SCHEDULED " 1 " SCHEDULED
	    " WEIGHTS 0"), N);
	long long end = due + 9000;
	while (h_redis_int(&d, "LLEN " READY) < N && redis_ms() < end)
		h_sleep_ms(5);
	long long took = redis_ms() - due;
	cr_assert_eq(h_redis_int(&d, "LLEN " READY), N,
	    "%lld of %d in ready %lld ms after they were due: promoted about a "
	    "call per tick", h_redis_int(&d, "LLEN " READY), N, took);
	cr_assert_eq(h_redis_int(&d, "EXISTS " SCHEDULED), 0);
	cr_assert_eq(each_once(N), N);
	long long before = evals();
	h_sleep_ms(2000);
	long long idle = evals() - before;
	cr_assert(idle >= 5 && idle < 100, "%lld EVALs in 2 s of an idle "
	    "queue", idle);
	h_stop(&d);
}

Test(delayed, bad_values_are_refused)
{
	struct h_run r;
	static const char *const bad[][3] = {
	    { "--delay", "", "--delay '': not a duration" },
	    { "--delay", "abc", "--delay 'abc': not a duration" },
	    { "--delay", "-5s", "--delay '-5s': not a duration" },
	    { "--delay", "1.5s", "--delay '1.5s': unknown unit '.5s'" },
	    { "--delay", "5x", "--delay '5x': unknown unit 'x'" },
	    { "--delay", "3651d", "--delay '3651d': longer than the limit" },
	    { "--delay", "99999999999999999999", "longer than the limit" },
	    { "--at", "tomorrow", "--at 'tomorrow': not an RFC 3339 time" },
	    { "--at", "2026-13-01T00:00:00Z", "not an RFC 3339 time" },
	    { "--at", "2026-02-29T00:00:00Z", "not an RFC 3339 time" },
	    { "--at", "2026-12-02T10:00:00", "not an RFC 3339 time" },
	};

	h_setup(&d, NULL, "[queue q]\nworkers = 0\n");
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		CTL(&r, NULL, "enqueue", bad[i][0], bad[i][1], "q", "{\"n\":1}");
		h_run_expect(&r, 64);
		cr_assert(strstr(r.err, bad[i][2]) != NULL, "%s %s: %s", bad[i][0],
		    bad[i][1], r.err);
		h_run_free(&r);
	}
	CTL(&r, NULL, "enqueue", "--delay", "1s", "--at",
	    "2026-12-02T10:00:00Z", "q", "{\"n\":1}");
	h_run_expect(&r, 64);
	cr_assert(strstr(r.err, "give one of --delay and --at") != NULL, "%s",
	    r.err);
	h_run_free(&r);
	cr_assert_eq(h_redis_int(&d, "EXISTS " SCHEDULED " " READY), 0);
	h_stop(&d);
}

/* enqueue.lua with a due marker, called as a client would. */
static redisReply *
enqueue(const char *marker, int njobs, const char *const *docs)
{
	const char *argv[40] = { READY, SCHEDULED, "0", "0", "1", marker };
	size_t lens[40];
	int argc = 6;

	cr_assert_leq(njobs, 8);
	for (int i = 0; i < njobs; i++) {
		argv[argc++] = docs[i];
		argv[argc++] = "0";
		argv[argc++] = "";
		argv[argc++] = "";
	}
	for (int i = 0; i < argc; i++)
		lens[i] = strlen(argv[i]);
	redisReply *r = queue_script(d.rc, LUA_ENQUEUE, 2, argc, argv, lens);
	cr_assert_not_null(r);
	return r;
}

static void
promote(void)
{
	struct sargs a;
	sargs_promote(&a, "ferry", "q", 1000);
	freeReplyObject(queue_script(d.rc, a.script, a.nkeys, a.argc, a.argv,
	    a.lens));
}

Test(delayed, identical_documents_stay_distinct_and_the_script_is_total)
{
	const char *same[] = { "{\"n\":7}", "{\"n\":7}", "{\"n\":7}" };

	h_setup(&d, NULL, "[queue q]\nworkers = 0\n");
	redisReply *r = enqueue("delay=1000", 3, same);
	cr_assert_eq(r->type, REDIS_REPLY_ARRAY, "%s", r->str);
	freeReplyObject(r);
	freeReplyObject(enqueue("delay=1000", 1, same));
	cr_assert_eq(h_redis_int(&d, "ZCARD " SCHEDULED), 4);
	/* a document ZADDed by hand, due: goes on as it is */
	freeReplyObject(h_redis(&d, "ZADD " SCHEDULED " 0 {\"n\":8}"));
	/* ferry's retries are promoted apart, into requeue */
	freeReplyObject(h_redis(&d, "ZADD ferry:{q}:delayed 0 w"));
	promote();
	cr_assert_eq(h_redis_int(&d, "LLEN " READY), 1);
	cr_assert_eq(h_redis_int(&d, "LLEN ferry:{q}:requeue"), 1);
	redisReply *e = h_redis(&d, "LINDEX " READY " 0");
	cr_assert_str_eq(e->str, "{\"n\":8}");
	freeReplyObject(e);
	h_sleep_ms(1100);
	promote();
	cr_assert_eq(h_redis_int(&d, "LLEN " READY), 5);
	cr_assert_eq(h_redis_int(&d, "EXISTS " SCHEDULED), 0);
	for (int i = 0; i < 4; i++) {
		e = h_redis(&d, "LINDEX " READY " %d", i);
		cr_assert_str_eq(e->str, "{\"n\":7}");
		freeReplyObject(e);
	}
	/* bad markers are refused before any write */
	r = enqueue("delay=-1", 1, same);
	cr_assert_eq(r->type, REDIS_REPLY_ERROR);
	cr_assert(strncmp(r->str, "BADARGS", 7) == 0, "%s", r->str);
	freeReplyObject(r);
	/* a scheduled key of another type does not stop the retries */
	freeReplyObject(h_redis(&d, "DEL " SCHEDULED));
	freeReplyObject(h_redis(&d, "LPUSH " SCHEDULED " x"));
	freeReplyObject(h_redis(&d, "ZADD ferry:{q}:delayed 0 w2"));
	promote();
	cr_assert_eq(h_redis_int(&d, "LLEN ferry:{q}:requeue"), 2);
	cr_assert_eq(h_redis_int(&d, "LLEN " READY), 5);
	h_stop(&d);
}
