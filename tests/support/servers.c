/* servers.c - real redis-server and PostgreSQL instances for integration
 * tests. See servers.h for the contract. Plain C11 + POSIX (plus Linux prctl
 * and close_range). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include "servers.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <grp.h>
#include <netinet/in.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define START_TIMEOUT_MS 30000
#define PORT_ATTEMPTS 8
#define DEFAULT_PG_BINDIR "/usr/lib/postgresql/15/bin"
#define TAIL_LINES 25

/* ------------------------------------------------------------------ */
/* small helpers */

long long
servers_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void
sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
		;
}

static const char *
tmp_base(void)
{
	const char *t = getenv("TMPDIR");
	/* unix socket paths (PostgreSQL's lives in the dir) must stay short */
	if (t != NULL && t[0] == '/' && strlen(t) < 64)
		return t;
	return "/tmp";
}

static int
make_temp_dir(char *out, size_t outsz, const char *kind)
{
	int n = snprintf(out, outsz, "%s/ferry-%s-XXXXXX", tmp_base(), kind);
	if (n < 0 || (size_t)n >= outsz) {
		fprintf(stderr, "servers: temp dir path too long\n");
		out[0] = '\0';
		return -1;
	}
	if (mkdtemp(out) == NULL) {
		fprintf(stderr, "servers: mkdtemp %s: %s\n", out, strerror(errno));
		out[0] = '\0';
		return -1;
	}
	return 0;
}

static int
rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	if (remove(path) != 0 && errno != ENOENT)
		fprintf(stderr, "servers: cannot remove %s: %s\n", path,
		    strerror(errno));
	return 0;
}

/* rm -rf, but only of the directories this file creates */
static void
remove_tree(const char *dir)
{
	if (dir == NULL || dir[0] != '/' || strstr(dir, "/ferry-") == NULL)
		return;
	nftw(dir, rm_entry, 32, FTW_DEPTH | FTW_PHYS);
}

static int
file_exists(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0;
}

/* Print the last `lines` lines of a file to stderr, indented. */
static void
print_tail(const char *path, int lines)
{
	FILE *f = fopen(path, "r");
	if (f == NULL) {
		fprintf(stderr, "  (no %s: %s)\n", path, strerror(errno));
		return;
	}
	static char buf[8192];
	long start = 0;
	if (fseek(f, 0, SEEK_END) == 0) {
		long size = ftell(f);
		if (size > (long)sizeof(buf) - 1)
			start = size - (long)sizeof(buf) + 1;
	}
	fseek(f, start, SEEK_SET);
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	if (n == 0) {
		fprintf(stderr, "  (%s is empty)\n", path);
		return;
	}
	/* find the start of the last `lines` lines */
	size_t end = n;
	if (end > 0 && buf[end - 1] == '\n')
		end--;
	size_t pos = end;
	int seen = 0;
	while (pos > 0) {
		if (buf[pos - 1] == '\n' && ++seen == lines)
			break;
		pos--;
	}
	fprintf(stderr, "  --- %s (last lines) ---\n", path);
	char *line = buf + pos;
	while (line < buf + end) {
		char *nl = memchr(line, '\n', (size_t)(buf + end - line));
		size_t len = nl ? (size_t)(nl - line) : (size_t)(buf + end - line);
		fprintf(stderr, "  | %.*s\n", (int)len, line);
		if (nl == NULL)
			break;
		line = nl + 1;
	}
}

static int
file_contains(const char *path, const char *needle)
{
	FILE *f = fopen(path, "r");
	if (f == NULL)
		return 0;
	char line[1024];
	int found = 0;
	while (!found && fgets(line, sizeof(line), f) != NULL)
		found = strstr(line, needle) != NULL;
	fclose(f);
	return found;
}

static void
describe_status(int status, char *out, size_t outsz)
{
	if (WIFEXITED(status))
		snprintf(out, outsz, "exited with status %d", WEXITSTATUS(status));
	else if (WIFSIGNALED(status))
		snprintf(out, outsz, "killed by signal %d", WTERMSIG(status));
	else
		snprintf(out, outsz, "ended (wait status %#x)", status);
}

/* ------------------------------------------------------------------ */
/* processes */

/* Has `pid` ended? Reaps it if it is our child. 1: gone (status in *status
 * if we reaped it, else -1), 0: still running. */
static int
check_gone(pid_t pid, int *status)
{
	int st;
	*status = -1;
	for (;;) {
		pid_t w = waitpid(pid, &st, WNOHANG);
		if (w == pid) {
			*status = st;
			return 1;
		}
		if (w == 0)
			return 0;
		if (errno == EINTR)
			continue;
		/* ECHILD: someone else reaped it (or it is not our child) */
		return kill(pid, 0) == -1 && errno == ESRCH;
	}
}

static int
wait_gone(pid_t pid, long timeout_ms, int *status)
{
	long long deadline = servers_now_ms() + timeout_ms;
	for (;;) {
		if (check_gone(pid, status))
			return 1;
		if (servers_now_ms() >= deadline)
			return 0;
		sleep_ms(10);
	}
}

