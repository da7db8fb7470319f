/* master_sweep.c - the sweep of cache keys, per queue, on the master's loop
 * (master_sweep.h). Two passes take turns, one step every
 * MASTER_SWEEP_STEP_S: SCAN of the queue's cache space, whose keys go to
 * sweep.lua "orphans", and HSCAN of its protected hash, whose fields go to
 * sweep.lua "audit". Each SCAN or HSCAN asks for MASTER_SWEEP_COUNT, so
 * Redis does a bounded amount of work per second however large the cache
 * and the backlog; KEYS is never used. Every master sweeps every queue it
 * serves: the steps are idempotent, so two hosts sweeping one queue only
 * do the work twice. An audit step bounds its work by the keys of groups it
 * checks (sweep.lua): the fields it did not get to go first in the next
 * step.
 * A protected key found lost is logged at error level at once, then at
 * most once a minute with the count since, so that a FLUSHDB reads as one
 * line and a count, not one line per key. */
#include "master_sweep.h"

#include <ev.h>
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "lua_scripts.h"
#include "master_events.h"
#include "master_int.h"
#include "master_redis.h"
#include "queue.h"
#include "util.h"

#define LOST_SAY_EVERY_MS 60000
#define PASSES 2

enum pass { PASS_ORPHANS, PASS_AUDIT };
static const char *const pass_mode[PASSES] = { "orphans", "audit" };

/* Keys (or fields) for sweep.lua, owned. */
struct key_list {
	char **k;
	size_t *len;
	size_t n;
};

struct sweep_queue {
	char name[CONFIG_QUEUE_NAME_MAX + 1];
	struct key_list sent;     /* what the step in flight sent */
	struct key_list pending;  /* fields an audit step did not get to */
	char cursor[PASSES][32];  /* "0": a pass starts (again) */
	int64_t ended_ms[PASSES]; /* when the last pass ended; 0: running */
	enum pass turn;           /* the pass whose step comes next */
	bool busy;                /* a step in flight */
	bool orphaned;            /* the sweep stopped: its reply frees it */
	long long lost_unsaid;    /* found lost since the last line */
	int64_t lost_said_ms;
	int64_t ttl_said_ms;
	struct sweep_queue *next;
};

static struct {
	struct master *m;
	ev_timer timer;
	struct sweep_queue *queues;
} sw;

static void
key_list_free(struct key_list *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->k[i]);
	free(l->k);
	free(l->len);
	*l = (struct key_list){ 0 };
}

static void
sweep_queue_free(struct sweep_queue *sq)
{
	key_list_free(&sq->sent);
	key_list_free(&sq->pending);
	free(sq);
}

static struct sweep_queue *
queue_of(const char *name)
{
	struct sweep_queue *sq;

	for (sq = sw.queues; sq != NULL; sq = sq->next)
		if (strcmp(sq->name, name) == 0)
			return sq;
	sq = xcalloc(1, sizeof(*sq));
	snprintf(sq->name, sizeof(sq->name), "%s", name);
	for (int p = 0; p < PASSES; p++)
		snprintf(sq->cursor[p], sizeof(sq->cursor[p]), "0");
	sq->next = sw.queues;
	sw.queues = sq;
	return sq;
}

/* The queue's cache space as a SCAN pattern: prefix*, the glob's own
 * characters escaped. */
static void
cache_pattern(const struct queue_keys *k, char *out, size_t size)
{
	size_t o = 0;

	for (const char *p = k->cache_prefix; *p != '\0' && o + 3 < size; p++) {
		if (strchr("*?[]\\", *p) != NULL)
			out[o++] = '\\';
		out[o++] = *p;
	}
	out[o++] = '*';
	out[o] = '\0';
}

static void
say_lost(struct sweep_queue *sq, long long lost, const char *first)
{
	int64_t now = util_monotonic_ms();

	sq->lost_unsaid += lost;
	if (sq->lost_said_ms != 0 && now - sq->lost_said_ms < LOST_SAY_EVERY_MS)
		return;
	log_error("queue %s: %lld protected cache key%s disappeared from Redis "
	    "(%s%s): something removed keys that no eviction policy can "
	    "(FLUSHDB or FLUSHALL, a DEL by hand, maxmemory-policy changed to "
	    "allkeys-* at run time); the jobs that name them will be dead "
	    "\"cache key expired or evicted\"", sq->name, sq->lost_unsaid,
	    sq->lost_unsaid == 1 ? "" : "s", *first != '\0' ? "one: " :
	    "counted in protected_lost", first);
	master_event("redis", "queue %s: %lld protected cache key%s "
	    "disappeared from Redis", sq->name, sq->lost_unsaid,
	    sq->lost_unsaid == 1 ? "" : "s");
	sq->lost_unsaid = 0;
	sq->lost_said_ms = now;
}

