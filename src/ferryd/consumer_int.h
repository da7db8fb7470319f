/* consumer_int.h - what consumer.c, consumer_redis.c and consumer_handler.c
 * share (private). */
#ifndef FERRY_CONSUMER_INT_H
#define FERRY_CONSUMER_INT_H

#include <hiredis/hiredis.h>
#include <stdbool.h>

#include "consumer.h"
#include "handler.h"

#define CONSUMER_TIMEOUT_MS 10000   /* any Redis command */
#define CONSUMER_WAIT_S "1"         /* BLMOVE block, seconds */
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
void consumer_begin_batch(struct consumer *c, int jobs);
/* The handler waits out an outage (its waiting_state) with the batch in
 * hand, untimed: the master's job_timeout does not count it. */
void consumer_set_waiting(struct consumer *c, int state);
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
    struct batch *b);
#endif
