/* handler.h - what a worker does with a batch. A handler receives the
 * batch's jobs and sets an outcome for each; the worker then settles the
 * whole batch in Redis in one step. Every handler (noop, exec, postgres)
 * is one struct handler_ops, and the worker (consumer.c) knows only that
 * interface: adding a handler is one file with its ops (handler_noop.c is
 * the smallest) plus one row in handler_for's table (handler.c), beside
 * its name in the configuration (enum config_handler, config_keys.c). */
#ifndef FERRY_HANDLER_H
#define FERRY_HANDLER_H

#include <stdbool.h>
#include <stddef.h>

#include "config.h"
#include "job.h"

/* What one run of a batch came to, for every handler. */
enum handler_status {
	HANDLER_DONE,           /* every job has its result: settle them */
	HANDLER_WAIT,           /* an outage (err says which): nothing was
	                         * decided; the batch stays held in Redis and
	                         * runs again after a backoff, no attempt spent */
	HANDLER_HANDED_BACK,    /* the jobs are another worker's now (this one
	                         * was handed back as dead): settle nothing,
	                         * stop */
	HANDLER_FATAL,          /* this worker cannot go on (err says why):
	                         * it exits FERRY_EXIT_FATAL, and its master
	                         * tries again after restart_backoff_max */
};

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

/* handler = noop: every valid job is done. */
void handler_noop_run(struct job *jobs, struct handler_result *results, int n);

/* What the worker lends its handler when it opens it. */
struct handler_host {
	const struct ferry_config *cfg;
	const struct queue_config *q;
	/* a warning while a batch runs (the exec handler's unknown lines, a
	 * crash): logged and shown as the worker's last error; may be called
	 * several times per run */
	void (*warn)(void *arg, const char *msg);
	void *arg;
};

struct handler_ops {
	const char *name;       /* as in handler = NAME; also what is "reachable
	                         * again" after HANDLER_WAIT */
	/* what the worker prepares of each job before run: */
	int cache_mode;         /* enum cache_mode (cache.h): what of a job's
	                         * cache key it reads */
	bool needs_job_ids;     /* every job's id computed (job_id); else only
	                         * those the handler fails are named */
	bool commits;           /* run commits the batch elsewhere before the
	                         * Redis ack (where the test hook
	                         * exit_after_commit fires) */
	int waiting_state;      /* SB_* (scoreboard.h) shown while run answers
	                         * HANDLER_WAIT, untimed; SB_FREE when it never
	                         * does */

	/* Optional (NULL: such jobs fail at once): whether a job that will
	 * not run may have been written by an earlier batch, so that it must
	 * be buried (j->bury: run fails it only once none of its batches
	 * committed it). Asked of a job refused (j->invalid set) and of one
	 * recovered past max_recoveries (died: j->invalid still NULL). */
	bool (*buries)(const struct job *j, bool died);
	/* Once per worker process; never fails (connections are made by run,
	 * which may then answer HANDLER_WAIT). host is copied if kept. */
	void *(*open)(const struct handler_host *host);
	/* Run the batch whose key is batch_key (unique per batch, the same
	 * when a held batch is resumed): set results[i] for every job without
	 * j->invalid (those keep the result the worker set, unless run finds
	 * that this batch_key committed before: then it may set every job's).
	 * err (errsize bytes) says why on any status but HANDLER_DONE. */
	enum handler_status (*run)(void *state, struct job *jobs,
	    struct handler_result *results, int n, const char *batch_key,
	    char *err, size_t errsize);
	/* Optional (NULL: run only), for pipeline = yes: run in two halves,
	 * so that the worker fetches and prepares its next batch while this
	 * one is written. send is run, except that it may set *sent and
	 * return HANDLER_DONE before the batch's result is known; finish
	 * (the same arguments) then waits for it and answers as run would
	 * have. Nothing else (run, committed, another send) is called in
	 * between, but prepare. */
	enum handler_status (*send)(void *state, struct job *jobs,
	    struct handler_result *results, int n, const char *batch_key,
	    bool *sent, char *err, size_t errsize);
	enum handler_status (*finish)(void *state, struct job *jobs,
	    struct handler_result *results, int n, const char *batch_key,
	    char *err, size_t errsize);
	/* Optional, with send: called for the next batch while one is in
	 * flight, to do ahead what its send needs no server for (postgres:
	 * encode its rows), so that the send is short. Decides nothing the
	 * send would not (it may set the results of jobs that cannot be
	 * written); the next send or run of the same batch_key uses it, any
	 * other drops it. */
	void (*prepare)(void *state, struct job *jobs,
	    struct handler_result *results, int n, const char *batch_key);
	/* After HANDLER_DONE, before the Redis ack: housekeeping that may
	 * fail silently (postgres: prune old batch keys). */
	void (*committed)(void *state);
	void (*close)(void *state);
};

extern const struct handler_ops handler_noop_ops;
extern const struct handler_ops handler_exec_ops;
extern const struct handler_ops handler_pg_ops;

/* A committed or close hook with nothing to do. */
void handler_nothing(void *state);

/* The ops of `handler` (enum config_handler), NULL when it names none. */
const struct handler_ops *handler_for(int handler);

#endif
