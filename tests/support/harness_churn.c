/* harness_churn.c - see harness_churn.h. The writer is a forked child with
 * its own hiredis connection: the test's process stays free to drive
 * ferryd, and the churn goes on at its rate whatever the test waits for.
 * It tells its parent through a pipe when it is connected, and at the end
 * how many SETs Redis took and refused. */
#include "harness_churn.h"
#include "harness.h"

#include <errno.h>
#include <hiredis/hiredis.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#define CHURN_PIPELINE 64       /* SETs in flight at once */
#define CHURN_STEP_MS 2         /* the writer sleeps this when ahead */
#define CHURN_WAIT_MS 10000     /* to connect, and to stop */

static volatile sig_atomic_t stopping;

static void
on_term(int sig)
{
	(void)sig;
	stopping = 1;
}

static redisContext *
connect_to(int port)
{
	struct timeval tv = { 2, 0 };
	redisContext *c = redisConnectWithTimeout("127.0.0.1", port, tv);

	if (c != NULL && c->err == 0 && redisSetTimeout(c, tv) == REDIS_OK)
		return c;
	redisFree(c);
	return NULL;
}

/* One pipelined round of n SETs from key number *next on; counts what
 * Redis took and refused. -1 when the connection is lost. */
static int
set_round(redisContext *c, const struct h_churn_opts *o, const char *value,
    long long *next, int n, long long *keys, long long *errors)
{
	for (int i = 0; i < n; i++)
		redisAppendCommand(c, "SET %s%lld %b PX %ld", o->prefix,
		    (*next)++, value, o->value_size, o->ttl_ms);
	for (int i = 0; i < n; i++) {
		redisReply *r;
		if (redisGetReply(c, (void **)&r) != REDIS_OK) {
			*errors += n - i;
			return -1;
		}
		if (r->type == REDIS_REPLY_ERROR)
			(*errors)++;
		else
			(*keys)++;
		freeReplyObject(r);
	}
	return 0;
}

/* The child: write at the rate until SIGTERM, then report and exit. */
static void
writer(int port, const struct h_churn_opts *o, int fd, pid_t parent)
{
	struct sigaction sa;
	sigset_t all;
	long long keys = 0, errors = 0, next = 0, sent = 0;
	char *value = malloc(o->value_size), report[64];
	redisContext *c;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_term;
	sigaction(SIGTERM, &sa, NULL);
	sa.sa_handler = SIG_IGN;
	sigaction(SIGPIPE, &sa, NULL);
	sigemptyset(&all);
	sigprocmask(SIG_SETMASK, &all, NULL);
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent || value == NULL)
		_exit(1);
	memset(value, 'c', o->value_size);
	if ((c = connect_to(port)) == NULL)
		_exit(1);
	if (write(fd, "ready\n", 6) != 6)
		_exit(1);
	long long start = h_now_ms();
	while (!stopping) {
		long long due = o->bytes_per_s * (h_now_ms() - start) / 1000;
		if (due - sent > o->bytes_per_s)
			sent = due - o->bytes_per_s;    /* at most 1 s behind */
		if (sent >= due) {
			h_sleep_ms(CHURN_STEP_MS);
			continue;
		}
		long long n = (due - sent) / (long long)o->value_size + 1;
		if (n > CHURN_PIPELINE)
			n = CHURN_PIPELINE;
		if (c == NULL || set_round(c, o, value, &next, (int)n, &keys,
		    &errors) == -1) {
			redisFree(c);           /* Redis restarted, or gone */
			h_sleep_ms(100);
			c = connect_to(port);
		}
		sent += n * (long long)o->value_size;
	}
	int len = snprintf(report, sizeof(report), "%lld %lld\n", keys, errors);
	_exit(write(fd, report, (size_t)len) == len ? 0 : 1);
}

/* Read into buf (size) from fd until a newline or the deadline. */
static int
read_line(int fd, char *buf, size_t size, long long deadline)
{
	size_t len = 0;

	while (len < size - 1 && h_now_ms() < deadline) {
		struct pollfd p = { fd, POLLIN, 0 };
		if (poll(&p, 1, 50) <= 0)
			continue;
		ssize_t n = read(fd, buf + len, 1);
		if (n <= 0)
			break;
		if (buf[len++] == '\n')
			break;
	}
	buf[len] = '\0';
	return len > 0 && buf[len - 1] == '\n' ? 0 : -1;
}

int
h_churn_start(struct h_churn *c, int port, const struct h_churn_opts *o)
{
	struct h_churn_opts opts = *o;
	int p[2];
	char line[64];

	memset(c, 0, sizeof(*c));
	c->fd = -1;
	if (opts.prefix == NULL)
		opts.prefix = "app:cache:";
	if (opts.value_size == 0)
		opts.value_size = 1024;
	if (opts.ttl_ms == 0)
		opts.ttl_ms = 60000;
	if (opts.bytes_per_s <= 0 || pipe(p) == -1) {
		fprintf(stderr, "h_churn_start: no rate, or pipe: %s\n",
		    strerror(errno));
		return -1;
	}
	pid_t parent = getpid();
	fflush(NULL);
	if ((c->pid = fork()) == 0) {
		close(p[0]);
		writer(port, &opts, p[1], parent);
	}
	close(p[1]);
	if (c->pid == -1) {
		fprintf(stderr, "h_churn_start: fork: %s\n", strerror(errno));
		close(p[0]);
		c->pid = 0;
		return -1;
	}
	c->fd = p[0];
	if (read_line(c->fd, line, sizeof(line), h_now_ms() + CHURN_WAIT_MS) ==
	    -1 || strcmp(line, "ready\n") != 0) {
		fprintf(stderr, "h_churn_start: the writer did not connect to "
		    "127.0.0.1:%d\n", port);
		h_churn_stop(c);
		return -1;
	}
	return 0;
}

long long
h_churn_stop(struct h_churn *c)
{
	char line[64];
	int status = -1;
	long long ok = -1;

	if (c->pid <= 0)
		return c->keys;
	kill(c->pid, SIGTERM);
	for (long long end = h_now_ms() + CHURN_WAIT_MS; h_now_ms() < end;
	    h_sleep_ms(10))
		if (waitpid(c->pid, &status, WNOHANG) == c->pid)
			break;
	if (!WIFEXITED(status)) {
		kill(c->pid, SIGKILL);
		waitpid(c->pid, &status, 0);
	}
	if (read_line(c->fd, line, sizeof(line), h_now_ms() + 100) == 0 &&
	    sscanf(line, "%lld %lld", &c->keys, &c->errors) == 2)
		ok = c->keys;
	else
		fprintf(stderr, "h_churn_stop: the writer (pid %d) ended without "
		    "a report (status %d)\n", (int)c->pid, status);
	close(c->fd);
	c->fd = -1;
	c->pid = 0;
	return ok;
}
