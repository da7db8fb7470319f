/* sink_pg_int.h - what src/sink_pg.c (writing batches) and
 * src/sink_pg_schema.c (describing the database) share; private to them. */
#ifndef FERRY_SINK_PG_INT_H
#define FERRY_SINK_PG_INT_H

#include <jansson.h>
#include <libpq-fe.h>
#include <stdbool.h>
#include <stdint.h>

#include "config.h"
#include "copy.h"
#include "sink_pg.h"

struct sink_pg {
	const struct ferry_config *cfg;
	const struct queue_config *q;
	PGconn *conn;
	char *copy_sql;
	char batches[80];         /* "schema".ferry_batches, never search_path */
	struct copy_columns cols;
	int64_t last_prune_ms;
	json_t *failed;           /* job id -> error, for the batch row */
	/* the batch's rows, encoded (src/copy.c) and kept between batches */
	struct copy_buf rows;
	size_t *off, *len;        /* job i's rows: rows.data + off[i], len[i] */
	int *idx, nidx;           /* the jobs to COPY */
	bool *skip;               /* jobs a fence found written */
	int cap;                  /* room in off, len, idx, skip */
	bool fenced;              /* our own batch key was found fenced */
	bool record_failed;       /* a failure could not go into s->failed */
	int commits_safe;         /* last connection's commits wait for a
	                           * standby: 1, do not: 0, unknown: -1 */
};

/* Why the current statement failed; its class in *cls. */
struct pg_failure {
	enum copy_error_class cls;
	char msg[300];
};

/* Run sql (with up to 2 text parameters); true when it worked. On failure
 * f (when not NULL) says why; on success *out (when not NULL) holds the
 * result to PQclear. */
bool sink_pg_exec(struct sink_pg *s, const char *sql, int nparams,
    const char *p1, const char *p2, struct pg_failure *f, PGresult **out);
/* Resolve the columns and build the COPY statement; SINK_FATAL when the
 * table, a column or ferry_batches is missing. */
enum sink_status sink_pg_describe(struct sink_pg *s, char *err,
    size_t errsize);

/* At connect, with several hosts or require_sync_commit: do this server's
 * commits wait for a standby (SHOW synchronous_commit and
 * synchronous_standby_names)? SINK_OK with *risk NULL, or why not (the
 * caller warns); SINK_FATAL when require_sync_commit refuses the server;
 * SINK_UNAVAILABLE when the SHOW failed. */
enum sink_status sink_pg_commit_check(struct sink_pg *s, const char **risk,
    char *err, size_t errsize);
/* The loud warning about `risk` (from sink_pg_commit_check). */
void sink_pg_commit_warn(const struct sink_pg *s, const char *risk);

#endif
