/* master_sentinel.h - the master's subscription to the sentinels'
 * +switch-master (only with redis_sentinels). */
#ifndef FERRY_MASTER_SENTINEL_H
#define FERRY_MASTER_SENTINEL_H

struct master;

/* Listen to the sentinels (one at a time) from the master's loop; nothing
 * without redis_sentinels. */
void master_sentinel_start(struct master *m);
void master_sentinel_stop(struct master *m);

#endif
