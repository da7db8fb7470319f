/* config_keys.c - the ferryd.ini key table: one row per key with its
 * section, type, place in the struct, default and limits, and the code that
 * turns a value string into the field (defaults go through it too). */
#include "config.h"
#include "config_int.h"
#include "copy.h"
#include "handler_env.h"
#include "log.h"
#include "rate_limit.h"
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

/* T_OPTINT: an int, or empty for 0 ("not set here"). T_BOOL: a bool.
 * T_RATE: jobs per second into a long (rate_limit.c). */
enum { T_STRING, T_INT, T_OPTINT, T_LONG, T_ENUM, T_DURATION, T_BOOL,
	T_RATE };

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


static const char *const handler_names[] = {
	"noop", "exec", "postgres", NULL
};
static const char *const mode_names[] = {
	"insert", "upsert", "update", NULL
};
static const char *const missing_names[] = {
	"ignore", "dead", NULL
};

/* op_member: a job's member, named like a column; empty: none. */
static const char *
check_member(const char *v, char *buf, size_t size)
{
	return config_check_column(v, buf, size) == NULL ? NULL : "is not a "
	    "valid member name (allowed: 1..63 characters of A-Z a-z 0-9 _, "
	    "not starting with a digit, or empty for no deletes)";
}

/* table_member: a job's member, named like a column; empty: a job's
 * "data" holds one array per table. */
static const char *
check_table_member(const char *v, char *buf, size_t size)
{
	return config_check_column(v, buf, size) == NULL ? NULL : "is not a "
	    "valid member name (allowed: 1..63 characters of A-Z a-z 0-9 _, "
	    "not starting with a digit, or empty: \"data\" holds one array "
	    "per table)";
}

#define F(field) offsetof(struct ferry_config, field)
#define Q(field) offsetof(struct queue_config, field)
#define STR(s, k, off, def, chk) { s, k, T_STRING, off, def, 0, 0, NULL, chk }
#define NUM(s, k, t, off, def, lo, hi) \
	{ s, k, t, off, def, lo, hi, NULL, NULL }
#define ENUM(s, k, off, def, nm) { s, k, T_ENUM, off, def, 0, 0, nm, NULL }
#define BOOL(s, k, off, def) { s, k, T_BOOL, off, def, 0, 0, NULL, NULL }
/* The PostgreSQL connection: in [ferryd], and again in a queue, where a
 * key set overrides [ferryd]'s (config_pg.c); FIELD is F or Q. */
#define PG_CONNECTION_KEYS(s, FIELD, port_def) \
	STR(s, "pg_host", FIELD(pg_host), "", NULL), \
	STR(s, "pg_port", FIELD(pg_port), port_def, config_check_pg_ports), \
	STR(s, "pg_database", FIELD(pg_database), "", NULL), \
	STR(s, "pg_user", FIELD(pg_user), "", NULL), \
	STR(s, "pg_password", FIELD(pg_password), "", NULL), \
	STR(s, "pg_password_file", FIELD(pg_password_file), "", \
	    config_check_abs_path), \
	STR(s, "pg_options", FIELD(pg_options), "", NULL), \
	STR(s, "pg_target_session_attrs", FIELD(pg_target_session_attrs), \
	    "", config_check_pg_tsa)

