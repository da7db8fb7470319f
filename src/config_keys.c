/* config_keys.c - the ferryd.ini key table: one row per key with its
 * section, type, place in the struct, default and limits, and the code that
 * turns a value string into the field (defaults go through it too). */
#include "config.h"
#include "config_keys.h"
#include "copy.h"
#include "util.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MS_SEC (1000L)
#define MS_MIN (60 * MS_SEC)
#define MS_HOUR (60 * MS_MIN)
#define MS_DAY (24 * MS_HOUR)
#define S_FERRYD CONFIG_SECT_FERRYD
#define S_QUEUE CONFIG_SECT_QUEUE

/* T_OPTINT: an int, or empty for 0 ("not set here"). T_BOOL: a bool. */
enum { T_STRING, T_INT, T_OPTINT, T_LONG, T_ENUM, T_DURATION, T_BOOL };

struct config_key {
	int sect;
	const char *name;
	int type;
	size_t offset;		/* in ferry_config or queue_config */
	const char *def;	/* parsed like a value from the file */
	long min, max;
	const char *const *names;		/* T_ENUM */
	/* T_STRING: NULL, or why not (a constant, or written into buf) */
	const char *(*check)(const char *, char *buf, size_t size);
};

static const char *check_log(const char *, char *, size_t);
static const char *check_abs_path(const char *, char *, size_t);
static const char *check_pidfile(const char *, char *, size_t);
static const char *check_listen(const char *, char *, size_t);
static const char *check_prefix(const char *, char *, size_t);
static const char *check_redis_user(const char *, char *, size_t);
static const char *check_table(const char *, char *, size_t);
static const char *check_columns(const char *, char *, size_t);
static const char *check_cache_prefixes(const char *, char *, size_t);
static const char *check_pg_ports(const char *, char *, size_t);
static const char *check_pg_tsa(const char *, char *, size_t);
static const char *check_sentinels(const char *, char *, size_t);
static const char *check_sentinel_master(const char *, char *, size_t);
static const char *check_cluster(const char *, char *, size_t);

static const char *const log_level_names[] = {
	"debug", "info", "notice", "warn", "error", NULL
};
static const char *const handler_names[] = {
	"noop", "exec", "postgres", NULL
};

#define F(field) offsetof(struct ferry_config, field)
#define Q(field) offsetof(struct queue_config, field)
#define STR(s, k, off, def, chk) { s, k, T_STRING, off, def, 0, 0, NULL, chk }
#define NUM(s, k, t, off, def, lo, hi) \
	{ s, k, t, off, def, lo, hi, NULL, NULL }
#define ENUM(s, k, off, def, nm) { s, k, T_ENUM, off, def, 0, 0, nm, NULL }
#define BOOL(s, k, off, def) { s, k, T_BOOL, off, def, 0, 0, NULL, NULL }

