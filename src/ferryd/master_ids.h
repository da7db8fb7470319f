/* master_ids.h - each queue's idempotency, kept by its masters (ids.lua):
 * the queue's idempotency_window published where producers read it, the
 * ids of jobs done longer ago than the window forgotten, in bounded steps
 * on the master's loop. */
#ifndef FERRY_MASTER_IDS_H
#define FERRY_MASTER_IDS_H

struct master;

/* One step per queue this often. */
#define MASTER_IDS_EVERY_S 1.0
/* Ids forgotten per call at most; a call that forgot this many is
 * followed by another at once. */
#define MASTER_IDS_STEP 1000

void master_ids_start(struct master *m);
void master_ids_stop(struct master *m);

#endif
