/* master_redis.c - the master's Redis duties, asynchronous on its libev loop
 * so it never blocks: keep this host's heartbeat in every queue alive, hand
 * back the processing list of every worker that dies (at once, and again
 * after an outage until Redis confirms), reap the lists of dead hosts,
 * promote due retries and scheduled jobs (a backlog in quick bounded
 * steps), and carry metrics.c's questions. The connections
 * are master_link.c's: one for all queues, or with redis_cluster one per
 * queue (each to the node of its slot). */
#include "master_redis.h"

#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "lua_scripts.h"
#include "master_events.h"
#include "master_int.h"
#include "master_id.h"
#include "master_link.h"
#include "queue.h"
#include "script_args.h"
#include "util.h"
#include "worker.h"
#include "consumer.h"

#define PROMOTE_INTERVAL_S 0.1
#define PROMOTE_LIMIT 1000
#define WATCHDOG_MS 10000

struct reclaim {
	char queue[CONFIG_QUEUE_NAME_MAX + 1];
	char worker_id[200];     /* the processing list's id */
	int max_recoveries;
	bool bump, count;
	bool sent;
	bool done;               /* reclaim.lua answered; WAIT pending */
	struct reclaim *next;
};

struct master_redis {
	struct master *m;
	struct master_link *links;       /* the first one: INFO, messages */
	bool reap_waiting;       /* the reaper waits after a gap (reap.lua) */
	bool replicas_short;     /* a hand-back's WAIT fell short: said once */
	int64_t gap_said_ms;     /* heartbeat.lua's gap warning, once a ttl */
	ev_timer heartbeat, reap, promote;
	struct reclaim *pending;
	struct promoting *promoting;     /* promote.lua calls in flight */
};

static bool
cluster(const struct master_redis *r)
{
	return *r->m->cfg->redis_cluster != '\0';
}

static void link_ready(struct master_link *l);
static void link_lost(struct master_link *l);

/* The link that serves queue: the only one, or in a cluster the queue's
 * own (made and connected on first use). */
static struct master_link *
link_of(struct master_redis *r, const char *queue)
{
	struct master_link *l;

	if (!cluster(r) || queue == NULL)
		return r->links;
	for (l = r->links; l != NULL; l = l->next)
		if (strcmp(l->queue, queue) == 0)
			return l;
	l = link_new(r->m, queue, r);
	l->on_ready = link_ready;
	l->on_lost = link_lost;
	l->next = r->links->next;       /* the first stays first */
	r->links->next = l;
	link_start(l);
	return l;
}

/* Is this reclaim for a queue link l serves? */
static bool
serves(const struct master_link *l, const char *queue)
{
	return l->queue[0] == '\0' || strcmp(l->queue, queue) == 0;
}

/* Reply callback for fire-and-forget commands: log errors, and the jobs a
 * reaper or reclaim ({back, dead, ...}) moved. */
static void
on_reply(redisAsyncContext *ac, void *reply, void *privdata)
{
	struct master_link *l = ac->data;
	redisReply *rep = reply;
	const char *what = privdata;

	l->inflight--;
	l->last_reply_ms = util_monotonic_ms();
	if (rep != NULL && rep->type == REDIS_REPLY_ERROR)
		link_failed(l, what, rep);
	else if (rep != NULL)
		link_worked(l);
	if (rep != NULL && rep->type == REDIS_REPLY_ARRAY &&
	    rep->elements >= 2 && rep->element[0]->integer +
	    rep->element[1]->integer > 0) {
		log_notice("%s: %lld jobs handed back (requeue), %lld dead", what,
		    rep->element[0]->integer, rep->element[1]->integer);
		master_event("handback", "%s: %lld jobs handed back (requeue), "
		    "%lld dead", what, rep->element[0]->integer,
		    rep->element[1]->integer);
	}
}

static void
reclaim_free(struct master_redis *r, struct reclaim *rc)
{
	for (struct reclaim **p = &r->pending; *p != NULL; p = &(*p)->next) {
		if (*p == rc) {
			*p = rc->next;
			break;
		}
	}
	free(rc);
}

