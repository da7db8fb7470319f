/* consumer.c - a worker's cycle against Redis: take a batch into its own
 * processing list (fetch.lua, or BLMOVE to wait when the queue is empty),
 * run the handler, settle every job's outcome in one step (settle.lua).
 * A lost connection never loses a job: the batch stays in the processing
 * list, the worker reconnects with backoff and settles it then, or the
 * master hands the list back if this process dies. */
#include "consumer.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/random.h>
#include <unistd.h>

#include "backoff.h"
#include "cache.h"
#include "dead_archive.h"
#include "handler.h"
#include "log.h"
#include "master.h"
#include "script_args.h"
#include "sentinel.h"
#include "sink_pg.h"
#include "util.h"

#define CONSUMER_TIMEOUT_MS 10000   /* any Redis command */
#define CONSUMER_WAIT_S "1"         /* BLMOVE block, seconds */
#define CONSUMER_RETRY_MIN_MS 100
#define CONSUMER_RETRY_MAX_MS 5000
#define CONSUMER_ARCHIVE_IDLE_MS 60000
#define CONSUMER_DIED_REASON "worker died while processing"

struct batch {
	bool wrapped;           /* taken from requeue: elements are wrappers */
	int n, cap;
	char **els;
	size_t *lens;
	struct job *jobs;
	struct handler_result *results;
};

static void
sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

static void
drop_connection(struct consumer *c, const char *what)
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
static bool
not_primary(struct consumer *c, const char *what, const redisReply *r)
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
	sleep_ms(CONSUMER_RETRY_MIN_MS);
	return true;
}

/* A script answered with an error. HANDEDBACK means a master has already
 * handed this worker's jobs back as dead (we were frozen, or our host was
 * declared dead): stop at once, without fetching again. Any other error is
 * logged once while it repeats (a script error, e.g. `ready` of the wrong
 * type, would otherwise be logged thousands of times a second) and the
 * caller backs off. */
static void
handed_back(struct consumer *c, const char *what, const redisReply *r)
{
	if (not_primary(c, what, r))
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
	sleep_ms(c->error_delay_ms);
	c->error_delay_ms = c->error_delay_ms * 2 > CONSUMER_RETRY_MAX_MS ?
	    CONSUMER_RETRY_MAX_MS : c->error_delay_ms * 2;
}

/* A script call worked: the next distinct error is logged again. */
static void
script_ok(struct consumer *c)
{
	if (c->last_error[0] != '\0')
		log_notice("queue %s: redis scripts work again", c->q->name);
	c->last_error[0] = '\0';
	c->error_delay_ms = CONSUMER_RETRY_MIN_MS;
}

/* Redis is loading its data set (a restart from the AOF): an outage, not
 * an error. */
static bool
loading(struct consumer *c, const redisReply *r)
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
	sleep_ms(CONSUMER_RETRY_MIN_MS);
	return true;
}

static bool
registered(struct consumer *c)
{
	struct sargs a;

	sargs_register(&a, c->cfg->redis_prefix, c->q->name, c->worker_id,
	    c->master_id);
	redisReply *r = queue_script(c->redis, a.script, a.nkeys, a.argc, a.argv,
	    a.lens);
	bool ok = r != NULL && r->type != REDIS_REPLY_ERROR;

	if (r != NULL && !ok && !loading(c, r))
		handed_back(c, "register", r);
	freeReplyObject(r);
	return ok;
}

/* Connect (and register) with backoff until it works or we must stop. */
static bool
connected(struct consumer *c)
{
	long delay = CONSUMER_RETRY_MIN_MS;
	char err[1024];
	bool refused;

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
			drop_connection(c, "register");
		else if (reached)
			continue;       /* not the primary: not_primary() waited */
		else if (!c->outage || (refused && !c->auth_refused)) {
			/* refused credentials too: the operator may fix the
			 * ACL while we wait, and a restart would not help */
			log_msg(refused ? CONFIG_LOG_ERROR : CONFIG_LOG_WARN,
			    "queue %s: %s (retrying every %d s at most)",
			    c->q->name, err, CONSUMER_RETRY_MAX_MS / 1000);
			if (!c->outage)
				c->outage_since = util_monotonic_ms();
			c->outage = true;
			c->auth_refused = refused;
		}
		scoreboard_set_error(c->slot, err);
		sleep_ms(delay);
		delay = delay * 2 > CONSUMER_RETRY_MAX_MS ? CONSUMER_RETRY_MAX_MS :
		    delay * 2;
	}
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
	c->resume = true;
	return true;
}

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

