/* harness.c - see harness.h. Everything polls with a deadline: the machine
 * is shared and slow at times, so tests wait for states, never for times. */
#include "harness.h"
#include "job.h"
#include "wrapper.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <jansson.h>
#include <libpq-fe.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char *
ferryd_path(void)
{
	const char *p = getenv("FERRYD");
	return p != NULL ? p : TEST_BUILDDIR "/ferryd";
}

void
h_tmpdir(char *out, size_t size)
{
	snprintf(out, size, "/tmp/ferry-test-XXXXXX");
	cr_assert_not_null(mkdtemp(out), "mkdtemp: %s", strerror(errno));
	chmod(out, 0755);
}

void
h_rmrf(const char *dir)
{
	pid_t pid = fork();
	if (pid == 0) {
		execlp("rm", "rm", "-rf", dir, (char *)NULL);
		_exit(127);
	}
	if (pid > 0)
		waitpid(pid, NULL, 0);
}

void
h_write_file(const char *path, const char *fmt, ...)
{
	FILE *f = fopen(path, "w");
	va_list ap;

	cr_assert_not_null(f, "cannot write %s: %s", path, strerror(errno));
	va_start(ap, fmt);
	vfprintf(f, fmt, ap);
	va_end(ap);
	fclose(f);
}

char *
h_read_file(const char *path)
{
	FILE *f = fopen(path, "r");
	size_t cap = 4096, len = 0, n;
	char *buf = malloc(cap);

	buf[0] = '\0';
	if (f == NULL)
		return buf;
	while ((n = fread(buf + len, 1, cap - len - 1, f)) > 0) {
		len += n;
		if (cap - len < 2)
			buf = realloc(buf, cap *= 2);
	}
	buf[len] = '\0';
	fclose(f);
	return buf;
}

int
h_count_in_file(const char *path, const char *needle)
{
	char *text = h_read_file(path);
	int count = 0;

	for (char *p = text; (p = strstr(p, needle)) != NULL; p += strlen(needle))
		count++;
	free(text);
	return count;
}

void
h_config(struct ferryd *d, const char *ferryd_extra, const char *queues)
{
	char addr[64];

	snprintf(addr, sizeof(addr), "redis_host = 127.0.0.1\nredis_port = %d\n",
	    d->redis.port);
	h_write_file(d->config,
	    "[ferryd]\n"
	    "pidfile = %s\n"
	    "log = %s\n"
	    "log_level = debug\n"
	    "control_socket = %s/ferryd.sock\n"
	    "%s"
	    "%s\n"
	    "%s\n", d->pidfile, d->log, d->dir,
	    d->redis_lines != NULL ? d->redis_lines : addr,
	    ferryd_extra ? ferryd_extra : "", queues);
}

void
h_setup(struct ferryd *d, const char *ferryd_extra, const char *queues)
{
	h_setup_redis(d, ferryd_extra, queues, NULL);
}

static void
setup_dirs(struct ferryd *d, const char *ferryd_extra, const char *queues);

void
h_setup_peer(struct ferryd *d, struct ferryd *peer, const char *ferryd_extra,
    const char *queues)
{
	memset(d, 0, sizeof(*d));
	d->redis.port = peer->redis.port;     /* pid 0: not ours to stop */
	struct timeval tv = { 10, 0 };
	d->rc = redisConnectWithTimeout("127.0.0.1", d->redis.port, tv);
	cr_assert(d->rc != NULL && d->rc->err == 0, "cannot connect to redis");
	setup_dirs(d, ferryd_extra, queues);
}

void
h_setup_redis(struct ferryd *d, const char *ferryd_extra, const char *queues,
    const char *const *redis_args)
{
	memset(d, 0, sizeof(*d));
	cr_assert_eq(test_redis_start(&d->redis, redis_args), 0,
	    "redis-server did not start (see above)");
	struct timeval tv = { 10, 0 };
	d->rc = redisConnectWithTimeout("127.0.0.1", d->redis.port, tv);
	cr_assert(d->rc != NULL && d->rc->err == 0, "cannot connect to redis");
	setup_dirs(d, ferryd_extra, queues);
}

