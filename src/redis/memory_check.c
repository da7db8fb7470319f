/* memory_check.c - read a Redis server's memory, eviction and persistence
 * settings from INFO and CONFIG GET, and judge them: allkeys-* eviction can
 * lose queue keys, volatile-* cache keys, no AOF/RDB every job on restart. */
#include "memory_check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void
memory_init(struct redis_memory *m)
{
	memset(m, 0, sizeof(*m));
	m->aof = -1;
	m->save = -1;
}

/* The value of INFO field `name` into buf ("" when absent). */
static const char *
info_field(const char *info, const char *name, char *buf, size_t size)
{
	size_t n = strlen(name), len;
	const char *p = info;

	buf[0] = '\0';
	while ((p = strstr(p, name)) != NULL) {
		if ((p == info || p[-1] == '\n') && p[n] == ':') {
			p += n + 1;
			len = strcspn(p, "\r\n");
			if (len >= size)
				len = size - 1;
			memcpy(buf, p, len);
			buf[len] = '\0';
			break;
		}
		p += n;
	}
	return buf;
}

/* The keys and expires of every "dbN:keys=K,expires=E,..." line. */
static void
parse_keyspace(struct redis_memory *m, const char *info)
{
	long long keys, expires;
	bool seen = false;
	int at;

	for (const char *p = info; (p = strstr(p, "db")) != NULL; p += 2) {
		if ((p != info && p[-1] != '\n') || sscanf(p, "db%*d:keys=%lld,"
		    "expires=%lld%n", &keys, &expires, &at) != 2 || at <= 0)
			continue;
		if (!seen)
			m->keys = m->volatile_keys = 0;
		seen = true;
		m->keys += keys;
		m->volatile_keys += expires;
	}
}

void
memory_parse_info(struct redis_memory *m, const char *info)
{
	char v[64];

	if (*info_field(info, "used_memory", v, sizeof(v)) != '\0')
		m->used = strtoll(v, NULL, 10);
	if (*info_field(info, "maxmemory", v, sizeof(v)) != '\0')
		m->max = strtoll(v, NULL, 10);
	if (*info_field(info, "used_memory_dataset", v, sizeof(v)) != '\0')
		m->dataset = strtoll(v, NULL, 10);
	parse_keyspace(m, info);
	if (m->policy[0] == '\0')
		info_field(info, "maxmemory_policy", m->policy,
		    sizeof(m->policy));
	if (*info_field(info, "aof_enabled", v, sizeof(v)) != '\0')
		m->aof = strcmp(v, "1") == 0;
	if (*info_field(info, "rdb_last_bgsave_status", v, sizeof(v)) != '\0')
		m->rdb_failed = strcmp(v, "ok") != 0;
	if (*info_field(info, "aof_last_write_status", v, sizeof(v)) != '\0')
		m->aof_failed = strcmp(v, "ok") != 0;
}

void
memory_parse_config(struct redis_memory *m, const redisReply *r, bool policy)
{
	const redisReply *v;

	if (r == NULL || r->type != REDIS_REPLY_ARRAY || r->elements < 2) {
		m->config_refused = true;
		snprintf(m->config_error, sizeof(m->config_error), "%s",
		    r != NULL && r->type == REDIS_REPLY_ERROR ? r->str :
		    "unexpected reply");
		return;
	}
	v = r->element[1];
	if (v->type != REDIS_REPLY_STRING)
		return;
	if (policy)
		snprintf(m->policy, sizeof(m->policy), "%s", v->str);
	else
		m->save = v->len > 0;
}

int
memory_percent(const struct redis_memory *m)
{
	if (m->max <= 0)
		return -1;
	return (int)(m->used * 100 / m->max);
}

/* max(a, b) and min(a, b) as Lua's math.max and math.min give them */
static double
dmax(double a, double b)
{
	return a > b ? a : b;
}

static double
dmin(double a, double b)
{
	return a < b ? a : b;
}

long long
memory_unevictable(const struct redis_memory *m, long long own,
    long long own_keys)
{
	if (m->max <= 0 || strncmp(m->policy, "volatile-", 9) != 0)
		return m->used;
	double other_keys = dmax((double)m->keys - (double)own_keys, 0);
	double other_data = dmax((double)m->dataset - (double)own, 0);
	double share = 0;
	if (other_keys > 0)
		share = dmin((double)m->volatile_keys / other_keys, 1);
	/* math.floor of a value >= 0: the whole part */
	double evictable = (double)(long long)(other_data * share) +
	    (double)m->volatile_keys * MEMORY_KEY_ENTRIES;
	return (long long)dmax((double)m->used - evictable, 0);
}

int
memory_unevictable_percent(const struct redis_memory *m,
    long long unevictable)
{
	if (m->max <= 0)
		return -1;
	return (int)((double)unevictable * 100 / (double)m->max);
}

