/* handler_exec.c - handler = exec: run the queue's command once per batch,
 * without a shell, in its own process group; feed it one line per job on
 * stdin while reading result lines from stdout in one poll() loop. */
#include "handler.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <sys/prctl.h>

extern char **environ;

#include "handler_env.h"
#include "json_scan.h"
#include "util.h"

#define RESULT_LINE_MAX 65536   /* longer result lines are dropped */
#define READ_CHUNK 65536
#define UNKNOWN_SHOWN 3         /* unmatched lines described in err */
#define SHOWN_MAX 200           /* bytes of such a line described */

struct exec_run {
	struct job *jobs;
	struct handler_result *results;
	int n;
	int first_pending;      /* no valid pending job before this index */
	pid_t pid;
	int in_fd;              /* the handler's stdin, -1 once closed */
	int out_fd;             /* the handler's stdout, -1 after EOF */
	int next_job;           /* next job to write */
	char *wbuf;             /* the line being written */
	size_t wlen, woff;
	char *rbuf;             /* unparsed stdout bytes */
	size_t rlen;
	bool discarding;        /* inside an over-long line */
	int unknown;            /* lines that matched no pending job */
	char unknown_text[UNKNOWN_SHOWN * (SHOWN_MAX + 100)];  /* the first */
	bool timed_out;         /* killed at handler_timeout */
	int status;             /* from waitpid */
};

static bool
is_pending(const struct exec_run *r, int i)
{
	return r->jobs[i].invalid == NULL &&
	    r->results[i].outcome == HANDLER_PENDING;
}

static void
skip_settled(struct exec_run *r)
{
	while (r->first_pending < r->n && !is_pending(r, r->first_pending))
		r->first_pending++;
}

/* Split cmd on blanks into a NULL-terminated argv whose strings live in
 * *buf. "..." keeps blanks, with \" and \\ as its only escapes. */
static char **
split_command(const char *cmd, char **buf, const char **why)
{
	size_t len = strlen(cmd);
	char **argv = xcalloc(len / 2 + 2, sizeof(*argv));
	char *o = *buf = xmalloc(len + 1);
	const char *p = cmd;
	int argc = 0;

	for (;;) {
		bool quoted = false;
		while (*p == ' ' || *p == '\t')
			p++;
		if (*p == '\0')
			break;
		argv[argc++] = o;
		while (*p != '\0' && (quoted || (*p != ' ' && *p != '\t'))) {
			if (*p == '"') {
				quoted = !quoted;
				p++;
				continue;
			}
			if (quoted && *p == '\\' && (p[1] == '"' || p[1] == '\\'))
				p++;
			*o++ = *p++;
		}
		*o++ = '\0';
		if (quoted) {
			argc = -1;
			break;
		}
	}
	if (argc > 0)
		return argv;
	*why = argc == 0 ? "empty command" : "unterminated quote";
	free(argv);
	return NULL;
}

/* Mark every fd above 2 close-on-exec: the exec closes them, and the error
 * pipe still reports a failed exec. */
static void
cloexec_other_fds(void)
{
	DIR *d;
	struct dirent *de;

#ifdef CLOSE_RANGE_CLOEXEC
	if (close_range(3, ~0U, CLOSE_RANGE_CLOEXEC) == 0)
		return;
#endif
	if ((d = opendir("/proc/self/fd")) == NULL)
		return;
	while ((de = readdir(d)) != NULL) {
		int fd = atoi(de->d_name);
		if (fd > 2 && fd != dirfd(d))
			fcntl(fd, F_SETFD, FD_CLOEXEC);
	}
	closedir(d);
}

static void __attribute__((noreturn))
child_exec(char **argv, char **envp, int in_fd, int out_fd, int err_fd,
    pid_t parent)
{
	struct sigaction sa;
	sigset_t none;

	/* above 2 first, so that one dup2 cannot clobber the other end */
	in_fd = fcntl(in_fd, F_DUPFD_CLOEXEC, 3);
	out_fd = fcntl(out_fd, F_DUPFD_CLOEXEC, 3);
	if (in_fd < 0 || out_fd < 0 || dup2(in_fd, 0) < 0 ||
	    dup2(out_fd, 1) < 0)
		goto fail;
	cloexec_other_fds();
	setpgid(0, 0);
	prctl(PR_SET_PDEATHSIG, SIGKILL);   /* the worker died: die too */
	if (getppid() != parent)
		_exit(127);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = SIG_DFL;
	for (int sig = 1; sig < NSIG; sig++)
		sigaction(sig, &sa, NULL);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	environ = envp;         /* execvp looks argv[0] up in its PATH too */
	execvp(argv[0], argv);
fail:
	(void)!write(err_fd, &errno, sizeof(errno));
	_exit(127);
}

