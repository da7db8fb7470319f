/* http_api.c - the dashboard's read-only JSON (GET): /api/queues (depths
 * and counters of each queue, as Redis said at the last refresh of
 * metrics.c, and the age of its oldest ready job), /api/workers (this
 * master's scoreboard), /api/series (the chart's rates, master_series.c),
 * /api/events (master_events.c). All of it is what the master holds
 * already: nothing here waits for Redis. */
#include <jansson.h>
#include <microhttpd.h>
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "http.h"
#include "master_control.h"
#include "master_events.h"
#include "master_series.h"
#include "metrics.h"
#include "util.h"

const char *const http_depth_names[HTTP_DEPTHS] = {
	"ready", "requeued", "processing", "delayed", "scheduled", "dead",
};

int64_t
http_depth(const struct metrics_figures *f, int i)
{
	const int64_t v[HTTP_DEPTHS] = { f->ready, f->requeued, f->processing,
		f->delayed, f->scheduled, f->dead };

	return v[i];
}

int64_t
http_enqueued(const struct metrics_figures *f)
{
	return f->enqueued + f->ready;
}

size_t
http_host_len(const char *master_id)
{
	const char *colon = strchr(master_id, ':');

	return colon != NULL ? (size_t)(colon - master_id) : strlen(master_id);
}

static json_t *
host_json(const char *master_id)
{
	return json_stringn(master_id, http_host_len(master_id));
}

/* What every answer starts with: who answers. */
static json_t *
about(struct master *m, const struct metrics_view *v)
{
	return json_pack("{s:o, s:s, s:b, s:b, s:s}", "host",
	    host_json(v->master_id), "master_id", v->master_id, "redis_up",
	    v->redis_up, "actions", http_actions_enabled(m), "phase", v->phase);
}

static void
set_int(json_t *o, const char *key, int64_t n)
{
	json_object_set_new(o, key, json_integer((json_int_t)n));
}

static json_t *
queue_json(struct master *m, const struct metrics_queue_view *q)
{
	const struct metrics_figures *f = metrics_figures_of(
	    master_control_figures(m), q->name);
	int live = 0;
	json_t *o;

	for (int i = 0; i < q->nworkers; i++)
		live += q->workers[i].pid != 0;
	o = json_pack("{s:s, s:b, s:i, s:i}", "name", q->name, "paused",
	    q->paused, "workers", live, "target", q->target);
	if (o == NULL || f == NULL) {   /* before the first refresh */
		json_object_set_new(o, "figures", json_false());
		return o;
	}
	for (int i = 0; i < HTTP_DEPTHS; i++)
		set_int(o, http_depth_names[i], http_depth(f, i));
	json_object_set_new(o, "counters", json_pack("{s:I, s:I, s:I, s:I, "
	    "s:I, s:I}", "enqueued", (json_int_t)http_enqueued(f), "done",
	    (json_int_t)f->done, "retried", (json_int_t)f->retried, "deadlettered",
	    (json_int_t)f->deadlettered, "recovered", (json_int_t)f->recovered,
	    "cache_missing", (json_int_t)f->cache_missing));
	json_object_set_new(o, "memory", json_pack("{s:I, s:I, s:I, s:I, s:I, "
	    "s:I, s:b}", "bytes", (json_int_t)f->bytes, "protected_keys",
	    (json_int_t)f->protected_keys, "protected_bytes",
	    (json_int_t)f->protected_bytes, "orphans", (json_int_t)f->orphans,
	    "reprotected", (json_int_t)f->reprotected, "protected_lost",
	    (json_int_t)f->protected_lost, "refusing", f->refusing != 0));
	set_int(o, "age_ms", util_monotonic_ms() - f->updated_ms);
	set_int(o, "oldest_ready_age_ms", metrics_oldest_ready_ms(f));
	return o;
}

static void
api_queues(struct http_req *r)
{
	struct master *m = http_req_master(r);
	struct metrics_view v;

	master_control_view(m, &v);
	json_t *o = about(m, &v), *a = json_array();
	for (int i = 0; i < v.nqueues; i++)
		if (!v.queues[i].removed)
			json_array_append_new(a, queue_json(m, &v.queues[i]));
	json_object_set_new(o, "queues", a);
	metrics_view_free(&v);
	http_req_json(r, MHD_HTTP_OK, o);
}

/* A worker as JSON; its last error only where `errors` (http_may_see_errors). */
static json_t *
worker_json(struct master *m, const struct metrics_view *v, bool errors,
    const struct metrics_worker_view *w)
{
	const struct queue_config *qc = config_find_queue(
	    master_control_config(m), w->queue);
	json_t *o = json_pack("{s:s, s:o, s:i, s:i, s:i, s:i}", "queue",
	    w->queue, "host", host_json(v->master_id), "number", w->number,
	    "pid", (int)w->pid, "restarts", w->restarts, "batch_size",
	    qc != NULL ? qc->batch_size : 0);
	const char *state = w->fatal ? "fatal" : w->pid == 0 ? "restarting" :
	    "starting";

	if (o == NULL || w->sb_index == -1) {
		json_object_set_new(o, "state", json_string(state));
		return o;
	}
	struct scoreboard_slot *s = scoreboard_slot(v->sb, w->sb_index);
	int64_t now = util_monotonic_ms();
	int64_t start = atomic_load(&s->batch_start_ms);
	int64_t seen = atomic_load(&s->seen_ms);
	char err[SCOREBOARD_ERROR_MAX];

	scoreboard_get_error(s, err, sizeof(err));
	json_object_set_new(o, "last_error", err[0] == '\0' ? json_null() :
	    json_string(errors ? err : HTTP_ERROR_HIDDEN));
	if (w->pid == 0) {
		/* gone (fatal, or restarting): its slot keeps why */
		json_object_set_new(o, "state", json_string(state));
		return o;
	}
	json_object_set_new(o, "state", json_string(w->retiring ? "retiring" :
	    scoreboard_state_name(atomic_load(&s->state))));
	json_object_set_new(o, "batch_age_ms", start != 0 ?
	    json_integer(now - start) : json_null());
	set_int(o, "jobs_done", atomic_load(&s->jobs_done));
	json_object_set_new(o, "seen_ms_ago", seen != 0 ?
	    json_integer(now - seen) : json_null());
	return o;
}

static void
api_workers(struct http_req *r)
{
	struct master *m = http_req_master(r);
	struct metrics_view v;

	master_control_view(m, &v);
	json_t *o = about(m, &v), *a = json_array();
	for (int i = 0; i < v.nqueues; i++)
		for (int j = 0; j < v.queues[i].nworkers; j++)
			json_array_append_new(a, worker_json(m, &v,
			    http_may_see_errors(r), &v.queues[i].workers[j]));
	json_object_set_new(o, "workers", a);
	metrics_view_free(&v);
	http_req_json(r, MHD_HTTP_OK, o);
}

bool
http_api_get(struct http_req *r, const char *url)
{
	if (strcmp(url, "/api/queues") == 0)
		api_queues(r);
	else if (strcmp(url, "/api/workers") == 0)
		api_workers(r);
	else if (strcmp(url, "/api/series") == 0)
		http_req_json(r, MHD_HTTP_OK, master_series_json());
	else if (strcmp(url, "/api/events") == 0)
		http_req_json(r, MHD_HTTP_OK, json_pack("{s:o}", "events",
		    master_events_json()));
	else
		return false;
	return true;
}
