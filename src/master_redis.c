/* master_redis.c - the master's Redis duties, asynchronous on its libev loop
 * so it never blocks: keep this host's heartbeat key alive, hand back the
 * processing list of every worker that dies (at once, and again after an
 * outage until Redis confirms), reap the lists of dead hosts, promote due
 * retries, and carry metrics.c's questions. hiredis 0.14 has no async
 * timeouts: a watchdog drops a connection whose replies stop coming. */
#include "master_redis.h"

#include <hiredis/adapters/libev.h>
#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "lua_scripts.h"
#include "master.h"
#include "master_memory.h"
#include "queue.h"
#include "script_args.h"
#include "util.h"
#include "worker.h"

#define PROMOTE_INTERVAL_S 0.1
#define PROMOTE_LIMIT 1000
#define WATCHDOG_MS 10000
#define RECONNECT_MIN_S 0.1
#define RECONNECT_MAX_S 5.0

struct reclaim {
	char queue[CONFIG_QUEUE_NAME_MAX + 1];
	char worker_id[160];
	int max_recoveries;
	bool bump;
	bool sent;
	struct reclaim *next;
};

struct master_redis {
	struct master *m;
	redisAsyncContext *ac;
	bool up;
	bool closing;            /* master_redis_finish: no reconnecting */
	bool outage_logged;
	double retry_s;
	int inflight;
	int64_t last_reply_ms;
	bool reap_waiting;       /* the reaper waits after a gap (reap.lua) */
	bool loading;            /* Redis answers LOADING: said once */
	bool auth_refused;       /* AUTH refused: said once, retried quietly */
	ev_timer reconnect, heartbeat, reap, promote;
	struct reclaim *pending;
};

static void connect_now(struct master_redis *r);

static void
schedule_reconnect(struct master_redis *r)
{
	ev_timer_stop(r->m->loop, &r->reconnect);
	ev_timer_set(&r->reconnect, r->retry_s, 0.);
	ev_timer_start(r->m->loop, &r->reconnect);
	r->retry_s = r->retry_s * 2 > RECONNECT_MAX_S ? RECONNECT_MAX_S :
	    r->retry_s * 2;
}

static void
lost(struct master_redis *r, const char *why)
{
	char addr[300];

	if (!r->outage_logged)
		log_warn("redis at %s unreachable: %s (retrying; workers' jobs "
		    "wait in Redis)", queue_address(r->m->cfg, addr, sizeof(addr)),
		    why);
	r->outage_logged = true;
	r->up = false;
	r->ac = NULL;
	r->inflight = 0;
	for (struct reclaim *p = r->pending; p != NULL; p = p->next)
		p->sent = false;
	schedule_reconnect(r);
}

static void
on_disconnect(const redisAsyncContext *ac, int status)
{
	struct master_redis *r = ac->data;
	if (!r->closing)
		lost(r, status == REDIS_OK ? "connection closed" : ac->errstr);
}

static void send_pending(struct master_redis *r);

/* Redis answers as ferry's user: start the duties. */
static void
ready(struct master_redis *r)
{
	r->up = true;
	r->last_reply_ms = util_monotonic_ms();
	ev_feed_event(r->m->loop, &r->heartbeat, EV_TIMER);
	send_pending(r);
}

static void
on_connect(const redisAsyncContext *ac, int status)
{
	struct master_redis *r = ac->data;

	if (status != REDIS_OK) {
		lost(r, ac->errstr);    /* hiredis frees ac after this */
		return;
	}
	/* reachable again only once it answers (script_worked): a link that
	 * accepts connections and resets them must not log every attempt */
	if (*r->m->cfg->redis_password == '\0')
		ready(r);               /* else once AUTH is accepted (on_auth) */
}

/* AUTH answered. Refused (wrong password, user disabled or deleted) is an
 * outage only the operator can end: said once, then retried quietly at the
 * longest interval until the ACL or the file is fixed. Nothing is sent
 * before AUTH is accepted, so nothing runs as the default user. */
static void
on_auth(redisAsyncContext *ac, void *reply, void *privdata)
{
	struct master_redis *r = ac->data;
	redisReply *rep = reply;
	char err[1024];

	(void)privdata;
	r->inflight--;
	if (rep == NULL)
		return;                 /* on_disconnect says it */
	r->last_reply_ms = util_monotonic_ms();
	if (rep->type != REDIS_REPLY_ERROR) {
		ready(r);
		return;
	}
	if (!r->auth_refused) {
		queue_auth_error(r->m->cfg, rep->str, err, sizeof(err));
		log_error("%s; the master retries every %.0f s, workers' jobs "
		    "wait in Redis", err, RECONNECT_MAX_S);
	}
	r->auth_refused = true;
	r->outage_logged = true;        /* lost() adds nothing */
	r->retry_s = RECONNECT_MAX_S;
	redisAsyncDisconnect(ac);
}

