/* sink_pg.h - the PostgreSQL sink: a batch of jobs becomes rows COPYed into
 * the queue's table in one transaction together with one ferry_batches row
 * under the batch's key, which makes redelivery harmless (DESIGN.md,
 * "PostgreSQL sink"). Only ferryd links it: the checks ferryctl init-db
 * shares are in src/pg_target.h. */
#ifndef FERRY_SINK_PG_H
#define FERRY_SINK_PG_H

#include <stddef.h>

#include "config.h"
#include "handler.h"
#include "job.h"

enum sink_status {
	SINK_OK,            /* every job has its result */
	SINK_UNAVAILABLE,   /* nothing decided: keep the batch, retry later */
	SINK_FATAL,         /* cannot ever work (missing table...): stop */
	SINK_HANDED_BACK,   /* another worker fenced this batch's key: this
	                     * worker was handed back as dead; it must settle
	                     * nothing and stop */
};

struct sink_pg;

struct sink_pg *sink_pg_new(const struct ferry_config *cfg,
    const struct queue_config *q);
void sink_pg_free(struct sink_pg *s);

/* Write the batch whose key is batch_key. Jobs with j->invalid are left as
 * they are. A job with stamps is written only when every batch it names
 * is fenced, never committed (DESIGN.md); a job to bury (j->bury) is never
 * written: it fails ("worker died while processing") unless one of its
 * batches committed it. On SINK_UNAVAILABLE or SINK_FATAL err says why. */
enum sink_status sink_pg_run(struct sink_pg *s, struct job *jobs,
    struct handler_result *results, int n, const char *batch_key,
    char *err, size_t errsize);

/* Delete ferry_batches rows older than done_retention (best effort). */
void sink_pg_prune(struct sink_pg *s);

#endif
