/* secure_open.h - opening the files a root-started ferryd writes (pidfile,
 * log, dead-letter archive) without following a link planted in a folder
 * that a less privileged user can write. */
#ifndef FERRY_SECURE_OPEN_H
#define FERRY_SECURE_OPEN_H

#include <stddef.h>
#include <sys/types.h>

/* open(path, flags | O_NOFOLLOW | O_CLOEXEC, mode), then refuse what is not
 * a plain file of ours: a symbolic link (errno ELOOP), a folder (EISDIR),
 * another kind of file such as a FIFO or a device (EINVAL), a file with
 * more than one hard link (EMLINK). Never blocks on a FIFO. Returns the
 * descriptor, or -1 with errno set and the reason in why (a phrase that
 * follows "PATH ": "is a symbolic link ..."). */
int secure_open_file(const char *path, int flags, mode_t mode, char *why,
    size_t whysize);

#endif
