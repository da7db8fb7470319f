/* consumer_int.h - what consumer.c, consumer_redis.c and consumer_handler.c
 * share (private). */
#ifndef FERRY_CONSUMER_INT_H
#define FERRY_CONSUMER_INT_H

#include <hiredis/hiredis.h>
#include <stdbool.h>

#include "consumer.h"
#include "handler.h"

#define CONSUMER_TIMEOUT_MS 10000   /* any Redis command */
_Static_assert(CONSUMER_TIMEOUT_MS < SB_FETCH_LIMIT_MS,
    "the master must not stop a worker whose fetch is still timed by hiredis");
#define CONSUMER_WAIT_S "1"         /* BLMOVE block, seconds */
#define CONSUMER_WAIT_MS 1000       /* the same, in ms */
#define CONSUMER_RETRY_MIN_MS 100
#define CONSUMER_RETRY_MAX_MS 5000
#define CONSUMER_ARCHIVE_IDLE_MS 60000
#define CONSUMER_DIED_REASON "worker died while processing"

/* The batch in hand (consumer.c fetches and settles it). */
struct batch {
	bool wrapped;           /* taken from requeue: elements are wrappers */
	bool fresh;             /* fetched now, not resumed from the list */
	int n, cap;
	char **els;
	size_t *lens;
	struct job *jobs;
	struct handler_result *results;
};

void consumer_sleep_ms(long ms);
/* Enter a scoreboard state (SB_BUSY: consumer_begin_batch) and tell
 * on_state when it changed. */
void consumer_set_state(struct consumer *c, int state);
void consumer_begin_batch(struct consumer *c, struct consumer_lane *ln);
/* The master's clock (job_timeout) on ln's batch again, from when it
 * began: it is in flight while the batch before it is settled. */
void consumer_resume_batch(struct consumer *c, struct consumer_lane *ln);
/* The handler waits out an outage (its waiting_state) with the batch in
 * hand, untimed: the master's job_timeout does not count it. */
void consumer_set_waiting(struct consumer *c, int state);
/* Mark ln busy in the scoreboard (lanes_busy), or not: a worker that dies
 * gives a recovery to the jobs of its busy lanes only (doc/design.md,
 * R14, R23). Busy from the fetch through the checks, and while the
 * handler may be running the batch, until its result; not while the batch
 * waits for a server (cleared before the wait begins, set again before
 * anything touches the batch), nor once it is decided. */
void consumer_lane_busy(struct consumer *c, const struct consumer_lane *ln,
    bool busy);
/* Wait for redis or the replicas (SB_WAIT_REDIS, SB_WAIT_REPLICAS) with
 * the batch in hand, if any, still timed; consumer_wait_over() goes back
 * to the state before the wait. */
void consumer_wait(struct consumer *c, int state);
void consumer_wait_over(struct consumer *c);
/* Forget the connection after `what` failed (the outage said once). */
void consumer_drop_connection(struct consumer *c, const char *what);
/* A script answered an error: HANDEDBACK evicts, an outage reconnects,
 * anything else is logged once while it repeats and backed off. */
void consumer_handed_back(struct consumer *c, const char *what,
    const redisReply *r);
/* A script call worked: the next distinct error is logged again. */
void consumer_script_ok(struct consumer *c);
/* r is LOADING: an outage, waited out (true), else false. */
bool consumer_loading(struct consumer *c, const redisReply *r);
/* r says the server is no longer the primary (or refuses writes for want
 * of replicas): drop the connection, wait a moment, true; else false. */
bool consumer_not_primary(struct consumer *c, const char *what,
    const redisReply *r);
/* Connect and register with backoff; false when we must stop. */
bool consumer_connected(struct consumer *c);
/* The batch of n jobs may run: its fetch is on redis_wait_replicas
 * replicas. False when the connection went, the primary moved or we stop. */
bool consumer_replicated(struct consumer *c, int n);
/* Reconnect before the next batch when the master saw a switch. */
void consumer_follow_switch(struct consumer *c);
/* ... and whether it saw one this connection has not followed. */
bool consumer_switch_pending(const struct consumer *c);
/* One WAIT for redis_wait_replicas replicas: true when they have our
 * writes now (consumer_replicated waits, and says so). */
bool consumer_replicas_now(struct consumer *c);

/* consumer_handler.c: find and open the queue's handler (false: it has
 * none), and close it. */
bool consumer_handler_open(struct consumer *c);
void consumer_handler_close(struct consumer *c);
/* Parse the jobs and read the cache keys they name; an invalid job (or one
 * whose cache key is gone) fails at once. False when the connection
 * failed while reading the cache (the batch stays held). */
bool consumer_prepare(struct consumer *c, struct batch *b);
/* Run the batch through the handler, waiting out its outages (backoff,
 * the batch held, no attempt spent). HANDLER_DONE: settle it;
 * HANDLER_WAIT: asked to stop meanwhile; HANDLER_HANDED_BACK (evicted) or
 * HANDLER_FATAL (logged): settle nothing. */
enum handler_status consumer_run_handler(struct consumer *c,
    struct consumer_lane *ln);
/* pipeline: hand ln's batch to the handler's send; *sent when its result
 * is left for consumer_finish_handler. Else HANDLER_DONE (written), or the
 * handler's first answer, which consumer_retry_handler waits out as
 * consumer_run_handler would have (so that the batch before it can be
 * settled first). */
enum handler_status consumer_send_handler(struct consumer *c,
    struct consumer_lane *ln, bool *sent);
enum handler_status consumer_retry_handler(struct consumer *c,
    struct consumer_lane *ln, enum handler_status st);
/* pipeline: while another batch is in flight, what the handler can do
 * ahead for ln's (its prepare op, if any), so that its send is short. */
void consumer_ahead_handler(struct consumer *c, struct consumer_lane *ln);
/* ... and its result, as consumer_run_handler would have given it (an
 * outage meanwhile: the batch is run again, waited out). */
enum handler_status consumer_finish_handler(struct consumer *c,
    struct consumer_lane *ln);

/* consumer.c: the steps of a worker's cycle. consumer_next_batch takes
 * the next batch into ln and prepares it (false: none, the connection
 * went, or paused; may_wait: block for one); consumer_land settles it
 * after the handler said st (true: stop the worker, *ex says how). */
bool consumer_next_batch(struct consumer *c, struct consumer_lane *ln,
    bool may_wait);
bool consumer_land(struct consumer *c, struct consumer_lane *ln,
    enum handler_status st, enum consumer_exit *ex);
/* consumer_settle.c: settle ln's batch in Redis (one settle.lua call,
 * retried on a dropped connection; c->buried: how many it dead-lettered);
 * false when the worker must stop with the batch held. Then keep the dead
 * list within dead_max (now: at once; else at most once a minute). */
bool consumer_settle(struct consumer *c, struct consumer_lane *ln);
void consumer_archive_dead(struct consumer *c, bool now);
/* consumer_lanes.c: the cycle with two batches (pipeline = yes). */
enum consumer_exit consumer_serve_lanes(struct consumer *c);
#endif
