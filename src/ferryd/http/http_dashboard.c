/* http_dashboard.c - GET /: the dashboard page. The server writes it whole
 * as plain tables (queues, workers, events), so that it reads without
 * JavaScript; the embedded script (src/ferryd/http/web/dashboard.js, with
 * dashboard.css, both inline: one request, no network) then redraws it
 * from /api every few seconds, draws the chart and pages the dead-letter
 * list. The host is in the title and the heading: on several hosts each
 * master's page shows the queue totals from Redis and its own workers. */
#include <microhttpd.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "buf.h"
#include "config.h"
#include "http.h"
#include "master_control.h"
#include "master_events.h"
#include "memory_check.h"
#include "metrics.h"
#include "util.h"
#include "web.h"

/* s as HTML text (also inside a quoted attribute). */
static void
esc(struct buf *o, const char *s)
{
	for (; *s != '\0'; s++)
		switch (*s) {
		case '<': buf_append(o, "&lt;", 4); break;
		case '>': buf_append(o, "&gt;", 4); break;
		case '&': buf_append(o, "&amp;", 5); break;
		case '"': buf_append(o, "&quot;", 6); break;
		case '\'': buf_append(o, "&#39;", 5); break;
		default: buf_append(o, s, 1);
		}
}

static void
cell(struct buf *o, const char *k, long long v)
{
	buf_printf(o, "<td data-k=\"%s\">%lld</td>", k, v);
}

static void
cell_text(struct buf *o, const char *k, const char *v, const char *cls)
{
	buf_printf(o, "<td data-k=\"%s\" class=\"%s\">", k, cls);
	esc(o, v != NULL ? v : "-");
	buf_printf(o, "</td>");
}

/* ms as "-" (0), "850 ms", "12.5 s" or "7 min" into buf. */
static const char *
age_text(int64_t ms, char *buf, size_t size)
{
	if (ms <= 0)
		snprintf(buf, size, "-");
	else if (ms < 1000)
		snprintf(buf, size, "%lld ms", (long long)ms);
	else if (ms < 120000)
		snprintf(buf, size, "%.1f s", (double)ms / 1000.);
	else
		snprintf(buf, size, "%lld min", (long long)(ms / 60000));
	return buf;
}

static void
queues_table(struct buf *o, struct master *m, const struct metrics_view *v)
{
	char age[32], held[32];

	buf_printf(o, "<table id=\"queues\"><thead><tr><th class=\"t\">queue</th>"
	    "<th class=\"t\">state</th><th>workers</th><th>ready</th>"
	    "<th>requeued</th><th>processing</th><th>delayed</th>"
	    "<th>scheduled</th><th>dead</th><th>enqueued</th><th>done</th>"
	    "<th>retried</th><th>dead-lettered</th><th>recovered</th>"
	    "<th>oldest waiting</th><th>held</th><th>protected keys</th>"
	    "<th>keys lost</th>"
	    "<th class=\"t\"></th></tr></thead><tbody>");
	for (int i = 0; i < v->nqueues; i++) {
		const struct metrics_queue_view *q = &v->queues[i];
		const struct metrics_figures *f = metrics_figures_of(
		    master_control_figures(m), q->name);
		int live = 0;
		if (q->removed)
			continue;
		for (int j = 0; j < q->nworkers; j++)
			live += q->workers[j].pid != 0;
		buf_printf(o, "<tr data-queue=\"");
		esc(o, q->name);
		buf_printf(o, "\"%s>", q->paused ? " class=\"paused\"" : "");
		cell_text(o, "name", q->name, "t");
		cell_text(o, "state", q->paused ? "paused" : "running", "t");
		buf_printf(o, "<td data-k=\"workers\">%d/%d</td>", live, q->target);
		if (f == NULL) {
			buf_printf(o, "<td colspan=\"15\">no figures from Redis yet"
			    "</td>");
		} else {
			for (int k = 0; k < HTTP_DEPTHS; k++)
				cell(o, http_depth_names[k], http_depth(f, k));
			cell(o, "enqueued", http_enqueued(f));
			cell(o, "done", f->done);
			cell(o, "retried", f->retried);
			cell(o, "deadlettered", f->deadlettered);
			cell(o, "recovered", f->recovered);
			cell_text(o, "oldest_ready_age", age_text(
			    metrics_oldest_ready_ms(f), age, sizeof(age)), "");
			cell_text(o, "held", memory_fmt_bytes(f->bytes, held,
			    sizeof(held)), f->refusing ? "bad" : "");
			cell(o, "protected_keys", f->protected_keys);
			buf_printf(o, "<td data-k=\"protected_lost\"%s>%lld</td>",
			    f->protected_lost > 0 ? " class=\"bad\"" : "",
			    (long long)f->protected_lost);
		}
		buf_printf(o, "<td class=\"t\"><a class=\"nojs\" href=\"/api/dead?"
		    "queue=");
		esc(o, q->name);    /* queue names are [A-Za-z0-9_.:-] */
		buf_printf(o, "\">dead letters (JSON)</a></td></tr>");
	}
	buf_printf(o, "</tbody></table>");
}

