/* harness.h - driving a real ferryd from Criterion tests: temp folders,
 * config files, starting and stopping the daemon, finding its workers,
 * reading its log, waiting for conditions with a generous deadline. */
#ifndef FERRY_TEST_HARNESS_H
#define FERRY_TEST_HARNESS_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <hiredis/hiredis.h>
#include <sys/types.h>

#include "servers.h"

#define H_MAX_PIDS 64
#define H_DEADLINE_MS 20000   /* how long a wait may take before failing */
#define H_STOP_MS 45000       /* h_stop: shutdown_timeout (30 s) + margin */
#define H_MAX_EXPECT 16
#define H_EXIT_ANY (-1)       /* expect_exit: whatever status (or none) */

struct ferryd {
	pid_t pid;
	char dir[256];
	char config[320];
	char log[320];
	char pidfile[320];
	char stderr_path[320];
	struct test_redis redis;  /* a private redis-server for this test */
	struct test_pg pg;        /* a private PostgreSQL, when h_pg_start */
	redisContext *rc;         /* the test's own connection to it */
	/* What h_stop checks at the end of a test (zero after h_setup: exit
	 * status 0 after SIGTERM, no error line at all). */
	int expect_exit;          /* the master's exit code, or H_EXIT_ANY */
	int nexpect;
	const char *expect[H_MAX_EXPECT];  /* error lines the test provokes */
	bool stopped;             /* h_stop ran */
	/* h_config writes these [ferryd] lines instead of redis_host and
	 * redis_port when set (redis_sentinels ..., which excludes them) */
	const char *redis_lines;
};

