/* metrics.h - what the master knows about its queues and workers (its
 * scoreboard, and Redis figures it refreshes every second), written out as
 * the control socket's `status` text or in Prometheus text format. */
#ifndef FERRY_METRICS_H
#define FERRY_METRICS_H

#include <stdint.h>

#include "control.h"
#include "scoreboard.h"

struct master;

/* Counts of a queue's dead worker processes: a scoreboard slot is reused
 * by the next process, so its figures are added here when its worker dies
 * and the metrics stay monotonic across restarts. */
struct metrics_totals {
	int64_t jobs_done;
	int64_t restarts;
	int64_t batches;
	int64_t batch_sum_ms;
	int64_t buckets[SCOREBOARD_BUCKETS];
	int64_t errors[SB_ERR_CLASSES];
};

void metrics_totals_add_slot(struct metrics_totals *t,
    struct scoreboard_slot *slot);

/* What Redis said about a queue at the last refresh: list lengths on every
 * host, and the counters of its stats hash. */
struct metrics_figures {
	int64_t ready, requeued, processing, delayed, dead;
	int64_t enqueued, done, retried, deadlettered, recovered, cache_missing;
	int64_t updated_ms;       /* CLOCK_MONOTONIC of the refresh */
};

/* Refresh the figures of every queue and INFO memory every second, over
 * master_redis.c's connection, never waiting. Stop after
 * master_redis_finish() (which hands the last callbacks a NULL reply). */
void metrics_start(struct master *m);
void metrics_stop(struct master *m);
/* `status`: one logfmt line for ferryd, redis, each queue, each worker. */
void metrics_status(struct master *m, struct control_out *o);
/* `metrics`: Prometheus text format 0.0.4. */
void metrics_prometheus(struct master *m, struct control_out *o);

#endif
