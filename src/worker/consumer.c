/* consumer.c - a worker's cycle against Redis: take a batch into its own
 * processing list (fetch.lua, or BLMOVE to wait when the queue is empty),
 * run the handler, settle every job's outcome in one step (settle.lua,
 * src/worker/consumer_settle.c).
 * A lost connection never loses a job: the batch stays in the processing
 * list, the worker reconnects with backoff and settles it then, or the
 * master hands the list back if this process dies. */
#include "consumer.h"
#include "consumer_int.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/random.h>
#include <unistd.h>

#include "handler.h"
#include "log.h"
#include "rate_limit.h"
#include "script_args.h"
#include "util.h"


static bool batch_ready(struct consumer *c, struct consumer_lane *ln,
    bool may_wait);

static void
batch_add(struct batch *b, const char *el, size_t len)
{
	if (b->n == b->cap) {
		b->cap = b->cap ? b->cap * 2 : 64;
		b->els = xrealloc(b->els, sizeof(*b->els) * (size_t)b->cap);
		b->lens = xrealloc(b->lens, sizeof(*b->lens) * (size_t)b->cap);
	}
	b->els[b->n] = xmalloc(len + 1);
	memcpy(b->els[b->n], el, len);
	b->els[b->n][len] = '\0';
	b->lens[b->n++] = len;
}

static void
batch_add_reply(struct batch *b, const redisReply *r)
{
	if (r->type == REDIS_REPLY_STRING)
		batch_add(b, r->str, r->len);
	else if (r->type == REDIS_REPLY_ARRAY)
		for (size_t i = 0; i < r->elements; i++)
			batch_add_reply(b, r->element[i]);
}

static void
batch_clear(struct batch *b)
{
	for (int i = 0; i < b->n; i++) {
		free(b->els[i]);
		if (b->jobs != NULL)
			job_free(&b->jobs[i]);
	}
	free(b->jobs);
	free(b->results);
	b->jobs = NULL;
	b->results = NULL;
	b->n = 0;
}

/* The fetch clock (scoreboard fetch_start_ms): from when a request that
 * may move jobs into a processing list goes to Redis until the batch
 * clock takes over (or nothing came); 0 stops it. */
static void
fetch_clock(struct consumer *c, int64_t since_ms)
{
	atomic_store(&c->slot->fetch_start_ms, since_ms);
}

/* Quiet (TSTP) for all, or this queue paused (control socket). */
static bool
fetching_stopped(const struct consumer *c)
{
	return atomic_load(&c->quiet[0]) || atomic_load(&c->slot->paused);
}

/* Run fetch.lua for up to n more jobs, `held` already in the list (moved
 * there by BLMOVE from ready). */
static redisReply *
fetch(struct consumer *c, struct consumer_lane *ln, int n, int held)
{
	struct sargs a;

	snprintf(ln->batch_key, sizeof(ln->batch_key), "%s:%s:%ld", ln->id,
	    c->nonce, ++c->batch_seq);
	sargs_fetch(&a, c->cfg->redis_prefix, c->q->name, ln->id,
	    c->master_id, ln->batch_key, n, held, c->q->max_recoveries);
	if (c->q->rate_limit > 0)
		sargs_fetch_limit(&a, c->q->rate_limit,
		    rate_limit_burst(c->q->rate_limit));
	fetch_clock(c, util_monotonic_ms());
	return queue_script(c->redis, a.script, a.nkeys, a.argc, a.argv, a.lens);
}

/* Is r fetch.lua's reply {kind, {elements}, ms, ids}? */
static bool
fetch_reply(const redisReply *r)
{
	return r->type == REDIS_REPLY_ARRAY && r->elements == 4 &&
	    r->element[0]->type == REDIS_REPLY_STRING &&
	    r->element[1]->type == REDIS_REPLY_ARRAY &&
	    r->element[2]->type == REDIS_REPLY_INTEGER &&
	    r->element[3]->type == REDIS_REPLY_INTEGER;
}

/* fetch.lua's reply into c's lane batch b, and whether the queue holds
 * ids. */
static void
batch_add_fetched(struct consumer *c, struct batch *b, const redisReply *r)
{
	if (!fetch_reply(r))
		return;
	c->ids_held = r->element[3]->integer == 1;
	b->wrapped = r->element[0]->str[0] == 'w';
	batch_add_reply(b, r->element[1]);
}

