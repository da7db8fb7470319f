/* master_int.h - the master's state, shared by the master*.c files only
 * (master.c runs the loop and the workers; master_reload.c, master_health.c,
 * master_redis.c, master_link.c, master_sentinel.c, master_memory.c and
 * master_control.c work on it). Everything else sees the opaque struct
 * master of master.h and the functions of master_control.h. */
#ifndef FERRY_MASTER_INT_H
#define FERRY_MASTER_INT_H

#include <ev.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "config.h"
#include "exit_codes.h"   /* FERRY_EXIT_*: what a worker exits with */
#include "master.h"
#include "master_id.h"
#include "scoreboard.h"

#define MASTER_SCOREBOARD_SLOTS 1024

struct master_queue;

/* One worker position of a queue; lives across restarts of its process. */
struct master_worker {
	struct master_queue *queue;
	int number;              /* 1.. within its queue, for logs */
	int sb_index;            /* scoreboard slot, -1 when no process */
	pid_t pid;               /* 0 when not running */
	int64_t started_ms;
	int streak;              /* quick deaths in a row */
	int restarts;
	bool retiring;           /* told to finish; not restarted */
	bool fatal;              /* exited FERRY_EXIT_FATAL; waits for reload */
	int64_t term_sent_ms;    /* hung or recycled: SIGTERM sent at */
	ev_timer restart_timer;
	struct master_worker *next;
};

struct master_queue {
	struct queue_config cfg;  /* own copy: outlives config reloads */
	int target;               /* workers wanted (config, TTIN/TTOU) */
	bool removed;             /* gone from the config: retire, then free */
	bool paused;              /* control `pause`: its workers stop fetching */
	bool beaten;              /* a heartbeat of ours went in (master_redis.c) */
	struct scoreboard_totals totals;   /* of its dead worker processes */
	struct master_worker *workers;
	struct master_queue *next;
};

enum master_phase {
	MASTER_RUNNING,
	MASTER_STOPPING,          /* TERM/INT: workers finish their batch */
	MASTER_QUITTING,          /* QUIT: workers killed now */
};

struct control;
struct metrics;
struct master_redis;
struct master_sentinel;

struct master {
	struct ev_loop *loop;
	struct ferry_config *cfg;
	struct scoreboard sb;
	struct master_queue *queues;
	enum master_phase phase;
	int64_t stop_deadline_ms;
	ev_signal signals[9];
	ev_child child;
	ev_timer tick;
	int exit_code;
	bool killing;             /* workers die because we stop: no bump */
	char master_id[MASTER_ID_MAX];  /* host:pid:8hex, names us in Redis */
	char master_token[MASTER_TOKEN_MAX]; /* in our heartbeat entry */
	struct master_redis *redis;
	struct master_sentinel *sentinel;  /* redis_sentinels: +switch-master */
	struct control *control;  /* NULL when control_socket is empty */
	struct master_http http;  /* server NULL: metrics_listen is empty */
	struct metrics *metrics;  /* the Redis figures behind metrics */
	int64_t started_ms;
	unsigned redis_reached;   /* the scoreboard's, at the last tick */
};

/* A graceful stop (as TERM) that makes the master exit with exit_code:
 * for errors found while running (master_redis.c: our id is taken). */
void master_stop(struct master *m, int exit_code);

/* master.c, used by master_reload.c */
void master_reconcile(struct master *m, struct master_queue *mq);
struct master_queue *master_queue_new(struct master *m,
    const struct queue_config *qc);
void master_queue_set_config(struct master_queue *mq,
    const struct queue_config *qc);
void master_retire(struct master *m, struct master_worker *w);
int master_live_workers(const struct master_queue *mq);
/* The queue of that name still in the config, or NULL. */
struct master_queue *master_find_queue(struct master *m, const char *name);

/* master_health.c: stop a worker hung over job_timeout, recycle one over
 * max_worker_rss_mb (checked when check_rss), kill one that outlived its
 * SIGTERM by kill_grace_ms. */
void master_health_check(struct master *m, struct master_worker *w,
    int64_t now, bool check_rss);
/* master_health.c: a worker (re)connected to Redis since the last tick,
 * while the master's own connection is down: it tries again now, instead
 * of waiting out its backoff (up to 5 s). */
void master_health_redis(struct master *m);

/* master_reload.c: read the file once into a fresh config. With an error
 * in it, -1 and every message in errs (the caller frees them, and says
 * them: master_reload_log_errors), the old config still running; else 0,
 * the fresh config applied. */
int master_reload(struct master *m, struct config_errors *errs);
void master_reload_log_errors(const char *path,
    const struct config_errors *errs);

#endif
