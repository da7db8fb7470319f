/* log.c - logfmt lines to stderr, syslog or a file. A line is formatted into
 * one buffer and written with one write(2) so lines of master and workers
 * sharing a file never interleave. The file is opened without following
 * links (secure_open.c): ferryd opens it as root. A detached daemon has no
 * stderr: "stderr" then means syslog.
 * Syslog is our own datagram socket to /dev/log, not openlog(3): a worker
 * closes every descriptor but log_fd() when it starts, and libc's hidden
 * syslog socket, closed that way, would have its number reused by the
 * worker's Redis connection and receive the log lines. */
#include "log.h"
#include "secure_open.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#define LOG_LINE_MAX 4096
#define LOG_SYSLOG_SOCKET "/dev/log"

static struct {
	int fd;             /* 2 for stderr, a file, or the syslog socket */
	char *path;         /* file target, for reopen */
	int level;
	char role[64];
	bool stderr_gone;   /* detached: "stderr" goes to syslog */
	bool syslog;        /* fd is a datagram socket to syslog_path */
	char syslog_path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	char why[256];      /* why the last log_open or log_reopen failed */
} logger = { 2, NULL, LOG_LEVEL_INFO, "master", false, false, "", "" };

const char *const log_level_names[] = {
	"debug", "info", "notice", "warn", "error", NULL
};

static const int syslog_priority[] = {
	LOG_DEBUG, LOG_INFO, LOG_NOTICE, LOG_WARNING, LOG_ERR,
};

const char *
log_level_name(int level)
{
	if (level < 0 || level >= (int)FERRY_ARRAY_LEN(log_level_names) - 1)
		return "unknown";
	return log_level_names[level];
}

static int
open_file(const char *path)
{
	return secure_open_file(path, O_WRONLY | O_APPEND | O_CREAT, 0640,
	    logger.why, sizeof(logger.why));
}

const char *
log_open_error(void)
{
	return logger.why;
}

static int
syslog_connect(int fd)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };

	snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", logger.syslog_path);
	return connect(fd, (struct sockaddr *)&sun, sizeof(sun));
}

/* The socket even when nothing listens yet (syslogd starts later, or is
 * restarted): log_msg connects again when a send fails. */
static int
open_syslog(void)
{
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	if (fd == -1) {
		snprintf(logger.why, sizeof(logger.why), "cannot make a socket "
		    "for syslog: %s", strerror(errno));
		return -1;
	}
	(void)syslog_connect(fd);
	return fd;
}

/* Make `fd` (2, a file, or a syslog socket when is_syslog) the target. */
static void
set_target(int fd, bool is_syslog, const char *file, int level)
{
	if (logger.fd > 2 && logger.fd != fd)
		close(logger.fd);
	free(logger.path);
	logger.path = file != NULL ? xstrdup(file) : NULL;
	logger.fd = fd;
	logger.syslog = is_syslog;
	logger.level = level;
}

int
log_open_syslog(const char *socket_path, int level)
{
	snprintf(logger.syslog_path, sizeof(logger.syslog_path), "%s",
	    socket_path);
	int fd = open_syslog();
	if (fd == -1)
		return -1;
	set_target(fd, true, NULL, level);
	return 0;
}

void
log_stderr_gone(void)
{
	logger.stderr_gone = true;
	if (logger.fd == 2)
		(void)log_open_syslog(LOG_SYSLOG_SOCKET, logger.level);
}

int
log_open(const char *target, int level)
{
	int fd;

	if (strcmp(target, "stderr") == 0 && !logger.stderr_gone) {
		set_target(2, false, NULL, level);
	} else if (strcmp(target, "syslog") == 0 ||
	    strcmp(target, "stderr") == 0) {
		return log_open_syslog(LOG_SYSLOG_SOCKET, level);
	} else if ((fd = open_file(target)) == -1) {
		return -1;
	} else {
		set_target(fd, false, target, level);
	}
	return 0;
}

