/* test_hardening.c - the operator's side of a root-started ferryd: a
 * detached start that fails says why on the terminal and exits non-zero;
 * the pidfile, log and dead-letter archive are never opened through a link
 * (the file it points to stays as it was); a password in a file every user
 * may read is warned about, and passwords can live in their own files. */
#include <criterion/criterion.h>
#include <errno.h>
#include <pwd.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "config.h"
#include "dead_archive.h"
#include "harness.h"
#include "log.h"
#include "queue.h"

static struct ferryd d;

static void
teardown(void)
{
	h_teardown(&d);
}

TestSuite(hardening, .fini = teardown, .timeout = 300);

#define QUEUE "[queue q]\nworkers = 1\n"
#define PRECIOUS "root only: must stay as it is\n"

/* A fresh d whose config logs to stderr (the shipped setting), with the
 * control socket at DIR/`socket`. Returns the ferryd -c arguments. */
static const char *const *
setup_log_stderr(const char *socket)
{
	static const char *args[] = { "-c", NULL, NULL };

	h_setup(&d, NULL, QUEUE);
	h_write_file(d.config, "[ferryd]\npidfile = %s\nredis_host = 127.0.0.1\n"
	    "redis_port = %d\nlog = stderr\ncontrol_socket = %s/%s\n" QUEUE,
	    d.pidfile, d.redis.port, d.dir, socket);
	args[1] = d.config;
	return args;
}

/* Run ferryd with args; assert it exits with `code`; its output. */
static char *
run_expect(int code, const char *const *args)
{
	char *out = NULL;
	int st = h_run_ferryd(args, &out);

	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == code,
	    "status %d (expected exit %d), output:\n%s", st, code, out);
	return out;
}

#define expect_in(out, ...) do {					\
	char want_[1024];						\
	snprintf(want_, sizeof(want_), __VA_ARGS__);			\
	cr_assert(strstr((out), want_) != NULL, "no \"%s\" in:\n%s",	\
	    want_, (out));						\
} while (0)

/* A file only root should touch, to point links at. */
static void
make_precious(char *path, size_t size)
{
	snprintf(path, size, "%s/precious", d.dir);
	h_write_file(path, PRECIOUS);
	cr_assert_eq(chmod(path, 0600), 0);
}

static void
assert_precious(const char *path)
{
	struct stat st;
	char *text = h_read_file(path);

	cr_assert_str_eq(text, PRECIOUS, "%s was changed", path);
	free(text);
	cr_assert_eq(stat(path, &st), 0);
	cr_assert_eq(st.st_uid, 0, "%s changed owner", path);
	cr_assert_eq(st.st_mode & 07777, 0600, "%s changed mode", path);
}

/* The shipped log = stderr, detached, and a start that fails after the
 * fork (the control socket's folder is missing): before, the parent exited
 * 1 and the reason went to /dev/null. */
Test(hardening, detached_start_failure_reaches_the_terminal)
{
	char *out = run_expect(1, setup_log_stderr("missing/ferryd.sock"));
	expect_in(out, "ferryd: note: log = stderr, but a detached ferryd has "
	    "no stderr: logging to syslog");
	expect_in(out, "ferryd: cannot create control socket "
	    "%s/missing/ferryd.sock: No such file or directory (check [ferryd] "
	    "control_socket and its directory); not started\n", d.dir);
	free(out);
	cr_assert_eq(access(d.pidfile, F_OK), -1, "pidfile left behind");
	h_stop(&d);
}

/* With a log file: the error is in the log and on the terminal, and the
 * child's exit status is the parent's. */
Test(hardening, detached_start_failure_with_a_log_file)
{
	h_setup(&d, "user = no-such-user-ferry\n", QUEUE);
	h_expect_log(&d, "no such user");
	char *out = run_expect(1, (const char *const[]){ "-c", d.config,
	    NULL });
	expect_in(out, "ferryd: [ferryd] user: no such user "
	    "\"no-such-user-ferry\"; not started\n");
	free(out);
	cr_assert_eq(h_count_in_file(d.log, "no such user "
	    "\\\"no-such-user-ferry\\\"; not started"), 1);
	h_stop(&d);
}

/* A good detached start with log = stderr: exit 0 once ready, the note on
 * the terminal, the daemon running. */
Test(hardening, detached_start_with_log_stderr_says_where_it_logs)
{
	char *out = run_expect(0, setup_log_stderr("ferryd.sock"));
	expect_in(out, "logging to syslog (facility daemon) instead");
	free(out);
	char *text = h_read_file(d.pidfile);
	pid_t pid = (pid_t)atoi(text);
	free(text);
	cr_assert_gt(pid, 0);
	cr_assert(h_pid_alive(pid));
	kill(pid, SIGTERM);
	h_wait_gone(&d, pid);
	h_stop(&d);
}

/* `name` (the pidfile or the log) made a link (symbolic or hard) to a
 * root-only file: ferryd refuses to start, saying `why` about `what`, and
 * the file is as it was. */
