/* scoreboard.h - shared memory the master maps before forking, one slot per
 * worker. Workers write their own slot (state, batch start, jobs done, last
 * error, batch durations, errors by class); the master reads every slot to
 * find hung or bloated workers and to report status and metrics, and writes
 * the header's `quiet` flag (TSTP/CONT) and each slot's `paused` flag. */
#ifndef FERRY_SCOREBOARD_H
#define FERRY_SCOREBOARD_H

#include <stdatomic.h>
#include <stdint.h>
#include <sys/types.h>

#define SCOREBOARD_ERROR_MAX 160
/* Batch duration histogram: upper bounds in ms, then one +Inf bucket. */
#define SCOREBOARD_BUCKETS 14
extern const int64_t scoreboard_bucket_ms[SCOREBOARD_BUCKETS - 1];

/* What kind of trouble scoreboard_set_error() was told about. */
enum scoreboard_error_class {
	SB_ERR_REDIS,    /* Redis unreachable, or a command or script failed */
	SB_ERR_POSTGRES, /* PostgreSQL unreachable or failing */
	SB_ERR_SCHEMA,   /* table, columns or ferry_batches missing */
	SB_ERR_HANDLER,  /* exec handler could not run, crashed, spoke nonsense */
	SB_ERR_OTHER,
	SB_ERR_CLASSES,
};

enum scoreboard_state {
	SB_FREE = 0,     /* slot unused */
	SB_STARTING,     /* forked, not yet in its loop */
	SB_IDLE,         /* waiting for jobs */
	SB_BUSY,         /* running a batch since batch_start_ms */
	SB_STOPPING,     /* told to stop, finishing its batch */
	SB_PAUSED,       /* not fetching: quiet (TSTP) or its queue paused */
	SB_WAIT_POSTGRES, /* its batch waits for PostgreSQL to come back */
	SB_WAIT_REDIS,   /* Redis unreachable, loading or not the primary */
	SB_WAIT_REPLICAS, /* its batch waits for redis_wait_replicas */
	SB_STATES,
};

/* The longest a live worker's fetch can take: its Redis requests time out
 * after 10 s (CONSUMER_TIMEOUT_MS), and 2 s spare. */
#define SB_FETCH_LIMIT_MS 12000

struct scoreboard_slot {
	_Atomic int pid;
	_Atomic int state;
	_Atomic int64_t batch_start_ms; /* CLOCK_MONOTONIC, 0 when idle */
	_Atomic int64_t jobs_done;
	_Atomic int64_t seen_ms;        /* last loop turn of the worker */
	/* CLOCK_MONOTONIC: a request that may move jobs into this worker's
	 * lists (fetch.lua, BLMOVE: then the end of its block) or read them
	 * back went to Redis then, and the batch clock has not taken over;
	 * 0 otherwise. The master holds it to job_timeout, but never to
	 * less than SB_FETCH_LIMIT_MS: a worker frozen after Redis moved
	 * the jobs, before its batch clock starts, would hold them forever,
	 * and a live one waiting on a stalled Redis must not be killed. */
	_Atomic int64_t fetch_start_ms;
	_Atomic unsigned error_seq;     /* odd while last_error is written */
	char last_error[SCOREBOARD_ERROR_MAX];
	_Atomic int paused;             /* set by the master: stop fetching */
	_Atomic int lanes;              /* set by the worker before it registers
	                                 * them: its processing lists (1, or 2
	                                 * with pipeline = yes) */
	_Atomic int lanes_busy;         /* bit i: lane i's batch is being
	                                 * fetched and checked, or the handler
	                                 * may be running it (until its
	                                 * result): only those are given a
	                                 * recovery when the worker dies; not
	                                 * a batch parked ready behind the one
	                                 * in flight, waiting for a server (an
	                                 * outage, Redis, the replicas) or
	                                 * decided, being settled */
	_Atomic int64_t batches;        /* settled batches, and their time */
	_Atomic int64_t batch_sum_ms;
	_Atomic int64_t batch_buckets[SCOREBOARD_BUCKETS]; /* not cumulative */
	_Atomic int64_t errors[SB_ERR_CLASSES];
};

struct scoreboard_header {
	_Atomic int quiet;              /* 1: workers stop fetching */
	/* bumped by the master on the sentinels' +switch-master: workers
	 * reconnect (to the new primary) before their next batch */
	_Atomic unsigned redis_switches;
	/* bumped by a worker each time it has (re)connected to Redis: the
	 * master, its own connection down and waiting out its backoff, tries
	 * again at once (master_health_redis) */
	_Atomic unsigned redis_reached;
	int nslots;
};

struct scoreboard {
	struct scoreboard_header *header;
	struct scoreboard_slot *slots;
	size_t size;
};

/* Counts of a queue's dead worker processes: a slot is reused by the next
 * process, so its figures are added here when its worker dies, and the
 * metrics (live slots + these) stay monotonic across restarts. */
struct scoreboard_totals {
	int64_t jobs_done;
	int64_t restarts;
	int64_t batches;
	int64_t batch_sum_ms;
	int64_t buckets[SCOREBOARD_BUCKETS];
	int64_t errors[SB_ERR_CLASSES];
};

/* Add the slot's counters to t. */
void scoreboard_totals_add_slot(struct scoreboard_totals *t,
    struct scoreboard_slot *slot);

int scoreboard_create(struct scoreboard *sb, int nslots);
void scoreboard_destroy(struct scoreboard *sb);
/* A free slot, marked SB_STARTING, or -1 when all are taken. */
int scoreboard_acquire(struct scoreboard *sb);
void scoreboard_release(struct scoreboard *sb, int index);
struct scoreboard_slot *scoreboard_slot(struct scoreboard *sb, int index);

void scoreboard_set_state(struct scoreboard_slot *slot, int state);
/* An SB_WAIT_* state: not hung, whatever it holds (no batch age). */
void scoreboard_set_waiting(struct scoreboard_slot *slot, int state);
void scoreboard_begin_batch(struct scoreboard_slot *slot, int64_t now_ms);
/* A batch of `jobs` settled (0: not settled, or waiting for the sink);
 * a settled batch's duration goes into the histogram. */
void scoreboard_end_batch(struct scoreboard_slot *slot, long jobs);
/* Record a batch duration (end_batch does it). */
void scoreboard_record_batch(struct scoreboard_slot *slot, int64_t ms);
/* Keep msg as last_error and count it in its class. */
void scoreboard_set_error(struct scoreboard_slot *slot, const char *msg);
enum scoreboard_error_class scoreboard_error_class(const char *msg);
const char *scoreboard_error_class_name(int cls);
/* An outage is over (a batch committed): last_error is no longer true
 * (the counts stay). */
void scoreboard_clear_error(struct scoreboard_slot *slot);
/* Copy last_error consistently (retries while the worker writes it). */
void scoreboard_get_error(struct scoreboard_slot *slot, char *buf, size_t size);
const char *scoreboard_state_name(int state);

#endif
