/* config.c - loads ferryd.ini: inih splits the lines, the key table
 * (config_keys.c) stores the values, every error is collected. inih gives its
 * handler no line numbers, cuts long lines and skips sections without keys,
 * so our own reader hands it one physical line at a time and classifies the
 * line the way inih will: every message then knows its line. */
#include "config.h"
#include "config_keys.h"
#include "util.h"

#include <ctype.h>
#include <errno.h>
#include <ini.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#define CONFIG_FILE_MAX (1L << 20)	/* a config is never this large */
#define S_FERRYD CONFIG_SECT_FERRYD
#define S_QUEUE CONFIG_SECT_QUEUE
#define F(field) offsetof(struct ferry_config, field)

enum { S_NONE = S_QUEUE + 1, S_IGNORE };	/* more section states */
enum { L_OTHER, L_KEY, L_CONT };		/* what inih makes of a line */

/* Keys read only at start; config_keep_static carries them over a reload. */
static const struct { const char *name; size_t offset; } static_keys[] = {
	{ "pidfile", F(pidfile) },
	{ "user", F(user) },
	{ "group", F(group) },
	{ "control_socket", F(control_socket) },
	{ "metrics_listen", F(metrics_listen) },
};

struct loader {
	const char *path;
	struct ferry_config *cfg;
	struct config_errors *errs;
	char *text;		/* the whole file */
	size_t len, pos;
	int lineno;		/* of the line inih works on */
	bool long_line;		/* ... which was cut */
	int kind;		/* L_* of that line */
	int sect;		/* S_* of the current section */
	int queue;		/* its index in cfg->queues when S_QUEUE */
	char label[INI_MAX_LINE + 16];	/* "[queue orders]" */
	char prev_key[INI_MAX_LINE];	/* for continuation lines */
	int ferryd_line;
	int queue_headers;	/* [queue ...] lines, valid or not */
	int syntax_errors;
	int *seen;		/* line each key was set (negative: to a bad
				 * value): ferryd, then queues */
};

static char *
vformat(const char *fmt, va_list ap)
{
	va_list aq;
	char *s;
	int n;

	va_copy(aq, ap);
	n = vsnprintf(NULL, 0, fmt, aq);
	va_end(aq);
	s = xmalloc((size_t)(n < 0 ? 0 : n) + 1);
	if (n < 0)
		*s = '\0';
	else
		vsnprintf(s, (size_t)n + 1, fmt, ap);
	return s;
}

/* "FILE:LINE: what", or "FILE: what" when line is 0. */
static void __attribute__((format(printf, 3, 4)))
config_error(struct loader *st, int line, const char *fmt, ...)
{
	struct config_errors *e = st->errs;
	va_list ap;
	char *what;

	va_start(ap, fmt);
	what = vformat(fmt, ap);
	va_end(ap);
	e->msgs = xrealloc(e->msgs, sizeof(*e->msgs) * (size_t)(e->n + 1));
	if (line > 0)
		e->msgs[e->n++] = xasprintf("%s:%d: %s", st->path, line, what);
	else
		e->msgs[e->n++] = xasprintf("%s: %s", st->path, what);
	free(what);
}

/* The line-numbers row of the [ferryd] section (queue -1) or of a queue. */
static int *
seen_row(struct loader *st, int queue)
{
	return st->seen + (size_t)(queue + 1) * config_nkeys;
}

static void
enter_ferryd(struct loader *st)
{
	snprintf(st->label, sizeof(st->label), "[ferryd]");
	if (st->ferryd_line != 0) {
		config_error(st, st->lineno, "[ferryd]: defined twice (first at "
		    "line %d)", st->ferryd_line);
		st->sect = S_IGNORE;
		return;
	}
	st->ferryd_line = st->lineno;
	st->sect = S_FERRYD;
}

static bool
queue_header_ok(struct loader *st, const char *name)
{
	const struct ferry_config *cfg = st->cfg;
	const struct queue_config *dup;

	if (*name == '\0')
		config_error(st, st->lineno, "%s: missing queue name (expected "
		    "[queue NAME])", st->label);
	else if (!config_valid_name(name, CONFIG_QUEUE_NAME_MAX))
		config_error(st, st->lineno, "%s: bad queue name (allowed: 1..%d "
		    "characters of " CONFIG_NAME_CHARS ")", st->label,
		    CONFIG_QUEUE_NAME_MAX);
	else if ((dup = config_find_queue(cfg, name)) != NULL)
		config_error(st, st->lineno, "%s: defined twice (first at line "
		    "%d)", st->label, dup->line);
	else if (cfg->nqueues >= CONFIG_MAX_QUEUES)
		config_error(st, st->lineno, "%s: too many queues (max %d)",
		    st->label, CONFIG_MAX_QUEUES);
	else
		return true;
	return false;
}