/* Run fetch.lua for up to n more jobs, `held` already in the list (moved
 * there by BLMOVE from ready). */
static redisReply *
fetch(struct consumer *c, int n, int held)
{
	struct sargs a;

	snprintf(c->batch_key, sizeof(c->batch_key), "%s:%s:%ld", c->worker_id,
	    c->nonce, ++c->batch_seq);
	sargs_fetch(&a, c->cfg->redis_prefix, c->q->name, c->worker_id,
	    c->master_id, c->batch_key, n, held, c->q->max_recoveries);
	return queue_script(c->redis, a.script, a.nkeys, a.argc, a.argv, a.lens);
}

/* fetch.lua's reply {kind, {elements}} into b. */
static void
batch_add_fetched(struct batch *b, const redisReply *r)
{
	if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
	    r->element[0]->type != REDIS_REPLY_STRING)
		return;
	b->wrapped = r->element[0]->str[0] == 'w';
	batch_add_reply(b, r->element[1]);
}

/* Did fetch.lua return no job? */
static bool
fetched_nothing(const redisReply *r)
{
	return r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
	    r->element[1]->type == REDIS_REPLY_ARRAY &&
	    r->element[1]->elements == 0;
}

/* Wait up to a second for a job with BLMOVE (it cannot run at maxmemory:
 * then poll), and top the batch up with fetch.lua. */
static redisReply *
wait_for_jobs(struct consumer *c, struct batch *b)
{
	redisReply *r = redisCommand(c->redis, "BLMOVE %s %s RIGHT RIGHT %s",
	    c->keys.ready, c->proc, CONSUMER_WAIT_S);

	if (r == NULL || r->type == REDIS_REPLY_NIL)
		return r;
	if (r->type == REDIS_REPLY_ERROR) {
		if (strncmp(r->str, "OOM", 3) != 0)
			log_warn("queue %s: BLMOVE: %s", c->q->name, r->str);
		sleep_ms(20);
		return r;
	}
	b->wrapped = false;         /* from ready: a producer's document */
	batch_add_reply(b, r);
	freeReplyObject(r);
	return fetch(c, c->q->batch_size - 1, 1);
}

/* A batch fetched before the connection dropped: keep the key stored
 * beside it, which may name a transaction that committed meanwhile. */
static bool
resume_key(struct consumer *c, struct batch *b)
{
	redisReply *r = redisCommand(c->redis, "HGET %s %s", c->keys.bkeys,
	    c->worker_id);

	if (r == NULL)
		return false;
	if (r->type == REDIS_REPLY_STRING && r->len > 2) {
		/* "w KEY" or "r KEY" (batch_of in src/lua/common.lua) */
		b->wrapped = r->str[0] == 'w';
		snprintf(c->batch_key, sizeof(c->batch_key), "%s", r->str + 2);
	} else {
		b->wrapped = false;     /* only BLMOVE put it there */
		freeReplyObject(r);
		if ((r = fetch(c, 0, b->n)) == NULL)
			return false;
	}
	freeReplyObject(r);
	log_notice("queue %s: resuming a batch of %d jobs held before the "
	    "connection dropped", c->q->name, b->n);
	return true;
}

