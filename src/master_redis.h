/* master_redis.h - heartbeat, reclaim, reaper and promotion: the master's
 * asynchronous Redis work. */
#ifndef FERRY_MASTER_REDIS_H
#define FERRY_MASTER_REDIS_H

#include <stdbool.h>
#include <sys/types.h>

#include "config.h"

struct master;

void master_redis_start(struct master *m);
/* Hand back the processing list of worker `pid` of queue q; `bump` adds a
 * recovery to each job (the worker died; not when we killed it to stop). */
void master_redis_reclaim(struct master *m, const struct queue_config *q,
    pid_t pid, bool bump);
void master_redis_finish(struct master *m);

#endif