static void
on_reclaim(redisAsyncContext *ac, void *reply, void *privdata)
{
	struct master_link *l = ac->data;
	struct master_redis *r = l->owner;
	struct reclaim *rc = privdata;
	redisReply *rep = reply;

	if (rep == NULL)
		return;             /* lost: resent after reconnecting */
	on_reply(ac, reply, "reclaim");
	if (rep->type == REDIS_REPLY_ERROR) {
		rc->sent = false;   /* retried with the next reaper run */
		return;
	}
	if (rep->element[0]->integer + rep->element[1]->integer > 0) {
		log_notice("queue %s: handed back the jobs of %s", rc->queue,
		    rc->worker_id);
		master_event("handback", "queue %s: handed back the jobs of %s",
		    rc->queue, rc->worker_id);
	}
	if (r->m->cfg->redis_wait_replicas == 0)
		reclaim_free(r, rc);
	else
		rc->done = true;        /* on_reclaim_wait decides */
}

/* The WAIT after a reclaim: a hand-back a failover loses would leave the
 * dead worker's jobs in its list, with its master alive to the reaper,
 * until this ferryd stops. Kept until enough replicas have it (sent again
 * with the next reaper run: reclaim.lua is idempotent). */
static void
on_reclaim_wait(redisAsyncContext *ac, void *reply, void *privdata)
{
	struct master_link *l = ac->data;
	struct master_redis *r = l->owner;
	struct reclaim *rc = privdata;
	redisReply *rep = reply;
	int want = r->m->cfg->redis_wait_replicas;

	l->inflight--;
	if (rep == NULL)
		return;
	l->last_reply_ms = util_monotonic_ms();
	if (!rc->done)
		return;                 /* the reclaim failed: resent */
	if (rep->type == REDIS_REPLY_INTEGER && rep->integer >= want) {
		if (r->replicas_short)
			log_notice("hand-backs reach %d replicas again", want);
		r->replicas_short = false;
		reclaim_free(r, rc);
		return;
	}
	if (!r->replicas_short)
		log_warn("queue %s: the hand-back of %s reached %lld of %d replicas "
		    "within redis_wait_timeout: repeated until they have it",
		    rc->queue, rc->worker_id, rep->type == REDIS_REPLY_INTEGER ?
		    rep->integer : 0LL, want);
	r->replicas_short = true;
	rc->done = false;
	rc->sent = false;
}

static void
send_reclaim(struct master_redis *r, struct reclaim *rc)
{
	struct master_link *l = link_of(r, rc->queue);
	struct sargs a;

	sargs_reclaim(&a, r->m->cfg->redis_prefix, rc->queue, rc->worker_id,
	    rc->max_recoveries, rc->bump, rc->count);
	if (link_script(l, a.script, on_reclaim, rc, a.nkeys, a.argc,
	    a.argv) != 0)
		return;
	rc->sent = true;
	rc->done = false;
	if (r->m->cfg->redis_wait_replicas > 0) {
		char n[16], ms[24];
		snprintf(n, sizeof(n), "%d", r->m->cfg->redis_wait_replicas);
		snprintf(ms, sizeof(ms), "%ld", r->m->cfg->redis_wait_timeout_ms);
		const char *argv[] = { "WAIT", n, ms };
		link_send(l, on_reclaim_wait, rc, 3, argv);
	}
}

/* The reclaims not sent (or lost) for the queues of l, or of all links. */
static void
send_pending(struct master_redis *r, const struct master_link *l)
{
	for (struct reclaim *p = r->pending; p != NULL; p = p->next)
		if (!p->sent && (l == NULL || serves(l, p->queue)))
			send_reclaim(r, p);
}

/* Hand back one processing list of a worker that died. */
static void
reclaim_list(struct master *m, const struct queue_config *q,
    const char *list_id, bool bump, bool count)
{
	struct master_redis *r = m->redis;
	struct reclaim *rc = xcalloc(1, sizeof(*rc));

	snprintf(rc->queue, sizeof(rc->queue), "%s", q->name);
	snprintf(rc->worker_id, sizeof(rc->worker_id), "%s", list_id);
	rc->max_recoveries = q->max_recoveries;
	rc->bump = bump;
	rc->count = count;
	rc->next = r->pending;
	r->pending = rc;
	send_reclaim(r, rc);
}

