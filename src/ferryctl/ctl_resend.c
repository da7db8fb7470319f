/* ctl_resend.c - a script call whose outcome is unknown (the connection
 * failed before its reply came: Redis killed or restarted, the network
 * cut, a Sentinel failover; or the server answered that it is loading or
 * no longer the primary) sent again, on a new connection, until it
 * answers or CTL_RESEND_FOR_MS has passed. Only for calls that are safe to
 * repeat: an enqueue into a queue that keeps ids (idempotency_window), whose
 * jobs already accepted are answered "already accepted" the second time.
 * With redis_wait_replicas, such a call counts as answered only once that
 * many replicas have it (WAIT on the same connection): a primary that
 * acknowledged it and then lost its role before a replica had it (a
 * Sentinel failover) forgets it, so it is sent again to the new one. */
#include "ctl.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "queue.h"
#include "util.h"

/* Did the call fail in a way that leaves its outcome unknown, or that a
 * new connection may cure? */
static bool
outcome_unknown(const redisReply *r)
{
	if (r == NULL)
		return true;
	return r->type == REDIS_REPLY_ERROR && (queue_role_changed(r) ||
	    strncmp(r->str, "LOADING", 7) == 0 ||
	    strncmp(r->str, "TRYAGAIN", 8) == 0 ||
	    strncmp(r->str, "CLUSTERDOWN", 11) == 0);
}

static void
sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/* Do redis_wait_replicas replicas have the last call of the connection?
 * "" when they do, else why not (static text). */
static const char *
replicas_lag(struct ctl *c, char *why, size_t size)
{
	int want = c->cfg->redis_wait_replicas;
	redisReply *r = redisCommand(c->rc, "WAIT %d %ld", want,
	    c->cfg->redis_wait_timeout_ms);

	if (r != NULL && r->type == REDIS_REPLY_INTEGER && r->integer >= want)
		why[0] = '\0';
	else if (r != NULL && r->type == REDIS_REPLY_INTEGER)
		snprintf(why, size, "reached %lld of %d replicas within "
		    "redis_wait_timeout (%ld ms)", r->integer, want,
		    c->cfg->redis_wait_timeout_ms);
	else
		snprintf(why, size, "WAIT for the replicas failed: %s",
		    r != NULL && r->type == REDIS_REPLY_ERROR ? r->str :
		    c->rc->errstr[0] != '\0' ? c->rc->errstr : "no reply");
	if (r != NULL)
		freeReplyObject(r);
	return why;
}

redisReply *
ctl_script_resent(struct ctl *c, const char *queue, bool may_resend,
    enum lua_script s, int nkeys, int argc, const char **argv,
    const size_t *lens, const char *what)
{
	int64_t deadline = util_monotonic_ms() + CTL_RESEND_FOR_MS;
	long delay = CTL_RESEND_FIRST_MS;

	char lag[200] = "";

	for (int tries = 1;; tries++) {
		redisReply *r = c->rc != NULL ? queue_script(c->rc, s, nkeys, argc,
		    argv, lens) : NULL;
		bool answered = may_resend && !outcome_unknown(r);
		if (answered && r->type != REDIS_REPLY_ERROR &&
		    c->cfg->redis_wait_replicas > 0 &&
		    util_monotonic_ms() + delay <= deadline)
			answered = replicas_lag(c, lag, sizeof(lag))[0] == '\0';
		if (!may_resend || answered ||
		    util_monotonic_ms() + delay > deadline)
			return r;
		fprintf(stderr, "ferryctl: redis at %s: %s: %s; queue %s keeps "
		    "ids (idempotency_window), so it is safe to send again: "
		    "try %d in %ld ms\n", c->addr, what, r != NULL &&
		    r->type != REDIS_REPLY_ERROR ? lag : r == NULL ? (c->rc !=
		    NULL && c->rc->errstr[0] != '\0' ? c->rc->errstr :
		    "no connection") : r->str, queue, tries + 1, delay);
		if (r != NULL)
			freeReplyObject(r);
		sleep_ms(delay);
		delay = delay * 2 > CTL_RESEND_MAX_MS ? CTL_RESEND_MAX_MS :
		    delay * 2;
		if (c->rc != NULL) {
			redisFree(c->rc);
			c->rc = NULL;
		}
		(void)ctl_redis_for(c, queue);
	}
}
