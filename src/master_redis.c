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
#include "sentinel.h"
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
	bool done;               /* reclaim.lua answered; WAIT pending */
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
	bool replicas_short;     /* NOREPLICAS or a short WAIT: said once */
	char addr[CONFIG_HOST_MAX + 16];   /* connected to (or trying) */
	char last_addr[CONFIG_HOST_MAX + 16]; /* the last that answered */
	int64_t lost_ms;         /* when the connection was lost (0: up) */
	ev_timer reconnect, heartbeat, reap, promote;
	struct reclaim *pending;
};

static void connect_now(struct master_redis *r);

static bool
sentinels(const struct master_redis *r)
{
	return *r->m->cfg->redis_sentinels != '\0';
}

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
		    "wait in Redis)", r->addr[0] != '\0' ? r->addr :
		    queue_address(r->m->cfg, addr, sizeof(addr)), why);
	if (r->lost_ms == 0)
		r->lost_ms = util_monotonic_ms();
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
	if (r->last_addr[0] != '\0' && strcmp(r->last_addr, r->addr) != 0)
		log_notice("redis primary of %s moved from %s to %s: following it, "
		    "%.1f s after losing %s", r->m->cfg->redis_sentinel_master,
		    r->last_addr, r->addr, r->lost_ms != 0 ? (double)
		    (util_monotonic_ms() - r->lost_ms) / 1000. : 0., r->last_addr);
	if (r->last_addr[0] != '\0' && strcmp(r->last_addr, r->addr) != 0)
		r->outage_logged = false;       /* said: not "reachable again" */
	snprintf(r->last_addr, sizeof(r->last_addr), "%s", r->addr);
	r->lost_ms = 0;
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
	if (*r->m->cfg->redis_password == '\0' && !sentinels(r))
		ready(r);       /* else once AUTH is accepted (on_auth), and with
				 * Sentinel once ROLE says primary (on_role) */
}

/* ROLE answered (Sentinel only): the address a sentinel named is used only
 * once it says it is the primary. A replica (the sentinel has not seen the
 * failover yet, or the old primary came back as a replica): ask the next
 * sentinel first, and reconnect. */