/* The workers; their last errors only where `errors` (http_may_see_errors). */
static void
workers_table(struct buf *o, const struct metrics_view *v, bool errors)
{
	char host[128];
	int64_t now = util_monotonic_ms();

	snprintf(host, sizeof(host), "%.*s", (int)http_host_len(v->master_id),
	    v->master_id);
	buf_printf(o, "<table id=\"workers\"><thead><tr><th class=\"t\">queue"
	    "</th><th>#</th><th class=\"t\">host</th><th>pid</th>"
	    "<th class=\"t\">state</th><th>batch size</th><th>batch age</th>"
	    "<th>jobs done</th><th>restarts</th><th class=\"t\">last error</th>"
	    "</tr></thead><tbody>");
	for (int i = 0; i < v->nqueues; i++)
		for (int j = 0; j < v->queues[i].nworkers; j++) {
			const struct metrics_worker_view *w = &v->queues[i].workers[j];
			struct scoreboard_slot *s = w->sb_index != -1 ?
			    scoreboard_slot(v->sb, w->sb_index) : NULL;
			char err[SCOREBOARD_ERROR_MAX] = "", age[32] = "-";
			/* gone (fatal, or restarting): its slot keeps why */
			bool gone = s == NULL || w->pid == 0;
			if (s != NULL) {
				int64_t start = atomic_load(&s->batch_start_ms);
				scoreboard_get_error(s, err, sizeof(err));
				if (err[0] != '\0' && !errors)
					snprintf(err, sizeof(err), "%s",
					    HTTP_ERROR_HIDDEN);
				if (start != 0 && !gone)
					age_text(now - start, age, sizeof(age));
			}
			buf_printf(o, "<tr data-pid=\"%d\">", (int)w->pid);
			cell_text(o, "queue", w->queue, "t");
			cell(o, "number", w->number);
			cell_text(o, "host", host, "t");
			cell(o, "pid", w->pid);
			cell_text(o, "state", gone ? (w->fatal ? "fatal" :
			    "restarting") : scoreboard_state_name(atomic_load(
			    &s->state)), "t");
			buf_printf(o, "<td data-k=\"batch_size\">-</td>");
			cell_text(o, "batch_age", age, "");
			cell(o, "jobs_done", !gone ? atomic_load(&s->jobs_done) : 0);
			cell(o, "restarts", w->restarts);
			cell_text(o, "last_error", err, "err");
			buf_printf(o, "</tr>");
		}
	buf_printf(o, "</tbody></table>");
}

static void
events_table(struct buf *o)
{
	json_t *events = master_events_json();
	size_t i;
	json_t *e;

	buf_printf(o, "<table id=\"events\"><thead><tr><th class=\"t\">time"
	    "</th><th class=\"t\">kind</th><th class=\"t\">what</th></tr>"
	    "</thead><tbody>");
	json_array_foreach(events, i, e) {
		time_t t = (time_t)(json_integer_value(json_object_get(e,
		    "time_ms")) / 1000);
		char when[32];
		strftime(when, sizeof(when), "%H:%M:%S", localtime(&t));
		buf_printf(o, "<tr>");
		cell_text(o, "time", when, "t");
		cell_text(o, "kind", json_string_value(json_object_get(e, "kind")),
		    "t");
		cell_text(o, "text", json_string_value(json_object_get(e, "text")),
		    "t");
		buf_printf(o, "</tr>");
	}
	json_decref(events);
	buf_printf(o, "</tbody></table>");
}