/* A script call failed. Redis loading its data set after a restart is an
 * outage, said once (the call is repeated by its timer, a reclaim by the
 * next reaper run); anything else is an error. */
static void
script_failed(struct master_redis *r, const char *what, const redisReply *rep)
{
	if (r->auth_refused && queue_auth_refused(rep))
		return;         /* pipelined behind a refused AUTH: said */
	if (strncmp(rep->str, "LOADING", 7) == 0) {
		if (!r->loading)
			log_notice("redis is loading its data set (%s): the master "
			    "waits", what);
		r->loading = true;
		return;
	}
	log_error("redis %s failed: %s", what, rep->str);
}

static void
script_worked(struct master_redis *r)
{
	if (r->loading)
		log_notice("redis has loaded its data set");
	r->loading = false;
	r->auth_refused = false;
	if (r->outage_logged)
		log_notice("redis reachable again");
	r->outage_logged = false;
	r->retry_s = RECONNECT_MIN_S;
}

/* Reply callback for fire-and-forget commands: log errors, and the jobs a
 * reaper or reclaim ({back, dead, ...}) moved. */
static void
on_reply(redisAsyncContext *ac, void *reply, void *privdata)
{
	struct master_redis *r = ac->data;
	redisReply *rep = reply;
	const char *what = privdata;

	r->inflight--;
	r->last_reply_ms = util_monotonic_ms();
	if (rep != NULL && rep->type == REDIS_REPLY_ERROR)
		script_failed(r, what, rep);
	else if (rep != NULL)
		script_worked(r);
	if (rep != NULL && rep->type == REDIS_REPLY_ARRAY &&
	    rep->elements >= 2 && rep->element[0]->integer +
	    rep->element[1]->integer > 0)
		log_notice("%s: %lld jobs handed back (requeue), %lld dead", what,
		    rep->element[0]->integer, rep->element[1]->integer);
}

static int
send_argv(struct master_redis *r, redisCallbackFn *cb, void *priv, int argc,
    const char **argv)
{
	if (!r->up)
		return -1;
	if (redisAsyncCommandArgv(r->ac, cb, priv, argc, argv, NULL) != REDIS_OK)
		return -1;
	r->inflight++;
	return 0;
}

/* EVAL (not EVALSHA): the master's calls are few, and this survives a
 * SCRIPT FLUSH or a restarted Redis without a round trip. */
static int
send_script(struct master_redis *r, enum lua_script s, redisCallbackFn *cb,
    void *priv, int nkeys, int argc, const char **args)
{
	const char *argv[16];
	char numkeys[8];

	snprintf(numkeys, sizeof(numkeys), "%d", nkeys);
	argv[0] = "EVAL";
	argv[1] = lua_script_source[s];
	argv[2] = numkeys;
	for (int i = 0; i < argc; i++)
		argv[i + 3] = args[i];
	return send_argv(r, cb, priv, argc + 3, argv);
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
	struct master_redis *r = ac->data;
	struct reclaim *rc = privdata;
	redisReply *rep = reply;

	if (rep == NULL)
		return;             /* lost: resent after reconnecting */
	on_reply(ac, reply, "reclaim");
	if (rep->type == REDIS_REPLY_ERROR) {
		rc->sent = false;   /* retried with the next reaper run */
		return;
	}
	if (rep->element[0]->integer + rep->element[1]->integer > 0)
		log_notice("queue %s: handed back the jobs of %s", rc->queue,
		    rc->worker_id);
	reclaim_free(r, rc);
}

static void
send_reclaim(struct master_redis *r, struct reclaim *rc)
{
	struct sargs a;

	sargs_reclaim(&a, r->m->cfg->redis_prefix, rc->queue, rc->worker_id,
	    rc->max_recoveries, rc->bump);
	if (send_script(r, a.script, on_reclaim, rc, a.nkeys, a.argc,
	    a.argv) == 0)
		rc->sent = true;
}

static void
send_pending(struct master_redis *r)
{
	for (struct reclaim *p = r->pending; p != NULL; p = p->next)
		if (!p->sent)
			send_reclaim(r, p);
}

void
master_redis_reclaim(struct master *m, const struct queue_config *q,
    pid_t pid, bool bump)
{
	struct master_redis *r = m->redis;
	struct reclaim *rc = xcalloc(1, sizeof(*rc));

	snprintf(rc->queue, sizeof(rc->queue), "%s", q->name);
	worker_id(m->master_id, pid, rc->worker_id, sizeof(rc->worker_id));
	rc->max_recoveries = q->max_recoveries;
	rc->bump = bump;
	rc->next = r->pending;
	r->pending = rc;
	send_reclaim(r, rc);
}

