/* ctl_stats.c - `ferryctl stats`: lengths, workers and counters of the
 * queues and Redis' memory, as text or JSON. Reads Redis only: works
 * whether or not ferryd runs. */
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl.h"
#include "lua_scripts.h"
#include "memory_check.h"
#include "util.h"

/* The stats hash's fields, and the names stats prints them under: its
 * "dead" (jobs ever moved to the dead-letter list) is "deadlettered", as
 * in `ferryctl status`, beside "dead" (entries in the list now). */
static const char *const counter_fields[] = {
	"enqueued", "done", "retried", "dead", "recovered", "replayed",
	"cache_missing", "orphans", "protected_lost",
};
static const char *const counter_names[] = {
	"enqueued", "done", "retried", "deadlettered", "recovered", "replayed",
	"cache_missing", "cache_orphans", "protected_lost",
};
#define NCOUNTERS FERRY_ARRAY_LEN(counter_fields)
#define COUNTER_ENQUEUED 0

/* owners: a worker handed back holds this tombstone, "dead:<ms>"
 * (src/redis/lua/common.lua reclaim) */
#define TOMBSTONE_PREFIX "dead:"

struct proc_info {
	char *worker;
	char *master;           /* NULL for a tombstone */
	long long handed_back;  /* ms, for a tombstone */
	long long jobs;
};

/* What the queue holds in Redis (memory.lua), and its protected cache
 * keys; bytes -1: unknown (memory.lua refused). */
struct queue_memory {
	long long bytes, max, unevictable, protected_keys, protected_bytes;
	char refusal[512];      /* why its producers are refused, or "" */
};

struct queue_stats {
	const char *name;
	long long ready, requeued, delayed, scheduled, dead, processing;
	struct queue_memory mem;
	int refuse_percent;     /* [ferryd] memory_refuse_percent */
	long long counters[NCOUNTERS];
	size_t nprocs;
	struct proc_info *procs;
};

/* An integer reply (LLEN, ZCARD) into *out; else a message. */
static int
reply_int(struct ctl *c, const char *what, redisReply *r, long long *out)
{
	if (!ctl_reply_ok(r) || r->type != REDIS_REPLY_INTEGER)
		return ctl_redis_fail(c, what, r);
	*out = r->integer;
	freeReplyObject(r);
	return 0;
}

/* owners: worker id -> master id (or a tombstone); each worker's
 * processing list length. */
static int
stats_procs(struct ctl *c, const struct queue_keys *k,
    struct queue_stats *st)
{
	redisReply *r = redisCommand(c->rc, "HGETALL %s", k->owners);
	char key[QUEUE_KEY_MAX + 128];
	int rc = 0;

	if (!ctl_reply_ok(r) || r->type != REDIS_REPLY_ARRAY)
		return ctl_redis_fail(c, "HGETALL of the owners hash", r);
	st->procs = xcalloc(r->elements / 2 + 1, sizeof(*st->procs));
	for (size_t i = 0; i + 1 < r->elements && rc == 0; i += 2) {
		struct proc_info *p = &st->procs[st->nprocs++];
		const char *owner = r->element[i + 1]->str;
		p->worker = xstrdup(r->element[i]->str);
		if (strncmp(owner, TOMBSTONE_PREFIX,
		    strlen(TOMBSTONE_PREFIX)) == 0)
			p->handed_back = strtoll(owner + strlen(TOMBSTONE_PREFIX),
			    NULL, 10);
		else
			p->master = xstrdup(owner);
		queue_proc_key(k, p->worker, key, sizeof(key));
		rc = reply_int(c, "LLEN of a processing list",
		    redisCommand(c->rc, "LLEN %s", key), &p->jobs);
		st->processing += p->jobs;
	}
	freeReplyObject(r);
	return rc;
}

static int
stats_counters(struct ctl *c, const struct queue_keys *k,
    struct queue_stats *st)
{
	const char *argv[2 + NCOUNTERS] = { "HMGET", k->stats };
	redisReply *r;