/* Close the pipe ends still open; return e. */
static int
close_fds(int *fds, int e)
{
	for (int i = 0; i < 6; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	return e;
}

/* Fork and exec. Returns 0, or the errno of what failed (the child's own
 * errno when the exec failed). */
static int
spawn(struct exec_run *r, char **argv, char **envp)
{
	int fds[6] = { -1, -1, -1, -1, -1, -1 };  /* stdin, stdout, exec error */
	sigset_t all, old;
	pid_t parent = getpid();
	int e, child_errno;
	ssize_t got;

	if (pipe2(fds, O_CLOEXEC) < 0 || pipe2(fds + 2, O_CLOEXEC) < 0 ||
	    pipe2(fds + 4, O_CLOEXEC) < 0)
		return close_fds(fds, errno);
	/* no handler of the worker may run in the child before the reset */
	sigfillset(&all);
	sigprocmask(SIG_SETMASK, &all, &old);
	r->pid = fork();
	if (r->pid == 0)
		child_exec(argv, envp, fds[0], fds[3], fds[5], parent);
	e = errno;
	sigprocmask(SIG_SETMASK, &old, NULL);
	close(fds[0]);
	close(fds[3]);
	close(fds[5]);
	fds[0] = fds[3] = fds[5] = -1;
	if (r->pid < 0)
		return close_fds(fds, e);
	setpgid(r->pid, r->pid);    /* as the child does: no race with a kill */
	do
		got = read(fds[4], &child_errno, sizeof(child_errno));
	while (got < 0 && errno == EINTR);
	if (got == (ssize_t)sizeof(child_errno)) {
		while (waitpid(r->pid, NULL, 0) < 0 && errno == EINTR)
			;
		return close_fds(fds, child_errno != 0 ? child_errno : EIO);
	}
	close(fds[4]);
	r->in_fd = fds[1];
	r->out_fd = fds[2];
	fcntl(r->in_fd, F_SETFL, fcntl(r->in_fd, F_GETFL) | O_NONBLOCK);
	fcntl(r->out_fd, F_SETFL, fcntl(r->out_fd, F_GETFL) | O_NONBLOCK);
	return 0;
}

/* Write job lines until the pipe is full. Stdin is closed after the last
 * one, or on EPIPE (any error): the jobs not written just get no result. */
static void
write_some(struct exec_run *r)
{
	struct job *j = r->jobs;
	ssize_t w;

	for (;;) {
		while (r->woff == r->wlen && r->next_job < r->n) {
			free(r->wbuf);
			r->wbuf = NULL;
			r->woff = r->wlen = 0;
			if (j[r->next_job++].invalid == NULL)
				r->wbuf = job_handler_line(&j[r->next_job - 1],
				    &r->wlen);
		}
		if (r->woff == r->wlen)
			break;
		w = write(r->in_fd, r->wbuf + r->woff, r->wlen - r->woff);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && errno == EAGAIN)
			return;
		if (w < 0)
			break;
		r->woff += (size_t)w;
	}
	close(r->in_fd);
	r->in_fd = -1;
}

/* The first n bytes of line as printable ASCII within SHOWN_MAX bytes
 * (NUL-terminated: out has room for SHOWN_MAX + 4): '"', '\\', control
 * and non-ASCII bytes become \", \\, \t or \xHH; "..." marks a cut. */
static void
show_line(char *out, const char *line, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	size_t o = 0;

	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)line[i];
		char e[4] = { '\\', (char)c, 0, 0 };
		size_t k = 2;

		if (c == '\t')
			e[1] = 't';
		else if (c < 0x20 || c >= 0x7f) {
			e[1] = 'x';
			e[2] = hex[c >> 4];
			e[3] = hex[c & 15];
			k = 4;
		} else if (c != '"' && c != '\\') {
			e[0] = (char)c;
			k = 1;
		}
		if (o + k > SHOWN_MAX) {
			memcpy(out + o, "...", 3);
			o += 3;
			break;
		}
		memcpy(out + o, e, k);
		o += k;
	}
	out[o] = '\0';
}

/* Count a line that settles no job; describe the first few in
 * unknown_text, with why. */
