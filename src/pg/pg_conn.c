/* pg_conn.c - one PostgreSQL connection as ferry uses it: connect from the
 * queue's conninfo, statements whose failures carry their SQLSTATE and its
 * class, the commit-safety check of a failover setup, notices. */
#include "pg_conn.h"
#include "config_pg.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "util.h"

enum pg_error_class
pg_conn_error_class(const char *sqlstate)
{
	static const char *const data[] = { "22", "23", "42" };
	/* 25006: a read-only transaction, on a primary demoted to a standby
	 * (or a standby reached first): a failover, reconnect. 42P01, 42501,
	 * 42703, 3F000: the table (or its schema) renamed or dropped, a
	 * column gone, a grant revoked: no job's data is at fault, every
	 * batch fails the same until someone fixes the database: wait for
	 * it (checked before the class 42 of bad data). 55P03: a lock
	 * another session holds past lock_timeout (a migration's ALTER
	 * TABLE, a transaction left open on a row): no job is at fault
	 * either, the batch waits until the lock is free */
	static const char *const down[] = { "08", "53", "57P01", "57P02",
	    "57P03", "25006", "42P01", "42501", "42703", "3F000", "55P03" };
	size_t i;

	if (sqlstate == NULL || strlen(sqlstate) != 5)
		return PG_ERR_OTHER;
	for (i = 0; i < FERRY_ARRAY_LEN(down); i++)
		if (strncmp(sqlstate, down[i], strlen(down[i])) == 0)
			return PG_ERR_UNAVAILABLE;
	for (i = 0; i < FERRY_ARRAY_LEN(data); i++)
		if (strncmp(sqlstate, data[i], 2) == 0)
			return PG_ERR_DATA;
	if (strcmp(sqlstate, "40001") == 0 || strcmp(sqlstate, "40P01") == 0)
		return PG_ERR_TRANSIENT;
	return PG_ERR_OTHER;
}

PGconn *
pg_conn_open(const struct ferry_config *cfg, const struct queue_config *q,
    char *err, size_t errsize)
{
	char *conninfo = config_pg_conninfo(cfg, q);
	PGconn *conn = PQconnectdb(conninfo);

	free(conninfo);
	if (PQstatus(conn) == CONNECTION_OK)
		return conn;
	snprintf(err, errsize, "postgres: %s", PQerrorMessage(conn));
	err[strcspn(err, "\n")] = '\0';
	PQfinish(conn);
	return NULL;
}

void
pg_conn_close(PGconn *conn)
{
	PQfinish(conn);
}

/* msg into f, one line, cut at a character boundary: it goes into JSON */
static void
set_message(struct pg_failure *f, char *msg)
{
	msg[strcspn(msg, "\n")] = '\0';
	util_utf8_copy(f->msg, sizeof(f->msg), msg, strlen(msg));
	free(msg);
}

void
pg_failure_set_state(struct pg_failure *f, const char *state)
{
	snprintf(f->sqlstate, sizeof(f->sqlstate), "%s", state ? state : "");
}

void
pg_conn_failure(PGconn *conn, PGresult *r, struct pg_failure *f)
{
	const char *state = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
	const char *text = r ? PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY) :
	    NULL;

	f->cls = PQstatus(conn) == CONNECTION_BAD ? PG_ERR_UNAVAILABLE :
	    pg_conn_error_class(state);
	pg_failure_set_state(f, state);
	set_message(f, xasprintf("%s: %s", state ? state : "no SQLSTATE",
	    text ? text : PQerrorMessage(conn)));
}

void
pg_conn_lost(PGconn *conn, struct pg_failure *f)
{
	set_message(f, xasprintf("08006: sending to the server failed: %s",
	    PQerrorMessage(conn)));
	f->cls = PG_ERR_UNAVAILABLE;
	pg_failure_set_state(f, "08006");
}