/* Fill b with the next batch; false when the connection failed. */
static bool
take_batch(struct consumer *c, struct batch *b)
{
	redisReply *r;

	if (c->resume) {
		/* a batch fetched before the connection dropped */
		r = redisCommand(c->redis, "LRANGE %s 0 -1", c->proc);
		if (r == NULL)
			return false;
		c->resume = false;
		batch_add_reply(b, r);
		freeReplyObject(r);
		if (b->n > 0)
			return resume_key(c, b);
	}
	r = fetch(c, c->q->batch_size, 0);
	if (r != NULL && fetched_nothing(r)) {
		freeReplyObject(r);
		r = wait_for_jobs(c, b);
	}
	if (r == NULL)
		return false;
	if (r->type == REDIS_REPLY_ERROR && strncmp(r->str, "OOM", 3) != 0 &&
	    !loading(c, r))
		handed_back(c, "fetch", r);
	else if (r->type == REDIS_REPLY_ARRAY)
		script_ok(c);
	if (r->type == REDIS_REPLY_ERROR && b->n > 0) {
		/* a job BLMOVE moved in, but fetch.lua did not store the batch
		 * key beside it: never write a batch under a key Redis does not
		 * hold. Read the list again (resume) once fetch works. */
		batch_clear(b);
		c->resume = true;
	}
	batch_add_fetched(b, r);
	freeReplyObject(r);
	return c->redis != NULL;        /* not_primary() may have dropped it */
}

/* Run the exec handler on the jobs idx[0..n). When it crashes leaving
 * several jobs unanswered, run those again in halves until the crash is
 * pinned on single jobs: a poison job never burns its batch-mates'
 * attempts. (A timeout is not split: that would multiply the wait.) */
static void
run_exec(struct consumer *c, struct batch *b, const int *idx, int n)
{
	struct job *jobs = xmalloc(sizeof(*jobs) * (size_t)n);
	struct handler_result *res = xmalloc(sizeof(*res) * (size_t)n);
	int *again = xmalloc(sizeof(*again) * (size_t)n), nagain = 0;
	char err[1024] = "";

	for (int i = 0; i < n; i++) {
		jobs[i] = b->jobs[idx[i]];      /* shallow: b keeps ownership */
		res[i] = b->results[idx[i]];
	}
	int rc = handler_exec_run(c->q, jobs, res, n, err, sizeof(err));
	if (err[0] != '\0') {
		log_warn("queue %s: %s", c->q->name, err);
		scoreboard_set_error(c->slot, err);
	}
	for (int i = 0; i < n; i++) {
		b->results[idx[i]] = res[i];
		if (rc == HANDLER_EXEC_CRASHED && res[i].unanswered)
			again[nagain++] = idx[i];
	}
	if (nagain > 1) {
		log_info("queue %s: handler crashed with %d jobs unanswered: "
		    "splitting them to find the culprit", c->q->name, nagain);
		run_exec(c, b, again, nagain / 2);
		run_exec(c, b, again + nagain / 2, nagain - nagain / 2);
	}
	free(jobs);
	free(res);
	free(again);
}

/* handler = postgres: write the batch. While PostgreSQL is unreachable the
 * batch stays in Redis and no attempt is burnt: retry with backoff. False
 * when asked to stop meanwhile (the batch is still held). */
static bool
run_sink(struct consumer *c, struct batch *b)
{
	long delay = CONSUMER_RETRY_MIN_MS;
	int64_t since = 0;
	char err[512];

	if (c->sink == NULL)
		c->sink = sink_pg_new(c->cfg, c->q);
	for (;;) {
		enum sink_status st = sink_pg_run(c->sink, b->jobs, b->results,
		    b->n, c->batch_key, err, sizeof(err));
		if (st == SINK_OK)
			break;
		scoreboard_set_error(c->slot, err);
		if (st == SINK_HANDED_BACK) {
			/* the jobs are another worker's now: settle nothing */
			c->evicted = true;
			return false;
		}
		if (st == SINK_FATAL) {
			log_error("queue %s: %s; this worker stops until a reload "
			    "(SIGHUP)", c->q->name, err);
			_exit(FERRY_EXIT_FATAL);
		}
		if (since == 0) {
			log_warn("queue %s: %s (the batch of %d jobs waits in Redis; "
			    "retrying)", c->q->name, err, b->n);
			since = util_monotonic_ms();
		} else {
			log_debug("queue %s: %s (still waiting)", c->q->name, err);
		}
		scoreboard_end_batch(c->slot, 0);    /* waiting, not hung */
		for (long waited = 0; waited < delay; waited += 100) {
			if (c->should_stop())
				return false;
			sleep_ms(100);
		}
		delay = delay * 2 > CONSUMER_RETRY_MAX_MS ? CONSUMER_RETRY_MAX_MS :
		    delay * 2;
		scoreboard_begin_batch(c->slot, util_monotonic_ms());
	}
	if (since != 0)
		log_notice("queue %s: postgres reachable again after %.1f s",
		    c->q->name, (double)(util_monotonic_ms() - since) / 1000.);
	/* test hook: die between COMMIT and the Redis ack, once */
	if (c->exit_after_commit != NULL && unlink(c->exit_after_commit) == 0) {
		log_warn("test hook: exiting between COMMIT and ack");
		_exit(1);
	}
	sink_pg_prune(c->sink);
	return true;
}