static void
unknown_line(struct exec_run *r, const char *why, const char *line, size_t n)
{
	char shown[SHOWN_MAX + 4];
	size_t used = strlen(r->unknown_text);

	if (++r->unknown > UNKNOWN_SHOWN)
		return;
	show_line(shown, line, n);
	snprintf(r->unknown_text + used, sizeof(r->unknown_text) - used,
	    "%s\"%s\" (%s)", used > 0 ? "; " : "", shown, why);
}

enum { FIND_PENDING, FIND_VALID, FIND_ANY };

/* The first job from index `from` with that id that is pending, valid, or
 * any; -1 if none. */
static int
find_job(const struct exec_run *r, int from, const char *id, size_t idlen,
    int which)
{
	for (int i = from; i < r->n; i++)
		if ((which == FIND_ANY || (which == FIND_VALID ?
		    r->jobs[i].invalid == NULL : is_pending(r, i))) &&
		    idlen > 0 && strlen(r->jobs[i].id) == idlen &&
		    memcmp(r->jobs[i].id, id, idlen) == 0)
			return i;
	return -1;
}

/* The id at p written as a JSON string ("a b", "x\u0001y") followed by a
 * blank or the end: unescaped into qid (JOB_ID_MAX + 1 bytes) with its
 * length in *qlen, and the bytes it takes in *used. Else NULL, or what is
 * wrong with it as a JSON string. */
static const char *
quoted_id(const char *p, size_t n, char *qid, size_t *qlen, size_t *used)
{
	char buf[JOB_ID_MAX * 6 + 1];
	struct json_scan_span v;
	struct json_scan_error e = { 0, NULL };
	size_t pos = 0;

	*qlen = 0;
	if (n == 0 || p[0] != '"')
		return NULL;
	if (json_scan_value(p, n, &pos, &v, &e) != 0)
		return e.what != NULL ? e.what : "bad JSON string";
	if (v.type != JSON_SCAN_STRING || (pos < n && p[pos] != ' ' &&
	    p[pos] != '\t'))
		return "not a JSON string followed by a blank";
	if (v.len - 2 > sizeof(buf) - 1 ||
	    json_scan_unescape(v.p + 1, v.len - 2, buf, qlen, &e) != 0 ||
	    *qlen > JOB_ID_MAX) {
		*qlen = 0;
		return "longer than any id";
	}
	memcpy(qid, buf, *qlen);
	qid[*qlen] = '\0';
	*used = pos;
	return NULL;
}

/* "ok ID", "retry ID message" or "fail ID message" (NUL-terminated), ID
 * plain (no blanks) or a JSON string: the result goes to the first valid
 * job with that id that has none yet. A quoted ID that matches no pending
 * job is tried plain, as it was read before the quoted form existed. */
static void
handle_line(struct exec_run *r, char *line)
{
	size_t len = strlen(line), vlen, idlen, qlen = 0, qused = 0;
	char *start = line, *id, *msg, qid[JOB_ID_MAX + 1];
	const char *bad_json, *why;
	int outcome = HANDLER_PENDING, i = -1;

	while (len > 0 && line[len - 1] == '\r')
		line[--len] = '\0';
	line += strspn(line, " \t");
	vlen = strcspn(line, " \t");
	id = line + vlen + strspn(line + vlen, " \t");
	idlen = strcspn(id, " \t");
	msg = id + idlen + strspn(id + idlen, " \t");
	if (vlen == 2 && strncmp(line, "ok", 2) == 0)
		outcome = HANDLER_OK;
	else if (vlen == 5 && strncmp(line, "retry", 5) == 0)
		outcome = HANDLER_RETRY;
	else if (vlen == 4 && strncmp(line, "fail", 4) == 0)
		outcome = HANDLER_FAIL;
	bad_json = quoted_id(id, len - (size_t)(id - start), qid, &qlen,
	    &qused);
	if (outcome != HANDLER_PENDING && qlen > 0 &&
	    (i = find_job(r, r->first_pending, qid, qlen,
	    FIND_PENDING)) >= 0)
		msg = id + qused + strspn(id + qused, " \t");
	else if (outcome != HANDLER_PENDING)
		i = find_job(r, r->first_pending, id, idlen,
		    FIND_PENDING);
	if (i < 0) {
		if (outcome == HANDLER_PENDING)
			why = len == 0 ? "empty line" :
			    "does not start with ok, retry or fail";
		else if (idlen == 0)
			why = "no id";
		else if (find_job(r, 0, qid, qlen, FIND_VALID) >= 0 ||
		    find_job(r, 0, id, idlen, FIND_VALID) >= 0)
			why = "that job has its result already";
		else if (find_job(r, 0, qid, qlen, FIND_ANY) >= 0 ||
		    find_job(r, 0, id, idlen, FIND_ANY) >= 0)
			why = "that job is invalid: it was not handed over";
		else if (bad_json != NULL)
			why = bad_json;
		else
			why = "no job of the batch has that id";
		unknown_line(r, why, start, len);
		return;
	}
	r->results[i].outcome = outcome;
	snprintf(r->results[i].message, sizeof(r->results[i].message), "%s",
	    outcome == HANDLER_OK ? "" : msg);
	skip_settled(r);
}

