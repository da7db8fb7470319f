/* ctl_resend.c - a script call whose outcome is unknown (the connection
 * failed before its reply came: Redis killed or restarted, the network
 * cut, a Sentinel failover; or the server answered that it is loading or
 * no longer the primary) sent again, on a new connection, until it
 * answers or CTL_RESEND_FOR_MS has passed. Only for calls that are safe to
 * repeat: an enqueue into a queue that keeps ids (idempotency_window), whose
 * jobs already accepted are answered "already accepted" the second time. */
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

redisReply *
ctl_script_resent(struct ctl *c, const char *queue, bool may_resend,
    enum lua_script s, int nkeys, int argc, const char **argv,
    const size_t *lens, const char *what)
{
	int64_t deadline = util_monotonic_ms() + CTL_RESEND_FOR_MS;
	long delay = CTL_RESEND_FIRST_MS;

	for (int tries = 1;; tries++) {
		redisReply *r = c->rc != NULL ? queue_script(c->rc, s, nkeys, argc,
		    argv, lens) : NULL;
		if (!may_resend || !outcome_unknown(r) ||
		    util_monotonic_ms() + delay > deadline)
			return r;
		fprintf(stderr, "ferryctl: redis at %s: %s: %s; queue %s keeps "
		    "ids (idempotency_window), so it is safe to send again: "
		    "try %d in %ld ms\n", c->addr, what, r == NULL ? (c->rc !=
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
