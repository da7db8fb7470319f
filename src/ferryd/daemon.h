/* daemon.h - what turns a process into a well-behaved daemon: a locked
 * pidfile, detaching from the terminal, dropping root. */
#ifndef FERRY_DAEMON_H
#define FERRY_DAEMON_H

#include <stddef.h>
#include <sys/types.h>

/* Open (never through a symbolic link, only a regular file: secure_open.h)
 * and lock `path`. Returns the descriptor, or -1: errno EWOULDBLOCK when
 * another process holds it (its pid in *holder, 0 if unreadable), else why
 * it cannot be opened in `why`. */
int daemon_pidfile_lock(const char *path, pid_t *holder, char *why,
    size_t whysize);
/* Write our pid into the locked pidfile. */
int daemon_pidfile_write(int fd);
/* Empty it through fd (which works without root), unlink it if the folder
 * lets us, and close it. */
void daemon_pidfile_remove(const char *path, int fd);

/* Fork into the background: new session, cwd /, stdin and stdout on
 * /dev/null, stderr on a pipe to the parent until daemon_ready(*report_fd).
 * The parent copies what comes through to its stderr and exits 0 once the
 * child is ready, or with the child's status when it exits first, so every
 * start-up error reaches the terminal and the exit status. */
int daemon_detach(int *report_fd);
/* Start-up is over: stderr to /dev/null, the parent told; -1 is a no-op. */
void daemon_ready(int report_fd);

/* The ids of [ferryd] user and group (either may be empty: the starting
 * user's). Returns 1 when there is someone to switch to, 0 when not, -1
 * with a message in err. */
int daemon_resolve_user(const char *user, const char *group, uid_t *uid,
    gid_t *gid, char *err, size_t errsize);
/* setgid, supplementary groups (user's, or just gid), setuid. */
int daemon_switch_user(const char *user, const char *group, uid_t uid,
    gid_t gid, char *err, size_t errsize);

#endif