static void
setup_dirs(struct ferryd *d, const char *ferryd_extra, const char *queues)
{
	h_tmpdir(d->dir, sizeof(d->dir));
	snprintf(d->config, sizeof(d->config), "%s/ferryd.ini", d->dir);
	snprintf(d->log, sizeof(d->log), "%s/ferryd.log", d->dir);
	snprintf(d->pidfile, sizeof(d->pidfile), "%s/ferryd.pid", d->dir);
	snprintf(d->stderr_path, sizeof(d->stderr_path), "%s/stderr.log", d->dir);
	h_config(d, ferryd_extra, queues);
}

void
h_start(struct ferryd *d, int workers)
{
	pid_t pid = fork();

	cr_assert_neq(pid, -1);
	if (pid == 0) {
		int fd = open(d->stderr_path, O_WRONLY | O_CREAT | O_APPEND, 0644);
		dup2(fd, 1);
		dup2(fd, 2);
		setpgid(0, 0);   /* keep the test runner out of its signals */
		execl(ferryd_path(), "ferryd", "-f", "-c", d->config, (char *)NULL);
		fprintf(stderr, "exec %s: %s\n", ferryd_path(), strerror(errno));
		_exit(127);
	}
	d->pid = pid;
	h_wait_children(d, workers);
}

int
h_run_ferryd(const char *const *args, char **output)
{
	char path[] = "/tmp/ferry-out-XXXXXX";
	const char *argv[16] = { "ferryd" };
	int fd = mkstemp(path), status, i;

	cr_assert_neq(fd, -1);
	for (i = 0; args[i] != NULL && i < 14; i++)
		argv[i + 1] = args[i];
	argv[i + 1] = NULL;
	pid_t pid = fork();
	if (pid == 0) {
		dup2(fd, 1);
		dup2(fd, 2);
		execv(ferryd_path(), (char *const *)argv);
		_exit(127);
	}
	close(fd);
	status = h_wait_exit(pid, H_DEADLINE_MS);
	if (output != NULL)
		*output = h_read_file(path);
	unlink(path);
	cr_assert_neq(status, -1, "ferryd did not exit");
	return status;
}

int
h_wait_exit(pid_t pid, int timeout_ms)
{
	long long end = h_now_ms() + timeout_ms;
	int status;

	while (h_now_ms() < end) {
		pid_t r = waitpid(pid, &status, WNOHANG);
		if (r == pid)
			return status;
		if (r == -1)
			return -1;
		h_sleep_ms(20);
	}
	return -1;
}

static int proc_stat(const char *pid_dir, char *state, int *ppid,
    int *pgrp);

void
h_expect_log(struct ferryd *d, const char *pattern)
{
	cr_assert_lt(d->nexpect, H_MAX_EXPECT, "more than %d h_expect_log",
	    H_MAX_EXPECT);
	d->expect[d->nexpect++] = pattern;
}

/* Stop d's master if it still runs: SIGTERM (and SIGCONT to its process
 * group when `wake`: a test that failed may leave it frozen), SIGKILL to
 * the group after timeout_ms. Returns its wait status; -1 when there was
 * nothing of ours to wait for (never started, reaped by the test, not our
 * child); -2 when it had to be killed. */
static int
stop_master(struct ferryd *d, int timeout_ms, bool wake)
{
	pid_t pid = d->pid;
	int status;

	if (pid <= 0)
		return -1;
	d->pid = 0;
	pid_t r = waitpid(pid, &status, WNOHANG);
	if (r == pid)
		return status;          /* it ended before, on its own */
	if (r != 0)
		return -1;
	kill(pid, SIGTERM);
	if (wake)
		kill(-pid, SIGCONT);
	if ((status = h_wait_exit(pid, timeout_ms)) == -1) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		kill(-pid, SIGKILL);
		return -2;
	}
	return status;
}

/* A line of ferryd's log or stderr that reports an error. */
static bool
is_error_line(const char *line)
{
	static const char *const marks[] = {
		" level=error ", " level=crit ", "ERROR: AddressSanitizer",
		"ERROR: LeakSanitizer", "runtime error:", NULL
	};
	for (int i = 0; marks[i] != NULL; i++)
		if (strstr(line, marks[i]) != NULL)
			return true;
	return false;
}

