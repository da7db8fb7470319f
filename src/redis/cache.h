/* cache.h - the data of jobs that name a cache key (doc/design.md, 3.8):
 * read a batch's keys in two pipelined round trips (TYPE, then GET /
 * HGETALL / LRANGE) and turn each value into JSON. */
#ifndef FERRY_CACHE_H
#define FERRY_CACHE_H

#include <hiredis/hiredis.h>
#include <stdbool.h>
#include <stddef.h>

#include "config.h"
#include "job.h"

#define CACHE_MISSING_REASON "cache key expired or evicted"

enum cache_mode {
	CACHE_EXISTS,           /* only whether the key is there */
	CACHE_JSON,             /* the value as JSON */
	CACHE_ROWS,             /* ... and the rows for the postgres sink */
};

enum cache_state { CACHE_FOUND, CACHE_GONE, CACHE_BAD };

/* The value of a key of ferry's own (cache_own_key) starts with the mark
 * of the job that wrote it: the SHA-1 of its document in hex and ':'
 * (src/redis/lua/enqueue.lua, OWN_MARK_SEP in common.lua). */
#define CACHE_OWN_MARK_LEN 41

struct cache_item {
	const char *key;        /* in */
	int mode;               /* in: enum cache_mode */
	long max_bytes;         /* in: a larger value is CACHE_BAD; <= 0: any */
	/* in, for a key of ferry's own (cache_own_key) only: the SHA-1 (hex)
	 * of the document of the job naming it. The key is read only for the
	 * job its mark names (else CACHE_BAD and foreign), and its value is
	 * handed on without the mark. NULL for any other key. */
	const char *owner;
	int state;              /* out: enum cache_state */
	bool foreign;           /* out: a key of ferry's own written for
	                         * another job (CACHE_BAD) */
	/* out, malloc'd: the value as JSON (a string as a JSON string, a hash
	 * as an object of strings, a list as an array of strings), and for
	 * CACHE_ROWS {"data":<rows>}: a string's own text (JSON rows), or
	 * the hash's object (one row); a list gives no rows (CACHE_BAD). */
	char *json;
	size_t json_len;
	char *rows;
	size_t rows_len;
	char why[200];          /* CACHE_BAD: what is wrong */
};

/* Read every item. Returns 0, or -1 when the connection failed (then
 * nothing is decided; the items may hold partial results to free). */
int cache_read(redisContext *c, struct cache_item *items, int n);
void cache_item_free(struct cache_item *it);

/* Is key one of ferry's own in the queue's cache space
 * "PREFIX:{QUEUE}:cache:<16 hex digits>.<n>" (own_group in
 * src/redis/lua/common.lua)? */
bool cache_own_key(const char *key, const char *prefix, const char *queue);

/* The trust boundary of cache keys (doc/design.md, 3.1 and 3.8): a
 * job's cache_key may name only the queue's own cache space
 * prefix:{q}:cache:, or a key outside prefix: that starts with one of the
 * queue's cache_key_prefixes. Any other key (another application's, or
 * one of ferry's own) is never read, deleted or made persistent. */
bool cache_key_allowed(const char *key, const char *prefix,
    const struct queue_config *q);
/* Why a job naming `key` is dead-lettered: names the key (cut to at most
 * 64 bytes at a character boundary, control characters as '?'), the
 * queue's cache space and the config key that widens it. */
void cache_key_refusal(char *buf, size_t size, const char *key,
    const char *prefix, const char *queue);

/* A worker's batch: give every valid job with a cache_key its data
 * (j->cache, j->rows) or mark it invalid (CACHE_MISSING_REASON and
 * j->cache_missing when the key is gone). A job whose key is not
 * cache_key_allowed is invalid with cache_key_refusal's reason and loses
 * its cache_key (j->cache_key = NULL), so that settling it can never
 * touch that key; so does a job naming a key of ferry's own that another
 * job wrote (its mark names another document). mode: what the handler
 * needs. -1 when the connection failed. */
int cache_load(redisContext *c, struct job *jobs, int n, const char *prefix,
    const struct queue_config *q, enum cache_mode mode);

#endif
