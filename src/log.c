/* log.c - logfmt lines to stderr, syslog or a file. A line is formatted into
 * one buffer and written with one write(2) so lines of master and workers
 * sharing a file never interleave. The file is opened without following
 * links (secure_open.c): ferryd opens it as root. A detached daemon has no
 * stderr: "stderr" then means syslog. */
#include "log.h"
#include "config.h"
#include "secure_open.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#define LOG_LINE_MAX 4096

static struct {
	int fd;             /* 2 for stderr, a file, or -1 for syslog */
	char *path;         /* file target, for reopen */
	int level;
	char role[64];
	bool stderr_gone;   /* detached: "stderr" goes to syslog */
	char why[256];      /* why the last log_open or log_reopen failed */
} logger = { 2, NULL, CONFIG_LOG_INFO, "master", false, "" };

static const int syslog_priority[] = {
	LOG_DEBUG, LOG_INFO, LOG_NOTICE, LOG_WARNING, LOG_ERR,
};

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

void
log_stderr_gone(void)
{
	logger.stderr_gone = true;
	if (logger.fd == 2) {
		openlog("ferryd", LOG_PID | LOG_NDELAY, LOG_DAEMON);
		logger.fd = -1;
	}
}

int
log_open(const char *target, int level)
{
	int fd;

	if (strcmp(target, "stderr") == 0 && !logger.stderr_gone) {
		fd = 2;
	} else if (strcmp(target, "syslog") == 0 ||
	    strcmp(target, "stderr") == 0) {
		openlog("ferryd", LOG_PID | LOG_NDELAY, LOG_DAEMON);
		fd = -1;
	} else if ((fd = open_file(target)) == -1) {
		return -1;
	}
	if (logger.fd > 2)
		close(logger.fd);
	free(logger.path);
	logger.path = fd > 2 ? xstrdup(target) : NULL;
	logger.fd = fd;
	logger.level = level;
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
	    config_log_level_name(level), pid);
	if (off >= size)
		return size - 1;
	off = append_quoted(buf, size, off, role);
	if (off + 5 >= size)
		return size - 1;
	memcpy(buf + off, " msg=", 6);
	off = append_quoted(buf, size, off + 5, msg);
	return off < size ? off : size - 1;
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
	if (logger.fd == -1) {
		syslog(syslog_priority[level], "%s: %s", logger.role, msg);
	} else {
		int n = log_format(line, sizeof(line) - 1, util_realtime_ms(),
		    level, (int)getpid(), logger.role, msg);
		line[n++] = '\n';
		ssize_t w = write(logger.fd, line, (size_t)n);
		(void)w;        /* nowhere left to report a failed log write */
	}
	errno = saved_errno;
}
