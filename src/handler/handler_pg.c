/* handler_pg.c - handler = postgres behind the handler interface: the
 * sink (sink_pg.c) writes each batch in one transaction fenced by its
 * batch key; its statuses map onto the handler's. */
#include "handler.h"

#include "cache.h"
#include "scoreboard.h"
#include "sink_pg.h"

static void *
pg_open(const struct handler_host *host)
{
	return sink_pg_new(host->cfg, host->q);
}

static enum handler_status
pg_status(enum sink_status st)
{
	switch (st) {
	case SINK_OK:
	case SINK_SENT:
		return HANDLER_DONE;
	case SINK_UNAVAILABLE:
		return HANDLER_WAIT;
	case SINK_HANDED_BACK:
		return HANDLER_HANDED_BACK;
	case SINK_FATAL:
		break;
	}
	return HANDLER_FATAL;
}

static enum handler_status
pg_run(void *state, struct job *jobs, struct handler_result *results, int n,
    const char *batch_key, char *err, size_t errsize)
{
	return pg_status(sink_pg_run(state, jobs, results, n, batch_key, err,
	    errsize));
}

static enum handler_status
pg_send(void *state, struct job *jobs, struct handler_result *results,
    int n, const char *batch_key, bool *sent, char *err, size_t errsize)
{
	enum sink_status st = sink_pg_send(state, jobs, results, n, batch_key,
	    true, err, errsize);

	*sent = st == SINK_SENT;
	return pg_status(st);
}

static enum handler_status
pg_finish(void *state, struct job *jobs, struct handler_result *results,
    int n, const char *batch_key, char *err, size_t errsize)
{
	return pg_status(sink_pg_finish(state, jobs, results, n, batch_key, err,
	    errsize));
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
	.checks_fence = true,
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