static const struct config_key config_keys[] = {
	STR(S_FERRYD, "pidfile", F(pidfile), "/run/ferryd.pid", check_pidfile),
	STR(S_FERRYD, "user", F(user), "", NULL),
	STR(S_FERRYD, "group", F(group), "", NULL),
	STR(S_FERRYD, "control_socket", F(control_socket), "/run/ferryd.sock",
	    check_abs_path),
	STR(S_FERRYD, "metrics_listen", F(metrics_listen), "", check_listen),
	STR(S_FERRYD, "log", F(log), "stderr", check_log),
	ENUM(S_FERRYD, "log_level", F(log_level), "info", log_level_names),
	STR(S_FERRYD, "redis_host", F(redis_host), "127.0.0.1", NULL),
	NUM(S_FERRYD, "redis_port", T_INT, F(redis_port), "6379", 1, 65535),
	STR(S_FERRYD, "redis_socket", F(redis_socket), "", check_abs_path),
	STR(S_FERRYD, "redis_user", F(redis_user), "", check_redis_user),
	STR(S_FERRYD, "redis_password", F(redis_password), "", NULL),
	NUM(S_FERRYD, "redis_db", T_INT, F(redis_db), "0", 0, 1000),
	STR(S_FERRYD, "redis_sentinels", F(redis_sentinels), "",
	    check_sentinels),
	STR(S_FERRYD, "redis_sentinel_master", F(redis_sentinel_master), "",
	    check_sentinel_master),
	STR(S_FERRYD, "redis_sentinel_password", F(redis_sentinel_password),
	    "", NULL),
	STR(S_FERRYD, "redis_cluster", F(redis_cluster), "", check_cluster),
	NUM(S_FERRYD, "redis_wait_replicas", T_INT, F(redis_wait_replicas), "0",
	    0, 100),
	NUM(S_FERRYD, "redis_wait_timeout", T_DURATION, F(redis_wait_timeout_ms),
	    "1s", 10, MS_MIN),
	STR(S_FERRYD, "redis_prefix", F(redis_prefix), "ferry", check_prefix),
	STR(S_FERRYD, "pg_host", F(pg_host), "", NULL),
	STR(S_FERRYD, "pg_port", F(pg_port), "5432", check_pg_ports),
	STR(S_FERRYD, "pg_database", F(pg_database), "", NULL),
	STR(S_FERRYD, "pg_user", F(pg_user), "", NULL),
	STR(S_FERRYD, "pg_password", F(pg_password), "", NULL),
	STR(S_FERRYD, "pg_options", F(pg_options), "", NULL),
	STR(S_FERRYD, "pg_target_session_attrs", F(pg_target_session_attrs),
	    "", check_pg_tsa),
	BOOL(S_FERRYD, "require_sync_commit", F(require_sync_commit), "no"),
	NUM(S_FERRYD, "pg_statement_timeout", T_DURATION,
	    F(pg_statement_timeout_ms), "60s", MS_SEC, MS_DAY),
	NUM(S_FERRYD, "done_retention", T_DURATION, F(done_retention_ms),
	    "7d", MS_MIN, 365 * MS_DAY),
	NUM(S_FERRYD, "shutdown_timeout", T_DURATION, F(shutdown_timeout_ms),
	    "30s", MS_SEC, MS_DAY),
	NUM(S_FERRYD, "kill_grace", T_DURATION, F(kill_grace_ms),
	    "5s", 100, 10 * MS_MIN),
	NUM(S_FERRYD, "heartbeat_ttl", T_DURATION, F(heartbeat_ttl_ms),
	    "10s", MS_SEC, MS_HOUR),
	NUM(S_FERRYD, "reaper_interval", T_DURATION, F(reaper_interval_ms),
	    "1s", 100, MS_HOUR),
	NUM(S_FERRYD, "restart_backoff_min", T_DURATION,
	    F(restart_backoff_min_ms), "100ms", 10, MS_MIN),
	NUM(S_FERRYD, "restart_backoff_max", T_DURATION,
	    F(restart_backoff_max_ms), "30s", 100, MS_HOUR),
	NUM(S_FERRYD, "restart_backoff_reset", T_DURATION,
	    F(restart_backoff_reset_ms), "10s", MS_SEC, MS_DAY),
	BOOL(S_FERRYD, "allow_unsafe_eviction", F(allow_unsafe_eviction), "no"),
	BOOL(S_FERRYD, "require_persistence", F(require_persistence), "no"),
	NUM(S_FERRYD, "memory_check_interval", T_DURATION,
	    F(memory_check_interval_ms), "10s", 100, MS_HOUR),
	NUM(S_FERRYD, "memory_warn_percent", T_INT, F(memory_warn_percent),
	    "80", 1, 100),
	NUM(S_FERRYD, "memory_refuse_percent", T_INT,
	    F(memory_refuse_percent), "90", 1, 100),
	NUM(S_FERRYD, "cache_ttl", T_DURATION, F(cache_ttl_ms), "24h", MS_SEC,
	    365 * MS_DAY),

	NUM(S_QUEUE, "workers", T_INT, Q(workers), "1", 0, CONFIG_MAX_WORKERS),
	NUM(S_QUEUE, "batch_size", T_INT, Q(batch_size), "100", 1, 100000),
	ENUM(S_QUEUE, "handler", Q(handler), "noop", handler_names),
	STR(S_QUEUE, "command", Q(command), "", NULL),
	NUM(S_QUEUE, "max_attempts", T_INT, Q(max_attempts), "5", 1, 1000),
	NUM(S_QUEUE, "max_recoveries", T_INT, Q(max_recoveries), "3", 0, 1000),
	NUM(S_QUEUE, "backoff_base_ms", T_DURATION, Q(backoff_base_ms),
	    "1000", 1, MS_HOUR),
	NUM(S_QUEUE, "backoff_max_ms", T_DURATION, Q(backoff_max_ms),
	    "300000", 1, MS_DAY),
	NUM(S_QUEUE, "job_timeout", T_DURATION, Q(job_timeout_ms),
	    "300s", MS_SEC, MS_DAY),
	NUM(S_QUEUE, "handler_timeout", T_DURATION, Q(handler_timeout_ms),
	    "60s", 100, MS_DAY),
	NUM(S_QUEUE, "max_jobs_per_worker", T_LONG, Q(max_jobs_per_worker),
	    "0", 0, 1000000000),
	NUM(S_QUEUE, "max_worker_rss_mb", T_LONG, Q(max_worker_rss_mb),
	    "0", 0, 1048576),
	NUM(S_QUEUE, "max_job_bytes", T_LONG, Q(max_job_bytes),
	    "1048576", 16, 536870912),
	NUM(S_QUEUE, "chunk_rows", T_INT, Q(chunk_rows), "1000", 1, 1000000),
	NUM(S_QUEUE, "dead_max", T_LONG, Q(dead_max), "100000", 0, 1000000000),
	STR(S_QUEUE, "dead_archive", Q(dead_archive), "", check_abs_path),
	STR(S_QUEUE, "cache_key_prefixes", Q(cache_key_prefixes), "",
	    check_cache_prefixes),
	STR(S_QUEUE, "table", Q(table), "", check_table),
	STR(S_QUEUE, "columns", Q(columns), "", check_columns),
	STR(S_QUEUE, "pg_host", Q(pg_host), "", NULL),
	STR(S_QUEUE, "pg_port", Q(pg_port), "", check_pg_ports),
	STR(S_QUEUE, "pg_database", Q(pg_database), "", NULL),
	STR(S_QUEUE, "pg_user", Q(pg_user), "", NULL),
	STR(S_QUEUE, "pg_password", Q(pg_password), "", NULL),
	STR(S_QUEUE, "pg_options", Q(pg_options), "", NULL),
	STR(S_QUEUE, "pg_target_session_attrs", Q(pg_target_session_attrs),
	    "", check_pg_tsa),
};
#define NKEYS FERRY_ARRAY_LEN(config_keys)
const size_t config_nkeys = NKEYS;

