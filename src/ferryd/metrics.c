/* metrics.c - the Redis figures behind `status` and `metrics`: each
 * queue's lengths and counters, and INFO memory, asked of Redis every
 * second over master_redis.c's connection. Answering never waits for
 * Redis: metrics_text.c writes the last figures there are. */
#include "metrics.h"

#include <hiredis/hiredis.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lua_scripts.h"
#include "master_redis.h"
#include "queue.h"
#include "util.h"

#define METRICS_REFRESH_S 1.0
#define METRICS_DOWN_CHECK_S 0.1    /* Redis down: is it back? */
/* Arrivals kept per queue: one a refresh at most, so an hour of them. */
#define METRICS_ARRIVALS 3600

/* Jobs that had ever arrived in ready (taken + still there) by ms. */
struct arrival {
	int64_t ms, count;
};

/* The Redis figures of one queue, kept by name: a queue may go away on
 * reload while the replies about it are still on their way. */
struct figures_entry {
	char queue[CONFIG_QUEUE_NAME_MAX + 1];
	struct metrics_figures v;
	struct figures_entry *next;
	/* a ring of the refreshes that saw the count of arrivals grow,
	 * oldest at first: the history behind v.ready_since_ms */
	int first, n;
	struct arrival arrivals[METRICS_ARRIVALS];
};

struct metrics {
	struct ev_loop *loop;
	struct master *m;         /* whose Redis connection asks */
	metrics_view_fn *view_fn; /* which queues there are */
	ev_timer timer;
	int pending;              /* replies of the last refresh still due */
	struct figures_entry *figures;
	int64_t used_memory, maxmemory, memory_ms;   /* INFO memory */
	int64_t unevictable, evicted_keys;           /* memory.lua */
	char refuse_percent[16];                     /* its ARGV */
};

enum { ASK_READY, ASK_REQUEUED, ASK_DELAYED, ASK_SCHEDULED, ASK_DEAD,
    ASK_STATS, ASK_OWNERS, ASK_PROC, ASK_MEMORY, ASK_COUNT };

struct figures_ask {
	struct figures_round *round;
	int what;
};

/* One refresh of one queue, published once every reply has come. */
struct figures_round {
	struct metrics *mt;
	char queue[CONFIG_QUEUE_NAME_MAX + 1];
	struct queue_keys k;
	int outstanding;
	bool failed;
	struct metrics_figures v;
	struct figures_ask asks[ASK_COUNT];
};

static void on_figure(struct master *m, redisReply *rep, void *priv);

static void
ask(struct master *m, struct figures_round *fr, int what, int argc,
    const char **argv)
{
	fr->outstanding++;
	fr->mt->pending++;
	if (master_redis_command(m, fr->queue, on_figure, &fr->asks[what], argc,
	    argv) == -1) {
		fr->failed = true;
		fr->outstanding--;
		fr->mt->pending--;
	}
}

const struct metrics_figures *
metrics_figures_of(const struct metrics *mt, const char *queue)
{
	struct figures_entry *e = mt != NULL ? mt->figures : NULL;

	while (e != NULL && strcmp(e->queue, queue) != 0)
		e = e->next;
	return e != NULL ? &e->v : NULL;
}

int64_t
metrics_oldest_ready_ms(const struct metrics_figures *f)
{
	return f->ready_since_ms != 0 ? util_monotonic_ms() -
	    f->ready_since_ms : 0;
}

/* ready is a FIFO (LPUSH, RPOP): the oldest job in it is the one that
 * arrived right after the `taken` jobs workers have had (stats
 * `enqueued`), so it had arrived by the first refresh that counted more
 * than `taken` arrivals. Arrivals are dated by the refresh that saw them
 * (at most a refresh late: the age is never overstated by more than the
 * two reads being apart); those older than the ring or than this master
 * are dated by its oldest entry. A count that went down (ready deleted,
 * stats reset) brings the history down with it. */
