/* master_link.h - one asynchronous Redis connection of the master
 * (master_link.c); the duties on it are master_redis.c's. */
#ifndef FERRY_MASTER_LINK_H
#define FERRY_MASTER_LINK_H

#include <ev.h>
#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <stdbool.h>
#include <stdint.h>

#include "config.h"
#include "lua_scripts.h"

struct master;

struct master_link {
	struct master *m;
	void *owner;             /* master_redis.c's state */
	char queue[CONFIG_QUEUE_NAME_MAX + 1];  /* "": every queue */
	redisAsyncContext *ac;
	bool up;
	bool closing;            /* link_free: no reconnecting, no message */
	bool outage_logged;
	bool loading;            /* Redis answers LOADING: said once */
	bool auth_refused;       /* AUTH refused: said once, retried quietly */
	bool replicas_short;     /* NOREPLICAS: said once */
	double retry_s;
	int inflight;
	int64_t last_reply_ms;
	int64_t lost_ms;         /* when the connection was lost (0: up) */
	char addr[CONFIG_HOST_MAX + 16];      /* connected to (or trying) */
	char last_addr[CONFIG_HOST_MAX + 16]; /* the last that answered */
	ev_timer reconnect;
	void (*on_ready)(struct master_link *);  /* up: send what waits */
	void (*on_lost)(struct master_link *);   /* down: mark it unsent */
	struct master_link *next;
};

/* A link for `queue` (NULL: every queue, one Redis), not connected yet;
 * link_start connects. */
struct master_link *link_new(struct master *m, const char *queue,
    void *owner);
void link_start(struct master_link *l);
/* Close without a message and free. */
void link_free(struct master_link *l);
/* Send a command (-1 when the link is not up); cb must count
 * l->inflight down. */
int link_send(struct master_link *l, redisCallbackFn *cb, void *priv,
    int argc, const char **argv);
/* The same with the arguments' lengths (binary-safe; NULL: strlen). */
int link_sendv(struct master_link *l, redisCallbackFn *cb, void *priv,
    int argc, const char **argv, const size_t *lens);
/* EVAL (not EVALSHA): the master's calls are few, and this survives a
 * SCRIPT FLUSH or a restarted Redis without a round trip. */
int link_script(struct master_link *l, enum lua_script s,
    redisCallbackFn *cb, void *priv, int nkeys, int argc, const char **args);
/* A command of `what` failed with rep: a demotion or a moved slot
 * reconnects, LOADING and NOREPLICAS are outages said once, anything else
 * an error. */
void link_failed(struct master_link *l, const char *what,
    const redisReply *rep);
/* A command worked: outages are over (said once). */
void link_worked(struct master_link *l);
/* Replies stopped for watchdog_ms with commands in flight: disconnect
 * (it reconnects); true when it did. */
bool link_stalled(struct master_link *l, int64_t watchdog_ms);
/* Down and waiting for its next attempt: connect now (a worker has just
 * reached Redis). */
void link_retry_now(struct master_link *l);
/* The sentinels announced the primary at addr: reconnect unless there. */
void link_switched(struct master_link *l, const char *addr);

#endif
