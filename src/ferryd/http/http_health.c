/* http_health.c - the probes of the HTTP listener: GET /healthz (liveness:
 * the master's loop answers and supervises its workers) and GET /readyz
 * (readiness: Redis answered lately, every queue has its workers up and
 * none waits for PostgreSQL or Redis, ferryd is not stopping). Both are
 * answered from what the master holds, with no round trip of their own,
 * and need no token. Each answer is counted for /metrics. */
#include <jansson.h>
#include <microhttpd.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "buf.h"
#include "http.h"
#include "master_control.h"
#include "metrics.h"
#include "util.h"

/* Redis refreshes the figures every second: older than this, it has not
 * answered */
#define READY_REDIS_FRESH_MS 5000

enum { PROBE_HEALTHZ, PROBE_READYZ, PROBES };
static unsigned long answered[PROBES][2];       /* [probe][ok] */

static const char *const probe_names[PROBES] = { "healthz", "readyz" };

static void
reason(json_t *reasons, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void
reason(json_t *reasons, const char *fmt, ...)
{
	char text[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	json_array_append_new(reasons, json_string(text));
}

/* Is this worker up and not waiting for a server? Adds why not. */
static bool
worker_ready(const struct metrics_view *v, const struct metrics_worker_view *w,
    json_t *reasons)
{
	char err[SCOREBOARD_ERROR_MAX];

	if (w->fatal || w->pid == 0 || w->sb_index == -1) {
		reason(reasons, "queue %s: worker %d is %s", w->queue, w->number,
		    w->fatal ? "fatal" : w->pid == 0 ? "restarting" : "starting");
		return false;
	}
	struct scoreboard_slot *s = scoreboard_slot(v->sb, w->sb_index);
	int state = atomic_load(&s->state);
	if (state == SB_STARTING) {
		reason(reasons, "queue %s: worker %d is starting", w->queue,
		    w->number);
		return false;
	}
	if (state != SB_WAIT_POSTGRES && state != SB_WAIT_REDIS)
		return true;
	scoreboard_get_error(s, err, sizeof(err));
	reason(reasons, "queue %s: worker %d waits for %s%s%s", w->queue,
	    w->number, state == SB_WAIT_POSTGRES ? "PostgreSQL" : "Redis",
	    err[0] != '\0' ? ": " : "", err);
	return false;
}

static void
readyz(struct http_req *r)
{
	struct master *m = http_req_master(r);
	struct metrics_view v;
	int64_t used, maxmemory, memory_ms, now = util_monotonic_ms();
	json_t *reasons = json_array();

	master_control_view(m, &v);
	if (strcmp(v.phase, "running") != 0)
		reason(reasons, "ferryd is %s", v.phase);
	metrics_memory(master_control_figures(m), &used, &maxmemory, &memory_ms);
	if (!v.redis_up || memory_ms == 0 || now - memory_ms > READY_REDIS_FRESH_MS)
		reason(reasons, "redis: %s", !v.redis_up ? "unreachable" :
		    memory_ms == 0 ? "not answered yet" : "no answer for more than "
		    "5 s");
	for (int i = 0; i < v.nqueues; i++) {
		const struct metrics_queue_view *q = &v.queues[i];
		int up = 0;
		if (q->removed)
			continue;
		for (int j = 0; j < q->nworkers; j++)
			up += !q->workers[j].retiring &&
			    worker_ready(&v, &q->workers[j], reasons);
		if (up < q->target)
			reason(reasons, "queue %s: %d of %d workers ready", q->name,
			    up, q->target);
	}
	metrics_view_free(&v);
	bool ok = json_array_size(reasons) == 0;
	answered[PROBE_READYZ][ok]++;
	http_req_json(r, ok ? MHD_HTTP_OK : MHD_HTTP_SERVICE_UNAVAILABLE,
	    json_pack("{s:b, s:o}", "ready", ok, "reasons", reasons));
}

static void
healthz(struct http_req *r)
{
	struct metrics_view v;

	/* answered at all: the master's loop runs (this is it) */
	master_control_view(http_req_master(r), &v);
	bool ok = strcmp(v.phase, "running") == 0;
	char *text = xstrdup(ok ? "ok\n" : "stopping\n");
	metrics_view_free(&v);
	answered[PROBE_HEALTHZ][ok]++;
	http_req_answer(r, ok ? MHD_HTTP_OK : MHD_HTTP_SERVICE_UNAVAILABLE,
	    "text/plain", text, strlen(text));
}

bool
http_health_get(struct http_req *r, const char *url)
{
	if (strcmp(url, "/healthz") == 0)
		healthz(r);
	else if (strcmp(url, "/readyz") == 0)
		readyz(r);
	else
		return false;
	return true;
}

void
http_health_metrics(struct buf *o)
{
	buf_printf(o, "# HELP ferry_probe_answers_total Answers to GET /healthz "
	    "and /readyz, by result.\n# TYPE ferry_probe_answers_total "
	    "counter\n");
	for (int p = 0; p < PROBES; p++)
		for (int ok = 1; ok >= 0; ok--)
			buf_printf(o, "ferry_probe_answers_total{probe=\"%s\","
			    "result=\"%s\"} %lu\n", probe_names[p], ok ? "ok" :
			    "unavailable", answered[p][ok]);
}