void
master_redis_reclaim(struct master *m, const struct queue_config *q,
    pid_t pid, int lanes, int busy, bool died)
{
	char id[160], lane2[200];

	worker_id(m->master_id, pid, id, sizeof(id));
	/* a batch that waited behind the one in flight, or for a server, or
	 * was decided, did not kill its worker */
	reclaim_list(m, q, id, died && (busy & 1), died);
	if (lanes < 2)
		return;
	snprintf(lane2, sizeof(lane2), "%s%s", id, CONSUMER_LANE2_SUFFIX);
	reclaim_list(m, q, lane2, died && (busy & 2), died);
}

/* heartbeat.lua found no service clock where this master had beaten
 * before over the same connection: everything ferry kept in Redis for the
 * queue is gone (the lists, the protected cache keys), which no
 * volatile-* policy can do. Said at error level once per loss. */
static void
say_keys_lost(struct master_redis *r, const char *queue)
{
	log_error("queue %s: ferry's keys in redis at %s are gone (its "
	    "heartbeats and service clock, and with them its lists and "
	    "protected cache keys): a FLUSHDB or FLUSHALL, or "
	    "maxmemory-policy set to allkeys-*; the jobs they held are lost: "
	    "send them again", queue,
	    master_redis_address(r->m));
	master_event("redis", "queue %s: ferry's keys were lost (a FLUSHDB, "
	    "an allkeys-* policy)", queue);
}

/* heartbeat.lua's answer: the gap it found in Redis' service (or that
 * there was no clock), or that another running ferryd holds our id (then
 * we stop: exit 1). privdata: the queue's name (malloc'd). */
static void
on_heartbeat(redisAsyncContext *ac, void *reply, void *privdata)
{
	struct master_link *l = ac->data;
	struct master_redis *r = l->owner;
	redisReply *rep = reply;
	size_t n = strlen(MASTER_ID_TAKEN);
	int64_t now = util_monotonic_ms();
	char *queue = privdata;
	struct master_queue *mq;

	l->inflight--;
	if (rep == NULL) {
		free(queue);
		return;
	}
	if (rep->type == REDIS_REPLY_INTEGER &&
	    (mq = master_find_queue(r->m, queue)) != NULL) {
		if (rep->integer == -1 && mq->beaten)
			say_keys_lost(r, queue);
		mq->beaten = true;
	}
	free(queue);
	l->last_reply_ms = now;
	if (rep->type == REDIS_REPLY_ERROR && strncmp(rep->str,
	    MASTER_ID_TAKEN, n) == 0) {
		if (r->m->exit_code != 0)
			return;         /* stopping already */
		log_error("master id %s is in use by another running ferryd (%s): "
		    "two masters under one id would share processing lists; "
		    "stopping (exit 1)", r->m->master_id, rep->str + n);
		master_stop(r->m, 1);
	} else if (rep->type == REDIS_REPLY_ERROR) {
		link_failed(l, "heartbeat", rep);
		return;
	}
	link_worked(l);
	/* every queue's clock sees the same gap: said once */
	if (rep->type == REDIS_REPLY_INTEGER && rep->integer > 0 &&
	    now - r->gap_said_ms > r->m->cfg->heartbeat_ttl_ms) {
		r->gap_said_ms = now;
		log_warn("redis ran no heartbeat of any ferryd for %.1f s (a long "
		    "command, Redis stopped or restarted, a failover, or its "
		    "clock stepped): no master is taken for dead for the next "
		    "heartbeat_ttl", (double)rep->integer / 1000.);
	}
}

