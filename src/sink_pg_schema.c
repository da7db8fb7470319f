/* sink_pg_schema.c - what the PostgreSQL sink needs of the database: the
 * target table and its columns (quoted with libpq's escaping, the COPY
 * statement built from them), ferry_batches, commits that survive a
 * failover, and `ferryctl init-db`, which creates ferry_batches and checks
 * the rest. */
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "copy.h"
#include "log.h"
#include "sink_pg.h"
#include "sink_pg_int.h"
#include "util.h"

static char *
quote_table(PGconn *conn, const char *table)
{
	const char *dot = strchr(table, '.');
	char *a, *b, *out;

	if (dot == NULL) {
		a = PQescapeIdentifier(conn, table, strlen(table));
		out = xstrdup(a);
		PQfreemem(a);
		return out;
	}
	a = PQescapeIdentifier(conn, table, (size_t)(dot - table));
	b = PQescapeIdentifier(conn, dot + 1, strlen(dot + 1));
	out = xasprintf("%s.%s", a, b);
	PQfreemem(a);
	PQfreemem(b);
	return out;
}

/* The table's columns, in order; NULL when the table does not exist, or
 * when the query failed (*failed, why in f). */
static PGresult *
table_columns(struct sink_pg *s, const char *quoted, struct pg_failure *f,
    bool *failed)
{
	PGresult *r = NULL;

	*failed = false;
	if (!sink_pg_exec(s, "SELECT attname FROM pg_attribute WHERE attrelid = "
	    "to_regclass($1) AND attnum > 0 AND NOT attisdropped ORDER BY attnum",
	    1, quoted, NULL, f, &r)) {
		*failed = true;         /* the query, not the table */
		return NULL;
	}
	if (PQntuples(r) == 0) {
		PQclear(r);
		return NULL;
	}
	return r;
}

static bool
has_column(PGresult *r, const char *name)
{
	for (int i = 0; i < PQntuples(r); i++)
		if (strcmp(PQgetvalue(r, i, 0), name) == 0)
			return true;
	return false;
}

/* Resolve the columns and build the COPY statement; FATAL when the table,
 * a column or ferry_batches is missing. */
enum sink_status
sink_pg_describe(struct sink_pg *s, char *err, size_t errsize)
{
	const struct queue_config *q = s->q;
	char *quoted = quote_table(s->conn, q->table);
	struct pg_failure f;
	bool failed;
	PGresult *cols = table_columns(s, quoted, &f, &failed), *fb = NULL;
	enum sink_status st = SINK_FATAL;

	/* a query that failed (the connection died, a statement timeout)
	 * says nothing about the table: wait and try again, never stop */
	if (failed) {
		snprintf(err, errsize, "postgres: describing table %s: %s",
		    q->table, f.msg);
		st = f.cls == COPY_ERR_DATA ? SINK_FATAL : SINK_UNAVAILABLE;
		goto out;
	}
	if (cols == NULL) {
		snprintf(err, errsize, "[queue %s] table: \"%s\" does not exist in "
		    "the database: create it", q->name, q->table);
		goto out;
	}
	if ((fb = table_columns(s, s->batches, &f, &failed)) == NULL &&
	    failed) {
		snprintf(err, errsize, "postgres: describing table %s: %s",
		    s->batches, f.msg);
		st = f.cls == COPY_ERR_DATA ? SINK_FATAL : SINK_UNAVAILABLE;
		goto out;
	}
	if (fb == NULL) {
		snprintf(err, errsize, "table %s does not exist: run ferryctl "
		    "init-db (or set [ferryd] pg_batches_schema to the schema "
		    "that has ferry_batches)", s->batches);
		goto out;
	}
	copy_columns_free(&s->cols);
	if (q->columns != NULL && *q->columns != '\0') {
		if (copy_columns_parse(q->columns, &s->cols, err, errsize) == -1)
			goto out;
	} else {
		char **names = xmalloc(sizeof(*names) * (size_t)PQntuples(cols));
		for (int i = 0; i < PQntuples(cols); i++)
			names[i] = PQgetvalue(cols, i, 0);
		copy_columns_same(&s->cols, names, PQntuples(cols));
		free(names);
	}
	size_t len = strlen(quoted) + 64;
	for (int i = 0; i < s->cols.n; i++) {
		if (!has_column(cols, s->cols.columns[i])) {
			snprintf(err, errsize, "[queue %s] columns: table \"%s\" has no "
			    "column \"%s\"", q->name, q->table, s->cols.columns[i]);
			goto out;
		}
		len += strlen(s->cols.columns[i]) * 2 + 4;
	}
	free(s->copy_sql);
	s->copy_sql = xmalloc(len);
	size_t off = (size_t)snprintf(s->copy_sql, len, "COPY %s (", quoted);
	for (int i = 0; i < s->cols.n; i++) {
		char *c = PQescapeIdentifier(s->conn, s->cols.columns[i],
		    strlen(s->cols.columns[i]));
		off += (size_t)snprintf(s->copy_sql + off, len - off, "%s%s",
		    i ? ", " : "", c);
		PQfreemem(c);
	}
	snprintf(s->copy_sql + off, len - off, ") FROM STDIN");
	st = SINK_OK;
out:
	PQclear(cols);
	PQclear(fb);
	free(quoted);
	return st;
}

