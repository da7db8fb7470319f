/* test_metrics.c - the Prometheus families the Grafana dashboard and the
 * alert rules (etc/grafana, etc/prometheus) read beyond the counters and
 * depths test_control.c checks: the age of the oldest job waiting in
 * ready, dated by the master's refreshes (metrics.c: figures_arrivals),
 * the configured marks (memory, heartbeat_ttl), and an exec handler's
 * crash counted as a sink error of class handler. */
#include <criterion/criterion.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "harness.h"

static struct ferryd d;

static void
teardown(void)
{
	h_teardown(&d);
}

TestSuite(metrics, .fini = teardown, .timeout = 240);

/* The value of the line `series` of `ferryctl metrics`; fails when absent. */
static double
metric(const char *series)
{
	struct h_run r;
	char want[160];

	h_ctl(&r, d.config, NULL, "metrics", (const char *)NULL);
	cr_assert_eq(r.status, 0, "ferryctl metrics: %s", r.err);
	snprintf(want, sizeof(want), "\n%s ", series);
	char *at = strstr(r.out, want);
	cr_assert_not_null(at, "no %s in:\n%s", series, r.out);
	double v = strtod(at + strlen(want), NULL);
	h_run_free(&r);
	return v;
}

#define OLDEST "ferry_queue_oldest_ready_age_seconds{queue=\"q\"}"

/* The oldest age, read once the refreshes have seen `ready` jobs (and
 * stats `enqueued` = taken) in Redis: never more than the time since
 * `since_ms`, before which none of those jobs had arrived. */
static double
oldest_after(long long ready, long long taken, long long since_ms)
{
	long long end = h_now_ms() + H_DEADLINE_MS;

	while ((metric("ferry_queue_ready{queue=\"q\"}") != (double)ready ||
	    metric("ferry_jobs_enqueued_total{queue=\"q\"}") != (double)taken) &&
	    h_now_ms() < end)
		h_sleep_ms(100);
	double age = metric(OLDEST);
	double bound = (double)(h_now_ms() - since_ms) / 1000.;
	cr_assert_leq(age, bound, "oldest age %.3f s, but the jobs are at most "
	    "%.3f s old", age, bound);
	return age;
}

/* ready is a FIFO: the oldest job is the first one not yet taken, dated
 * by the refresh that first counted it; 0 when ready is empty. */
Test(metrics, oldest_ready_age_follows_the_oldest_job)
{
	struct h_run r;

	h_setup(&d, NULL, "[queue q]\nworkers = 1\n");
	h_start(&d, 1);
	h_ctl(&r, d.config, NULL, "pause", "q", (const char *)NULL);
	cr_assert_eq(r.status, 0, "%s", r.err);
	h_run_free(&r);
	long long end = h_now_ms() + H_DEADLINE_MS;
	for (;;) {
		h_ctl(&r, d.config, NULL, "status", (const char *)NULL);
		bool paused = strstr(r.out, " state=paused ") != NULL;
		h_run_free(&r);
		if (paused || h_now_ms() > end)
			break;
		h_sleep_ms(50);
	}
	cr_assert_eq(oldest_after(0, 0, h_now_ms() - 1), 0.);
	h_sleep_ms(1500);       /* the point: time with ready empty is no age */

	long long first = h_now_ms();
	h_push_jobs(&d, "q", 0, 5);
	oldest_after(5, 0, first);
	end = h_now_ms() + H_DEADLINE_MS;
	while (metric(OLDEST) < 2.0 && h_now_ms() < end)
		h_sleep_ms(200);
	cr_assert_geq(oldest_after(5, 0, first), 2.0,
	    "the first jobs waited over 2 s");

	/* a worker's take of the 5 first (fetch.lua: RPOP, `enqueued`): the
	 * oldest is now one of the later 3, pushed after `second` */
	long long second = h_now_ms();
	h_push_jobs(&d, "q", 5, 3);
	freeReplyObject(h_redis(&d, "RPOP ferry:{q}:ready 5"));
	freeReplyObject(h_redis(&d, "HINCRBY ferry:{q}:stats enqueued 5"));
	oldest_after(3, 5, second);

	h_ctl(&r, d.config, NULL, "resume", "q", (const char *)NULL);
	cr_assert_eq(r.status, 0, "%s", r.err);
	h_run_free(&r);
	h_wait_redis_int(&d, 3, "HGET ferry:{q}:stats done");
	cr_assert_eq(oldest_after(0, 8, second), 0.);
	h_stop(&d);
}

