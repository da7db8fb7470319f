/* cache.h - the data of jobs that name a cache key (DESIGN.md "Cache
 * lifecycle and memory"): read a batch's keys in two pipelined round trips
 * (TYPE, then GET / HGETALL / LRANGE) and turn each value into JSON. */
#ifndef FERRY_CACHE_H
#define FERRY_CACHE_H

#include <hiredis/hiredis.h>
#include <stdbool.h>
#include <stddef.h>

#include "job.h"

#define CACHE_MISSING_REASON "cache key expired or evicted"

enum cache_mode {
	CACHE_EXISTS,           /* only whether the key is there */
	CACHE_JSON,             /* the value as JSON */
	CACHE_ROWS,             /* ... and the rows for the postgres sink */
};

enum cache_state { CACHE_FOUND, CACHE_GONE, CACHE_BAD };

struct cache_item {
	const char *key;        /* in */
	int mode;               /* in: enum cache_mode */
	long max_bytes;         /* in: a larger value is CACHE_BAD; <= 0: any */
	int state;              /* out: enum cache_state */
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

/* True for a key under `prefix`: that is outside prefix:{queue}:cache: */
bool cache_key_foreign(const char *key, const char *prefix,
    const char *queue);

/* A worker's batch: give every valid job with a cache_key its data
 * (j->cache, j->rows) or mark it invalid (CACHE_MISSING_REASON and
 * j->cache_missing when the key is gone). A key under `prefix`: that is
 * not in the queue's own cache space (prefix:{queue}:cache:) is refused:
 * ferry's own keys must never be read or deleted as cache. mode: what the
 * handler needs. -1 when the connection failed. */
int cache_load(redisContext *c, struct job *jobs, int n, const char *prefix,
    const char *queue, enum cache_mode mode, long max_bytes);

#endif
