/* log.h - one line per event in logfmt (ts= level= pid= role= msg=), to
 * stderr, syslog or a file that USR1 reopens. Safe to use in master and
 * workers: each line is written with a single write(2). */
#ifndef FERRY_LOG_H
#define FERRY_LOG_H

#include <stdbool.h>

/* How much a line matters; a target shows its level and above. */
enum log_level {
	LOG_LEVEL_DEBUG,
	LOG_LEVEL_INFO,
	LOG_LEVEL_NOTICE,
	LOG_LEVEL_WARN,
	LOG_LEVEL_ERROR,
};
/* The levels' names ("debug" .. "error"), indexed by level, NULL after the
 * last: what ferryd.ini's log_level takes and what lines show. */
extern const char *const log_level_names[];
/* level's name, or "unknown". */
const char *log_level_name(int level);

/* Open `target`: "stderr", "syslog" or a file path (appended, created 0640;
 * never through a symbolic link, only a regular file). On failure returns
 * -1 with errno set, the reason in log_open_error(), and keeps the
 * previous target. */
int log_open(const char *target, int level);
const char *log_open_error(void);
/* The process is detaching and its stderr goes away: "stderr", now and in
 * later log_open calls (a reload), means syslog (facility daemon). */
void log_stderr_gone(void);
/* Log to the syslog datagram socket at socket_path ("syslog" is
 * /dev/log); exposed for tests. 0, or -1 (log_open_error()). */
int log_open_syslog(const char *socket_path, int level);
/* Reopen the file target (logrotate); no-op for stderr and syslog. */
int log_reopen(void);
void log_set_level(int level);
void log_set_role(const char *role);     /* "master", "worker orders/2" */
/* The descriptor lines go to: 2, the file, or the syslog socket. */
int log_fd(void);
void log_close(void);

void log_msg(int level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#define log_debug(...)  log_msg(LOG_LEVEL_DEBUG, __VA_ARGS__)
#define log_info(...)   log_msg(LOG_LEVEL_INFO, __VA_ARGS__)
#define log_notice(...) log_msg(LOG_LEVEL_NOTICE, __VA_ARGS__)
#define log_warn(...)   log_msg(LOG_LEVEL_WARN, __VA_ARGS__)
#define log_error(...)  log_msg(LOG_LEVEL_ERROR, __VA_ARGS__)

/* Format one logfmt line (without newline) into buf; exposed for tests. */
int log_format(char *buf, int size, long long ts_ms, int level, int pid,
    const char *role, const char *msg);

#endif
