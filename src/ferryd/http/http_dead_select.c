/* http_dead_select.c - the dashboard's selections of dead entries, as
 * `ferryctl dead` makes them (dead_filter.h: reason, group, before, after,
 * id, limit): GET /api/dead/summary (the entries grouped by reason, with
 * counts and the oldest and newest time) and POST /api/dead/retry-matching
 * and /api/dead/purge-matching (every selected entry retried, at `rate`
 * a second and to queue `to` when given, or purged; `dry_run=1` counts
 * them and changes nothing); /api/dead/replay-reason and /purge-reason
 * are the same with `reason` the exact text of the entries' reason.
 * A move reads the list from its oldest end, a window at a time, only as
 * many entries as it held at the start, and moves each window's selected
 * entries in one dead_move.lua call (out of the dead list and onto
 * requeue in one step: whenever it stops, every entry is dead or moved).
 * With a rate, windows of rate/20 entries wait on a timer of the master's
 * loop between them. Every command goes over the master's asynchronous
 * connection.
 * A move (not a dry run) is a redrive (http_dead_redrive.c: listed,
 * cancellable, a few at once). Unpaced, the request waits for its end
 * (200 with the counts). Paced, it counts what it selects first (a pass
 * that moves nothing), answers 202 with that count and the redrive's id,
 * then moves them in the master while the page polls the list of
 * redrives; the move passes over the same entries (those the list held
 * when the count began), so "left" falls to 0 at its end.
 * With http_token set, the summary needs it too (http_server.c asks for
 * it on every read of dead entries); the moves are POSTs, which always
 * need it. */
#include <ev.h>
#include <hiredis/hiredis.h>
#include <jansson.h>
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dead_filter.h"
#include "dead_move_args.h"
#include "dead_summary.h"
#include "http.h"
#include "http_dead.h"
#include "http_dead_redrive.h"
#include "lua_scripts.h"
#include "master_control.h"
#include "queue.h"
#include "util.h"

#define WINDOW 100              /* entries per LRANGE, and per batch */
#define BATCHES_A_SECOND 20
#define RATE_MAX 1000000.0

enum select_what { SEL_SUMMARY, SEL_RETRY, SEL_PURGE };

struct selection {
	struct http_req *r;     /* NULL once answered (a paced redrive) */
	struct master *m;
	struct redrive *rd;     /* retry, purge (not a dry run) */
	bool counting;          /* a paced redrive's first pass: no moves */
	bool waiting;           /* on the timer */
	enum select_what what;
	char queue[CONFIG_QUEUE_NAME_MAX + 1];
	char to[CONFIG_QUEUE_NAME_MAX + 1];
	struct queue_keys k;
	struct dead_filter f;
	struct http_dead_filter_text ft;
	long long limit;        /* -1: none */
	double rate;            /* 0: unpaced */
	bool dry_run;
	bool exact;             /* replay-reason, purge-reason */
	long window;
	long long total, seen, kept, selected, moved, gone, refused, cached;
	long long start_ms;
	struct dead_summary sum;
	ev_timer timer;
	bool failed;
	char why[300];
};

static void
sel_free(struct selection *s)
{
	dead_summary_free(&s->sum);
	free(s);
}

static json_t *
summary_json(const struct selection *s)
{
	json_t *groups = json_array();

	for (size_t i = 0; i < s->sum.n; i++) {
		const struct dead_group *g = &s->sum.groups[i];
		json_array_append_new(groups, json_pack("{s:s, s:I, s:I, s:I, s:s?, "
		    "s:s?}", "group", g->name, "count", (json_int_t)g->count,
		    "oldest", (json_int_t)g->oldest_ms, "newest",
		    (json_int_t)g->newest_ms, "reason", g->reason, "last_error",
		    g->last_error));
	}
	return json_pack("{s:s, s:I, s:o}", "queue", s->queue, "total",
	    (json_int_t)s->sum.total, "groups", groups);
}

