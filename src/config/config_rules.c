/* config_rules.c - the rules between keys of ferryd.ini, checked once the
 * whole file is read: orders between durations, keys that go with one
 * handler, sentinels against redis_host, cluster seeds, PostgreSQL hosts
 * and ports, password files. Each message points at the line to fix. */
#include "config_int.h"
#include "config_secret.h"
#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* "[ferryd]" (queue -1) or "[queue NAME]", for a message. */
static void
section_label(struct loader *st, int queue, char *label, size_t size)
{
	if (queue < 0)
		snprintf(label, size, "[ferryd]");
	else
		snprintf(label, size, "[queue %s]", st->cfg->queues[queue].name);
}

/* The line that set key `name`, negative if its value was refused, or 0. */
static int
key_line(struct loader *st, int queue, const char *name)
{
	return config_seen_row(st, queue)[config_key_find(queue < 0 ? S_FERRYD :
	    S_QUEUE, name)];
}

/* Where to point for a cross check on `a` (against `b`): a's line if the
 * file set it, else b's, else none. */
static int
blame_line(struct loader *st, int queue, const char *a, const char *b)
{
	int line = abs(key_line(st, queue, a));

	return line != 0 || b == NULL ? line : abs(key_line(st, queue, b));
}

/* "[queue q] a: "5s" must be OP b (10s)" unless `ok`. */
static void
check_pair(struct loader *st, int queue, bool ok, const char *a, long va,
    const char *op, const char *b, long vb)
{
	char label[CONFIG_QUEUE_NAME_MAX + 16], x[32], y[32];

	if (ok)
		return;
	section_label(st, queue, label, sizeof(label));
	config_error(st, blame_line(st, queue, a, b), "%s %s: \"%s\" must be "
	    "%s %s (%s)", label, a, config_fmt_duration(va, x, sizeof(x)), op, b,
	    config_fmt_duration(vb, y, sizeof(y)));
}

/* As check_pair, for [ferryd] numbers that are not durations. */
static void
check_order(struct loader *st, bool ok, const char *a, long va,
    const char *b, long vb)
{
	if (!ok)
		config_error(st, blame_line(st, -1, a, b), "[ferryd] %s: \"%ld\" "
		    "must be >= %s (%ld)", a, va, b, vb);
}

/* `key` (value `v`) is required with handler `needs` (unless its value was
 * refused: already reported), and an error with any other handler. */
static void
check_handler_key(struct loader *st, int i, const char *key, const char *v,
    int needs, bool required, const char *fix)
{
	const struct queue_config *q = &st->cfg->queues[i];
	int line = blame_line(st, i, key, NULL);

	if (q->handler == needs && required && *v == '\0' &&
	    key_line(st, i, key) >= 0)
		config_error(st, line != 0 ? line : blame_line(st, i, "handler",
		    NULL), "[queue %s] %s: required when handler = %s", q->name,
		    key, config_handler_name(needs));
	if (q->handler != needs && *v != '\0')
		config_error(st, line, "[queue %s] %s: \"%s\" is set but handler "
		    "= %s (%s)", q->name, key, v,
		    config_handler_name(q->handler), fix);
}

/* A cache_key_prefixes item under redis_prefix: would let a job name (and
 * ferry delete) ferry's own keys, another queue's lists among them. */
static void
check_cache_prefixes(struct loader *st, int i)
{
	const struct queue_config *q = &st->cfg->queues[i];
	const char *prefix = st->cfg->redis_prefix, *cur = q->cache_key_prefixes;
	const char *item;
	size_t n = strlen(prefix), len;

	while (config_list_next(&cur, &item, &len)) {
		if (len <= n || strncmp(item, prefix, n) != 0 || item[n] != ':')
			continue;
		config_error(st, blame_line(st, i, "cache_key_prefixes", NULL),
		    "[queue %s] cache_key_prefixes: \"%.*s\" is under redis_prefix "
		    "%s: (ferry's own keys, which a job must never name); the "
		    "queue's cache space %s:{%s}:cache: is always allowed, list "
		    "only prefixes outside %s:", q->name, (int)len, item, prefix,
		    prefix, q->name, prefix);
		return;
	}
}

/* pg_port: one port, or one per pg_host host; no empty host in a list
 * (libpq would read it as its default socket). For a queue, the pair it
 * uses (its own keys or [ferryd]'s), checked where it sets one of them. */
static void
check_pg_hosts(struct loader *st, int queue, const char *host,
    const char *port)
{
	const char *cur = host, *item;
	char label[CONFIG_QUEUE_NAME_MAX + 16];
	int nhosts = config_pg_list_count(host);
	int nports = config_pg_list_count(port);
	size_t len;

	if ((queue >= 0 && key_line(st, queue, "pg_host") == 0 &&
	    key_line(st, queue, "pg_port") == 0) ||
	    key_line(st, queue, "pg_host") < 0 ||
	    key_line(st, queue, "pg_port") < 0)
		return;         /* not this queue's, or refused already */
	section_label(st, queue, label, sizeof(label));
	if (strchr(host, ',') != NULL)
		while (config_list_next(&cur, &item, &len))
			if (len == 0) {
				config_error(st, blame_line(st, queue, "pg_host", NULL),
				    "%s pg_host: \"%s\" has an empty host (allowed: "
				    "hosts separated by commas, such as db1, db2)",
				    label, host);
				return;
			}
	if (nports > 1 && nports != (nhosts > 0 ? nhosts : 1))
		config_error(st, blame_line(st, queue, "pg_port", "pg_host"),
		    "%s pg_port: \"%s\" has %d ports for %d host%s in pg_host "
		    "(allowed: one port for all hosts, or one port per host)",
		    label, port, nports, nhosts, nhosts == 1 ? "" : "s");
}