	for (size_t i = 0; i < NCOUNTERS; i++)
		argv[2 + i] = counter_fields[i];
	r = redisCommandArgv(c->rc, 2 + NCOUNTERS, argv, NULL);
	if (!ctl_reply_ok(r) || r->type != REDIS_REPLY_ARRAY ||
	    r->elements != NCOUNTERS)
		return ctl_redis_fail(c, "HMGET of the stats hash", r);
	for (size_t i = 0; i < NCOUNTERS; i++)
		st->counters[i] = r->element[i]->type == REDIS_REPLY_STRING ?
		    strtoll(r->element[i]->str, NULL, 10) : 0;
	freeReplyObject(r);
	return 0;
}

/* The counters and the lengths. `enqueued` is the stats hash's count of
 * the jobs workers took from ready (fetch.lua) plus what waits there: read
 * again until no fetch ran between the counter and the length (no MULTI:
 * Redis refuses one at maxmemory), so each job is counted once. */
static int
stats_lengths(struct ctl *c, const struct queue_keys *k,
    struct queue_stats *st)
{
	long long again = -1;
	int rc;

	for (int tries = 0; tries < 10; tries++) {
		if ((rc = stats_counters(c, k, st)) != 0 ||
		    (rc = reply_int(c, "LLEN of the ready list",
		    redisCommand(c->rc, "LLEN %s", k->ready), &st->ready)) != 0)
			return rc;
		redisReply *r = redisCommand(c->rc, "HGET %s enqueued", k->stats);
		if (!ctl_reply_ok(r))
			return ctl_redis_fail(c, "HGET of the stats hash", r);
		again = r->type == REDIS_REPLY_STRING ? strtoll(r->str, NULL, 10) : 0;
		freeReplyObject(r);
		if (again == st->counters[COUNTER_ENQUEUED])
			break;
	}
	st->counters[COUNTER_ENQUEUED] = again + st->ready;
	if ((rc = reply_int(c, "LLEN of the requeue list",
	    redisCommand(c->rc, "LLEN %s", k->requeue), &st->requeued)) != 0 ||
	    (rc = reply_int(c, "ZCARD of the delayed set",
	    redisCommand(c->rc, "ZCARD %s", k->delayed), &st->delayed)) != 0 ||
	    (rc = reply_int(c, "ZCARD of the scheduled set",
	    redisCommand(c->rc, "ZCARD %s", k->scheduled), &st->scheduled)) != 0)
		return rc;
	return reply_int(c, "LLEN of the dead list",
	    redisCommand(c->rc, "LLEN %s", k->dead), &st->dead);
}

/* memory.lua: what the producers' refusal sees, and the protected keys'
 * count and bytes (estimated from a sample). */
static int
stats_queue_memory(struct ctl *c, const struct queue_keys *k,
    struct queue_memory *m)
{
	char pct[16];
	redisReply *r;

	snprintf(pct, sizeof(pct), "%d", c->cfg->memory_refuse_percent);
	const char *argv[] = { k->ready, pct };
	m->bytes = -1;
	r = queue_script(c->rc, LUA_MEMORY, 1, 2, argv, NULL);
	if (r == NULL)
		return ctl_redis_fail(c, "memory.lua", NULL);
	if (r->type == REDIS_REPLY_ARRAY && r->elements >= 13) {
		m->max = r->element[1]->integer;
		m->unevictable = r->element[5]->integer;
		m->bytes = r->element[6]->integer;
		snprintf(m->refusal, sizeof(m->refusal), "%s",
		    r->element[10]->type == REDIS_REPLY_STRING ?
		    r->element[10]->str : "");
		m->protected_bytes = r->element[11]->integer;
		m->protected_keys = r->element[12]->integer;
	}
	freeReplyObject(r);
	return 0;
}

static int
stats_collect(struct ctl *c, const char *queue, struct queue_stats *st)
{
	struct queue_keys k;
	int rc;

	memset(st, 0, sizeof(*st));
	st->name = queue;
	st->refuse_percent = c->cfg->memory_refuse_percent;
	queue_keys_init(&k, c->cfg->redis_prefix, queue);
	if ((rc = stats_lengths(c, &k, st)) != 0 ||
	    (rc = stats_queue_memory(c, &k, &st->mem)) != 0)
		return rc;
	return stats_procs(c, &k, st);
}

/* "  memory  12.3 MiB, 3% of maxmemory 48.0 MiB; 40 protected cache keys
 * (1.2 MiB)" and the refusal, if any. */
