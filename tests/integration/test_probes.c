/* test_probes.c - GET /healthz and /readyz on ferryd's HTTP listener with a
 * real Redis and PostgreSQL: both answer without the token and whatever
 * the Host header says (a Kubernetes probe names the pod's IP); /readyz is
 * 503 naming the cause while Redis is down, while a worker waits for
 * PostgreSQL, while a queue has a worker restarting, and while ferryd
 * drains after SIGTERM (then /healthz is 503 too); every answer is counted
 * in /metrics. After an outage, /readyz is 200 as soon as the workers are
 * back, not once the master's own connection is done waiting out its
 * backoff. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "harness_http.h"
#include "pg_events.h"

static struct ferryd d;
static int port;

static void
teardown(void)
{
	h_teardown(&d);
}

TestSuite(probes, .fini = teardown, .timeout = 240);

/* The listener on a free port, a token, and `more` [ferryd] lines. */
static const char *
http_lines(const char *more)
{
	static char lines[512];

	port = test_free_port();
	snprintf(lines, sizeof(lines), "http_listen = 127.0.0.1:%d\n"
	    "http_token = secret-token-0123456789abcdef\n%s", port,
	    more != NULL ? more : "");
	return lines;
}

/* GET path: its status, its body in *body (malloc'd) when not NULL. */
static int
probe(const char *path, char **body)
{
	return h_http_exchange(port, "GET", path, "Host: 10.1.2.3:8080\r\n", NULL,
	    body);
}

/* Wait until /readyz answers `status`; its body (malloc'd). */
static char *
wait_ready(int status)
{
	long long end = h_now_ms() + H_DEADLINE_MS;
	char *body = NULL;

	for (;;) {
		free(body);
		if (probe("/readyz", &body) == status)
			return body;
		cr_assert_lt(h_now_ms(), end, "/readyz never answered %d: %s",
		    status, body);
		h_sleep_ms(50);
	}
}

/* Wait until /readyz answers 503 with each reason listed (the list ends
 * with NULL) among its reasons, whatever else it names: other reasons
 * may come first or stay (a worker that waits for Redis too). */
static void __attribute__((sentinel))
wait_not_ready(const char *reason, ...)
{
	const char *want[8];
	int n = 0;
	va_list ap;

	va_start(ap, reason);
	for (; reason != NULL && n < 8; reason = va_arg(ap, const char *))
		want[n++] = reason;
	va_end(ap);
	long long end = h_now_ms() + H_DEADLINE_MS;
	char *body = NULL;
	for (;;) {
		free(body);
		int status = probe("/readyz", &body), found = 0;
		while (status == 503 && found < n && strstr(body, want[found]))
			found++;
		if (status == 503 && found == n)
			break;
		cr_assert_lt(h_now_ms(), end, "/readyz never answered 503 with "
		    "\"%s\" among its reasons: %d %s", want[found], status, body);
		h_sleep_ms(50);
	}
	free(body);
}

Test(probes, ready_without_token_or_a_known_host)
{
	char *body;

	h_setup(&d, http_lines(NULL), "[queue q]\nworkers = 2\n");
	h_start(&d, 2);
	cr_assert_eq(probe("/healthz", &body), 200);
	cr_assert_str_eq(body, "ok\n");
	free(body);
	body = wait_ready(200);
	json_t *o = json_loads(body, 0, NULL);
	cr_assert(json_is_true(json_object_get(o, "ready")), "%s", body);
	cr_assert_eq(json_array_size(json_object_get(o, "reasons")), 0);
	json_decref(o);
	free(body);
	/* the rest of the listener still wants its own name */
	cr_assert_eq(probe("/api/queues", NULL), 421);
	cr_assert_eq(h_http(port, "GET", "/metrics", NULL, &body), 200);
	cr_assert_not_null(strstr(body, "ferry_probe_answers_total{probe="
	    "\"healthz\",result=\"ok\"} 1\n"), "%s", body);
	cr_assert_not_null(strstr(body, "ferry_probe_answers_total{probe="
	    "\"readyz\",result=\"ok\"} "), "%s", body);
	free(body);
	h_stop(&d);
}

Test(probes, redis_down_is_not_ready)
{
	char *body;

	h_setup(&d, http_lines(NULL), "[queue q]\nworkers = 1\n");
	h_start(&d, 1);
	free(wait_ready(200));
	test_redis_kill9(&d.redis);
	wait_not_ready("\"redis: ", (const char *)NULL);
	cr_assert_eq(probe("/healthz", NULL), 200, "alive all the same");
	cr_assert_eq(test_redis_restart(&d.redis, NULL), 0);
	free(wait_ready(200));
	cr_assert_eq(h_http(port, "GET", "/metrics", NULL, &body), 200);
	cr_assert_not_null(strstr(body, "ferry_probe_answers_total{probe="
	    "\"readyz\",result=\"unavailable\"} "), "%s", body);
	free(body);
	h_stop(&d);
}

