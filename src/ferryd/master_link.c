/* master_link.c - one asynchronous Redis connection of the master, on its
 * libev loop: connect (to the configured address, the primary the
 * sentinels name, or the cluster node that serves a queue's slot), AUTH,
 * check ROLE with Sentinel, reconnect with backoff, say an outage once
 * and a switch of primary once, and count what is in flight for the
 * watchdog (hiredis 0.14 has no async timeouts). With one Redis all queues
 * share one link; with redis_cluster each queue has its own. */
#include "master_link.h"

#include <hiredis/adapters/libev.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster.h"
#include "log.h"
#include "master_events.h"
#include "master_int.h"
#include "queue.h"
#include "redis_auth.h"
#include "sentinel.h"
#include "util.h"

#define RECONNECT_MIN_S 0.1
#define RECONNECT_MAX_S 5.0

static void connect_now(struct master_link *l);

static bool
sentinels(const struct master_link *l)
{
	return *l->m->cfg->redis_sentinels != '\0';
}

static const char *
where(const struct master_link *l)
{
	static char buf[CONFIG_HOST_MAX + CONFIG_QUEUE_NAME_MAX + 40];

	if (l->queue[0] == '\0')
		snprintf(buf, sizeof(buf), "%s", l->addr);
	else
		snprintf(buf, sizeof(buf), "%s (queue %s)", l->addr, l->queue);
	return buf;
}

static void
schedule_reconnect(struct master_link *l)
{
	ev_timer_stop(l->m->loop, &l->reconnect);
	ev_timer_set(&l->reconnect, l->retry_s, 0.);
	ev_timer_start(l->m->loop, &l->reconnect);
	l->retry_s = l->retry_s * 2 > RECONNECT_MAX_S ? RECONNECT_MAX_S :
	    l->retry_s * 2;
}

/* The link is down, or about to go (the caller disconnects): from now on
 * the reconnection says so, not each attempt. */
static void
mark_lost(struct master_link *l)
{
	if (l->lost_ms == 0)
		l->lost_ms = util_monotonic_ms();
	l->outage_logged = true;
}

static void
lost(struct master_link *l, const char *why)
{
	if (!l->outage_logged) {
		log_warn("redis at %s unreachable: %s (retrying; workers' jobs "
		    "wait in Redis)", where(l), why);
		master_event("redis", "redis at %s unreachable: %s", where(l),
		    why);
	}
	mark_lost(l);
	l->up = false;
	l->ac = NULL;
	l->inflight = 0;
	if (l->on_lost != NULL)
		l->on_lost(l);
	if (!l->closing)
		schedule_reconnect(l);
}

static void
on_disconnect(const redisAsyncContext *ac, int status)
{
	struct master_link *l = ac->data;

	if (!l->closing)
		lost(l, status == REDIS_OK ? "connection closed" : ac->errstr);
}

/* Redis answers as ferry's user (and is the primary): the duties start. */
static void
ready(struct master_link *l)
{
	bool moved = l->last_addr[0] != '\0' && strcmp(l->last_addr, l->addr) != 0;

	if (moved) {
		log_notice("redis primary %s%s moved from %s to %s: following it, "
		    "%.1f s after losing %s", sentinels(l) ? "of " : "for queue ",
		    sentinels(l) ? l->m->cfg->redis_sentinel_master : l->queue,
		    l->last_addr, l->addr, l->lost_ms != 0 ? (double)
		    (util_monotonic_ms() - l->lost_ms) / 1000. : 0., l->last_addr);
		l->outage_logged = false;       /* said: not "reachable again" */
	}
	snprintf(l->last_addr, sizeof(l->last_addr), "%s", l->addr);
	l->lost_ms = 0;
	l->up = true;
	l->last_reply_ms = util_monotonic_ms();
	if (l->on_ready != NULL)
		l->on_ready(l);
}

static void
on_connect(const redisAsyncContext *ac, int status)
{
	struct master_link *l = ac->data;

	if (status != REDIS_OK) {
		lost(l, ac->errstr);    /* hiredis frees ac after this */
		return;
	}
	/* reachable again only once it answers (link_worked): a link that
	 * accepts connections and resets them must not log every attempt */
	if (*l->m->cfg->redis_password == '\0' && !sentinels(l))
		ready(l);       /* else once AUTH is accepted (on_auth), and with
				 * Sentinel once ROLE says primary (on_role) */
}

/* ROLE answered (Sentinel only): the address a sentinel named is used only
 * once it says it is the primary. A replica (the sentinel has not seen the
 * failover yet, or the old primary came back as a replica): ask the next
 * sentinel first, and reconnect. */
