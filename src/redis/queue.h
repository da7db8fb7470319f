/* queue.h - the Redis side of a queue for synchronous clients (workers and
 * ferryctl): key names, connecting, and running the embedded scripts. */
#ifndef FERRY_QUEUE_H
#define FERRY_QUEUE_H

#include <hiredis/hiredis.h>
#include <stdbool.h>
#include <stddef.h>

#include "config.h"
#include "lua_scripts.h"

#define QUEUE_KEY_MAX 160

/* The first word of an error reply from ferry's scripts (ferry_error in
 * src/redis/lua/common.lua). */
#define QUEUE_ERR_HANDED_BACK "HANDEDBACK"  /* the worker was handed back */
#define QUEUE_ERR_BAD_COUNT "BADCOUNT"      /* settle: list changed size */
#define QUEUE_ERR_BAD_ARGS "BADARGS"        /* a caller's bug */

/* Does reply r (an error) carry code? */
int queue_error_is(const redisReply *r, const char *code);
/* An error that means "this server is no longer the primary" (READONLY,
 * UNBLOCKED by a role change, MASTERDOWN): reconnect to find the new one. */
bool queue_role_changed(const redisReply *r);

struct queue_keys {
	char ready[QUEUE_KEY_MAX];      /* producers' documents */
	char requeue[QUEUE_KEY_MAX];    /* ferry's wrappers: taken first */
	char delayed[QUEUE_KEY_MAX];     /* ferry's retries (wrappers) */
	char scheduled[QUEUE_KEY_MAX];   /* producers' delayed documents */
	char dead[QUEUE_KEY_MAX];
	char stats[QUEUE_KEY_MAX];
	char owners[QUEUE_KEY_MAX];
	char bkeys[QUEUE_KEY_MAX];     /* worker id -> key of its current batch */
	/* the cache keys live jobs name, counted (src/redis/lua/common.lua,
	 * doc/formats.md) */
	char protected[QUEUE_KEY_MAX];
	char cache_prefix[QUEUE_KEY_MAX]; /* the queue's own cache space */
	char proc_prefix[QUEUE_KEY_MAX]; /* + worker id = processing list */
	char clock[QUEUE_KEY_MAX];     /* heartbeat.lua's service clock */
	char masters[QUEUE_KEY_MAX];   /* master id -> "TOKEN DEADLINE" */
	char config[QUEUE_KEY_MAX];    /* settings producers read
	                                * (idempotency_window) */
	char ids[QUEUE_KEY_MAX];       /* job id -> 0 live, -1 dead, or when
	                                * to forget it (src/redis/lua/common.lua) */
	char idsha[QUEUE_KEY_MAX];     /* job id -> the SHA-1 of the job
	                                * accepted under it (common.lua) */
};

void queue_keys_init(struct queue_keys *k, const char *prefix,
    const char *queue);
void queue_proc_key(const struct queue_keys *k, const char *worker_id,
    char *out, size_t size);

/* Each sentinel asked where the primary is gets this long (at most). */
#define QUEUE_SENTINEL_TIMEOUT_MS 500

/* Connect to the configured Redis (unix socket or host:port, or the
 * primary the sentinels name, checked with ROLE), AUTH and SELECT;
 * commands time out after timeout_ms. NULL with a message. */
redisContext *queue_connect(const struct ferry_config *cfg, long timeout_ms,
    char *err, size_t errsize);
/* The same; *refused (when not NULL) tells a refused AUTH (wrong user or
 * password: err says what to do) from a server that cannot be reached. */
redisContext *queue_connect_as(const struct ferry_config *cfg,
    long timeout_ms, bool *refused, char *err, size_t errsize);
/* The same for queue (with redis_cluster: the node that serves its slot;
 * NULL: the first queue's). */
redisContext *queue_connect_for(const struct ferry_config *cfg,
    const char *queue, long timeout_ms, bool *refused, char *err,
    size_t errsize);
/* A reply that means "these credentials do not get in" (WRONGPASS, NOPERM,
 * NOAUTH, ERR AUTH ...): an outage the operator must fix, not a bug. */
bool queue_auth_refused(const redisReply *r);
/* The message for such a reply: the address, the user, what to check. */
void queue_auth_error(const struct ferry_config *cfg, const char *reply,
    char *err, size_t errsize);
/* Describe the Redis address for messages: "127.0.0.1:6379", the socket
 * path, or with Sentinel "127.0.0.1:6380 (primary of mymaster)". */
const char *queue_address(const struct ferry_config *cfg, char *buf,
    size_t size);
/* HOST:PORT (or the socket) this process last connected to; "" before. */
const char *queue_current_address(void);

/* Run script `s` with nkeys keys followed by args: EVALSHA, and EVAL when
 * Redis does not know the script yet. Returns the reply (NULL when the
 * connection failed: see c->errstr). */
redisReply *queue_script(redisContext *c, enum lua_script s, int nkeys,
    int argc, const char **argv, const size_t *argvlen);
/* The SHA-1 of a script, as Redis names it. */
const char *queue_script_sha(enum lua_script s);

#endif
