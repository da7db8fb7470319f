/* consumer_handler.c - the handler's side of a worker's cycle: open the
 * queue's handler (handler_for), prepare a batch's jobs the way it asks
 * (cache values, ids, burial of jobs recovered too often), run it and wait
 * out its outages with the batch held. It knows the handler only through
 * struct handler_ops. */
#include "consumer.h"
#include "consumer_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cache.h"
#include "handler.h"
#include "log.h"
#include "util.h"

/* A handler's warning while a batch runs (struct handler_host). */
static void
handler_warned(void *arg, const char *msg)
{
	struct consumer *c = arg;

	log_warn("queue %s: %s", c->q->name, msg);
	scoreboard_set_error(c->slot, msg);
}

/* Wait out a handler's outage (delay ms, doubled up to the maximum), ln's
 * batch held. The handler has answered, so nothing runs the batch: ln is
 * not busy meanwhile, and a worker killed now gives the jobs no recovery
 * (doc/design.md, R23). False when asked to stop meanwhile; true when the
 * batch is to run again: timed and busy again first. The state changes
 * before the mark on the way back, after it on the way in: while the
 * worker says it waits (ps, status), a kill costs its jobs nothing. */
static bool
outage_wait(struct consumer *c, struct consumer_lane *ln, long *delay)
{
	consumer_lane_busy(c, ln, false);
	consumer_set_waiting(c, c->handler->waiting_state);    /* not hung */
	for (long waited = 0; waited < *delay; waited += 100) {
		if (c->should_stop())
			return false;
		consumer_sleep_ms(100);
	}
	*delay = *delay * 2 > CONSUMER_RETRY_MAX_MS ? CONSUMER_RETRY_MAX_MS :
	    *delay * 2;
	consumer_begin_batch(c, ln);
	consumer_lane_busy(c, ln, true);
	return true;
}

/* The batch committed: the test hook (die between COMMIT and the Redis
 * ack, once), then the handler's housekeeping. */
static enum handler_status
run_done(struct consumer *c)
{
	const struct handler_ops *h = c->handler;

	if (h->commits && c->exit_after_commit != NULL &&
	    unlink(c->exit_after_commit) == 0) {
		log_warn("test hook: exiting between COMMIT and ack");
		_exit(1);
	}
	h->committed(c->handler_state);
	return HANDLER_DONE;
}

/* The handler answered st (not HANDLER_DONE) for ln's batch. While what
 * it needs is unreachable (HANDLER_WAIT) the batch stays in Redis and no
 * attempt is burnt: run it again with backoff. HANDLER_DONE: settle it;
 * HANDLER_WAIT when asked to stop meanwhile (the batch is still held);
 * HANDLER_HANDED_BACK (evicted) or HANDLER_FATAL: settle nothing. */
static enum handler_status
run_again(struct consumer *c, struct consumer_lane *ln,
    enum handler_status st, char *err, size_t errsize)
{
	const struct handler_ops *h = c->handler;
	struct batch *b = ln->b;
	long delay = CONSUMER_RETRY_MIN_MS;
	int64_t since = 0;

	for (; st != HANDLER_DONE; st = h->run(c->handler_state, b->jobs,
	    b->results, b->n, ln->batch_key, err, errsize)) {
		scoreboard_set_error(c->slot, err);
		if (st == HANDLER_HANDED_BACK) {
			c->evicted = true;
			return st;
		}
		if (st == HANDLER_FATAL) {
			log_error("queue %s: %s; this worker stops (tried again "
			    "after restart_backoff_max, or on a reload)", c->q->name,
			    err);
			return st;
		}
		if (since == 0) {
			log_warn("queue %s: %s (the batch of %d jobs waits in Redis; "
			    "retrying)", c->q->name, err, b->n);
			since = util_monotonic_ms();
		} else {
			log_debug("queue %s: %s (still waiting)", c->q->name, err);
		}
		if (!outage_wait(c, ln, &delay))
			return HANDLER_WAIT;
	}
	if (since != 0) {
		log_notice("queue %s: %s reachable again after %.1f s",
		    c->q->name, h->name,
		    (double)(util_monotonic_ms() - since) / 1000.);
		scoreboard_clear_error(c->slot);
	}
	return run_done(c);
}

/* The handler answered st for ln's batch (its message, if any, in
 * c->handler_err): committed, or waited out. */