static void
on_role(redisAsyncContext *ac, void *reply, void *privdata)
{
	struct master_link *l = ac->data;
	redisReply *rep = reply;
	const char *role = "a server of no role";
	(void)privdata;

	l->inflight--;
	if (rep == NULL)
		return;
	l->last_reply_ms = util_monotonic_ms();
	if (rep->type == REDIS_REPLY_ARRAY && rep->elements > 0 &&
	    rep->element[0]->type == REDIS_REPLY_STRING) {
		if (strcmp(rep->element[0]->str, "master") == 0) {
			ready(l);
			return;
		}
		role = rep->element[0]->str;
	} else if (rep->type == REDIS_REPLY_ERROR) {
		role = rep->str;
	}
	if (!l->outage_logged)
		log_warn("redis at %s, named primary of %s by a sentinel, answers "
		    "ROLE with %s: a failover is under way (retrying)", l->addr,
		    l->m->cfg->redis_sentinel_master, role);
	mark_lost(l);
	sentinel_distrust(l->m->cfg);
	redisAsyncDisconnect(ac);
}

/* AUTH answered. Refused (wrong password, user disabled or deleted) is an
 * outage only the operator can end: said once, then retried quietly at the
 * longest interval until the ACL or the file is fixed. Nothing is sent
 * before AUTH is accepted, so nothing runs as the default user. */
static void
on_auth(redisAsyncContext *ac, void *reply, void *privdata)
{
	struct master_link *l = ac->data;
	redisReply *rep = reply;
	char err[1024];

	(void)privdata;
	l->inflight--;
	if (rep == NULL)
		return;                 /* on_disconnect says it */
	l->last_reply_ms = util_monotonic_ms();
	if (rep->type != REDIS_REPLY_ERROR) {
		if (!sentinels(l))
			ready(l);
		return;
	}
	if (!l->auth_refused) {
		queue_auth_error(l->m->cfg, rep->str, err, sizeof(err));
		log_error("%s; the master retries every %.0f s, workers' jobs "
		    "wait in Redis", err, RECONNECT_MAX_S);
	}
	l->auth_refused = true;
	l->outage_logged = true;        /* lost() adds nothing */
	l->retry_s = RECONNECT_MAX_S;
	redisAsyncDisconnect(ac);
}

void
link_failed(struct master_link *l, const char *what, const redisReply *rep)
{
	if (l->auth_refused && queue_auth_refused(rep))
		return;         /* pipelined behind a refused AUTH: said */
	if (queue_role_changed(rep)) {
		/* demoted (a failover) or the slot moved: find the new one */
		if (!l->outage_logged)
			log_warn("redis at %s: %s failed: %s: reconnecting", where(l),
			    what, rep->str);
		mark_lost(l);
		if (l->ac != NULL && l->up)
			redisAsyncDisconnect(l->ac);
		return;
	}
	if (queue_error_is(rep, "NOREPLICAS")) {
		if (!l->replicas_short)
			log_warn("redis at %s refuses writes: %s (its "
			    "min-replicas-to-write): the master waits", where(l),
			    rep->str);
		l->replicas_short = true;
		return;
	}
	if (strncmp(rep->str, "LOADING", 7) == 0) {
		if (!l->loading)
			log_notice("redis at %s is loading its data set (%s): the "
			    "master waits", where(l), what);
		l->loading = true;
		return;
	}
	log_error("redis %s failed: %s", what, rep->str);
}

void
link_worked(struct master_link *l)
{
	if (l->loading)
		log_notice("redis at %s has loaded its data set", where(l));
	l->loading = false;
	l->auth_refused = false;
	if (l->replicas_short)
		log_notice("redis at %s takes writes again", where(l));
	l->replicas_short = false;
	if (l->outage_logged) {
		log_notice("redis reachable again at %s", where(l));
		master_event("redis", "redis reachable again at %s", where(l));
	}
	l->outage_logged = false;
	l->retry_s = RECONNECT_MIN_S;
}

int
link_send(struct master_link *l, redisCallbackFn *cb, void *priv, int argc,
    const char **argv)
{
	return link_sendv(l, cb, priv, argc, argv, NULL);
}

int
link_sendv(struct master_link *l, redisCallbackFn *cb, void *priv, int argc,
    const char **argv, const size_t *lens)
{
	if (!l->up)
		return -1;
	if (redisAsyncCommandArgv(l->ac, cb, priv, argc, argv, lens) != REDIS_OK)
		return -1;
	l->inflight++;
	return 0;
}

int
link_script(struct master_link *l, enum lua_script s, redisCallbackFn *cb,
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
	return link_send(l, cb, priv, argc + 3, argv);
}

static void
on_select(redisAsyncContext *ac, void *reply, void *privdata)
{
	struct master_link *l = ac->data;
	redisReply *rep = reply;
	(void)privdata;

	l->inflight--;
	if (rep != NULL && rep->type == REDIS_REPLY_ERROR)
		link_failed(l, "SELECT", rep);
}

