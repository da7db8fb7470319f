/* redis_ask.h - the short connection that asks one node of a list where
 * to go (a cluster seed, a sentinel), so a dead node costs one timeout. */
#ifndef FERRY_REDIS_ASK_H
#define FERRY_REDIS_ASK_H

#include <hiredis/hiredis.h>
#include <stddef.h>

/* A connection to host:port within timeout_ms, which also bounds each
 * reply; NULL with "WHAT HOST:PORT: why" in err. */
redisContext *redis_ask_connect(const char *what, const char *host,
    int port, long timeout_ms, char *err, size_t errsize);
/* The end of the question: its last reply r (NULL: none) and c freed;
 * returns rc. */
int redis_ask_end(redisContext *c, redisReply *r, int rc);

#endif
