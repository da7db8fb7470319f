/* master_memory.h - Redis eviction policy, persistence and memory use:
 * checked synchronously before ferryd starts, then every
 * memory_check_interval by the master without ever blocking. */
#ifndef FERRY_MASTER_MEMORY_H
#define FERRY_MASTER_MEMORY_H

#include "config.h"

struct master;

/* The start check: logs warnings; -1 (after saying why on stderr and in
 * the log) when ferryd must not start. An unreachable Redis is only a
 * warning: the master checks again once it answers. */
int memory_check_start(const struct ferry_config *cfg);

/* The periodic check, on its own asynchronous connection; logs only what
 * changed since the last check (or since the start check). */
void master_memory_start(struct master *m);
void master_memory_stop(struct master *m);

#endif
