/* daemon.c - pidfile, detaching and privilege dropping. The pidfile is held
 * with flock() for the master's whole life: a second ferryd on the same file
 * refuses to start, and a stale file left by a crash is simply taken over. */
#include "daemon.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

int
daemon_pidfile_lock(const char *path, pid_t *holder)
{
	char buf[32];
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);

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
	/* unlink before unlocking so no one locks a file about to vanish */
	unlink(path);
	close(fd);
}

int
daemon_detach(int keep_stderr, int *ready_fd)
{
	int pipefd[2];
	char ok;

	if (pipe2(pipefd, O_CLOEXEC) == -1)
		return -1;
	pid_t pid = fork();
	if (pid == -1)
		return -1;
	if (pid > 0) {
		/* exit only when the daemon is ready, so an init script sees
		 * the pidfile, or see the failure as our exit status */
		close(pipefd[1]);
		_exit(read(pipefd[0], &ok, 1) == 1 ? 0 : 1);
	}
	close(pipefd[0]);
	*ready_fd = pipefd[1];
	if (setsid() == -1)
		return -1;
	if (chdir("/") == -1)
		return -1;
	int null = open("/dev/null", O_RDWR);
	if (null == -1)
		return -1;
	dup2(null, 0);
	dup2(null, 1);
	if (!keep_stderr)
		dup2(null, 2);
	if (null > 2)
		close(null);
	return 0;
}

void
daemon_ready(int ready_fd)
{
	if (ready_fd == -1)
		return;
	ssize_t n = write(ready_fd, "", 1);
	(void)n;         /* the parent is gone: nobody to tell */
	close(ready_fd);
}

int
daemon_drop_privileges(const char *user, const char *group, int pidfile_fd,
    const char *socket_path, char *err, size_t errsize)
{
	uid_t uid = getuid();
	gid_t gid = getgid();
	struct passwd *pw = NULL;

	if (*user != '\0') {
		if ((pw = getpwnam(user)) == NULL) {
			snprintf(err, errsize, "[ferryd] user: no such user \"%s\"",
			    user);
			return -1;
		}
		uid = pw->pw_uid;
		gid = pw->pw_gid;
	}
	if (*group != '\0') {
		struct group *gr = getgrnam(group);
		if (gr == NULL) {
			snprintf(err, errsize, "[ferryd] group: no such group \"%s\"",
			    group);
			return -1;
		}
		gid = gr->gr_gid;
	}
	if (pw == NULL && *group == '\0')
		return 0;
	if (pidfile_fd != -1 && fchown(pidfile_fd, uid, gid) == -1) {
		snprintf(err, errsize, "cannot chown pidfile: %s", strerror(errno));
		return -1;
	}
	if (socket_path != NULL && lchown(socket_path, uid, gid) == -1) {
		snprintf(err, errsize, "cannot chown control socket %s: %s",
		    socket_path, strerror(errno));
		return -1;
	}
	if (setgid(gid) == -1 ||
	    (pw != NULL && initgroups(pw->pw_name, gid) == -1) ||
	    (pw == NULL && setgroups(1, &gid) == -1) ||
	    (pw != NULL && setuid(uid) == -1)) {
		snprintf(err, errsize, "cannot switch to user \"%s\" group \"%s\": %s",
		    user, group, strerror(errno));
		return -1;
	}
	return 0;
}