const char *
config_key_name(int key, int *sect)
{
	*sect = config_keys[key].sect;
	return config_keys[key].name;
}

bool
config_valid_name(const char *s, size_t max)
{
	size_t n = strlen(s);

	return n >= 1 && n <= max &&
	    strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	    "0123456789_.-") == n;
}

static const char *
check_log(const char *v, char *buf, size_t size)
{
	(void)buf;
	(void)size;
	if (strcmp(v, "stderr") == 0 || strcmp(v, "syslog") == 0 || v[0] == '/')
		return NULL;
	return "is not valid (allowed: stderr, syslog or an absolute file path)";
}

static const char *
check_abs_path(const char *v, char *buf, size_t size)
{
	(void)buf;
	(void)size;
	return v[0] == '\0' || v[0] == '/' ? NULL :
	    "is not an absolute path (allowed: empty or /path)";
}

/* the daemon runs in /, and removes its pidfile by name at exit */
static const char *
check_pidfile(const char *v, char *buf, size_t size)
{
	(void)buf;
	(void)size;
	return v[0] == '/' ? NULL : "is not an absolute path (allowed: /path)";
}

static const char *
check_listen(const char *v, char *buf, size_t size)
{
	char addr[64];
	int port;

	if (*v == '\0' ||
	    config_parse_listen(v, addr, sizeof(addr), &port, buf, size) == 0)
		return NULL;
	return buf;
}

