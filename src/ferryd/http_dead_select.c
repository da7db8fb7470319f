/* http_dead_select.c - the dashboard's selections of dead entries, as
 * `ferryctl dead` makes them (dead_filter.h: reason, group, before, after,
 * id, limit): GET /api/dead/summary (the entries grouped by reason, with
 * counts and the oldest and newest time) and POST /api/dead/retry-matching
 * and /api/dead/purge-matching (every selected entry retried, at `rate`
 * a second and to queue `to` when given, or purged; `dry_run=1` counts
 * them and changes nothing); /api/dead/replay-reason and /purge-reason
 * are the same with `reason` the exact text of the entries' reason. A move reads the list from its oldest end, a
 * window at a time, only as many entries as it held at the start, and
 * moves each window's selected entries in one dead_move.lua call (out of
 * the dead list and onto requeue in one step: whenever it stops, every
 * entry is dead or moved). With a rate, windows of rate/20 entries wait
 * on a timer of the master's loop between them. Every command goes over
 * the master's asynchronous connection; the request waits for the end.
 * With http_token set, the summary needs it too (entries may hold
 * personal data); the moves are POSTs, which always need it. */
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
#include "lua_scripts.h"
#include "master_control.h"
#include "queue.h"
#include "util.h"

#define WINDOW 100              /* entries per LRANGE, and per batch */
#define BATCHES_A_SECOND 20
#define RATE_MAX 1000000.0

enum select_what { SEL_SUMMARY, SEL_RETRY, SEL_PURGE };

struct selection {
	struct http_req *r;
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

static void next_window(struct master *m, struct selection *s);

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

static void
finish(struct selection *s)
{
	if (s->failed)
		http_req_error(s->r, MHD_HTTP_BAD_GATEWAY, "%s (%lld moved before "
		    "it)", s->why, s->moved);
	else if (s->what == SEL_SUMMARY)
		http_req_json(s->r, MHD_HTTP_OK, summary_json(s));
	else
		http_req_json(s->r, MHD_HTTP_OK, json_pack("{s:s, s:s?, s:s?, s:b, "
		    "s:I, s:I, s:I, s:I, s:I}", "queue", s->queue, "reason",
		    s->f.reason_is, "to",
		    s->what == SEL_RETRY ? s->to : NULL, "dry_run", s->dry_run,
		    "selected", (json_int_t)s->selected, s->what == SEL_RETRY ?
		    "replayed" : "purged", (json_int_t)s->moved, "gone",
		    (json_int_t)s->gone, "refused", (json_int_t)s->refused,
		    "left_cached", (json_int_t)s->cached));
	sel_free(s);
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
		if (movable(m, s, &e) && !s->dry_run) {
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
	read_window(http_req_master(s->r), s);
}

/* The next window, when the rate allows it. */
static void
next_window(struct master *m, struct selection *s)
{
	if (s->failed || s->seen >= s->total ||
	    (s->limit >= 0 && s->selected >= s->limit)) {
		finish(s);
		return;
	}
	if (s->rate > 0) {
		long long due = s->start_ms + (long long)(s->moved * 1000.0 /
		    s->rate);
		long long wait = due - util_monotonic_ms();
		if (wait > 0) {
			ev_timer_init(&s->timer, on_timer, (double)wait / 1000., 0.);
			s->timer.data = s;
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

/* A text argument into buf, or NULL when absent. -1 after an answer. */
static int
text_arg(struct http_req *r, const char *name, char *buf, const char **out)
{
	const char *v = http_req_arg(r, name);

	*out = NULL;
	if (v == NULL || *v == '\0')
		return 0;
	if (strlen(v) > DEAD_FILTER_TEXT_MAX) {
		http_req_error(r, MHD_HTTP_BAD_REQUEST, "%s: longer than %d bytes",
		    name, DEAD_FILTER_TEXT_MAX);
		return -1;
	}
	snprintf(buf, DEAD_FILTER_TEXT_MAX + 1, "%s", v);
	*out = buf;
	return 0;
}

static int
time_arg(struct http_req *r, const char *name, long long *ms)
{
	const char *v = http_req_arg(r, name);
	char err[400];

	*ms = -1;
	if (v == NULL || *v == '\0')
		return 0;
	if (dead_filter_time(name, v, util_realtime_ms(), ms, err,
	    sizeof(err)) == 0)
		return 0;
	http_req_error(r, MHD_HTTP_BAD_REQUEST, "%s", err);
	return -1;
}

static int
number_arg(struct http_req *r, const char *name, double lo, double hi,
    double *out)
{
	const char *v = http_req_arg(r, name);
	char *end;

	*out = 0;
	if (v == NULL || *v == '\0')
		return 0;
	*out = strtod(v, &end);
	if (end != v && *end == '\0' && *out >= lo && *out <= hi)
		return 0;
	http_req_error(r, MHD_HTTP_BAD_REQUEST, "%s: \"%s\" is not a number "
	    "from %g to %g", name, v, lo, hi);
	return -1;
}

int
http_dead_filter_args(struct http_req *r, bool exact,
    struct http_dead_filter_text *t, struct dead_filter *f)
{
	char err[300];

	dead_filter_init(f);
	if (exact && (text_arg(r, "reason", t->reason, &f->reason_is) != 0 ||
	    f->reason_is == NULL)) {
		if (f->reason_is == NULL)
			http_req_error(r, MHD_HTTP_BAD_REQUEST, "reason: missing (the "
			    "reason of the entries, as /api/dead lists it)");
		return -1;
	}
	if ((!exact && text_arg(r, "reason", t->reason, &f->reason) != 0) ||
	    text_arg(r, "group", t->group, &f->group) != 0 ||
	    text_arg(r, "id", t->id_glob, &f->id_glob) != 0 ||
	    time_arg(r, "before", &f->before_ms) != 0 ||
	    time_arg(r, "after", &f->after_ms) != 0)
		return -1;
	if (dead_filter_check(f, err, sizeof(err)) != 0) {
		http_req_error(r, MHD_HTTP_BAD_REQUEST, "%s", err);
		return -1;
	}
	return 0;
}

/* The selection and the options of the request into s; -1 after an
 * answer. */
static int
read_args(struct http_req *r, struct selection *s)
{
	double limit, rate;

	if (http_dead_filter_args(r, s->exact, &s->ft, &s->f) != 0 ||
	    number_arg(r, "limit", 1, 1e15, &limit) != 0 ||
	    number_arg(r, "rate", 0.1, RATE_MAX, &rate) != 0)
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
	queue_keys_init(&s->k, master_control_config(m)->redis_prefix, q->name);
	const char *argv[] = { "LLEN", s->k.dead };
	if (master_redis_command(m, s->queue, on_llen, s, 2, argv) == -1) {
		sel_free(s);
		http_req_error(r, MHD_HTTP_SERVICE_UNAVAILABLE, "redis is not "
		    "connected now (the master reconnects; try again)");
	}
}

bool
http_dead_select_get(struct http_req *r, const char *url)
{
	if (strcmp(url, "/api/dead/summary") != 0)
		return false;
	if (http_actions_enabled(http_req_master(r)) && !http_authorized(r))
		http_req_error(r, MHD_HTTP_FORBIDDEN, "refused: dead entries may "
		    "hold personal data; send the token of [ferryd] http_token as "
		    "\"Authorization: Bearer TOKEN\"");
	else
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