/* A [queue NAME] header: the queue exists from here on, with every default,
 * even if no key follows (inih would never tell us about it). */
static void
enter_queue(struct loader *st, const char *name)
{
	struct ferry_config *cfg = st->cfg;
	struct queue_config *q;

	st->queue_headers++;
	snprintf(st->label, sizeof(st->label), *name ? "[queue %s]" : "[queue]",
	    name);
	if (!queue_header_ok(st, name)) {
		st->sect = S_IGNORE;
		return;
	}
	cfg->queues = xrealloc(cfg->queues,
	    sizeof(*q) * (size_t)(cfg->nqueues + 1));
	q = &cfg->queues[cfg->nqueues];
	memset(q, 0, sizeof(*q));
	snprintf(q->name, sizeof(q->name), "%s", name);
	q->line = st->lineno;
	config_keys_default(S_QUEUE, q);
	st->queue = cfg->nqueues++;
	st->sect = S_QUEUE;
}

static char *
rstrip(char *s)
{
	char *p = s + strlen(s);

	while (p > s && isspace((unsigned char)p[-1]))
		*--p = '\0';
	return s;
}

static char *
lskip(char *s)
{
	while (*s != '\0' && isspace((unsigned char)*s))
		s++;
	return s;
}

/* As inih: the first of `chars`, or a ';' after a blank (inline comment). */
static char *
find_chars_or_comment(char *s, const char *chars)
{
	bool was_space = false;

	while (*s != '\0' && (chars == NULL || strchr(chars, *s) == NULL) &&
	    !(was_space && *s == ';')) {
		was_space = isspace((unsigned char)*s);
		s++;
	}
	return s;
}

static void
syntax_error(struct loader *st)
{
	st->syntax_errors++;
	if (!st->long_line)	/* already reported */
		config_error(st, st->lineno, "syntax error: expected \"key = "
		    "value\" or \"[section]\"");
}

static void
scan_section(struct loader *st, char *start)
{
	char *end, *rest, *name;

	end = find_chars_or_comment(start + 1, "]");
	if (*end != ']') {
		syntax_error(st);
		st->sect = S_IGNORE;	/* inih keeps the old one: do not guess */
		return;
	}
	*end = '\0';
	rest = lskip(end + 1);
	st->prev_key[0] = '\0';
	name = lskip(rstrip(start + 1));
	if (strcmp(name, "ferryd") == 0) {
		enter_ferryd(st);
	} else if (strncmp(name, "queue", 5) == 0 &&
	    (name[5] == '\0' || isspace((unsigned char)name[5]))) {
		enter_queue(st, lskip(name + 5));
	} else {
		snprintf(st->label, sizeof(st->label), "[%s]", name);
		config_error(st, st->lineno, "%s: unknown section (allowed: "
		    "[ferryd], [queue NAME])", st->label);
		st->sect = S_IGNORE;
	}
	if (*rest != '\0' && *rest != ';' && *rest != '#')
		config_error(st, st->lineno, "%s: unexpected text after \"]\" "
		    "(put each key on its own line)", st->label);
}

/* Classify one line exactly as inih 55 will: comment or blank, continuation
 * of the previous key (an indented line after a key), section header, key.
 * inih reports only its first syntax error; we report them all. */
static void
scan_line(struct loader *st, const char *buf)
{
	char line[INI_MAX_LINE], *start, *end;

	snprintf(line, sizeof(line), "%s", buf);
	start = line;
	if (st->lineno == 1 && strncmp(start, "\xEF\xBB\xBF", 3) == 0)
		start += 3;
	start = lskip(rstrip(start));
	st->kind = L_OTHER;
	if (*start == '\0' || *start == ';' || *start == '#')
		return;
	if (st->prev_key[0] != '\0' && start > line) {
		st->kind = L_CONT;
		return;
	}
	if (*start == '[') {
		scan_section(st, start);
		return;
	}
	end = find_chars_or_comment(start, "=:");
	if (*end != '=' && *end != ':') {
		syntax_error(st);
		return;
	}
	*end = '\0';
	snprintf(st->prev_key, sizeof(st->prev_key), "%s", rstrip(start));
	st->kind = L_KEY;
}

/* inih's fgets: one physical line per call, so inih's line count stays ours
 * even when a line is too long for its buffer. */
