/* handler_exec_ops.c - handler = exec behind the handler interface: run
 * the command on the batch (handler_exec_run), and when it crashes leaving
 * several jobs unanswered, run those again in halves until the crash is
 * pinned on single jobs: a poison job never burns its batch-mates'
 * attempts. (A timeout is not split: that would multiply the wait.) */
#include "handler.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache.h"
#include "log.h"
#include "scoreboard.h"
#include "util.h"

struct exec_ops {
	struct handler_host host;
};

static void *
exec_open(const struct handler_host *host)
{
	struct exec_ops *x = xcalloc(1, sizeof(*x));

	x->host = *host;
	return x;
}

static void
exec_close(void *state)
{
	free(state);
}

/* A run that left jobs without a result (the command crashed, exited
 * early or timed out: why, a job's message) is the handler's error, as one
 * that could not start or printed nonsense: the worker's last error,
 * counted in ferry_sink_errors_total{class="handler"}. */
static void
unanswered_error(char *err, size_t size, const char *why, int unanswered,
    int n)
{
	const char *cut = strstr(why, " without a result");
	int len = cut != NULL ? (int)(cut - why) : (int)strlen(why);

	snprintf(err, size, "%.*s: %d of %d job%s without a result, retried",
	    len, why, unanswered, n, n == 1 ? "" : "s");
}

/* Run the jobs idx[0..n) of jobs/results, splitting after a crash. */
static void
run_split(struct exec_ops *x, struct job *all_jobs,
    struct handler_result *all_results, const int *idx, int n)
{
	struct job *jobs = xmalloc(sizeof(*jobs) * (size_t)n);
	struct handler_result *res = xmalloc(sizeof(*res) * (size_t)n);
	int *again = xmalloc(sizeof(*again) * (size_t)n), nagain = 0;
	int nanswerless = 0, first = 0;
	char err[1024] = "";

	for (int i = 0; i < n; i++) {
		jobs[i] = all_jobs[idx[i]];     /* shallow: the caller owns them */
		res[i] = all_results[idx[i]];
	}
	int rc = handler_exec_run(x->host.q, jobs, res, n, err, sizeof(err));
	for (int i = 0; i < n; i++) {
		all_results[idx[i]] = res[i];
		if (res[i].unanswered && nanswerless++ == 0)
			first = i;
		if (rc == HANDLER_EXEC_CRASHED && res[i].unanswered)
			again[nagain++] = idx[i];
	}
	if (err[0] == '\0' && nanswerless > 0)
		unanswered_error(err, sizeof(err), res[first].message,
		    nanswerless, n);
	if (err[0] != '\0')
		x->host.warn(x->host.arg, err);
	if (nagain > 1) {
		log_info("queue %s: handler crashed with %d jobs unanswered: "
		    "splitting them to find the culprit", x->host.q->name, nagain);
		run_split(x, all_jobs, all_results, again, nagain / 2);
		run_split(x, all_jobs, all_results, again + nagain / 2,
		    nagain - nagain / 2);
	}
	free(jobs);
	free(res);
	free(again);
}

/* Always HANDLER_DONE: a command that cannot start retries its jobs. */
static enum handler_status
exec_run(void *state, struct job *jobs, struct handler_result *results,
    int n, const char *batch_key, char *err, size_t errsize)
{
	int *all = xmalloc(sizeof(*all) * (size_t)n);

	(void)batch_key;
	(void)err;
	(void)errsize;
	for (int i = 0; i < n; i++)
		all[i] = i;
	run_split(state, jobs, results, all, n);
	free(all);
	return HANDLER_DONE;
}

const struct handler_ops handler_exec_ops = {
	.name = "exec",
	.cache_mode = CACHE_JSON,       /* the value goes to the command */
	.needs_job_ids = true,
	.commits = false,
	.waiting_state = SB_FREE,
	.open = exec_open,
	.run = exec_run,
	.committed = handler_nothing,
	.close = exec_close,
};