/* Parse the jobs and read the cache keys they name; an invalid job (or one
 * whose cache key is gone) fails at once. False when the connection
 * failed while reading the cache (the batch stays held). */
static bool
prepare(struct consumer *c, struct batch *b)
{
	int h = c->q->handler;
	enum cache_mode mode = h == CONFIG_HANDLER_EXEC ? CACHE_JSON :
	    h == CONFIG_HANDLER_POSTGRES ? CACHE_ROWS : CACHE_EXISTS;

	b->jobs = xcalloc((size_t)b->n, sizeof(*b->jobs));
	b->results = xcalloc((size_t)b->n, sizeof(*b->results));
	/* the sink names the jobs it fails (job_id), others need all names */
	for (int i = 0; i < b->n; i++) {
		struct job *j = &b->jobs[i];
		job_parse_held(j, b->els[i], b->lens[i], c->q->max_job_bytes,
		    b->wrapped);
		if (h != CONFIG_HANDLER_POSTGRES)
			job_id(j);
		/* recovered too often: never run again. The sink first checks
		 * the batches it may have been written in (a job written
		 * before its worker died is done, not dead). */
		if (j->invalid == NULL && j->recoveries > c->q->max_recoveries) {
			if (h == CONFIG_HANDLER_POSTGRES && j->nstamps > 0)
				j->bury = true;
			else
				j->invalid = CONSUMER_DIED_REASON;
		}
	}
	if (cache_load(c->redis, b->jobs, b->n, c->cfg->redis_prefix, c->q,
	    mode) == -1)
		return false;
	for (int i = 0; i < b->n; i++) {
		if (b->jobs[i].invalid != NULL) {
			b->results[i].outcome = HANDLER_FAIL;
			snprintf(b->results[i].message,
			    sizeof(b->results[i].message), "%s", b->jobs[i].invalid);
		}
	}
	return true;
}

static bool
run_handler(struct consumer *c, struct batch *b)
{
	if (c->q->handler == CONFIG_HANDLER_EXEC) {
		int *all = xmalloc(sizeof(*all) * (size_t)b->n);
		for (int i = 0; i < b->n; i++)
			all[i] = i;
		run_exec(c, b, all, b->n);
		free(all);
	} else if (c->q->handler == CONFIG_HANDLER_POSTGRES) {
		return run_sink(c, b);
	} else {
		handler_noop_run(b->jobs, b->results, b->n);
	}
	return true;
}

/* The settle.lua arguments of a job that is not simply done. */
static void
outcome_args(struct consumer *c, struct job *j,
    struct handler_result *res, const char **argv, char *num,
    size_t numsize, char *reason, size_t reasonsize)
{
	int attempts = j->attempts + 1;

	util_utf8_fix(res->message);
	argv[1] = "ok";
	argv[2] = "";
	argv[3] = "";
	argv[4] = res->message;
	argv[5] = j->cache_key != NULL ? j->cache_key : "";
	if (res->outcome == HANDLER_OK)
		return;
	argv[2] = job_id(j);
	if (res->outcome == HANDLER_RETRY && attempts < c->q->max_attempts) {
		argv[1] = "retry";
		snprintf(num, numsize, "%ld", backoff_retry_delay(attempts,
		    c->q->backoff_base_ms, c->q->backoff_max_ms,
		    (uint32_t)random()));
		argv[3] = num;
	} else {
		argv[1] = j->cache_missing ? "missing" : "dead";
		if (j->invalid != NULL)
			snprintf(reason, reasonsize, "%s", j->invalid);
		else if (j->bury && res->outcome == HANDLER_FAIL)
			snprintf(reason, reasonsize, "%s", CONSUMER_DIED_REASON);
		else if (res->outcome == HANDLER_FAIL)
			snprintf(reason, reasonsize, "failed by the handler");
		else
			snprintf(reason, reasonsize, "failed %d attempts (max_attempts)",
			    attempts);
		util_utf8_fix(reason);
		argv[3] = reason;
	}
}

