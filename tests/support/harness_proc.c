/* harness_proc.c - the processes of a ferryd under test (harness.h): its
 * children from /proc, waiting for them to come, go, stop and resume, their
 * titles, a worker killed in a given state. */
#include "harness.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* State, parent and process group of process pid_dir (a /proc name);
 * -1 when it is gone, or going: X (dead) while its parent reaps it, after
 * Z, which the callers take for gone too. */
int
h_proc_stat(const char *pid_dir, char *state, int *ppid, int *pgrp)
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
	if (p == NULL || sscanf(p + 2, "%c %d %d", state, ppid, pgrp) != 3 ||
	    *state == 'X')
		return -1;
	return 0;
}

static pid_t
parent_of(const char *pid_dir, char *state)
{
	int ppid, pgrp;
	return h_proc_stat(pid_dir, state, &ppid, &pgrp) == 0 ? ppid : -1;
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
		if (h_proc_stat(name, &state, &ppid, &pgrp) == -1)
			break;
		if ((state == 'T' || state == 't') == stopped)
			return;
		h_sleep_ms(10);
	}
	h_dump_log(d);
	cr_assert_fail("process %d is in state %c, not %s", (int)pid, state,
	    stopped ? "stopped" : "running");
}

char *
h_title(pid_t pid)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
	return h_read_file(path);       /* a C string: ends at the first NUL */
}

static bool
titled(pid_t pid, const char *want)
{
	char *t = h_title(pid);
	bool yes = strncmp(t, want, strlen(want)) == 0;

	free(t);
	return yes;
}

void
h_wait_title(struct ferryd *d, pid_t pid, const char *want)
{
	long long end = h_now_ms() + H_DEADLINE_MS;

	while (!titled(pid, want) && h_now_ms() < end)
		h_sleep_ms(20);
	char *t = h_title(pid);
	if (strncmp(t, want, strlen(want)) != 0)
		h_dump_log(d);
	cr_assert_eq(strncmp(t, want, strlen(want)), 0,
	    "pid %d: title \"%s\", expected \"%s...\"", (int)pid, t, want);
	free(t);
}

/* d's one worker when its title starts with `title`, else -1. */
static pid_t
worker_titled(struct ferryd *d, const char *title)
{
	pid_t pids[H_MAX_PIDS];

	return h_children(d->pid, pids, H_MAX_PIDS) == 1 &&
	    titled(pids[0], title) ? pids[0] : -1;
}

pid_t
h_wait_worker(struct ferryd *d, const char *title)
{
	long long end = h_now_ms() + H_DEADLINE_MS;
	pid_t w;

	while ((w = worker_titled(d, title)) == -1 && h_now_ms() < end)
		h_sleep_ms(20);
	if (w == -1) {
		h_dump_log(d);
		cr_assert_fail("ferryd has no one worker titled \"%s...\"", title);
	}
	return w;
}

/* Stopped, the worker cannot leave the state its title names between the
 * look and the kill. */
pid_t
h_kill_worker_in(struct ferryd *d, const char *title)
{
	long long end = h_now_ms() + H_DEADLINE_MS;

	while (h_now_ms() < end) {
		pid_t w = h_wait_worker(d, title);
		kill(w, SIGSTOP);
		h_wait_stopped(d, w, true);
		if (titled(w, title)) {
			kill(w, SIGKILL);
			h_wait_gone(d, w);
			return w;
		}
		kill(w, SIGCONT);
	}
	h_dump_log(d);
	cr_assert_fail("the worker never stopped titled \"%s...\"", title);
	return -1;
}

pid_t
h_start_in_pid_namespace(struct ferryd *f)
{
	pid_t pid = fork();

	cr_assert_neq(pid, -1);
	if (pid == 0) {
		const char *ferryd = getenv("FERRYD");
		char path[400];
		snprintf(path, sizeof(path), "%s", ferryd != NULL ? ferryd :
		    TEST_BUILDDIR "/ferryd");
		freopen(f->stderr_path, "a", stdout);
		freopen(f->stderr_path, "a", stderr);
		setpgid(0, 0);
		execlp("unshare", "unshare", "--pid", "--fork",
		    "--kill-child=SIGTERM", path, "-f", "-c", f->config,
		    (char *)NULL);
		_exit(127);
	}
	return pid;
}

int
h_stop_in_pid_namespace(pid_t unshare)
{
	pid_t child;
	int status;

	if (h_children(unshare, &child, 1) == 1)
		kill(child, SIGTERM);
	if ((status = h_wait_exit(unshare, H_DEADLINE_MS)) == -1) {
		kill(unshare, SIGKILL);     /* --kill-child: TERM to ferryd */
		waitpid(unshare, NULL, 0);
	}
	return status;
}
