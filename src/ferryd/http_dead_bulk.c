/* http_dead_bulk.c - POST /api/dead/replay-reason and /purge-reason
 * (?queue=Q&reason=R): every dead entry of queue Q whose reason is R,
 * replayed (dead_retry.lua) or purged (LREM and the job's cache key), the
 * oldest first, as `ferryctl dead retry|purge --all` walks the list: in
 * chunks from the oldest end, counted from there (an entry that dies
 * meanwhile goes in at the newest end and moves nothing), and only as many
 * entries as the list held at the start, so that a job that dies again is
 * not replayed twice. Every command goes over the master's asynchronous
 * connection; the request waits for the last answer. Entries of other
 * reasons, and malformed ones (which cannot be replayed), stay. */
#include <hiredis/hiredis.h>
#include <jansson.h>
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http.h"
#include "http_dead.h"
#include "master_control.h"
#include "queue.h"
#include "util.h"

#define BULK_CHUNK 100
#define REASON_MAX 512

struct bulk {
	struct http_req *r;
	bool replay;
	char queue[CONFIG_QUEUE_NAME_MAX + 1];
	struct queue_keys k;
	char reason[REASON_MAX + 1];
	long long total;          /* LLEN at the start: -1 before it */
	long long seen, kept;     /* entries looked at; left in the list */
	long long acted, refused;
	int outstanding;          /* actions of this chunk still due */
	bool failed;
	char why[256];
};

/* One action's reply: its bulk, and the cache key a purge deletes. */
struct bulk_act {
	struct bulk *b;
	char *cache_key;
};

static void next_chunk(struct master *m, struct bulk *b);

static void
finish(struct bulk *b)
{
	if (b->failed)
		http_req_error(b->r, MHD_HTTP_BAD_GATEWAY, "%s (%lld done before "
		    "it)", b->why, b->acted);
	else
		http_req_json(b->r, MHD_HTTP_OK, json_pack("{s:s, s:s, s:I, s:I}",
		    "queue", b->queue, "reason", b->reason, b->replay ?
		    "replayed" : "purged", (json_int_t)b->acted, "refused",
		    (json_int_t)b->refused));
	free(b);
}

static void
fail(struct bulk *b, const char *what)
{
	b->failed = true;
	snprintf(b->why, sizeof(b->why), "%s", what);
}

static void
on_act(struct master *m, redisReply *rep, void *priv)
{
	struct bulk_act *a = priv;
	struct bulk *b = a->b;

	if (rep == NULL) {
		fail(b, "the connection to redis was lost");
	} else if (rep->type == REDIS_REPLY_ERROR &&
	    strncmp(rep->str, "BADENTRY ", 9) == 0) {
		b->refused++;
		b->kept++;
	} else if (rep->type == REDIS_REPLY_ERROR) {
		fail(b, rep->str);
	} else if (rep->type == REDIS_REPLY_INTEGER && rep->integer > 0) {
		b->acted++;
	}
	free(a->cache_key);
	free(a);
	if (--b->outstanding == 0)
		next_chunk(m, b);
}

/* An entry of the chunk: act on it when its reason is b's. */
static void
consider(struct master *m, struct bulk *b, const redisReply *el)
{
	struct dead_entry e;
	char *reason;

	b->seen++;
	dead_entry_read(&e, el->str, el->len);
	reason = e.ok ? wrapper_str_text(e.w.reason) : NULL;
	if (reason == NULL || strcmp(reason, b->reason) != 0) {
		b->kept++;
	} else {
		struct bulk_act *a = xcalloc(1, sizeof(*a));
		const struct queue_config *q = config_find_queue(
		    master_control_config(m), b->queue);
		a->b = b;
		if (!b->replay && q != NULL)
			a->cache_key = http_dead_cache_key(m, q, &e);
		b->outstanding++;
		if (http_dead_act(m, b->queue, b->replay, -1, el->str, el->len,
		    a->cache_key, on_act, a) == -1) {
			b->outstanding--;
			free(a->cache_key);
			free(a);
			fail(b, "redis is not connected now");
		}
	}
	free(reason);
	dead_entry_free(&e);
}