/* One settle.lua call: jobs done without a cache key are not named. */
static redisReply *
settle_once(struct consumer *c, struct batch *b)
{
	struct named {
		char pos[12], num[24], reason[300];
	} *named;
	int listed = 0;

	for (int i = 0; i < b->n; i++)
		listed += b->results[i].outcome != HANDLER_OK ||
		    b->jobs[i].cache_key != NULL;
	struct sargs fixed;
	sargs_settle(&fixed, c->cfg->redis_prefix, c->q->name, c->worker_id,
	    c->master_id, b->n);
	int argc = SARGS_SETTLE_FIXED + SARGS_SETTLE_PER_JOB * listed;
	const char **argv = xcalloc((size_t)argc, sizeof(*argv));
	named = listed > 0 ? xcalloc((size_t)listed, sizeof(*named)) : NULL;
	memcpy(argv, fixed.argv, SARGS_SETTLE_FIXED * sizeof(*argv));
	for (int i = 0, k = 0; i < b->n; i++) {
		if (b->results[i].outcome == HANDLER_OK &&
		    b->jobs[i].cache_key == NULL)
			continue;
		const char **a = argv + SARGS_SETTLE_FIXED +
		    SARGS_SETTLE_PER_JOB * k;
		snprintf(named[k].pos, sizeof(named[k].pos), "%d", i + 1);
		a[0] = named[k].pos;
		outcome_args(c, &b->jobs[i], &b->results[i], a, named[k].num,
		    sizeof(named[k].num), named[k].reason,
		    sizeof(named[k].reason));
		k++;
	}
	redisReply *r = queue_script(c->redis, LUA_SETTLE, fixed.nkeys, argc,
	    argv, NULL);
	free(argv);
	free(named);
	return r;
}

/* Settle until Redis has it; a dropped connection is retried (settle.lua
 * is idempotent). Returns false when we must stop with the batch held. */
static bool
settle(struct consumer *c, struct batch *b)
{
	for (;;) {
		if (!connected(c))
			return false;
		redisReply *r = settle_once(c, b);
		if (r == NULL) {
			drop_connection(c, "settle");
			continue;
		}
		if (loading(c, r) || not_primary(c, "settle", r)) {
			freeReplyObject(r);
			continue;
		}
		bool ok = r->type != REDIS_REPLY_ERROR;
		c->buried = r->type == REDIS_REPLY_ARRAY && r->elements == 3 ?
		    r->element[2]->integer : 0;
		if (!ok) {
			handed_back(c, "settle", r);
		} else if (r->type == REDIS_REPLY_ARRAY && r->elements == 3 &&
		    (r->element[1]->integer > 0 || r->element[2]->integer > 0)) {
			log_info("queue %s: batch of %d: %lld done, %lld to retry, "
			    "%lld dead", c->q->name, b->n, r->element[0]->integer,
			    r->element[1]->integer, r->element[2]->integer);
		}
		freeReplyObject(r);
		return ok;
	}
}

/* A fetch that a failover can lose must not run: the new primary would
 * still hold those jobs in ready (or requeue), and another batch would
 * write them again. So with redis_wait_replicas a batch runs only once
 * that many replicas acknowledge this connection's writes (the fetch, or
 * after a reconnection register.lua's, which follows it). While they do
 * not, the batch waits in its list: an outage, said once. False when the
 * connection went, the primary moved, or we must stop. */
static bool
replicated(struct consumer *c, int n)
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
			handed_back(c, "WAIT", r);
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
		sleep_ms(CONSUMER_RETRY_MIN_MS);    /* WAIT itself waited */
	}
	if (c->replicas_short)
		log_notice("queue %s: replicas acknowledge writes again: batches "
		    "run", c->q->name);
	c->replicas_short = false;
	return true;
}

/* The master saw the sentinels announce a new primary: reconnect before
 * the next batch (quietly: the reconnection says where to). */
