/* secure_open.c - O_NOFOLLOW and a regular-file check for the files ferryd
 * opens as root. A service user who can write the folder of the pidfile
 * (a usual /run/ferryd/) could otherwise plant a link there, and root
 * would truncate, write or create the file it points to. Hard links are
 * refused too: a second name may be a root-only file linked in. */
#include "secure_open.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int
refuse(int fd, int err, char *why, size_t whysize, const char *what)
{
	if (fd != -1)
		close(fd);
	snprintf(why, whysize, "%s", what);
	errno = err;
	return -1;
}

int
secure_open_file(const char *path, int flags, mode_t mode, char *why,
    size_t whysize)
{
	struct stat st;
	/* O_NONBLOCK: opening a FIFO for writing would wait for a reader */
	int fd = open(path, flags | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, mode);

	if (fd == -1 && errno == ELOOP)
		return refuse(-1, ELOOP, why, whysize, "is a symbolic link "
		    "(refused: ferryd does not follow links for the files it "
		    "opens as root; name the file itself)");
	if (fd == -1) {
		snprintf(why, whysize, "%s", strerror(errno));
		return -1;
	}
	if (fstat(fd, &st) == -1) {
		int saved = errno;
		return refuse(fd, saved, why, whysize, strerror(saved));
	}
	if (S_ISDIR(st.st_mode))
		return refuse(fd, EISDIR, why, whysize, "is a folder (name a "
		    "file)");
	if (!S_ISREG(st.st_mode))
		return refuse(fd, EINVAL, why, whysize, "is not a regular file "
		    "(refused: a FIFO, socket or device is no place for it)");
	if (st.st_nlink > 1)
		return refuse(fd, EMLINK, why, whysize, "has more than one hard "
		    "link (refused: another name may be a file that is not "
		    "ferryd's; remove the extra links or the file)");
	if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) == -1) {
		int saved = errno;
		return refuse(fd, saved, why, whysize, strerror(saved));
	}
	return fd;
}
