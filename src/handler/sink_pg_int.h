/* sink_pg_int.h - the PostgreSQL sink's state and the parts its two
 * paths share: src/handler/sink_pg.c (connection, the one-query path,
 * replays), src/handler/sink_pg_encode.c (the rows, the record of failed
 * jobs), src/handler/sink_pg_fence.c (recovered jobs' fences) and
 * src/handler/sink_pg_slow.c (statement by statement: the COPY under
 * savepoints split until the refused rows are isolated, the updates that
 * found no row). Only these four files include it. */
#ifndef FERRY_SINK_PG_INT_H
#define FERRY_SINK_PG_INT_H

#include <jansson.h>
#include <libpq-fe.h>
#include <stdbool.h>
#include <stdint.h>

#include "copy.h"
#include "pg_conn.h"
#include "pg_target.h"
#include "sink_pg.h"

/* The batch's rows for one table, encoded (src/format/copy.c) and kept between
 * batches. */
struct sink_pg_rows {
	struct copy_buf rows;
	size_t *off, *len;        /* job i's rows: rows.data + off[i], len[i] */
};

/* Where the replies of the one-query path are (sink_pg.c fast_results). */
struct sink_pg_fast {
	int stage, failed_stage, ncopy;
	bool rows_sent;
	struct pg_failure f;      /* the first statement that failed */
};

/* One batch's rows, encoded: the batch being written (sink_pg.b.enc), or
 * the next one, encoded while the one before is in flight (sink_pg.ahead,
 * sink_pg_prepare) and swapped in by its send. */
struct sink_pg_encoded {
	struct sink_pg_rows *parts; /* the rows for each target */
	json_t *failed;           /* job id -> error, for the batch row */
	int *idx, nidx;           /* the jobs to COPY */
	bool *skip;               /* jobs the fences decided (written
	                           * already, or dead) */
	int cap;                  /* room in off, len, idx, skip */
	bool deletes;             /* a job encoded deletes (op_member) */
	bool record_failed;       /* a failure could not go into failed */
};

/* What the sink keeps of the batch it is writing: set again by each send,
 * but the count of conflicts, which lasts while the same key comes back. */
struct sink_pg_batch {
	struct sink_pg_encoded enc; /* its rows */
	bool fenced;              /* its own batch key was found fenced */
	char conflict_key[256];   /* the batch a conflict (40001, 40P01) */
	int conflicts;            /* sent again in place, how many times */
	bool decided;             /* enc.skip: jobs the fences decided, which
	                           * stay decided if the batch fails */
	bool in_flight;           /* sink_pg_send left the COMMIT's reply
	                           * to sink_pg_finish */
	struct sink_pg_fast fast;
};

/* The sink of one worker: its connection and what lasts across batches,
 * the batch being written, and the next one encoded ahead. */
struct sink_pg {
	const struct ferry_config *cfg;
	const struct queue_config *q;
	PGconn *conn;
	struct pg_target *targets;  /* the queue's tables, parents first */
	int ntargets;
	bool routed;               /* tables =: a job names its tables (even
	                           * when the list has one), not table = */
	int *copies, ncopies;     /* the fast query's COPYs: their targets */
	bool by_key;              /* a target is upsert or update */
	struct pg_batches batches;
	int64_t last_prune_ms;
	int commits_safe;         /* last connection's commits wait for a
	                           * standby: 1, do not: 0, unknown: -1 */
	struct sink_pg_batch b;       /* the batch being written */
	struct sink_pg_encoded ahead; /* the next, when ahead_key is set */
	char ahead_key[128];      /* its batch key ("": none) */
};

/* A statement without parameters or rows. */
bool sink_pg_sql(struct sink_pg *s, const char *sql, struct pg_failure *f);
/* r's outcome and message (cut short at a character boundary). */
void sink_pg_set_result(struct handler_result *r, int outcome,
    const char *msg);
/* Name job j's failure in the batch row's record; -1 when it cannot. */
int sink_pg_record_failure(struct sink_pg *s, struct job *j,
    const char *msg);
/* The member of a batch's record that says it names jobs by digest: no
 * digest or job id is "" (a job without an id is named by its digest). */
#define SINK_PG_BY_DIGEST ""
/* Why a batch's record (NULL: none) says job j failed; NULL: it did not. */
json_t *sink_pg_recorded(json_t *failed, struct job *j);
/* Job j's result res from the record of committed batch key: true when
 * written (the record does not name it), else failed with its reason. */
bool sink_pg_record_result(json_t *failed, const char *key, struct job *j,
    struct handler_result *res);
/* Encode the rows of every job to write into s->b.enc (its idx lists them);
 * skip: jobs a fence found written already (NULL: none). */
void sink_pg_encode(struct sink_pg *s, struct job *jobs,
    struct handler_result *res, int n, const bool *skip);
/* Send the rows of jobs idx[0..n) for target t as COPY data. */
bool sink_pg_put_rows(struct sink_pg *s, int t, const int *idx, int n);
/* The batch's row under key did not go in (f: why, not 23505), or BEGIN
 * failed: f becomes an outage (the batch is kept, no attempt spent). */
void sink_pg_row_failed(const char *key, struct pg_failure *f);
/* The batch row under key exists: results from its record (or fenced). */
bool sink_pg_replay(struct sink_pg *s, const char *key, struct job *jobs,
    struct handler_result *res, int n, struct pg_failure *f);
/* Recovered jobs (stamps, bury) checked against their batches, in a
 * transaction of its own (sink_pg_fence.c): s->b.enc.skip[i] for each job
 * decided there (res[i] done or dead), s->b.decided. False with f (an
 * outage) when the fences could not go in. */
bool sink_pg_fence(struct sink_pg *s, struct job *jobs,
    struct handler_result *res, int n, struct pg_failure *f);
/* The batch statement by statement (sink_pg_slow.c). */
bool sink_pg_write_slow(struct sink_pg *s, struct job *jobs,
    struct handler_result *res, int n, const char *key, struct pg_failure *f);

#endif