/* Send sig1, wait; then sig2 (if nonzero), wait; then SIGKILL. Never leaves
 * the process running (short of the kernel refusing SIGKILL). */
static void
terminate(pid_t *pidp, int sig1, long wait1_ms, int sig2, long wait2_ms,
    const char *what)
{
	pid_t pid = *pidp;
	int status;
	if (pid <= 0)
		return;
	*pidp = 0;
	if (check_gone(pid, &status))
		return;
	if (kill(pid, sig1) == 0) {
		/* a SIGSTOPped server (test_redis_sigstop) must see sig1 */
		if (sig1 != SIGKILL)
			kill(pid, SIGCONT);
		if (wait_gone(pid, wait1_ms, &status))
			return;
	}
	if (sig2 != 0) {
		fprintf(stderr, "servers: %s (pid %d) still running %ld ms after "
		    "signal %d; sending signal %d\n", what, (int)pid, wait1_ms,
		    sig1, sig2);
		if (kill(pid, sig2) == 0 && wait_gone(pid, wait2_ms, &status))
			return;
	}
	if (check_gone(pid, &status))
		return;
	fprintf(stderr, "servers: %s (pid %d) did not stop; sending SIGKILL\n",
	    what, (int)pid);
	kill(pid, SIGKILL);
	if (!wait_gone(pid, 10000, &status))
		fprintf(stderr, "servers: %s (pid %d) survived SIGKILL for 10 s\n",
		    what, (int)pid);
}

struct spawn {
	char *const *argv;
	const char *stdin_path;  /* NULL: /dev/null */
	const char *out_path;    /* stdout+stderr, appended */
	const char *cwd;         /* NULL: unchanged */
	int switch_user;
	uid_t uid;
	gid_t gid;
	int deathsig;            /* PR_SET_PDEATHSIG, 0 for none */
	int new_pgrp;
};

static void
child_fail(const char *what)
{
	/* stderr is the log file by now */
	const char *err = strerror(errno);
	ssize_t ignored;
	ignored = write(2, "servers: child: ", 16);
	ignored = write(2, what, strlen(what));
	ignored = write(2, ": ", 2);
	ignored = write(2, err, strlen(err));
	ignored = write(2, "\n", 1);
	(void)ignored;
	_exit(127);
}

/* fork + exec; only async-signal-safe calls in the child. */
static pid_t
spawn(const struct spawn *s)
{
	pid_t parent = getpid();
	pid_t pid = fork();
	if (pid < 0) {
		fprintf(stderr, "servers: fork: %s\n", strerror(errno));
		return -1;
	}
	if (pid > 0)
		return pid;

	/* child */
	if (s->new_pgrp)
		setpgid(0, 0);
	int out = open(s->out_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC,
	    0644);
	if (out < 0)
		_exit(127);
	if (dup2(out, 1) < 0 || dup2(out, 2) < 0)
		_exit(127);
	int in = open(s->stdin_path ? s->stdin_path : "/dev/null",
	    O_RDONLY | O_CLOEXEC);
	if (in < 0)
		child_fail(s->stdin_path ? s->stdin_path : "/dev/null");
	if (dup2(in, 0) < 0)
		child_fail("dup2");
	/* do not leak the test runner's pipes and sockets into the server */
	if (close_range(3, ~0U, 0) != 0)
		for (int fd = 3; fd < 4096; fd++)
			close(fd);

	sigset_t all;
	sigemptyset(&all);
	sigprocmask(SIG_SETMASK, &all, NULL);
	for (int sig = 1; sig < 32; sig++)
		if (sig != SIGKILL && sig != SIGSTOP)
			signal(sig, SIG_DFL);

	if (s->cwd != NULL && chdir(s->cwd) != 0)
		child_fail(s->cwd);
	if (s->switch_user) {
		if (setgroups(1, &s->gid) != 0)
			child_fail("setgroups");
		if (setgid(s->gid) != 0)
			child_fail("setgid");
		if (setuid(s->uid) != 0)
			child_fail("setuid");
	}
	/* after the uid change, which clears it */
	if (s->deathsig != 0) {
		prctl(PR_SET_PDEATHSIG, s->deathsig);
		if (getppid() != parent)
			_exit(1);
	}
	execvp(s->argv[0], s->argv);
	child_fail(s->argv[0]);
	return -1; /* not reached */
}

/* Run to completion; 0 if it exited 0, else -1 with the reason in why. */
static int
run(const struct spawn *s, long timeout_ms, char *why, size_t whysz)
{
	pid_t pid = spawn(s);
	int status;
	if (pid < 0) {
		snprintf(why, whysz, "fork failed");
		return -1;
	}
	if (!wait_gone(pid, timeout_ms, &status)) {
		terminate(&pid, SIGTERM, 2000, 0, 0, s->argv[0]);
		snprintf(why, whysz, "timed out after %ld ms", timeout_ms);
		return -1;
	}
	if (status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return 0;
	if (status == -1)
		snprintf(why, whysz, "its exit status was lost");
	else
		describe_status(status, why, whysz);
	return -1;
}

/* ------------------------------------------------------------------ */
/* ports */

/* One port the kernel calls free on 127.0.0.1, or -1. */
static int
kernel_free_port(void)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		fprintf(stderr, "test_free_port: socket: %s\n", strerror(errno));
		return -1;
	}
	struct sockaddr_in a;
	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	a.sin_port = 0;
	socklen_t len = sizeof(a);
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0 ||
	    getsockname(fd, (struct sockaddr *)&a, &len) != 0) {
		fprintf(stderr, "test_free_port: bind 127.0.0.1:0: %s\n",
		    strerror(errno));
		close(fd);
		return -1;
	}
	close(fd);
	return ntohs(a.sin_port);
}