/* sweep.lua stopped at key `stopped` (from 1; 0: it looked at all): the
 * keys from there on are sent again by the next step. */
static void
keep_the_rest(struct sweep_queue *sq, long long stopped)
{
	struct key_list *l = &sq->sent;

	if (stopped < 1 || (size_t)stopped > l->n) {
		key_list_free(l);
		return;
	}
	for (size_t i = 0; i < (size_t)stopped - 1; i++)
		free(l->k[i]);
	l->n -= (size_t)stopped - 1;
	memmove(l->k, l->k + stopped - 1, l->n * sizeof(*l->k));
	memmove(l->len, l->len + stopped - 1, l->n * sizeof(*l->len));
	sq->pending = *l;
	*l = (struct key_list){ 0 };
}

static void
on_sweep(struct master *m, redisReply *rep, void *priv)
{
	struct sweep_queue *sq = priv;
	int64_t now = util_monotonic_ms();
	(void)m;

	sq->busy = false;
	if (sq->orphaned) {
		sweep_queue_free(sq);
		return;
	}
	if (rep == NULL || rep->type != REDIS_REPLY_ARRAY || rep->elements < 5) {
		key_list_free(&sq->sent);
		return;         /* the link logs a lost connection */
	}
	keep_the_rest(sq, rep->element[4]->integer);
	long long reprotected = rep->element[1]->integer;
	long long lost = rep->element[2]->integer;
	if (lost > 0)
		say_lost(sq, lost, rep->element[3]->type == REDIS_REPLY_STRING ?
		    rep->element[3]->str : "");
	if (reprotected > 0 && (sq->ttl_said_ms == 0 ||
	    now - sq->ttl_said_ms >= LOST_SAY_EVERY_MS)) {
		sq->ttl_said_ms = now;
		log_warn("queue %s: %lld protected cache key%s had a TTL again "
		    "(the application wrote a key its waiting job names, with "
		    "EX or PX?): made persistent again; until then the key "
		    "could have been evicted", sq->name, reprotected,
		    reprotected == 1 ? "" : "s");
	}
}

/* sweep.lua on keys (sq->sent, owned by the step until its reply). */
static void
send_sweep(struct sweep_queue *sq, enum pass p)
{
	struct queue_keys k;
	size_t max = 7 + sq->sent.n;
	const char **argv = xcalloc(max, sizeof(*argv));
	size_t *lens = xcalloc(max, sizeof(*lens));
	char ttl[24];
	int argc = 0;

	queue_keys_init(&k, sw.m->cfg->redis_prefix, sq->name);
	snprintf(ttl, sizeof(ttl), "%ld", sw.m->cfg->cache_ttl_ms);
	argv[argc++] = "EVAL";
	argv[argc++] = lua_script_source[LUA_SWEEP];
	argv[argc++] = "2";
	argv[argc++] = k.protected;
	argv[argc++] = k.stats;
	argv[argc++] = pass_mode[p];
	argv[argc++] = ttl;
	for (int i = 0; i < argc; i++)
		lens[i] = strlen(argv[i]);
	for (size_t i = 0; i < sq->sent.n; i++) {
		lens[argc] = sq->sent.len[i];
		argv[argc++] = sq->sent.k[i];
	}
	if (sq->sent.n > 0 && master_redis_commandv(sw.m, sq->name, on_sweep,
	    sq, argc, argv, lens) == 0)
		sq->busy = true;
	else
		key_list_free(&sq->sent);
	free(argv);
	free(lens);
}

/* The keys of one SCAN (orphans) or the fields of one HSCAN, to sweep.lua. */
static void
send_items(struct sweep_queue *sq, enum pass p, const redisReply *items)
{
	size_t step = p == PASS_AUDIT ? 2 : 1;
	struct key_list *l = &sq->sent;

	key_list_free(l);
	l->k = xcalloc(items->elements + 1, sizeof(*l->k));
	l->len = xcalloc(items->elements + 1, sizeof(*l->len));
	for (size_t i = 0; i < items->elements; i += step) {
		const redisReply *it = items->element[i];
		if (it->type != REDIS_REPLY_STRING || it->len == 0)
			continue;
		l->k[l->n] = xmalloc(it->len + 1);
		memcpy(l->k[l->n], it->str, it->len + 1);
		l->len[l->n++] = it->len;
	}
	send_sweep(sq, p);
}