static enum handler_status
answered(struct consumer *c, struct consumer_lane *ln, enum handler_status st)
{
	return st == HANDLER_DONE ? run_done(c) : run_again(c, ln, st,
	    c->handler_err, sizeof(c->handler_err));
}

/* Run ln's batch through the handler, waiting out its outages. */
enum handler_status
consumer_run_handler(struct consumer *c, struct consumer_lane *ln)
{
	struct batch *b = ln->b;

	return answered(c, ln, c->handler->run(c->handler_state, b->jobs,
	    b->results, b->n, ln->batch_key, c->handler_err,
	    sizeof(c->handler_err)));
}

enum handler_status
consumer_send_handler(struct consumer *c, struct consumer_lane *ln,
    bool *sent)
{
	struct batch *b = ln->b;
	enum handler_status st = c->handler->send(c->handler_state, b->jobs,
	    b->results, b->n, ln->batch_key, sent, c->handler_err,
	    sizeof(c->handler_err));

	if (*sent)
		return st;
	return st == HANDLER_DONE ? run_done(c) : st;
}

void
consumer_ahead_handler(struct consumer *c, struct consumer_lane *ln)
{
	struct batch *b = ln->b;

	if (c->handler->prepare != NULL)
		c->handler->prepare(c->handler_state, b->jobs, b->results, b->n,
		    ln->batch_key);
}

enum handler_status
consumer_retry_handler(struct consumer *c, struct consumer_lane *ln,
    enum handler_status st)
{
	return st == HANDLER_DONE ? st : answered(c, ln, st);
}

enum handler_status
consumer_finish_handler(struct consumer *c, struct consumer_lane *ln)
{
	struct batch *b = ln->b;

	return answered(c, ln, c->handler->finish(c->handler_state, b->jobs,
	    b->results, b->n, ln->batch_key, c->handler_err,
	    sizeof(c->handler_err)));
}

/* Parse the jobs and read the cache keys they name; an invalid job (or one
 * whose cache key is gone) fails at once, unless the handler buries it
 * (handler_ops.buries: a batch may have written it). False when the
 * connection failed while reading the cache (the batch stays held). */
bool
consumer_prepare(struct consumer *c, struct batch *b)
{
	const struct handler_ops *h = c->handler;

	b->jobs = xcalloc((size_t)b->n, sizeof(*b->jobs));
	b->results = xcalloc((size_t)b->n, sizeof(*b->results));
	/* some handlers name only the jobs they fail (job_id) */
	for (int i = 0; i < b->n; i++) {
		struct job *j = &b->jobs[i];
		job_parse_held(j, b->els[i], b->lens[i], c->q->max_job_bytes,
		    b->wrapped);
		if (h->needs_job_ids)
			job_id(j);
		/* recovered too often: never run again, failed or buried
		 * as the handler says */
		if (j->invalid == NULL && j->recoveries > c->q->max_recoveries) {
			if (h->buries != NULL && h->buries(j, true))
				j->bury = true;
			else
				j->invalid = CONSUMER_DIED_REASON;
		}
	}
	if (cache_load(c->redis, b->jobs, b->n, c->cfg->redis_prefix, c->q,
	    h->cache_mode) == -1)
		return false;
	for (int i = 0; i < b->n; i++) {
		struct job *j = &b->jobs[i];
		/* refused: failed now, or buried as the handler says */
		if (j->invalid != NULL && h->buries != NULL &&
		    h->buries(j, false)) {
			j->bury = true;
			j->bury_reason = j->invalid;
			j->invalid = NULL;
		}
		if (j->invalid != NULL) {
			b->results[i].outcome = HANDLER_FAIL;
			util_utf8_copy(b->results[i].message,
			    sizeof(b->results[i].message), j->invalid,
			    strlen(j->invalid));
		}
	}
	return true;
}

bool
consumer_handler_open(struct consumer *c)
{
	if ((c->handler = handler_for(c->q->handler)) == NULL) {
		log_error("queue %s: handler %d has no implementation; this "
		    "worker stops (tried again after restart_backoff_max)",
		    c->q->name, c->q->handler);
		return false;
	}
	struct handler_host host = { .cfg = c->cfg, .q = c->q,
	    .warn = handler_warned, .arg = c };
	c->handler_state = c->handler->open(&host);
	return true;
}

void
consumer_handler_close(struct consumer *c)
{
	c->handler->close(c->handler_state);
	c->handler_state = NULL;
}
