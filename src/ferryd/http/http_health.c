/* http_health.c - the probes of the HTTP listener: GET /healthz (liveness:
 * the master's loop answers and supervises its workers) and GET /readyz
 * (readiness: Redis answered lately, every queue has its workers up and
 * none waits for PostgreSQL or Redis, ferryd is not stopping). Both are
 * answered from what the master holds, with no round trip of their own,
 * and need no token. Each answer is counted for /metrics. The listener
 * answers a probe as soon as its request has arrived (http_server.c, from
 * its front door), so the probes need none of the connections other
 * clients may hold; one asked over a connection MHD already serves comes
 * through http_health_get. */
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

static unsigned
readyz(struct master *m, char **body)
{
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
	json_t *o = json_pack("{s:b, s:o}", "ready", ok, "reasons", reasons);
	*body = o != NULL ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
	if (*body == NULL) {
		*body = xstrdup("{\"ready\":false,\"reasons\":[\"out of memory\"]}");
		ok = false;
	}
	answered[PROBE_READYZ][ok]++;
	return ok ? MHD_HTTP_OK : MHD_HTTP_SERVICE_UNAVAILABLE;
}

static unsigned
healthz(struct master *m, char **body)
{
	struct metrics_view v;

	/* answered at all: the master's loop runs (this is it) */
	master_control_view(m, &v);
	bool ok = strcmp(v.phase, "running") == 0;
	*body = xstrdup(ok ? "ok\n" : "stopping\n");
	metrics_view_free(&v);
	answered[PROBE_HEALTHZ][ok]++;
	return ok ? MHD_HTTP_OK : MHD_HTTP_SERVICE_UNAVAILABLE;
}

bool
http_health_answer(struct master *m, const char *path, unsigned *status,
    const char **type, char **body)
{
	if (strcmp(path, "/healthz") == 0) {
		*status = healthz(m, body);
		*type = "text/plain";
	} else if (strcmp(path, "/readyz") == 0) {
		*status = readyz(m, body);
		*type = "application/json";
	} else {
		return false;
	}
	return true;
}

bool
http_health_get(struct http_req *r, const char *url)
{
	unsigned status;
	const char *type;
	char *body;

	if (!http_health_answer(http_req_master(r), url, &status, &type, &body))
		return false;
	http_req_answer(r, status, type, body, strlen(body));
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