/* One beat in each queue (its masters and clock hashes are in its slot). */
static void
heartbeat_cb(struct ev_loop *loop, ev_timer *t, int revents)
{
	struct master_redis *r = t->data;
	struct master_beat b;
	(void)loop;
	(void)revents;

	for (struct master_queue *mq = r->m->queues; mq != NULL; mq = mq->next) {
		/* a script: a plain HSET is refused at maxmemory (heartbeat.lua) */
		master_beat_init(&b, r->m->cfg, mq->cfg.name, r->m->master_id,
		    r->m->master_token, r->m->cfg->heartbeat_ttl_ms);
		char *queue = xstrdup(mq->cfg.name);
		if (link_script(link_of(r, mq->cfg.name), LUA_HEARTBEAT,
		    on_heartbeat, queue, MASTER_BEAT_KEYS, MASTER_BEAT_ARGS,
		    b.args) != 0)
			free(queue);
	}
	/* a TTL change on reload takes effect at the next beat */
	t->repeat = (double)r->m->cfg->heartbeat_ttl_ms / 3000.;
	ev_timer_again(r->m->loop, t);
}

/* reap.lua's answer: counts as on_reply, and whether it waits after a
 * gap in Redis' service (said once per gap). */
static void
on_reap(redisAsyncContext *ac, void *reply, void *privdata)
{
	struct master_link *l = ac->data;
	struct master_redis *r = l->owner;
	redisReply *rep = reply;

	on_reply(ac, reply, privdata);
	if (rep == NULL || rep->type != REDIS_REPLY_ARRAY || rep->elements < 3)
		return;
	if (rep->element[2]->integer > 0 && !r->reap_waiting)
		log_notice("reaper: waiting %lld ms before taking any master for "
		    "dead: Redis served no heartbeat for a while, and live "
		    "masters must get to beat first", rep->element[2]->integer);
	else if (rep->element[2]->integer == 0 && r->reap_waiting)
		log_info("reaper: reaping again");
	r->reap_waiting = rep->element[2]->integer > 0;
}

static void
reap_cb(struct ev_loop *loop, ev_timer *t, int revents)
{
	struct master_redis *r = t->data;
	bool stalled = false;
	(void)loop;
	(void)revents;

	for (struct master_link *l = r->links; l != NULL; l = l->next)
		stalled |= link_stalled(l, WATCHDOG_MS);
	if (stalled)
		return;
	send_pending(r, NULL);
	for (struct master_queue *mq = r->m->queues; mq != NULL; mq = mq->next) {
		struct sargs a;
		sargs_reap(&a, r->m->cfg->redis_prefix, mq->cfg.name,
		    mq->cfg.max_recoveries, r->m->cfg->heartbeat_ttl_ms,
		    r->m->master_id);
		link_script(link_of(r, mq->cfg.name), a.script, on_reap, "reaper",
		    a.nkeys, a.argc, a.argv);
	}
	t->repeat = (double)r->m->cfg->reaper_interval_ms / 1000.;
	ev_timer_again(r->m->loop, t);
}

/* A promote.lua call in flight for one queue: the tick sends none while
 * one is, and a call that moved a full PROMOTE_LIMIT is followed by the
 * next at once (from its reply), so a backlog drains at Redis' pace in
 * bounded steps, with the loop free between them. */
struct promoting {
	struct master_redis *r;
	char queue[CONFIG_QUEUE_NAME_MAX + 1];
	struct promoting *next;
};

static void send_promote(struct master_redis *r, const char *queue);

static bool
promoting(const struct master_redis *r, const char *queue)
{
	for (const struct promoting *p = r->promoting; p != NULL; p = p->next)
		if (strcmp(p->queue, queue) == 0)
			return true;
	return false;
}

/* Is queue still one the tick promotes (a reload may free it)? */
static bool
configured(const struct master_redis *r, const char *queue)
{
	for (const struct master_queue *mq = r->m->queues; mq != NULL;
	    mq = mq->next)
		if (strcmp(mq->cfg.name, queue) == 0)
			return true;
	return false;
}

