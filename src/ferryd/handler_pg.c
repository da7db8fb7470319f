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
pg_run(void *state, struct job *jobs, struct handler_result *results, int n,
    const char *batch_key, char *err, size_t errsize)
{
	switch (sink_pg_run(state, jobs, results, n, batch_key, err, errsize)) {
	case SINK_OK:
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
	.committed = pg_committed,
	.close = pg_close,
};
