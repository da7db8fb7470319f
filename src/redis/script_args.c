/* script_args.c - one builder per Lua script (see script_args.h). */
#include "script_args.h"

#include <stdio.h>
#include <string.h>

static void
start(struct sargs *a, enum lua_script s, const char *prefix,
    const char *queue)
{
	memset(a, 0, sizeof(*a));
	a->script = s;
	queue_keys_init(&a->k, prefix, queue);
}

static void
put(struct sargs *a, const char *v)
{
	a->lens[a->argc] = strlen(v);
	a->argv[a->argc++] = v;
}

static const char *
num(struct sargs *a, int slot, long long v)
{
	snprintf(a->num[slot], sizeof(a->num[slot]), "%lld", v);
	return a->num[slot];
}

void
sargs_fetch(struct sargs *a, const char *prefix, const char *queue,
    const char *worker, const char *master, const char *batch_key, int n,
    int held, int max_recoveries)
{
	start(a, LUA_FETCH, prefix, queue);
	queue_proc_key(&a->k, worker, a->proc, sizeof(a->proc));
	/* the token bucket of rate_limit, in the queue's slot: named here
	 * always, read and written only when sargs_fetch_limit sets a rate */
	snprintf(a->rate, sizeof(a->rate), "%s:{%s}:rate", prefix, queue);
	/* KEYS: ready, proc, bkeys, owners, requeue, stats, rate */
	put(a, a->k.ready);
	put(a, a->proc);
	put(a, a->k.bkeys);
	put(a, a->k.owners);
	put(a, a->k.requeue);
	put(a, a->k.stats);
	put(a, a->rate);
	a->nkeys = 7;
	/* ARGV: n, worker id, batch key, held, master id, max_recoveries,
	 * rate (jobs/s, 0: none), burst (tokens) */
	put(a, num(a, 0, n));
	put(a, worker);
	put(a, batch_key);
	put(a, num(a, 1, held));
	put(a, master);
	put(a, num(a, 2, max_recoveries));
	put(a, "0");
	put(a, "0");
}

void
sargs_fetch_limit(struct sargs *a, long per_s, long burst)
{
	a->argv[a->argc - 2] = num(a, 3, per_s);
	a->lens[a->argc - 2] = strlen(a->argv[a->argc - 2]);
	a->argv[a->argc - 1] = num(a, 4, burst);
	a->lens[a->argc - 1] = strlen(a->argv[a->argc - 1]);
}

void
sargs_register(struct sargs *a, const char *prefix, const char *queue,
    const char *worker, const char *master)
{
	start(a, LUA_REGISTER, prefix, queue);
	put(a, a->k.owners);            /* KEYS: owners */
	a->nkeys = 1;
	put(a, worker);                 /* ARGV: worker id, master id */
	put(a, master);
}

void
sargs_settle(struct sargs *a, const char *prefix, const char *queue,
    const char *worker, const char *master, int count)
{
	start(a, LUA_SETTLE, prefix, queue);
	queue_proc_key(&a->k, worker, a->proc, sizeof(a->proc));
	/* KEYS: proc, delayed, dead, stats, bkeys, owners, protected */
	put(a, a->proc);
	put(a, a->k.delayed);
	put(a, a->k.dead);
	put(a, a->k.stats);
	put(a, a->k.bkeys);
	put(a, a->k.owners);
	put(a, a->k.protected);
	a->nkeys = 7;
	/* ARGV: worker id, master id, job count, then per named job */
	put(a, worker);
	put(a, master);
	put(a, num(a, 0, count));
}

void
sargs_reclaim(struct sargs *a, const char *prefix, const char *queue,
    const char *worker, int max_recoveries, bool bump, bool count)
{
	start(a, LUA_RECLAIM, prefix, queue);
	queue_proc_key(&a->k, worker, a->proc, sizeof(a->proc));
	/* KEYS: proc, requeue, dead, stats, owners, bkeys */
	put(a, a->proc);
	put(a, a->k.requeue);
	put(a, a->k.dead);
	put(a, a->k.stats);
	put(a, a->k.owners);
	put(a, a->k.bkeys);
	a->nkeys = 6;
	/* ARGV: worker id, max_recoveries, 1 (bump and count) / 0 (count) /
	 * stopped */
	put(a, worker);
	put(a, num(a, 0, max_recoveries));
	put(a, bump ? "1" : count ? "0" : "stopped");
}

void
sargs_reap(struct sargs *a, const char *prefix, const char *queue,
    int max_recoveries, long heartbeat_ttl_ms, const char *master)
{
	start(a, LUA_REAP, prefix, queue);
	/* KEYS: owners, requeue, dead, stats, bkeys, clock, masters */
	put(a, a->k.owners);
	put(a, a->k.requeue);
	put(a, a->k.dead);
	put(a, a->k.stats);
	put(a, a->k.bkeys);
	put(a, a->k.clock);
	put(a, a->k.masters);
	a->nkeys = 7;
	/* ARGV: key prefix, queue name, max_recoveries, heartbeat_ttl ms,
	 * master id */
	put(a, prefix);
	put(a, queue);
	put(a, num(a, 0, max_recoveries));
	put(a, num(a, 1, heartbeat_ttl_ms));
	put(a, master);
}

void
sargs_promote(struct sargs *a, const char *prefix, const char *queue,
    int limit)
{
	start(a, LUA_PROMOTE, prefix, queue);
	/* KEYS: delayed, requeue, scheduled, ready */
	put(a, a->k.delayed);
	put(a, a->k.requeue);
	put(a, a->k.scheduled);
	put(a, a->k.ready);
	a->nkeys = 4;
	put(a, num(a, 0, limit));       /* ARGV: at most this many */
}

void
sargs_dead_retry(struct sargs *a, const char *prefix, const char *queue,
    const char *el, size_t len)
{
	start(a, LUA_DEAD_RETRY, prefix, queue);
	put(a, a->k.dead);              /* KEYS: dead, requeue, stats */
	put(a, a->k.requeue);
	put(a, a->k.stats);
	a->nkeys = 3;
	a->argv[a->argc] = el;          /* ARGV: the entry's bytes */
	a->lens[a->argc++] = len;
}

void
sargs_dead_purge(struct sargs *a, const char *prefix, const char *queue,
    int count, const char *el, size_t len, const char *cache_key)
{
	start(a, LUA_DEAD_PURGE, prefix, queue);
	/* KEYS: dead, protected, [the job's cache key] */
	put(a, a->k.dead);
	put(a, a->k.protected);
	if (cache_key != NULL)
		put(a, cache_key);
	a->nkeys = a->argc;
	put(a, num(a, 0, count));       /* ARGV: LREM count, the entry */
	a->argv[a->argc] = el;
	a->lens[a->argc++] = len;
}

void
sargs_dead_purged(struct sargs *a, const char *prefix, const char *queue,
    const char *id, const char *cache_key)
{
	sargs_dead_purge(a, prefix, queue, 1, "", 0, cache_key);
	put(a, id);                     /* ARGV[3]: the job's id */
}