/* Did fetch.lua return no job (and no wait for the rate limit)? */
static bool
fetched_nothing(const redisReply *r)
{
	return fetch_reply(r) && r->element[1]->elements == 0 &&
	    r->element[2]->integer == 0;
}

/* fetch.lua's {'r', {}, ms, ids} when the queue's rate limit has too few
 * tokens: how long until it has them; 0 for any other reply. */
static long
rate_wait_ms(const redisReply *r)
{
	if (!fetch_reply(r) || r->element[2]->integer <= 0)
		return 0;
	return r->element[2]->integer;
}

/* Sleep until the bucket has the tokens (at most RATE_LIMIT_WAIT_MAX_MS,
 * then fetch again), in short steps that see a stop or a pause. Idle: no
 * batch is held meanwhile, so there is nothing to time or hand back. */
static void
rate_wait(struct consumer *c, long ms)
{
	int64_t until = util_monotonic_ms() + (ms < RATE_LIMIT_WAIT_MAX_MS ?
	    ms : RATE_LIMIT_WAIT_MAX_MS);

	fetch_clock(c, 0);
	for (int64_t now = util_monotonic_ms(); now < until &&
	    !c->should_stop() && !fetching_stopped(c);
	    now = util_monotonic_ms())
		consumer_sleep_ms(until - now < 100 ? (long)(until - now) : 100);
}

/* Wait up to a second for a job with BLMOVE (it cannot run at maxmemory:
 * then poll), and top the batch up with fetch.lua. */
static redisReply *
wait_for_jobs(struct consumer *c, struct consumer_lane *ln)
{
	struct batch *b = ln->b;
	/* the block itself is not held against the worker, what follows is */
	fetch_clock(c, util_monotonic_ms() + CONSUMER_WAIT_MS);
	redisReply *r = redisCommand(c->redis, "BLMOVE %s %s RIGHT RIGHT %s",
	    c->keys.ready, ln->proc, CONSUMER_WAIT_S);

	if (r == NULL || r->type == REDIS_REPLY_NIL)
		return r;
	if (r->type == REDIS_REPLY_ERROR) {
		if (strncmp(r->str, "OOM", 3) != 0)
			log_warn("queue %s: BLMOVE: %s", c->q->name, r->str);
		consumer_sleep_ms(20);
		return r;
	}
	b->wrapped = false;         /* from ready: a producer's document */
	batch_add_reply(b, r);
	freeReplyObject(r);
	return fetch(c, ln, c->q->batch_size - 1, 1);
}

/* A batch fetched before the connection dropped: keep the key stored
 * beside it, which may name a transaction that committed meanwhile
 * (doc/design.md, I4). */
static bool
resume_key(struct consumer *c, struct consumer_lane *ln)
{
	struct batch *b = ln->b;
	redisReply *r;

	/* each request is timed on its own (CONSUMER_TIMEOUT_MS each, under
	 * the master's fetch limit), the LRANGE before this one too */
	fetch_clock(c, util_monotonic_ms());
	r = redisCommand(c->redis, "HGET %s %s", c->keys.bkeys, ln->id);

	if (r == NULL)
		return false;
	if (r->type == REDIS_REPLY_STRING && r->len > 2) {
		/* "w KEY" or "r KEY" (batch_of in src/redis/lua/common.lua) */
		b->wrapped = r->str[0] == 'w';
		snprintf(ln->batch_key, sizeof(ln->batch_key), "%s", r->str + 2);
	} else {
		b->wrapped = false;     /* only BLMOVE put it there */
		freeReplyObject(r);
		if ((r = fetch(c, ln, 0, b->n)) == NULL)
			return false;
		if (r->type == REDIS_REPLY_ERROR) {
			/* no key stored beside it (handed back meanwhile?):
			 * never run it under one Redis does not hold */
			if (!consumer_loading(c, r))
				consumer_handed_back(c, "fetch", r);
			freeReplyObject(r);
			return false;
		}
	}
	freeReplyObject(r);
	log_notice("queue %s: resuming a batch of %d jobs held before the "
	    "connection dropped", c->q->name, b->n);
	return true;
}

/* Fill ln's batch with the next one; false when the connection failed.
 * may_wait: block (BLMOVE, the rate limit) when there is none yet; else
 * come back empty. */