/* Print the error lines of `path` that no pattern of d expects, each with
 * `tag`; return how many there are, the first in first. */
static int
unexpected_lines(struct ferryd *d, const char *path, const char *tag,
    char *first, size_t size)
{
	char *text = h_read_file(path);
	int n = 0;

	for (char *line = text, *next; *line != '\0'; line = next) {
		if ((next = strchr(line, '\n')) != NULL)
			*next++ = '\0';
		else
			next = line + strlen(line);
		if (!is_error_line(line))
			continue;
		bool expected = false;
		for (int i = 0; i < d->nexpect && !expected; i++)
			expected = strstr(line, d->expect[i]) != NULL;
		if (expected)
			continue;
		if (n == 0 && first[0] == '\0')
			snprintf(first, size, "%s", line);
		if (n++ < 40)
			fprintf(stderr, "%s %s: %s\n", tag, path, line);
	}
	if (n > 40)
		fprintf(stderr, "%s %s: ... %d more\n", tag, path, n - 40);
	free(text);
	return n;
}

/* Live processes of process group pgid, their pids in pids (up to max). */
static int
group_members(pid_t pgid, pid_t *pids, int max)
{
	DIR *dir = opendir("/proc");
	struct dirent *e;
	int n = 0, ppid, pgrp;
	char state;

	if (dir == NULL)
		return 0;
	while ((e = readdir(dir)) != NULL) {
		if (e->d_name[0] < '0' || e->d_name[0] > '9')
			continue;
		if (proc_stat(e->d_name, &state, &ppid, &pgrp) == 0 &&
		    pgrp == (int)pgid && state != 'Z' && n < max)
			pids[n++] = (pid_t)atoi(e->d_name);
	}
	closedir(dir);
	return n;
}

/* Wait a little for the master's process group to empty; kill what is
 * left and say so. Returns how many were left. */
static int
leftovers(pid_t pgid, char *what, size_t size)
{
	pid_t pids[H_MAX_PIDS];
	long long end = h_now_ms() + 5000;
	int n;

	while ((n = group_members(pgid, pids, H_MAX_PIDS)) > 0 &&
	    h_now_ms() < end)
		h_sleep_ms(20);
	if (n == 0)
		return 0;
	int off = snprintf(what, size, "processes of ferryd left behind:");
	for (int i = 0; i < n && off < (int)size; i++)
		off += snprintf(what + off, size - (size_t)off, " %d", (int)pids[i]);
	kill(-pgid, SIGKILL);
	return n;
}

static void
describe_status(int status, char *out, size_t size)
{
	if (WIFEXITED(status))
		snprintf(out, size, "exit %d", WEXITSTATUS(status));
	else if (WIFSIGNALED(status))
		snprintf(out, size, "signal %d (%s)", WTERMSIG(status),
		    strsignal(WTERMSIG(status)));
	else
		snprintf(out, size, "wait status %d", status);
}

void
h_stop(struct ferryd *d)
{
	char problem[512] = "", first[1024] = "", how[64];
	pid_t pgid = d->pid;
	int status = stop_master(d, H_STOP_MS, false);

	d->stopped = true;
	if (status == -2) {
		snprintf(problem, sizeof(problem), "ferryd did not exit within "
		    "%d s of SIGTERM (killed)", H_STOP_MS / 1000);
	} else if (status >= 0 && d->expect_exit != H_EXIT_ANY &&
	    !(WIFEXITED(status) && WEXITSTATUS(status) == d->expect_exit)) {
		describe_status(status, how, sizeof(how));
		snprintf(problem, sizeof(problem), "ferryd ended with %s, "
		    "expected exit %d", how, d->expect_exit);
	} else if (status >= 0 && pgid > 0) {
		leftovers(pgid, problem, sizeof(problem));
	}
	int n = unexpected_lines(d, d->log, "unexpected error in", first,
	    sizeof(first));
	n += unexpected_lines(d, d->stderr_path, "unexpected error in", first,
	    sizeof(first));
	cr_assert(problem[0] == '\0', "h_stop: %s", problem);
	cr_assert_eq(n, 0, "h_stop: ferryd logged %d unexpected error "
	    "line%s (printed above), the first:\n%s", n, n == 1 ? "" : "s",
	    first);
}

