/* consumer_redis.c - a worker's connection to Redis: connect (through the
 * sentinels or the cluster's slot map) and register, reconnect with
 * backoff, tell an outage (lost connection, LOADING, a demoted primary, a
 * moved slot) from a script error, follow the sentinels' switches, and
 * hold a batch until the replicas have its fetch (redis_wait_replicas). */
#include "consumer.h"
#include "consumer_int.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "log.h"
#include "script_args.h"
#include "sentinel.h"
#include "util.h"

void
consumer_sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

static void
tell_state(struct consumer *c, int state, int jobs)
{
	if (c->on_state == NULL || (state == c->told_state &&
	    jobs == c->told_jobs))
		return;
	c->told_state = state;
	c->told_jobs = jobs;
	c->on_state(state, jobs);
}

void
consumer_set_state(struct consumer *c, int state)
{
	scoreboard_set_state(c->slot, state);
	tell_state(c, state, 0);
}

void
consumer_set_waiting(struct consumer *c, int state)
{
	scoreboard_set_waiting(c->slot, state);
	tell_state(c, state, 0);
}

void
consumer_begin_batch(struct consumer *c, struct consumer_lane *ln)
{
	ln->started_ms = util_monotonic_ms();
	consumer_resume_batch(c, ln);
}

void
consumer_resume_batch(struct consumer *c, struct consumer_lane *ln)
{
	scoreboard_begin_batch(c->slot, ln->started_ms);
	c->busy_jobs = ln->b->n;
	tell_state(c, SB_BUSY, ln->b->n);
}

void
consumer_lane_busy(struct consumer *c, const struct consumer_lane *ln,
    bool busy)
{
	int bit = 1 << (int)(ln - c->lanes);

	if (busy)
		atomic_fetch_or(&c->slot->lanes_busy, bit);
	else
		atomic_fetch_and(&c->slot->lanes_busy, ~bit);
}

static bool
waiting(int state)
{
	return state == SB_WAIT_REDIS || state == SB_WAIT_REPLICAS;
}

void
consumer_wait(struct consumer *c, int state)
{
	int now = atomic_load(&c->slot->state);

	if (!waiting(now))
		c->state_before_wait = now;
	scoreboard_set_state(c->slot, state);
	tell_state(c, state, 0);
}

void
consumer_wait_over(struct consumer *c)
{
	if (!waiting(atomic_load(&c->slot->state)))
		return;
	scoreboard_set_state(c->slot, c->state_before_wait);
	tell_state(c, c->state_before_wait, c->state_before_wait == SB_BUSY ?
	    c->busy_jobs : 0);
}

void
consumer_drop_connection(struct consumer *c, const char *what)
{
	char addr[300];

	if (!c->outage) {
		log_warn("queue %s: redis at %s lost during %s: %s (reconnecting)",
		    c->q->name, queue_address(c->cfg, addr, sizeof(addr)), what,
		    c->redis != NULL && c->redis->errstr[0] ? c->redis->errstr :
		    "no reply");
		c->outage = true;
		c->outage_since = util_monotonic_ms();
	}
	redisFree(c->redis);
	c->redis = NULL;
}

/* An error that says the server is no longer the primary (READONLY,
 * UNBLOCKED by a demotion, MASTERDOWN), or that the primary refuses
 * writes for want of replicas (NOREPLICAS): an outage. Drop the
 * connection: the next one asks the sentinels again. */
bool
consumer_not_primary(struct consumer *c, const char *what, const redisReply *r)
{
	char addr[300];

	if (!queue_role_changed(r) && !queue_error_is(r, "NOREPLICAS"))
		return false;
	if (!c->outage) {
		log_warn("queue %s: redis at %s: %s failed: %s (reconnecting to "
		    "the primary)", c->q->name, queue_address(c->cfg, addr,
		    sizeof(addr)), what, r->str);
		c->outage = true;
		c->outage_since = util_monotonic_ms();
	}
	scoreboard_set_error(c->slot, r->str);
	redisFree(c->redis);
	c->redis = NULL;
	consumer_wait(c, SB_WAIT_REDIS);
	consumer_sleep_ms(CONSUMER_RETRY_MIN_MS);
	return true;
}

/* A script answered with an error. HANDEDBACK means a master has already
 * handed this worker's jobs back as dead (we were frozen, or our host was
 * declared dead): stop at once, without fetching again. Any other error is
 * logged once while it repeats (a script error, e.g. `ready` of the wrong
 * type, would otherwise be logged thousands of times a second) and the
 * caller backs off. */