static bool
take_batch(struct consumer *c, struct consumer_lane *ln, bool may_wait)
{
	struct batch *b = ln->b;
	redisReply *r;

	if (ln->resume) {
		/* a batch fetched before the connection dropped */
		fetch_clock(c, util_monotonic_ms());
		r = redisCommand(c->redis, "LRANGE %s 0 -1", ln->proc);
		if (r == NULL)
			return false;
		ln->resume = false;
		b->fresh = false;
		batch_add_reply(b, r);
		freeReplyObject(r);
		if (b->n > 0)
			return resume_key(c, ln);
	}
	b->fresh = true;
	r = fetch(c, ln, c->q->batch_size, 0);
	long wait = r != NULL ? rate_wait_ms(r) : 0;
	if (wait > 0) {
		consumer_script_ok(c);
		freeReplyObject(r);
		if (may_wait)
			rate_wait(c, wait);
		return true;
	}
	if (r != NULL && fetched_nothing(r)) {
		freeReplyObject(r);
		if (!may_wait)
			return true;
		r = wait_for_jobs(c, ln);
	}
	if (r == NULL)
		return false;
	if (r->type == REDIS_REPLY_ERROR) {
		/* A job BLMOVE moved in, but fetch.lua did not store the batch
		 * key beside it: never write a batch under a key Redis does not
		 * hold. Nor trust "nothing moved": a script that fails half
		 * way keeps its writes. Read the list again (resume) once fetch
		 * works (a BLMOVE refused at maxmemory, OOM, moved nothing).
		 * The backoff below is not a fetch: the fetch clock runs on
		 * only for jobs known to be held. */
		if (b->n > 0 || strncmp(r->str, "OOM", 3) != 0)
			ln->resume = true;
		if (b->n == 0)
			fetch_clock(c, 0);
		batch_clear(b);
	}
	if (r->type == REDIS_REPLY_ERROR && strncmp(r->str, "OOM", 3) != 0 &&
	    !consumer_loading(c, r))
		consumer_handed_back(c, "fetch", r);
	else if (r->type == REDIS_REPLY_ARRAY)
		consumer_script_ok(c);
	batch_add_fetched(c, b, r);
	freeReplyObject(r);
	return c->redis != NULL;        /* consumer_not_primary() may have dropped it */
}

/* `ferryctl pause` answers once the flag is set, and a fetch under way
 * then (BLMOVE waits a second) may take a job enqueued after the answer.
 * So the flag is read again once a fetch returns, and a batch fetched
 * while it was raised goes back, unrun, to the end of the list it came
 * from (the order it had). MULTI: a reclaim cannot interleave. False
 * when it could not: the batch stays in our list, resumed (run) after the
 * pause. */
static bool
give_back(struct consumer *c, struct consumer_lane *ln)
{
	struct batch *b = ln->b;
	const char *to = b->wrapped ? c->keys.requeue : c->keys.ready;
	bool ok = true;
	redisReply *r;

	redisAppendCommand(c->redis, "MULTI");
	for (int i = 0; i < b->n; i++)
		redisAppendCommand(c->redis, "LMOVE %s %s RIGHT RIGHT", ln->proc,
		    to);
	redisAppendCommand(c->redis, "HDEL %s %s", c->keys.bkeys, ln->id);
	/* fetch.lua counted them as arrived; the fetch after the pause
	 * counts them again */
	int counted = !b->wrapped;
	if (counted)
		redisAppendCommand(c->redis, "HINCRBY %s enqueued %d",
		    c->keys.stats, -b->n);
	redisAppendCommand(c->redis, "EXEC");
	for (int i = 0; i < b->n + 3 + counted; i++) {
		if (redisGetReply(c->redis, (void **)&r) != REDIS_OK) {
			consumer_drop_connection(c, "giving a batch back (paused)");
			return false;
		}
		if (i == b->n + 2 + counted)
			ok = r->type == REDIS_REPLY_ARRAY;
		freeReplyObject(r);
	}
	if (!ok) {
		log_warn("queue %s: paused while fetching a batch of %d jobs, which "
		    "could not go back to the queue: it runs after the pause",
		    c->q->name, b->n);
		ln->resume = true;
	} else {
		log_info("queue %s: paused while fetching: gave a batch of %d "
		    "jobs back to %s unrun", c->q->name, b->n,
		    b->wrapped ? "requeue" : "ready");
	}
	return ok;
}

/* Worker ids are made of pids, which the kernel reuses, and batch keys
 * stay in ferry_batches for done_retention: a random part per process
 * keeps a batch key naming one transaction (doc/design.md, I1). */
static void
set_nonce(struct consumer *c)
{
	uint64_t r;

	if (getrandom(&r, sizeof(r), 0) != (ssize_t)sizeof(r))
		r = ((uint64_t)random() << 32) ^ (uint64_t)random() ^
		    (uint64_t)util_realtime_ms();
	snprintf(c->nonce, sizeof(c->nonce), "%016llx", (unsigned long long)r);
}