bool
pg_conn_exec(PGconn *conn, const char *sql, int nparams, const char *p1,
    const char *p2, struct pg_failure *f, PGresult **out)
{
	const char *params[2] = { p1, p2 };
	PGresult *r = PQexecParams(conn, sql, nparams, NULL, params, NULL,
	    NULL, 0);
	ExecStatusType st = PQresultStatus(r);
	bool ok = st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK;

	if (!ok && f != NULL)
		pg_conn_failure(conn, r, f);
	if (ok && out != NULL)
		*out = r;
	else
		PQclear(r);
	return ok;
}

/* One SHOW into buf ("" when it failed); false on failure. */
static bool
show(PGconn *conn, const char *name, char *buf, size_t size,
    struct pg_failure *f)
{
	char sql[64];
	PGresult *r = NULL;

	snprintf(sql, sizeof(sql), "SHOW %s", name);
	buf[0] = '\0';
	if (!pg_conn_exec(conn, sql, 0, NULL, NULL, f, &r))
		return false;
	if (PQntuples(r) > 0)
		snprintf(buf, size, "%s", PQgetvalue(r, 0, 0));
	PQclear(r);
	return true;
}

enum pg_status
pg_conn_commit_check(PGconn *conn, const struct ferry_config *cfg,
    const struct queue_config *q, const char **risk, char *err,
    size_t errsize)
{
	char commit[64], names[256];
	struct pg_failure f;
	int nhosts = config_pg_nhosts(cfg, q);

	*risk = NULL;
	if (nhosts < 2 && !cfg->require_sync_commit)
		return PG_OK;
	if (!show(conn, "synchronous_commit", commit, sizeof(commit), &f) ||
	    !show(conn, "synchronous_standby_names", names, sizeof(names), &f)) {
		snprintf(err, errsize, "postgres: reading the commit settings: %s",
		    f.msg);
		return f.cls == PG_ERR_DATA ? PG_FATAL : PG_UNAVAILABLE;
	}
	if ((*risk = config_pg_commit_risk(commit, names)) == NULL ||
	    !cfg->require_sync_commit)
		return PG_OK;
	snprintf(err, errsize, "postgres %s (port %s): commits do not wait for "
	    "a standby (%s) and require_sync_commit = yes: refused; set "
	    "synchronous_standby_names and synchronous_commit = on on the "
	    "primary, or require_sync_commit = no", PQhost(conn), PQport(conn),
	    *risk);
	return PG_FATAL;
}

void
pg_conn_commit_warn(PGconn *conn, const struct queue_config *q,
    const char *risk)
{
	log_warn("queue %s: postgres %s (port %s): commits do not wait for a "
	    "standby (%s): in a failover, a COMMIT the primary acknowledged "
	    "before its standby had it is lost, and ferry has already acked "
	    "its jobs in Redis: those jobs are lost. Set "
	    "synchronous_standby_names and synchronous_commit = on on the "
	    "primary (require_sync_commit = yes refuses such a server)",
	    q != NULL ? q->name : "-", PQhost(conn), PQport(conn), risk);
}

/* The master warned at start when commits do not wait for a standby; a
 * worker warns again when its connection finds them unsafe after safe
 * ones. */
void
pg_conn_note_commits(PGconn *conn, const struct ferry_config *cfg,
    const struct queue_config *q, const char *risk, int *commits_safe)
{
	if (risk != NULL && *commits_safe == 1)
		pg_conn_commit_warn(conn, q, risk);
	else if (risk != NULL && *commits_safe == -1)
		log_notice("queue %s: postgres %s (port %s): commits do not wait "
		    "for a standby (%s)", q->name, PQhost(conn), PQport(conn),
		    risk);
	if (risk != NULL || config_pg_nhosts(cfg, q) > 1 ||
	    cfg->require_sync_commit)
		*commits_safe = risk == NULL;
}

/* libpq reads PGOPTIONS for every connection that does not set `options`
 * itself (pg_options). */
void
pg_conn_quiet_notices(void)
{
	const char *old = getenv("PGOPTIONS");
	char *opts = xasprintf("%s%s-c client_min_messages=warning",
	    old != NULL ? old : "", old != NULL && *old != '\0' ? " " : "");

	setenv("PGOPTIONS", opts, 1);
	free(opts);
}
