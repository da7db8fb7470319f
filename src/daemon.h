/* daemon.h - what turns a process into a well-behaved daemon: a locked
 * pidfile, detaching from the terminal, dropping root. */
#ifndef FERRY_DAEMON_H
#define FERRY_DAEMON_H

#include <stddef.h>
#include <sys/types.h>

/* Open and lock `path`. Returns the descriptor, or -1: errno EWOULDBLOCK
 * when another process holds it (its pid in *holder, 0 if unreadable). */
int daemon_pidfile_lock(const char *path, pid_t *holder);
/* Write our pid into the locked pidfile. */
int daemon_pidfile_write(int fd);
void daemon_pidfile_remove(const char *path, int fd);

/* Fork into the background, new session, cwd /, stdio on /dev/null (stderr
 * too unless keep_stderr). The parent waits and exits 0 once the child
 * calls daemon_ready(*ready_fd), or 1 if the child exits first. */
int daemon_detach(int keep_stderr, int *ready_fd);
void daemon_ready(int ready_fd);

/* Switch to user/group (either may be empty), first handing them the
 * pidfile (by descriptor) and the control socket (by path, or NULL), which
 * were made as root. On failure -1 and a message in err. */
int daemon_drop_privileges(const char *user, const char *group,
    int pidfile_fd, const char *socket_path, char *err, size_t errsize);

#endif