/* Make a fresh temp folder for one test. */
void h_tmpdir(char *out, size_t size);
void h_rmrf(const char *dir);
void h_write_file(const char *path, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* An executable shell script f->dir/name (its path into path): the line
 * #!/bin/sh, then the printf'd body. */
void h_write_script(struct ferryd *f, const char *name, char *path,
    size_t size, const char *fmt, ...) __attribute__((format(printf, 5, 6)));
/* The loop of an exec handler, in h_write_script's body (a printf format):
 * each job line into $line, its id into $id; the body goes on with what
 * to answer, then "done\n". */
#define H_SH_EACH_JOB "while IFS= read -r line; do\n" \
	"  id=${line#*\\\"id\\\":\\\"}; id=${id%%%%\\\"*}\n"
/* Whole file as a malloc'd string ("" when missing). */
char *h_read_file(const char *path);
int h_count_in_file(const char *path, const char *needle);
/* Newlines in s. */
int h_count_lines(const char *s);

/* Write d->config: a [ferryd] section pointing pidfile, log and control
 * socket into d->dir, then `ferryd_extra` lines, then `queues` text. */
void h_config(struct ferryd *d, const char *ferryd_extra, const char *queues);
/* Set up d in a new temp folder with its own redis-server (extra
 * redis-server arguments, NULL-terminated, or NULL) and write the config. */
void h_setup_redis(struct ferryd *d, const char *ferryd_extra,
    const char *queues, const char *const *redis_args);
void h_setup(struct ferryd *d, const char *ferryd_extra, const char *queues);
/* Set up d as a second host on peer's redis-server (d does not own it). */
void h_setup_peer(struct ferryd *d, struct ferryd *peer,
    const char *ferryd_extra, const char *queues);
/* Start `ferryd -f -c d->config` and wait until `workers` children run. */
void h_start(struct ferryd *d, int workers);
/* Run ferryd with args (NULL-terminated), wait, return its exit status;
 * its stderr+stdout go to `output` (malloc'd) when not NULL. */
int h_run_ferryd(const char *const *args, char **output);
/* Error lines holding `pattern` (a substring; a string that outlives the
 * test) are expected: the test provokes them on purpose. */
void h_expect_log(struct ferryd *d, const char *pattern);
/* The end of every test that set up d, its last statement: stop ferryd
 * with SIGTERM and fail the test unless the master exits with
 * d->expect_exit (0 unless the test said otherwise; not checked when the
 * test reaped the master itself), leaves no process of its group behind,
 * and logged no error line (level=error in the log or on stderr, or a
 * sanitizer report) that no h_expect_log pattern matches; the offending
 * lines are printed. Criterion's .fini cannot fail a test (2.4 reports
 * the result before .fini runs), so this check belongs in the test body. */
void h_stop(struct ferryd *d);
/* For .fini: whatever happened, stop ferryd (TERM, then KILL), its Redis
 * and PostgreSQL, and remove the folder. Never fails; when the test did
 * not reach h_stop (it failed before), it prints the unexpected error
 * lines as a note beside the original failure. */
void h_teardown(struct ferryd *d);
/* Wait for the master to exit; returns its wait status or -1 on timeout. */
int h_wait_exit(pid_t pid, int timeout_ms);

/* What ps shows for pid (its title): /proc/PID/cmdline up to its first
 * NUL, malloc'd ("" when it is gone). */
char *h_title(pid_t pid);
/* Wait until pid's title starts with `want`; fails the test if not. */
void h_wait_title(struct ferryd *d, pid_t pid, const char *want);
/* d's one worker (its pid), once d has one and its title starts with
 * `title`; fails the test if not within the deadline. */
pid_t h_wait_worker(struct ferryd *d, const char *title);
/* SIGKILL to d's one worker while its title starts with `title` (it is
 * stopped to be looked at, and let go again while the title says
 * otherwise); returns its pid once it is gone. */
pid_t h_kill_worker_in(struct ferryd *d, const char *title);
/* `ferryd -f` as pid 1 of a new PID namespace (as in a container), its
 * output into f's stderr file: the pid of unshare, for
 * h_stop_in_pid_namespace. */
pid_t h_start_in_pid_namespace(struct ferryd *f);
/* SIGTERM to the ferryd that unshare runs (unshare ignores TERM) and its
 * exit status, which unshare passes on (-1: it did not exit, killed). */
int h_stop_in_pid_namespace(pid_t unshare);
/* Live (non-zombie) children of `parent`, sorted; returns the count. */
int h_children(pid_t parent, pid_t *pids, int max);
/* Wait until `parent` has exactly n live children; fails the test if not. */
void h_wait_children(struct ferryd *d, int n);
bool h_pid_alive(pid_t pid);
/* Wait until process pid is gone (or a zombie); fails the test if not. */
void h_wait_gone(struct ferryd *d, pid_t pid);
/* Wait until pid is stopped (SIGSTOP: true) or running again (false). */
void h_wait_stopped(struct ferryd *d, pid_t pid, bool stopped);
/* Wait until Redis has at least n clients blocked in a blocking command
 * (INFO clients: blocked_clients), e.g. n workers inside BLMOVE. */
void h_wait_blocked(struct ferryd *d, int n);
/* Wait until the log holds `needle` at least `times` times. */
void h_wait_log(struct ferryd *d, const char *needle, int times);
void h_sleep_ms(long ms);
long long h_now_ms(void);
/* A command on the test's Redis connection; fails the test on error. */
redisReply *h_redis(struct ferryd *d, const char *fmt, ...);
long long h_redis_int(struct ferryd *d, const char *fmt, ...);
/* Wait until a Redis integer command returns `want`. */
void h_wait_redis_int(struct ferryd *d, long long want, const char *fmt, ...);
/* Jobs {"n":first} .. {"n":first+n-1} pushed to the queue, pipelined. */
void h_push_jobs(struct ferryd *f, const char *queue, int first, int n);
/* A file DIR/jobs.jsonl of `total` jobs r<i> with row n = i (its path
 * into input), for ferryctl enqueue. */
void h_jobs_file(struct ferryd *f, int total, char *input, size_t size);
/* The elements make(from) .. make(to - 1) (malloc'd by make, freed here)
 * LPUSHed onto key, 1,000 a command, pipelined: the first ends at the
 * right (oldest) end. */
void h_lpush_made(struct ferryd *d, const char *key, int from, int to,
    char *(*make)(int));
/* An exec handler (path in cmd) appending each job line to DIR/done.txt
 * and answering ok. */
void h_write_recorder(struct ferryd *f, char *cmd, size_t size);
/* How many distinct {"n":i}, 0 <= i < n, the recorder saw. */
int h_distinct_done(struct ferryd *f, int n);
/* ready, delayed and every processing list of queue q are empty. */
void h_assert_queue_empty(struct ferryd *f, const char *q);
/* How many jobs queue q holds (in requeue and in the processing lists,
 * read in one step) that were recovered exactly `recoveries` times (a
 * document not wrapped yet: 0). */
int h_held_jobs(struct ferryd *f, const char *q, int recoveries);
/* Entries of q's owners hash that are live workers (not the tombstones
 * "dead:<ms>" a hand-back leaves for a while). */
int h_live_owners(struct ferryd *f, const char *q);
/* The dead-letter entries of q, parsed (a json array to json_decref). */
struct json_t *h_dead_entries(struct ferryd *f, const char *q);
/* The cache keys q's protected hash counts, expanded: KEY, COUNT, ...
 * (a group's keys one by one, a lost one as "<group>.?"), to
 * freeReplyObject. */
redisReply *h_protected(struct ferryd *f, const char *q);
/* How many jobs q's protected hash counts for cache key `key` (0: none). */
long long h_protected_count(struct ferryd *f, const char *q, const char *key);
/* The score of `id` in queue's ids set (NAN when it holds none), and a
 * check that it is a live mark, in (0, 1) (doc/formats.md). */
double h_id_score(struct ferryd *f, const char *queue, const char *id);
void h_assert_id_live(struct ferryd *f, const char *queue, const char *id);
/* The string member `key` of a JSON object, or "(none)". */
const char *h_jstr(struct json_t *o, const char *key);
/* Start a private PostgreSQL for d; returns the [ferryd] lines pointing
 * ferryd at it (static buffer). */
const char *h_pg_start(struct ferryd *d);
/* Run SQL on d's PostgreSQL; fails the test on error. */
void h_pg_exec(struct ferryd *d, const char *sql);
struct pg_conn;  /* libpq's PGconn */
/* A statement that returns no rows, on the open connection c (its own
 * transaction or lock); fails the test unless it succeeds. */
void h_pq_exec(struct pg_conn *c, const char *sql);
/* The first column of the first row of a query, as a number. */
long long h_pg_int(struct ferryd *d, const char *sql);
/* Wait until h_pg_int(sql) is want (fails after a deadline). */
void h_wait_pg_int(struct ferryd *d, long long want, const char *sql);
/* The first column of the first row, as a malloc'd string (NULL if null). */
char *h_pg_text(struct ferryd *d, const char *sql);
/* What a ferryctl run printed and how it ended. */
struct h_run {
	int status;             /* exit status, or 128 + signal */
	char *out;              /* stdout, malloc'd */
	char *err;              /* stderr, malloc'd */
};
/* Run `ferryctl -c config ARGS...` (NULL-terminated; $FERRYCTL or the
 * build's) with `input` on stdin through a pipe (NULL: empty); capture
 * stdout, stderr and the status, which it returns. Fails the test when
 * ferryctl does not exit. */
int h_ctl(struct h_run *r, const char *config, const char *input, ...);
int h_ctl_v(struct h_run *r, const char *config, const char *input,
    va_list args);
void h_run_free(struct h_run *r);
/* h_ctl_v with its stderr passed on to ours: the exit status, and stdout
 * (malloc'd) into *out when out is not NULL. */
int h_ctl_out_v(const char *config, const char *input, char **out,
    va_list args);
/* The same in the background: stdin from the file `input`, stdout and
 * stderr into files; its pid, for waitpid. */
pid_t h_ctl_spawn(const char *config, const char *input, const char *out_path,
    const char *err_path, ...);
/* Fail the test unless the run exited with status (its output shown). */
void h_run_expect(const struct h_run *r, int status);
/* Wait for the ferryctl of h_ctl_spawn `pid`: it exits 0 and its stderr
 * (the file err_path) holds needle. */
void h_ctl_wait_ok(pid_t pid, const char *err_path, const char *needle);

/* Make each `event` (INSERT, UPDATE, DELETE, "INSERT OR UPDATE"...)
 * statement on table 10 ms longer (a statement trigger): a run lasts long
 * enough for kills to land inside transactions and between COMMIT and
 * ack. */
void h_pg_slow(struct ferryd *d, const char *table, const char *event);
/* Kill one of d's workers (at random, seeded) with SIGKILL every 300 ms
 * until queue q's done count reaches n (or 300 s pass), then wait for n
 * done; fails unless there were at least 10 kills. Returns the kills. */
int h_kill_workers_until_done(struct ferryd *d, const char *q, long long n);

struct job;
/* Parse job j from the element printf'd into el (size bytes: a wrapper
 * when wrapped); fails the test when it is invalid. */
void h_job_parse(struct job *j, char *el, size_t size, bool wrapped,
    const char *fmt, ...) __attribute__((format(printf, 5, 6)));
void h_jobs_free(struct job *jobs, int n);

/* State, parent and process group of process pid_dir (a /proc name);
 * -1 when it is gone, or being reaped (X) (harness_proc.c). */
int h_proc_stat(const char *pid_dir, char *state, int *ppid, int *pgrp);

/* Print the daemon's log to stderr (on failure). */
void h_dump_log(struct ferryd *d);

/* harness_client.c: the drivers of the clients' suites. */
/* Set up d with its own Redis and PostgreSQL and the config `queues` (the
 * [ferryd] lines point at that PostgreSQL); run each SQL statement that
 * follows (the tables; the list ends with NULL), then ferryctl init-db,
 * which must exit 0. ferryd is not started. */
void h_setup_pg(struct ferryd *d, const char *queues, ...)
    __attribute__((sentinel));
/* Set up d with its own Redis and PostgreSQL, a table events (n bigint),
 * queue pg (postgres into events, 2 workers) and the `queues` sections
 * after it; run `sql` (NULL: none; the tables of those queues), then
 * ferryctl init-db, then start ferryd and wait for `workers` children. */
void h_client_start(struct ferryd *d, const char *queues, const char *sql,
    int workers);
/* Run `command` with sh, its stdout and stderr into d->dir/name; fail the
 * test, showing that output, unless it exits 0. Returns the output
 * (malloc'd). */
char *h_shell(struct ferryd *d, const char *command, const char *name);
/* count rows of `table` have n from lo to hi. */
struct h_rows {
	long long lo, hi, count;
};
/* Fail the test unless `table` holds exactly `total` rows, each value of
 * its column n once, and each of the ranges exactly its count. */
void h_assert_rows(struct ferryd *d, const char *table, long long total,
    const struct h_rows *ranges, int nranges);

#endif