/* The counts into the redrive the API lists. */
static void
sync_redrive(struct selection *s)
{
	struct redrive *rd = s->rd;

	if (rd == NULL || s->counting)
		return;
	rd->moved = s->moved;
	rd->gone = s->gone;
	rd->refused = s->refused;
	rd->skipped = s->cached;
	rd->reached = s->selected;
}

static json_t *
moved_json(const struct selection *s)
{
	return json_pack("{s:I, s:s, s:s?, s:s?, s:b, s:I, s:I, s:I, s:I, s:I, "
	    "s:s}", "id", (json_int_t)(s->rd != NULL ? s->rd->id : 0), "queue",
	    s->queue, "reason", s->f.reason_is, "to", s->what == SEL_RETRY ?
	    s->to : NULL, "dry_run", s->dry_run, "selected",
	    (json_int_t)s->selected, s->what == SEL_RETRY ? "replayed" :
	    "purged", (json_int_t)s->moved, "gone", (json_int_t)s->gone,
	    "refused", (json_int_t)s->refused, "left_cached",
	    (json_int_t)s->cached, "state", s->rd == NULL ? "done" :
	    s->rd->cancel ? "cancelled" : "done");
}

static void next_window(struct master *m, struct selection *s);

/* A paced redrive counted what it selects: answer 202 with it, then move
 * them from the oldest end again, at the rate. */
static void
counted(struct selection *s)
{
	s->rd->selected = s->selected;
	http_req_json(s->r, MHD_HTTP_ACCEPTED, http_redrive_json(s->rd));
	s->r = NULL;
	s->counting = false;
	s->seen = s->kept = s->selected = 0;
	s->moved = s->gone = s->refused = s->cached = 0;
	s->start_ms = util_monotonic_ms();
	next_window(s->m, s);
}

static void
finish(struct selection *s)
{
	if (s->counting && !s->failed && !s->rd->cancel) {
		counted(s);
		return;
	}
	sync_redrive(s);
	if (s->rd != NULL)
		http_redrive_end(s->rd, s->rd->cancel ? REDRIVE_CANCELLED :
		    s->failed ? REDRIVE_FAILED : REDRIVE_DONE, s->failed ? s->why :
		    NULL);
	if (s->r == NULL)
		;
	else if (s->failed)
		http_req_error(s->r, MHD_HTTP_BAD_GATEWAY, "%s (%lld moved before "
		    "it)", s->why, s->moved);
	else if (s->what == SEL_SUMMARY)
		http_req_json(s->r, MHD_HTTP_OK, summary_json(s));
	else
		http_req_json(s->r, MHD_HTTP_OK, moved_json(s));
	sel_free(s);
}

/* The redrive was cancelled: when on the timer, it ends now; else after
 * the batch in flight. */
static void
on_cancel(struct redrive *rd, void *priv)
{
	struct selection *s = priv;

	(void)rd;
	if (s->waiting) {
		ev_timer_stop(master_control_loop(s->m), &s->timer);
		s->waiting = false;
		finish(s);
	}
}

static void
fail(struct selection *s, const char *what)
{
	s->failed = true;
	snprintf(s->why, sizeof(s->why), "%s", what);
}

static const char *
reply_error(const redisReply *rep, const char *what)
{
	return rep == NULL ? "the connection to redis was lost" :
	    rep->type == REDIS_REPLY_ERROR ? rep->str : what;
}

static void
on_moved(struct master *m, redisReply *rep, void *priv)
{
	struct selection *s = priv;

	if (rep == NULL || rep->type != REDIS_REPLY_ARRAY || rep->elements != 2) {
		fail(s, reply_error(rep, "dead_move.lua: not its answer"));
		finish(s);
		return;
	}
	s->moved += rep->element[0]->integer;
	s->gone += rep->element[1]->integer;
	s->kept -= rep->element[0]->integer + rep->element[1]->integer;
	sync_redrive(s);
	next_window(m, s);
}