/*
 * A port free now and never handed out before by this process. The kernel
 * may give a port that was free a moment ago to the next bind(0) too: a
 * test that picks the metrics port first and then starts Redis saw both on
 * the same port. Remembering what was handed out rules that out within one
 * test process; servers that lose the race to another process retry.
 */
int
test_free_port(void)
{
	enum { REMEMBERED = 512 };
	static int given[REMEMBERED];
	static size_t ngiven, next;

	for (int attempt = 0; attempt < 64; attempt++) {
		int port = kernel_free_port();
		if (port < 0)
			return -1;
		size_t i = 0;
		while (i < ngiven && given[i] != port)
			i++;
		if (i < ngiven)
			continue;
		given[next] = port;
		next = (next + 1) % REMEMBERED;
		if (ngiven < REMEMBERED)
			ngiven++;
		return port;
	}
	fprintf(stderr, "test_free_port: 64 ports in a row were handed out "
	    "before\n");
	return -1;
}

/* ------------------------------------------------------------------ */
/* redis */

static const char *
redis_binary(void)
{
	const char *b = getenv("REDIS_SERVER");
	return b != NULL && b[0] != '\0' ? b : "redis-server";
}

/* End of the one RESP reply starting at p (nested arrays included), or NULL
 * if [p, end) does not hold all of it yet. */
static const char *
resp_end(const char *p, const char *end, int depth)
{
	const char *crlf = p < end ? memchr(p, '\n', (size_t)(end - p)) : NULL;
	if (crlf == NULL || depth > 8)
		return NULL;
	const char *next = crlf + 1;
	long n = strtol(p + 1, NULL, 10);
	switch (p[0]) {
	case '$':
		if (n < 0)
			return next;
		return end - next >= n + 2 ? next + n + 2 : NULL;
	case '*':
		for (long i = 0; i < n && next != NULL; i++)
			next = resp_end(next, end, depth + 1);
		return next;
	default:  /* + - : */
		return next;
	}
}

/* Send inline command(s), read `nreplies` complete replies into buf
 * (NUL-terminated). Returns the length of the replies or -1. */
static int
redis_roundtrip_ms(int port, const char *cmd, char *buf, size_t bufsz,
    int nreplies, int timeout_ms)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	struct timeval tv = { timeout_ms / 1000, (timeout_ms % 1000) * 1000 };
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	struct sockaddr_in a;
	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	a.sin_port = htons((uint16_t)port);
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
		close(fd);
		return -1;
	}
	size_t cl = strlen(cmd);
	if (send(fd, cmd, cl, MSG_NOSIGNAL) != (ssize_t)cl) {
		close(fd);
		return -1;
	}
	size_t have = 0;
	int complete = 0;
	while (!complete && have < bufsz - 1) {
		ssize_t n = recv(fd, buf + have, bufsz - 1 - have, 0);
		if (n <= 0)
			break;
		have += (size_t)n;
		buf[have] = '\0';
		const char *p = buf;
		for (int i = 0; i < nreplies && p != NULL; i++)
			p = resp_end(p, buf + have, 0);
		complete = p != NULL;
	}
	close(fd);
	if (!complete)
		return -1;
	return (int)have;
}

static int
redis_roundtrip(int port, const char *cmd, char *buf, size_t bufsz,
    int nreplies)
{
	return redis_roundtrip_ms(port, cmd, buf, bufsz, nreplies, 2000);
}

static int
redis_command_ms(int port, const char *inline_cmd, char *buf, size_t bufsz,
    int timeout_ms)
{
	char line[4096];
	if (port <= 0 || buf == NULL || bufsz < 2)
		return -1;
	buf[0] = '\0';
	int n = snprintf(line, sizeof(line), "%s\r\n", inline_cmd);
	if (n < 0 || (size_t)n >= sizeof(line))
		return -1;
	int nreplies = 0;
	for (const char *p = line; (p = strstr(p, "\r\n")) != NULL; p += 2)
		nreplies++;
	return redis_roundtrip_ms(port, line, buf, bufsz, nreplies, timeout_ms);
}

int
test_redis_command(int port, const char *inline_cmd, char *buf, size_t bufsz)
{
	return redis_command_ms(port, inline_cmd, buf, bufsz, 2000);
}

int
test_redis_ping(const struct test_redis *r)
{
	char buf[256];
	if (r == NULL || r->port <= 0)
		return -1;
	if (redis_roundtrip(r->port, "PING\r\n", buf, sizeof(buf), 1) < 0)
		return -1;
	return strncmp(buf, "+PONG", 5) == 0 ? 0 : -1;
}