int
config_parse_listen(const char *listen, char *addr, size_t addrsize,
    int *port, char *err, size_t errsize)
{
	const char *colon = strrchr(listen, ':');
	struct in_addr a;
	char *end;

	if (colon == NULL || (size_t)(colon - listen) >= addrsize) {
		snprintf(err, errsize, "is not valid (allowed: empty, or IPV4:PORT "
		    "such as 127.0.0.1:9187)");
		return -1;
	}
	memcpy(addr, listen, (size_t)(colon - listen));
	addr[colon - listen] = '\0';
	long p = strtol(colon + 1, &end, 10);
	if (inet_pton(AF_INET, addr, &a) != 1 || !isdigit((unsigned char)colon[1]) ||
	    *end != '\0' || p < 1 || p > 65535) {
		snprintf(err, errsize, "is not valid (allowed: empty, or IPV4:PORT "
		    "with a port in 1..65535, such as 127.0.0.1:9187)");
		return -1;
	}
	*port = (int)p;
	return 0;
}

static const char *
check_prefix(const char *v, char *buf, size_t size)
{
	(void)buf;
	(void)size;
	return config_valid_name(v, 32) ? NULL :
	    "is not valid (allowed: 1..32 characters of " CONFIG_NAME_CHARS ")";
}

/* redis_sentinels, redis_cluster: HOST:PORT items (config_parse_hostport),
 * at most CONFIG_MAX_SENTINELS. */
static const char *
check_hostports(const char *v, const char *what, char *buf, size_t size)
{
	const char *cur = v, *item;
	char host[CONFIG_HOST_MAX], one[CONFIG_HOST_MAX + 16];
	size_t len;
	int port, n = 0;

	while (config_list_next(&cur, &item, &len)) {
		snprintf(one, sizeof(one), "%.*s", (int)len, item);
		if (len >= sizeof(one) || config_parse_hostport(one, host,
		    sizeof(host), &port) == -1) {
			snprintf(buf, size, "has \"%s\", which is not HOST:PORT "
			    "(allowed: %s addresses separated by commas, such as "
			    "%s)", one, what, strcmp(what, "sentinel") == 0 ?
			    "10.0.0.1:26379, 10.0.0.2:26379" :
			    "10.0.0.1:6379, 10.0.0.2:6379");
			return buf;
		}
		if (++n > CONFIG_MAX_SENTINELS) {
			snprintf(buf, size, "names over %d %s nodes (allowed: 1..%d)",
			    CONFIG_MAX_SENTINELS, what, CONFIG_MAX_SENTINELS);
			return buf;
		}
	}
	return NULL;
}

static const char *
check_sentinels(const char *v, char *buf, size_t size)
{
	return check_hostports(v, "sentinel", buf, size);
}

static const char *
check_cluster(const char *v, char *buf, size_t size)
{
	return check_hostports(v, "cluster", buf, size);
}

int
config_parse_hostport(const char *s, char *host, size_t hostsize, int *port)
{
	const char *colon = strrchr(s, ':');
	char *end;
	long p;

	if (colon == NULL || colon == s || (size_t)(colon - s) >= hostsize ||
	    !isdigit((unsigned char)colon[1]))
		return -1;
	p = strtol(colon + 1, &end, 10);
	if (*end != '\0' || p < 1 || p > 65535)
		return -1;
	for (const char *c = s; c < colon; c++)
		if (isspace((unsigned char)*c) || iscntrl((unsigned char)*c))
			return -1;
	memcpy(host, s, (size_t)(colon - s));
	host[colon - s] = '\0';
	*port = (int)p;
	return 0;
}

