/* cluster.h - Redis Cluster: the hash slot of a key, and which node serves
 * a queue's slot now (redis_cluster). A queue's keys all carry the hash
 * tag {QUEUE}, so one queue lives on one node. */
#ifndef FERRY_CLUSTER_H
#define FERRY_CLUSTER_H

#include <stddef.h>

#include "config.h"

#define CLUSTER_SLOTS 16384

/* The hash slot of key (len bytes), as Redis computes it: CRC16 (XMODEM)
 * of the hash tag's content when the key has a non-empty {...}, else of
 * the whole key, modulo 16384. */
int cluster_slot_of_key(const char *key, size_t len);
/* The slot of queue q's keys (prefix:{q}:...). */
int cluster_slot_of_queue(const char *queue);
/* Ask the seed nodes of redis_cluster in turn (the one that answered last
 * first, each within timeout_ms) for CLUSTER SLOTS: 0 with the address of
 * the primary that serves queue's slot, or -1 with why not in err. queue
 * NULL or "": the first queue of cfg. */
int cluster_find_node(const struct ferry_config *cfg, const char *queue,
    long timeout_ms, char *host, size_t hostsize, int *port, char *err,
    size_t errsize);

#endif
