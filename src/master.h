/* master.h - the supervising process: one libev loop that keeps the right
 * number of workers alive for every queue and acts on signals. */
#ifndef FERRY_MASTER_H
#define FERRY_MASTER_H

#include <ev.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "config.h"
#include "exit_codes.h"   /* FERRY_EXIT_*: what a worker exits with */
#include "master_id.h"
#include "master_redis.h"
#include "metrics.h"
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
	struct metrics_totals totals;   /* of its dead worker processes */
	struct master_worker *workers;
	struct master_queue *next;
};

enum master_phase {
	MASTER_RUNNING,
	MASTER_STOPPING,          /* TERM/INT: workers finish their batch */
	MASTER_QUITTING,          /* QUIT: workers killed now */
};

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
	char master_token[MASTER_TOKEN_MAX]; /* our heartbeat key's value */
	struct master_redis *redis;
	struct master_sentinel *sentinel;  /* redis_sentinels: +switch-master */
	struct control *control;  /* NULL when control_socket is empty */
	struct metrics_http *http; /* NULL when metrics_listen is empty */
	struct metrics *metrics;  /* the Redis figures behind metrics */
	int64_t started_ms;
};

/* Run until stopped; returns the process exit status. Takes ownership of
 * cfg (heap-allocated), control and http (control_open's and
 * metrics_http_open's, either NULL); ident names this start in Redis
 * (claimed by master_ident_claim). */
int master_run(struct ferry_config *cfg, struct control *control,
    struct metrics_http *http, const struct master_ident *ident);

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

/* The signals the master acts on (main blocks them until the loop runs). */
void master_signal_set(sigset_t *set);

/* master_reload.c */
void master_reload(struct master *m);

#endif