void
http_dashboard(struct http_req *r)
{
	struct master *m = http_req_master(r);
	bool actions = http_actions_enabled(m);
	struct metrics_view v;
	struct buf o = BUF_INIT;

	master_control_view(m, &v);
	char host[128];     /* the hostname may hold any byte but NUL: escaped */
	snprintf(host, sizeof(host), "%.*s", (int)http_host_len(v.master_id),
	    v.master_id);
	buf_printf(&o, "<!doctype html>\n<html lang=\"en\"><head><meta "
	    "charset=\"utf-8\"><meta name=\"viewport\" content=\"width="
	    "device-width\"><title>ferry &middot; ");
	esc(&o, host);
	buf_printf(&o, "</title><style>%s</style></head>\n<body data-actions="
	    "\"%d\"><header><h1>ferry on <span id=\"host\">", web_dashboard_css,
	    actions);
	esc(&o, host);
	buf_printf(&o, "</span></h1><span class=\"muted\">master ");
	esc(&o, v.master_id);
	buf_printf(&o, " &middot; %s%s</span>", v.phase, v.redis_up ? "" :
	    " &middot; redis unreachable");
	if (actions)
		buf_printf(&o, "<span class=\"mode actions js\" hidden>actions on: "
		    "token <input id=\"token\" type=\"password\" autocomplete=\"off\">"
		    "</span>");
	else
		buf_printf(&o, "<span class=\"mode\" id=\"readonly\">read-only: no "
		    "[ferryd] http_token configured</span>");
	buf_printf(&o, "<span id=\"updated\" class=\"muted\"></span><span "
	    "id=\"said\"></span></header>\n<h2>Queues</h2>");
	queues_table(&o, m, &v);
	buf_printf(&o, "\n<h2>Throughput, last 15 minutes (all queues, jobs/s)"
	    "</h2><svg id=\"chart\" viewBox=\"0 0 600 200\" role=\"img\" "
	    "aria-label=\"jobs per second\"></svg><p "
	    "class=\"legend\"><span><i class=\"c-done\"></i>done</span><span><i "
	    "class=\"c-retried\"></i>retried</span><span><i class=\"c-dead\"></i>"
	    "dead</span><span><i class=\"c-recovered\"></i>recovered</span><span "
	    "id=\"chart-max\" class=\"muted\"></span></p><p class=\"nojs "
	    "muted\">The chart needs JavaScript; its data is at <a href=\"/api/"
	    "series\">/api/series</a>.</p>\n<h2>Workers of this host</h2>");
	workers_table(&o, &v, http_may_see_errors(r));
	buf_printf(&o, "\n<h2>Dead letters <span id=\"dead-queue\" class=\""
	    "muted\"></span> <span id=\"dead-count\" class=\"muted\"></span>"
	    "</h2><p class=\"nojs muted\">Listed with JavaScript; without it, "
	    "each queue's link above gives them as JSON%s.</p>", actions ?
	    " to a client that sends the token as \"Authorization: Bearer "
	    "TOKEN\"" : "");
	if (actions)      /* the counts above are open; entries need the token */
		buf_printf(&o, "<p id=\"dead-hidden\" class=\"muted\" hidden>"
		    "dead entries are hidden: enter the token of [ferryd] "
		    "http_token</p>");
	buf_printf(&o, "<table id=\"dead\"><thead><tr><th>index</th><th class="
	    "\"t\">id</th><th class=\"t\">time</th><th class=\"t\">reason</th>"
	    "<th>attempts</th><th class=\"t\">first error</th><th class=\"t\">"
	    "last error</th><th class=\"t\"></th></tr></thead><tbody></tbody>"
	    "</table><p id=\"dead-reasons\"></p><p class=\"js\" hidden "
	    "id=\"dead-filter\">Select: <input id=\"dead-f-reason\" placeholder="
	    "\"reason or SQLSTATE\"> <input id=\"dead-f-id\" placeholder=\"id "
	    "pattern\"> <input id=\"dead-f-after\" placeholder=\"after (2h, "
	    "2026-12-02)\"> <input id=\"dead-f-before\" placeholder=\"before\"> "
	    "<button id=\"dead-groups-load\">list and group by reason</button> <input id="
	    "\"dead-f-rate\" placeholder=\"rate/s\" size=\"6\"> <button id="
	    "\"dead-retry-matching\" class=\"act\">retry all matching</button> "
	    "<button id=\"dead-purge-matching\" class=\"act danger\">purge all "
	    "matching</button></p><table id=\"dead-groups\"><thead><tr><th>count"
	    "</th><th class=\"t\">group</th><th class=\"t\">oldest</th><th class="
	    "\"t\">newest</th><th class=\"t\">example</th><th class=\"t\"></th>"
	    "</tr></thead><tbody></tbody></table><table id=\"dead-redrives\" "
	    "hidden><thead><tr><th>redrive</th><th class=\"t\">queue</th><th "
	    "class=\"t\">action</th><th class=\"t\">selection</th><th>rate</th>"
	    "<th>progress</th><th>moved</th><th>left</th><th class=\"t\">state"
	    "</th><th class=\"t\">started</th><th class=\"t\">finished</th><th "
	    "class=\"t\"></th></tr></thead><tbody></tbody></table><p><button "
	    "id=\"dead-prev\">"
	    "newer</button> <button id="
	    "\"dead-next\">older</button></p><pre id=\"doc\" hidden></pre>\n"
	    "<h2>Recent events</h2>");
	events_table(&o);
	buf_printf(&o, "\n<script>%s</script>\n</body></html>\n",
	    web_dashboard_js);
	metrics_view_free(&v);
	size_t len = o.len;
	http_req_answer(r, MHD_HTTP_OK, "text/html; charset=utf-8", buf_take(&o),
	    len);
}