static const struct config_key config_keys[] = {
	STR(S_FERRYD, "pidfile", F(pidfile), "/run/ferryd.pid", config_check_pidfile),
	STR(S_FERRYD, "user", F(user), "", NULL),
	STR(S_FERRYD, "group", F(group), "", NULL),
	STR(S_FERRYD, "control_socket", F(control_socket), "/run/ferryd.sock",
	    config_check_abs_path),
	/* the listener of /metrics, the dashboard and /api; metrics_listen
	 * is its old name (config_key_alias) */
	STR(S_FERRYD, "http_listen", F(metrics_listen), "", config_check_listen),
	STR(S_FERRYD, "metrics_listen", F(metrics_listen), "", config_check_listen),
	STR(S_FERRYD, "http_token", F(http_token), "", config_check_http_token),
	STR(S_FERRYD, "http_token_file", F(http_token_file), "",
	    config_check_abs_path),
	STR(S_FERRYD, "http_allowed_hosts", F(http_allowed_hosts), "",
	    config_check_http_hosts),
	STR(S_FERRYD, "log", F(log), "stderr", config_check_log),
	ENUM(S_FERRYD, "log_level", F(log_level), "info", log_level_names),
	STR(S_FERRYD, "redis_host", F(redis_host), "127.0.0.1", NULL),
	NUM(S_FERRYD, "redis_port", T_INT, F(redis_port), "6379", 1, 65535),
	STR(S_FERRYD, "redis_socket", F(redis_socket), "", config_check_abs_path),
	STR(S_FERRYD, "redis_user", F(redis_user), "", config_check_redis_user),
	STR(S_FERRYD, "redis_password", F(redis_password), "", NULL),
	STR(S_FERRYD, "redis_password_file", F(redis_password_file), "",
	    config_check_abs_path),
	NUM(S_FERRYD, "redis_db", T_INT, F(redis_db), "0", 0, 1000),
	STR(S_FERRYD, "redis_sentinels", F(redis_sentinels), "",
	    config_check_sentinels),
	STR(S_FERRYD, "redis_sentinel_master", F(redis_sentinel_master), "",
	    config_check_sentinel_master),
	STR(S_FERRYD, "redis_sentinel_password", F(redis_sentinel_password),
	    "", NULL),
	STR(S_FERRYD, "redis_cluster", F(redis_cluster), "", config_check_cluster),
	NUM(S_FERRYD, "redis_wait_replicas", T_INT, F(redis_wait_replicas), "0",
	    0, 100),
	NUM(S_FERRYD, "redis_wait_timeout", T_DURATION, F(redis_wait_timeout_ms),
	    "1s", 10, MS_MIN),
	STR(S_FERRYD, "redis_prefix", F(redis_prefix), "ferry", config_check_prefix),
	PG_CONNECTION_KEYS(S_FERRYD, F, "5432"),
	BOOL(S_FERRYD, "require_sync_commit", F(require_sync_commit), "no"),
	NUM(S_FERRYD, "pg_statement_timeout", T_DURATION,
	    F(pg_statement_timeout_ms), "60s", MS_SEC, MS_DAY),
	STR(S_FERRYD, "pg_batches_schema", F(pg_batches_schema), "public",
	    config_check_schema),
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
	STR(S_QUEUE, "handler_env", Q(handler_env), "", handler_env_check),
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
	BOOL(S_QUEUE, "pipeline", Q(pipeline), "yes"),
	NUM(S_QUEUE, "rate_limit", T_RATE, Q(rate_limit), "", 0, 0),
	NUM(S_QUEUE, "max_worker_rss_mb", T_LONG, Q(max_worker_rss_mb),
	    "0", 0, 1048576),
	NUM(S_QUEUE, "max_job_bytes", T_LONG, Q(max_job_bytes),
	    "1048576", 16, 536870912),
	NUM(S_QUEUE, "chunk_rows", T_INT, Q(chunk_rows), "1000", 1, 1000000),
	NUM(S_QUEUE, "dead_max", T_LONG, Q(dead_max), "100000", 0, 1000000000),
	NUM(S_QUEUE, "idempotency_window", T_DURATION,
	    Q(idempotency_window_ms), "0", 0, 30 * MS_DAY),
	STR(S_QUEUE, "dead_archive", Q(dead_archive), "", config_check_abs_path),
	STR(S_QUEUE, "cache_key_prefixes", Q(cache_key_prefixes), "",
	    config_check_cache_prefixes),
	STR(S_QUEUE, "table", Q(table), "", config_check_table),
	STR(S_QUEUE, "tables", Q(tables), "", config_check_table_list),
	STR(S_QUEUE, "table_member", Q(table_member), "", check_table_member),
	STR(S_QUEUE, "columns", Q(columns), "", config_check_columns),
	ENUM(S_QUEUE, "mode", Q(mode), "insert", mode_names),
	STR(S_QUEUE, "key", Q(key), "", config_check_column_list),
	STR(S_QUEUE, "update_columns", Q(update_columns), "",
	    config_check_column_list),
	STR(S_QUEUE, "version", Q(version), "", config_check_column),
	ENUM(S_QUEUE, "missing", Q(missing), "dead", missing_names),
	STR(S_QUEUE, "op_member", Q(op_member), "op", check_member),
	/* each empty: [ferryd]'s */
	PG_CONNECTION_KEYS(S_QUEUE, Q, ""),
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
	case T_RATE:
		if ((why = rate_limit_parse(value, (long *)(base +
		    k->offset))) != NULL)
			return xstrdup(why);
		return NULL;
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
config_key_alias(int key)
{
	const struct config_key *k = &config_keys[key];

	for (size_t i = 0; i < NKEYS; i++)
		if ((int)i != key && config_keys[i].sect == k->sect &&
		    config_keys[i].offset == k->offset)
			return (int)i;
	return -1;
}

const char *
config_key_string(int key, const void *base)
{
	const struct config_key *k = &config_keys[key];

	if (k->type != T_STRING)
		return NULL;
	return *(char *const *)((const char *)base + k->offset);
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
config_mode_name(int mode)
{
	if (mode < 0 || mode >= (int)FERRY_ARRAY_LEN(mode_names) - 1)
		return "unknown";
	return mode_names[mode];
}
