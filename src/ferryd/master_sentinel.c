/* master_sentinel.c - the master listens to one sentinel's +switch-master
 * announcements (SUBSCRIBE, asynchronous on the libev loop), so ferry moves
 * to a new primary as soon as the sentinels elect it, even when the old
 * one still accepts connections (a manual SENTINEL FAILOVER, a partition).
 * On a switch of our master name it drops the master's own connection
 * (master_redis_switched) and bumps the scoreboard's redis_switches, which
 * every worker checks before each batch. Errors (READONLY, a lost
 * connection) lead there too; this only makes it quicker. A lost sentinel
 * is not an outage: the next one is tried after a second. */
#include "master_sentinel.h"

#include <hiredis/adapters/libev.h>
#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "master_int.h"
#include "master_redis.h"
#include "sentinel.h"
#include "util.h"

#define RETRY_S 1.0

struct master_sentinel {
	struct master *m;
	redisAsyncContext *ac;
	int index;              /* the sentinel listened to */
	bool closing;
	bool said_down;         /* none reachable: said once */
	ev_timer retry;
};

static void listen_next(struct master_sentinel *s);

static void
schedule(struct master_sentinel *s)
{
	s->ac = NULL;
	if (s->closing)
		return;
	ev_timer_stop(s->m->loop, &s->retry);
	ev_timer_set(&s->retry, RETRY_S, 0.);
	ev_timer_start(s->m->loop, &s->retry);
}

static void
on_disconnect(const redisAsyncContext *ac, int status)
{
	struct master_sentinel *s = ac->data;
	(void)status;

	s->index++;             /* try the next one */
	schedule(s);
}

static void
on_connect(const redisAsyncContext *ac, int status)
{
	struct master_sentinel *s = ac->data;

	if (status != REDIS_OK) {
		s->index++;
		schedule(s);    /* hiredis frees ac */
	}
}

/* "+switch-master NAME OLDIP OLDPORT NEWIP NEWPORT" */
static void
on_message(redisAsyncContext *ac, void *reply, void *privdata)
{
	struct master_sentinel *s = ac->data;
	redisReply *r = reply;
	char name[80], oldip[CONFIG_HOST_MAX], newip[CONFIG_HOST_MAX];
	char addr[CONFIG_HOST_MAX + 16];
	int oldport, newport;
	(void)privdata;

	if (r == NULL || r->type != REDIS_REPLY_ARRAY || r->elements != 3 ||
	    r->element[0]->type != REDIS_REPLY_STRING)
		return;
	if (strcmp(r->element[0]->str, "subscribe") == 0) {
		if (s->said_down)
			log_info("listening to sentinel %d for +switch-master again",
			    s->index % sentinel_count(s->m->cfg) + 1);
		s->said_down = false;
		return;
	}
	if (strcmp(r->element[0]->str, "message") != 0 ||
	    r->element[2]->type != REDIS_REPLY_STRING)
		return;
	if (sscanf(r->element[2]->str, "%79s %255s %d %255s %d", name, oldip,
	    &oldport, newip, &newport) != 5 ||
	    strcmp(name, s->m->cfg->redis_sentinel_master) != 0)
		return;
	snprintf(addr, sizeof(addr), "%s:%d", newip, newport);
	log_info("sentinel: +switch-master %s from %s:%d to %s", name, oldip,
	    oldport, addr);
	atomic_fetch_add(&s->m->sb.header->redis_switches, 1);
	master_redis_switched(s->m, addr);
}

static void
listen_next(struct master_sentinel *s)
{
	const struct ferry_config *cfg = s->m->cfg;
	int n = sentinel_count(cfg), port;
	char host[CONFIG_HOST_MAX];

	if (n == 0 || s->closing)
		return;
	if (s->index >= n) {
		if (!s->said_down)
			log_debug("no sentinel of redis_sentinels takes a "
			    "subscription now: switches are found through errors "
			    "until one does");
		s->said_down = true;
		s->index = 0;
	}
	if (sentinel_address(cfg, s->index, host, sizeof(host), &port) == -1)
		return;
	redisAsyncContext *ac = redisAsyncConnect(host, port);
	if (ac == NULL || ac->err) {
		redisAsyncFree(ac);
		s->index++;
		schedule(s);
		return;
	}
	ac->data = s;
	s->ac = ac;
	redisLibevAttach(s->m->loop, ac);
	redisAsyncSetConnectCallback(ac, on_connect);
	redisAsyncSetDisconnectCallback(ac, on_disconnect);
	if (*cfg->redis_sentinel_password != '\0')
		redisAsyncCommand(ac, NULL, NULL, "AUTH %s",
		    cfg->redis_sentinel_password);
	redisAsyncCommand(ac, on_message, NULL, "SUBSCRIBE +switch-master");
}

static void
retry_cb(struct ev_loop *loop, ev_timer *t, int revents)
{
	(void)loop;
	(void)revents;
	listen_next(t->data);
}

void
master_sentinel_start(struct master *m)
{
	struct master_sentinel *s;

	if (sentinel_count(m->cfg) == 0)
		return;
	s = xcalloc(1, sizeof(*s));
	s->m = m;
	s->index = sentinel_current();
	ev_init(&s->retry, retry_cb);
	s->retry.data = s;
	m->sentinel = s;
	listen_next(s);
}

void
master_sentinel_stop(struct master *m)
{
	struct master_sentinel *s = m->sentinel;

	if (s == NULL)
		return;
	s->closing = true;
	ev_timer_stop(m->loop, &s->retry);
	if (s->ac != NULL)
		redisAsyncFree(s->ac);
	free(s);
	m->sentinel = NULL;
}