/* Is the server on r->port ours (process_id == r->pid)? 1 yes, 0 no, -1 ? */
static int
redis_is_ours(const struct test_redis *r)
{
	char buf[8192];
	if (redis_roundtrip(r->port, "INFO server\r\n", buf, sizeof(buf), 1) < 0)
		return -1;
	const char *p = strstr(buf, "process_id:");
	if (p == NULL)
		return -1;
	return atol(p + strlen("process_id:")) == (long)r->pid;
}

enum { READY = 0, FAILED = -1, EXITED = 1, PORT_TAKEN = 2 };

static int
redis_spawn(struct test_redis *r, const char *const *extra)
{
	char port[16], logfile[300], outfile[300];
	snprintf(port, sizeof(port), "%d", r->port);
	snprintf(logfile, sizeof(logfile), "%s/redis.log", r->dir);
	snprintf(outfile, sizeof(outfile), "%s/redis.out", r->dir);
	size_t nextra = 0;
	while (extra != NULL && extra[nextra] != NULL)
		nextra++;
	const char *fixed[] = {
		redis_binary(), "--port", port, "--bind", "127.0.0.1",
		"--dir", r->dir, "--save", "", "--appendonly", "no",
		"--daemonize", "no", "--logfile", logfile,
	};
	size_t nfixed = sizeof(fixed) / sizeof(fixed[0]);
	const char **argv = calloc(nfixed + nextra + 1, sizeof(*argv));
	if (argv == NULL) {
		fprintf(stderr, "servers: out of memory\n");
		return -1;
	}
	memcpy(argv, fixed, sizeof(fixed));
	for (size_t i = 0; i < nextra; i++)
		argv[nfixed + i] = extra[i];
	struct spawn s = {
		.argv = (char *const *)argv,
		.out_path = outfile,
		.cwd = r->dir,
		.deathsig = SIGKILL,
		.new_pgrp = 1,
	};
	pid_t pid = spawn(&s);
	free(argv);
	if (pid < 0)
		return -1;
	r->pid = pid;
	return 0;
}

static int
redis_wait_ready(struct test_redis *r, char *why, size_t whysz)
{
	long long deadline = servers_now_ms() + START_TIMEOUT_MS;
	for (;;) {
		if (servers_gone(r->pid, why, whysz)) {
			r->pid = 0;
			return EXITED;
		}
		if (test_redis_ping(r) == 0) {
			int ours = redis_is_ours(r);
			if (ours == 1)
				return READY;
			if (ours == 0) {
				snprintf(why, whysz, "another server answers on "
				    "that port");
				return PORT_TAKEN;
			}
		}
		if (servers_now_ms() >= deadline) {
			snprintf(why, whysz, "no PONG within %d s",
			    START_TIMEOUT_MS / 1000);
			return FAILED;
		}
		sleep_ms(20);
	}
}

static void
redis_report(const struct test_redis *r, const char *why)
{
	char path[300];
	fprintf(stderr, "redis-server failed to start on 127.0.0.1:%d (%s, dir "
	    "%s): %s\n", r->port, redis_binary(), r->dir, why);
	int shown = 0;
	snprintf(path, sizeof(path), "%s/redis.log", r->dir);
	if (file_exists(path)) {
		print_tail(path, TAIL_LINES);
		shown = 1;
	}
	/* stdout/stderr: config errors, exec failures */
	snprintf(path, sizeof(path), "%s/redis.out", r->dir);
	if (file_exists(path) || !shown)
		print_tail(path, TAIL_LINES);
}

static int
redis_port_conflict(const struct test_redis *r, int rc)
{
	char path[300];
	if (rc == PORT_TAKEN)
		return 1;
	if (rc != EXITED)
		return 0;
	snprintf(path, sizeof(path), "%s/redis.log", r->dir);
	if (file_contains(path, "Address already in use"))
		return 1;
	snprintf(path, sizeof(path), "%s/redis.out", r->dir);
	return file_contains(path, "Address already in use");
}

int
test_redis_start(struct test_redis *r, const char *const *extra_args)
{
	char why[256];
	memset(r, 0, sizeof(*r));
	if (make_temp_dir(r->dir, sizeof(r->dir), "redis") != 0)
		return -1;
	for (int attempt = 1;; attempt++) {
		r->port = test_free_port();
		if (r->port < 0)
			break;
		if (redis_spawn(r, extra_args) != 0)
			break;
		int rc = redis_wait_ready(r, why, sizeof(why));
		if (rc == READY)
			return 0;
		terminate(&r->pid, SIGKILL, 5000, 0, 0, "redis-server");
		if (redis_port_conflict(r, rc) && attempt < PORT_ATTEMPTS) {
			char path[300];
			snprintf(path, sizeof(path), "%s/redis.log", r->dir);
			unlink(path);
			snprintf(path, sizeof(path), "%s/redis.out", r->dir);
			unlink(path);
			continue;
		}
		redis_report(r, why);
		break;
	}
	remove_tree(r->dir);
	r->dir[0] = '\0';
	r->pid = 0;
	return -1;
}

