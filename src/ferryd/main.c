/* main.c - ferryd's command line: check the config (-t), or take the
 * pidfile, detach (unless -f), drop privileges and run the master. Until
 * the master runs, every error also reaches stderr: the terminal, or the
 * parent of a detached daemon, which prints it and exits with its status. */
#include <errno.h>
#include <getopt.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "config_secret.h"
#include "control.h"
#include "daemon.h"
#include "exit_codes.h"
#include "log.h"
#include "master.h"
#include "master_memory.h"
#include "http_server.h"
#include "pg_target.h"
#include "util.h"

#ifndef FERRY_CONFIG_PATH
#define FERRY_CONFIG_PATH "/etc/ferry/ferryd.ini"
#endif

static void
usage(FILE *out)
{
	fprintf(out,
	    "usage: ferryd [-c FILE] [-f] [-t]\n"
	    "  -c, --config FILE   configuration (default %s)\n"
	    "  -f, --foreground    do not detach; for init systems that supervise\n"
	    "  -t, --test          check the configuration and exit (0 good, 78 bad)\n"
	    "  -V, --version       print the version\n"
	    "  -h, --help          this text\n", FERRY_CONFIG_PATH);
}

/* A start that failed after the config was loaded: free it (a sanitizer
 * build reports what an exit leaves behind) and exit with the start code. */
static int
not_started(struct ferry_config *cfg)
{
	config_free(cfg);
	free(cfg);
	return FERRY_EX_START;
}

/* The config, or exit 78 after every error. With -t (a check before a
 * reload, or by hand) nothing was to be started: say what is true of a
 * ferryd that runs. */
static struct ferry_config *
load_or_exit(const char *path, int test_only)
{
	struct ferry_config *cfg = xcalloc(1, sizeof(*cfg));
	struct config_errors errs = { 0, NULL };

	if (config_load(path, cfg, &errs) == 0)
		return cfg;
	config_errors_print(&errs, stderr);
	if (test_only)
		fprintf(stderr, "ferryd: %s is broken: %d error%s (above); a "
		    "running ferryd keeps its current configuration; nothing "
		    "reloaded\n", path, errs.n, errs.n == 1 ? "" : "s");
	else
		fprintf(stderr, "ferryd: %s: %d error%s, not started\n", path,
		    errs.n, errs.n == 1 ? "" : "s");
	config_errors_free(&errs);
	free(cfg);
	exit(FERRY_EX_CONFIG);
}

/* Postgres queues must find their table, columns and ferry_batches: refuse
 * to start otherwise. An unreachable server is only a warning: the workers
 * wait for it with the jobs safe in Redis. */
static int
check_sinks(const struct ferry_config *cfg)
{
	char err[512];

	for (int i = 0; i < cfg->nqueues; i++) {
		const struct queue_config *q = &cfg->queues[i];
		if (q->handler != CONFIG_HANDLER_POSTGRES)
			continue;
		enum pg_status st = pg_target_check(cfg, q, false, NULL, err,
		    sizeof(err));
		if (st == PG_FATAL) {
			fprintf(stderr, "ferryd: queue %s: %s; not started\n",
			    q->name, err);
			return -1;
		}
		if (st == PG_UNAVAILABLE)
			fprintf(stderr, "ferryd: queue %s: %s; starting anyway, "
			    "its jobs wait in Redis\n", q->name, err);
	}
	return 0;
}

/* A start-up error: to the log, and to stderr when the log is elsewhere. */
static void __attribute__((format(printf, 1, 2)))
startup_error(const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (log_fd() != STDERR_FILENO)
		fprintf(stderr, "ferryd: %s\n", msg);
	log_error("%s", msg);
}

