/* consumer.h - the fetch / handle / settle cycle of one worker process. */
#ifndef FERRY_CONSUMER_H
#define FERRY_CONSUMER_H

#include <hiredis/hiredis.h>
#include <stdbool.h>
#include <stdint.h>

#include "config.h"
#include "queue.h"
#include "scoreboard.h"

#define CONSUMER_ID_MAX 128

struct handler_ops;
struct batch;

/* One processing list of a worker, ferry:{q}:proc:<id>, and the batch it
 * holds. A worker has one; with pipeline = yes two, each holding a batch
 * (consumer_lanes.c), the second's id the worker's plus
 * CONSUMER_LANE2_SUFFIX. */
#define CONSUMER_LANE2_SUFFIX ".lane2"
struct consumer_lane {
	char id[CONSUMER_ID_MAX + 8];
	char proc[QUEUE_KEY_MAX + CONSUMER_ID_MAX + 8];
	char batch_key[CONSUMER_ID_MAX + 56]; /* key of the batch in hand */
	bool resume;                    /* read the list back (reconnected) */
	int64_t started_ms;             /* when its batch began to run */
	struct batch *b;
};

struct consumer {
	/* set by the caller */
	const struct ferry_config *cfg;
	const struct queue_config *q;
	struct scoreboard_slot *slot;
	_Atomic int *quiet;             /* the scoreboard's TSTP flag */
	_Atomic unsigned *switches;     /* ... and its redis_switches */
	_Atomic unsigned *reached;      /* ... and its redis_reached */
	bool (*should_stop)(void);      /* SIGTERM or master gone */
	/* told each state it enters (SB_*; jobs: the batch's when SB_BUSY),
	 * only when it changes: the process title. May be NULL. */
	void (*on_state)(int state, int jobs);
	char worker_id[CONSUMER_ID_MAX];
	char master_id[CONSUMER_ID_MAX];

	/* private */
	struct queue_keys keys;
	struct consumer_lane lanes[2];
	int nlanes;
	redisContext *redis;
	bool outage;                    /* logged once per outage */
	bool auth_refused;              /* ... and a refused AUTH once too */
	int64_t outage_since;
	unsigned switches_seen;         /* *switches when we connected */
	char last_addr[300];            /* the Redis we talked to last */
	bool replicas_short;            /* WAIT fell short: said once */
	bool evicted;                   /* handed back as dead: exit */
	long batch_seq;
	char nonce[17];                 /* random, per process: see consumer.c */
	bool ids_held;                  /* the queue holds idempotency ids (the
	                                 * last fetch said): settles name ids */
	long jobs_done;
	char last_error[256];           /* the script error logged last */
	long error_delay_ms;            /* backoff after a script error */
	long long buried;               /* dead-lettered by the last settle */
	int64_t archive_ms;             /* last dead_max check */
	const struct handler_ops *handler;  /* the queue's (handler.h) */
	void *handler_state;            /* what its open() returned */
	const char *exit_after_commit;  /* test hook: consumer_handler.c */
	const char *freeze_after_fetch; /* test hook: consumer.c */
	char handler_err[512];          /* the handler's last failure */
	int told_state, told_jobs;      /* what on_state heard last */
	int busy_jobs;                  /* the batch in hand */
	int state_before_wait;          /* restored when a wait for redis or
	                                 * replicas ends */
};

enum consumer_exit {
	CONSUMER_EXIT_OK = 0,       /* stopped, max_jobs_per_worker, handed
	                             * back: exit 0 */
	CONSUMER_EXIT_UNSETTLED = 1, /* a batch could not be settled for
	                             * another reason: exit 1 */
	CONSUMER_EXIT_FATAL,        /* the handler cannot go on until a
	                             * reload: exit FERRY_EXIT_FATAL */
};

/* Loop until should_stop() or max_jobs_per_worker; returns how the worker
 * should exit. */
enum consumer_exit consumer_run(struct consumer *c);

#endif