/* heartbeat.lua's answer: the gap it found in Redis' service, or that
 * another running ferryd holds our id (then we stop: exit 1). */
static void
on_heartbeat(redisAsyncContext *ac, void *reply, void *privdata)
{
	struct master_redis *r = ac->data;
	redisReply *rep = reply;
	size_t n = strlen(MASTER_ID_TAKEN);
	(void)privdata;

	r->inflight--;
	if (rep == NULL)
		return;
	r->last_reply_ms = util_monotonic_ms();
	if (rep->type == REDIS_REPLY_ERROR && strncmp(rep->str,
	    MASTER_ID_TAKEN, n) == 0) {
		if (r->m->exit_code != 0)
			return;         /* stopping already */
		log_error("master id %s is in use by another running ferryd (%s): "
		    "two masters under one id would share processing lists; "
		    "stopping (exit 1)", r->m->master_id, rep->str + n);
		master_stop(r->m, 1);
	} else if (rep->type == REDIS_REPLY_ERROR) {
		script_failed(r, "heartbeat", rep);
		return;
	}
	script_worked(r);
	if (rep->type == REDIS_REPLY_INTEGER && rep->integer > 0) {
		log_warn("redis ran no heartbeat of any ferryd for %.1f s (a long "
		    "command, Redis stopped or restarted, or its clock stepped): "
		    "no master is taken for dead for the next heartbeat_ttl",
		    (double)rep->integer / 1000.);
	}
}

static void
heartbeat_cb(struct ev_loop *loop, ev_timer *t, int revents)
{
	struct master_redis *r = t->data;
	struct master_beat b;
	(void)loop;
	(void)revents;

	/* a script: a plain SET is refused at maxmemory (heartbeat.lua) */
	master_beat_init(&b, r->m->cfg, r->m->master_id, r->m->master_token,
	    r->m->cfg->heartbeat_ttl_ms);
	send_script(r, LUA_HEARTBEAT, on_heartbeat, NULL, MASTER_BEAT_KEYS,
	    MASTER_BEAT_ARGS, b.args);
	/* a TTL change on reload takes effect at the next beat */
	t->repeat = (double)r->m->cfg->heartbeat_ttl_ms / 3000.;
	ev_timer_again(r->m->loop, t);
}

/* reap.lua's answer: counts as on_reply, and whether it waits after a
 * gap in Redis' service (said once per gap). */
static void
on_reap(redisAsyncContext *ac, void *reply, void *privdata)
{
	struct master_redis *r = ac->data;
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
	(void)loop;
	(void)revents;

	if (r->up && r->inflight > 0 &&
	    util_monotonic_ms() - r->last_reply_ms > WATCHDOG_MS) {
		log_warn("redis has not answered for %d s: reconnecting",
		    WATCHDOG_MS / 1000);
		redisAsyncDisconnect(r->ac);
		return;
	}
	send_pending(r);
	for (struct master_queue *mq = r->m->queues; mq != NULL; mq = mq->next) {
		struct sargs a;
		char clock[QUEUE_KEY_MAX];
		master_clock_key(r->m->cfg->redis_prefix, clock, sizeof(clock));
		sargs_reap(&a, r->m->cfg->redis_prefix, mq->cfg.name, clock,
		    mq->cfg.max_recoveries, r->m->cfg->heartbeat_ttl_ms);
		send_script(r, a.script, on_reap, "reaper", a.nkeys, a.argc,
		    a.argv);
	}
	t->repeat = (double)r->m->cfg->reaper_interval_ms / 1000.;
	ev_timer_again(r->m->loop, t);
}

static void
promote_cb(struct ev_loop *loop, ev_timer *t, int revents)
{
	struct master_redis *r = t->data;
	(void)loop;
	(void)revents;

	for (struct master_queue *mq = r->m->queues; mq != NULL; mq = mq->next) {
		struct sargs a;
		sargs_promote(&a, r->m->cfg->redis_prefix, mq->cfg.name,
		    PROMOTE_LIMIT);
		send_script(r, a.script, on_reply, "promote", a.nkeys, a.argc,
		    a.argv);
	}
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
	struct master_redis *r = ac->data;
	struct relay *rl = privdata;

	r->inflight--;
	if (reply != NULL)
		r->last_reply_ms = util_monotonic_ms();
	rl->fn(r->m, reply, rl->priv);
	free(rl);
}

