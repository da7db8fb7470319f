/* master_memory.c - the Redis memory check: maxmemory-policy, persistence
 * and used_memory / maxmemory, once synchronously at start (which may
 * refuse to start) and then every memory_check_interval on the master's
 * loop, over a connection of its own so a slow INFO never delays the
 * heartbeat. Each finding is logged when it changes, not at every check. */
#include "master_memory.h"

#include <hiredis/adapters/libev.h>
#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "master_int.h"
#include "master_id.h"
#include "master_redis.h"
#include "memory_check.h"
#include "metrics.h"
#include "queue.h"
#include "redis_auth.h"
#include "redis_replication.h"
#include "util.h"

#define START_TIMEOUT_MS 5000
#define WATCHDOG_MS 10000
#define MSG_MAX 512

enum { ASK_POLICY, ASK_SAVE, ASK_INFO, ASK_COUNT };

static struct {
	struct master *m;
	redisAsyncContext *ac;
	ev_timer timer;
	int pending;             /* replies of this round still due */
	bool failed;             /* ... one of them was lost */
	int64_t sent_ms;
	struct redis_memory cur;
	/* what was said last */
	char eviction[MSG_MAX], persistence[MSG_MAX];
	bool said_fallback;
	enum memory_mark level;  /* last said */
	bool said_unreachable;
	char addr[300];          /* with Sentinel: the primary connected to */
} mm;

static const char *
address(const struct ferry_config *cfg)
{
	static char addr[300];

	if (mm.m != NULL && *cfg->redis_sentinels != '\0' &&
	    *master_redis_address(mm.m) != '\0') {
		snprintf(addr, sizeof(addr), "%s (primary of %s)",
		    master_redis_address(mm.m), cfg->redis_sentinel_master);
		return addr;
	}
	if (mm.m != NULL && *cfg->redis_cluster != '\0' &&
	    *master_redis_address(mm.m) != '\0') {
		snprintf(addr, sizeof(addr), "%s (cluster node)",
		    master_redis_address(mm.m));
		return addr;
	}
	return queue_address(cfg, addr, sizeof(addr));
}

static void
say_fallback(const struct ferry_config *cfg, const struct redis_memory *r)
{
	if (!r->config_refused || mm.said_fallback)
		return;
	mm.said_fallback = true;
	log_notice("redis at %s refuses CONFIG GET (%s): reading "
	    "maxmemory-policy from INFO instead", address(cfg),
	    r->config_error);
}

/* What Redis cannot evict (memory_unevictable: under a volatile-* policy
 * not the cache, which Redis evicts to make room) crossing
 * memory_warn_percent or memory_refuse_percent, either way: the same
 * measure as the producers' refusal (enqueue.lua). The queues' own bytes
 * come from the last metrics refresh. */
static void
say_watermark(const struct ferry_config *cfg, const struct redis_memory *r)
{
	int64_t own = 0, own_keys = 0;

	if (mm.m != NULL && mm.m->metrics != NULL)
		metrics_own_bytes(mm.m->metrics, &own, &own_keys);
	long long unevictable = memory_unevictable(r, own, own_keys);
	int pct = memory_unevictable_percent(r, unevictable);
	enum memory_mark level = memory_mark(pct, cfg->memory_warn_percent,
	    cfg->memory_refuse_percent, mm.level);
	char held[32], max[32], what[200];

	if (level == mm.level)
		return;
	memory_fmt_bytes(unevictable, held, sizeof(held));
	memory_fmt_bytes(r->max, max, sizeof(max));
	if (strncmp(r->policy, "volatile-", 9) == 0)
		snprintf(what, sizeof(what), "what it cannot evict (%s evicts "
		    "only keys with a TTL) is %s of maxmemory %s", r->policy, held,
		    max);
	else
		snprintf(what, sizeof(what), "used_memory %s of maxmemory %s",
		    held, max);
	if (level == MEMORY_ABOVE_REFUSE)
		log_warn("redis at %s is %d%% full, %s; memory_refuse_percent %d: "
		    "producers are refused until the queues drain", address(cfg),
		    pct, what, cfg->memory_refuse_percent);
	else if (level == MEMORY_ABOVE_WARN && mm.level == MEMORY_BELOW_WARN)
		log_warn("redis at %s is %d%% full, %s; memory_warn_percent %d",
		    address(cfg), pct, what, cfg->memory_warn_percent);
	else if (level == MEMORY_ABOVE_WARN)
		log_notice("redis at %s is down to %d%%, %s: below "
		    "memory_refuse_percent %d, producers are accepted again",
		    address(cfg), pct, what, cfg->memory_refuse_percent);
	else
		log_notice("redis at %s is below memory_warn_percent %d again, %s",
		    address(cfg), cfg->memory_warn_percent, what);
	mm.level = level;
}