void
consumer_handed_back(struct consumer *c, const char *what, const redisReply *r)
{
	if (consumer_not_primary(c, what, r))
		return;
	if (queue_error_is(r, QUEUE_ERR_HANDED_BACK)) {
		log_warn("queue %s: %s: %s: exiting", c->q->name, what, r->str);
		c->evicted = true;
		return;
	}
	if (strcmp(c->last_error, r->str) != 0) {
		log_error("queue %s: %s failed: %s (retrying with backoff; logged "
		    "once while it repeats)", c->q->name, what, r->str);
		snprintf(c->last_error, sizeof(c->last_error), "%s", r->str);
	}
	scoreboard_set_error(c->slot, r->str);
	consumer_sleep_ms(c->error_delay_ms);
	c->error_delay_ms = c->error_delay_ms * 2 > CONSUMER_RETRY_MAX_MS ?
	    CONSUMER_RETRY_MAX_MS : c->error_delay_ms * 2;
}

/* A script call worked: the next distinct error is logged again. */
void
consumer_script_ok(struct consumer *c)
{
	if (c->last_error[0] != '\0')
		log_notice("queue %s: redis scripts work again", c->q->name);
	c->last_error[0] = '\0';
	c->error_delay_ms = CONSUMER_RETRY_MIN_MS;
}

/* Redis is loading its data set (a restart from the AOF): an outage, not
 * an error. */
bool
consumer_loading(struct consumer *c, const redisReply *r)
{
	if (r == NULL || r->type != REDIS_REPLY_ERROR ||
	    strncmp(r->str, "LOADING", 7) != 0)
		return false;
	if (!c->outage) {
		log_notice("queue %s: redis is loading its data set: waiting",
		    c->q->name);
		c->outage = true;
		c->outage_since = util_monotonic_ms();
	}
	consumer_wait(c, SB_WAIT_REDIS);
	consumer_sleep_ms(CONSUMER_RETRY_MIN_MS);
	return true;
}

/* Register every lane's processing list with our master. */
static bool
registered(struct consumer *c)
{
	struct sargs a;
	bool ok = true;

	for (int i = 0; i < c->nlanes && ok; i++) {
		sargs_register(&a, c->cfg->redis_prefix, c->q->name,
		    c->lanes[i].id, c->master_id);
		redisReply *r = queue_script(c->redis, a.script, a.nkeys, a.argc,
		    a.argv, a.lens);
		ok = r != NULL && r->type != REDIS_REPLY_ERROR;
		if (r != NULL && !ok && !consumer_loading(c, r))
			consumer_handed_back(c, "register", r);
		freeReplyObject(r);
	}
	return ok;
}

/* Connect (and register) with backoff until it works or we must stop.
 * Only a new connection (or the end of an outage, such as LOADING on a
 * live one) sets resume: the list is read back once, not before every
 * batch (each path that leaves jobs in it on a live connection sets
 * resume itself). */
bool
consumer_connected(struct consumer *c)
{
	long delay = CONSUMER_RETRY_MIN_MS;
	char err[1024];
	bool refused;

	if (c->redis != NULL && !c->outage) {
		consumer_wait_over(c);
		return true;
	}
	while (c->redis == NULL) {
		if (c->should_stop() || c->evicted)
			return false;
		if (c->switches != NULL)
			c->switches_seen = atomic_load(c->switches);
		c->redis = queue_connect_for(c->cfg, c->q->name,
		    CONSUMER_TIMEOUT_MS, &refused, err, sizeof(err));
		bool reached = c->redis != NULL;
		if (reached && registered(c))
			break;
		if (reached && c->redis != NULL)
			consumer_drop_connection(c, "register");
		else if (reached)
			continue;       /* not the primary: consumer_not_primary() waited */
		else if (!c->outage || (refused && !c->auth_refused)) {
			/* refused credentials too: the operator may fix the
			 * ACL while we wait, and a restart would not help */
			log_msg(refused ? LOG_LEVEL_ERROR : LOG_LEVEL_WARN,
			    "queue %s: %s (retrying every %d s at most)",
			    c->q->name, err, CONSUMER_RETRY_MAX_MS / 1000);
			if (!c->outage)
				c->outage_since = util_monotonic_ms();
			c->outage = true;
			c->auth_refused = refused;
		}
		scoreboard_set_error(c->slot, err);
		consumer_wait(c, SB_WAIT_REDIS);
		consumer_sleep_ms(delay);
		delay = delay * 2 > CONSUMER_RETRY_MAX_MS ? CONSUMER_RETRY_MAX_MS :
		    delay * 2;
	}
	if (c->reached != NULL)         /* the master may be waiting still */
		atomic_fetch_add(c->reached, 1);
	const char *now = queue_current_address();
	bool moved = c->last_addr[0] != '\0' && strcmp(c->last_addr, now) != 0;
	if (c->outage)
		log_notice("queue %s: redis reachable again after %.1f s%s%s%s%s%s",
		    c->q->name, (double)(util_monotonic_ms() - c->outage_since) /
		    1000., moved ? " (the primary moved from " : "",
		    moved ? c->last_addr : "", moved ? " to " : "",
		    moved ? now : "", moved ? ")" : "");
	else if (moved)
		log_info("queue %s: following the redis primary from %s to %s",
		    c->q->name, c->last_addr, now);
	snprintf(c->last_addr, sizeof(c->last_addr), "%s", now);
	c->outage = false;
	c->auth_refused = false;
	for (int i = 0; i < c->nlanes; i++)
		c->lanes[i].resume = true;
	consumer_wait_over(c);
	return true;
}