void
h_teardown(struct ferryd *d)
{
	stop_master(d, H_DEADLINE_MS, true);
	if (!d->stopped && d->dir[0] != '\0') {
		char first[1024] = "";
		unexpected_lines(d, d->log, "note (the test ended before h_stop):",
		    first, sizeof(first));
		unexpected_lines(d, d->stderr_path,
		    "note (the test ended before h_stop):", first,
		    sizeof(first));
	}
	d->stopped = false;
	if (d->rc != NULL)
		redisFree(d->rc);
	d->rc = NULL;
	if (d->redis.pid > 0)
		test_redis_stop(&d->redis);
	if (d->pg.dir[0] != '\0')
		test_pg_stop(&d->pg);
	if (d->dir[0] != '\0')
		h_rmrf(d->dir);
}

static redisReply *
vcommand(struct ferryd *d, const char *fmt, va_list ap)
{
	if (d->rc == NULL || d->rc->err) {
		struct timeval tv = { 10, 0 };
		redisFree(d->rc);
		d->rc = redisConnectWithTimeout("127.0.0.1", d->redis.port, tv);
	}
	va_list again;
	va_copy(again, ap);
	redisReply *r = redisvCommand(d->rc, fmt, ap);
	if (r == NULL) {        /* the server restarted: reconnect once */
		struct timeval tv = { 10, 0 };
		redisFree(d->rc);
		d->rc = redisConnectWithTimeout("127.0.0.1", d->redis.port, tv);
		if (d->rc != NULL && d->rc->err == 0)
			r = redisvCommand(d->rc, fmt, again);
	}
	va_end(again);
	cr_assert_not_null(r, "redis: %s", d->rc ? d->rc->errstr : "no memory");
	cr_assert_neq(r->type, REDIS_REPLY_ERROR, "redis: %s", r->str);
	return r;
}

redisReply *
h_redis(struct ferryd *d, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	redisReply *r = vcommand(d, fmt, ap);
	va_end(ap);
	return r;
}

long long
h_redis_int(struct ferryd *d, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	redisReply *r = vcommand(d, fmt, ap);
	va_end(ap);
	long long v = r->type == REDIS_REPLY_INTEGER ? r->integer :
	    r->type == REDIS_REPLY_STRING ? atoll(r->str) : 0;
	freeReplyObject(r);
	return v;
}

void
h_wait_redis_int(struct ferryd *d, long long want, const char *fmt, ...)
{
	long long end = h_now_ms() + H_DEADLINE_MS * 3, v = 0;
	va_list ap;

	while (h_now_ms() < end) {
		va_start(ap, fmt);
		redisReply *r = vcommand(d, fmt, ap);
		va_end(ap);
		v = r->type == REDIS_REPLY_INTEGER ? r->integer :
		    r->type == REDIS_REPLY_STRING ? atoll(r->str) : 0;
		freeReplyObject(r);
		if (v == want)
			return;
		h_sleep_ms(50);
	}
	h_dump_log(d);
	cr_assert_fail("redis \"%s\" = %lld, expected %lld", fmt, v, want);
}

/* State, parent and process group of process pid_dir (a /proc name);
 * -1 when it is gone. */
static int
proc_stat(const char *pid_dir, char *state, int *ppid, int *pgrp)
{
	char path[64], buf[512];
	snprintf(path, sizeof(path), "/proc/%s/stat", pid_dir);
	int fd = open(path, O_RDONLY);
	if (fd == -1)
		return -1;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	char *p = strrchr(buf, ')');     /* comm may hold spaces */
	if (p == NULL || sscanf(p + 2, "%c %d %d", state, ppid, pgrp) != 3)
		return -1;
	return 0;
}

