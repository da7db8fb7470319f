/* handler_noop.c - handler = noop: every valid job is done at once (a
 * queue that only counts, or a test of the queue itself). The smallest
 * handler: the model for a new one. */
#include "handler.h"

#include <stdlib.h>

#include "cache.h"
#include "scoreboard.h"

void
handler_noop_run(struct job *jobs, struct handler_result *results, int n)
{
	for (int i = 0; i < n; i++)
		if (jobs[i].invalid == NULL)
			results[i] = (struct handler_result){ HANDLER_OK, "", false };
}

/* No state: a pointer to something, never read. */
static void *
noop_open(const struct handler_host *host)
{
	static char nothing;

	(void)host;
	return &nothing;
}

static enum handler_status
noop_run(void *state, struct job *jobs, struct handler_result *results,
    int n, const char *batch_key, char *err, size_t errsize)
{
	(void)state;
	(void)batch_key;
	(void)err;
	(void)errsize;
	handler_noop_run(jobs, results, n);
	return HANDLER_DONE;
}

const struct handler_ops handler_noop_ops = {
	.name = "noop",
	.cache_mode = CACHE_EXISTS,     /* a job whose cache key is gone fails */
	.needs_job_ids = true,
	.commits = false,
	.waiting_state = SB_FREE,
	.open = noop_open,
	.run = noop_run,
	.committed = handler_nothing,
	.close = handler_nothing,
};