/* May a selected entry move? (the same rules as ferryctl's redrive) */
static bool
movable(struct master *m, struct selection *s, const struct dead_entry *e)
{
	if (s->what == SEL_PURGE)
		return true;
	if (!e->ok) {
		s->refused++;
		return false;
	}
	if (strcmp(s->to, s->queue) == 0)
		return true;
	char *key = dead_entry_cache_key(e);

	(void)m;
	if (key == NULL)
		return true;
	free(key);
	s->cached++;
	return false;
}

/* One entry of a window read from the oldest end (pos from there). */
static void
consider(struct master *m, struct selection *s, struct dead_move_args *a,
    const redisReply *el, long pos)
{
	const struct queue_config *q = config_find_queue(
	    master_control_config(m), s->queue);
	struct dead_entry e;
	char id[JOB_ID_MAX + 1];

	s->seen++;
	dead_entry_read(&e, el->str, el->len);
	dead_entry_id(e.ok ? &e.w : NULL, el->str, el->len, q != NULL ?
	    q->max_job_bytes : 0, id);
	if (s->what == SEL_SUMMARY) {
		if (dead_filter_match(&s->f, &e, id))
			dead_summary_add(&s->sum, &e);
	} else if ((s->limit < 0 || s->selected < s->limit) &&
	    dead_filter_match(&s->f, &e, id)) {
		s->selected++;
		if (movable(m, s, &e) && !s->dry_run && !s->counting) {
			char *key = s->what == SEL_PURGE && q != NULL ?
			    http_dead_cache_key(m, q, &e) : NULL;
			dead_move_args_add(a, -(s->kept + pos + 1), el->str, el->len,
			    key);
			free(key);
		}
	}
	dead_entry_free(&e);
}

static void
on_window(struct master *m, redisReply *rep, void *priv)
{
	struct selection *s = priv;
	struct dead_move_args a;

	if (rep == NULL || rep->type != REDIS_REPLY_ARRAY) {
		fail(s, reply_error(rep, "LRANGE: not an array"));
		finish(s);
		return;
	}
	if (rep->elements == 0)
		s->total = s->seen;       /* shorter than it was: done */
	if (s->what == SEL_SUMMARY) {   /* newest first */
		for (size_t i = 0; i < rep->elements; i++)
			consider(m, s, NULL, rep->element[i], 0);
		next_window(m, s);
		return;
	}
	dead_move_args_init(&a, master_control_config(m)->redis_prefix,
	    s->queue, s->what == SEL_RETRY ? s->to : NULL, (unsigned long long)random() << 32 ^ (unsigned long long)random() ^
	    (unsigned long long)util_monotonic_ms());
	for (size_t i = rep->elements; i-- > 0; )
		consider(m, s, &a, rep->element[i], (long)(rep->elements - 1 - i));
	s->kept += (long long)rep->elements;
	if (a.entries == 0) {
		dead_move_args_free(&a);
		next_window(m, s);
		return;
	}
	dead_move_args_finish(&a);
	int rc = http_dead_eval(m, s->queue, LUA_DEAD_MOVE, a.nkeys, a.argc,
	    a.argv, a.lens, on_moved, s);
	dead_move_args_free(&a);
	if (rc == -1) {
		fail(s, "redis is not connected now");
		finish(s);
	}
}

static void
read_window(struct master *m, struct selection *s)
{
	char from[24], to[24];
	long long n = s->total - s->seen < s->window ? s->total - s->seen :
	    s->window;

	if (s->what == SEL_SUMMARY) {
		snprintf(from, sizeof(from), "%lld", s->seen);
		snprintf(to, sizeof(to), "%lld", s->seen + n - 1);
	} else {
		snprintf(from, sizeof(from), "%lld", -s->kept - n);
		snprintf(to, sizeof(to), "%lld", -s->kept - 1);
	}
	const char *argv[] = { "LRANGE", s->k.dead, from, to };
	if (master_redis_command(m, s->queue, on_window, s, 4, argv) == -1) {
		fail(s, "redis is not connected now");
		finish(s);
	}
}