static pid_t
parent_of(const char *pid_dir, char *state)
{
	int ppid, pgrp;
	return proc_stat(pid_dir, state, &ppid, &pgrp) == 0 ? ppid : -1;
}

static int
cmp_pid(const void *a, const void *b)
{
	return *(const pid_t *)a - *(const pid_t *)b;
}

int
h_children(pid_t parent, pid_t *pids, int max)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	int n = 0;
	char state;

	cr_assert_not_null(d);
	while ((e = readdir(d)) != NULL) {
		if (e->d_name[0] < '0' || e->d_name[0] > '9')
			continue;
		if (parent_of(e->d_name, &state) == parent && state != 'Z' &&
		    n < max)
			pids[n++] = (pid_t)atoi(e->d_name);
	}
	closedir(d);
	qsort(pids, (size_t)n, sizeof(pid_t), cmp_pid);
	return n;
}

void
h_wait_children(struct ferryd *d, int want)
{
	long long end = h_now_ms() + H_DEADLINE_MS;
	pid_t pids[H_MAX_PIDS];
	int n = -1;

	while (h_now_ms() < end) {
		if (waitpid(d->pid, NULL, WNOHANG) == d->pid) {
			h_dump_log(d);
			cr_assert_fail("ferryd exited while waiting for %d workers",
			    want);
		}
		n = h_children(d->pid, pids, H_MAX_PIDS);
		if (n == want)
			return;
		h_sleep_ms(20);
	}
	h_dump_log(d);
	cr_assert_fail("ferryd has %d workers, expected %d", n, want);
}

bool
h_pid_alive(pid_t pid)
{
	char state;
	char name[32];
	snprintf(name, sizeof(name), "%d", (int)pid);
	return parent_of(name, &state) != -1 && state != 'Z';
}

void
h_wait_gone(struct ferryd *d, pid_t pid)
{
	long long end = h_now_ms() + H_DEADLINE_MS;

	while (h_pid_alive(pid) && h_now_ms() < end)
		h_sleep_ms(20);
	if (h_pid_alive(pid)) {
		h_dump_log(d);
		cr_assert_fail("process %d is still alive", (int)pid);
	}
}

void
h_wait_stopped(struct ferryd *d, pid_t pid, bool stopped)
{
	long long end = h_now_ms() + H_DEADLINE_MS;
	char name[32], state = '?';
	int ppid, pgrp;

	snprintf(name, sizeof(name), "%d", (int)pid);
	while (h_now_ms() < end) {
		if (proc_stat(name, &state, &ppid, &pgrp) == -1)
			break;
		if ((state == 'T' || state == 't') == stopped)
			return;
		h_sleep_ms(10);
	}
	h_dump_log(d);
	cr_assert_fail("process %d is in state %c, not %s", (int)pid, state,
	    stopped ? "stopped" : "running");
}

/* blocked_clients of INFO clients, or -1. */
static long long
blocked_clients(struct ferryd *d)
{
	redisReply *r = h_redis(d, "INFO clients");
	const char *p = r->type == REDIS_REPLY_STRING ?
	    strstr(r->str, "blocked_clients:") : NULL;
	long long n = p != NULL ? atoll(p + 16) : -1;
	freeReplyObject(r);
	return n;
}

void
h_wait_blocked(struct ferryd *d, int want)
{
	long long end = h_now_ms() + H_DEADLINE_MS, n = -1;

	while (h_now_ms() < end) {
		if ((n = blocked_clients(d)) >= want)
			return;
		h_sleep_ms(10);
	}
	h_dump_log(d);
	cr_assert_fail("redis has %lld blocked clients, expected %d", n, want);
}

void
h_wait_log(struct ferryd *d, const char *needle, int times)
{
	long long end = h_now_ms() + H_DEADLINE_MS;
	int n = 0;

	while (h_now_ms() < end) {
		if ((n = h_count_in_file(d->log, needle)) >= times)
			return;
		h_sleep_ms(20);
	}
	h_dump_log(d);
	cr_assert_fail("log has \"%s\" %d times, expected %d", needle, n, times);
}

void
h_sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
		;
}

