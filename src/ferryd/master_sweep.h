/* master_sweep.h - the master's sweep of cache keys (sweep.lua): keys of a
 * queue's cache space that no live job names get the cache TTL; protected
 * keys that disappeared are counted and logged; protected keys given a TTL
 * again are made persistent. In bounded steps on the master's loop. */
#ifndef FERRY_MASTER_SWEEP_H
#define FERRY_MASTER_SWEEP_H

struct master;

/* Keys handed to sweep.lua per step (one SCAN or HSCAN COUNT). */
#define MASTER_SWEEP_COUNT 100
/* One step per queue this often: at most MASTER_SWEEP_COUNT keys per
 * step, alternately of each pass. */
#define MASTER_SWEEP_STEP_S 0.2
/* A pass that reached its end starts again this much later. */
#define MASTER_SWEEP_PAUSE_S 5.0

void master_sweep_start(struct master *m);
void master_sweep_stop(struct master *m);

#endif