static void
on_timer(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct selection *s = w->data;

	(void)loop;
	(void)revents;
	s->waiting = false;
	next_window(s->m, s);
}

/* The next window, when the rate allows it. */
static void
next_window(struct master *m, struct selection *s)
{
	const struct ferry_config *cfg = master_control_config(m);

	if (!s->failed && (config_find_queue(cfg, s->queue) == NULL ||
	    (s->what == SEL_RETRY && config_find_queue(cfg, s->to) == NULL))) {
		char why[200];
		snprintf(why, sizeof(why), "queue %s is no longer configured (a "
		    "reload removed it)", config_find_queue(cfg, s->queue) == NULL ?
		    s->queue : s->to);
		fail(s, why);
	}
	if (s->failed || s->seen >= s->total ||
	    (s->limit >= 0 && s->selected >= s->limit) ||
	    (s->rd != NULL && s->rd->cancel)) {
		finish(s);
		return;
	}
	if (s->rate > 0 && !s->counting) {
		long long due = s->start_ms + (long long)(s->moved * 1000.0 /
		    s->rate);
		long long wait = due - util_monotonic_ms();
		if (wait > 0) {
			ev_timer_init(&s->timer, on_timer, (double)wait / 1000., 0.);
			s->timer.data = s;
			s->waiting = true;
			ev_timer_start(master_control_loop(m), &s->timer);
			return;
		}
	}
	read_window(m, s);
}

static void
on_llen(struct master *m, redisReply *rep, void *priv)
{
	struct selection *s = priv;

	if (rep == NULL || rep->type != REDIS_REPLY_INTEGER) {
		fail(s, reply_error(rep, "LLEN: not an integer"));
		finish(s);
		return;
	}
	s->total = rep->integer;
	s->start_ms = util_monotonic_ms();
	next_window(m, s);
}

/* The selection and the options of the request into s; -1 after an
 * answer. */
static int
read_args(struct http_req *r, struct selection *s)
{
	double limit, rate;

	if (http_dead_filter_args(r, s->exact, &s->ft, &s->f) != 0 ||
	    http_dead_arg_number(r, "limit", 1, 1e15, &limit) != 0 ||
	    http_dead_arg_number(r, "rate", 0.1, RATE_MAX, &rate) != 0)
		return -1;
	s->limit = limit > 0 ? (long long)limit : -1;
	s->rate = s->what == SEL_RETRY ? rate : 0;
	const char *dry = http_req_arg(r, "dry_run");
	s->dry_run = dry != NULL && strcmp(dry, "1") == 0;
	s->window = WINDOW;
	if (s->rate > 0 && s->rate / BATCHES_A_SECOND < WINDOW)
		s->window = s->rate / BATCHES_A_SECOND >= 1 ?
		    (long)(s->rate / BATCHES_A_SECOND) : 1;
	return 0;
}

/* The queue retried to: `to`, a configured queue in the same slot. */
static int
read_to(struct http_req *r, struct selection *s)
{
	const struct ferry_config *cfg = master_control_config(
	    http_req_master(r));
	const char *to = http_req_arg(r, "to");

	if (to == NULL || *to == '\0' || strcmp(to, s->queue) == 0) {
		snprintf(s->to, sizeof(s->to), "%s", s->queue);
		return 0;
	}
	if (config_find_queue(cfg, to) == NULL) {
		http_req_error(r, MHD_HTTP_NOT_FOUND, "to: no queue \"%s\" in the "
		    "configuration", to);
		return -1;
	}
	if (*cfg->redis_cluster != '\0') {
		http_req_error(r, MHD_HTTP_BAD_REQUEST, "to: with redis_cluster, "
		    "the dead list of queue %s and the requeue list of queue %s are "
		    "in different slots and no single step can move an entry "
		    "between them; retry to queue %s itself", s->queue, to,
		    s->queue);
		return -1;
	}
	snprintf(s->to, sizeof(s->to), "%s", to);
	return 0;
}

