/* consumer_settle.c - the end of a worker's cycle: settle every job of a
 * batch in one settle.lua call (the jobs done without a cache key are not
 * named, so an all-ok batch is one DEL of the processing list), retried
 * on a dropped connection (settle.lua is idempotent), and keep the dead
 * list within dead_max. */
#include "consumer.h"
#include "consumer_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backoff.h"
#include "dead_archive.h"
#include "handler.h"
#include "log.h"
#include "script_args.h"
#include "util.h"

/* Does settle.lua mark this job's id (a queue that holds ids: its window,
 * or ids left from a window since turned off, as the last fetch said; a
 * job with an id of its own: src/redis/lua/common.lua, idempotency)? */
static bool
keeps_id(const struct consumer *c, const struct job *j)
{
	return (c->q->idempotency_window_ms > 0 || c->ids_held) &&
	    j->id[0] != '\0' && strcmp(j->id, j->digest) != 0;
}

/* Job j's own refusal (j->invalid, or what it was buried with), or NULL.
 * own: whether res fails it with that reason, not with the reason of a
 * batch that failed it before (doc/design.md, R10, R2). */
static const char *
refusal(const struct job *j, const struct handler_result *res, bool *own)
{
	const char *text = j->invalid != NULL ? j->invalid : !j->bury ? NULL :
	    j->bury_reason != NULL ? j->bury_reason : CONSUMER_DIED_REASON;
	char clean[sizeof(res->message)];

	*own = false;
	if (text != NULL && res->outcome == HANDLER_FAIL) {
		util_utf8_copy(clean, sizeof(clean), text, strlen(text));
		*own = strcmp(res->message, clean) == 0;
	}
	return text;
}

/* The settle.lua arguments of a job that is not simply done. */
static void
outcome_args(struct consumer *c, struct job *j,
    struct handler_result *res, const char **argv, char *num,
    size_t numsize, char *reason, size_t reasonsize)
{
	int attempts = j->attempts + 1;
	bool own;

	util_utf8_fix(res->message);
	argv[1] = "ok";
	argv[2] = keeps_id(c, j) ? j->id : "";
	argv[3] = "";
	argv[4] = res->message;
	argv[5] = j->cache_key != NULL ? j->cache_key : "";
	/* the id moves only for the job the set holds it for (its SHA-1) */
	argv[6] = keeps_id(c, j) ? job_digest(j) : "";
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
		/* its own refusal (missing: counted as cache_missing), unless
		 * a batch failed it for a reason of its own: failed by the
		 * handler */
		const char *text = refusal(j, res, &own);
		argv[1] = j->cache_missing && own ? "missing" : "dead";
		if (own)
			snprintf(reason, reasonsize, "%s", text);
		else if (res->outcome == HANDLER_FAIL)
			snprintf(reason, reasonsize, "failed by the handler");
		else
			snprintf(reason, reasonsize, "failed %d attempts (max_attempts)",
			    attempts);
		util_utf8_fix(reason);
		argv[3] = reason;
	}
}

static bool
listed_in_settle(const struct consumer *c, const struct job *j,
    const struct handler_result *res)
{
	return res->outcome != HANDLER_OK || j->cache_key != NULL ||
	    keeps_id(c, j);
}

/* One settle.lua call: jobs done without a cache key (or an id the queue
 * keeps) are not named. */
static redisReply *
settle_once(struct consumer *c, struct consumer_lane *ln)
{
	struct batch *b = ln->b;
	struct named {
		char pos[12], num[24], reason[300];
	} *named;
	int listed = 0;

	for (int i = 0; i < b->n; i++)
		listed += listed_in_settle(c, &b->jobs[i], &b->results[i]);
	struct sargs fixed;
	sargs_settle(&fixed, c->cfg->redis_prefix, c->q->name, ln->id,
	    c->master_id, b->n);
	int argc = SARGS_SETTLE_FIXED + SARGS_SETTLE_PER_JOB * listed;
	const char **argv = xcalloc((size_t)argc, sizeof(*argv));
	named = listed > 0 ? xcalloc((size_t)listed, sizeof(*named)) : NULL;
	memcpy(argv, fixed.argv, SARGS_SETTLE_FIXED * sizeof(*argv));
	for (int i = 0, k = 0; i < b->n; i++) {
		if (!listed_in_settle(c, &b->jobs[i], &b->results[i]))
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

/* Why the first job of b that did not succeed did not, for the log. */
static const char *
first_reason(const struct batch *b)
{
	for (int i = 0; b->results != NULL && i < b->n; i++)
		if (b->results[i].outcome != HANDLER_OK)
			return b->jobs[i].invalid != NULL ? b->jobs[i].invalid :
			    b->results[i].message;
	return "";
}

/* Settle until Redis has it; a dropped connection is retried (settle.lua
 * is idempotent). Returns false when we must stop with the batch held. */
bool
consumer_settle(struct consumer *c, struct consumer_lane *ln)
{
	struct batch *b = ln->b;

	for (;;) {
		if (!consumer_connected(c))
			return false;
		redisReply *r = settle_once(c, ln);
		if (r == NULL) {
			consumer_drop_connection(c, "settle");
			continue;
		}
		if (consumer_loading(c, r) || consumer_not_primary(c, "settle", r)) {
			freeReplyObject(r);
			continue;
		}
		bool ok = r->type != REDIS_REPLY_ERROR;
		c->buried = r->type == REDIS_REPLY_ARRAY && r->elements == 3 ?
		    r->element[2]->integer : 0;
		if (!ok) {
			consumer_handed_back(c, "settle", r);
		} else if (r->type == REDIS_REPLY_ARRAY && r->elements == 3 &&
		    (r->element[1]->integer > 0 || r->element[2]->integer > 0)) {
			log_info("queue %s: batch of %d: %lld done, %lld to retry, "
			    "%lld dead (first: %s)", c->q->name, b->n,
			    r->element[0]->integer, r->element[1]->integer,
			    r->element[2]->integer, first_reason(b));
		}
		freeReplyObject(r);
		return ok;
	}
}

/* Keep the dead list within dead_max: after a settle that dead-lettered
 * jobs, and at most once a minute while idle (the master's reclaims
 * dead-letter too). The file append and fsync are why a worker does it:
 * the master must never block. */
void
consumer_archive_dead(struct consumer *c, bool now)
{
	int64_t t = util_monotonic_ms();

	if (c->q->dead_max <= 0 ||
	    (!now && t - c->archive_ms < CONSUMER_ARCHIVE_IDLE_MS))
		return;
	c->archive_ms = t;
	if (dead_archive_run(c->redis, c->cfg->redis_prefix, c->q,
	    &c->keys) == -1)
		consumer_drop_connection(c, "dead-letter archive");
}