/* A sentinel master name is one argument of SENTINEL commands. */
static const char *
check_sentinel_master(const char *v, char *buf, size_t size)
{
	(void)buf;
	(void)size;
	return *v == '\0' || config_valid_name(v, 64) ? NULL :
	    "is not valid (allowed: 1..64 characters of " CONFIG_NAME_CHARS
	    ", the name in the sentinels' \"sentinel monitor NAME ...\")";
}

/* A Redis ACL user name is one argument of AUTH: a blank would make ferry
 * authenticate as someone else in a redis-cli paste, a control character
 * is a typo. Empty: the default user. */
static const char *
check_redis_user(const char *v, char *buf, size_t size)
{
	(void)buf;
	(void)size;
	for (const unsigned char *p = (const unsigned char *)v; *p; p++)
		if (isspace(*p) || iscntrl(*p))
			return "is not valid (a Redis ACL user name: no blanks or "
			    "control characters)";
	return strlen(v) > 128 ? "is too long (at most 128 characters)" : NULL;
}

/* [A-Za-z_][A-Za-z0-9_]*, 1..CONFIG_IDENT_MAX bytes: the sink quotes it as
 * an identifier, so case matters and nothing else is allowed. */
static bool
valid_ident(const char *s, size_t n)
{
	static const char chars[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
	    "abcdefghijklmnopqrstuvwxyz_0123456789";
	size_t i;

	if (n == 0 || n > CONFIG_IDENT_MAX || (s[0] >= '0' && s[0] <= '9'))
		return false;
	for (i = 0; i < n; i++)
		if (s[i] == '\0' || strchr(chars, s[i]) == NULL)
			return false;
	return true;
}

/* Empty is allowed here: check_queue wants it with handler = postgres. */
static const char *
check_table(const char *v, char *buf, size_t size)
{
	const char *dot = strchr(v, '.');
	bool ok;

	(void)buf;
	(void)size;
	if (*v == '\0')
		return NULL;
	if (dot == NULL)
		ok = valid_ident(v, strlen(v));
	else
		ok = valid_ident(v, (size_t)(dot - v)) &&
		    valid_ident(dot + 1, strlen(dot + 1));
	return ok ? NULL : "is not a valid table name (allowed: name or "
	    "schema.name, each part 1..63 characters of A-Z a-z 0-9 _, not "
	    "starting with a digit)";
}

/* The sink parses it again; parse it now so a bad spec fails the load. */
static const char *
check_columns(const char *v, char *buf, size_t size)
{
	struct copy_columns cols;

	if (*v == '\0')
		return NULL;
	memset(&cols, 0, sizeof(cols));
	if (copy_columns_parse(v, &cols, buf, size) == -1)
		return buf;
	copy_columns_free(&cols);
	return NULL;
}

bool
config_list_next(const char **cursor, const char **item, size_t *len)
{
	const char *p = *cursor, *e;

	p += strspn(p, " \t");
	if (*p == '\0')
		return false;      /* the end (a trailing comma included) */
	e = p + strcspn(p, ",");
	*cursor = *e == ',' ? e + 1 : e;
	while (e > p && (e[-1] == ' ' || e[-1] == '\t'))
		e--;
	*item = p;
	*len = (size_t)(e - p);
	return true;
}

/* Every item 1..CONFIG_CACHE_PREFIX_MAX printable ASCII characters, no
 * blanks: an empty one would allow every key. config.c checks them
 * against redis_prefix, which this row cannot see. */
static const char *
check_cache_prefixes(const char *v, char *buf, size_t size)
{
	const char *cur = v, *item;
	size_t len, n = 0, i;

	while (config_list_next(&cur, &item, &len)) {
		for (i = 0; i < len && item[i] > ' ' && item[i] < 0x7f; i++)
			;
		if (++n > CONFIG_CACHE_PREFIXES)
			snprintf(buf, size, "has more than %d prefixes",
			    CONFIG_CACHE_PREFIXES);
		else if (len == 0)
			snprintf(buf, size, "has an empty prefix (item %zu), which "
			    "would let a job name any key", n);
		else if (len > CONFIG_CACHE_PREFIX_MAX || i < len)
			snprintf(buf, size, "prefix \"%.*s\" is not valid", (int)
			    (len > CONFIG_CACHE_PREFIX_MAX ? CONFIG_CACHE_PREFIX_MAX :
			    len), item);
		else
			continue;
		snprintf(buf + strlen(buf), size - strlen(buf), " (allowed: "
		    "empty, or up to %d key prefixes separated by commas, such as "
		    "app:cache:, other: ; each 1..%d printable ASCII characters "
		    "without blanks)", CONFIG_CACHE_PREFIXES,
		    CONFIG_CACHE_PREFIX_MAX);
		return buf;
	}
	return NULL;
}

/* Empty (the default: [ferryd]'s, or 5432 there), one port, or one per
 * pg_host host (config.c counts them: this row cannot see pg_host). */
static const char *
check_pg_ports(const char *v, char *buf, size_t size)
{
	const char *cur = v, *item;
	size_t len, n = 0;

	while (config_list_next(&cur, &item, &len)) {
		char port[8];
		long p = 0;
		n++;
		if (len > 0 && len < sizeof(port) &&
		    strspn(item, "0123456789") >= len) {
			memcpy(port, item, len);
			port[len] = '\0';
			p = strtol(port, NULL, 10);
		}
		if (p >= 1 && p <= 65535)
			continue;
		snprintf(buf, size, "item %zu (\"%.*s\") is not a port 1..65535 "
		    "(allowed: one port, or one per pg_host host separated by "
		    "commas, such as 5432, 5433)", n, (int)(len > 16 ? 16 : len),
		    item);
		return buf;
	}
	return NULL;
}

/* libpq's values for PostgreSQL 15; empty: read-write with several hosts,
 * libpq's own default (any) with one. */
static const char *
check_pg_tsa(const char *v, char *buf, size_t size)
{
	static const char *const ok[] = { "", "any", "read-write", "read-only",
	    "primary", "standby", "prefer-standby" };

	(void)buf;
	(void)size;
	for (size_t i = 0; i < FERRY_ARRAY_LEN(ok); i++)
		if (strcmp(v, ok[i]) == 0)
			return NULL;
	return "is not valid (allowed: empty, any, read-write, read-only, "
	    "primary, standby, prefer-standby)";
}

/* 90000 -> "90s": the largest unit that divides the value exactly. */
const char *
config_fmt_duration(long ms, char *buf, size_t size)
{
	static const struct { long ms; const char *unit; } units[] = {
		{ MS_DAY, "d" }, { MS_HOUR, "h" }, { MS_MIN, "m" },
		{ MS_SEC, "s" }, { 1, "ms" },
	};
	size_t i;

	for (i = 0; i < 4 && (ms == 0 || ms % units[i].ms != 0); i++)
		;
	snprintf(buf, size, "%ld%s", ms / units[i].ms, units[i].unit);
	return buf;
}

static long
unit_ms(const char *suffix, bool bare_ms)
{
	if (*suffix == '\0')
		return bare_ms ? 1 : MS_SEC;
	if (strcmp(suffix, "ms") == 0)
		return 1;
	if (strcmp(suffix, "s") == 0)
		return MS_SEC;
	if (strcmp(suffix, "m") == 0)
		return MS_MIN;
	if (strcmp(suffix, "h") == 0)
		return MS_HOUR;
	if (strcmp(suffix, "d") == 0)
		return MS_DAY;
	return 0;
}

/* Digits and an optional unit. 0: ok, -1: not a duration, 1: negative or
 * too large (reported as out of range). */
static int
parse_duration(const char *s, bool bare_ms, long *out)
{
	bool negative = false, overflow = false;
	long v = 0, unit;

	if (*s == '-' && isdigit((unsigned char)s[1])) {
		negative = true;
		s++;
	}
	if (!isdigit((unsigned char)*s))
		return -1;
	for (; isdigit((unsigned char)*s); s++) {
		if (v > (LONG_MAX - (*s - '0')) / 10)
			overflow = true;
		else
			v = v * 10 + (*s - '0');
	}
	if ((unit = unit_ms(s, bare_ms)) == 0)
		return -1;
	if (negative || overflow || v > LONG_MAX / unit)
		return 1;
	*out = v * unit;
	return 0;
}

static char *
set_duration(const struct config_key *k, char *base, const char *value)
{
	size_t n = strlen(k->name);
	bool bare_ms = n > 3 && strcmp(k->name + n - 3, "_ms") == 0;
	char lo[32], hi[32];
	long v;
	int rc;

	if ((rc = parse_duration(value, bare_ms, &v)) < 0)
		return xasprintf("is not a duration (allowed: a number with "
		    "suffix ms, s, m, h or d; no suffix = %s)",
		    bare_ms ? "milliseconds" : "seconds");
	if (rc > 0 || v < k->min || v > k->max)
		return xasprintf("out of range %s..%s",
		    config_fmt_duration(k->min, lo, sizeof(lo)),
		    config_fmt_duration(k->max, hi, sizeof(hi)));
	*(long *)(base + k->offset) = v;
	return NULL;
}

static char *
set_number(const struct config_key *k, char *base, const char *value)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(value, &end, 10);
	if (k->type == T_OPTINT && *value == '\0') {
		*(int *)(base + k->offset) = 0;
		return NULL;
	}
	if (end == value || *end != '\0' || isspace((unsigned char)*value))
		return xstrdup("is not an integer");
	if (errno == ERANGE || v < k->min || v > k->max)
		return xasprintf("out of range %ld..%ld", k->min, k->max);
	if (k->type == T_INT || k->type == T_OPTINT)
		*(int *)(base + k->offset) = (int)v;
	else
		*(long *)(base + k->offset) = v;
	return NULL;
}