static void
stats_print_memory(const struct queue_memory *m, int refuse_percent)
{
	char bytes[32], max[32], prot[32];

	if (m->bytes < 0)
		return;
	memory_fmt_bytes(m->bytes, bytes, sizeof(bytes));
	memory_fmt_bytes(m->protected_bytes, prot, sizeof(prot));
	printf("  %-12s %s", "memory", bytes);
	if (m->max > 0)
		printf(", %.1f%% of maxmemory %s", (double)m->bytes * 100. /
		    (double)m->max, memory_fmt_bytes(m->max, max, sizeof(max)));
	printf("; %lld protected cache key%s (%s)", m->protected_keys,
	    m->protected_keys == 1 ? "" : "s", prot);
	if (m->max > 0)
		printf("; redis cannot evict %lld%% of maxmemory (producers "
		    "refused at %d%%)", m->unevictable * 100 / m->max,
		    refuse_percent);
	printf("\n");
	if (m->refusal[0] != '\0')
		printf("  %-12s %s\n", "refusing", m->refusal);
}

static void
stats_free(struct queue_stats *st)
{
	for (size_t i = 0; i < st->nprocs; i++) {
		free(st->procs[i].worker);
		free(st->procs[i].master);
	}
	free(st->procs);
	st->procs = NULL;
	st->nprocs = 0;
}

static void
stats_print(const struct queue_stats *st)
{
	char when[40];

	printf("queue %s\n", st->name);
	printf("  %-12s %lld\n", "ready", st->ready);
	printf("  %-12s %lld\n", "requeued", st->requeued);
	printf("  %-12s %lld\n", "delayed", st->delayed);
	printf("  %-12s %lld\n", "scheduled", st->scheduled);
	printf("  %-12s %lld\n", "dead", st->dead);
	printf("  %-12s %lld\n", "processing", st->processing);
	stats_print_memory(&st->mem, st->refuse_percent);
	for (size_t i = 0; i < st->nprocs; i++) {
		const struct proc_info *p = &st->procs[i];
		if (p->master != NULL) {
			printf("    proc:%s %lld (master %s)\n", p->worker,
			    p->jobs, p->master);
			continue;
		}
		printf("    proc:%s %lld (handed back at %s: the worker died or "
		    "was stopped and its jobs went back to the queue; its name "
		    "is kept %s so that it cannot fetch again)\n", p->worker,
		    p->jobs, ctl_time_text(p->handed_back, when, sizeof(when)),
		    p->jobs > 0 ? "until the reaper returns the jobs that "
		    "arrived after it, then 30 s" : "30 s");
	}
	printf("  %-12s", "counters");
	for (size_t i = 0; i < NCOUNTERS; i++)
		printf("%s %s %lld", i == 0 ? "" : ",", counter_names[i],
		    st->counters[i]);
	printf("\n");
}

static json_t *
proc_json(const struct proc_info *p)
{
	char when[40];

	if (p->master != NULL)
		return json_pack("{s:I, s:s}", "jobs", (json_int_t)p->jobs,
		    "master", p->master);
	return json_pack("{s:I, s:n, s:s}", "jobs", (json_int_t)p->jobs,
	    "master", "handed_back", ctl_time_text(p->handed_back, when,
	    sizeof(when)));
}

static json_t *
stats_json(const struct queue_stats *st)
{
	json_t *procs = json_object(), *counters = json_object();

	for (size_t i = 0; i < st->nprocs; i++)
		json_object_set_new(procs, st->procs[i].worker,
		    proc_json(&st->procs[i]));
	for (size_t i = 0; i < NCOUNTERS; i++)
		json_object_set_new(counters, counter_names[i],
		    json_integer(st->counters[i]));
	json_t *mem = st->mem.bytes < 0 ? json_null() : json_pack("{s:I, s:o, "
	    "s:I, s:I, s:I, s:o}", "bytes", (json_int_t)st->mem.bytes,
	    "percent_of_maxmemory", st->mem.max > 0 ? json_real((double)
	    st->mem.bytes * 100. / (double)st->mem.max) : json_null(),
	    "protected_keys", (json_int_t)st->mem.protected_keys,
	    "protected_bytes", (json_int_t)st->mem.protected_bytes,
	    "unevictable", (json_int_t)st->mem.unevictable,
	    "refusing", st->mem.refusal[0] != '\0' ?
	    json_string(st->mem.refusal) : json_null());
	return json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:o, s:o, s:o}",
	    "ready", (json_int_t)st->ready,
	    "requeued", (json_int_t)st->requeued,
	    "delayed", (json_int_t)st->delayed,
	    "scheduled", (json_int_t)st->scheduled,
	    "dead", (json_int_t)st->dead,
	    "processing", (json_int_t)st->processing,
	    "workers", procs, "counters", counters, "memory", mem);
}