/* mode and the keys of mode = upsert and update, which only they use.
 * Whether key is a unique index of the table is for the start check
 * (pg_target.c). */
static void
check_mode_keys(struct loader *st, int i)
{
	static const char *const by_key[] = { "key", "update_columns",
	    "version" };
	const struct queue_config *q = &st->cfg->queues[i];
	const char *values[] = { q->key, q->update_columns, q->version };
	bool by_key_mode = q->mode == CONFIG_MODE_UPSERT ||
	    q->mode == CONFIG_MODE_UPDATE;

	if (q->mode != CONFIG_MODE_INSERT && q->handler != CONFIG_HANDLER_POSTGRES)
		config_error(st, blame_line(st, i, "mode", NULL), "[queue %s] mode: "
		    "\"%s\" is set but handler = %s (only used with handler = "
		    "postgres)", q->name, config_mode_name(q->mode),
		    config_handler_name(q->handler));
	if (*q->tables != '\0')
		return;         /* defaults of its tables: checked per table
		                 * (config_tables.c) */
	if (by_key_mode && *q->key == '\0' && key_line(st, i, "key") >= 0)
		config_error(st, blame_line(st, i, "key", "mode"), "[queue %s] "
		    "key: required when mode = %s (allowed: the columns of a "
		    "primary key or unique index of the table, such as key = id)",
		    q->name, config_mode_name(q->mode));
	for (size_t k = 0; k < FERRY_ARRAY_LEN(by_key); k++)
		if (!by_key_mode && *values[k] != '\0')
			config_error(st, blame_line(st, i, by_key[k], NULL),
			    "[queue %s] %s: \"%s\" is set but mode = %s (only used "
			    "with mode = upsert or update)", q->name, by_key[k],
			    values[k], config_mode_name(q->mode));
	/* defaults that only these modes read: refused only when set */
	if (!by_key_mode && key_line(st, i, "op_member") > 0)
		config_error(st, key_line(st, i, "op_member"), "[queue %s] "
		    "op_member: \"%s\" is set but mode = %s (deletes are only "
		    "read with mode = upsert or update; mode = insert writes every "
		    "job as a row)", q->name, q->op_member,
		    config_mode_name(q->mode));
	if (q->mode != CONFIG_MODE_UPDATE && key_line(st, i, "missing") > 0)
		config_error(st, key_line(st, i, "missing"), "[queue %s] "
		    "missing: is set but mode = %s (only used with mode = "
		    "update)", q->name, config_mode_name(q->mode));
}

static void
check_queue(struct loader *st, int i)
{
	const struct queue_config *q = &st->cfg->queues[i];

	check_handler_key(st, i, "command", q->command, CONFIG_HANDLER_EXEC,
	    true, "set handler = exec or remove command");
	check_handler_key(st, i, "table", q->table, CONFIG_HANDLER_POSTGRES,
	    *q->tables == '\0' && key_line(st, i, "tables") >= 0,
	    "only used with handler = postgres");
	check_handler_key(st, i, "columns", q->columns,
	    CONFIG_HANDLER_POSTGRES, false, "only used with handler = postgres");
	check_pair(st, i, q->backoff_max_ms >= q->backoff_base_ms,
	    "backoff_max_ms", q->backoff_max_ms, ">=", "backoff_base_ms",
	    q->backoff_base_ms);
	check_pair(st, i, q->handler_timeout_ms < q->job_timeout_ms,
	    "handler_timeout", q->handler_timeout_ms, "<", "job_timeout",
	    q->job_timeout_ms);
	check_cache_prefixes(st, i);
	check_mode_keys(st, i);
	if (q->handler == CONFIG_HANDLER_POSTGRES)
		check_pg_hosts(st, i, *q->pg_host ? q->pg_host : st->cfg->pg_host,
		    *q->pg_port ? q->pg_port : st->cfg->pg_port);
}

/* Redis Cluster excludes every other way to name Redis, and what a
 * cluster cannot do: SELECT, and cache keys outside the queue's slot
 * (settle.lua deletes them with the queue's keys, in one script). */
