/* config.c - loads ferryd.ini: inih splits the lines, the key table
 * (config_keys.c) stores the values, every error is collected. inih gives its
 * handler no line numbers, cuts long lines and skips sections without keys,
 * so our own reader hands it one physical line at a time and classifies the
 * line the way inih will: every message then knows its line. */
#include "config.h"
#include "config_int.h"
#include "util.h"

#include <ctype.h>
#include <errno.h>
#include <ini.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#define CONFIG_FILE_MAX (1L << 20)	/* a config is never this large */
#define F(field) offsetof(struct ferry_config, field)

/* Keys read only at start; config_keep_static carries them over a reload. */
static const struct { const char *name; size_t offset; } static_keys[] = {
	{ "pidfile", F(pidfile) },
	{ "user", F(user) },
	{ "group", F(group) },
	{ "control_socket", F(control_socket) },
	{ "http_listen", F(metrics_listen) },
	/* the fence of recovered jobs: their batches are recorded there */
	{ "pg_batches_schema", F(pg_batches_schema) },
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
void
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
int *
config_seen_row(struct loader *st, int queue)
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
	} else if (strncmp(name, "table", 5) == 0 &&
	    (name[5] == '\0' || isspace((unsigned char)name[5]))) {
		config_enter_table(st, lskip(name + 5));
	} else {
		snprintf(st->label, sizeof(st->label), "[%s]", name);
		config_error(st, st->lineno, "%s: unknown section (allowed: "
		    "[ferryd], [queue NAME], [table QUEUE TABLE])", st->label);
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

/* Key k and its alias (the same field under its old name) both set, to
 * different values: an error (the same value is allowed). */
static bool
alias_differs(struct loader *st, int k, const int *seen, const void *base,
    const char *name, const char *value)
{
	int a = config_key_alias(k), sect;
	const char *had = a >= 0 ? config_key_string(a, base) : NULL;

	if (a < 0 || seen[a] <= 0 || strcmp(had != NULL ? had : "", value) == 0)
		return false;
	const char *other = config_key_name(a, &sect);
	config_error(st, st->lineno, "%s %s: \"%s\" differs from %s = \"%s\" "
	    "(line %d): %s is the old name of %s, one setting; set only one of "
	    "them", st->label, name, value, other, had != NULL ? had : "",
	    seen[a], a > k ? other : name, a > k ? name : other);
	return true;
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
	if (st->sect == S_TABLE) {
		config_table_key(st, name, value);
		return 1;
	}
	if ((k = config_key_find(st->sect, name)) < 0) {
		unknown_key(st, name);
		return 1;
	}
	seen = config_seen_row(st, st->sect == S_QUEUE ? st->queue : -1);
	if (seen[k] != 0) {
		config_error(st, st->lineno, "%s %s: set twice (first at line %d)",
		    st->label, name, abs(seen[k]));
		return 1;
	}
	base = st->sect == S_QUEUE ? (void *)&st->cfg->queues[st->queue] :
	    (void *)st->cfg;
	if (alias_differs(st, k, seen, base, name, value))
		return 1;
	seen[k] = st->lineno;
	if ((why = config_key_set(k, base, value)) != NULL) {
		config_error(st, st->lineno, "%s %s: \"%s\" %s", st->label, name,
		    value, why);
		free(why);
		seen[k] = -st->lineno;
	}
	return 1;
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
		config_check_rules(&st);
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
	for (i = 0; i < cfg->ntables; i++)
		config_keys_free(S_QUEUE, &cfg->tables[i].c);
	free(cfg->tables);
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

const struct queue_config *
config_find_table(const struct ferry_config *cfg, const char *queue,
    const char *table)
{
	for (int i = 0; i < cfg->ntables; i++)
		if (strcmp(cfg->tables[i].c.name, queue) == 0 &&
		    strcmp(cfg->tables[i].c.table, table) == 0)
			return &cfg->tables[i].c;
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

