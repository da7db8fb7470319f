/* handler_pg.c - handler = postgres behind the handler interface: the
 * sink (sink_pg.c) writes each batch in one transaction fenced by its
 * batch key, and answers in the handler's statuses. */
#include "handler.h"

#include "cache.h"
#include "scoreboard.h"
#include "sink_pg.h"

static void *
pg_open(const struct handler_host *host)
{
	return sink_pg_new(host->cfg, host->q);
}

/* A job that will not run is buried when another batch may have written
 * it (doc/design.md, R10): it carries stamps. A job refused for a reason
 * that holds every time (not JSON...) was never written: it fails at
 * once. A batch that ran before under its own key decides its jobs from
 * its row (R2, sink_pg_replay). */
static bool
pg_buries(const struct job *j, bool died)
{
	return j->nstamps > 0 && (died || j->refusal_varies);
}

static enum handler_status
pg_run(void *state, struct job *jobs, struct handler_result *results, int n,
    const char *batch_key, char *err, size_t errsize)
{
	return sink_pg_run(state, jobs, results, n, batch_key, err, errsize);
}

static enum handler_status
pg_send(void *state, struct job *jobs, struct handler_result *results,
    int n, const char *batch_key, bool *sent, char *err, size_t errsize)
{
	return sink_pg_send(state, jobs, results, n, batch_key, sent, err,
	    errsize);
}

static enum handler_status
pg_finish(void *state, struct job *jobs, struct handler_result *results,
    int n, const char *batch_key, char *err, size_t errsize)
{
	return sink_pg_finish(state, jobs, results, n, batch_key, err,
	    errsize);
}

static void
pg_prepare(void *state, struct job *jobs, struct handler_result *results,
    int n, const char *batch_key)
{
	sink_pg_prepare(state, jobs, results, n, batch_key);
}

static void
pg_committed(void *state)
{
	sink_pg_prune(state);
}

static void
pg_close(void *state)
{
	sink_pg_free(state);
}

const struct handler_ops handler_pg_ops = {
	.name = "postgres",
	.cache_mode = CACHE_ROWS,       /* a cached value is the job's rows */
	.needs_job_ids = false,         /* the sink names the jobs it fails */
	.buries = pg_buries,
	.commits = true,
	.waiting_state = SB_WAIT_POSTGRES,
	.open = pg_open,
	.run = pg_run,
	.send = pg_send,
	.finish = pg_finish,
	.prepare = pg_prepare,
	.committed = pg_committed,
	.close = pg_close,
};
