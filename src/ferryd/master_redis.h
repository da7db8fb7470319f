/* master_redis.h - heartbeat, reclaim, reaper and promotion: the master's
 * asynchronous Redis work, on a connection other modules may use too. */
#ifndef FERRY_MASTER_REDIS_H
#define FERRY_MASTER_REDIS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "config.h"

struct master;

void master_redis_start(struct master *m);
/* Hand back the processing lists of worker `pid` of queue q (lanes: how
 * many it had, 2 with pipeline; busy: the scoreboard's lanes_busy). When
 * it `died` (not a clean or fatal exit, nor killed by us to stop), its
 * jobs count as recovered, and those of a busy lane get one recovery
 * more (doc/design.md, R14, R23). */
void master_redis_reclaim(struct master *m, const struct queue_config *q,
    pid_t pid, int lanes, int busy, bool died);
void master_redis_finish(struct master *m);

/* An asynchronous command on the master's connection, for other modules
 * (metrics.c): fn gets the reply, which lives only during the call, or
 * NULL when the connection was lost. -1 (fn never called) when Redis is
 * not connected now. */
struct redisReply;
typedef void master_redis_fn(struct master *m, struct redisReply *reply,
    void *priv);
/* queue: the link that serves it (redis_cluster), NULL: the first one. */
int master_redis_command(struct master *m, const char *queue,
    master_redis_fn *fn, void *priv, int argc, const char **argv);
/* The same with the arguments' lengths (binary-safe: dead entries). */
int master_redis_commandv(struct master *m, const char *queue,
    master_redis_fn *fn, void *priv, int argc, const char **argv,
    const size_t *lens);
/* Every link connected and answering. */
bool master_redis_up(const struct master *m);
/* Every connection that is down and waiting out its backoff connects now
 * (a worker has just reached Redis). */
void master_redis_retry_now(struct master *m);
/* HOST:PORT (or socket) of the Redis the master talks to or tries. */
const char *master_redis_address(const struct master *m);
/* The sentinels announced a new primary at addr (HOST:PORT): drop the
 * connection unless it is to addr already; the reconnection asks them. */
void master_redis_switched(struct master *m, const char *addr);

#endif