/* The selection as the redrives' list shows it. */
static json_t *
selection_json(const struct selection *s)
{
	json_t *o = json_object();
	const char *texts[][2] = { { "reason", s->f.reason },
		{ "reason_is", s->f.reason_is }, { "group", s->f.group },
		{ "id", s->f.id_glob } };

	for (size_t i = 0; i < FERRY_ARRAY_LEN(texts); i++)
		if (texts[i][1] != NULL)
			json_object_set_new(o, texts[i][0], json_string(texts[i][1]));
	if (s->f.before_ms >= 0)
		json_object_set_new(o, "before", json_integer(s->f.before_ms));
	if (s->f.after_ms >= 0)
		json_object_set_new(o, "after", json_integer(s->f.after_ms));
	if (s->limit >= 0)
		json_object_set_new(o, "limit", json_integer(s->limit));
	return o;
}

/* A retry or purge that changes the list runs as a redrive, listed while
 * it runs; paced, it counts first and answers 202 then. -1 after a 429. */
static int
register_redrive(struct http_req *r, struct selection *s)
{
	char err[400];

	if ((s->rd = http_redrive_new(err, sizeof(err))) == NULL) {
		http_req_error(r, MHD_HTTP_TOO_MANY_REQUESTS, "%s", err);
		return -1;
	}
	s->rd->purge = s->what == SEL_PURGE;
	snprintf(s->rd->queue, sizeof(s->rd->queue), "%s", s->queue);
	snprintf(s->rd->to, sizeof(s->rd->to), "%s", s->to);
	s->rd->selection = selection_json(s);
	s->rd->rate = s->rate;
	s->rd->on_cancel = on_cancel;
	s->rd->priv = s;
	s->counting = s->rate > 0;
	return 0;
}

static void
start(struct http_req *r, enum select_what what, bool exact)
{
	struct master *m = http_req_master(r);
	const struct queue_config *q = http_dead_queue(r);

	if (q == NULL)
		return;
	struct selection *s = xcalloc(1, sizeof(*s));
	s->r = r;
	s->what = what;
	s->exact = exact;
	s->total = -1;
	snprintf(s->queue, sizeof(s->queue), "%s", q->name);
	dead_summary_init(&s->sum);
	if (read_args(r, s) != 0 || (what == SEL_RETRY && read_to(r, s) != 0)) {
		sel_free(s);
		return;
	}
	s->m = m;
	if (what != SEL_SUMMARY && !s->dry_run && register_redrive(r, s) != 0) {
		sel_free(s);
		return;
	}
	queue_keys_init(&s->k, master_control_config(m)->redis_prefix, q->name);
	const char *argv[] = { "LLEN", s->k.dead };
	if (master_redis_command(m, s->queue, on_llen, s, 2, argv) == -1) {
		fail(s, "redis is not connected now (the master reconnects; try "
		    "again)");
		s->counting = false;
		finish(s);
	}
}

bool
http_dead_select_get(struct http_req *r, const char *url)
{
	if (strcmp(url, "/api/dead/summary") != 0)
		return false;
	start(r, SEL_SUMMARY, false);
	return true;
}

bool
http_dead_select_post(struct http_req *r, const char *url)
{
	static const struct {
		const char *url;
		enum select_what what;
		bool exact;
	} routes[] = {
		{ "/api/dead/retry-matching", SEL_RETRY, false },
		{ "/api/dead/purge-matching", SEL_PURGE, false },
		{ "/api/dead/replay-reason", SEL_RETRY, true },
		{ "/api/dead/purge-reason", SEL_PURGE, true },
	};
	size_t i = 0;

	while (i < FERRY_ARRAY_LEN(routes) && strcmp(url, routes[i].url) != 0)
		i++;
	if (i == FERRY_ARRAY_LEN(routes))
		return false;
	start(r, routes[i].what, routes[i].exact);
	return true;
}
