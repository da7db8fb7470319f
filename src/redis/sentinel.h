/* sentinel.h - where Redis Sentinel says the primary is (redis_sentinels,
 * redis_sentinel_master, redis_sentinel_password). Synchronous, for the
 * workers, ferryctl and the master's (re)connection. */
#ifndef FERRY_SENTINEL_H
#define FERRY_SENTINEL_H

#include <hiredis/hiredis.h>
#include <stddef.h>

#include "config.h"

/* How many sentinels redis_sentinels names (0: no Sentinel). */
int sentinel_count(const struct ferry_config *cfg);
/* Sentinel i (from 0) of the list; -1 when there is none. */
int sentinel_address(const struct ferry_config *cfg, int i, char *host,
    size_t hostsize, int *port);
/* Ask the sentinels in turn (the one that answered last first, each
 * within timeout_ms) for the address of redis_sentinel_master. 0 with
 * host and port, or -1 with what every sentinel said in err. */
int sentinel_find_primary(const struct ferry_config *cfg, long timeout_ms,
    char *host, size_t hostsize, int *port, char *err, size_t errsize);
/* The address the last answer named is not a primary (ROLE): ask the next
 * sentinel first from now on. */
void sentinel_distrust(const struct ferry_config *cfg);
/* The index of the sentinel asked first. */
int sentinel_current(void);

#endif