/* Where this link connects now: 0 with host and port (host "" for the
 * socket), or -1 with why not (no sentinel or cluster node answers). */
static int
locate(struct master_link *l, char *host, size_t hostsize, int *port,
    char *err, size_t errsize)
{
	const struct ferry_config *cfg = l->m->cfg;

	/* synchronous, each sentinel or seed node within
	 * QUEUE_SENTINEL_TIMEOUT_MS: the loop waits for a dead one's timeout
	 * at most per try */
	if (sentinels(l))
		return sentinel_find_primary(cfg, QUEUE_SENTINEL_TIMEOUT_MS, host,
		    hostsize, port, err, errsize);
	if (*cfg->redis_cluster != '\0')
		return cluster_find_node(cfg, l->queue, QUEUE_SENTINEL_TIMEOUT_MS,
		    host, hostsize, port, err, errsize);
	if (*cfg->redis_socket != '\0') {
		host[0] = '\0';
		return 0;
	}
	snprintf(host, hostsize, "%s", cfg->redis_host);
	*port = cfg->redis_port;
	return 0;
}

static void
connect_now(struct master_link *l)
{
	const struct ferry_config *cfg = l->m->cfg;
	char host[CONFIG_HOST_MAX], err[1024];
	redisAsyncContext *ac;
	int port = 0;

	if (locate(l, host, sizeof(host), &port, err, sizeof(err)) == -1) {
		lost(l, err);
		return;
	}
	if (host[0] == '\0') {
		snprintf(l->addr, sizeof(l->addr), "%s", cfg->redis_socket);
		ac = redisAsyncConnectUnix(cfg->redis_socket);
	} else {
		snprintf(l->addr, sizeof(l->addr), "%s:%d", host, port);
		ac = redisAsyncConnect(host, port);
	}
	if (ac == NULL || ac->err) {
		lost(l, ac != NULL ? ac->errstr : "out of memory");
		redisAsyncFree(ac);
		return;
	}
	ac->data = l;
	l->ac = ac;
	l->up = true;           /* commands queue until connected */
	redisLibevAttach(l->m->loop, ac);
	redisAsyncSetConnectCallback(ac, on_connect);
	redisAsyncSetDisconnectCallback(ac, on_disconnect);
	const char *auth[3];
	int nauth = redis_auth_argv(cfg, auth);
	if (nauth > 0)
		link_send(l, on_auth, NULL, nauth, auth);
	if (sentinels(l)) {
		const char *role[] = { "ROLE" };
		link_send(l, on_role, NULL, 1, role);
	}
	if (cfg->redis_db != 0) {
		char db[16];
		snprintf(db, sizeof(db), "%d", cfg->redis_db);
		const char *argv[] = { "SELECT", db };
		link_send(l, on_select, NULL, 2, argv);
	}
	l->up = false;          /* until on_connect */
}

static void
reconnect_cb(struct ev_loop *loop, ev_timer *t, int revents)
{
	(void)loop;
	(void)revents;
	connect_now(t->data);
}

struct master_link *
link_new(struct master *m, const char *queue, void *owner)
{
	struct master_link *l = xcalloc(1, sizeof(*l));

	l->m = m;
	l->owner = owner;
	snprintf(l->queue, sizeof(l->queue), "%s", queue != NULL ? queue : "");
	l->retry_s = RECONNECT_MIN_S;
	ev_init(&l->reconnect, reconnect_cb);
	l->reconnect.data = l;
	return l;
}

void
link_start(struct master_link *l)
{
	connect_now(l);
}

bool
link_stalled(struct master_link *l, int64_t watchdog_ms)
{
	if (!l->up || l->inflight <= 0 ||
	    util_monotonic_ms() - l->last_reply_ms <= watchdog_ms)
		return false;
	log_warn("redis at %s has not answered for %lld s: reconnecting",
	    where(l), (long long)(watchdog_ms / 1000));
	redisAsyncDisconnect(l->ac);
	return true;
}

void
link_retry_now(struct master_link *l)
{
	if (l->up || l->ac != NULL || l->closing ||
	    !ev_is_active(&l->reconnect))
		return;
	ev_timer_stop(l->m->loop, &l->reconnect);
	connect_now(l);         /* failing, it waits as long as it would have */
}

void
link_switched(struct master_link *l, const char *addr)
{
	if (strcmp(l->addr, addr) == 0 || l->ac == NULL || !l->up)
		return;
	mark_lost(l);           /* the switch line says it */
	redisAsyncDisconnect(l->ac);
}

void
link_free(struct master_link *l)
{
	l->closing = true;
	ev_timer_stop(l->m->loop, &l->reconnect);
	if (l->ac != NULL)
		redisAsyncFree(l->ac);   /* calls back with NULL replies */
	l->ac = NULL;
	free(l);
}