int
log_reopen(void)
{
	if (logger.path == NULL)
		return 0;
	int fd = open_file(logger.path);
	if (fd == -1)
		return -1;
	/* keep the descriptor number stable: dup2 over the old one */
	if (dup2(fd, logger.fd) == -1) {
		int saved = errno;
		close(fd);
		errno = saved;
		return -1;
	}
	close(fd);
	return 0;
}

void
log_set_level(int level)
{
	logger.level = level;
}

void
log_set_role(const char *role)
{
	snprintf(logger.role, sizeof(logger.role), "%s", role);
}

int
log_fd(void)
{
	return logger.fd;
}

void
log_close(void)
{
	if (logger.fd > 2)
		close(logger.fd);
	free(logger.path);
	logger.path = NULL;
	logger.fd = 2;
	logger.syslog = false;
}

/* Append `s` quoted: backslash, quote and control characters escaped. */
static int
append_quoted(char *buf, int size, int off, const char *s)
{
	if (off < size)
		buf[off] = '"';
	off++;
	for (; *s != '\0' && off < size - 2; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\') {
			buf[off++] = '\\';
			buf[off++] = (char)c;
		} else if (c == '\n') {
			buf[off++] = '\\';
			buf[off++] = 'n';
		} else if (c < 0x20) {
			buf[off++] = ' ';
		} else {
			buf[off++] = (char)c;
		}
	}
	if (off < size)
		buf[off] = '"';
	off++;
	if (off < size)
		buf[off] = '\0';
	return off;
}

int
log_format(char *buf, int size, long long ts_ms, int level, int pid,
    const char *role, const char *msg)
{
	time_t sec = (time_t)(ts_ms / 1000);
	struct tm tm;
	char stamp[32];

	gmtime_r(&sec, &tm);
	strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%S", &tm);
	int off = snprintf(buf, (size_t)size,
	    "ts=%s.%03lldZ level=%s pid=%d role=", stamp, ts_ms % 1000,
	    log_level_name(level), pid);
	if (off >= size)
		return size - 1;
	off = append_quoted(buf, size, off, role);
	if (off + 5 >= size)
		return size - 1;
	memcpy(buf + off, " msg=", 6);
	off = append_quoted(buf, size, off + 5, msg);
	return off < size ? off : size - 1;
}

/* One RFC 3164 datagram: "<PRI>Mmm dd hh:mm:ss ferryd[PID]: ROLE: MSG", as
 * syslog(3) would send it; lost when no syslog daemon listens. */
static void
send_syslog(int level, const char *msg)
{
	char line[LOG_LINE_MAX], stamp[32];
	time_t now = time(NULL);
	struct tm tm;

	localtime_r(&now, &tm);
	strftime(stamp, sizeof(stamp), "%b %e %H:%M:%S", &tm);
	int n = snprintf(line, sizeof(line), "<%d>%s ferryd[%d]: %s: %s",
	    LOG_DAEMON | syslog_priority[level], stamp, (int)getpid(),
	    logger.role, msg);
	size_t len = n < (int)sizeof(line) ? (size_t)n : sizeof(line) - 1;
	if (send(logger.fd, line, len, MSG_NOSIGNAL) == -1 &&
	    syslog_connect(logger.fd) == 0) {
		ssize_t w = send(logger.fd, line, len, MSG_NOSIGNAL);
		(void)w;        /* nowhere left to report a failed log line */
	}
}

void
log_msg(int level, const char *fmt, ...)
{
	char msg[LOG_LINE_MAX / 2], line[LOG_LINE_MAX];
	int saved_errno = errno;
	va_list ap;

	if (level < logger.level)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (logger.syslog) {
		send_syslog(level, msg);
	} else {
		int n = log_format(line, sizeof(line) - 1, util_realtime_ms(),
		    level, (int)getpid(), logger.role, msg);
		line[n++] = '\n';
		ssize_t w = write(logger.fd, line, (size_t)n);
		(void)w;        /* nowhere left to report a failed log write */
	}
	errno = saved_errno;
}