/* Log `msg` (verdict v) if it differs from what was said last, in `last`.
 * running: ferryd is up already, a refusal can only be shouted. */
static void
say_change(const struct ferry_config *cfg, char *last, enum memory_verdict v,
    const char *msg, const char *cleared, bool running)
{
	if (strcmp(last, msg) == 0)
		return;
	if (v == MEMORY_REFUSE && running)
		log_error("redis at %s: %s; ferryd keeps running: fix it now",
		    address(cfg), msg);
	else if (v == MEMORY_WARN)
		log_warn("redis at %s: %s", address(cfg), msg);
	else if (v == MEMORY_OK && last[0] != '\0')
		log_notice("redis at %s: %s", address(cfg), cleared);
	snprintf(last, MSG_MAX, "%s", msg);
}

/* Judge r, log what changed; returns the worst verdict. */
static enum memory_verdict
judge(const struct ferry_config *cfg, const struct redis_memory *r,
    bool running, char *refused, size_t size)
{
	char msg[MSG_MAX], cleared[MSG_MAX];
	enum memory_verdict ev, pv;

	say_fallback(cfg, r);
	ev = memory_judge_eviction(r, cfg->allow_unsafe_eviction, msg,
	    sizeof(msg));
	snprintf(cleared, sizeof(cleared), "maxmemory-policy is %s now",
	    r->policy);
	if (ev == MEMORY_REFUSE && !running)
		snprintf(refused, size, "%s", msg);
	say_change(cfg, mm.eviction, ev, msg, cleared, running);
	pv = memory_judge_persistence(r, cfg->require_persistence, msg,
	    sizeof(msg));
	if (pv == MEMORY_REFUSE && !running)
		snprintf(refused + strlen(refused), size - strlen(refused),
		    "%s%s", refused[0] != '\0' ? "; and " : "", msg);
	say_change(cfg, mm.persistence, pv, msg, "persistence is on again",
	    running);
	say_watermark(cfg, r);
	return ev > pv ? ev : pv;
}

/* Redis accepts list elements up to proto-max-bulk-len (512 MB by
 * default). Every byte of an element a producer pushed passes through
 * ferry's scripts several times when it is fetched and dead-lettered:
 * about 1.7 s of a blocked Redis per 100 MB on the benchmark machine
 * (doc/benchmarks.md). Say so once at start when the limit is far above
 * what any queue accepts. */
static void
say_bulk_limit(const struct ferry_config *cfg, redisContext *c)
{
	redisReply *r = redisCommand(c, "CONFIG GET proto-max-bulk-len");
	long most = 0;
	char a[32], b[32];

	for (int i = 0; i < cfg->nqueues; i++)
		if (cfg->queues[i].max_job_bytes > most)
			most = cfg->queues[i].max_job_bytes;
	if (r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
	    r->element[1]->type == REDIS_REPLY_STRING && most > 0) {
		long long limit = strtoll(r->element[1]->str, NULL, 10);
		if (limit > 16LL * most)
			log_notice("redis at %s accepts elements of up to %s "
			    "(proto-max-bulk-len), the largest max_job_bytes is %s: a "
			    "producer's oversized element blocks Redis for about 1.7 s "
			    "per 100 MB while ferry dead-letters it; consider "
			    "proto-max-bulk-len of a few times max_job_bytes",
			    address(cfg), memory_fmt_bytes(limit, a, sizeof(a)),
			    memory_fmt_bytes(most, b, sizeof(b)));
	}
	freeReplyObject(r);
}

