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
put_bytes(struct sargs *a, const char *v, size_t len)
{
	a->lens[a->argc] = len;
	a->argv[a->argc++] = v;
}

static void
put(struct sargs *a, const char *v)
{
	put_bytes(a, v, strlen(v));
}

/* The script's KEYS, in its order (NULL ends the list), before any ARGV. */
static void
put_keys(struct sargs *a, const char *const *keys)
{
	for (; *keys != NULL; keys++)
		put(a, *keys);
	a->nkeys = a->argc;
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
	put_keys(a, (const char *const[]){ a->k.ready, a->proc, a->k.bkeys,
	    a->k.owners, a->k.requeue, a->k.stats, a->rate, a->k.ids, NULL });
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
	put_keys(a, (const char *const[]){ a->k.owners, NULL });
	put(a, worker);                 /* ARGV: worker id, master id */
	put(a, master);
}

void
sargs_settle(struct sargs *a, const char *prefix, const char *queue,
    const char *worker, const char *master, int count)
{
	start(a, LUA_SETTLE, prefix, queue);
	queue_proc_key(&a->k, worker, a->proc, sizeof(a->proc));
	put_keys(a, (const char *const[]){ a->proc, a->k.delayed, a->k.dead,
	    a->k.stats, a->k.bkeys, a->k.owners, a->k.protected, NULL });
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
	put_keys(a, (const char *const[]){ a->proc, a->k.requeue, a->k.dead,
	    a->k.stats, a->k.owners, a->k.bkeys, NULL });
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
	put_keys(a, (const char *const[]){ a->k.owners, a->k.requeue,
	    a->k.dead, a->k.stats, a->k.bkeys, a->k.clock, a->k.masters,
	    NULL });
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
	put_keys(a, (const char *const[]){ a->k.delayed, a->k.requeue,
	    a->k.scheduled, a->k.ready, NULL });
	put(a, num(a, 0, limit));       /* ARGV: at most this many */
}

void
sargs_dead_retry(struct sargs *a, const char *prefix, const char *queue,
    const char *el, size_t len)
{
	start(a, LUA_DEAD_RETRY, prefix, queue);
	put_keys(a, (const char *const[]){ a->k.dead, a->k.requeue,
	    a->k.stats, NULL });
	put_bytes(a, el, len);          /* ARGV: the entry's bytes */
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
	put_bytes(a, el, len);
}

void
sargs_dead_purged(struct sargs *a, const char *prefix, const char *queue,
    const char *id, const char *sha, const char *cache_key)
{
	sargs_dead_purge(a, prefix, queue, 1, "", 0, cache_key);
	put(a, id);                     /* ARGV[3]: the job's id */
	put(a, sha);                    /* ARGV[4]: its document's SHA-1 */
}
