/* http_dead.h - what http_dead.c (one dead entry), http_dead_list.c (the
 * list, filtered), http_dead_select.c (every entry of a selection) and
 * http_dead_redrive.c (the redrives running) share: the reads of
 * dead_page.lua, one at a time; the arguments of a selection; the action
 * on one entry's exact bytes, sent over the master's asynchronous Redis
 * connection. */
#ifndef FERRY_HTTP_DEAD_H
#define FERRY_HTTP_DEAD_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "config.h"
#include "lua_scripts.h"
#include "dead_entry.h"
#include "dead_filter.h"
#include "master_redis.h"

/* The bytes dead_page.lua may read in Redis for one page. */
#define HTTP_DEAD_READ_BUDGET (32L << 20)

/* The configured queue the request's "queue" argument names, or NULL
 * after a 404 saying so. */
struct http_req;
const struct queue_config *http_dead_queue(struct http_req *r);
/* http_dead_args.c: a number argument in lo..hi, or def when absent (0
 * for a double); -1 after a 400. */
int http_dead_arg_long(struct http_req *r, const char *name, long def,
    long lo, long hi, long *out);
int http_dead_arg_number(struct http_req *r, const char *name, double lo,
    double hi, double *out);
/* The texts a selection's filter points into. */
struct http_dead_filter_text {
	char reason[DEAD_FILTER_TEXT_MAX + 1], group[DEAD_FILTER_TEXT_MAX + 1];
	char id_glob[DEAD_FILTER_TEXT_MAX + 1];
};
/* The request's selection (reason, group, id, before, after) into f,
 * its texts into t; with exact, `reason` is the reason's exact text (and
 * required). 0, or -1 after a 400. */
int http_dead_filter_args(struct http_req *r, bool exact,
    struct http_dead_filter_text *t, struct dead_filter *f);
/* Take the one read of the dead-letter list a master does at a time:
 * false after a 503 when another is under way; else give it back with
 * http_dead_read_end. */
bool http_dead_read_begin(struct http_req *r);
void http_dead_read_end(void);
/* dead_page.lua: limit entries of the list dead from offset, at most
 * prefix bytes of each and budget bytes of prefixes in all (at least
 * one entry). fn gets the reply; -1 when Redis is not connected now. */
int http_dead_page(struct master *m, const char *queue, const char *dead,
    long offset, long limit, long prefix, long budget, master_redis_fn *fn,
    void *priv);
/* Is rep dead_page.lua's answer: { LLEN, (length, sha1, prefix)... }? */
struct redisReply;
bool http_dead_page_reply_ok(const struct redisReply *rep);
/* What every reply to a read of queue's dead letters is checked for
 * first: an answer at all, a queue still configured, no Redis error. The
 * queue's configuration, or NULL with the HTTP status and message to
 * fail the request with. */
const struct queue_config *http_dead_reply_queue(struct master *m,
    const struct redisReply *rep, const char *queue, unsigned *status,
    const char **what);
/* The members of one entry (its first len of total bytes): index, id,
 * sha1, bytes, its header (or the raw bytes of a malformed one) and, with
 * job, its document; "truncated" when it was cut. */
json_t *http_dead_entry_json(const struct queue_config *q, const char *el,
    size_t len, size_t total, const char *ref, long index, bool job);
/* GET /api/dead (http_dead_list.c). */
void http_dead_list(struct http_req *r);
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