static void
on_promote(redisAsyncContext *ac, void *reply, void *privdata)
{
	struct promoting *p = privdata;
	struct master_redis *r = p->r;
	redisReply *rep = reply;
	char queue[sizeof(p->queue)];

	on_reply(ac, reply, "promote");
	for (struct promoting **pp = &r->promoting; *pp != NULL;
	    pp = &(*pp)->next) {
		if (*pp == p) {
			*pp = p->next;
			break;
		}
	}
	snprintf(queue, sizeof(queue), "%s", p->queue);
	free(p);
	/* the sum of both zsets' moves: at worst one call too many */
	if (rep != NULL && rep->type == REDIS_REPLY_INTEGER &&
	    rep->integer >= PROMOTE_LIMIT && configured(r, queue))
		send_promote(r, queue);
}

static void
send_promote(struct master_redis *r, const char *queue)
{
	struct promoting *p = xcalloc(1, sizeof(*p));
	struct sargs a;

	p->r = r;
	snprintf(p->queue, sizeof(p->queue), "%s", queue);
	sargs_promote(&a, r->m->cfg->redis_prefix, queue, PROMOTE_LIMIT);
	if (link_script(link_of(r, queue), a.script, on_promote, p, a.nkeys,
	    a.argc, a.argv) != 0) {
		free(p);        /* link down: the next tick tries again */
		return;
	}
	p->next = r->promoting;
	r->promoting = p;
}

static void
promote_cb(struct ev_loop *loop, ev_timer *t, int revents)
{
	struct master_redis *r = t->data;
	(void)loop;
	(void)revents;

	for (struct master_queue *mq = r->m->queues; mq != NULL; mq = mq->next)
		if (!promoting(r, mq->cfg.name))
			send_promote(r, mq->cfg.name);
}

/* A command for another module (metrics.c): the bookkeeping of the
 * watchdog here, the reply there. */
struct relay {
	master_redis_fn *fn;
	void *priv;
};

static void
on_relay(redisAsyncContext *ac, void *reply, void *privdata)
{
	struct master_link *l = ac->data;
	struct master_redis *r = l->owner;
	struct relay *rl = privdata;

	l->inflight--;
	if (reply != NULL)
		l->last_reply_ms = util_monotonic_ms();
	rl->fn(r->m, reply, rl->priv);
	free(rl);
}

int
master_redis_command(struct master *m, const char *queue,
    master_redis_fn *fn, void *priv, int argc, const char **argv)
{
	return master_redis_commandv(m, queue, fn, priv, argc, argv, NULL);
}

int
master_redis_commandv(struct master *m, const char *queue,
    master_redis_fn *fn, void *priv, int argc, const char **argv,
    const size_t *lens)
{
	struct relay *rl = xmalloc(sizeof(*rl));

	rl->fn = fn;
	rl->priv = priv;
	if (m->redis == NULL || link_sendv(link_of(m->redis, queue), on_relay,
	    rl, argc, argv, lens) == -1) {
		free(rl);
		return -1;
	}
	return 0;
}

bool
master_redis_up(const struct master *m)
{
	if (m->redis == NULL)
		return false;
	for (const struct master_link *l = m->redis->links; l != NULL;
	    l = l->next)
		if (!l->up)
			return false;
	return true;
}

void
master_redis_retry_now(struct master *m)
{
	for (struct master_link *l = m->redis != NULL ? m->redis->links : NULL;
	    l != NULL; l = l->next)
		link_retry_now(l);
}

const char *
master_redis_address(const struct master *m)
{
	return m->redis != NULL ? m->redis->links->addr : "";
}

void
master_redis_switched(struct master *m, const char *addr)
{
	if (m->redis != NULL)
		link_switched(m->redis->links, addr);
}

/* A link answers: beat at once, and send the reclaims that wait for it.
 * A clock missing at the first beat over a new connection says nothing:
 * the primary may have changed (a failover to a replica that had not
 * received the clock yet) or restarted. */
static void
link_ready(struct master_link *l)
{
	struct master_redis *r = l->owner;

	for (struct master_queue *mq = r->m->queues; mq != NULL; mq = mq->next)
		if (serves(l, mq->cfg.name))
			mq->beaten = false;
	ev_feed_event(r->m->loop, &r->heartbeat, EV_TIMER);
	send_pending(r, l);
}