/* consumer_next_batch's steps, the fetch clock running from the
 * fetch until the batch clock starts. */
static bool
next_batch(struct consumer *c, struct consumer_lane *ln, bool may_wait)
{
	struct batch *b = ln->b;

	/* paused, or the primary switched: a batch in flight lands first */
	if (fetching_stopped(c)) {
		if (may_wait) {
			consumer_set_state(c, SB_PAUSED);
			consumer_sleep_ms(100);
		}
		return false;
	}
	if (!may_wait && consumer_switch_pending(c))
		return false;
	if (may_wait) {
		consumer_set_state(c, SB_IDLE);
		consumer_follow_switch(c);
		if (c->redis == NULL)
			return false;
	}
	if (!take_batch(c, ln, may_wait)) {
		consumer_drop_connection(c, "fetch");
		batch_clear(b);
		return false;
	}
	if (b->n > 0 && c->freeze_after_fetch != NULL &&
	    unlink(c->freeze_after_fetch) == 0) {
		log_notice("queue %s: test hook: freezing after a fetch of %d "
		    "jobs, before the batch clock starts", c->q->name, b->n);
		raise(SIGSTOP);
	}
	if (c->evicted) {
		/* a job BLMOVE moved in after the hand-back is not ours:
		 * the reaper sweeps it back from the tombstoned list */
		batch_clear(b);
		return false;
	}
	if (b->n == 0) {
		fetch_clock(c, 0);
		if (may_wait)
			consumer_archive_dead(c, false);
		return false;
	}
	/* held from here: the master's clock (job_timeout) runs, so that a
	 * worker frozen before its handler starts is still stopped; off
	 * again when the batch does not run now */
	consumer_begin_batch(c, ln);
	fetch_clock(c, 0);
	if (batch_ready(c, ln, may_wait))
		return true;
	scoreboard_end_batch(c->slot, 0);
	return false;
}

/* The steps before a batch runs: take it into ln's list (waiting for
 * one when may_wait), give it back when paused meanwhile, wait for the
 * replicas, read its cache keys. True when ln's batch is ready for the
 * handler; false when there is none (or the connection went: ln's batch
 * is cleared, and c->evicted tells a hand-back). Between Redis moving
 * the jobs and the batch clock, the fetch clock runs (fetch_clock).
 * ln is busy from here (a job that kills its worker as it is parsed is
 * recovered, and so isolated), but for the replicas' wait, and no longer
 * when no batch is ready: what follows then (a reconnection, reading the
 * list back) holds jobs that do not run (doc/design.md, R23). */
bool
consumer_next_batch(struct consumer *c, struct consumer_lane *ln,
    bool may_wait)
{
	atomic_store(&c->slot->seen_ms, util_monotonic_ms());
	consumer_lane_busy(c, ln, true);
	bool ready = next_batch(c, ln, may_wait);
	fetch_clock(c, 0);
	if (!ready)
		consumer_lane_busy(c, ln, false);
	return ready;
}

/* The batch just taken into ln: give it back if paused meanwhile, wait
 * for the replicas, read its cache keys. False (the batch cleared) when
 * it does not run now. */
static bool
batch_ready(struct consumer *c, struct consumer_lane *ln, bool may_wait)
{
	struct batch *b = ln->b;

	if (b->fresh && fetching_stopped(c)) {
		give_back(c, ln);
		batch_clear(b);
		return false;
	}
	if (!may_wait && c->cfg->redis_wait_replicas > 0 &&
	    !consumer_replicas_now(c)) {
		/* the replicas lag: a wait that may last does not hold a
		 * batch in flight; this one is read back after it lands */
		ln->resume = true;
		batch_clear(b);
		return false;
	}
	if (may_wait && c->cfg->redis_wait_replicas > 0) {
		/* the jobs are not even parsed yet */
		consumer_lane_busy(c, ln, false);
		if (!consumer_replicated(c, b->n)) {
			consumer_drop_connection(c, "replication wait");
			batch_clear(b);
			return false;
		}
		/* the wait was untimed: the cache read below is not */
		consumer_begin_batch(c, ln);
		consumer_lane_busy(c, ln, true);
	}
	if (!consumer_prepare(c, b)) {
		consumer_drop_connection(c, "cache read");
		batch_clear(b);
		return false;
	}
	return true;
}

