/* pg_target.h - what the PostgreSQL sink writes into: a target is one
 * table a queue writes (its quoted name, its columns resolved against the
 * table, the SQL generated for them; a queue with tables = has one per
 * table, in order, each with its own staging table), and ferry_batches, the table of one
 * row per batch that makes redelivery harmless (doc/design.md, 4.1).
 * Also the start checks of ferryd and `ferryctl init-db`. */
#ifndef FERRY_PG_TARGET_H
#define FERRY_PG_TARGET_H

#include <jansson.h>
#include <libpq-fe.h>
#include <stdbool.h>
#include <stddef.h>

#include "config.h"
#include "copy.h"
#include "pg_conn.h"

/* How a target's rows go in ([queue] mode). */
enum pg_target_mode {
	PG_TARGET_INSERT,        /* COPY every row into the table */
	PG_TARGET_UPSERT,        /* COPY into a staging table, then insert or
	                          * update by key from it (pg_target_upsert.c) */
	PG_TARGET_UPDATE,        /* the same, update only rows that exist */
};

/* Modes that COPY into the staging table, by key (upsert, update): each
 * row there carries its job's op and index (pg_target_row.c). */
#define PG_TARGET_BY_KEY(t) ((t)->mode != PG_TARGET_INSERT)

struct pg_target {
	const struct queue_config *q;
	enum pg_target_mode mode;
	char *quoted;            /* the table, schema and name quoted */
	char stage[24];          /* its staging table in pg_temp: ferry_stage
	                          * (the first table), ferry_stage_<i> */
	char *clear_sql;         /* empties the staging table inside a
	                          * transaction (between the parts the slow
	                          * path applies); ON COMMIT DELETE ROWS
	                          * empties it at each commit */
	struct copy_columns cols;  /* what feeds each column */
	char *copy_sql;          /* COPY quoted (columns) FROM STDIN (upsert:
	                          * into the staging table); NULL until
	                          * described */
	/* upsert and update only, else NULL */
	char *stage_sql;         /* creates the staging table: once per
	                          * connection (pg_target_prepare) */
	char *delete_sql;        /* the staged deletes (NULL: op_member "") */
	char *apply_sql;         /* the staged rows into the table, after
	                          * delete_sql (NULL with missing_sql: that
	                          * one applies them) */
	/* update with missing = dead only, else NULL: the update itself, */
	char *missing_sql;       /* returning rows (job index, key text) of
	                          * every staged update that found no row */
	char *guard_sql;         /* it, failing (22000) when it gave a row:
	                          * the one-query path stops there */
	char *recheck_sql;       /* with version: of the jobs it named ($1,
	                          * '{i,j}'), the rows still missing in a
	                          * new snapshot (the others are stale), as
	                          * missing_sql gives them */
};

/* A target for table q (a queue's one table, or one of its tables,
 * config_find_table), number i of the queue's tables, not yet described. */
void pg_target_init(struct pg_target *t, const struct queue_config *q,
    int i);
/* The tables queue q writes: 1, or the number of its tables. */
int pg_target_count(const struct queue_config *q);
/* The config of table i of queue q (q itself when it has one table). */
const struct queue_config *pg_target_config(const struct ferry_config *cfg,
    const struct queue_config *q, int i);
void pg_target_free(struct pg_target *t);
/* Free the generated SQL (to generate it again), all NULL after. */
void pg_target_free_sql(struct pg_target *t);
/* Resolve the columns against the table and generate the SQL. PG_FATAL
 * when the table or a column is missing, PG_UNAVAILABLE when the query
 * failed for another reason (the connection died, a timeout). */
enum pg_status pg_target_describe(struct pg_target *t, PGconn *conn,
    char *err, size_t errsize);

/* The upsert part of pg_target_describe: key, update_columns and version
 * against the columns written, key against the table's unique indexes;
 * the staging table's SQL. table_cols: the table's column names (column
 * 0 of each row). */
enum pg_status pg_target_upsert_describe(struct pg_target *t, PGconn *conn,
    PGresult *table_cols, char *err, size_t errsize);
/* A job's op (upsert, update): *del when its op_member member is
 * "delete"; 0, or -1 with why when the member is another value (a job
 * without the member, or with null, "upsert", or for update "update",
 * writes its rows). */