Test(probes, a_worker_waiting_for_postgres_is_not_ready)
{
	pe_setup(&d, http_lines(NULL), "workers = 1\n");
	cr_assert_eq(pe_ctl(&d, "init-db", NULL), 0);
	h_start(&d, 1);
	free(wait_ready(200));
	cr_assert_eq(test_pg_pause(&d.pg), 0);
	h_push_jobs(&d, "q", 0, 10);
	h_wait_log(&d, "waits in Redis", 1);
	wait_not_ready("queue q: worker 1 waits for PostgreSQL",
	    (const char *)NULL);
	/* its last error (an error may quote a row): with the token only */
	char *body;
	cr_assert_eq(h_http(port, "GET", "/api/workers", NULL, &body), 200);
	cr_assert(strstr(body, "\"last_error\":\"(hidden: errors may quote a "
	    "row; send the token of [ferryd] http_token)\"") != NULL, "%s", body);
	free(body);
	cr_assert_eq(h_http(port, "GET", "/", NULL, &body), 200);
	cr_assert(strstr(body, "(hidden: errors may quote a row") != NULL,
	    "the page shows the worker's error: %s", body);
	free(body);
	cr_assert_eq(h_http(port, "GET", "/api/workers",
	    "Bearer secret-token-0123456789abcdef", &body), 200);
	cr_assert(strstr(body, "\"last_error\":\"") != NULL &&
	    strstr(body, "hidden") == NULL, "%s", body);
	free(body);
	cr_assert_eq(test_pg_resume(&d.pg), 0);
	h_wait_redis_int(&d, 10, "HGET ferry:{q}:stats done");
	free(wait_ready(200));
	h_stop(&d);
}

/* A worker killed twice in a row is restarted after restart_backoff_min
 * (5 s): meanwhile its queue is not ready. */
Test(probes, a_queue_short_of_workers_is_not_ready)
{
	pid_t pid;

	h_setup(&d, http_lines("restart_backoff_min = 5s\n"),
	    "[queue q]\nworkers = 1\n");
	h_start(&d, 1);
	free(wait_ready(200));
	for (int i = 0; i < 2; i++) {
		cr_assert_eq(h_children(d.pid, &pid, 1), 1);
		kill(pid, SIGKILL);
		h_wait_gone(&d, pid);
		if (i == 0)
			h_wait_children(&d, 1);
	}
	wait_not_ready("queue q: worker 1 is restarting",
	    "queue q: 0 of 1 workers ready", (const char *)NULL);
	free(wait_ready(200));
	h_stop(&d);
}

/* Was: after Redis came back, /readyz stayed 503 for seconds after the
 * workers were back: the master's own connection waited out its backoff
 * (0.1 s doubling to 5 s), then the figures their next second. Now a
 * worker reaching Redis makes the master's connection try at once, and
 * the figures follow within a tenth of a second. The outage is 8.5 s
 * long: the master's tries come 6.3 s and 11.3 s after the loss, so its
 * own would come 2.8 s after Redis is back; a worker killed then comes
 * back at once. */
Test(probes, ready_as_soon_as_the_workers_are_back)
{
	long long end = h_now_ms() + H_DEADLINE_MS, back, workers, ready;
	char *body = NULL;
	pid_t pid;

	h_setup(&d, http_lines(NULL), "[queue q]\nworkers = 1\n");
	h_start(&d, 1);
	free(wait_ready(200));
	test_redis_kill9(&d.redis);
	wait_not_ready("\"redis: unreachable\"", (const char *)NULL);
	h_sleep_ms(8500);       /* the outage */
	cr_assert_eq(test_redis_restart(&d.redis, NULL), 0);
	back = h_now_ms();
	cr_assert_eq(h_children(d.pid, &pid, 1), 1);
	kill(pid, SIGKILL);
	h_wait_gone(&d, pid);
	/* the workers are back once /readyz names nothing of queue q */
	for (;;) {
		free(body);
		if (probe("/readyz", &body) == 200 || strstr(body, "queue q:") ==
		    NULL)
			break;
		cr_assert_lt(h_now_ms(), end, "the worker never came back: %s",
		    body);
		h_sleep_ms(20);
	}
	free(body);
	workers = h_now_ms();
	free(wait_ready(200));
	ready = h_now_ms();
	fprintf(stderr, "probes: Redis back at 0 ms, the worker at %lld ms, "
	    "/readyz 200 at %lld ms\n", workers - back, ready - back);
	cr_assert_lt(ready - workers, 1500, "/readyz was 200 %lld ms after the "
	    "worker was back", ready - workers);
	h_stop(&d);
}

/* SIGTERM while a worker holds a batch for 3 s: until ferryd is gone,
 * both probes say it is stopping. */
Test(probes, draining_is_neither_ready_nor_healthy)
{
	char cmd[400], queues[600], *body;

	h_setup(&d, NULL, "");
	h_write_script(&d, "slow.sh", cmd, sizeof(cmd),
	    "while IFS= read -r line; do\n  sleep 3; echo ok\ndone\n");
	snprintf(queues, sizeof(queues), "[queue q]\nworkers = 1\n"
	    "handler = exec\ncommand = %s\n", cmd);
	h_config(&d, http_lines(NULL), queues);
	h_start(&d, 1);
	free(wait_ready(200));
	h_push_jobs(&d, "q", 0, 1);
	h_wait_redis_int(&d, 0, "LLEN ferry:{q}:ready");
	kill(d.pid, SIGTERM);
	wait_not_ready("ferryd is stopping", (const char *)NULL);
	cr_assert_eq(probe("/healthz", &body), 503);
	cr_assert_str_eq(body, "stopping\n");
	free(body);
	cr_assert_eq(h_wait_exit(d.pid, H_DEADLINE_MS), 0);
	d.pid = 0;
}