int
master_redis_command(struct master *m, master_redis_fn *fn, void *priv,
    int argc, const char **argv)
{
	struct relay *rl = xmalloc(sizeof(*rl));

	rl->fn = fn;
	rl->priv = priv;
	if (m->redis == NULL || send_argv(m->redis, on_relay, rl, argc,
	    argv) == -1) {
		free(rl);
		return -1;
	}
	return 0;
}

bool
master_redis_up(const struct master *m)
{
	return m->redis != NULL && m->redis->up;
}

static void
connect_now(struct master_redis *r)
{
	const struct ferry_config *cfg = r->m->cfg;
	redisAsyncContext *ac = *cfg->redis_socket != '\0' ?
	    redisAsyncConnectUnix(cfg->redis_socket) :
	    redisAsyncConnect(cfg->redis_host, cfg->redis_port);

	if (ac == NULL || ac->err) {
		lost(r, ac != NULL ? ac->errstr : "out of memory");
		redisAsyncFree(ac);
		return;
	}
	ac->data = r;
	r->ac = ac;
	r->up = true;           /* commands queue until connected */
	redisLibevAttach(r->m->loop, ac);
	redisAsyncSetConnectCallback(ac, on_connect);
	redisAsyncSetDisconnectCallback(ac, on_disconnect);
	const char *auth[3];
	int nauth = queue_auth_argv(cfg, auth);
	if (nauth > 0)
		send_argv(r, on_auth, NULL, nauth, auth);
	if (cfg->redis_db != 0) {
		char db[16];
		snprintf(db, sizeof(db), "%d", cfg->redis_db);
		const char *argv[] = { "SELECT", db };
		send_argv(r, on_reply, "SELECT", 2, argv);
	}
	r->up = false;          /* until on_connect */
}

static void
reconnect_cb(struct ev_loop *loop, ev_timer *t, int revents)
{
	(void)loop;
	(void)revents;
	connect_now(t->data);
}

void
master_redis_start(struct master *m)
{
	struct master_redis *r = xcalloc(1, sizeof(*r));

	r->m = m;
	r->retry_s = RECONNECT_MIN_S;
	m->redis = r;
	ev_init(&r->reconnect, reconnect_cb);
	ev_init(&r->heartbeat, heartbeat_cb);
	ev_init(&r->reap, reap_cb);
	ev_timer_init(&r->promote, promote_cb, PROMOTE_INTERVAL_S,
	    PROMOTE_INTERVAL_S);
	r->reconnect.data = r->heartbeat.data = r->reap.data = r;
	r->promote.data = r;
	r->heartbeat.repeat = (double)m->cfg->heartbeat_ttl_ms / 3000.;
	r->reap.repeat = (double)m->cfg->reaper_interval_ms / 1000.;
	ev_timer_again(m->loop, &r->heartbeat);
	ev_timer_again(m->loop, &r->reap);
	ev_timer_start(m->loop, &r->promote);
	connect_now(r);
	master_memory_start(m);
}

/* At exit: the loop has stopped, so finish synchronously what is pending
 * (hand back the lists of workers killed on the way out) and remove our
 * heartbeat so other hosts know at once. */
void
master_redis_finish(struct master *m)
{
	struct master_redis *r = m->redis;
	struct master_beat b;
	char err[512];

	if (r == NULL)
		return;
	master_memory_stop(m);
	r->closing = true;
	if (r->ac != NULL)
		redisAsyncFree(r->ac);   /* calls back with NULL replies */
	r->ac = NULL;
	redisContext *c = queue_connect(m->cfg, 5000, err, sizeof(err));
	if (c == NULL && r->pending != NULL)
		log_error("%s: jobs of %s stay in its processing list until "
		    "another ferryd's reaper hands them back", err,
		    r->pending->worker_id);
	while (c != NULL && r->pending != NULL) {
		struct reclaim *rc = r->pending;
		struct sargs a;
		sargs_reclaim(&a, m->cfg->redis_prefix, rc->queue, rc->worker_id,
		    rc->max_recoveries, rc->bump);
		freeReplyObject(queue_script(c, a.script, a.nkeys, a.argc, a.argv,
		    a.lens));
		reclaim_free(r, rc);
	}
	if (c != NULL) {
		/* deleted only while it holds our token: after a clash it is
		 * the other master's */
		master_beat_init(&b, m->cfg, m->master_id, m->master_token, 0);
		freeReplyObject(queue_script(c, LUA_HEARTBEAT, MASTER_BEAT_KEYS,
		    MASTER_BEAT_ARGS, b.args, NULL));
		redisFree(c);
	}
	while (r->pending != NULL)
		reclaim_free(r, r->pending);
	free(r);
	m->redis = NULL;
}
