/* http_dead.h - what http_dead.c (one dead entry) and http_dead_select.c
 * (every entry of a selection) share: the action on one entry's exact bytes,
 * sent over the master's asynchronous Redis connection. */
#ifndef FERRY_HTTP_DEAD_H
#define FERRY_HTTP_DEAD_H

#include <stdbool.h>
#include <stddef.h>

#include "config.h"
#include "lua_scripts.h"
#include "dead_entry.h"
#include "master_redis.h"

/* The configured queue the request's "queue" argument names, or NULL
 * after a 404 saying so. */
struct http_req;
const struct queue_config *http_dead_queue(struct http_req *r);
/* EVAL script with its nkeys KEYS and ARGV (argc in all) over the
 * master's asynchronous connection; fn gets the reply. -1 when Redis is
 * not connected now (fn never called). */
int http_dead_eval(struct master *m, const char *queue, enum lua_script script,
    int nkeys, int argc, const char *const *argv, const size_t *lens,
    master_redis_fn *fn, void *priv);
/* replay: dead_retry.lua on el (1 when replayed, 0 when gone, BADENTRY
 * for a malformed entry); else dead_purge.lua: LREM dead COUNT el (count
 * 1: from the newest end, -1: from the oldest) and the release of
 * cache_key (NULL: none). fn gets the reply; -1 when Redis is not
 * connected now (fn never called). */
int http_dead_act(struct master *m, const char *queue, bool replay,
    int count, const char *el, size_t len, const char *cache_key,
    master_redis_fn *fn, void *priv);
/* The cache key of e's job when cache_key_allowed for q (malloc'd), else
 * NULL: purging a job releases it, as `ferryctl dead purge` does. */
char *http_dead_cache_key(struct master *m, const struct queue_config *q,
    const struct dead_entry *e);

#endif
