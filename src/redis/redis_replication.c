/* redis_replication.c - what the primary's replication says about the
 * writes a failover can lose, told once at start: how many replicas are
 * connected against redis_wait_replicas, and what min-replicas-to-write
 * implies (a primary cut off from its replicas keeps taking enqueues that
 * the failover then discards, unless it refuses writes). */
#include "redis_replication.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "queue.h"

/* CONFIG GET name as a number, or -1 (refused by an ACL, say). */
static long
config_number(redisContext *c, const char *name)
{
	redisReply *r = redisCommand(c, "CONFIG GET %s", name);
	long v = -1;

	if (r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
	    r->element[1]->type == REDIS_REPLY_STRING)
		v = strtol(r->element[1]->str, NULL, 10);
	freeReplyObject(r);
	return v;
}

/* connected_slaves of INFO replication, or -1. */
static long
connected_replicas(redisContext *c)
{
	redisReply *r = redisCommand(c, "INFO replication");
	const char *p;
	long n = -1;

	if (r != NULL && r->type == REDIS_REPLY_STRING &&
	    (p = strstr(r->str, "connected_slaves:")) != NULL)
		n = strtol(p + strlen("connected_slaves:"), NULL, 10);
	freeReplyObject(r);
	return n;
}

void
redis_replication_say(const struct ferry_config *cfg, redisContext *c)
{
	bool ha = *cfg->redis_sentinels != '\0' || cfg->redis_wait_replicas > 0;
	long replicas = connected_replicas(c);
	long min_write = config_number(c, "min-replicas-to-write");
	long max_lag = config_number(c, "min-replicas-max-lag");
	char addr[300];

	queue_address(cfg, addr, sizeof(addr));
	if (cfg->redis_wait_replicas > 0 && replicas >= 0 &&
	    replicas < cfg->redis_wait_replicas)
		log_warn("redis at %s has %ld replica%s connected and "
		    "redis_wait_replicas is %d: no batch runs until %d replicas "
		    "have its fetch (workers wait, no job is lost)", addr, replicas,
		    replicas == 1 ? "" : "s", cfg->redis_wait_replicas,
		    cfg->redis_wait_replicas);
	if (!ha)
		return;
	if (min_write == 0)
		log_notice("redis at %s: min-replicas-to-write is 0: a primary cut "
		    "off from its replicas keeps taking enqueues, and a failover "
		    "then discards them; min-replicas-to-write 1 with "
		    "min-replicas-max-lag 10 makes it refuse writes after 10 s "
		    "instead (ferry waits meanwhile, producers see errors)", addr);
	else if (min_write > 0)
		log_info("redis at %s refuses writes while fewer than %ld replicas "
		    "lag under %ld s (min-replicas-to-write): ferry then waits, no "
		    "attempt spent, and enqueues fail", addr, min_write, max_lag);
	else
		log_debug("redis at %s refuses CONFIG GET min-replicas-to-write: "
		    "not checked", addr);
}