static char *
set_bool(const struct config_key *k, char *base, const char *value)
{
	static const char *const yes[] = { "yes", "true", "on", "1", NULL };
	static const char *const no[] = { "no", "false", "off", "0", NULL };

	for (int i = 0; yes[i] != NULL; i++) {
		if (strcmp(value, yes[i]) == 0 || strcmp(value, no[i]) == 0) {
			*(bool *)(base + k->offset) = strcmp(value, yes[i]) == 0;
			return NULL;
		}
	}
	return xstrdup("is not yes or no");
}

static char *
set_enum(const struct config_key *k, char *base, const char *value)
{
	char *list, *tmp;
	int i;

	for (i = 0; k->names[i] != NULL; i++) {
		if (strcmp(value, k->names[i]) == 0) {
			*(int *)(base + k->offset) = i;
			return NULL;
		}
	}
	list = xstrdup(k->names[0]);
	for (i = 1; k->names[i] != NULL; i++) {
		tmp = xasprintf("%s, %s", list, k->names[i]);
		free(list);
		list = tmp;
	}
	tmp = xasprintf("is not one of %s", list);
	free(list);
	return tmp;
}

/* Store `value` for key `k` into the struct at `base`; NULL, or what is
 * wrong with the value (to be freed). */
static char *
set_value(const struct config_key *k, char *base, const char *value)
{
	const char *why;
	char buf[256], **p;

	switch (k->type) {
	case T_STRING:
		buf[0] = '\0';
		if (k->check != NULL &&
		    (why = k->check(value, buf, sizeof(buf))) != NULL)
			return xstrdup(why);
		p = (char **)(base + k->offset);
		free(*p);
		*p = xstrdup(value);
		return NULL;
	case T_ENUM:
		return set_enum(k, base, value);
	case T_DURATION:
		return set_duration(k, base, value);
	case T_BOOL:
		return set_bool(k, base, value);
	default:
		return set_number(k, base, value);
	}
}