static void
figures_arrivals(struct figures_entry *e, int64_t now)
{
	struct metrics_figures *v = &e->v;
	int64_t count = v->enqueued + v->ready;
	int lo = 0, hi;

	for (hi = e->n; hi > 0; hi--) {
		struct arrival *a = &e->arrivals[(e->first + hi - 1) %
		    METRICS_ARRIVALS];
		if (a->count <= count)
			break;
		a->count = count;
	}
	if (e->n == 0 || e->arrivals[(e->first + e->n - 1) %
	    METRICS_ARRIVALS].count < count) {
		if (e->n == METRICS_ARRIVALS) {
			e->first = (e->first + 1) % METRICS_ARRIVALS;
			e->n--;
		}
		e->arrivals[(e->first + e->n++) % METRICS_ARRIVALS] =
		    (struct arrival){ now, count };
	}
	v->ready_since_ms = 0;
	if (v->ready <= 0)
		return;
	/* the first entry with more arrivals than taken (the last has) */
	for (hi = e->n - 1; lo < hi; ) {
		int mid = lo + (hi - lo) / 2;
		if (e->arrivals[(e->first + mid) % METRICS_ARRIVALS].count >
		    v->enqueued)
			hi = mid;
		else
			lo = mid + 1;
	}
	v->ready_since_ms = e->arrivals[(e->first + lo) % METRICS_ARRIVALS].ms;
}

static void
figures_publish(struct figures_round *fr)
{
	struct metrics *mt = fr->mt;
	struct figures_entry *e = mt->figures;

	while (e != NULL && strcmp(e->queue, fr->queue) != 0)
		e = e->next;
	if (!fr->failed && e == NULL) {
		e = xcalloc(1, sizeof(*e));
		snprintf(e->queue, sizeof(e->queue), "%s", fr->queue);
		e->next = mt->figures;
		mt->figures = e;
	}
	if (!fr->failed) {
		fr->v.updated_ms = util_monotonic_ms();
		e->v = fr->v;
		figures_arrivals(e, fr->v.updated_ms);
	}
	free(fr);
}

/* HGETALL of the stats hash: field, value, field, value... */
static void
figures_counters(struct metrics_figures *v, const redisReply *rep)
{
	for (size_t i = 0; i + 1 < rep->elements; i += 2) {
		const char *f = rep->element[i]->str;
		int64_t n = strtoll(rep->element[i + 1]->str, NULL, 10);
		if (strcmp(f, "enqueued") == 0)
			v->enqueued = n;
		else if (strcmp(f, "done") == 0)
			v->done = n;
		else if (strcmp(f, "retried") == 0)
			v->retried = n;
		else if (strcmp(f, "dead") == 0)
			v->deadlettered = n;
		else if (strcmp(f, "recovered") == 0)
			v->recovered = n;
		else if (strcmp(f, "cache_missing") == 0)
			v->cache_missing = n;
		else if (strcmp(f, "orphans") == 0)
			v->orphans = n;
		else if (strcmp(f, "reprotected") == 0)
			v->reprotected = n;
		else if (strcmp(f, "protected_lost") == 0)
			v->protected_lost = n;
	}
}

/* memory.lua's answer: {used, max, policy, keys, volatile, unevictable,
 * own bytes, own keys, evicted_keys, info, refusal, protected bytes,
 * protected keys}. */
static void
figures_memory(struct metrics *mt, struct metrics_figures *v,
    const redisReply *rep)
{
	if (rep->elements < 13)
		return;
	v->bytes = rep->element[6]->integer;
	v->protected_bytes = rep->element[11]->integer;
	v->protected_keys = rep->element[12]->integer;
	v->refusing = rep->element[10]->type == REDIS_REPLY_STRING &&
	    rep->element[10]->len > 0;
	mt->unevictable = rep->element[5]->integer;
	mt->evicted_keys = rep->element[8]->integer;
}