int
test_redis_restart(struct test_redis *r, const char *const *extra_args)
{
	char why[256];
	if (r->dir[0] == '\0' || r->port <= 0) {
		fprintf(stderr, "test_redis_restart: server was never started\n");
		return -1;
	}
	if (r->pid > 0) {
		fprintf(stderr, "test_redis_restart: redis-server (pid %d) is "
		    "still running; stop or kill9 it first\n", (int)r->pid);
		return -1;
	}
	if (redis_spawn(r, extra_args) != 0)
		return -1;
	int rc = redis_wait_ready(r, why, sizeof(why));
	if (rc == READY)
		return 0;
	terminate(&r->pid, SIGKILL, 5000, 0, 0, "redis-server");
	redis_report(r, why);
	return -1;
}

void
test_redis_kill9(struct test_redis *r)
{
	if (r == NULL)
		return;
	terminate(&r->pid, SIGKILL, 10000, 0, 0, "redis-server");
}

void
test_redis_stop(struct test_redis *r)
{
	if (r == NULL)
		return;
	terminate(&r->pid, SIGTERM, 10000, 0, 0, "redis-server");
	if (r->dir[0] != '\0')
		remove_tree(r->dir);
	r->dir[0] = '\0';
}

/* ------------------------------------------------------------------ */
/* PostgreSQL */

struct pg_user {
	int switch_user;
	uid_t uid;
	gid_t gid;
};

static const char *
pg_bindir(void)
{
	const char *b = getenv("PG_BINDIR");
	return b != NULL && b[0] != '\0' ? b : DEFAULT_PG_BINDIR;
}

static int
pg_get_user(struct pg_user *u)
{
	memset(u, 0, sizeof(*u));
	if (geteuid() != 0)
		return 0;
	struct passwd *pw = getpwnam("postgres");
	if (pw == NULL) {
		fprintf(stderr, "servers: running as root, but there is no user "
		    "\"postgres\" to run initdb and postgres as (apt-get install "
		    "postgresql-15 creates it)\n");
		return -1;
	}
	u->switch_user = 1;
	u->uid = pw->pw_uid;
	u->gid = pw->pw_gid;
	return 0;
}

/* Give a dir we created to the postgres user (when root). */
static int
pg_chown(const struct pg_user *u, const char *path)
{
	if (!u->switch_user)
		return 0;
	if (chown(path, u->uid, u->gid) != 0) {
		fprintf(stderr, "servers: chown %s to postgres: %s\n", path,
		    strerror(errno));
		return -1;
	}
	return 0;
}

/* $TMPDIR/ferry-pg-template-<euid>-<hash of bindir and postgres binary> */
static int
pg_template_path(char *out, size_t outsz)
{
	char bin[512];
	struct stat st;
	snprintf(bin, sizeof(bin), "%s/postgres", pg_bindir());
	if (stat(bin, &st) != 0) {
		fprintf(stderr, "servers: %s: %s (set PG_BINDIR to the directory "
		    "of initdb and postgres)\n", bin, strerror(errno));
		return -1;
	}
	uint64_t h = 1469598103934665603ULL;
	char key[700];
	snprintf(key, sizeof(key), "v1|%s|%llu|%llu|%lld", bin,
	    (unsigned long long)st.st_ino, (unsigned long long)st.st_size,
	    (long long)st.st_mtime);
	for (const char *p = key; *p; p++) {
		h ^= (unsigned char)*p;
		h *= 1099511628211ULL;
	}
	snprintf(out, outsz, "%s/ferry-pg-template-%u-%016llx", tmp_base(),
	    (unsigned)geteuid(), (unsigned long long)h);
	return 0;
}

/* A complete template has its marker; it is also ours and not writable by
 * others (it lives in a shared /tmp). */
static int
pg_template_ok(const char *tmpl, const struct pg_user *u)
{
	char path[600];
	struct stat st;
	if (lstat(tmpl, &st) != 0 || !S_ISDIR(st.st_mode))
		return 0;
	uid_t owner = u->switch_user ? u->uid : geteuid();
	if (st.st_uid != owner || (st.st_mode & 022) != 0)
		return 0;
	snprintf(path, sizeof(path), "%s/complete", tmpl);
	if (!file_exists(path))
		return 0;
	snprintf(path, sizeof(path), "%s/data/global/pg_control", tmpl);
	return file_exists(path);
}

/* initdb + CREATE DATABASE ferry into a private dir, then rename it into
 * place (atomic: concurrent processes race harmlessly). */
