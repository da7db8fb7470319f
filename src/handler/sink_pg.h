/* sink_pg.h - the PostgreSQL sink: a batch of jobs becomes rows COPYed into
 * the queue's table in one transaction together with one ferry_batches row
 * under the batch's key, which makes redelivery harmless (doc/design.md,
 * 4.1). Only ferryd links it: the checks ferryctl init-db shares are in
 * src/pg_target.h. */
#ifndef FERRY_SINK_PG_H
#define FERRY_SINK_PG_H

#include <stddef.h>

#include "config.h"
#include "handler.h"
#include "job.h"

struct sink_pg;

struct sink_pg *sink_pg_new(const struct ferry_config *cfg,
    const struct queue_config *q);
void sink_pg_free(struct sink_pg *s);

/* Write the batch whose key is batch_key. Jobs with j->invalid are left as
 * they are. A job with stamps is written only when every batch it names
 * is fenced, never committed (doc/design.md, I3); a job to bury (j->bury)
 * is never written: it fails ("worker died while processing") unless one
 * of its batches committed it. The status is the handler's (handler.h):
 * HANDLER_DONE when every job has its result, HANDLER_WAIT (an outage, or
 * a conflict sent again under the same key), HANDLER_HANDED_BACK (another
 * worker fenced this batch's key), HANDLER_FATAL (a missing table...);
 * err says why on all but HANDLER_DONE. */
enum handler_status sink_pg_run(struct sink_pg *s, struct job *jobs,
    struct handler_result *results, int n, const char *batch_key,
    char *err, size_t errsize);

/* sink_pg_run in two halves, so that the worker can fetch and prepare its
 * next batch while PostgreSQL writes this one: a batch that goes in one
 * query string (no recovered jobs, every row encoded) is left in flight
 * once its rows are sent (HANDLER_DONE with *sent, nothing decided yet),
 * and sink_pg_finish (with the same arguments) reads the rest and gives
 * what sink_pg_run would have. Nothing else may use the sink in between
 * but sink_pg_prepare. Any other batch is written whole by sink_pg_send
 * (*sent false), as by sink_pg_run. */
enum handler_status sink_pg_send(struct sink_pg *s, struct job *jobs,
    struct handler_result *results, int n, const char *batch_key,
    bool *sent, char *err, size_t errsize);
enum handler_status sink_pg_finish(struct sink_pg *s, struct job *jobs,
    struct handler_result *results, int n, const char *batch_key,
    char *err, size_t errsize);

/* While a batch is in flight: encode the rows of the next (batch_key)
 * into a second buffer, which the next sink_pg_send or sink_pg_run of
 * that key uses instead of encoding them then; any other key drops it.
 * It sets the results of jobs whose rows cannot be encoded, as the send
 * would. Nothing is sent; a batch with recovered jobs, or a sink not yet
 * connected, is left to its send. */
void sink_pg_prepare(struct sink_pg *s, struct job *jobs,
    struct handler_result *results, int n, const char *batch_key);

/* Delete ferry_batches rows older than done_retention (best effort). */
void sink_pg_prune(struct sink_pg *s);

#endif