struct scan_step {
	struct sweep_queue *sq;
	enum pass pass;
};

static void
on_scan(struct master *m, redisReply *rep, void *priv)
{
	struct scan_step *st = priv;
	struct sweep_queue *sq = st->sq;
	enum pass p = st->pass;
	(void)m;

	free(st);
	sq->busy = false;
	if (sq->orphaned) {
		sweep_queue_free(sq);
		return;
	}
	if (rep == NULL || rep->type != REDIS_REPLY_ARRAY ||
	    rep->elements != 2 || rep->element[0]->type != REDIS_REPLY_STRING ||
	    rep->element[1]->type != REDIS_REPLY_ARRAY)
		return;
	snprintf(sq->cursor[p], sizeof(sq->cursor[p]), "%s",
	    rep->element[0]->str);
	if (strcmp(sq->cursor[p], "0") == 0)
		sq->ended_ms[p] = util_monotonic_ms();
	send_items(sq, p, rep->element[1]);
}

/* The pass whose turn it is, unless it rests after its end (then the
 * other); -1 when both rest. */
static int
pass_due(struct sweep_queue *sq, int64_t now)
{
	for (int i = 0; i < PASSES; i++) {
		enum pass p = (enum pass)((sq->turn + i) % PASSES);
		if (sq->ended_ms[p] != 0 &&
		    now - sq->ended_ms[p] < (int64_t)(MASTER_SWEEP_PAUSE_S * 1000))
			continue;
		sq->ended_ms[p] = 0;
		sq->turn = (enum pass)((p + 1) % PASSES);
		return (int)p;
	}
	return -1;
}

static void
step(struct sweep_queue *sq)
{
	struct queue_keys k;
	char pattern[QUEUE_KEY_MAX * 2 + 2], count[16];
	struct scan_step *st;

	if (sq->pending.n > 0) {
		/* what the last audit step did not get to comes first */
		key_list_free(&sq->sent);
		sq->sent = sq->pending;
		sq->pending = (struct key_list){ 0 };
		send_sweep(sq, PASS_AUDIT);
		return;
	}
	int p = pass_due(sq, util_monotonic_ms());
	if (p < 0)
		return;
	queue_keys_init(&k, sw.m->cfg->redis_prefix, sq->name);
	snprintf(count, sizeof(count), "%d", MASTER_SWEEP_COUNT);
	st = xmalloc(sizeof(*st));
	st->sq = sq;
	st->pass = (enum pass)p;
	int rc;
	if (p == PASS_ORPHANS) {
		cache_pattern(&k, pattern, sizeof(pattern));
		const char *argv[] = { "SCAN", sq->cursor[p], "MATCH", pattern,
		    "COUNT", count };
		rc = master_redis_command(sw.m, sq->name, on_scan, st, 6, argv);
	} else {
		const char *argv[] = { "HSCAN", k.protected, sq->cursor[p],
		    "COUNT", count };
		rc = master_redis_command(sw.m, sq->name, on_scan, st, 5, argv);
	}
	if (rc == 0)
		sq->busy = true;
	else
		free(st);       /* not connected: the next tick tries again */
}

static void
tick_cb(struct ev_loop *loop, ev_timer *t, int revents)
{
	(void)loop;
	(void)t;
	(void)revents;

	for (struct master_queue *mq = sw.m->queues; mq != NULL; mq = mq->next) {
		struct sweep_queue *sq = queue_of(mq->cfg.name);
		if (!sq->busy && !mq->removed)
			step(sq);
	}
	/* queues gone from the config: forgotten once idle */
	for (struct sweep_queue **pp = &sw.queues; *pp != NULL;) {
		struct sweep_queue *sq = *pp;
		if (!sq->busy && master_find_queue(sw.m, sq->name) == NULL) {
			*pp = sq->next;
			sweep_queue_free(sq);
		} else {
			pp = &sq->next;
		}
	}
}

void
master_sweep_start(struct master *m)
{
	sw.m = m;
	ev_timer_init(&sw.timer, tick_cb, MASTER_SWEEP_STEP_S,
	    MASTER_SWEEP_STEP_S);
	ev_timer_start(m->loop, &sw.timer);
}

void
master_sweep_stop(struct master *m)
{
	ev_timer_stop(m->loop, &sw.timer);
	/* a step in flight still points at its queue: the connection is
	 * closed after this, and its callback (given NULL) frees it */
	while (sw.queues != NULL) {
		struct sweep_queue *sq = sw.queues;
		sw.queues = sq->next;
		if (sq->busy)
			sq->orphaned = true;
		else
			sweep_queue_free(sq);
	}
}
