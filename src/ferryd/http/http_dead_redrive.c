/* http_dead_redrive.c - the redrives of dead entries this master runs
 * (retry-matching and purge-matching of the dashboard's API, run by
 * http_dead_select.c): the list of the running and the last finished
 * ones, GET /api/dead/redrives; POST /api/dead/redrive/cancel?id=N, which
 * stops one before its next batch (a batch is atomic: every entry stays
 * dead or is moved, never both nor neither); at most REDRIVES_MAX at once.
 * A redrive lives in this master's memory only: it ends when ferryd stops
 * (cancelled) or when a reload removes its queue (failed); running it
 * again selects what is left. With http_token set, the list needs the
 * token (a selection names what the entries hold: http_server.c asks for
 * it on every read under /api/dead); the cancel is a POST, which always
 * does. Counted in the metrics (GET /metrics). */
#include "http_dead_redrive.h"

#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "http.h"
#include "util.h"

static struct redrive *redrives;        /* newest first */
static long long last_id;
static unsigned long long ended[4];     /* by state, since ferryd started */
static unsigned long long moved_total;
static bool stopping;

static const char *const state_names[] = { "running", "done", "cancelled",
	"failed" };

static int
running(void)
{
	int n = 0;

	for (struct redrive *rd = redrives; rd != NULL; rd = rd->next)
		n += rd->state == REDRIVE_RUNNING;
	return n;
}

static void
redrive_free(struct redrive *rd)
{
	json_decref(rd->selection);
	free(rd);
}

/* Forget the finished ones past the REDRIVES_KEPT newest. */
static void
trim(void)
{
	int kept = 0;

	for (struct redrive **p = &redrives; *p != NULL; ) {
		struct redrive *rd = *p;
		if (rd->state != REDRIVE_RUNNING && ++kept > REDRIVES_KEPT) {
			*p = rd->next;
			redrive_free(rd);
		} else {
			p = &rd->next;
		}
	}
}

struct redrive *
http_redrive_new(char *err, size_t errsize)
{
	if (running() >= REDRIVES_MAX) {
		snprintf(err, errsize, "%d redrives are running on this ferryd, the "
		    "most it runs at once: wait for one to end or cancel one "
		    "(GET /api/dead/redrives lists them, POST "
		    "/api/dead/redrive/cancel?id=N stops one)", REDRIVES_MAX);
		return NULL;
	}
	if (stopping) {
		snprintf(err, errsize, "ferryd is stopping: no redrive starts now");
		return NULL;
	}
	trim();
	struct redrive *rd = xcalloc(1, sizeof(*rd));
	rd->id = ++last_id;
	rd->selected = -1;
	rd->started_ms = util_realtime_ms();
	rd->next = redrives;
	redrives = rd;
	return rd;
}

void
http_redrive_end(struct redrive *rd, enum redrive_state state,
    const char *why)
{
	rd->state = state;
	rd->finished_ms = util_realtime_ms();
	rd->on_cancel = NULL;
	rd->priv = NULL;
	if (why != NULL)
		snprintf(rd->why, sizeof(rd->why), "%s", why);
	ended[state]++;
	moved_total += (unsigned long long)rd->moved;
}

json_t *
http_redrive_json(const struct redrive *rd)
{
	json_t *o = json_pack("{s:I, s:s, s:s, s:s?, s:O, s:s, s:b, s:I, s:I, "
	    "s:I, s:I, s:I}", "id", (json_int_t)rd->id, "queue", rd->queue,
	    "action", rd->purge ? "purge" : "retry", "to", rd->purge ? NULL :
	    rd->to, "selection", rd->selection, "state",
	    state_names[rd->state], "cancel_requested", rd->cancel, "moved",
	    (json_int_t)rd->moved, "gone", (json_int_t)rd->gone, "refused",
	    (json_int_t)rd->refused, "skipped", (json_int_t)rd->skipped,
	    "started", (json_int_t)rd->started_ms);
	long long left = rd->selected - rd->reached;

	json_object_set_new(o, "rate", rd->rate > 0 ? json_real(rd->rate) :
	    json_null());
	json_object_set_new(o, "selected", rd->selected >= 0 ?
	    json_integer(rd->selected) : json_null());
	json_object_set_new(o, "left", rd->selected < 0 ? json_null() :
	    json_integer(rd->state == REDRIVE_DONE || left < 0 ? 0 : left));
	json_object_set_new(o, "finished", rd->finished_ms > 0 ?
	    json_integer(rd->finished_ms) : json_null());
	if (rd->why[0] != '\0')
		json_object_set_new(o, "error", json_string(rd->why));
	return o;
}