static void
on_role(redisAsyncContext *ac, void *reply, void *privdata)
{
	struct master_redis *r = ac->data;
	redisReply *rep = reply;
	(void)privdata;

	r->inflight--;
	if (rep == NULL)
		return;
	r->last_reply_ms = util_monotonic_ms();
	if (rep->type == REDIS_REPLY_ARRAY && rep->elements > 0 &&
	    rep->element[0]->type == REDIS_REPLY_STRING &&
	    strcmp(rep->element[0]->str, "master") == 0) {
		ready(r);
		return;
	}
	if (!r->outage_logged)
		log_warn("redis at %s, named primary of %s by a sentinel, is %s%s: "
		    "a failover is under way (retrying)", r->addr,
		    r->m->cfg->redis_sentinel_master, rep->type ==
		    REDIS_REPLY_ERROR ? "refusing ROLE: " : "a ", rep->type ==
		    REDIS_REPLY_ERROR ? rep->str : rep->type == REDIS_REPLY_ARRAY &&
		    rep->elements > 0 && rep->element[0]->type ==
		    REDIS_REPLY_STRING ? rep->element[0]->str : "server of no role");
	if (r->lost_ms == 0)
		r->lost_ms = util_monotonic_ms();
	r->outage_logged = true;
	sentinel_distrust(r->m->cfg);
	redisAsyncDisconnect(ac);
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
		if (!sentinels(r))
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
	if (queue_role_changed(rep)) {
		/* the primary was demoted (a failover): find the new one */
		if (!r->outage_logged)
			log_warn("redis at %s: %s failed: %s: reconnecting to the "
			    "primary", r->addr, what, rep->str);
		if (r->lost_ms == 0)
			r->lost_ms = util_monotonic_ms();
		r->outage_logged = true;
		if (r->ac != NULL && r->up)
			redisAsyncDisconnect(r->ac);
		return;
	}
	if (queue_error_is(rep, "NOREPLICAS")) {
		if (!r->replicas_short)
			log_warn("redis at %s refuses writes: %s (its "
			    "min-replicas-to-write): the master waits", r->addr,
			    rep->str);
		r->replicas_short = true;
		return;
	}
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
	if (r->replicas_short)
		log_notice("redis at %s takes writes again", r->addr);
	r->replicas_short = false;
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
	struct master_redis *r = ac->data;
	struct reclaim *rc = privdata;
	redisReply *rep = reply;
	int want = r->m->cfg->redis_wait_replicas;

	r->inflight--;
	if (rep == NULL)
		return;
	r->last_reply_ms = util_monotonic_ms();
	if (!rc->done)
		return;                 /* the reclaim failed: resent */
	if (rep->type == REDIS_REPLY_INTEGER && rep->integer >= want) {
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
	struct sargs a;

	sargs_reclaim(&a, r->m->cfg->redis_prefix, rc->queue, rc->worker_id,
	    rc->max_recoveries, rc->bump);
	if (send_script(r, a.script, on_reclaim, rc, a.nkeys, a.argc,
	    a.argv) != 0)
		return;
	rc->sent = true;
	rc->done = false;
	if (r->m->cfg->redis_wait_replicas > 0) {
		char n[16], ms[24];
		snprintf(n, sizeof(n), "%d", r->m->cfg->redis_wait_replicas);
		snprintf(ms, sizeof(ms), "%ld", r->m->cfg->redis_wait_timeout_ms);
		const char *argv[] = { "WAIT", n, ms };
		send_argv(r, on_reclaim_wait, rc, 3, argv);
	}
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
	char host[CONFIG_HOST_MAX], err[1024];
	redisAsyncContext *ac;
	int port;

	if (sentinels(r)) {
		/* synchronous, each sentinel within QUEUE_SENTINEL_TIMEOUT_MS:
		 * the loop stops for a dead sentinel's timeout at most per try */
		if (sentinel_find_primary(cfg, QUEUE_SENTINEL_TIMEOUT_MS, host,
		    sizeof(host), &port, err, sizeof(err)) == -1) {
			lost(r, err);
			return;
		}
		snprintf(r->addr, sizeof(r->addr), "%s:%d", host, port);
		ac = redisAsyncConnect(host, port);
	} else if (*cfg->redis_socket != '\0') {
		snprintf(r->addr, sizeof(r->addr), "%s", cfg->redis_socket);
		ac = redisAsyncConnectUnix(cfg->redis_socket);
	} else {
		snprintf(r->addr, sizeof(r->addr), "%s:%d", cfg->redis_host,
		    cfg->redis_port);
		ac = redisAsyncConnect(cfg->redis_host, cfg->redis_port);
	}
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
	if (sentinels(r)) {
		const char *role[] = { "ROLE" };
		send_argv(r, on_role, NULL, 1, role);
	}
	if (cfg->redis_db != 0) {
		char db[16];
		snprintf(db, sizeof(db), "%d", cfg->redis_db);
		const char *argv[] = { "SELECT", db };
		send_argv(r, on_reply, "SELECT", 2, argv);
	}
	r->up = false;          /* until on_connect */
}

const char *
master_redis_address(const struct master *m)
{
	return m->redis != NULL ? m->redis->addr : "";
}

void
master_redis_switched(struct master *m, const char *addr)
{
	struct master_redis *r = m->redis;

	if (r == NULL || strcmp(r->addr, addr) == 0)
		return;
	if (r->ac != NULL && r->up) {
		if (r->lost_ms == 0)
			r->lost_ms = util_monotonic_ms();
		r->outage_logged = true;        /* the switch line says it */
		redisAsyncDisconnect(r->ac);
	}
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
	if (c != NULL && m->cfg->redis_wait_replicas > 0)
		freeReplyObject(redisCommand(c, "WAIT %d %ld",
		    m->cfg->redis_wait_replicas, m->cfg->redis_wait_timeout_ms));
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