static char *
config_reader(char *buf, int size, void *stream)
{
	struct loader *st = stream;
	const char *p = st->text + st->pos;
	const char *nl;
	size_t len, n;

	if (st->pos >= st->len || size < 2)
		return NULL;
	nl = memchr(p, '\n', st->len - st->pos);
	len = nl != NULL ? (size_t)(nl - p) : st->len - st->pos;
	st->pos += len + (nl != NULL);
	if (len > 0 && p[len - 1] == '\r')
		len--;
	n = len < (size_t)size - 1 ? len : (size_t)size - 1;
	memcpy(buf, p, n);
	buf[n] = '\0';
	st->lineno++;
	st->long_line = len > CONFIG_LINE_MAX;
	if (st->long_line)
		config_error(st, st->lineno, "line is longer than %d characters; "
		    "split the value (e.g. pg_options) or shorten it",
		    CONFIG_LINE_MAX);
	else if (memchr(p, '\0', len) != NULL)   /* inih would stop there */
		config_error(st, st->lineno, "line holds a NUL byte");
	scan_line(st, buf);
	return buf;
}

static void
unknown_key(struct loader *st, const char *name)
{
	const char *hint = "";

	if (st->sect == S_FERRYD && config_key_find(S_QUEUE, name) >= 0)
		hint = " (it belongs in a [queue NAME] section)";
	else if (st->sect == S_QUEUE && config_key_find(S_FERRYD, name) >= 0)
		hint = " (it belongs in the [ferryd] section)";
	config_error(st, st->lineno, "%s %s: unknown key%s", st->label, name,
	    hint);
}

static int
config_handler(void *user, const char *section, const char *name,
    const char *value)
{
	struct loader *st = user;
	void *base;
	char *why;
	int k, *seen;

	(void)section;		/* cut at 49 characters by inih: ours is whole */
	if (st->long_line || st->sect == S_IGNORE ||
	    (st->sect == S_NONE && st->kind == L_CONT))
		return 1;
	if (st->kind == L_CONT) {
		config_error(st, st->lineno, "%s %s: indented line \"%s\" would "
		    "continue this key's value; remove the indentation",
		    st->label, st->prev_key, value);
		return 1;
	}
	if (st->sect == S_NONE) {
		config_error(st, st->lineno, "%s: key before the first section "
		    "(put it under [ferryd] or [queue NAME])", name);
		return 1;
	}
	if ((k = config_key_find(st->sect, name)) < 0) {
		unknown_key(st, name);
		return 1;
	}
	seen = seen_row(st, st->sect == S_QUEUE ? st->queue : -1);
	if (seen[k] != 0) {
		config_error(st, st->lineno, "%s %s: set twice (first at line %d)",
		    st->label, name, abs(seen[k]));
		return 1;
	}
	seen[k] = st->lineno;
	base = st->sect == S_QUEUE ? (void *)&st->cfg->queues[st->queue] :
	    (void *)st->cfg;
	if ((why = config_key_set(k, base, value)) != NULL) {
		config_error(st, st->lineno, "%s %s: \"%s\" %s", st->label, name,
		    value, why);
		free(why);
		seen[k] = -st->lineno;
	}
	return 1;
}