static int
pg_template(char *tmpl, size_t tmplsz, const struct pg_user *u)
{
	char build[256], data[300], log[300], sql[300], marker[300], why[256];
	if (pg_template_path(tmpl, tmplsz) != 0)
		return -1;
	if (pg_template_ok(tmpl, u))
		return 0;
	if (file_exists(tmpl)) {
		/* incomplete or foreign: not usable. Ours and stale? replace. */
		struct stat st;
		uid_t owner = u->switch_user ? u->uid : geteuid();
		if (lstat(tmpl, &st) == 0 && S_ISDIR(st.st_mode) &&
		    st.st_uid == owner) {
			char old[300];
			snprintf(old, sizeof(old), "%s.stale-%d", tmpl,
			    (int)getpid());
			if (rename(tmpl, old) == 0)
				remove_tree(old);
		}
		if (file_exists(tmpl)) {
			fprintf(stderr, "servers: %s exists but is not a usable "
			    "template cluster; remove it\n", tmpl);
			return -1;
		}
	}

	if (make_temp_dir(build, sizeof(build), "pgtmpl-build") != 0)
		return -1;
	if (pg_chown(u, build) != 0)
		goto fail;
	snprintf(data, sizeof(data), "%s/data", build);
	snprintf(log, sizeof(log), "%s/initdb.log", build);
	snprintf(sql, sizeof(sql), "%s/create.sql", build);

	char initdb[512], postgres[512];
	snprintf(initdb, sizeof(initdb), "%s/initdb", pg_bindir());
	snprintf(postgres, sizeof(postgres), "%s/postgres", pg_bindir());
	char *initdb_argv[] = {
		initdb, "-D", data, "-U", "postgres", "-A", "trust",
		"-E", "UTF8", "--no-locale", "--no-sync", "--no-instructions",
		NULL,
	};
	struct spawn s = {
		.argv = initdb_argv,
		.out_path = log,
		.cwd = build,
		.switch_user = u->switch_user,
		.uid = u->uid,
		.gid = u->gid,
		.deathsig = SIGKILL,
	};
	if (run(&s, 120000, why, sizeof(why)) != 0) {
		fprintf(stderr, "servers: initdb -D %s failed: %s\n", data, why);
		print_tail(log, TAIL_LINES);
		goto fail;
	}

	FILE *f = fopen(sql, "w");
	if (f == NULL || fputs("CREATE DATABASE ferry;\n", f) == EOF ||
	    fclose(f) != 0) {
		fprintf(stderr, "servers: write %s: %s\n", sql, strerror(errno));
		goto fail;
	}
	char *single_argv[] = {
		postgres, "--single", "-D", data, "-F", "-c", "exit_on_error=on",
		"postgres", NULL,
	};
	s.argv = single_argv;
	s.stdin_path = sql;
	if (run(&s, 120000, why, sizeof(why)) != 0) {
		fprintf(stderr, "servers: postgres --single (CREATE DATABASE "
		    "ferry) in %s failed: %s\n", data, why);
		print_tail(log, TAIL_LINES);
		goto fail;
	}
	snprintf(marker, sizeof(marker), "%s/complete", build);
	f = fopen(marker, "w");
	if (f == NULL || fclose(f) != 0) {
		fprintf(stderr, "servers: write %s: %s\n", marker,
		    strerror(errno));
		goto fail;
	}
	if (rename(build, tmpl) != 0) {
		if (pg_template_ok(tmpl, u)) { /* another process won the race */
			remove_tree(build);
			return 0;
		}
		fprintf(stderr, "servers: rename %s to %s: %s\n", build, tmpl,
		    strerror(errno));
		goto fail;
	}
	return 0;
fail:
	remove_tree(build);
	return -1;
}

/* A program of PostgreSQL's run in p's directory as the server's user,
 * its output appended to log. */
static struct spawn
pg_spawn_as(const struct test_pg *p, const struct pg_user *u, char **argv,
    const char *log)
{
	struct spawn s = {
		.argv = argv,
		.out_path = log,
		.cwd = p->dir,
		.switch_user = u->switch_user,
		.uid = u->uid,
		.gid = u->gid,
	};
	return s;
}

static int
pg_spawn(struct test_pg *p, const struct pg_user *u)
{
	char postgres[512], data[300], log[300], port[16];
	snprintf(postgres, sizeof(postgres), "%s/postgres", pg_bindir());
	snprintf(data, sizeof(data), "%s/data", p->dir);
	snprintf(log, sizeof(log), "%s/postgres.log", p->dir);
	snprintf(port, sizeof(port), "%d", p->port);
	char *argv[] = {
		postgres, "-D", data, "-k", p->dir, "-h", "127.0.0.1",
		"-p", port,
		/* tests, not production: the OS page cache is durable enough
		 * for kill -9 of the server; only a host crash would lose data */
		"-c", "fsync=off", "-c", "full_page_writes=off",
		"-c", "shared_buffers=32MB", "-c", "max_connections=100",
		NULL,
	};
	struct spawn s = pg_spawn_as(p, u, argv, log);
	/* immediate shutdown: postmaster takes its backends along */
	s.deathsig = SIGQUIT;
	s.new_pgrp = 1;
	pid_t pid = spawn(&s);
	if (pid < 0)
		return -1;
	p->pid = pid;
	return 0;
}

/* postmaster.pid: line 1 pid, ..., line 8 status ("ready" once it accepts
 * connections). */
static int
pg_is_ready(const struct test_pg *p)
{
	char path[300], line[512];
	snprintf(path, sizeof(path), "%s/data/postmaster.pid", p->dir);
	FILE *f = fopen(path, "r");
	if (f == NULL)
		return 0;
	int ok = 0;
	for (int n = 1; fgets(line, sizeof(line), f) != NULL; n++) {
		if (n == 1 && atol(line) != (long)p->pid)
			break;
		if (n == 8) {
			/* a hot standby accepts connections as "standby" */
			ok = strncmp(line, "ready", 5) == 0 ||
			    strncmp(line, "standby", 7) == 0;
			break;
		}
	}
	fclose(f);
	return ok;
}