/* Handle every complete line in rbuf; keep the rest (an over-long line is
 * counted once and dropped up to its newline). */
static void
take_lines(struct exec_run *r)
{
	char *p = r->rbuf, *end = r->rbuf + r->rlen, *nl;

	while ((nl = memchr(p, '\n', (size_t)(end - p))) != NULL) {
		*nl = '\0';
		if (!r->discarding)
			handle_line(r, p);
		r->discarding = false;
		p = nl + 1;
	}
	r->rlen = (size_t)(end - p);
	if (r->rlen > RESULT_LINE_MAX) {
		if (!r->discarding)
			unknown_line(r, "longer than 64 KiB: dropped", p,
			    r->rlen);
		r->discarding = true;
		r->rlen = 0;
	}
	memmove(r->rbuf, p, r->rlen);
}

/* One read from stdout. Returns 1 after data, 0 at EOF (or error: stdout
 * is then closed), -1 when nothing is there yet. */
static int
read_some(struct exec_run *r)
{
	ssize_t got;

	do
		got = read(r->out_fd, r->rbuf + r->rlen, READ_CHUNK);
	while (got < 0 && errno == EINTR);
	if (got < 0 && errno == EAGAIN)
		return -1;
	if (got <= 0) {
		close(r->out_fd);
		r->out_fd = -1;
		return 0;
	}
	r->rlen += (size_t)got;
	take_lines(r);
	return 1;
}

static int
poll_wait_ms(int64_t deadline)
{
	int64_t left = deadline - util_monotonic_ms();

	if (deadline == INT64_MAX)
		return -1;
	return left <= 0 ? 0 : left > INT_MAX ? INT_MAX : (int)left;
}

/* Feed stdin and read stdout until stdout ends or the deadline passes. */
static void
pump(struct exec_run *r, int64_t deadline)
{
	while (r->out_fd >= 0) {
		struct pollfd pfd[2] = { { r->out_fd, POLLIN, 0 },
		    { r->in_fd, POLLOUT, 0 } };
		int nfds = r->in_fd >= 0 ? 2 : 1, wait = poll_wait_ms(deadline);

		if (wait == 0) {
			r->timed_out = true;
			return;
		}
		/* EINTR (the worker's SIGTERM): go on, the batch finishes */
		if (poll(pfd, (nfds_t)nfds, wait) <= 0)
			continue;
		if (nfds == 2 && pfd[1].revents != 0)
			write_some(r);
		if (pfd[0].revents != 0)
			read_some(r);
	}
}

/* Reap the handler, waiting until deadline at most (INT64_MAX: as long as
 * it takes). Returns false when it is still running then. */
static bool
reap(struct exec_run *r, int64_t deadline)
{
	int step = 1;

	for (;;) {
		int left = poll_wait_ms(deadline);
		pid_t got = waitpid(r->pid, &r->status, left < 0 ? 0 : WNOHANG);

		if (got < 0 && errno == EINTR)
			continue;
		if (got != 0) {
			if (got < 0)
				r->status = 0;  /* ECHILD: reaped elsewhere */
			return true;
		}
		if (left == 0)
			return false;
		poll(NULL, 0, step < left ? step : left);
		step = step < 50 ? step * 2 : 50;
	}
}

/* Stop the handler (killing its group when it is late), reap it, and pick
 * up the complete result lines it left in the pipe. */
static void
finish(struct exec_run *r, int64_t deadline)
{
	if (r->in_fd >= 0)
		close(r->in_fd);
	if (!r->timed_out && !reap(r, deadline))
		r->timed_out = true;
	if (r->timed_out) {
		kill(-r->pid, SIGKILL);
		kill(r->pid, SIGKILL);  /* in case it left its group */
		reap(r, INT64_MAX);
	}
	while (r->out_fd >= 0 && read_some(r) > 0)
		;
	if (r->out_fd >= 0)
		close(r->out_fd);
	r->out_fd = -1;
	/* a last line without newline counts only after a clean exit: a
	 * killed handler may have been cut off in the middle of a line */
	if (r->rlen > 0 && !r->discarding && !r->timed_out &&
	    WIFEXITED(r->status) && WEXITSTATUS(r->status) == 0) {
		r->rbuf[r->rlen] = '\0';
		handle_line(r, r->rbuf);
	} else if (r->rlen > 0 && !r->discarding)
		unknown_line(r, "last line cut off: no newline, and the "
		    "handler did not exit 0", r->rbuf, r->rlen);
	r->rlen = 0;
}

