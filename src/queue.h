/* queue.h - the Redis side of a queue for synchronous clients (workers and
 * ferryctl): key names, connecting, and running the embedded scripts. */
#ifndef FERRY_QUEUE_H
#define FERRY_QUEUE_H

#include <hiredis/hiredis.h>
#include <stddef.h>

#include "config.h"
#include "lua_scripts.h"

#define QUEUE_KEY_MAX 160

struct queue_keys {
	char ready[QUEUE_KEY_MAX];
	char requeue[QUEUE_KEY_MAX];   /* ferry's wrappers: workers take these first */
	char delayed[QUEUE_KEY_MAX];
	char dead[QUEUE_KEY_MAX];
	char stats[QUEUE_KEY_MAX];
	char owners[QUEUE_KEY_MAX];
	char bkeys[QUEUE_KEY_MAX];     /* worker id -> key of its current batch */
	char proc_prefix[QUEUE_KEY_MAX]; /* + worker id = processing list */
};

void queue_keys_init(struct queue_keys *k, const char *prefix,
    const char *queue);
void queue_proc_key(const struct queue_keys *k, const char *worker_id,
    char *out, size_t size);
void queue_heartbeat_key(const char *prefix, const char *master_id,
    char *out, size_t size);

/* Connect to the configured Redis (unix socket or host:port), AUTH and
 * SELECT; commands time out after timeout_ms. NULL with a message. */
redisContext *queue_connect(const struct ferry_config *cfg, long timeout_ms,
    char *err, size_t errsize);
/* Describe the Redis address for messages: "127.0.0.1:6379" or the path. */
const char *queue_address(const struct ferry_config *cfg, char *buf,
    size_t size);

/* Run script `s` with nkeys keys followed by args: EVALSHA, and EVAL when
 * Redis does not know the script yet. Returns the reply (NULL when the
 * connection failed: see c->errstr). */
redisReply *queue_script(redisContext *c, enum lua_script s, int nkeys,
    int argc, const char **argv, const size_t *argvlen);
/* The SHA-1 of a script, as Redis names it. */
const char *queue_script_sha(enum lua_script s);

#endif