static void
on_chunk(struct master *m, redisReply *rep, void *priv)
{
	struct bulk *b = priv;

	if (rep == NULL || rep->type != REDIS_REPLY_ARRAY) {
		fail(b, rep == NULL ? "the connection to redis was lost" :
		    rep->type == REDIS_REPLY_ERROR ? rep->str : "LRANGE: not an "
		    "array");
		finish(b);
		return;
	}
	if (rep->elements == 0)
		b->total = b->seen;       /* shorter than it was: done */
	b->outstanding = 1;           /* held until every action is sent */
	for (size_t i = rep->elements; i-- > 0 && !b->failed; )
		consider(m, b, rep->element[i]);     /* the oldest first */
	if (--b->outstanding == 0)
		next_chunk(m, b);
}

static void
on_llen(struct master *m, redisReply *rep, void *priv)
{
	struct bulk *b = priv;

	if (rep == NULL || rep->type != REDIS_REPLY_INTEGER) {
		fail(b, rep == NULL ? "the connection to redis was lost" :
		    rep->type == REDIS_REPLY_ERROR ? rep->str : "LLEN: not an "
		    "integer");
		finish(b);
		return;
	}
	b->total = rep->integer;
	next_chunk(m, b);
}

/* The next chunk, counted from the oldest end past what stays. */
static void
next_chunk(struct master *m, struct bulk *b)
{
	char from[24], to[24];

	if (b->failed || b->seen >= b->total) {
		finish(b);
		return;
	}
	long long n = b->total - b->seen < BULK_CHUNK ? b->total - b->seen :
	    BULK_CHUNK;
	snprintf(from, sizeof(from), "%lld", -b->kept - n);
	snprintf(to, sizeof(to), "%lld", -b->kept - 1);
	const char *argv[] = { "LRANGE", b->k.dead, from, to };
	if (master_redis_command(m, b->queue, on_chunk, b, 4, argv) == -1) {
		fail(b, "redis is not connected now");
		finish(b);
	}
}

static void
bulk_start(struct http_req *r, bool replay)
{
	struct master *m = http_req_master(r);
	const char *name = http_req_arg(r, "queue");
	const char *reason = http_req_arg(r, "reason");
	const struct queue_config *q = name != NULL ?
	    config_find_queue(master_control_config(m), name) : NULL;

	if (q == NULL) {
		http_req_error(r, MHD_HTTP_NOT_FOUND, "no queue \"%s\" in the "
		    "configuration", name != NULL ? name : "");
		return;
	}
	if (reason == NULL || *reason == '\0' || strlen(reason) > REASON_MAX) {
		http_req_error(r, MHD_HTTP_BAD_REQUEST, "reason: missing (the "
		    "reason of the entries, as /api/dead lists it)");
		return;
	}
	struct bulk *b = xcalloc(1, sizeof(*b));
	b->r = r;
	b->replay = replay;
	b->total = -1;
	snprintf(b->queue, sizeof(b->queue), "%s", q->name);
	snprintf(b->reason, sizeof(b->reason), "%s", reason);
	queue_keys_init(&b->k, master_control_config(m)->redis_prefix, q->name);
	const char *argv[] = { "LLEN", b->k.dead };
	if (master_redis_command(m, b->queue, on_llen, b, 2, argv) == -1) {
		free(b);
		http_req_error(r, MHD_HTTP_SERVICE_UNAVAILABLE, "redis is not "
		    "connected now (the master reconnects; try again)");
	}
}

bool
http_dead_bulk_post(struct http_req *r, const char *url)
{
	if (strcmp(url, "/api/dead/replay-reason") == 0)
		bulk_start(r, true);
	else if (strcmp(url, "/api/dead/purge-reason") == 0)
		bulk_start(r, false);
	else
		return false;
	return true;
}
