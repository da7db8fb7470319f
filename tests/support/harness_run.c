/* harness_run.c - programs run from the tests (harness.h): ferryctl with
 * its output captured, and shell commands whose output is kept. */
#include "harness.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

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

pid_t
h_ctl_spawn(const char *config, const char *input, const char *out_path,
    const char *err_path, ...)
{
	const char *argv[16] = { "ferryctl", "-c", config }, *a;
	int n = 3;
	va_list ap;

	va_start(ap, err_path);
	while ((a = va_arg(ap, const char *)) != NULL && n < 15)
		argv[n++] = a;
	va_end(ap);
	argv[n] = NULL;
	int in = open(input, O_RDONLY), out = open(out_path, O_WRONLY |
	    O_CREAT | O_TRUNC, 0644), err = open(err_path, O_WRONLY | O_CREAT |
	    O_TRUNC, 0644);
	cr_assert(in != -1 && out != -1 && err != -1, "%s, %s, %s: %s", input,
	    out_path, err_path, strerror(errno));
	pid_t pid = fork();
	cr_assert_neq(pid, -1);
	if (pid == 0)
		child(argv, in, out, err);
	close(in);
	close(out);
	close(err);
	return pid;
}

int
h_ctl_out_v(const char *config, const char *input, char **out, va_list ap)
{
	struct h_run r;

	h_ctl_v(&r, config, input, ap);
	fputs(r.err, stderr);
	if (out != NULL) {
		*out = r.out;
		r.out = NULL;
	}
	h_run_free(&r);
	return r.status;
}

void
h_ctl_wait_ok(pid_t pid, const char *err_path, const char *needle)
{
	int status;

	cr_assert_eq(waitpid(pid, &status, 0), pid);
	char *err = h_read_file(err_path);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "exit %d: %s",
	    status, err);
	cr_assert_not_null(strstr(err, needle), "%s", err);
	free(err);
}

int
h_count_lines(const char *s)
{
	int n = 0;

	for (; *s != '\0'; s++)
		n += *s == '\n';
	return n;
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