/* The line that set key `name`, negative if its value was refused, or 0. */
static int
key_line(struct loader *st, int queue, const char *name)
{
	return seen_row(st, queue)[config_key_find(queue < 0 ? S_FERRYD :
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
	if (queue < 0)
		snprintf(label, sizeof(label), "[ferryd]");
	else
		snprintf(label, sizeof(label), "[queue %s]",
		    st->cfg->queues[queue].name);
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
	if (queue < 0)
		snprintf(label, sizeof(label), "[ferryd]");
	else
		snprintf(label, sizeof(label), "[queue %s]",
		    st->cfg->queues[queue].name);
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

static void
check_queue(struct loader *st, int i)
{
	const struct queue_config *q = &st->cfg->queues[i];

	check_handler_key(st, i, "command", q->command, CONFIG_HANDLER_EXEC,
	    true, "set handler = exec or remove command");
	check_handler_key(st, i, "table", q->table, CONFIG_HANDLER_POSTGRES,
	    true, "only used with handler = postgres");
	check_handler_key(st, i, "columns", q->columns,
	    CONFIG_HANDLER_POSTGRES, false, "only used with handler = postgres");
	check_pair(st, i, q->backoff_max_ms >= q->backoff_base_ms,
	    "backoff_max_ms", q->backoff_max_ms, ">=", "backoff_base_ms",
	    q->backoff_base_ms);
	check_pair(st, i, q->handler_timeout_ms < q->job_timeout_ms,
	    "handler_timeout", q->handler_timeout_ms, "<", "job_timeout",
	    q->job_timeout_ms);
	check_cache_prefixes(st, i);
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

	if (queue < 0)
		snprintf(label, sizeof(label), "[ferryd]");
	else
		snprintf(label, sizeof(label), "[queue %s]",
		    st->cfg->queues[queue].name);
	config_error(st, blame_line(st, queue, key, NULL), "%s %s: %s", label,
	    key, why);
}

static void
check_all(struct loader *st)
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
	if (st->queue_headers == 0)
		config_error(st, 0, "no [queue NAME] section: ferryd has nothing "
		    "to do");
}

static int
read_file(struct loader *st)
{
	size_t cap = 4096, n;
	FILE *fp;
	int err = 0;

	if ((fp = fopen(st->path, "r")) == NULL) {
		config_error(st, 0, "cannot open: %s", strerror(errno));
		return -1;
	}
	st->text = xmalloc(cap);
	for (;;) {
		if (st->len == cap)
			st->text = xrealloc(st->text, cap *= 2);
		n = fread(st->text + st->len, 1, cap - st->len, fp);
		st->len += n;
		if (st->len > CONFIG_FILE_MAX)
			err = EFBIG;
		else if (n == 0 && ferror(fp))
			err = errno != 0 ? errno : EIO;
		if (err != 0 || n == 0)
			break;
	}
	fclose(fp);
	if (err != 0) {
		config_error(st, 0, "cannot open: %s", strerror(err));
		return -1;
	}
	return 0;
}

int
config_load(const char *path, struct ferry_config *cfg,
    struct config_errors *errs)
{
	struct loader st;
	int before = errs->n, rc;

	memset(cfg, 0, sizeof(*cfg));
	memset(&st, 0, sizeof(st));
	st.path = path;
	st.cfg = cfg;
	st.errs = errs;
	st.sect = S_NONE;
	st.seen = xcalloc((CONFIG_MAX_QUEUES + 1) * config_nkeys, sizeof(int));
	cfg->path = xstrdup(path);
	config_keys_default(S_FERRYD, cfg);
	if (read_file(&st) == 0) {
		rc = ini_parse_stream(config_reader, &st, config_handler, &st);
		if (rc != 0 && st.syntax_errors == 0)	/* inih saw more */
			config_error(&st, rc, "syntax error: expected \"key = "
			    "value\" or \"[section]\"");
		check_all(&st);
	}
	free(st.text);
	free(st.seen);
	if (errs->n == before)
		return 0;
	config_free(cfg);
	return -1;
}

void
config_free(struct ferry_config *cfg)
{
	int i;

	config_keys_free(S_FERRYD, cfg);
	for (i = 0; i < cfg->nqueues; i++)
		config_keys_free(S_QUEUE, &cfg->queues[i]);
	free(cfg->queues);
	free(cfg->path);
	memset(cfg, 0, sizeof(*cfg));
}

void
config_errors_free(struct config_errors *errs)
{
	int i;

	for (i = 0; i < errs->n; i++)
		free(errs->msgs[i]);
	free(errs->msgs);
	errs->msgs = NULL;
	errs->n = 0;
}

void
config_errors_print(const struct config_errors *errs, FILE *out)
{
	int i;

	for (i = 0; i < errs->n; i++)
		fprintf(out, "%s\n", errs->msgs[i]);
}

const struct queue_config *
config_find_queue(const struct ferry_config *cfg, const char *name)
{
	int i;

	for (i = 0; i < cfg->nqueues; i++)
		if (strcmp(cfg->queues[i].name, name) == 0)
			return &cfg->queues[i];
	return NULL;
}

void
config_keep_static(const struct ferry_config *old,
    struct ferry_config *fresh, void (*warn)(const char *key,
    const char *old_value, const char *new_value))
{
	const char *o;
	char **f;
	size_t i;

	for (i = 0; i < FERRY_ARRAY_LEN(static_keys); i++) {
		o = *(char *const *)((const char *)old + static_keys[i].offset);
		f = (char **)((char *)fresh + static_keys[i].offset);
		o = o != NULL ? o : "";
		if (strcmp(o, *f != NULL ? *f : "") != 0 && warn != NULL)
			warn(static_keys[i].name, o, *f != NULL ? *f : "");
		free(*f);
		*f = xstrdup(o);
	}
}

