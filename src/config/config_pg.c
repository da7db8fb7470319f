/* config_pg.c - the PostgreSQL side of a queue's configuration: the libpq
 * conninfo string (per-queue pg_* keys over [ferryd]'s), whether a reload
 * changed it, and whether a server's commit settings survive a failover. */
#include "config_pg.h"
#include "util.h"

#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The queue's value when set there, else [ferryd]'s; never NULL. */
static const char *
pick(const char *queue_value, const char *ferryd_value)
{
	if (queue_value != NULL && *queue_value != '\0')
		return queue_value;
	return ferryd_value != NULL ? ferryd_value : "";
}

/* Does conninfo text `opts` set keyword `kw`? ("kw=" or "kw =" at the start
 * of a word; a value that merely contains "kw=" may fool it.) */
static bool
sets_keyword(const char *opts, const char *kw)
{
	size_t n = strlen(kw);
	const char *p, *e;

	for (p = opts; (p = strstr(p, kw)) != NULL; p += n) {
		if (p > opts && !isspace((unsigned char)p[-1]))
			continue;
		for (e = p + n; isspace((unsigned char)*e); e++)
			;
		if (*e == '=')
			return true;
	}
	return false;
}

/* Append " kw='value'" (no blank first) with ' and \ escaped; nothing for
 * an empty value. `w` has room: see config_pg_conninfo. */
static char *
put_param(char *out, char *w, const char *kw, const char *value)
{
	if (*value == '\0')
		return w;
	if (w > out)
		*w++ = ' ';
	w += sprintf(w, "%s='", kw);
	for (; *value != '\0'; value++) {
		if (*value == '\'' || *value == '\\')
			*w++ = '\\';
		*w++ = *value;
	}
	*w++ = '\'';
	*w = '\0';
	return w;
}

/* "a , b" -> "a,b": libpq does not trim the items of a host or port list. */
static char *
list_tight(const char *list)
{
	char *out = xmalloc(strlen(list) + 1), *w = out;
	const char *cur = list, *item;
	size_t len;

	*w = '\0';
	while (config_list_next(&cur, &item, &len)) {
		if (w > out)
			*w++ = ',';
		memcpy(w, item, len);
		w += len;
		*w = '\0';
	}
	return out;
}

int
config_pg_list_count(const char *list)
{
	const char *cur = list, *item;
	size_t len;
	int n = 0;

	while (config_list_next(&cur, &item, &len))
		n++;
	return n;
}

int
config_pg_nhosts(const struct ferry_config *cfg, const struct queue_config *q)
{
	return config_pg_list_count(pick(q ? q->pg_host : NULL, cfg->pg_host));
}

/* synchronous_commit on, remote_write and remote_apply wait for the
 * standbys synchronous_standby_names names; local and off never do (a
 * session, role or database can set it too: the SHOW is the session's). */
const char *
config_pg_commit_risk(const char *synchronous_commit,
    const char *standby_names)
{
	const char *p = standby_names != NULL ? standby_names : "";

	p += strspn(p, " \t");
	if (*p == '\0')
		return "synchronous_standby_names is empty";
	if (synchronous_commit == NULL ||
	    strcmp(synchronous_commit, "off") == 0 ||
	    strcmp(synchronous_commit, "local") == 0)
		return "synchronous_commit is off or local";
	return NULL;
}

char *
config_pg_conninfo(const struct ferry_config *cfg,
    const struct queue_config *q)
{
	static const char *const kws[] = {
		"host", "port", "dbname", "user", "password",
		"target_session_attrs"
	};
	const struct queue_config none = { .pg_host = NULL };
	const char *vals[FERRY_ARRAY_LEN(kws)], *opts;
	char *host, *port, *out, *w;
	size_t i, size;

	if (q == NULL)
		q = &none;
	host = list_tight(pick(q->pg_host, cfg->pg_host));
	port = list_tight(pick(q->pg_port, cfg->pg_port));
	vals[0] = host;
	vals[1] = port;
	vals[2] = pick(q->pg_database, cfg->pg_database);
	vals[3] = pick(q->pg_user, cfg->pg_user);
	vals[4] = pick(q->pg_password, cfg->pg_password);
	vals[5] = pick(q->pg_target_session_attrs, cfg->pg_target_session_attrs);
	opts = pick(q->pg_options, cfg->pg_options);
	if (*vals[5] == '\0' && config_pg_list_count(host) > 1)
		vals[5] = "read-write";     /* follow a promoted standby */
	if (sets_keyword(opts, "target_session_attrs"))
		vals[5] = "";
	size = strlen(opts) + 64;	/* both defaults, blanks, the NUL */
	for (i = 0; i < FERRY_ARRAY_LEN(kws); i++)
		size += strlen(kws[i]) + 4 + 2 * strlen(vals[i]);
	out = w = xmalloc(size);
	*w = '\0';
	for (i = 0; i < FERRY_ARRAY_LEN(kws); i++)
		w = put_param(out, w, kws[i], vals[i]);
	if (*opts != '\0')
		w += sprintf(w, "%s%s", w > out ? " " : "", opts);
	if (!sets_keyword(opts, "connect_timeout"))
		w += sprintf(w, "%sconnect_timeout=5", w > out ? " " : "");
	if (!sets_keyword(opts, "application_name"))
		sprintf(w, "%sapplication_name=ferryd", w > out ? " " : "");
	free(host);
	free(port);
	return out;
}

/* A [table] section of the queue changed (its tables list is a queue key:
 * config_queue_changed sees that one). */
static bool
tables_changed(const struct ferry_config *ca, const struct queue_config *a,
    const struct ferry_config *cb, const struct queue_config *b)
{
	const char *cur = a->tables, *item;
	char name[2 * CONFIG_IDENT_MAX + 2];
	size_t len;

	while (config_list_next(&cur, &item, &len)) {
		snprintf(name, sizeof(name), "%.*s", (int)len, item);
		const struct queue_config *ta = config_find_table(ca, a->name, name);
		const struct queue_config *tb = config_find_table(cb, b->name, name);
		if (ta == NULL || tb == NULL || config_queue_changed(ta, tb))
			return true;
	}
	return false;
}

bool
config_queue_sink_changed(const struct ferry_config *ca,
    const struct queue_config *a, const struct ferry_config *cb,
    const struct queue_config *b)
{
	char *x, *y;
	bool changed;

	if (a->handler != CONFIG_HANDLER_POSTGRES &&
	    b->handler != CONFIG_HANDLER_POSTGRES)
		return false;
	if (ca->pg_statement_timeout_ms != cb->pg_statement_timeout_ms ||
	    ca->require_sync_commit != cb->require_sync_commit)
		return true;
	x = config_pg_conninfo(ca, a);
	y = config_pg_conninfo(cb, b);
	changed = strcmp(x, y) != 0 || tables_changed(ca, a, cb, b);
	free(x);
	free(y);
	return changed;
}