static void
figures_store(struct master *m, struct figures_round *fr, int what,
    const redisReply *rep)
{
	char key[QUEUE_KEY_MAX + 160];

	switch (what) {
	case ASK_READY: fr->v.ready = rep->integer; break;
	case ASK_DELAYED: fr->v.delayed = rep->integer; break;
	case ASK_SCHEDULED: fr->v.scheduled = rep->integer; break;
	case ASK_REQUEUED: fr->v.requeued = rep->integer; break;
	case ASK_DEAD: fr->v.dead = rep->integer; break;
	case ASK_PROC: fr->v.processing += rep->integer; break;
	case ASK_STATS: figures_counters(&fr->v, rep); break;
	case ASK_MEMORY: figures_memory(fr->mt, &fr->v, rep); break;
	case ASK_OWNERS:
		/* every processing list of the queue, on any host */
		for (size_t i = 0; i < rep->elements; i++) {
			queue_proc_key(&fr->k, rep->element[i]->str, key, sizeof(key));
			const char *argv[] = { "LLEN", key };
			ask(m, fr, ASK_PROC, 2, argv);
		}
		break;
	}
}

static void
on_figure(struct master *m, redisReply *rep, void *priv)
{
	struct figures_ask *a = priv;
	struct figures_round *fr = a->round;
	int want = a->what == ASK_STATS || a->what == ASK_OWNERS ||
	    a->what == ASK_MEMORY ? REDIS_REPLY_ARRAY : REDIS_REPLY_INTEGER;

	fr->mt->pending--;
	/* memory.lua refused (no INFO in an ACL): the other figures stand */
	if (a->what == ASK_MEMORY && rep != NULL && rep->type != want)
		;
	else if (rep == NULL || rep->type != want)
		fr->failed = true;
	else
		figures_store(m, fr, a->what, rep);
	if (--fr->outstanding == 0)
		figures_publish(fr);
}

static void
figures_queue(struct master *m, struct metrics *mt, const char *prefix,
    const char *queue)
{
	struct figures_round *fr = xcalloc(1, sizeof(*fr));

	fr->mt = mt;
	snprintf(fr->queue, sizeof(fr->queue), "%s", queue);
	queue_keys_init(&fr->k, prefix, queue);
	for (int i = 0; i < ASK_COUNT; i++)
		fr->asks[i] = (struct figures_ask){ fr, i };
	const char *ready[] = { "LLEN", fr->k.ready };
	const char *delayed[] = { "ZCARD", fr->k.delayed };
	const char *scheduled[] = { "ZCARD", fr->k.scheduled };
	const char *requeued[] = { "LLEN", fr->k.requeue };
	const char *dead[] = { "LLEN", fr->k.dead };
	const char *stats[] = { "HGETALL", fr->k.stats };
	const char *owners[] = { "HKEYS", fr->k.owners };
	const char *memory[] = { "EVAL", lua_script_source[LUA_MEMORY], "1",
	    fr->k.ready, mt->refuse_percent };
	fr->outstanding = 1;    /* hold it until every ask is sent */
	ask(m, fr, ASK_READY, 2, ready);
	ask(m, fr, ASK_DELAYED, 2, delayed);
	ask(m, fr, ASK_SCHEDULED, 2, scheduled);
	ask(m, fr, ASK_REQUEUED, 2, requeued);
	ask(m, fr, ASK_DEAD, 2, dead);
	ask(m, fr, ASK_STATS, 2, stats);
	ask(m, fr, ASK_OWNERS, 2, owners);
	ask(m, fr, ASK_MEMORY, 5, memory);
	if (--fr->outstanding == 0)
		figures_publish(fr);
}