/* Redis memory for `stats`: one line of text, or an object in each queue's
 * JSON (a top-level key could clash with a queue's name). */
static void
memory_print(const struct ctl *c, const struct redis_memory *m)
{
	char used[32], max[32];

	memory_fmt_bytes(m->used, used, sizeof(used));
	memory_fmt_bytes(m->max, max, sizeof(max));
	printf("redis %s: used_memory %s", c->addr, used);
	if (m->max > 0)
		printf(" of maxmemory %s (%d%%)", max, memory_percent(m));
	else
		printf(", no maxmemory");
	printf(", maxmemory-policy %s\n", m->policy[0] ? m->policy : "unknown");
}

static json_t *
memory_json(const struct redis_memory *m)
{
	int pct = memory_percent(m);

	if (m->used < 0)
		return json_null();
	return json_pack("{s:I, s:I, s:o, s:s}", "used_memory",
	    (json_int_t)m->used, "maxmemory", (json_int_t)m->max, "percent",
	    pct < 0 ? json_null() : json_integer(pct), "maxmemory_policy",
	    m->policy);
}

/* INFO refused (ACL): memory unknown, used -1. */
static int
stats_memory(struct ctl *c, struct redis_memory *m, bool as_json)
{
	char err[256];

	if (memory_fetch(c->rc, m, true, err, sizeof(err)) == -1) {
		fprintf(stderr, "ferryctl: redis at %s: %s\n", c->addr, err);
		if (c->rc->err)
			return CTL_EX_UNAVAILABLE;
		m->used = -1;
	}
	if (!as_json && m->used >= 0)
		memory_print(c, m);
	return 0;
}

static int
stats_parse(int argc, char **argv, int *as_json)
{
	static const struct option longopts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ NULL, 0, NULL, 0 },
	};
	int ch;

	optind = 0;
	while ((ch = getopt_long(argc, argv, "j", longopts, NULL)) != -1) {
		if (ch != 'j')
			return -1;
		*as_json = 1;
	}
	return argc - optind > 1 ? -1 : optind;
}

/* ferryctl stats [--json] [QUEUE] */
int
ctl_stats(struct ctl *c, int argc, char **argv)
{
	int as_json = 0, rc = 0, first = stats_parse(argc, argv, &as_json);
	json_t *all = json_object(), *qj;
	struct queue_stats st;
	struct redis_memory mem;

	if (first < 0) {
		json_decref(all);
		fprintf(stderr, "usage: ferryctl stats [--json] [QUEUE]\n");
		return CTL_EX_USAGE;
	}
	if (first < argc && ctl_queue(c, argv[first]) == NULL)
		rc = CTL_EX_USAGE;
	else if (ctl_redis(c) == NULL)
		rc = CTL_EX_UNAVAILABLE;
	else
		rc = stats_memory(c, &mem, as_json);
	for (int i = 0; rc == 0 && i < c->cfg->nqueues; i++) {
		const char *name = c->cfg->queues[i].name;
		if (first < argc && strcmp(name, argv[first]) != 0)
			continue;
		if (ctl_redis_for(c, name) == NULL) {
			rc = CTL_EX_UNAVAILABLE;
			break;
		}
		if ((rc = stats_collect(c, name, &st)) == 0 && as_json) {
			qj = stats_json(&st);
			json_object_set_new(qj, "redis", memory_json(&mem));
			json_object_set_new(all, name, qj);
		} else if (rc == 0)
			stats_print(&st);
		stats_free(&st);
	}
	if (rc == 0 && as_json) {
		json_dumpf(all, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
		printf("\n");
	}
	json_decref(all);
	return rc;
}

