/* test_dashboard_hosts.c - the dashboard on several hosts: two ferryd
 * masters on one Redis, each with its own listener (metrics_listen, and
 * http_listen, its new name) and its own master id (FERRYD_TEST_MASTER_ID:
 * host-a, host-b, as two machines would be). Each master's page and /api
 * show the same queue totals, those of Redis (`ferryctl stats --json`),
 * and only its own workers, naming its own host and master id. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "harness_http.h"

#define MASTER_ID_ENV "FERRYD_TEST_MASTER_ID"   /* master_id.h */
#define JOBS_A 200
#define JOBS_B 50
#define WAITING_B 7

static struct ferryd d[2];
static int port[2];
static const char *const ids[2] = { "host-a:1:0000000a", "host-b:1:0000000b" };
static const char *const hosts[2] = { "host-a", "host-b" };

static void
teardown(void)
{
	unsetenv(MASTER_ID_ENV);
	h_teardown(&d[1]);          /* the peer first: d[0] owns Redis */
	h_teardown(&d[0]);
}

TestSuite(dashboard_hosts, .fini = teardown, .timeout = 300);

/* `ferryctl CMD QUEUE` on master i's control socket. */
static void
ctl(int i, const char *cmd, const char *q)
{
	struct h_run r;

	h_ctl(&r, d[i].config, NULL, cmd, q, (const char *)NULL);
	h_run_expect(&r, 0);
	h_run_free(&r);
}

/* Wait until every worker of queue q on master i says `paused`. */
static void
wait_paused(int i, const char *q)
{
	long long end = h_now_ms() + H_DEADLINE_MS;
	int paused = 0, of = 0;

	do {
		json_t *o = h_http_json(port[i], "/api/workers"), *w;
		size_t k;
		paused = of = 0;
		json_array_foreach(json_object_get(o, "workers"), k, w)
			if (strcmp(h_jstr(w, "queue"), q) == 0) {
				of++;
				paused += strcmp(h_jstr(w, "state"), "paused") == 0;
			}
		json_decref(o);
	} while ((of == 0 || paused < of) && h_now_ms() < end &&
	    (h_sleep_ms(100), 1));
	cr_assert(of > 0 && paused == of, "%s: %d of %d workers of %s paused",
	    hosts[i], paused, of, q);
}

/* Each depth and counter of every queue in master i's /api/queues is
 * that of `ferryctl stats --json` (Redis, read by ferryctl itself). */
static void
assert_totals_are_redis(int i, json_t *stats)
{
	static const char *const depths[] = { "ready", "requeued", "processing",
		"delayed", "scheduled", "dead" };
	static const char *const counters[] = { "enqueued", "done", "retried",
		"deadlettered", "recovered", "cache_missing" };
	json_t *o = h_http_json(port[i], "/api/queues"), *e;
	size_t k;
	int seen = 0;

	json_array_foreach(json_object_get(o, "queues"), k, e) {
		const char *q = h_jstr(e, "name");
		json_t *st = json_object_get(stats, q);
		cr_assert_not_null(st, "no queue %s in ferryctl stats", q);
		for (size_t n = 0; n < sizeof(depths) / sizeof(depths[0]); n++)
			cr_assert_eq(json_integer_value(json_object_get(e,
			    depths[n])), json_integer_value(json_object_get(st,
			    depths[n])), "%s: queue %s %s", hosts[i], q, depths[n]);
		for (size_t n = 0; n < sizeof(counters) / sizeof(counters[0]); n++)
			cr_assert_eq(json_integer_value(json_object_get(json_object_get(
			    e, "counters"), counters[n])), json_integer_value(
			    json_object_get(json_object_get(st, "counters"),
			    counters[n])), "%s: queue %s %s", hosts[i], q, counters[n]);
		seen++;
	}
	cr_assert_eq(seen, 2, "%s: %d queues", hosts[i], seen);
	cr_assert_str_eq(h_jstr(o, "host"), hosts[i]);
	cr_assert_str_eq(h_jstr(o, "master_id"), ids[i]);
	json_decref(o);
}

/* Master i's /api/workers and page list its own worker processes (the
 * children of its ferryd), with its host, and none of the other's. */