/* A "name:value" line of an INFO reply, or -1. */
static int64_t
info_field(const char *info, const char *name)
{
	size_t n = strlen(name);

	for (const char *p = info; p != NULL; p = strchr(p, '\n')) {
		p += *p == '\n';
		if (strncmp(p, name, n) == 0 && p[n] == ':')
			return strtoll(p + n + 1, NULL, 10);
	}
	return -1;
}

static void
on_info(struct master *m, redisReply *rep, void *priv)
{
	struct metrics *mt = priv;
	(void)m;

	mt->pending--;
	if (rep == NULL || rep->type != REDIS_REPLY_STRING)
		return;
	mt->used_memory = info_field(rep->str, "used_memory");
	mt->maxmemory = info_field(rep->str, "maxmemory");
	mt->memory_ms = util_monotonic_ms();
}

/* Every second: lengths and counters of each queue, INFO memory. A slow
 * Redis gets no new round before the last one is answered. While the
 * master's connection is down, every tenth of a second: is it back? So
 * the figures, and /readyz that wants them fresh, follow Redis as soon as
 * it answers again. */
static void
refresh_cb(struct ev_loop *loop, ev_timer *t, int revents)
{
	struct metrics *mt = t->data;
	const char *info[] = { "INFO", "memory" };
	struct metrics_view v;
	bool up = master_redis_up(mt->m);
	double every = up ? METRICS_REFRESH_S : METRICS_DOWN_CHECK_S;
	(void)revents;

	if (t->repeat != every) {
		t->repeat = every;
		ev_timer_again(loop, t);
	}
	if (!up || mt->pending > 0)
		return;
	mt->pending++;
	if (master_redis_command(mt->m, NULL, on_info, mt, 2, info) == -1)
		mt->pending--;
	mt->view_fn(mt->m, &v);
	snprintf(mt->refuse_percent, sizeof(mt->refuse_percent), "%d",
	    v.memory_refuse_percent);
	for (int i = 0; i < v.nqueues; i++)
		if (!v.queues[i].removed)
			figures_queue(mt->m, mt, v.redis_prefix, v.queues[i].name);
	metrics_view_free(&v);
}

struct metrics *
metrics_start(struct ev_loop *loop, struct master *m,
    metrics_view_fn *view_fn)
{
	struct metrics *mt = xcalloc(1, sizeof(*mt));

	mt->loop = loop;
	mt->m = m;
	mt->view_fn = view_fn;
	ev_timer_init(&mt->timer, refresh_cb, METRICS_REFRESH_S,
	    METRICS_REFRESH_S);
	mt->timer.data = mt;
	mt->unevictable = mt->evicted_keys = -1;
	ev_timer_start(loop, &mt->timer);
	return mt;
}

void
metrics_stop(struct metrics *mt)
{
	if (mt == NULL)
		return;
	ev_timer_stop(mt->loop, &mt->timer);
	while (mt->figures != NULL) {
		struct figures_entry *e = mt->figures;
		mt->figures = e->next;
		free(e);
	}
	free(mt);
}

void
metrics_memory(const struct metrics *mt, int64_t *used, int64_t *maxmemory,
    int64_t *memory_ms)
{
	*used = mt->used_memory;
	*maxmemory = mt->maxmemory;
	*memory_ms = mt->memory_ms;
}

void
metrics_eviction(const struct metrics *mt, int64_t *unevictable,
    int64_t *evicted_keys)
{
	*unevictable = mt->unevictable;
	*evicted_keys = mt->evicted_keys;
}

void
metrics_own_bytes(const struct metrics *mt, int64_t *bytes, int64_t *keys)
{
	*bytes = *keys = 0;
	for (const struct figures_entry *e = mt->figures; e != NULL;
	    e = e->next) {
		*bytes += e->v.bytes;
		*keys += e->v.protected_keys;
	}
}

void
metrics_view_free(struct metrics_view *v)
{
	for (int i = 0; i < v->nqueues; i++)
		free(v->queues[i].workers);
	free(v->queues);
	v->queues = NULL;
	v->nqueues = 0;
}
