/* master_series.h - the dashboard's chart data: every MASTER_SERIES_STEP_S
 * the master samples each queue's counters (done, retried, dead,
 * recovered) from the last Redis figures into a ring of 15 minutes, in
 * memory only; /api/series gives the rates from the deltas. */
#ifndef FERRY_MASTER_SERIES_H
#define FERRY_MASTER_SERIES_H

#include <jansson.h>
#include <stdint.h>

struct master;

#define MASTER_SERIES_STEP_S 5
#define MASTER_SERIES_SAMPLES (15 * 60 / MASTER_SERIES_STEP_S + 1)

/* Start sampling m's queues on its loop (after metrics_start). */
void master_series_start(struct master *m);
void master_series_stop(struct master *m);
/* {"step_s", "queues": {q: [{"time_ms", "done", "retried", "dead",
 * "recovered"}...]}}: per-second rates between consecutive samples,
 * oldest first. */
json_t *master_series_json(void);
#endif