static int
pg_wait_ready(struct test_pg *p, char *why, size_t whysz)
{
	long long deadline = servers_now_ms() + START_TIMEOUT_MS;
	for (;;) {
		if (servers_gone(p->pid, why, whysz)) {
			p->pid = 0;
			return EXITED;
		}
		if (pg_is_ready(p))
			return READY;
		if (servers_now_ms() >= deadline) {
			snprintf(why, whysz, "not accepting connections within "
			    "%d s", START_TIMEOUT_MS / 1000);
			return FAILED;
		}
		sleep_ms(20);
	}
}

static void
pg_report(const struct test_pg *p, const char *why)
{
	char path[300];
	fprintf(stderr, "postgres failed to start on 127.0.0.1:%d (%s/postgres, "
	    "dir %s): %s\n", p->port, pg_bindir(), p->dir, why);
	snprintf(path, sizeof(path), "%s/postgres.log", p->dir);
	print_tail(path, TAIL_LINES);
}

static void
pg_set_conninfo(struct test_pg *p)
{
	snprintf(p->conninfo, sizeof(p->conninfo),
	    "host=127.0.0.1 port=%d dbname=ferry user=postgres "
	    "sslmode=disable connect_timeout=10", p->port);
}

static void
pg_shutdown(struct test_pg *p)
{
	/* SIGINT = fast shutdown, SIGQUIT = immediate */
	terminate(&p->pid, SIGINT, 30000, SIGQUIT, 5000, "postgres");
}

/* Start the cluster in p->dir on a free port, trying another when the
 * port was taken meanwhile; wait until it accepts connections. */
static int
pg_spawn_on_free_port(struct test_pg *p, const struct pg_user *u)
{
	char why[256];

	for (int attempt = 1;; attempt++) {
		p->port = test_free_port();
		if (p->port < 0 || pg_spawn(p, u) != 0)
			return -1;
		int rc = pg_wait_ready(p, why, sizeof(why));
		if (rc == READY) {
			pg_set_conninfo(p);
			return 0;
		}
		pg_shutdown(p);
		char log[300];
		snprintf(log, sizeof(log), "%s/postgres.log", p->dir);
		if (rc == EXITED && attempt < PORT_ATTEMPTS &&
		    file_contains(log, "Address already in use")) {
			unlink(log);
			continue;
		}
		pg_report(p, why);
		return -1;
	}
}

/* A start that failed: its directory goes, p is cleared. */
static int
pg_start_failed(struct test_pg *p)
{
	remove_tree(p->dir);
	memset(p, 0, sizeof(*p));
	return -1;
}

int
test_pg_start(struct test_pg *p)
{
	struct pg_user u;
	char tmpl[256], why[256], data[300], src[300];
	memset(p, 0, sizeof(*p));
	if (pg_get_user(&u) != 0 || pg_template(tmpl, sizeof(tmpl), &u) != 0)
		return -1;
	if (make_temp_dir(p->dir, sizeof(p->dir), "pg") != 0)
		return -1;
	if (pg_chown(&u, p->dir) != 0)
		goto fail;
	snprintf(src, sizeof(src), "%s/data", tmpl);
	snprintf(data, sizeof(data), "%s/data", p->dir);
	char *cp_argv[] = { "cp", "-a", src, data, NULL };
	char cplog[300];
	snprintf(cplog, sizeof(cplog), "%s/cp.log", p->dir);
	struct spawn s = { .argv = cp_argv, .out_path = cplog };
	if (run(&s, 60000, why, sizeof(why)) != 0) {
		fprintf(stderr, "servers: cp -a %s %s failed: %s\n", src, data,
		    why);
		print_tail(cplog, TAIL_LINES);
		goto fail;
	}
	unlink(cplog);
	if (pg_spawn_on_free_port(p, &u) == 0)
		return 0;
fail:
	return pg_start_failed(p);
}

int
test_pg_pause(struct test_pg *p)
{
	if (p == NULL || p->pid <= 0) {
		fprintf(stderr, "test_pg_pause: postgres is not running\n");
		return -1;
	}
	pg_shutdown(p);
	return 0;
}

int
test_pg_resume(struct test_pg *p)
{
	struct pg_user u;
	char why[256];
	if (p == NULL || p->dir[0] == '\0' || p->port <= 0) {
		fprintf(stderr, "test_pg_resume: postgres was never started\n");
		return -1;
	}
	if (p->pid > 0) {
		fprintf(stderr, "test_pg_resume: postgres (pid %d) is still "
		    "running\n", (int)p->pid);
		return -1;
	}
	if (pg_get_user(&u) != 0 || pg_spawn(p, &u) != 0)
		return -1;
	int rc = pg_wait_ready(p, why, sizeof(why));
	if (rc == READY)
		return 0;
	pg_shutdown(p);
	pg_report(p, why);
	return -1;
}