/* A fetch that a failover can lose must not run: the new primary would
 * still hold those jobs in ready (or requeue), and another batch would
 * write them again. So with redis_wait_replicas a batch runs only once
 * that many replicas acknowledge this connection's writes (the fetch, or
 * after a reconnection register.lua's, which follows it). While they do
 * not, the batch waits in its list: an outage, said once. False when the
 * connection went, the primary moved, or we must stop. */
bool
consumer_replicated(struct consumer *c, int n)
{
	int want = c->cfg->redis_wait_replicas;
	char host[CONFIG_HOST_MAX], err[512], msg[300], where[CONFIG_HOST_MAX + 16];
	int port;

	while (want > 0) {
		redisReply *r = redisCommand(c->redis, "WAIT %d %ld", want,
		    c->cfg->redis_wait_timeout_ms);
		if (r == NULL)
			return false;
		if (r->type == REDIS_REPLY_ERROR) {
			consumer_handed_back(c, "WAIT", r);
			freeReplyObject(r);
			return false;
		}
		long long got = r->type == REDIS_REPLY_INTEGER ? r->integer : 0;
		freeReplyObject(r);
		if (got >= want)
			break;
		snprintf(msg, sizeof(msg), "a batch of %d jobs reached %lld of %d "
		    "replicas within redis_wait_timeout", n, got, want);
		if (!c->replicas_short)
			log_warn("queue %s: %s (%ld ms): it runs only once %d have it, "
			    "as a failover could lose its fetch and run the jobs twice; "
			    "waiting", c->q->name, msg, c->cfg->redis_wait_timeout_ms,
			    want);
		c->replicas_short = true;
		scoreboard_set_error(c->slot, msg);
		consumer_wait(c, SB_WAIT_REPLICAS);
		/* untimed: the batch has not run, and killing the worker
		 * would only give its jobs a recovery */
		atomic_store(&c->slot->batch_start_ms, 0);
		if (c->should_stop())
			return false;
		/* cut off from the replicas, maybe replaced by one of them */
		if (*c->cfg->redis_sentinels != '\0' && sentinel_find_primary(c->cfg,
		    QUEUE_SENTINEL_TIMEOUT_MS, host, sizeof(host), &port, err,
		    sizeof(err)) == 0) {
			snprintf(where, sizeof(where), "%s:%d", host, port);
			if (strcmp(where, queue_current_address()) != 0)
				return false;
		}
		consumer_sleep_ms(CONSUMER_RETRY_MIN_MS);    /* WAIT itself waited */
	}
	if (c->replicas_short)
		log_notice("queue %s: replicas acknowledge writes again: batches "
		    "run", c->q->name);
	c->replicas_short = false;
	consumer_wait_over(c);
	return true;
}

/* One WAIT: do redis_wait_replicas replicas have this connection's
 * writes (the fetch) within redis_wait_timeout? Quietly false when not
 * (or the connection failed): consumer_replicated waits it out. */
bool
consumer_replicas_now(struct consumer *c)
{
	redisReply *r = redisCommand(c->redis, "WAIT %d %ld",
	    c->cfg->redis_wait_replicas, c->cfg->redis_wait_timeout_ms);
	bool ok = r != NULL && r->type == REDIS_REPLY_INTEGER &&
	    r->integer >= c->cfg->redis_wait_replicas;

	freeReplyObject(r);
	return ok;
}

bool
consumer_switch_pending(const struct consumer *c)
{
	return c->switches != NULL && c->redis != NULL &&
	    atomic_load(c->switches) != c->switches_seen;
}

/* The master saw the sentinels announce a new primary: reconnect before
 * the next batch (quietly: the reconnection says where to). */
void
consumer_follow_switch(struct consumer *c)
{
	if (!consumer_switch_pending(c))
		return;
	redisFree(c->redis);
	c->redis = NULL;
}