/* Credentials Redis refuses (a wrong password, a disabled or unknown ACL
 * user, a password missing, a user without access to ferry's keys) only
 * the operator can fix: ferryd does not start, and says so on the
 * terminal. A Redis that does not answer is an outage: it starts. */
static int
refuse_credentials(const struct ferry_config *cfg, redisContext **c)
{
	char err[1024], key[QUEUE_KEY_MAX];
	bool refused;
	redisReply *r;

	*c = queue_connect_as(cfg, START_TIMEOUT_MS, &refused, err,
	    sizeof(err));
	if (*c != NULL) {
		/* a key every ferryd reads: NOAUTH or NOPERM here is final */
		struct queue_keys k;
		queue_keys_init(&k, cfg->redis_prefix, cfg->nqueues > 0 ?
		    cfg->queues[0].name : "q");
		snprintf(key, sizeof(key), "%s", k.clock);
		r = redisCommand(*c, "EXISTS %s", key);
		refused = queue_auth_refused(r);
		if (refused)
			queue_auth_error(cfg, r->str, err, sizeof(err));
		freeReplyObject(r);
	}
	if (!refused)
		return 0;
	fprintf(stderr, "ferryd: %s; not started\n", err);
	if (log_fd() != STDERR_FILENO)
		log_error("%s; not started", err);
	redisFree(*c);
	*c = NULL;
	return -1;
}

int
memory_check_start(const struct ferry_config *cfg)
{
	char err[512], refused[MSG_MAX * 2] = "";
	struct redis_memory r;
	redisContext *c;

	if (refuse_credentials(cfg, &c) == -1)
		return -1;

	/* the connection error itself is the master's to log */
	if (c == NULL || memory_fetch(c, &r, true, err, sizeof(err)) == -1) {
		log_warn("redis at %s does not answer%s%s: maxmemory-policy and "
		    "persistence not checked at start; the master checks them "
		    "every memory_check_interval", address(cfg), c ? ": " : "",
		    c ? err : "");
		mm.said_unreachable = true;
		redisFree(c);
		return 0;
	}
	say_bulk_limit(cfg, c);
	redis_replication_say(cfg, c);
	redisFree(c);
	if (judge(cfg, &r, false, refused, sizeof(refused)) != MEMORY_REFUSE)
		return 0;
	fprintf(stderr, "ferryd: redis at %s: %s; not started\n",
	    address(cfg), refused);
	if (log_fd() != STDERR_FILENO)
		log_error("redis at %s: %s; not started", address(cfg), refused);
	return -1;
}

static void
round_done(void)
{
	const struct ferry_config *cfg;
	char refused[MSG_MAX * 2];

	if (mm.failed || mm.m == NULL)
		return;         /* the connection went: next round */
	cfg = mm.m->cfg;
	if (mm.said_unreachable)
		log_notice("redis at %s answers: checking its memory settings",
		    address(cfg));
	mm.said_unreachable = false;
	judge(cfg, &mm.cur, true, refused, sizeof(refused));
}

static void
on_reply(redisAsyncContext *ac, void *reply, void *privdata)
{
	const redisReply *r = reply;
	intptr_t ask = (intptr_t)privdata;

	(void)ac;
	if (r == NULL)
		mm.failed = true;
	else if (ask == ASK_POLICY || ask == ASK_SAVE)
		memory_parse_config(&mm.cur, r, ask == ASK_POLICY);
	else if (ask == ASK_INFO && r->type == REDIS_REPLY_STRING)
		memory_parse_info(&mm.cur, r->str);
	else if (ask == ASK_INFO)
		mm.failed = true;
	else if (r->type == REDIS_REPLY_ERROR && queue_auth_refused(r))
		mm.failed = true;       /* the master's connection says it once */
	else if (r->type == REDIS_REPLY_ERROR)
		log_error("redis %s failed (memory check connection): %s",
		    ask == ASK_COUNT ? "AUTH" : "SELECT", r->str);
	if (ask < ASK_COUNT && --mm.pending == 0)
		round_done();
}

static void
on_connect(const redisAsyncContext *ac, int status)
{
	(void)ac;
	if (status != REDIS_OK)
		mm.ac = NULL;   /* hiredis frees it */
}

static void
on_disconnect(const redisAsyncContext *ac, int status)
{
	(void)ac;
	(void)status;
	mm.ac = NULL;
}