/* %s: the schema-qualified name (struct sink_pg batches), twice */
static const char create_fmt[] =
    "CREATE TABLE IF NOT EXISTS %s ("
    " key text PRIMARY KEY,"
    " state text NOT NULL CHECK (state IN ('committed', 'fenced')),"
    " failed text,"
    " created_at timestamptz NOT NULL DEFAULT now());"
    "CREATE INDEX IF NOT EXISTS ferry_batches_created_at"
    " ON %s (created_at)";

/* One SHOW into buf ("" when it failed); false on failure. */
static bool
show(struct sink_pg *s, const char *name, char *buf, size_t size,
    struct pg_failure *f)
{
	char sql[64];
	PGresult *r = NULL;

	snprintf(sql, sizeof(sql), "SHOW %s", name);
	buf[0] = '\0';
	if (!sink_pg_exec(s, sql, 0, NULL, NULL, f, &r))
		return false;
	if (PQntuples(r) > 0)
		snprintf(buf, size, "%s", PQgetvalue(r, 0, 0));
	PQclear(r);
	return true;
}

enum sink_status
sink_pg_commit_check(struct sink_pg *s, const char **risk, char *err,
    size_t errsize)
{
	char commit[64], names[256];
	struct pg_failure f;
	int nhosts = config_pg_nhosts(s->cfg, s->q);

	*risk = NULL;
	if (nhosts < 2 && !s->cfg->require_sync_commit)
		return SINK_OK;
	if (!show(s, "synchronous_commit", commit, sizeof(commit), &f) ||
	    !show(s, "synchronous_standby_names", names, sizeof(names), &f)) {
		snprintf(err, errsize, "postgres: reading the commit settings: %s",
		    f.msg);
		return f.cls == COPY_ERR_DATA ? SINK_FATAL : SINK_UNAVAILABLE;
	}
	if ((*risk = config_pg_commit_risk(commit, names)) == NULL ||
	    !s->cfg->require_sync_commit)
		return SINK_OK;
	snprintf(err, errsize, "postgres %s (port %s): commits do not wait for "
	    "a standby (%s) and require_sync_commit = yes: refused; set "
	    "synchronous_standby_names and synchronous_commit = on on the "
	    "primary, or require_sync_commit = no", PQhost(s->conn),
	    PQport(s->conn), *risk);
	return SINK_FATAL;
}

void
sink_pg_commit_warn(const struct sink_pg *s, const char *risk)
{
	log_warn("queue %s: postgres %s (port %s): commits do not wait for a "
	    "standby (%s): in a failover, a COMMIT the primary acknowledged "
	    "before its standby had it is lost, and ferry has already acked "
	    "its jobs in Redis: those jobs are lost. Set "
	    "synchronous_standby_names and synchronous_commit = on on the "
	    "primary (require_sync_commit = yes refuses such a server)",
	    s->q != NULL ? s->q->name : "-", PQhost(s->conn), PQport(s->conn),
	    risk);
}

/* CREATE TABLE and INDEX in one string (PQexecParams takes only one). */
static bool
create_batches(struct sink_pg *s)
{
	char *sql = xasprintf(create_fmt, s->batches, s->batches);
	PGresult *r = PQexec(s->conn, sql);
	bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
	PQclear(r);
	free(sql);
	return ok;
}

enum sink_status
sink_pg_check(const struct ferry_config *cfg, const struct queue_config *q,
    int create, char *err, size_t errsize)
{
	struct sink_pg *s = sink_pg_new(cfg, q);
	char *conninfo = config_pg_conninfo(cfg, q);
	enum sink_status st = SINK_UNAVAILABLE;
	const char *risk = NULL;

	s->conn = PQconnectdb(conninfo);
	free(conninfo);
	if (PQstatus(s->conn) != CONNECTION_OK) {
		snprintf(err, errsize, "postgres: %s", PQerrorMessage(s->conn));
		err[strcspn(err, "\n")] = '\0';
	} else if (!create &&
	    (st = sink_pg_commit_check(s, &risk, err, errsize)) != SINK_OK) {
		;       /* refused, or the SHOW failed */
	} else if (create && !create_batches(s)) {
		snprintf(err, errsize, "cannot create ferry_batches as %s: %s",
		    s->batches, PQerrorMessage(s->conn));
		err[strcspn(err, "\n")] = '\0';
		st = SINK_FATAL;
	} else {
		if (risk != NULL)
			sink_pg_commit_warn(s, risk);
		st = sink_pg_describe(s, err, errsize);
	}
	sink_pg_free(s);
	return st;
}