/* The group to give the config file: [ferryd] group, else the user's. */
static const char *
service_group(const struct ferry_config *cfg)
{
	struct passwd *pw;
	struct group *gr;

	if (*cfg->group != '\0')
		return cfg->group;
	if (*cfg->user != '\0' && (pw = getpwnam(cfg->user)) != NULL &&
	    (gr = getgrgid(pw->pw_gid)) != NULL)
		return gr->gr_name;
	return NULL;
}

/* A password in a file every user may read: say so, and how to fix it. */
static void
warn_exposed_secret(const struct ferry_config *cfg, bool to_log)
{
	mode_t mode = 0;
	const char *file;
	const char *key = config_secret_exposed(cfg, &file, &mode);
	const char *group = service_group(cfg);
	char msg[1024], chgrp[256], move[128] = "";

	if (key == NULL)
		return;
	if (group != NULL)
		snprintf(chgrp, sizeof(chgrp), "chgrp %s %s (the group of "
		    "[ferryd] user)", group, file);
	else
		snprintf(chgrp, sizeof(chgrp), "chgrp it to the group of the "
		    "user ferryd runs as");
	if (file == cfg->path && strcmp(key, "redis_sentinel_password") != 0)
		snprintf(move, sizeof(move), ", or move the password into a "
		    "file named by %s_file", key);
	snprintf(msg, sizeof(msg), "%s %s %s and is readable by every user "
	    "(mode %04o): chmod 0640 %s and %s%s", file, file == cfg->path ?
	    "holds" : "is the", key, (unsigned)mode, file, chgrp, move);
	if (!to_log || log_fd() != STDERR_FILENO)
		fprintf(stderr, "ferryd: warning: %s\n", msg);
	if (to_log)
		log_warn("%s", msg);
}

static int
take_pidfile(const char *path)
{
	pid_t holder;
	char why[256];
	int fd = daemon_pidfile_lock(path, &holder, why, sizeof(why));

	if (fd != -1)
		return fd;
	if (errno == EWOULDBLOCK)
		fprintf(stderr, "ferryd: pidfile %s is held by a running ferryd "
		    "(pid %ld): stop it first, or set another pidfile\n", path,
		    (long)holder);
	else
		fprintf(stderr, "ferryd: cannot open pidfile %s: %s (check "
		    "[ferryd] pidfile and its directory)\n", path, why);
	return -1;
}

/* As root: the control socket and the metrics port (which may be below
 * 1024), then the switch to [ferryd] user. 0, or -1 after saying why. */
static int
open_and_drop(const struct ferry_config *cfg, struct control **control,
    struct http_server **http)
{
	char err[512];
	uid_t uid;
	gid_t gid;
	int switching;

	/* made as root, so that it may live in a root-owned folder (/run) */
	*control = control_open(cfg->control_socket, err, sizeof(err));
	if (*control == NULL && err[0] != '\0')
		goto fail;
	*http = http_server_open(cfg->metrics_listen, err, sizeof(err));
	if (*http == NULL && err[0] != '\0')
		goto fail;
	switching = daemon_resolve_user(cfg->user, cfg->group, &uid, &gid, err,
	    sizeof(err));
	if (switching == -1 || (switching == 1 &&
	    (control_chown(*control, uid, gid, err, sizeof(err)) == -1 ||
	    daemon_switch_user(cfg->user, cfg->group, uid, gid, err,
	    sizeof(err)) == -1)))
		goto fail;
	return 0;
fail:
	startup_error("%s; not started", err);
	return -1;
}

