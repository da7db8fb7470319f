/* metrics.h - what the master knows about its queues and workers (a view
 * of them with its scoreboard, and Redis figures refreshed every second),
 * written out as the control socket's `status` text or in Prometheus text
 * format. metrics.c keeps the Redis figures; metrics_text.c writes. Neither
 * sees struct master: master_control.c fills the view. */
#ifndef FERRY_METRICS_H
#define FERRY_METRICS_H

#include <ev.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "buf.h"
#include "scoreboard.h"

struct master;
struct metrics;

/* One worker position of a queue, as the master holds it. */
struct metrics_worker_view {
	const char *queue;
	int number;               /* 1.. within its queue */
	pid_t pid;                /* 0 when not running */
	int sb_index;             /* scoreboard slot, -1 when no process */
	bool retiring, fatal;
	int restarts;
};

struct metrics_queue_view {
	const char *name;
	int target;               /* workers wanted */
	bool paused;
	bool removed;             /* gone from the config, retiring */
	struct scoreboard_totals totals;   /* of its dead worker processes */
	int nworkers;
	struct metrics_worker_view *workers;
};

/* The master now; strings and sb belong to the master, valid until it
 * runs again. */
struct metrics_view {
	const char *master_id;
	const char *config_path;
	const char *redis_prefix;
	const char *phase;        /* running, stopping, quitting */
	int64_t started_ms;       /* CLOCK_MONOTONIC */
	bool redis_up;
	int memory_warn_percent, memory_refuse_percent;   /* [ferryd] */
	long heartbeat_ttl_ms;
	struct scoreboard *sb;
	int nqueues;
	struct metrics_queue_view *queues;
};

/* Fill v (master_control_view); metrics_view_free releases it. */
typedef void metrics_view_fn(struct master *m, struct metrics_view *v);
void metrics_view_free(struct metrics_view *v);

/* What Redis said about a queue at the last refresh: list lengths on every
 * host, and the counters of its stats hash. */
struct metrics_figures {
	int64_t ready, requeued, processing, delayed, scheduled, dead;
	int64_t enqueued, done, retried, deadlettered, recovered, cache_missing;
	/* memory (memory.lua, the stats hash, the protected hash): the
	 * queue's own bytes in Redis (jobs and protected cache keys), its
	 * protected cache keys and their bytes, keys the sweep gave the cache
	 * TTL (orphans), made persistent again, and found lost; whether its
	 * producers are refused now */
	int64_t bytes, protected_keys, protected_bytes;
	int64_t orphans, reprotected, protected_lost;
	int64_t refusing;         /* 1 or 0 */
	int64_t updated_ms;       /* CLOCK_MONOTONIC of the refresh */
	/* CLOCK_MONOTONIC by which the oldest job in ready had arrived (0:
	 * ready empty), from the refreshes since this master started
	 * (metrics.c: figures_arrivals) */
	int64_t ready_since_ms;
};

/* Refresh the figures of every queue of view_fn's view and INFO memory
 * every second, over master_redis.c's connection of m, never waiting.
 * Stop after master_redis_finish() (which hands the last callbacks a NULL
 * reply). */
struct metrics *metrics_start(struct ev_loop *loop, struct master *m,
    metrics_view_fn *view_fn);
void metrics_stop(struct metrics *mt);
/* The last figures of queue, or NULL before the first refresh. */
const struct metrics_figures *metrics_figures_of(const struct metrics *mt,
    const char *queue);
/* Age of the oldest job in f's ready list now, from ready_since_ms (ms;
 * 0: ready empty). */
int64_t metrics_oldest_ready_ms(const struct metrics_figures *f);
/* INFO memory's used_memory and maxmemory (-1: not said) at memory_ms,
 * 0 before the first answer. */
void metrics_memory(const struct metrics *mt, int64_t *used,
    int64_t *maxmemory, int64_t *memory_ms);
/* What Redis cannot evict (the producers' refusal's view, memory.lua, as
 * the last queue asked saw it), and INFO stats' evicted_keys; -1 before
 * the first answer. */
void metrics_eviction(const struct metrics *mt, int64_t *unevictable,
    int64_t *evicted_keys);
/* The sum of every queue's own bytes and keys at the last refresh. */
void metrics_own_bytes(const struct metrics *mt, int64_t *bytes,
    int64_t *keys);

/* metrics_text.c. `status`: one logfmt line for ferryd, redis, each queue,
 * each worker. */
void metrics_status(const struct metrics *mt, const struct metrics_view *v,
    struct buf *o);
/* `metrics`: Prometheus text format 0.0.4. */
void metrics_prometheus(const struct metrics *mt,
    const struct metrics_view *v, struct buf *o);

#endif
