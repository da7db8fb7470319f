/* harness.c - see harness.h. Everything polls with a deadline: the machine
 * is shared and slow at times, so tests wait for states, never for times. */
#include "harness.h"
#include "job.h"
#include "wrapper.h"

#include <criterion/criterion.h>
#include <dirent.h>
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

void
h_write_script(struct ferryd *f, const char *name, char *path, size_t size,
    const char *fmt, ...)
{
	FILE *o;
	va_list ap;

	snprintf(path, size, "%s/%s", f->dir, name);
	o = fopen(path, "w");
	cr_assert_not_null(o, "cannot write %s: %s", path, strerror(errno));
	fputs("#!/bin/sh\n", o);
	va_start(ap, fmt);
	vfprintf(o, fmt, ap);
	va_end(ap);
	fclose(o);
	chmod(path, 0755);
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
		if (h_proc_stat(e->d_name, &state, &ppid, &pgrp) == 0 &&
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
	return servers_now_ms();
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