void
test_pg_stop(struct test_pg *p)
{
	if (p == NULL)
		return;
	pg_shutdown(p);
	if (p->dir[0] != '\0')
		remove_tree(p->dir);
	p->dir[0] = '\0';
}

/* A helper program of PG_BINDIR (pg_basebackup, pg_ctl) as the server's
 * user, its output into DIR/what.log (kept when it fails). */
static int
pg_tool(const struct test_pg *p, const struct pg_user *u, char **argv,
    const char *what, long timeout_ms)
{
	char log[300], why[256];

	snprintf(log, sizeof(log), "%s/%s.log", p->dir, what);
	struct spawn s = pg_spawn_as(p, u, argv, log);
	s.deathsig = SIGKILL;
	if (run(&s, timeout_ms, why, sizeof(why)) != 0) {
		fprintf(stderr, "servers: %s failed: %s\n", argv[0], why);
		print_tail(log, TAIL_LINES);
		return -1;
	}
	return 0;
}

int
test_pg_standby_start(struct test_pg *p, const struct test_pg *primary)
{
	struct pg_user u;
	char bin[512], data[300], port[16];

	memset(p, 0, sizeof(*p));
	if (primary == NULL || primary->pid <= 0) {
		fprintf(stderr, "test_pg_standby_start: the primary is not "
		    "running\n");
		return -1;
	}
	if (pg_get_user(&u) != 0 ||
	    make_temp_dir(p->dir, sizeof(p->dir), "pgstandby") != 0)
		return -1;
	if (pg_chown(&u, p->dir) != 0)
		goto fail;
	snprintf(bin, sizeof(bin), "%s/pg_basebackup", pg_bindir());
	snprintf(data, sizeof(data), "%s/data", p->dir);
	snprintf(port, sizeof(port), "%d", primary->port);
	char *argv[] = {
		bin, "-h", "127.0.0.1", "-p", port, "-U", "postgres", "-D", data,
		"-R", "-X", "stream", "-c", "fast", "--no-sync", NULL,
	};
	if (pg_tool(p, &u, argv, "basebackup", 120000) != 0)
		goto fail;
	if (pg_spawn_on_free_port(p, &u) == 0)
		return 0;
fail:
	return pg_start_failed(p);
}

int
test_pg_kill_immediate(struct test_pg *p)
{
	if (p == NULL || p->pid <= 0) {
		fprintf(stderr, "test_pg_kill_immediate: postgres is not "
		    "running\n");
		return -1;
	}
	/* SIGQUIT is pg_ctl stop -m immediate: no checkpoint, backends gone */
	terminate(&p->pid, SIGQUIT, 10000, SIGKILL, 5000, "postgres");
	return 0;
}

int
test_pg_promote(struct test_pg *p)
{
	struct pg_user u;
	char bin[512], data[300];

	if (p == NULL || p->pid <= 0) {
		fprintf(stderr, "test_pg_promote: postgres is not running\n");
		return -1;
	}
	snprintf(bin, sizeof(bin), "%s/pg_ctl", pg_bindir());
	snprintf(data, sizeof(data), "%s/data", p->dir);
	char *argv[] = { bin, "promote", "-w", "-t", "60", "-D", data, NULL };
	if (pg_get_user(&u) != 0 || pg_tool(p, &u, argv, "promote", 90000) != 0)
		return -1;
	return 0;
}

/* ------------------------------------------------------------------ */
/* helpers shared with servers_ha.c (declared at the end of servers.h) */

void
servers_sleep_ms(long ms)
{
	sleep_ms(ms);
}

int
servers_make_temp_dir(char *out, size_t outsz, const char *kind)
{
	return make_temp_dir(out, outsz, kind);
}

void
servers_remove_tree(const char *dir)
{
	remove_tree(dir);
}

void
servers_print_tail(const char *path)
{
	print_tail(path, TAIL_LINES);
}

int
servers_file_contains(const char *path, const char *needle)
{
	return file_contains(path, needle);
}

const char *
servers_redis_binary(void)
{
	return redis_binary();
}

pid_t
servers_spawn_daemon(char *const *argv, const char *cwd, const char *out_path)
{
	struct spawn s = {
		.argv = argv,
		.out_path = out_path,
		.cwd = cwd,
		.deathsig = SIGKILL,
		.new_pgrp = 1,
	};
	return spawn(&s);
}

int
servers_gone(pid_t pid, char *why, size_t whysz)
{
	int status;
	if (!check_gone(pid, &status))
		return 0;
	if (status == -1)
		snprintf(why, whysz, "it exited");
	else
		describe_status(status, why, whysz);
	return 1;
}

void
servers_terminate(pid_t *pidp, int sig, long wait_ms, const char *what)
{
	terminate(pidp, sig, wait_ms, 0, 0, what);
}

int
servers_redis_command_ms(int port, const char *inline_cmd, char *buf,
    size_t bufsz, int timeout_ms)
{
	if (timeout_ms <= 0)
		return -1;
	return redis_command_ms(port, inline_cmd, buf, bufsz, timeout_ms);
}

const char *
servers_resp_end(const char *p, const char *end)
{
	return resp_end(p, end, 0);
}
