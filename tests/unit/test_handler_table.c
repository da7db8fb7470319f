/* test_handler_table.c - every handler the configuration can name has its
 * ops, all of them set (handler_for, handler.c); noop's run marks every
 * valid job done; exec's run splits a crashed batch itself. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cache.h"
#include "config.h"
#include "handler.h"
#include "scoreboard.h"

Test(handler_table, every_config_handler_has_all_ops)
{
	int h;

	for (h = 0; strcmp(config_handler_name(h), "unknown") != 0; h++) {
		const struct handler_ops *ops = handler_for(h);
		cr_assert_not_null(ops, "handler %s has no ops",
		    config_handler_name(h));
		cr_assert_str_eq(ops->name, config_handler_name(h));
		cr_assert_not_null(ops->open, "%s: open", ops->name);
		cr_assert_not_null(ops->run, "%s: run", ops->name);
		cr_assert_not_null(ops->committed, "%s: committed", ops->name);
		cr_assert_not_null(ops->close, "%s: close", ops->name);
		cr_assert(ops->cache_mode == CACHE_EXISTS ||
		    ops->cache_mode == CACHE_JSON || ops->cache_mode == CACHE_ROWS,
		    "%s: cache_mode %d", ops->name, ops->cache_mode);
		cr_assert(ops->waiting_state == SB_FREE ||
		    (ops->waiting_state > SB_BUSY &&
		    ops->waiting_state < SB_STATES), "%s: waiting_state %d",
		    ops->name, ops->waiting_state);
	}
	cr_assert_geq(h, 3, "at least noop, exec, postgres");
	cr_assert_null(handler_for(-1));
	cr_assert_null(handler_for(h));
	cr_assert_eq(handler_for(CONFIG_HANDLER_POSTGRES)->waiting_state,
	    SB_WAIT_POSTGRES);
}

static int warnings;
static char last_warning[256];

static void
count_warning(void *arg, const char *msg)
{
	(void)arg;
	snprintf(last_warning, sizeof(last_warning), "%s", msg);
	warnings++;
}

static struct ferry_config cfg;
static struct handler_host host = { .cfg = &cfg, .warn = count_warning };

/* Open the ops of handler for q, warnings counted from 0. */
static void *
open_handler(const struct handler_ops *ops, const struct queue_config *q)
{
	host.q = q;
	warnings = 0;
	void *st = ops->open(&host);
	cr_assert_not_null(st, "%s: open", ops->name);
	return st;
}

/* jobs[0..n): ids a, b, c...; the one at `invalid` (if any) is invalid
 * with a result the worker preset */
static void
make_jobs(struct job *jobs, struct handler_result *res, int n, int invalid)
{
	static const char *const raw = "{\"k\":1}";

	memset(jobs, 0, sizeof(*jobs) * (size_t)n);
	memset(res, 0, sizeof(*res) * (size_t)n);
	for (int i = 0; i < n; i++) {
		jobs[i].el = jobs[i].raw = raw;
		jobs[i].el_len = jobs[i].raw_len = strlen(raw);
		snprintf(jobs[i].id, sizeof(jobs[i].id), "%c", 'a' + i);
	}
	if (invalid >= 0) {
		jobs[invalid].invalid = "empty job";
		res[invalid] = (struct handler_result){ HANDLER_FAIL, "preset",
		    false };
	}
}

Test(handler_table, noop_run_marks_valid_jobs_done)
{
	const struct handler_ops *ops = handler_for(CONFIG_HANDLER_NOOP);
	struct queue_config q = { .name = "q", .handler = CONFIG_HANDLER_NOOP };
	struct job jobs[4];
	struct handler_result res[4];
	char err[128] = "";

	make_jobs(jobs, res, 4, 2);
	void *st = open_handler(ops, &q);
	cr_assert_eq(ops->run(st, jobs, res, 4, "w:1", err, sizeof(err)),
	    HANDLER_DONE);
	for (int i = 0; i < 4; i++) {
		cr_assert_eq(res[i].outcome, i == 2 ? HANDLER_FAIL : HANDLER_OK,
		    "job %d: %d", i, res[i].outcome);
		cr_assert_str_eq(res[i].message, i == 2 ? "preset" : "");
	}
	ops->committed(st);
	ops->close(st);
	cr_assert_eq(warnings, 0);
}

/* A command that answers nothing, prints a line of no job and exits 1:
 * the batch of 4 is run whole, then in halves, then one by one (1 + 2 + 4
 * runs, each warning of its unknown line), every job retried. */
Test(handler_table, exec_run_splits_a_crash_down_to_single_jobs)
{
	const struct handler_ops *ops = handler_for(CONFIG_HANDLER_EXEC);
	char path[] = "/tmp/ferry-ops-XXXXXX", cmd[64];
	struct queue_config q = { .name = "q", .handler = CONFIG_HANDLER_EXEC,
	    .handler_timeout_ms = 10000 };
	struct job jobs[4];
	struct handler_result res[4];
	char err[128] = "";

	signal(SIGPIPE, SIG_IGN);       /* as the worker does */
	int fd = mkstemp(path);
	cr_assert_geq(fd, 0);
	const char *body = "echo bogus\nexit 1\n";
	cr_assert_eq(write(fd, body, strlen(body)), (ssize_t)strlen(body));
	close(fd);
	snprintf(cmd, sizeof(cmd), "/bin/sh %s", path);
	q.command = cmd;
	make_jobs(jobs, res, 4, -1);
	void *st = open_handler(ops, &q);
	cr_assert_eq(ops->run(st, jobs, res, 4, "w:1", err, sizeof(err)),
	    HANDLER_DONE);
	ops->close(st);
	unlink(path);
	cr_assert_eq(warnings, 7);
	for (int i = 0; i < 4; i++) {
		cr_assert_eq(res[i].outcome, HANDLER_RETRY);
		cr_assert_str_eq(res[i].message, "handler exited with status 1 "
		    "without a result for this job");
	}
}

/* A command that dies silently (kill -9 itself, no line printed) leaves
 * jobs without a result: each run is the handler's error, warned (the
 * worker's last error, a sink error of class handler), 1 + 2 runs. */
Test(handler_table, exec_run_warns_of_a_silent_crash)
{
	const struct handler_ops *ops = handler_for(CONFIG_HANDLER_EXEC);
	struct queue_config q = { .name = "q", .handler = CONFIG_HANDLER_EXEC,
	    .handler_timeout_ms = 10000, .command = "/bin/sh -c \"kill -9 $$\"" };
	struct job jobs[2];
	struct handler_result res[2];
	char err[128] = "";

	signal(SIGPIPE, SIG_IGN);
	make_jobs(jobs, res, 2, -1);
	void *st = open_handler(ops, &q);
	cr_assert_eq(ops->run(st, jobs, res, 2, "w:1", err, sizeof(err)),
	    HANDLER_DONE);
	ops->close(st);
	cr_assert_eq(warnings, 3);
	cr_assert_str_eq(last_warning, "handler killed by signal 9 (SIGKILL): "
	    "1 of 1 job without a result, retried");
	for (int i = 0; i < 2; i++)
		cr_assert_eq(res[i].outcome, HANDLER_RETRY);
	cr_assert_eq(scoreboard_error_class(last_warning), SB_ERR_HANDLER);
}
