/* daemon.c - pidfile, detaching and privilege dropping. The pidfile is held
 * with flock() for the master's whole life: a second ferryd on the same file
 * refuses to start, and a stale file left by a crash is simply taken over.
 * It stays root's (never handed to [ferryd] user): the service user must not
 * own a file that root opens at the next start. A detached daemon reports
 * its start-up to the waiting parent through a pipe, as pg_ctl does. */
#include "daemon.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "secure_open.h"

int
daemon_pidfile_lock(const char *path, pid_t *holder, char *why,
    size_t whysize)
{
	char buf[32];
	int fd = secure_open_file(path, O_RDWR | O_CREAT, 0644, why, whysize);

	*holder = 0;
	if (fd == -1)
		return -1;
	if (flock(fd, LOCK_EX | LOCK_NB) == 0)
		return fd;
	int saved = errno;
	ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
	if (n > 0) {
		buf[n] = '\0';
		*holder = (pid_t)strtol(buf, NULL, 10);
	}
	close(fd);
	errno = saved;
	return -1;
}

int
daemon_pidfile_write(int fd)
{
	char buf[32];
	int n = snprintf(buf, sizeof(buf), "%ld\n", (long)getpid());

	if (ftruncate(fd, 0) == -1 || pwrite(fd, buf, (size_t)n, 0) != n)
		return -1;
	return 0;
}

void
daemon_pidfile_remove(const char *path, int fd)
{
	if (fd == -1)
		return;
	/* After dropping privileges the master may not remove a file from a
	 * root-owned folder such as /run; the descriptor, opened as root, can
	 * still empty it, and an empty, unlocked pidfile names no one. Both
	 * before unlocking, so no one locks a file about to change. */
	int rc = ftruncate(fd, 0);
	(void)rc;       /* at exit: nothing better to do than try */
	unlink(path);
	close(fd);
}

/* The parent's side: copy what the child writes to our stderr until it
 * sends the NUL byte of daemon_ready (exit 0) or exits (its status). */
static void __attribute__((noreturn))
wait_for_child(pid_t pid, int fd)
{
	char buf[1024];
	ssize_t n;
	int said = 0, status;

	while ((n = read(fd, buf, sizeof(buf))) != 0) {
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1)
			break;
		char *nul = memchr(buf, '\0', (size_t)n);
		size_t len = nul != NULL ? (size_t)(nul - buf) : (size_t)n;
		if (len > 0 && write(STDERR_FILENO, buf, len) > 0)
			said = 1;
		if (nul != NULL)
			_exit(0);
	}
	while (waitpid(pid, &status, 0) == -1 && errno == EINTR)
		;
	if (WIFEXITED(status) && WEXITSTATUS(status) != 0) {
		if (!said)
			fprintf(stderr, "ferryd: the daemon exited with status %d "
			    "while starting (see its log)\n", WEXITSTATUS(status));
		_exit(WEXITSTATUS(status));
	}
	if (WIFSIGNALED(status))
		fprintf(stderr, "ferryd: the daemon was killed by signal %d while "
		    "starting\n", WTERMSIG(status));
	else
		fprintf(stderr, "ferryd: the daemon exited while starting\n");
	_exit(1);
}

int
daemon_detach(int *report_fd)
{
	int pipefd[2];

	if (pipe2(pipefd, O_CLOEXEC) == -1)
		return -1;
	fflush(NULL);
	pid_t pid = fork();
	if (pid == -1)
		return -1;
	if (pid > 0) {
		close(pipefd[1]);
		wait_for_child(pid, pipefd[0]);
	}
	close(pipefd[0]);
	*report_fd = pipefd[1];
	/* a parent gone (^C) must not kill us with the first error we say */
	signal(SIGPIPE, SIG_IGN);
	if (setsid() == -1 || chdir("/") == -1)
		return -1;
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (null == -1)
		return -1;
	dup2(null, 0);
	dup2(null, 1);
	dup2(pipefd[1], 2);     /* until daemon_ready: the parent's terminal */
	close(null);
	return 0;
}

void
daemon_ready(int report_fd)
{
	if (report_fd == -1)
		return;
	int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
	if (null != -1) {
		dup2(null, 2);
		close(null);
	}
	ssize_t n = write(report_fd, "", 1);
	(void)n;         /* the parent is gone: nobody to tell */
	close(report_fd);
}

int
daemon_resolve_user(const char *user, const char *group, uid_t *uid,
    gid_t *gid, char *err, size_t errsize)
{
	struct passwd *pw = NULL;

	*uid = getuid();
	*gid = getgid();
	if (*user != '\0') {
		if ((pw = getpwnam(user)) == NULL) {
			snprintf(err, errsize, "[ferryd] user: no such user \"%s\"",
			    user);
			return -1;
		}
		*uid = pw->pw_uid;
		*gid = pw->pw_gid;
	}
	if (*group != '\0') {
		struct group *gr = getgrnam(group);
		if (gr == NULL) {
			snprintf(err, errsize, "[ferryd] group: no such group \"%s\"",
			    group);
			return -1;
		}
		*gid = gr->gr_gid;
	}
	return pw != NULL || *group != '\0';
}

int
daemon_switch_user(const char *user, const char *group, uid_t uid, gid_t gid,
    char *err, size_t errsize)
{
	bool named = *user != '\0';

	if (setgid(gid) == -1 ||
	    (named && initgroups(user, gid) == -1) ||
	    (!named && setgroups(1, &gid) == -1) ||
	    (named && setuid(uid) == -1)) {
		snprintf(err, errsize, "cannot switch to user \"%s\" group \"%s\": %s",
		    user, group, strerror(errno));
		return -1;
	}
	return 0;
}