static void
check_cluster_keys(struct loader *st)
{
	static const char *const other[] = { "redis_host", "redis_port",
	    "redis_socket", "redis_sentinels", "redis_db" };
	const struct ferry_config *cfg = st->cfg;

	if (*cfg->redis_cluster == '\0')
		return;
	for (size_t i = 0; i < FERRY_ARRAY_LEN(other); i++)
		if (key_line(st, -1, other[i]) != 0 &&
		    (strcmp(other[i], "redis_db") != 0 || cfg->redis_db != 0))
			config_error(st, abs(key_line(st, -1, other[i])),
			    "[ferryd] %s: set together with redis_cluster (allowed: "
			    "%s)", other[i], strcmp(other[i], "redis_db") == 0 ?
			    "0 only: a cluster has database 0 alone" :
			    "one of the two: the cluster nodes say who serves each "
			    "queue, so remove it, or remove redis_cluster");
	for (int i = 0; i < cfg->nqueues; i++)
		if (*cfg->queues[i].cache_key_prefixes != '\0')
			config_error(st, blame_line(st, i, "cache_key_prefixes", NULL),
			    "[queue %s] cache_key_prefixes: not with redis_cluster (a "
			    "cache key outside the queue's slot cannot be read and "
			    "deleted with its jobs; use the queue's cache space "
			    "%s:{%s}:cache:)", cfg->queues[i].name, cfg->redis_prefix,
			    cfg->queues[i].name);
}

/* Sentinel or a fixed address, never both: a redis_host left beside
 * redis_sentinels would be ignored, and the operator would think ferry
 * talks to it. */
static void
check_sentinel_keys(struct loader *st)
{
	static const char *const fixed[] = { "redis_host", "redis_port",
	    "redis_socket" };
	const struct ferry_config *cfg = st->cfg;
	bool sentinels = *cfg->redis_sentinels != '\0';

	if (key_line(st, -1, "redis_sentinels") < 0 ||
	    key_line(st, -1, "redis_cluster") < 0)
		return;         /* refused already */
	check_cluster_keys(st);
	for (size_t i = 0; sentinels && i < FERRY_ARRAY_LEN(fixed); i++)
		if (key_line(st, -1, fixed[i]) != 0)
			config_error(st, abs(key_line(st, -1, fixed[i])),
			    "[ferryd] %s: set together with redis_sentinels (allowed: "
			    "one of the two: the sentinels name the primary, so "
			    "remove %s, or remove redis_sentinels for a fixed "
			    "address)", fixed[i], fixed[i]);
	if (sentinels && *cfg->redis_sentinel_master == '\0' &&
	    key_line(st, -1, "redis_sentinel_master") == 0)
		config_error(st, blame_line(st, -1, "redis_sentinels", NULL),
		    "[ferryd] redis_sentinel_master: required with "
		    "redis_sentinels (the NAME of \"sentinel monitor NAME ...\" "
		    "in the sentinels' configuration)");
	if (!sentinels && (*cfg->redis_sentinel_master != '\0' ||
	    *cfg->redis_sentinel_password != '\0'))
		config_error(st, blame_line(st, -1, "redis_sentinel_master",
		    "redis_sentinel_password"), "[ferryd] %s: is set but "
		    "redis_sentinels is not (allowed: only with redis_sentinels)",
		    *cfg->redis_sentinel_master != '\0' ? "redis_sentinel_master" :
		    "redis_sentinel_password");
	check_pair(st, -1, cfg->redis_wait_replicas == 0 ||
	    cfg->redis_wait_timeout_ms * 3 <= cfg->heartbeat_ttl_ms,
	    "redis_wait_timeout", cfg->redis_wait_timeout_ms, "<= a third of",
	    "heartbeat_ttl", cfg->heartbeat_ttl_ms);
}

/* config_secret_fill's error: at the line of the _file key. */
static void
secret_error(void *ctx, int queue, const char *key, const char *why)
{
	struct loader *st = ctx;
	char label[CONFIG_QUEUE_NAME_MAX + 16];

	section_label(st, queue, label, sizeof(label));
	config_error(st, blame_line(st, queue, key, NULL), "%s %s: %s", label,
	    key, why);
}

void
config_check_rules(struct loader *st)
{
	const struct ferry_config *cfg = st->cfg;
	int i;

	check_pair(st, -1,
	    cfg->restart_backoff_max_ms >= cfg->restart_backoff_min_ms,
	    "restart_backoff_max", cfg->restart_backoff_max_ms, ">=",
	    "restart_backoff_min", cfg->restart_backoff_min_ms);
	check_order(st, cfg->memory_refuse_percent >= cfg->memory_warn_percent,
	    "memory_refuse_percent", cfg->memory_refuse_percent,
	    "memory_warn_percent", cfg->memory_warn_percent);
	config_secret_fill(st->cfg, secret_error, st);
	if (*cfg->redis_user != '\0' && *cfg->redis_password == '\0')
		config_error(st, blame_line(st, -1, "redis_user", NULL),
		    "[ferryd] redis_user: \"%s\" is set but redis_password is "
		    "not (an ACL user authenticates with both: AUTH user password)",
		    cfg->redis_user);
	check_sentinel_keys(st);
	check_pg_hosts(st, -1, cfg->pg_host, cfg->pg_port);
	for (i = 0; i < cfg->nqueues; i++)
		check_queue(st, i);
	config_check_tables(st);
	if (st->queue_headers == 0)
		config_error(st, 0, "no [queue NAME] section: ferryd has nothing "
		    "to do");
}

