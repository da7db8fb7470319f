/* handler.h - what a worker does with a batch. A handler receives the
 * batch's jobs and sets an outcome for each; the worker then settles the
 * whole batch in Redis in one step. noop and exec live here; the PostgreSQL
 * sink plugs in behind the same interface. */
#ifndef FERRY_HANDLER_H
#define FERRY_HANDLER_H

#include <stdbool.h>
#include <stddef.h>

#include "config.h"
#include "job.h"

enum handler_outcome {
	HANDLER_PENDING = 0,    /* no result yet */
	HANDLER_OK,             /* done: remove it */
	HANDLER_RETRY,          /* failed; try again after a backoff */
	HANDLER_FAIL,           /* failed for good: dead-letter now */
};

struct handler_result {
	int outcome;            /* enum handler_outcome */
	char message[256];      /* why, for retry and fail */
	bool unanswered;        /* retry because the handler gave no result */
};

/* Run `command` (argv split on blanks, no shell) once for the batch: each
 * valid job is one line on its stdin (job_handler_line), and the program
 * answers one line per job on stdout: "ok ID", "retry ID message" or
 * "fail ID message", ID plain (no blanks) or as a JSON string ("a b"), so
 * that any id can be answered. Jobs with j->invalid set are skipped (their result
 * stays as the caller set it). After handler_timeout_ms the program is
 * killed. Jobs without a result line end as HANDLER_RETRY with a message
 * saying why (no result, exit status N, killed after the timeout...).
 * Returns 0; HANDLER_EXEC_CRASHED when the program died (signal or
 * non-zero exit) leaving jobs unanswered, so the caller can split the batch
 * to isolate a poison job; or -1 when the program could not be started at
 * all (the message is in err; every job is then HANDLER_RETRY). err may
 * hold a warning even when 0 is returned: how many result lines settled
 * no job, and the first few of them (cut, made printable) with why. */
#define HANDLER_EXEC_CRASHED 1
int handler_exec_run(const struct queue_config *q, struct job *jobs,
    struct handler_result *results, int n, char *err, size_t errsize);

/* The environment of an exec handler (handler_env.c): PATH, LANG,
 * LC_ALL and TZ as ferryd has them, FERRY_QUEUE, and the queue's
 * handler_env: "NAME, NAME=VALUE, ..." (a bare NAME passes ferryd's value
 * on). Nothing else of ferryd's environment. */
#define HANDLER_ENV_MAX 32          /* handler_env items */
#define HANDLER_ENV_ITEM_MAX 190
/* NULL when spec is a valid handler_env value, else why not (in buf). */
const char *handler_env_check(const char *spec, char *buf, size_t size);
/* A NULL-terminated environment for execve; free with handler_env_free. */
char **handler_env_build(const struct queue_config *q);
void handler_env_free(char **env);

/* handler = noop: every valid job is done. */
void handler_noop_run(struct job *jobs, struct handler_result *results, int n);

#endif
