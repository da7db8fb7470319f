/* script_args.h - the KEYS and ARGV of each Lua script, built in exactly
 * one place per script, in the order its header comment in src/redis/lua/
 * states. The worker, the master (asynchronously), ferryctl and the tests
 * all call these, so a script's argument order is written down once in C.
 * Pure code: it only fills strings. */
#ifndef FERRY_SCRIPT_ARGS_H
#define FERRY_SCRIPT_ARGS_H

#include <stdbool.h>
#include <stddef.h>

#include "lua_scripts.h"
#include "queue.h"

#define SARGS_MAX 16
#define SARGS_KEY_MAX (QUEUE_KEY_MAX + 160)

/* One call: script, nkeys, argc, argv and lens (argv points into the
 * struct itself: fill it where it is used, never copy it). */
struct sargs {
	enum lua_script script;
	int nkeys, argc;
	const char *argv[SARGS_MAX];
	size_t lens[SARGS_MAX];
	struct queue_keys k;
	char proc[SARGS_KEY_MAX];
	char rate[SARGS_KEY_MAX];
	char num[5][24];
};

/* fetch.lua: up to n jobs into proc; held already there (BLMOVE). */
void sargs_fetch(struct sargs *a, const char *prefix, const char *queue,
    const char *worker, const char *master, const char *batch_key, int n,
    int held, int max_recoveries);
/* ... and with a rate limit (per_s jobs/s > 0, a bucket of burst tokens):
 * call right after sargs_fetch. */
void sargs_fetch_limit(struct sargs *a, long per_s, long burst);
/* register.lua: worker records its master. */
void sargs_register(struct sargs *a, const char *prefix, const char *queue,
    const char *worker, const char *master);
/* settle.lua's fixed part; append 6 values per named job (settle.lua). */
void sargs_settle(struct sargs *a, const char *prefix, const char *queue,
    const char *worker, const char *master, int count);
#define SARGS_SETTLE_FIXED 10   /* KEYS and ARGV before the per-job values */
#define SARGS_SETTLE_PER_JOB 7
/* reclaim.lua: hand worker's processing list back (bump: recoveries+1;
 * count: as recovered in the stats, its worker died). */
void sargs_reclaim(struct sargs *a, const char *prefix, const char *queue,
    const char *worker, int max_recoveries, bool bump, bool count);
/* reap.lua: dead hosts' lists of queue, judged by the masters and clock
 * hashes; never those of master (the caller's id). */
void sargs_reap(struct sargs *a, const char *prefix, const char *queue,
    int max_recoveries, long heartbeat_ttl_ms, const char *master);
/* promote.lua: at most limit due retries to requeue, and at most limit
 * due scheduled documents to ready. */
void sargs_promote(struct sargs *a, const char *prefix, const char *queue,
    int limit);
/* dead_purge.lua: remove the dead entry el (len bytes; LREM count) and
 * release its job's cache key (NULL: none). */
void sargs_dead_purge(struct sargs *a, const char *prefix, const char *queue,
    int count, const char *el, size_t len, const char *cache_key);
/* dead_purge.lua after an entry went with the whole list (`--all`):
 * release its job's cache key (NULL: none) and forget its job's id; sha:
 * the SHA-1 of the job's document (hex), which the key's mark and the id's
 * binding must name ("" when the entry was malformed). */
void sargs_dead_purged(struct sargs *a, const char *prefix, const char *queue,
    const char *id, const char *sha, const char *cache_key);
/* dead_retry.lua: replay the dead entry el (len bytes). */
void sargs_dead_retry(struct sargs *a, const char *prefix, const char *queue,
    const char *el, size_t len);

#endif