static void
follow_switch(struct consumer *c)
{
	if (c->switches == NULL || c->redis == NULL ||
	    atomic_load(c->switches) == c->switches_seen)
		return;
	redisFree(c->redis);
	c->redis = NULL;
}

/* Keep the dead list within dead_max: after a settle that dead-lettered
 * jobs, and at most once a minute while idle (the master's reclaims
 * dead-letter too). The file append and fsync are why a worker does it:
 * the master must never block. */
static void
archive_dead(struct consumer *c, bool now)
{
	int64_t t = util_monotonic_ms();

	if (c->q->dead_max <= 0 ||
	    (!now && t - c->archive_ms < CONSUMER_ARCHIVE_IDLE_MS))
		return;
	c->archive_ms = t;
	if (dead_archive_run(c->redis, c->cfg->redis_prefix, c->q,
	    &c->keys) == -1)
		drop_connection(c, "dead-letter archive");
}

/* Batch keys stay in ferry_batches for done_retention (days), and worker
 * ids are made of pids, which the kernel reuses: a random part per process
 * keeps a new worker's keys from ever matching an old committed batch
 * (which would ack its jobs unwritten). */
static void
set_nonce(struct consumer *c)
{
	uint64_t r;

	if (getrandom(&r, sizeof(r), 0) != (ssize_t)sizeof(r))
		r = ((uint64_t)random() << 32) ^ (uint64_t)random() ^
		    (uint64_t)util_realtime_ms();
	snprintf(c->nonce, sizeof(c->nonce), "%016llx", (unsigned long long)r);
}

int
consumer_run(struct consumer *c)
{
	struct batch b;

	memset(&b, 0, sizeof(b));
	queue_keys_init(&c->keys, c->cfg->redis_prefix, c->q->name);
	queue_proc_key(&c->keys, c->worker_id, c->proc, sizeof(c->proc));
	srandom((unsigned)getpid() ^ (unsigned)util_monotonic_ms());
	set_nonce(c);
	c->error_delay_ms = CONSUMER_RETRY_MIN_MS;
	while (!c->should_stop() && !c->evicted && connected(c)) {
		/* quiet (TSTP) for all, paused for this queue (control) */
		if (atomic_load(&c->quiet[0]) || atomic_load(&c->slot->paused)) {
			scoreboard_set_state(c->slot, SB_PAUSED);
			sleep_ms(100);
			continue;
		}
		scoreboard_set_state(c->slot, SB_IDLE);
		follow_switch(c);
		if (c->redis == NULL)
			continue;
		if (!take_batch(c, &b)) {
			drop_connection(c, "fetch");
			batch_clear(&b);
			continue;
		}
		if (c->evicted) {
			/* a job BLMOVE moved in after the hand-back is not ours:
			 * the reaper sweeps it back from the tombstoned list */
			batch_clear(&b);
			break;
		}
		if (b.n == 0) {
			archive_dead(c, false);
			continue;
		}
		if (!replicated(c, b.n)) {
			drop_connection(c, "replication wait");
			batch_clear(&b);
			continue;
		}
		if (!prepare(c, &b)) {
			drop_connection(c, "cache read");
			batch_clear(&b);
			continue;
		}
		scoreboard_begin_batch(c->slot, util_monotonic_ms());
		if (!run_handler(c, &b)) {
			batch_clear(&b);
			break;          /* stopping with the batch held */
		}
		bool settled = settle(c, &b);
		scoreboard_end_batch(c->slot, settled ? b.n : 0);
		c->jobs_done += settled ? b.n : 0;
		batch_clear(&b);
		if (!settled)
			return c->should_stop() || c->evicted ? 0 : 1;
		archive_dead(c, c->buried > 0);
		if (c->q->max_jobs_per_worker > 0 &&
		    c->jobs_done >= c->q->max_jobs_per_worker) {
			log_info("queue %s: %ld jobs done, max_jobs_per_worker "
			    "reached: exiting to be replaced", c->q->name,
			    c->jobs_done);
			break;
		}
	}
	free(b.els);
	free(b.lens);
	sink_pg_free(c->sink);
	c->sink = NULL;
	redisFree(c->redis);
	c->redis = NULL;
	return 0;
}