static void
set_pending(struct exec_run *r, int outcome, const char *why)
{
	for (int i = r->first_pending; i < r->n; i++)
		if (is_pending(r, i)) {
			r->results[i].outcome = outcome;
			r->results[i].unanswered = true;
			snprintf(r->results[i].message,
			    sizeof(r->results[i].message), "%s", why);
		}
	r->first_pending = r->n;
}

/* Every job the handler did not answer is retried, saying why. Returns
 * HANDLER_EXEC_CRASHED when the handler died (signal or non-zero exit, not
 * a timeout) leaving jobs unanswered. */
static int
settle_pending(struct exec_run *r, long timeout_ms)
{
	char why[sizeof(r->results[0].message)];
	int st = r->status, pending = 0;

	for (int i = r->first_pending; i < r->n; i++)
		pending += is_pending(r, i);
	if (r->timed_out)
		snprintf(why, sizeof(why), "handler killed after "
		    "handler_timeout (%g s) without a result",
		    (double)timeout_ms / 1000.0);
	else if (WIFSIGNALED(st))
		snprintf(why, sizeof(why), "handler killed by signal %d (SIG%s) "
		    "without a result for this job", WTERMSIG(st),
		    sigabbrev_np(WTERMSIG(st)) ? sigabbrev_np(WTERMSIG(st)) : "?");
	else if (WIFEXITED(st) && WEXITSTATUS(st) != 0)
		snprintf(why, sizeof(why), "handler exited with status %d "
		    "without a result for this job", WEXITSTATUS(st));
	else
		snprintf(why, sizeof(why),
		    "handler exited without a result for this job");
	set_pending(r, HANDLER_RETRY, why);
	return pending > 0 && !r->timed_out && !(WIFEXITED(st) &&
	    WEXITSTATUS(st) == 0) ? HANDLER_EXEC_CRASHED : 0;
}

int
handler_exec_run(const struct queue_config *q, struct job *jobs,
    struct handler_result *results, int n, char *err, size_t errsize)
{
	struct exec_run r = { .jobs = jobs, .results = results, .n = n,
	    .pid = -1, .in_fd = -1, .out_fd = -1 };
	const char *cmd = q->command != NULL ? q->command : "";
	const char *why = NULL;
	char why_buf[sizeof(results[0].message)];
	char *buf = NULL, **argv;
	int64_t deadline;
	int e;

	if (errsize > 0)
		err[0] = '\0';
	for (int i = 0; i < n; i++)
		if (jobs[i].invalid == NULL)
			results[i] = (struct handler_result){ HANDLER_PENDING, "", false };
	skip_settled(&r);
	if (r.first_pending >= n)
		return 0;               /* nothing to do: do not even start it */
	char **envp = handler_env_build(q->name, q->handler_env);
	if ((argv = split_command(cmd, &buf, &why)) != NULL &&
	    (e = spawn(&r, argv, envp)) != 0)
		why = strerror(e);
	handler_env_free(envp);
	free(argv);
	free(buf);
	if (why == NULL) {
		deadline = q->handler_timeout_ms > 0 ? util_monotonic_ms() +
		    q->handler_timeout_ms : INT64_MAX;
		r.rbuf = xmalloc(RESULT_LINE_MAX + READ_CHUNK + 1);
		pump(&r, deadline);
		finish(&r, deadline);
		int crashed = settle_pending(&r, q->handler_timeout_ms);
		if (r.unknown > 0)
			snprintf(err, errsize, "handler printed %d unknown "
			    "line%s: %s%s", r.unknown, r.unknown > 1 ? "s" : "",
			    r.unknown_text, r.unknown > UNKNOWN_SHOWN ?
			    "; ..." : "");
		free(r.rbuf);
		free(r.wbuf);
		return crashed;
	}
	snprintf(why_buf, sizeof(why_buf), "cannot run handler command "
	    "\"%s\": %s", cmd, why);
	snprintf(err, errsize, "%s", why_buf);
	set_pending(&r, HANDLER_RETRY, why_buf);
	return -1;
}