long long
h_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void
h_dump_log(struct ferryd *d)
{
	char *text = h_read_file(d->log);
	char *err = h_read_file(d->stderr_path);
	fprintf(stderr, "---- %s ----\n%s---- %s ----\n%s----\n", d->log, text,
	    d->stderr_path, err);
	free(text);
	free(err);
}

/* Push jobs {"n":first} .. {"n":first+n-1}, pipelined. */
void
h_push_jobs(struct ferryd *f, const char *queue, int first, int n)
{
	char key[128];

	snprintf(key, sizeof(key), "ferry:{%s}:ready", queue);
	freeReplyObject(h_redis(f, "PING"));    /* reconnects if needed */
	for (int i = first; i < first + n; i++)
		redisAppendCommand(f->rc, "LPUSH %s {\"n\":%d}", key, i);
	for (int i = 0; i < n; i++) {
		redisReply *r;
		cr_assert_eq(redisGetReply(f->rc, (void **)&r), REDIS_OK);
		freeReplyObject(r);
	}
}

/* An exec handler that appends each job's document to `out` and answers
 * ok. Lines look like {"id":"ID","attempts":..,"recoveries":..,"job":DOC}. */
void
h_write_recorder(struct ferryd *f, char *cmd, size_t size)
{
	char path[400];

	snprintf(path, sizeof(path), "%s/record.sh", f->dir);
	h_write_file(path,
	    "#!/bin/sh\n"
	    "exec awk -F'\"' -v out=%s/done.txt '{ print $0 >> out; "
	    "print \"ok \" $4; fflush() }'\n", f->dir);
	chmod(path, 0755);
	snprintf(cmd, size, "%s", path);
}

/* How many distinct {"n":i} with 0 <= i < n the recorder saw. */
int
h_distinct_done(struct ferryd *f, int n)
{
	char path[400], *seen = calloc((size_t)n, 1);
	int count = 0;

	snprintf(path, sizeof(path), "%s/done.txt", f->dir);
	char *text = h_read_file(path);
	for (char *p = text; (p = strstr(p, "\"job\":{\"n\":")) != NULL; p++) {
		int i = atoi(p + 11);
		if (i >= 0 && i < n && !seen[i]) {
			seen[i] = 1;
			count++;
		}
	}
	free(text);
	free(seen);
	return count;
}

void
h_assert_queue_empty(struct ferryd *f, const char *q)
{
	cr_assert_eq(h_redis_int(f, "LLEN ferry:{%s}:ready", q), 0);
	cr_assert_eq(h_redis_int(f, "LLEN ferry:{%s}:requeue", q), 0);
	cr_assert_eq(h_redis_int(f, "ZCARD ferry:{%s}:delayed", q), 0);
	redisReply *r = h_redis(f, "KEYS ferry:{%s}:proc:*", q);
	for (size_t i = 0; i < r->elements; i++)
		cr_assert_eq(h_redis_int(f, "LLEN %s", r->element[i]->str), 0,
		    "%s is not empty", r->element[i]->str);
	freeReplyObject(r);
}

/* The dead-letter entries of q, parsed. */
json_t *
h_dead_entries(struct ferryd *f, const char *q)
{
	json_t *all = json_array();
	redisReply *r = h_redis(f, "LRANGE ferry:{%s}:dead 0 -1", q);
	for (size_t i = 0; i < r->elements; i++) {
		struct wrapper w;
		cr_assert_eq(wrapper_parse(r->element[i]->str, r->element[i]->len,
		    WRAPPER_DEAD, &w), 0, "malformed dead entry: %s",
		    r->element[i]->str);
		json_t *e = json_object(), *stamps = json_array();
		const struct { const char *k; struct wrapper_str v; } strs[] = {
			{ "reason", w.reason }, { "worker", w.worker }, { "id", w.id },
			{ "first_error", w.first_error },
			{ "last_error", w.last_error },
		};
		for (size_t k = 0; k < sizeof(strs) / sizeof(strs[0]); k++) {
			char *t = wrapper_str_text(strs[k].v);
			if (t != NULL)
				json_object_set_new(e, strs[k].k, json_string(t));
			free(t);
		}
		for (int k = 0; k < w.nstamps; k++) {
			char *t = wrapper_str_text(w.stamps[k]);
			json_array_append_new(stamps, json_string(t));
			free(t);
		}
		json_object_set_new(e, "stamps", stamps);
		json_object_set_new(e, "attempts", json_integer(w.attempts));
		json_object_set_new(e, "recoveries", json_integer(w.recoveries));
		json_object_set_new(e, "time", json_integer(w.time));
		/* the document's bytes as a string (NULL member if not UTF-8) */
		json_t *doc = json_stringn(w.doc, w.doc_len);
		json_object_set_new(e, "job", doc ? doc : json_null());
		wrapper_free(&w);
		json_array_append_new(all, e);
	}
	freeReplyObject(r);
	return all;
}