static void
expect_link_refused(const char *name, bool hard, const char *what,
    const char *why)
{
	char target[400];

	make_precious(target, sizeof(target));
	cr_assert_eq(hard ? link(target, name) : symlink(target, name), 0);
	char *out = run_expect(1, (const char *const[]){ "-f", "-c", d.config,
	    NULL });
	expect_in(out, "ferryd: cannot open %s %s: %s", what, name, why);
	free(out);
	assert_precious(target);
	if (strcmp(name, d.pidfile) != 0)
		cr_assert_eq(access(d.pidfile, F_OK), -1, "a pidfile was written");
}

#define SYMLINK_REFUSED "is a symbolic link (refused: ferryd does not " \
	"follow links for the files it opens as root; name the file itself)"

Test(hardening, symlinked_pidfile_is_refused)
{
	h_setup(&d, NULL, QUEUE);
	expect_link_refused(d.pidfile, false, "pidfile", SYMLINK_REFUSED);
	h_stop(&d);
}

Test(hardening, hardlinked_pidfile_is_refused)
{
	h_setup(&d, NULL, QUEUE);
	expect_link_refused(d.pidfile, true, "pidfile", "has more than one "
	    "hard link (refused");
	h_stop(&d);
}

Test(hardening, symlinked_log_is_refused)
{
	h_setup(&d, NULL, QUEUE);
	expect_link_refused(d.log, false, "log", SYMLINK_REFUSED);
	h_stop(&d);
}

/* With [ferryd] user the pidfile stays root's (it used to be handed to the
 * user, who could then own whatever a planted link named); at exit the
 * master, now nobody, cannot remove it from the root-owned folder, and
 * empties it instead. */
Test(hardening, pidfile_stays_roots_and_is_emptied_at_exit)
{
	struct stat st;
	struct passwd *pw = getpwnam("nobody");

	cr_assert_not_null(pw, "no user nobody on this machine");
	cr_assert_eq(getuid(), 0, "this test switches users: run it as root");
	h_setup(&d, "user = nobody\n", QUEUE);
	h_start(&d, 1);
	h_wait_log(&d, "dropped privileges to user nobody", 1);
	cr_assert_eq(lstat(d.pidfile, &st), 0);
	cr_assert_eq(st.st_uid, 0, "pidfile owned by uid %d", (int)st.st_uid);
	cr_assert_eq(st.st_gid, 0, "pidfile owned by gid %d", (int)st.st_gid);
	cr_assert_gt(st.st_size, 0);
	h_stop(&d);
	cr_assert_eq(lstat(d.pidfile, &st), 0, "the pidfile was removed from "
	    "a folder nobody cannot write");
	cr_assert_eq(st.st_size, 0, "the pidfile left behind still names the "
	    "stopped master");
}

/* Over dead_max with the archive a link: nothing appended through it,
 * nothing trimmed (entries are never dropped unarchived). */
Test(hardening, symlinked_dead_archive_is_refused)
{
	char target[400], archive[400], extra[1000];
	struct ferry_config cfg;
	struct config_errors errs = { 0, NULL };
	struct queue_keys k;

	h_setup(&d, NULL, QUEUE);
	make_precious(target, sizeof(target));
	snprintf(archive, sizeof(archive), "%s/archive.jsonl", d.dir);
	cr_assert_eq(symlink(target, archive), 0);
	snprintf(extra, sizeof(extra), "[queue q]\nworkers = 0\ndead_max = 1\n"
	    "dead_archive = %s\n", archive);
	h_config(&d, NULL, extra);
	cr_assert_eq(config_load(d.config, &cfg, &errs), 0);
	queue_keys_init(&k, "ferry", "q");
	for (int i = 0; i < 3; i++)
		freeReplyObject(h_redis(&d, "LPUSH %s {\"reason\":\"x\","
		    "\"job\":\"j%d\",\"attempts\":1}", k.dead, i));
	cr_assert_eq(dead_archive_run(d.rc, "ferry", config_find_queue(&cfg,
	    "q"), &k), 0);
	cr_assert_eq(h_redis_int(&d, "LLEN %s", k.dead), 3);
	assert_precious(target);
	config_free(&cfg);
	h_stop(&d);
}

/* A datagram socket bound at path, as syslogd's /dev/log. */
static int
bind_syslog(const char *path)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_DGRAM, 0);

	snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", path);
	unlink(path);
	cr_assert_eq(bind(fd, (struct sockaddr *)&sun, sizeof(sun)), 0, "%s",
	    strerror(errno));
	return fd;
}

static void
expect_datagram(int fd, const char *want_end)
{
	char buf[4096];
	struct timeval tv = { 5, 0 };

	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	ssize_t n = recv(fd, buf, sizeof(buf) - 1, 0);
	cr_assert_gt(n, 0, "no syslog line: %s", strerror(errno));
	buf[n] = '\0';
	cr_assert_eq(strncmp(buf, "<29>", 4), 0, "%s", buf);   /* daemon.notice */
	size_t len = strlen(want_end);
	cr_assert((size_t)n > len && strcmp(buf + n - (ssize_t)len, want_end) == 0,
	    "got \"%s\", expected it to end with \"%s\"", buf, want_end);
}

