/* redis_replication.h - the primary's replication settings, said at start. */
#ifndef FERRY_REDIS_REPLICATION_H
#define FERRY_REDIS_REPLICATION_H

#include <hiredis/hiredis.h>

#include "config.h"

/* Log what the replicas connected to c and its min-replicas-to-write mean
 * for redis_wait_replicas and a failover (with Sentinel or WAIT only). */
void redis_replication_say(const struct ferry_config *cfg, redisContext *c);

#endif