static bool
connect_now(struct master *m)
{
	const struct ferry_config *cfg = m->cfg;
	redisAsyncContext *ac;
	char db[16], host[CONFIG_HOST_MAX];
	int port;

	if (*cfg->redis_sentinels != '\0' || *cfg->redis_cluster != '\0') {
		/* where the master's (first) connection is: the sentinels'
		 * primary, or the node of the first queue */
		snprintf(mm.addr, sizeof(mm.addr), "%s", master_redis_address(m));
		if (config_parse_hostport(mm.addr, host, sizeof(host), &port) == -1)
			return false;
		ac = redisAsyncConnect(host, port);
	} else if (*cfg->redis_socket != '\0') {
		ac = redisAsyncConnectUnix(cfg->redis_socket);
	} else {
		ac = redisAsyncConnect(cfg->redis_host, cfg->redis_port);
	}

	if (ac == NULL || ac->err) {
		redisAsyncFree(ac);
		return false;
	}
	redisLibevAttach(m->loop, ac);
	redisAsyncSetConnectCallback(ac, on_connect);
	redisAsyncSetDisconnectCallback(ac, on_disconnect);
	mm.ac = ac;
	const char *auth[3];
	int nauth = redis_auth_argv(cfg, auth);
	if (nauth > 0)
		redisAsyncCommandArgv(ac, on_reply, (void *)(intptr_t)ASK_COUNT,
		    nauth, auth, NULL);
	if (cfg->redis_db != 0) {
		snprintf(db, sizeof(db), "%d", cfg->redis_db);
		redisAsyncCommand(ac, on_reply, (void *)(intptr_t)(ASK_COUNT + 1),
		    "SELECT %s", db);
	}
	return true;
}

static void
send_round(void)
{
	static const char *const cmds[ASK_COUNT][3] = {
		{ "CONFIG", "GET", "maxmemory-policy" },
		{ "CONFIG", "GET", "save" },
		{ "INFO" },
	};
	static const int argc[ASK_COUNT] = { 3, 3, 1 };

	memory_init(&mm.cur);
	mm.failed = false;
	mm.sent_ms = util_monotonic_ms();
	for (int i = 0; i < ASK_COUNT && mm.ac != NULL; i++)
		if (redisAsyncCommandArgv(mm.ac, on_reply, (void *)(intptr_t)i,
		    argc[i], (const char **)cmds[i], NULL) == REDIS_OK)
			mm.pending++;
}

static void
timer_cb(struct ev_loop *loop, ev_timer *t, int revents)
{
	struct master *m = t->data;
	(void)revents;

	t->repeat = (double)m->cfg->memory_check_interval_ms / 1000.;
	ev_timer_again(loop, t);
	if (mm.pending > 0) {
		if (mm.ac != NULL &&
		    util_monotonic_ms() - mm.sent_ms > WATCHDOG_MS) {
			log_warn("redis at %s: no answer to the memory check for %d "
			    "s: reconnecting", address(m->cfg), WATCHDOG_MS / 1000);
			redisAsyncFree(mm.ac);  /* replies come NULL */
			mm.ac = NULL;
		}
		return;
	}
	if (mm.ac != NULL && (*m->cfg->redis_sentinels != '\0' ||
	    *m->cfg->redis_cluster != '\0') &&
	    strcmp(mm.addr, master_redis_address(m)) != 0) {
		redisAsyncFree(mm.ac);  /* the primary moved: follow it */
		mm.ac = NULL;
	}
	if (mm.ac == NULL && !connect_now(m))
		return;
	send_round();
}

void
master_memory_start(struct master *m)
{
	mm.m = m;
	ev_init(&mm.timer, timer_cb);
	mm.timer.data = m;
	mm.timer.repeat = (double)m->cfg->memory_check_interval_ms / 1000.;
	ev_timer_again(m->loop, &mm.timer);
}

void
master_memory_stop(struct master *m)
{
	if (mm.m != m)
		return;
	ev_timer_stop(m->loop, &mm.timer);
	if (mm.ac != NULL)
		redisAsyncFree(mm.ac);  /* calls back with NULL replies */
	mm.ac = NULL;
	mm.m = NULL;
}