void
http_redrives_stop(void)
{
	stopping = true;
	for (struct redrive *rd = redrives; rd != NULL; rd = rd->next)
		if (rd->state == REDRIVE_RUNNING && !rd->cancel) {
			rd->cancel = true;
			snprintf(rd->why, sizeof(rd->why), "ferryd is stopping: "
			    "stopped before its next batch (run it again to go on)");
			if (rd->on_cancel != NULL)
				rd->on_cancel(rd, rd->priv);
		}
}

void
http_redrives_free(void)
{
	while (redrives != NULL) {
		struct redrive *rd = redrives;
		redrives = rd->next;
		redrive_free(rd);
	}
}

static void
list(struct http_req *r)
{
	json_t *a = json_array();

	for (struct redrive *rd = redrives; rd != NULL; rd = rd->next)
		json_array_append_new(a, http_redrive_json(rd));
	http_req_json(r, MHD_HTTP_OK, json_pack("{s:i, s:i, s:o}", "running",
	    running(), "max", REDRIVES_MAX, "redrives", a));
}

static void
cancel(struct http_req *r)
{
	const char *v = http_req_arg(r, "id");
	char *end;
	long long id = v != NULL ? strtoll(v, &end, 10) : 0;
	struct redrive *rd = redrives;

	if (v == NULL || *v == '\0' || *end != '\0') {
		http_req_error(r, MHD_HTTP_BAD_REQUEST, "id: %s (the id of a "
		    "redrive, as GET /api/dead/redrives lists it)", v == NULL ||
		    *v == '\0' ? "missing" : "not a number");
		return;
	}
	while (rd != NULL && rd->id != id)
		rd = rd->next;
	if (rd == NULL) {
		http_req_error(r, MHD_HTTP_NOT_FOUND, "no redrive %lld on this "
		    "ferryd (GET /api/dead/redrives lists them; a restart forgets "
		    "them)", id);
		return;
	}
	if (rd->state != REDRIVE_RUNNING) {
		http_req_error(r, MHD_HTTP_CONFLICT, "redrive %lld is %s already: "
		    "nothing to cancel", id, state_names[rd->state]);
		return;
	}
	if (!rd->cancel) {
		rd->cancel = true;
		snprintf(rd->why, sizeof(rd->why), "cancelled over HTTP");
		if (rd->on_cancel != NULL)
			rd->on_cancel(rd, rd->priv);   /* may end it now */
	}
	http_req_json(r, MHD_HTTP_OK, http_redrive_json(rd));
}

bool
http_dead_redrive_get(struct http_req *r, const char *url)
{
	if (strcmp(url, "/api/dead/redrives") != 0)
		return false;
	list(r);
	return true;
}

bool
http_dead_redrive_post(struct http_req *r, const char *url)
{
	if (strcmp(url, "/api/dead/redrive/cancel") != 0)
		return false;
	cancel(r);
	return true;
}

void
http_dead_redrive_metrics(struct buf *o)
{
	buf_printf(o, "# HELP ferry_dead_redrives_running Redrives of dead "
	    "entries (retry-matching, purge-matching) running now.\n"
	    "# TYPE ferry_dead_redrives_running gauge\n"
	    "ferry_dead_redrives_running %d\n"
	    "# HELP ferry_dead_redrives_total Redrives of dead entries ended "
	    "since ferryd started, by how they ended.\n"
	    "# TYPE ferry_dead_redrives_total counter\n", running());
	for (int s = REDRIVE_DONE; s <= REDRIVE_FAILED; s++)
		buf_printf(o, "ferry_dead_redrives_total{state=\"%s\"} %llu\n",
		    state_names[s], ended[s]);
	buf_printf(o, "# HELP ferry_dead_redrive_entries_total Dead entries "
	    "the ended redrives retried or purged.\n"
	    "# TYPE ferry_dead_redrive_entries_total counter\n"
	    "ferry_dead_redrive_entries_total %llu\n", moved_total);
}