char *
config_key_set(int key, void *base, const char *value)
{
	return set_value(&config_keys[key], base, value);
}

void
config_keys_default(int sect, void *base)
{
	const struct config_key *k;
	char *why;

	for (k = config_keys; k < config_keys + NKEYS; k++) {
		if (k->sect != sect)
			continue;
		if ((why = set_value(k, base, k->def)) != NULL) {
			fprintf(stderr, "ferry: bad default for %s: %s\n",
			    k->name, why);
			abort();
		}
	}
}

void
config_keys_free(int sect, void *base)
{
	const struct config_key *k;
	char **p;

	for (k = config_keys; k < config_keys + NKEYS; k++) {
		if (k->sect != sect || k->type != T_STRING)
			continue;
		p = (char **)((char *)base + k->offset);
		free(*p);
		*p = NULL;
	}
}

int
config_key_find(int sect, const char *name)
{
	size_t i;

	for (i = 0; i < NKEYS; i++)
		if (config_keys[i].sect == sect &&
		    strcmp(config_keys[i].name, name) == 0)
			return (int)i;
	return -1;
}

static bool
value_differs(const struct config_key *k, const char *a, const char *b)
{
	const char *sa, *sb;

	a += k->offset;
	b += k->offset;
	switch (k->type) {
	case T_STRING:
		sa = *(char *const *)a;
		sb = *(char *const *)b;
		return strcmp(sa ? sa : "", sb ? sb : "") != 0;
	case T_INT:
	case T_OPTINT:
	case T_ENUM:
		return *(const int *)a != *(const int *)b;
	case T_BOOL:
		return *(const bool *)a != *(const bool *)b;
	default:
		return *(const long *)a != *(const long *)b;
	}
}