/* A link went down: what it carried is sent again once it is back. */
static void
link_lost(struct master_link *l)
{
	struct master_redis *r = l->owner;

	for (struct reclaim *p = r->pending; p != NULL; p = p->next)
		if (serves(l, p->queue))
			p->sent = false;
}

void
master_redis_start(struct master *m)
{
	struct master_redis *r = xcalloc(1, sizeof(*r));

	r->m = m;
	m->redis = r;
	/* the first link: every queue with one Redis; in a cluster the
	 * first queue's, which also carries INFO for metrics */
	r->links = link_new(m, cluster(r) && m->cfg->nqueues > 0 ?
	    m->cfg->queues[0].name : NULL, r);
	r->links->on_ready = link_ready;
	r->links->on_lost = link_lost;
	ev_init(&r->heartbeat, heartbeat_cb);
	ev_init(&r->reap, reap_cb);
	ev_timer_init(&r->promote, promote_cb, PROMOTE_INTERVAL_S,
	    PROMOTE_INTERVAL_S);
	r->heartbeat.data = r->reap.data = r->promote.data = r;
	r->heartbeat.repeat = (double)m->cfg->heartbeat_ttl_ms / 3000.;
	r->reap.repeat = (double)m->cfg->reaper_interval_ms / 1000.;
	ev_timer_again(m->loop, &r->heartbeat);
	ev_timer_again(m->loop, &r->reap);
	ev_timer_start(m->loop, &r->promote);
	link_start(r->links);
}

/* At exit, synchronously for one queue: hand back the lists of its
 * workers killed on the way out, and remove our heartbeat from it so
 * other hosts know at once. */
static void
finish_queue(struct master *m, redisContext *c, const char *queue)
{
	struct master_redis *r = m->redis;
	struct master_beat b;

	for (struct reclaim *rc = r->pending, *next; rc != NULL; rc = next) {
		next = rc->next;
		if (strcmp(rc->queue, queue) != 0)
			continue;
		struct sargs a;
		sargs_reclaim(&a, m->cfg->redis_prefix, rc->queue, rc->worker_id,
		    rc->max_recoveries, rc->bump, rc->count);
		freeReplyObject(queue_script(c, a.script, a.nkeys, a.argc, a.argv,
		    a.lens));
		reclaim_free(r, rc);
	}
	if (m->cfg->redis_wait_replicas > 0)
		freeReplyObject(redisCommand(c, "WAIT %d %ld",
		    m->cfg->redis_wait_replicas, m->cfg->redis_wait_timeout_ms));
	/* deleted only while it holds our token: after a clash it is the
	 * other master's */
	master_beat_init(&b, m->cfg, queue, m->master_id, m->master_token, 0);
	freeReplyObject(queue_script(c, LUA_HEARTBEAT, MASTER_BEAT_KEYS,
	    MASTER_BEAT_ARGS, b.args, NULL));
}

/* At exit: the loop has stopped, so finish synchronously what is pending. */
void
master_redis_finish(struct master *m)
{
	struct master_redis *r = m->redis;
	redisContext *c = NULL;
	char err[512];

	if (r == NULL)
		return;
	while (r->links != NULL) {
		struct master_link *l = r->links;
		r->links = l->next;
		link_free(l);
	}
	for (struct master_queue *mq = m->queues; mq != NULL; mq = mq->next) {
		if (c == NULL || cluster(r)) {
			redisFree(c);
			c = queue_connect_for(m->cfg, mq->cfg.name, 5000, NULL, err,
			    sizeof(err));
		}
		if (c == NULL) {
			for (struct reclaim *rc = r->pending; rc != NULL; rc = rc->next)
				if (strcmp(rc->queue, mq->cfg.name) == 0) {
					log_error("%s: jobs of %s stay in its processing "
					    "list until another ferryd's reaper hands them "
					    "back", err, rc->worker_id);
					break;
				}
			continue;
		}
		finish_queue(m, c, mq->cfg.name);
	}
	redisFree(c);
	while (r->pending != NULL)
		reclaim_free(r, r->pending);
	free(r);
	m->redis = NULL;
}