const char *
h_pg_start(struct ferryd *d)
{
	static char lines[256];

	cr_assert_eq(test_pg_start(&d->pg), 0, "postgres did not start");
	snprintf(lines, sizeof(lines), "pg_host = 127.0.0.1\npg_port = %d\n"
	    "pg_database = ferry\npg_user = postgres\n", d->pg.port);
	return lines;
}

static PGresult *
pg_query(struct ferryd *d, const char *sql)
{
	PGconn *c = PQconnectdb(d->pg.conninfo);
	cr_assert_eq(PQstatus(c), CONNECTION_OK, "postgres: %s",
	    PQerrorMessage(c));
	PGresult *r = PQexec(c, sql);
	ExecStatusType st = PQresultStatus(r);
	cr_assert(st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK,
	    "%s: %s", sql, PQerrorMessage(c));
	PQfinish(c);
	return r;
}

void
h_pg_exec(struct ferryd *d, const char *sql)
{
	PQclear(pg_query(d, sql));
}

long long
h_pg_int(struct ferryd *d, const char *sql)
{
	PGresult *r = pg_query(d, sql);
	long long v = PQntuples(r) > 0 ? atoll(PQgetvalue(r, 0, 0)) : -1;
	PQclear(r);
	return v;
}

char *
h_pg_text(struct ferryd *d, const char *sql)
{
	PGresult *r = pg_query(d, sql);
	char *v = PQntuples(r) > 0 && !PQgetisnull(r, 0, 0) ?
	    strdup(PQgetvalue(r, 0, 0)) : NULL;
	PQclear(r);
	return v;
}

int
h_live_owners(struct ferryd *f, const char *q)
{
	redisReply *r = h_redis(f, "HVALS ferry:{%s}:owners", q);
	int n = 0;

	for (size_t i = 0; i < r->elements; i++)
		n += strncmp(r->element[i]->str, "dead:", 5) != 0;
	freeReplyObject(r);
	return n;
}

/* ---- ferryctl as a subprocess */

static const char *
ferryctl_path(void)
{
	const char *p = getenv("FERRYCTL");
	return p != NULL ? p : TEST_BUILDDIR "/ferryctl";
}

void
h_run_free(struct h_run *r)
{
	free(r->out);
	free(r->err);
	r->out = r->err = NULL;
}

void
h_run_expect(const struct h_run *r, int status)
{
	cr_assert_eq(r->status, status,
	    "ferryctl exited %d, expected %d\n-- stdout:\n%s-- stderr:\n%s",
	    r->status, status, r->out, r->err);
}

