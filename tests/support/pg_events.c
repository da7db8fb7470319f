/* pg_events.c - the "events" fixture of test_pg and test_fence. */
#include "pg_events.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>

void
pe_setup(struct ferryd *d, const char *ferryd_extra, const char *queue_extra)
{
	pe_setup_redis(d, NULL, ferryd_extra, queue_extra);
}

void
pe_setup_redis(struct ferryd *d, const char *const *redis_args,
    const char *ferryd_extra, const char *queue_extra)
{
	char global[512], queues[512];

	h_setup_redis(d, NULL, "", redis_args);
	snprintf(global, sizeof(global), "%s%s", h_pg_start(d),
	    ferryd_extra ? ferryd_extra : "");
	snprintf(queues, sizeof(queues), "[queue q]\nhandler = postgres\n"
	    "table = events\ncolumns = n, payload\n%s", queue_extra);
	h_config(d, global, queues);
	h_pg_exec(d, PE_EVENTS_TABLE);
}

void
pe_assert_rows_once(struct ferryd *d, int n)
{
	cr_assert_eq(h_pg_int(d, "SELECT count(*) FROM events"), n);
	cr_assert_eq(h_pg_int(d, "SELECT count(DISTINCT n) FROM events"), n,
	    "some job was written twice");
	h_assert_queue_empty(d, "q");
	cr_assert_eq(h_redis_int(d, "LLEN ferry:{q}:dead"), 0);
}

int
pe_ctl(struct ferryd *d, const char *cmd, char **out)
{
	const char *ctl = getenv("FERRYCTL");
	char path[400], line[1200];

	snprintf(path, sizeof(path), "%s/ctl.out", d->dir);
	snprintf(line, sizeof(line), "%s -c %s %s > %s 2>&1",
	    ctl ? ctl : TEST_BUILDDIR "/ferryctl", d->config, cmd, path);
	int status = system(line);
	if (out != NULL)
		*out = h_read_file(path);
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

void
pe_arm_exit_after_commit(struct ferryd *d, char *hook, size_t hook_size,
    char *env, size_t env_size, const char *pipeline, int max_recoveries)
{
	char queue[200];

	snprintf(queue, sizeof(queue), "workers = 1\nbatch_size = 100\n"
	    "pipeline = %s\nmax_recoveries = %d\nmax_job_bytes = 1024\n"
	    "cache_key_prefixes = app:a:\n", pipeline, max_recoveries);
	pe_setup(d, NULL, queue);
	cr_assert_eq(pe_ctl(d, "init-db", NULL), 0);
	snprintf(hook, hook_size, "%s/exit-after-commit", d->dir);
	h_write_file(hook, "once\n");
	snprintf(env, env_size, "FERRY_TEST_EXIT_AFTER_COMMIT=%s", hook);
	putenv(env);
}