/* The configured marks the alert rules compare with, as configured. */
Test(metrics, configured_marks)
{
	h_setup(&d, "memory_warn_percent = 70\nmemory_refuse_percent = 85\n"
	    "heartbeat_ttl = 12s\n", "[queue q]\nworkers = 1\n");
	h_start(&d, 1);
	cr_assert_eq(metric("ferry_redis_memory_warn_ratio"), 0.70);
	cr_assert_eq(metric("ferry_redis_memory_refuse_ratio"), 0.85);
	cr_assert_eq(metric("ferry_heartbeat_ttl_seconds"), 12.);
	h_stop(&d);
}

#define HANDLER_ERRORS \
	"ferry_sink_errors_total{queue=\"q\",class=\"handler\"}"

/* A job the handler answers `fail` is the job's failure, not the sink's:
 * no error counted. A handler that dies leaving jobs without a result is
 * the handler failing (as one that cannot start or prints nonsense): a
 * sink error of class handler, one per run, and the worker's last error
 * (FerrySinkOutage reads them while no job gets done). */
Test(metrics, a_handler_crash_is_a_handler_sink_error)
{
	char handler[400], queues[600];
	struct h_run r;

	h_setup(&d, NULL, "");
	snprintf(handler, sizeof(handler), "%s/handler.sh", d.dir);
	h_write_file(handler, "#!/bin/sh\nwhile IFS= read -r line; do\n"
	    "\tid=$(printf '%%s' \"$line\" | cut -d'\"' -f4)\n"
	    "\tcase $line in\n\t*crash*) kill -9 $$ ;;\n"
	    "\t*refuse*) echo \"fail $id refused\" ;;\n"
	    "\t*) echo \"ok $id\" ;;\n\tesac\ndone\n");
	chmod(handler, 0755);
	snprintf(queues, sizeof(queues), "[queue q]\nhandler = exec\n"
	    "command = %s\nworkers = 1\nmax_attempts = 1\n", handler);
	h_config(&d, NULL, queues);
	h_start(&d, 1);
	freeReplyObject(h_redis(&d, "LPUSH ferry:{q}:ready %s %s",
	    "{\"id\":\"good-1\"}", "{\"id\":\"refused-1\",\"refuse\":1}"));
	h_wait_redis_int(&d, 1, "LLEN ferry:{q}:dead");
	h_wait_redis_int(&d, 1, "HGET ferry:{q}:stats done");
	cr_assert_eq(metric(HANDLER_ERRORS), 0., "a job failed is no sink error");

	freeReplyObject(h_redis(&d, "LPUSH ferry:{q}:ready %s",
	    "{\"id\":\"crash-1\",\"crash\":1}"));
	h_wait_redis_int(&d, 2, "LLEN ferry:{q}:dead");
	cr_assert_eq(metric(HANDLER_ERRORS), 1.);
	cr_assert_eq(metric("ferry_sink_errors_total{queue=\"q\","
	    "class=\"other\"}"), 0.);
	h_ctl(&r, d.config, NULL, "status", (const char *)NULL);
	cr_assert(strstr(r.out, "handler killed by signal 9 (SIGKILL): 1 of 1 "
	    "job without a result, retried") != NULL, "%s", r.out);
	h_run_free(&r);
	h_wait_log(&d, "queue q: handler killed by signal 9 (SIGKILL)", 1);
	h_stop(&d);
}

/* tests/grafana_check.py against a real scrape rather than the source:
 * the dashboard and the rules name only what ferryd writes, and the
 * source it reads otherwise names the same families and labels. */
Test(metrics, dashboard_and_rules_match_a_scrape)
{
	struct h_run r;
	char path[400], out[400], cmd[1600];

	h_setup(&d, NULL, "[queue q]\nworkers = 1\n");
	h_start(&d, 1);
	snprintf(path, sizeof(path), "%s/metrics.txt", d.dir);
	snprintf(out, sizeof(out), "%s/grafana_check.out", d.dir);
	long long end = h_now_ms() + H_DEADLINE_MS;
	for (;;) {              /* every family with its series: the figures */
		h_ctl(&r, d.config, NULL, "metrics", (const char *)NULL);
		bool all = strstr(r.out, "\n" OLDEST " ") != NULL &&
		    strstr(r.out, "\nferry_redis_used_memory_bytes ") != NULL;
		if (all || h_now_ms() > end)
			break;
		h_run_free(&r);
		h_sleep_ms(100);
	}
	h_write_file(path, "%s", r.out);
	h_run_free(&r);
	snprintf(cmd, sizeof(cmd), "python3 '%s/tests/grafana_check.py' '%s' "
	    "'%s' >'%s' 2>&1", TEST_SRCDIR, TEST_SRCDIR, path, out);
	int status = system(cmd);
	char *said = h_read_file(out);
	cr_assert_eq(status, 0, "%s: exit %d:\n%s", cmd, status, said);
	cr_assert_not_null(strstr(said, "metrics ferryd exports, and no other"),
	    "%s", said);
	free(said);
	h_stop(&d);
}