/* Syslog lines go through a socket that log_fd() names (a worker closes
 * every other descriptor: libc's hidden syslog socket, closed so, had its
 * number reused by the worker's Redis connection), and a restarted syslog
 * daemon is found again. */
Test(hardening, syslog_socket_is_log_fd_and_reconnects)
{
	char path[400], want[200];

	h_tmpdir(d.dir, sizeof(d.dir));
	snprintf(path, sizeof(path), "%s/log.sock", d.dir);
	int server = bind_syslog(path);
	cr_assert_eq(log_open_syslog(path, LOG_LEVEL_INFO), 0, "%s",
	    log_open_error());
	int fd = log_fd();
	cr_assert_gt(fd, 2, "log_fd() %d is not the syslog socket", fd);
	log_notice("first line");
	snprintf(want, sizeof(want), " ferryd[%d]: master: first line",
	    (int)getpid());
	expect_datagram(server, want);
	close(server);                  /* syslogd restarts */
	server = bind_syslog(path);
	log_notice("second line");
	snprintf(want, sizeof(want), " ferryd[%d]: master: second line",
	    (int)getpid());
	expect_datagram(server, want);
	cr_assert_eq(log_fd(), fd);
	log_close();
	close(server);
	h_rmrf(d.dir);
	d.dir[0] = '\0';
}

#define WARNING "holds pg_password and is readable by every user"

/* A password in a 0644 file: warned by ferryd -t and at start, with the
 * mode and the fix; not for 0640. */
Test(hardening, password_in_a_file_readable_by_all_is_warned)
{
	h_setup(&d, "pg_password = s3cret\n", QUEUE);
	cr_assert_eq(chmod(d.config, 0644), 0);
	char *out = run_expect(0, (const char *const[]){ "-t", "-c", d.config,
	    NULL });
	expect_in(out, "ferryd: warning: %s " WARNING " (mode 0644): chmod 0640 "
	    "%s and chgrp it to the group of the user ferryd runs as, or move "
	    "the password into a file named by pg_password_file\n", d.config,
	    d.config);
	free(out);
	h_start(&d, 1);
	h_wait_log(&d, WARNING " (mode 0644)", 1);
	cr_assert_eq(h_count_in_file(d.stderr_path, WARNING), 1);
	h_stop(&d);
}

Test(hardening, password_in_a_0640_file_is_not_warned)
{
	h_setup(&d, "pg_password = s3cret\n", QUEUE);
	cr_assert_eq(chmod(d.config, 0640), 0);
	char *out = run_expect(0, (const char *const[]){ "-t", "-c", d.config,
	    NULL });
	cr_assert_null(strstr(out, "readable by every user"), "%s", out);
	free(out);
	h_start(&d, 1);
	h_wait_log(&d, "started as", 1);
	cr_assert_eq(h_count_in_file(d.log, "readable by every user"), 0);
	cr_assert_eq(h_count_in_file(d.stderr_path, "readable by every user"),
	    0);
	h_stop(&d);
}

/* redis_password_file: the workers authenticate with the file's first
 * line against a Redis that requires it, and the 0644 config holds no
 * password, so no warning (but for the password file at 0644). */
Test(hardening, redis_password_from_its_own_file)
{
	char pwfile[400], extra[600];
	struct queue_keys k;

	h_setup(&d, NULL, QUEUE);
	snprintf(pwfile, sizeof(pwfile), "%s/redis.pw", d.dir);
	h_write_file(pwfile, "pw-from-file\n");
	cr_assert_eq(chmod(pwfile, 0600), 0);
	snprintf(extra, sizeof(extra), "redis_password_file = %s\n", pwfile);
	h_config(&d, extra, QUEUE);
	cr_assert_eq(chmod(d.config, 0644), 0);
	/* the password file readable by all is warned about instead */
	cr_assert_eq(chmod(pwfile, 0644), 0);
	char *out = run_expect(0, (const char *const[]){ "-t", "-c", d.config,
	    NULL });
	expect_in(out, "ferryd: warning: %s is the redis_password_file and is "
	    "readable by every user (mode 0644): chmod 0640 %s and chgrp it to "
	    "the group of the user ferryd runs as\n", pwfile, pwfile);
	free(out);
	cr_assert_eq(chmod(pwfile, 0600), 0);
	freeReplyObject(h_redis(&d, "CONFIG SET requirepass pw-from-file"));
	freeReplyObject(h_redis(&d, "AUTH pw-from-file"));
	h_start(&d, 1);
	queue_keys_init(&k, "ferry", "q");
	h_push_jobs(&d, "q", 0, 20);
	h_wait_redis_int(&d, 0, "LLEN %s", k.ready);
	cr_assert_eq(h_count_in_file(d.log, "readable by every user"), 0);
	h_stop(&d);
}