/* Write all of input to fd; stop quietly when the reader is gone. */
static void
feed(int fd, const char *input)
{
	size_t len = input != NULL ? strlen(input) : 0, off = 0;

	while (off < len) {
		ssize_t n = write(fd, input + off, len - off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		off += (size_t)n;
	}
	close(fd);
}

static void
child(const char **argv, int in, int out, int err)
{
	dup2(in, 0);
	dup2(out, 1);
	dup2(err, 2);
	execv(ferryctl_path(), (char *const *)argv);
	fprintf(stderr, "exec %s: %s\n", ferryctl_path(), strerror(errno));
	_exit(127);
}

int
h_ctl(struct h_run *r, const char *config, const char *input, ...)
{
	va_list ap;

	va_start(ap, input);
	int status = h_ctl_v(r, config, input, ap);
	va_end(ap);
	return status;
}

int
h_ctl_v(struct h_run *r, const char *config, const char *input,
    va_list ap)
{
	char out_path[] = "/tmp/ferryctl-out-XXXXXX";
	char err_path[] = "/tmp/ferryctl-err-XXXXXX";
	const char *argv[16] = { "ferryctl", "-c", config }, *a;
	int out = mkstemp(out_path), err = mkstemp(err_path), in[2], n = 3;

	while ((a = va_arg(ap, const char *)) != NULL && n < 15)
		argv[n++] = a;
	argv[n] = NULL;
	cr_assert(out != -1 && err != -1 && pipe(in) == 0);
	pid_t pid = fork();
	cr_assert_neq(pid, -1);
	if (pid == 0) {
		close(in[1]);
		child(argv, in[0], out, err);
	}
	close(in[0]);
	close(out);
	close(err);
	signal(SIGPIPE, SIG_IGN);
	feed(in[1], input);
	int status = h_wait_exit(pid, H_DEADLINE_MS * 3);
	if (status == -1) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
	}
	r->out = h_read_file(out_path);
	r->err = h_read_file(err_path);
	unlink(out_path);
	unlink(err_path);
	cr_assert_neq(status, -1, "ferryctl %s did not exit", argv[3]);
	r->status = WIFEXITED(status) ? WEXITSTATUS(status) :
	    128 + WTERMSIG(status);
	return r->status;
}

const char *
h_jstr(json_t *o, const char *key)
{
	const char *s = json_string_value(json_object_get(o, key));
	return s != NULL ? s : "(none)";
}

int
h_count_lines(const char *s)
{
	int n = 0;

	for (; *s != '\0'; s++)
		n += *s == '\n';
	return n;
}

void
h_pg_slow(struct ferryd *d, const char *table, const char *event)
{
	char sql[256];

	h_pg_exec(d, "CREATE OR REPLACE FUNCTION ferry_test_slow() RETURNS "
	    "trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_sleep(0.01); "
	    "RETURN NULL; END $$");
	snprintf(sql, sizeof(sql), "CREATE TRIGGER slow AFTER %s ON %s FOR "
	    "EACH STATEMENT EXECUTE FUNCTION ferry_test_slow()", event, table);
	h_pg_exec(d, sql);
}

int
h_kill_workers_until_done(struct ferryd *d, const char *q, long long n)
{
	pid_t pids[H_MAX_PIDS];
	long long end = h_now_ms() + 300000;
	int kills = 0;

	srandom(7);
	while (h_redis_int(d, "HGET ferry:{%s}:stats done", q) < n &&
	    h_now_ms() < end) {
		h_sleep_ms(300);
		int k = h_children(d->pid, pids, H_MAX_PIDS);
		if (k > 0) {
			kill(pids[random() % k], SIGKILL);
			kills++;
		}
	}
	h_wait_redis_int(d, n, "HGET ferry:{%s}:stats done", q);
	cr_assert_geq(kills, 10, "only %d kills: the run was too short", kills);
	return kills;
}

void
h_job_parse(struct job *j, char *el, size_t size, bool wrapped,
    const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(el, size, fmt, ap);
	va_end(ap);
	job_parse_held(j, el, strlen(el), 1 << 20, wrapped);
	cr_assert_null(j->invalid, "%s: %s", el, j->invalid);
}

void
h_jobs_free(struct job *jobs, int n)
{
	for (int i = 0; i < n; i++)
		job_free(&jobs[i]);
}

char *
h_shell(struct ferryd *d, const char *command, const char *name)
{
	char out[400];
	size_t n = strlen(command) + sizeof(out) + 16;
	char *line = malloc(n);

	cr_assert_not_null(line);
	snprintf(out, sizeof(out), "%s/%s", d->dir, name);
	snprintf(line, n, "%s > %s 2>&1", command, out);
	int status = system(line);
	free(line);
	char *text = h_read_file(out);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	    "%s failed (exit %d):\n%s", command,
	    WIFEXITED(status) ? WEXITSTATUS(status) : -1, text ? text : "");
	return text;
}