/* After the handler said st about ln's batch: settle it. True when the
 * worker must stop (*ex says how): the handler gave no result, the
 * settle could not be made, or max_jobs_per_worker is reached. */
bool
consumer_land(struct consumer *c, struct consumer_lane *ln,
    enum handler_status st, enum consumer_exit *ex)
{
	struct batch *b = ln->b;

	/* the handler has answered: nothing runs the batch now (decided,
	 * its COMMIT's reply read; or held, unrun), and a settle that waits
	 * for Redis waits with a batch that is over, which its stamps keep
	 * from being written twice (doc/design.md, R23) */
	consumer_lane_busy(c, ln, false);
	*ex = CONSUMER_EXIT_OK;
	if (st != HANDLER_DONE) {
		batch_clear(b);     /* stopping with the batch held */
		*ex = st == HANDLER_FATAL ? CONSUMER_EXIT_FATAL : CONSUMER_EXIT_OK;
		return true;
	}
	bool settled = consumer_settle(c, ln);
	if (settled)
		consumer_archive_dead(c, c->buried > 0);     /* still timed */
	scoreboard_begin_batch(c->slot, ln->started_ms);    /* its own time */
	scoreboard_end_batch(c->slot, settled ? b->n : 0);
	consumer_set_state(c, SB_IDLE);
	c->jobs_done += settled ? b->n : 0;
	batch_clear(b);
	if (!settled) {
		*ex = c->should_stop() || c->evicted ? CONSUMER_EXIT_OK :
		    CONSUMER_EXIT_UNSETTLED;
		return true;
	}
	if (c->q->max_jobs_per_worker > 0 &&
	    c->jobs_done >= c->q->max_jobs_per_worker) {
		log_info("queue %s: %ld jobs done, max_jobs_per_worker "
		    "reached: exiting to be replaced", c->q->name, c->jobs_done);
		return true;
	}
	return false;
}

/* Fetch, run and settle batches one at a time until told to stop or this
 * worker must exit. */
static enum consumer_exit
serve(struct consumer *c)
{
	struct consumer_lane *ln = &c->lanes[0];
	enum consumer_exit ex;

	while (!c->should_stop() && !c->evicted && consumer_connected(c)) {
		if (!consumer_next_batch(c, ln, true))
			continue;
		consumer_begin_batch(c, ln);
		if (consumer_land(c, ln, consumer_run_handler(c, ln), &ex))
			return ex;
	}
	return CONSUMER_EXIT_OK;
}

/* Lane i of this worker: its id (the worker's own, then "<id>.lane2"),
 * processing list and batch. */
static void
lane_init(struct consumer *c, int i)
{
	struct consumer_lane *ln = &c->lanes[i];

	memset(ln, 0, sizeof(*ln));
	snprintf(ln->id, sizeof(ln->id), "%s%s", c->worker_id,
	    i == 0 ? "" : CONSUMER_LANE2_SUFFIX);
	queue_proc_key(&c->keys, ln->id, ln->proc, sizeof(ln->proc));
	ln->b = xcalloc(1, sizeof(*ln->b));
}

static void
lane_free(struct consumer_lane *ln)
{
	if (ln->b == NULL)
		return;
	batch_clear(ln->b);
	free(ln->b->els);
	free(ln->b->lens);
	free(ln->b);
	ln->b = NULL;
}

enum consumer_exit
consumer_run(struct consumer *c)
{
	if (!consumer_handler_open(c))
		return CONSUMER_EXIT_FATAL;
	queue_keys_init(&c->keys, c->cfg->redis_prefix, c->q->name);
	/* pipeline: a second processing list, registered beside the first
	 * (the scoreboard says so first: the master hands back both) */
	c->nlanes = c->q->pipeline && c->handler->send != NULL ? 2 : 1;
	atomic_store(&c->slot->lanes_busy, 0);
	atomic_store(&c->slot->lanes, c->nlanes);
	for (int i = 0; i < c->nlanes; i++)
		lane_init(c, i);
	srandom((unsigned)getpid() ^ (unsigned)util_monotonic_ms());
	set_nonce(c);
	c->error_delay_ms = CONSUMER_RETRY_MIN_MS;
	enum consumer_exit status = c->nlanes == 2 ? consumer_serve_lanes(c) :
	    serve(c);
	for (int i = 0; i < c->nlanes; i++)
		lane_free(&c->lanes[i]);
	consumer_handler_close(c);
	redisFree(c->redis);
	c->redis = NULL;
	return status;
}
