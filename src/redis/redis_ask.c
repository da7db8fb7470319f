/* redis_ask.c - the short connection to a node asked where to go. */
#include "redis_ask.h"

#include <stdio.h>
#include <sys/time.h>

redisContext *
redis_ask_connect(const char *what, const char *host, int port,
    long timeout_ms, char *err, size_t errsize)
{
	struct timeval tv = { timeout_ms / 1000, (timeout_ms % 1000) * 1000 };
	redisContext *c;

	c = redisConnectWithTimeout(host, port, tv);
	if (c == NULL || c->err) {
		snprintf(err, errsize, "%s %s:%d: %s", what, host, port,
		    c != NULL ? c->errstr : "out of memory");
		redisFree(c);
		return NULL;
	}
	redisSetTimeout(c, tv);
	return c;
}

int
redis_ask_end(redisContext *c, redisReply *r, int rc)
{
	freeReplyObject(r);
	redisFree(c);
	return rc;
}