enum memory_verdict
memory_judge_eviction(const struct redis_memory *m, bool allow_unsafe,
    char *msg, size_t size)
{
	const char *p = m->policy;

	msg[0] = '\0';
	if (strcmp(p, "noeviction") == 0)
		return MEMORY_OK;
	if (strncmp(p, "allkeys-", 8) == 0 && allow_unsafe) {
		snprintf(msg, size, "maxmemory-policy is %s: a full Redis may "
		    "evict queue lists and lose their jobs (running anyway: "
		    "allow_unsafe_eviction = yes)", p);
		return MEMORY_WARN;
	}
	if (strncmp(p, "allkeys-", 8) == 0) {
		snprintf(msg, size, "maxmemory-policy is %s: a full Redis evicts "
		    "any key, queue lists included, and their jobs are lost; set "
		    "maxmemory-policy noeviction (or volatile-*), or "
		    "allow_unsafe_eviction = yes to run anyway", p);
		return MEMORY_REFUSE;
	}
	/* the keys ferry relies on have no TTL, and the cache keys of live
	 * jobs are protected: volatile-* evicts none of them */
	if (strncmp(p, "volatile-", 9) == 0)
		return MEMORY_OK;
	snprintf(msg, size, "cannot tell the maxmemory-policy (%s): if "
		    "Redis evicts keys when full, queued jobs may be lost",
		    *p != '\0' ? p : "neither CONFIG GET nor INFO gives it");
	return MEMORY_WARN;
}

/* What is wrong with persistence, or NULL. */
static const char *
persistence_problem(const struct redis_memory *m, char *buf, size_t size)
{
	if (m->aof_failed || m->rdb_failed) {
		snprintf(buf, size, "redis cannot write to disk (%s): a restart "
		    "would lose recent jobs; check the Redis log and its disk",
		    m->aof_failed ? "aof_last_write_status:err" :
		    "rdb_last_bgsave_status:err");
		return buf;
	}
	if (m->aof == 1 || m->save == 1)
		return NULL;
	if (m->save == -1)
		snprintf(buf, size, "redis has AOF %s and CONFIG GET save is "
		    "refused, so RDB snapshots cannot be verified: without them a "
		    "restart of Redis loses every queued job",
		    m->aof == 0 ? "off" : "in an unknown state");
	else
		snprintf(buf, size, "redis has neither AOF (appendonly no) nor RDB "
		    "snapshots (save \"\"): a restart of Redis loses every queued "
		    "job; set appendonly yes or a save schedule");
	return buf;
}

enum memory_verdict
memory_judge_persistence(const struct redis_memory *m, bool require,
    char *msg, size_t size)
{
	char why[400];

	msg[0] = '\0';
	if (persistence_problem(m, why, sizeof(why)) == NULL)
		return MEMORY_OK;
	snprintf(msg, size, "%s%s", why, require ?
	    " (require_persistence = yes)" : "");
	return require ? MEMORY_REFUSE : MEMORY_WARN;
}

const char *
memory_fmt_bytes(long long n, char *buf, size_t size)
{
	static const char *const units[] = { "KiB", "MiB", "GiB", "TiB" };
	double v = (double)n;
	int u = -1;

	while (v >= 1024. && u < 3) {
		v /= 1024.;
		u++;
	}
	if (u < 0)
		snprintf(buf, size, "%lld B", n);
	else
		snprintf(buf, size, "%.1f %s", v, units[u]);
	return buf;
}

int
memory_fetch(redisContext *c, struct redis_memory *m, bool settings,
    char *err, size_t errsize)
{
	redisReply *r[3] = { NULL, NULL, NULL };
	int n = settings ? 3 : 1, got = 0, rc = 0;

	memory_init(m);
	if (settings) {
		redisAppendCommand(c, "CONFIG GET maxmemory-policy");
		redisAppendCommand(c, "CONFIG GET save");
	}
	redisAppendCommand(c, settings ? "INFO" : "INFO memory");
	while (got < n && redisGetReply(c, (void **)&r[got]) == REDIS_OK)
		got++;
	if (got < n) {
		snprintf(err, errsize, "%s", c->errstr);
		rc = -1;
	} else if (r[n - 1]->type != REDIS_REPLY_STRING) {
		snprintf(err, errsize, "INFO failed: %s",
		    r[n - 1]->type == REDIS_REPLY_ERROR ? r[n - 1]->str :
		    "unexpected reply");
		rc = -1;
	} else {
		if (settings) {
			memory_parse_config(m, r[0], true);
			memory_parse_config(m, r[1], false);
		}
		memory_parse_info(m, r[n - 1]->str);
	}
	for (int i = 0; i < got; i++)
		freeReplyObject(r[i]);
	return rc;
}

enum memory_mark
memory_mark(int pct, int warn, int refuse, enum memory_mark was)
{
	enum memory_mark up = pct >= refuse ? MEMORY_ABOVE_REFUSE :
	    pct >= warn ? MEMORY_ABOVE_WARN : MEMORY_BELOW_WARN;

	if (pct < 0 || up >= was)
		return up;
	enum memory_mark down = pct >= refuse - MEMORY_MARK_HYSTERESIS ?
	    MEMORY_ABOVE_REFUSE : pct >= warn - MEMORY_MARK_HYSTERESIS ?
	    MEMORY_ABOVE_WARN : MEMORY_BELOW_WARN;
	return down < was ? down : was;
}