int pg_target_job_op(const struct pg_target *t, const char *doc, size_t len,
    bool *del, char *why, size_t whysize);
/* Append the staging columns' values (the op, job) to each row encoded
 * into rows since from. */
void pg_target_row_suffix(struct copy_buf *rows, size_t from, bool del,
    int job);

/* Several tables (tables =): the text of the document's top-level
 * member `name` into buf: 1, or 0 when it has none (or null), -1 when it
 * is not a string that fits. */
int pg_target_member_text(const char *name, const char *doc, size_t len,
    char *buf, size_t size);
/* fn(ctx, member name, value's bytes) for each member of the document's
 * "data" object (one array of rows per table), or of the document itself
 * when it has no "data" (a bare document, or a cached value: its rows):
 * 0; -1 when that is not an object, -2 when fn returned -1. */
int pg_target_data_members(const char *doc, size_t len,
    int (*fn)(void *ctx, const char *name, const char *p, size_t n),
    void *ctx);

/* What a new connection needs before the target's statements run: the
 * staging table of upsert (nothing for insert). PG_FATAL when it cannot be
 * created (no TEMP privilege), PG_UNAVAILABLE when the server failed. */
enum pg_status pg_target_prepare(const struct pg_target *t, PGconn *conn,
    char *err, size_t errsize);

/* ferry_batches where [ferryd] pg_batches_schema says (never by
 * search_path), and the statements on it; each takes the batch key as $1. */
struct pg_batches {
	char name[80];           /* "schema".ferry_batches */
	char insert_sql[160];    /* the batch's row, committed */
	char fence_sql[160];     /* a fence row, unless the key has a row */
	char state_sql[160];     /* the key's state and failed record */
	char set_failed_sql[160];  /* $2: the failed record */
};
void pg_target_batches_init(struct pg_batches *b,
    const struct ferry_config *cfg);
/* Batch key's row: *state "committed" or "fenced"; *failed its record of
 * failed jobs (job digest -> message; NULL: none), to json_decref. False
 * with f when the query failed, there is no row (read only after an insert
 * of the key conflicted or fenced it: it was deleted meanwhile), or the
 * record does not parse (f unavailable: the batch must be kept, never
 * retried). */
bool pg_target_batches_read(PGconn *conn, const struct pg_batches *b,
    const char *key, char *state, size_t statesize, json_t **failed,
    struct pg_failure *f);
/* PG_FATAL when ferry_batches does not exist. */
enum pg_status pg_target_batches_check(PGconn *conn,
    const struct pg_batches *b, char *err, size_t errsize);

/* The statements of a batch's targets t[0..nt), in order: each upsert
 * and update target's COPY into its staging table; when the batch
 * `deletes`, their delete_sql, the last table first (children before
 * parents); then each table in order (parents first): an insert target's
 * COPY into the table, or apply_sql (and guard_sql when `guards`: the
 * one-query path). copy(i): target i's COPY; sql(i, text): one of its
 * statements. */
struct pg_target_stmt_fn {
	void (*copy)(struct pg_target_stmt_fn *fn, int i);
	void (*sql)(struct pg_target_stmt_fn *fn, int i, const char *sql);
};
void pg_target_statements(const struct pg_target *t, int nt, bool deletes,
    bool guards, struct pg_target_stmt_fn *fn);

/* A batch in one simple query, which the server abandons at the first
 * error: BEGIN; the batch's row under key; the statements of targets
 * t[0..nt) (pg_target_statements); COMMIT. copies[k] (room for nt): the
 * target of the query's k-th COPY, *ncopies of them. To free; NULL when libpq's escaping
 * refused the key. */
char *pg_target_fast_sql(const struct pg_target *t, int nt,
    const struct pg_batches *b, PGconn *conn, const char *key,
    bool deletes, int *copies, int *ncopies);

/* ferryctl init-db (create set) and ferryd's start check: connect, check
 * the commit settings (only without create), create ferry_batches (create
 * set), describe queue q's target and check ferry_batches. *existed (when
 * not NULL): whether ferry_batches existed before, -1 unknown. */
enum pg_status pg_target_check(const struct ferry_config *cfg,
    const struct queue_config *q, bool create, int *existed, char *err,
    size_t errsize);

#endif
