/* pg_conn.h - one PostgreSQL connection as ferry uses it: opened from a
 * queue's conninfo (src/config/config_pg.c), statements with text parameters
 * whose failures are sorted by SQLSTATE, whether the server's commits
 * survive a failover, PostgreSQL's notices. Used by the sink's batch
 * writer (src/handler/sink_pg.c) and by the start checks (src/pg/pg_target.c). */
#ifndef FERRY_PG_CONN_H
#define FERRY_PG_CONN_H

#include <libpq-fe.h>
#include <stdbool.h>
#include <stddef.h>

#include "config.h"

/* What a check or a connection attempt concluded. */
enum pg_status {
	PG_OK,
	PG_UNAVAILABLE,     /* nothing decided: try again later */
	PG_FATAL,           /* cannot ever work (missing table...): stop */
};

/* What a SQLSTATE means for a batch. */
enum pg_error_class {
	PG_ERR_DATA,           /* 22, 23, 42: this data can never go in */
	PG_ERR_TRANSIENT,      /* 40001, 40P01: retry the job later */
	PG_ERR_UNAVAILABLE,    /* 08, 57P0x, 53, 25006: the sink is down (or
	                        * failing over); 42P01, 42501, 42703, 3F000:
	                        * the table is gone or not writable: wait */
	PG_ERR_OTHER,          /* anything else: retry with backoff */
};
/* Pure: no server needed. */
enum pg_error_class pg_conn_error_class(const char *sqlstate);

/* Why the current statement failed; its class in cls, its SQLSTATE in
 * sqlstate ("" when it has none). msg is what operators read, valid UTF-8,
 * one line: "SQLSTATE: text" when it has one. Code decides on sqlstate,
 * never on msg. */
struct pg_failure {
	enum pg_error_class cls;
	char sqlstate[6];
	char msg[300];
};
/* f's SQLSTATE becomes state (NULL or "": none). */
void pg_failure_set_state(struct pg_failure *f, const char *state);

/* Connect to queue q's server. NULL with "postgres: why" in err. */
PGconn *pg_conn_open(const struct ferry_config *cfg,
    const struct queue_config *q, char *err, size_t errsize);
void pg_conn_close(PGconn *conn);

/* Run sql (with up to 2 text parameters); true when it worked. On failure
 * f (when not NULL) says why; on success *out (when not NULL) holds the
 * result to PQclear. */
bool pg_conn_exec(PGconn *conn, const char *sql, int nparams,
    const char *p1, const char *p2, struct pg_failure *f, PGresult **out);
/* f from the failed result r (NULL: none), classified. */
void pg_conn_failure(PGconn *conn, PGresult *r, struct pg_failure *f);
/* libpq could not send: the connection is unusable even if its status
 * still says OK. f is unavailable, with libpq's reason. */
void pg_conn_lost(PGconn *conn, struct pg_failure *f);

/* With several hosts or require_sync_commit: do this server's commits wait
 * for a standby (SHOW synchronous_commit and synchronous_standby_names)?
 * PG_OK with *risk NULL, or why not (the caller warns); PG_FATAL when
 * require_sync_commit refuses the server; PG_UNAVAILABLE when the SHOW
 * failed. */
enum pg_status pg_conn_commit_check(PGconn *conn,
    const struct ferry_config *cfg, const struct queue_config *q,
    const char **risk, char *err, size_t errsize);
/* The loud warning about `risk` (from pg_conn_commit_check). */
void pg_conn_commit_warn(PGconn *conn, const struct queue_config *q,
    const char *risk);
/* A worker's reconnection: warn when commits are unsafe after safe ones
 * (a failover onto a primary without a synchronous standby), note them
 * when unsafe from the start. *commits_safe: 1, 0, or -1 (unknown), the
 * last connection's, updated. */
void pg_conn_note_commits(PGconn *conn, const struct ferry_config *cfg,
    const struct queue_config *q, const char *risk, int *commits_safe);

/* PostgreSQL's notices ("relation ... already exists, skipping") are not
 * printed by the connections this process opens from now on (ferryctl,
 * which speaks in its own words). */
void pg_conn_quiet_notices(void);

#endif