static void
assert_own_workers(int i, int n)
{
	pid_t mine[H_MAX_PIDS], theirs[H_MAX_PIDS];
	int nmine = h_children(d[i].pid, mine, H_MAX_PIDS);
	int ntheirs = h_children(d[1 - i].pid, theirs, H_MAX_PIDS);
	json_t *o = h_http_json(port[i], "/api/workers"), *w;
	char *body, want[160];
	size_t k;

	cr_assert_eq(nmine, n);
	cr_assert_eq(json_array_size(json_object_get(o, "workers")), (size_t)n,
	    "%s: %s", hosts[i], json_dumps(o, 0));
	cr_assert_str_eq(h_jstr(o, "master_id"), ids[i]);
	json_array_foreach(json_object_get(o, "workers"), k, w) {
		pid_t pid = (pid_t)json_integer_value(json_object_get(w, "pid"));
		int found = 0;
		for (int j = 0; j < nmine; j++)
			found += mine[j] == pid;
		cr_assert_eq(found, 1, "%s lists pid %d, not its own", hosts[i],
		    (int)pid);
		cr_assert_str_eq(h_jstr(w, "host"), hosts[i]);
	}
	json_decref(o);

	cr_assert_eq(h_http(port[i], "GET", "/", NULL, &body), 200);
	snprintf(want, sizeof(want), "<title>ferry &middot; %s</title>",
	    hosts[i]);
	cr_assert(strstr(body, want) != NULL, "%s: no %s", hosts[i], want);
	snprintf(want, sizeof(want), "<span id=\"host\">%s</span>", hosts[i]);
	cr_assert(strstr(body, want) != NULL, "%s: no %s", hosts[i], want);
	snprintf(want, sizeof(want), "master %s ", ids[i]);
	cr_assert(strstr(body, want) != NULL, "%s: no %s", hosts[i], want);
	cr_assert(strstr(body, hosts[1 - i]) == NULL, "%s's page names %s",
	    hosts[i], hosts[1 - i]);
	int rows = 0;
	for (const char *p = body; (p = strstr(p, "<tr data-pid=")) != NULL; p++)
		rows++;
	cr_assert_eq(rows, n, "%s: %d workers in the page", hosts[i], rows);
	for (int j = 0; j < nmine; j++) {
		snprintf(want, sizeof(want), "<tr data-pid=\"%d\">", (int)mine[j]);
		cr_assert(strstr(body, want) != NULL, "%s: no worker %d",
		    hosts[i], (int)mine[j]);
	}
	for (int j = 0; j < ntheirs; j++) {
		snprintf(want, sizeof(want), "<tr data-pid=\"%d\">", (int)theirs[j]);
		cr_assert(strstr(body, want) == NULL, "%s lists %s's worker %d",
		    hosts[i], hosts[1 - i], (int)theirs[j]);
	}
	free(body);
}

Test(dashboard_hosts, each_page_has_the_totals_and_its_own_workers)
{
	/* host-a runs 2 workers of a and 1 of b, host-b 1 and 1 */
	const char *queues[2] = { "[queue a]\nworkers = 2\n[queue b]\n"
	    "workers = 1\n", "[queue a]\nworkers = 1\n[queue b]\nworkers = 1\n" };
	const int nworkers[2] = { 3, 2 };
	char extra[2][80];

	for (int i = 0; i < 2; i++) {
		port[i] = test_free_port();
		snprintf(extra[i], sizeof(extra[i]), "%s = 127.0.0.1:%d\n",
		    i == 0 ? "metrics_listen" : "http_listen", port[i]);
	}
	h_setup(&d[0], extra[0], queues[0]);
	h_setup_peer(&d[1], &d[0], extra[1], queues[1]);
	for (int i = 0; i < 2; i++) {
		setenv(MASTER_ID_ENV, ids[i], 1);
		h_start(&d[i], nworkers[i]);
		h_wait_log(&d[i], "metrics served over HTTP", 1);
	}
	unsetenv(MASTER_ID_ENV);

	/* jobs done by the workers of both hosts, 2 dead, and b paused on
	 * both with jobs waiting */
	h_push_jobs(&d[0], "a", 0, JOBS_A);
	h_push_jobs(&d[0], "b", 0, JOBS_B);
	freeReplyObject(h_redis(&d[0], "LPUSH ferry:{a}:ready %s %s",
	    "not json", "{\"n\":"));
	h_wait_redis_int(&d[0], JOBS_A, "HGET ferry:{a}:stats done");
	h_wait_redis_int(&d[0], JOBS_B, "HGET ferry:{b}:stats done");
	h_wait_redis_int(&d[0], 2, "LLEN ferry:{a}:dead");
	for (int i = 0; i < 2; i++) {
		ctl(i, "pause", "b");
		wait_paused(i, "b");
	}
	h_push_jobs(&d[0], "b", JOBS_B, WAITING_B);
	for (int i = 0; i < 2; i++) {
		h_wait_api_queue(port[i], "a", "done", JOBS_A);
		h_wait_api_queue(port[i], "a", "dead", 2);
		h_wait_api_queue(port[i], "b", "ready", WAITING_B);
	}

	/* the same totals on both pages, those of Redis */
	struct h_run r;
	cr_assert_eq(h_ctl(&r, d[0].config, NULL, "stats", "--json", NULL), 0,
	    "%s", r.err);
	json_t *stats = json_loads(r.out, 0, NULL);
	cr_assert_not_null(stats, "%s", r.out);
	h_run_free(&r);
	for (int i = 0; i < 2; i++) {
		char *body, want[80];
		assert_totals_are_redis(i, stats);
		cr_assert_gt(h_api_queue(port[i], "b", "oldest_ready_age_ms"), 0);
		cr_assert_eq(h_api_queue(port[i], "a", "oldest_ready_age_ms"), 0);
		cr_assert_eq(h_http(port[i], "GET", "/", NULL, &body), 200);
		snprintf(want, sizeof(want), "<td data-k=\"done\">%d</td>", JOBS_A);
		cr_assert(strstr(body, want) != NULL, "%s: no %s", hosts[i], want);
		snprintf(want, sizeof(want), "<td data-k=\"ready\">%d</td>",
		    WAITING_B);
		cr_assert(strstr(body, want) != NULL, "%s: no %s", hosts[i], want);
		free(body);
	}
	json_decref(stats);

	/* each its own workers, host and master id */
	for (int i = 0; i < 2; i++)
		assert_own_workers(i, nworkers[i]);

	for (int i = 0; i < 2; i++)
		ctl(i, "resume", "b");
	h_wait_redis_int(&d[0], JOBS_B + WAITING_B, "HGET ferry:{b}:stats done");
	for (int i = 0; i < 2; i++)
		h_wait_api_queue(port[i], "b", "oldest_ready_age_ms", 0);
	h_stop(&d[1]);
	h_stop(&d[0]);
}