int
main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "foreground", no_argument, NULL, 'f' },
		{ "test", no_argument, NULL, 't' },
		{ "version", no_argument, NULL, 'V' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *path = FERRY_CONFIG_PATH;
	int foreground = 0, test_only = 0, report_fd = -1, ch;
	char err[256];

	while ((ch = getopt_long(argc, argv, "c:ftVh", longopts, NULL)) != -1) {
		switch (ch) {
		case 'c': path = optarg; break;
		case 'f': foreground = 1; break;
		case 't': test_only = 1; break;
		case 'V':
			printf("ferryd %s\n", PACKAGE_VERSION);
			return FERRY_EX_OK;
		case 'h': usage(stdout); return FERRY_EX_OK;
		default: usage(stderr); return FERRY_EX_USAGE;
		}
	}
	if (optind != argc) {
		usage(stderr);
		return FERRY_EX_USAGE;
	}
	/* the daemon runs in / and re-reads the file on HUP: keep it absolute */
	char *abspath = realpath(path, NULL);
	struct ferry_config *cfg = load_or_exit(abspath != NULL ? abspath : path,
	    test_only);
	free(abspath);
	if (test_only) {
		warn_exposed_secret(cfg, false);
		printf("ferryd: configuration file %s test is successful "
		    "(%d queues)\n", path, cfg->nqueues);
		config_free(cfg);
		free(cfg);
		return FERRY_EX_OK;
	}
	if (!foreground && strcmp(cfg->log, "stderr") == 0) {
		fprintf(stderr, "ferryd: note: log = stderr, but a detached "
		    "ferryd has no stderr: logging to syslog (facility daemon) "
		    "instead; set [ferryd] log to syslog or a file, or run "
		    "ferryd -f under a supervisor that keeps its stderr\n");
		log_stderr_gone();
	}
	if (log_open(cfg->log, cfg->log_level) == -1) {
		fprintf(stderr, "ferryd: cannot open log %s: %s (check [ferryd] "
		    "log)\n", cfg->log, log_open_error());
		return not_started(cfg);
	}
	warn_exposed_secret(cfg, true);
	if (check_sinks(cfg) == -1 || memory_check_start(cfg) == -1)
		return not_started(cfg);
	int pidfd = take_pidfile(cfg->pidfile);
	if (pidfd == -1)
		return not_started(cfg);
	if (!foreground && daemon_detach(&report_fd) == -1) {
		startup_error("cannot detach: %s", strerror(errno));
		return not_started(cfg);
	}
	if (daemon_pidfile_write(pidfd) == -1) {
		startup_error("cannot write pidfile %s: %s", cfg->pidfile,
		    strerror(errno));
		daemon_pidfile_remove(cfg->pidfile, pidfd);
		return not_started(cfg);
	}
	if (getuid() == 0 && *cfg->user == '\0')
		log_notice("running as root; set [ferryd] user to drop privileges");
	struct control *control = NULL;
	struct http_server *http = NULL;
	if (open_and_drop(cfg, &control, &http) == -1) {
		http_server_close(http);
		control_close(control);
		daemon_pidfile_remove(cfg->pidfile, pidfd);
		return not_started(cfg);
	}
	if (*cfg->user != '\0')
		log_notice("dropped privileges to user %s", cfg->user);
	/* the master's signals stay pending until its loop handles them: a
	 * TERM sent as soon as the pidfile exists must not kill it unlogged */
	sigset_t managed;
	master_signal_set(&managed);
	sigprocmask(SIG_BLOCK, &managed, NULL);
	/* after detaching (the id carries the daemon's pid), before the
	 * first process reports success: a clash of ids is a failed start */
	struct master_ident ident;
	int claimed = master_ident_init(&ident, err, sizeof(err));
	if (claimed == -1)
		startup_error("%s; not started", err);
	else
		claimed = master_ident_claim(cfg, &ident);
	if (claimed == -1) {
		http_server_close(http);
		control_close(control);
		daemon_pidfile_remove(cfg->pidfile, pidfd);
		return not_started(cfg);
	}
	daemon_ready(report_fd);
	char *pidfile = xstrdup(cfg->pidfile);
	struct master_http hooks = {
		.server = http, .start = http_server_start,
		.stopping = http_server_stopping, .close = http_server_close,
		.release = http_server_release,
	};
	int status = master_run(cfg, control, &hooks, &ident);
	daemon_pidfile_remove(pidfile, pidfd);
	free(pidfile);
	log_close();
	return status;
}