/* Driven by the key table, so a new queue key is compared without edits. */
bool
config_queue_changed(const struct queue_config *a,
    const struct queue_config *b)
{
	const struct config_key *k;

	if (strcmp(a->name, b->name) != 0)
		return true;
	for (k = config_keys; k < config_keys + NKEYS; k++)
		if (k->sect == S_QUEUE && strcmp(k->name, "workers") != 0 &&
		    value_differs(k, (const char *)a, (const char *)b))
			return true;
	return false;
}

void
config_queue_copy(struct queue_config *dst, const struct queue_config *src)
{
	struct queue_config old;
	const struct config_key *k;
	const char *from;
	char **p;

	if (dst == src)
		return;
	old = *dst;
	*dst = *src;
	for (k = config_keys; k < config_keys + NKEYS; k++) {
		if (k->sect != S_QUEUE || k->type != T_STRING)
			continue;
		from = *(char *const *)((const char *)src + k->offset);
		p = (char **)((char *)dst + k->offset);
		*p = from != NULL ? xstrdup(from) : NULL;
	}
	config_keys_free(S_QUEUE, &old);
}

void
config_queue_free(struct queue_config *q)
{
	config_keys_free(S_QUEUE, q);
}

const char *
config_handler_name(int handler)
{
	if (handler < 0 || handler >= (int)FERRY_ARRAY_LEN(handler_names) - 1)
		return "unknown";
	return handler_names[handler];
}

const char *
config_log_level_name(int level)
{
	if (level < 0 || level >= (int)FERRY_ARRAY_LEN(log_level_names) - 1)
		return "unknown";
	return log_level_names[level];
}
