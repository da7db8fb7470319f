/* test_init.c - scripts/ferryd.init driven for real: a private redis-server,
 * a config and pidfile in a temp folder, and a defaults file passed through
 * FERRYD_DEFAULTS that points the script at the build's ferryd. Checks the
 * LSB exit codes of start, status, reload (valid and broken), configtest and
 * stop, and what each leaves behind (pidfile, processes, log). */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

#define INIT_SCRIPT TEST_SRCDIR "/scripts/ferryd.init"
#define QUEUES "[queue q]\nworkers = 2\n"
#define SCRIPT_DEADLINE_MS 120000  /* stop may wait shutdown_timeout+margin */

/* LSB exit codes */
#define LSB_OK 0
#define LSB_DEAD_PIDFILE 1
#define LSB_NOT_RUNNING 3
#define LSB_NOT_CONFIGURED 6
#define LSB_RELOAD_NOT_RUNNING 7

static struct ferryd d;
static char defaults[400];

struct run {
	int status;             /* exit status, or 128 + signal */
	char *out;              /* stdout and stderr */
};

static const char *
ferryd_bin(void)
{
	const char *p = getenv("FERRYD");
	return p != NULL ? p : TEST_BUILDDIR "/ferryd";
}

/* Does process `pid` (a /proc entry) hold our log open? */
static bool
holds_our_log(const char *pid)
{
	char path[600], target[400];
	DIR *fds;
	struct dirent *e;
	bool found = false;

	snprintf(path, sizeof(path), "/proc/%s/fd", pid);
	if ((fds = opendir(path)) == NULL)
		return false;
	while (!found && (e = readdir(fds)) != NULL) {
		snprintf(path, sizeof(path), "/proc/%s/fd/%s", pid, e->d_name);
		ssize_t n = readlink(path, target, sizeof(target) - 1);
		if (n > 0) {
			target[n] = '\0';
			found = strcmp(target, d.log) == 0;
		}
	}
	closedir(fds);
	return found;
}

/* The processes (not zombies) running ferryd with our log open: the
 * daemon's master and workers (orphans too), nothing else on a shared
 * machine. (Their command lines are titles, "ferryd: master", which name
 * no config.) */
static int
count_daemon_procs(void)
{
	DIR *dir = opendir("/proc");
	struct dirent *e;
	int n = 0;

	cr_assert_not_null(dir);
	while ((e = readdir(dir)) != NULL) {
		char path[300], exe[400];
		if (e->d_name[0] < '0' || e->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/exe", e->d_name);
		ssize_t len = readlink(path, exe, sizeof(exe) - 1);
		if (len <= 0)
			continue;
		exe[len] = '\0';
		const char *base = strrchr(exe, '/');
		base = base != NULL ? base + 1 : exe;
		if (strcmp(base, "ferryd") == 0 && holds_our_log(e->d_name) &&
		    h_pid_alive((pid_t)atoi(e->d_name)))
			n++;
	}
	closedir(dir);
	return n;
}

/* The pid in the pidfile, or 0. */
static pid_t
pidfile_pid(void)
{
	char *text = h_read_file(d.pidfile);
	pid_t pid = (pid_t)atoi(text);
	free(text);
	return pid;
}

static bool
pidfile_exists(void)
{
	return access(d.pidfile, F_OK) == 0;
}

/* Defaults file for the script: our ferryd, our config, and `extra`. */
static void
write_defaults(const char *extra)
{
	snprintf(defaults, sizeof(defaults), "%s/defaults", d.dir);
	h_write_file(defaults,
	    "# written by test_init\n"
	    "DAEMON='%s'\n"
	    "FERRYD_CONFIG='%s'\n"
	    "FERRYD_STOP_MARGIN=20\n"
	    "%s", ferryd_bin(), d.config, extra != NULL ? extra : "");
}

/* Run `sh scripts/ferryd.init ACTION` with FERRYD_DEFAULTS=defaults. */
static int
init_run(struct run *r, const char *action)
{
	char out_path[] = "/tmp/ferry-init-out-XXXXXX";
	int out = mkstemp(out_path);

	cr_assert_neq(out, -1);
	pid_t pid = fork();
	cr_assert_neq(pid, -1);
	if (pid == 0) {
		int null = open("/dev/null", O_RDONLY);
		dup2(null, 0);
		dup2(out, 1);
		dup2(out, 2);
		/* the daemon must not inherit Criterion's descriptors */
		for (int fd = 3; fd < 1024; fd++)
			close(fd);
		setpgid(0, 0);
		setenv("FERRYD_DEFAULTS", defaults, 1);
		execl("/bin/sh", "sh", INIT_SCRIPT, action, (char *)NULL);
		fprintf(stderr, "exec /bin/sh: %s\n", strerror(errno));
		_exit(127);
	}
	close(out);
	int status = h_wait_exit(pid, SCRIPT_DEADLINE_MS);
	if (status == -1) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
	}
	r->out = h_read_file(out_path);
	unlink(out_path);
	cr_assert_neq(status, -1, "ferryd.init %s did not exit; output:\n%s",
	    action, r->out);
	r->status = WIFEXITED(status) ? WEXITSTATUS(status) :
	    128 + WTERMSIG(status);
	return r->status;
}

/* Run an action and check its exit status; returns its output (to free). */
static char *
expect(const char *action, int want)
{
	struct run r;

	init_run(&r, action);
	if (r.status != want)
		h_dump_log(&d);
	cr_assert_eq(r.status, want, "ferryd.init %s exited %d, expected %d; "
	    "output:\n%s", action, r.status, want, r.out);
	return r.out;
}

static void
expect_free(const char *action, int want)
{
	free(expect(action, want));
}

static void
assert_contains(const char *text, const char *needle, const char *what)
{
	cr_assert_not_null(strstr(text, needle), "%s lacks \"%s\":\n%s", what,
	    needle, text);
}

/* Start through the script: exit 0, a pidfile naming a live master with
 * its workers. Returns the master's pid. */
static pid_t
start_daemon(int workers)
{
	char *out = expect("start", LSB_OK);
	free(out);
	cr_assert(pidfile_exists(), "no pidfile %s after start", d.pidfile);
	pid_t pid = pidfile_pid();
	cr_assert_gt(pid, 0, "pidfile %s holds no pid", d.pidfile);
	cr_assert(h_pid_alive(pid), "pid %d of the pidfile is not running",
	    (int)pid);
	d.pid = pid;            /* not our child: h_teardown leaves it alone */
	h_wait_children(&d, workers);
	return pid;
}

/* Wait until no process of ours is left (a stop leaves none at once; a
 * kill may take a moment to be reaped). */
static void
wait_no_daemon(int timeout_ms)
{
	long long end = h_now_ms() + timeout_ms;

	while (count_daemon_procs() != 0 && h_now_ms() < end)
		h_sleep_ms(20);
}

static void
setup(void)
{
	h_setup(&d, "shutdown_timeout = 1500ms\n", QUEUES);
	write_defaults(NULL);
}

/* Whatever a failed test left running goes: TERM, then KILL. */
static void
teardown(void)
{
	pid_t pid = pidfile_pid();

	if (d.dir[0] != '\0' && count_daemon_procs() > 0) {
		if (pid > 0)
			kill(pid, SIGTERM);
		wait_no_daemon(H_DEADLINE_MS);
		if (pid > 0 && count_daemon_procs() > 0)
			kill(pid, SIGKILL);
		wait_no_daemon(H_DEADLINE_MS);
	}
	d.pid = 0;
	h_teardown(&d);
}

TestSuite(init, .init = setup, .fini = teardown, .timeout = 600);

Test(init, start_status_stop)
{
	char *out;

	out = expect("status", LSB_NOT_RUNNING);
	free(out);

	pid_t pid = start_daemon(2);
	cr_assert_eq(count_daemon_procs(), 3, "expected master + 2 workers");

	out = expect("status", LSB_OK);
	assert_contains(out, "running", "status output");
	free(out);

	/* start again: success, the same daemon, no second one */
	out = expect("start", LSB_OK);
	assert_contains(out, "already running", "second start output");
	cr_assert_null(strstr(out, "held by"), "a second ferryd was run:\n%s",
	    out);
	free(out);
	cr_assert_eq(pidfile_pid(), pid, "the pidfile changed on a second start");
	cr_assert_eq(count_daemon_procs(), 3, "a second start added processes");

	/* stop waits shutdown_timeout (1500ms: 2 s) + FERRYD_STOP_MARGIN */
	out = expect("stop", LSB_OK);
	assert_contains(out, "up to 22s", "stop output");
	free(out);
	cr_assert(!pidfile_exists(), "pidfile %s left after stop", d.pidfile);
	cr_assert(!h_pid_alive(pid), "master %d still runs after stop",
	    (int)pid);
	wait_no_daemon(H_DEADLINE_MS);
	cr_assert_eq(count_daemon_procs(), 0, "processes left after stop");
	h_wait_log(&d, "graceful stop", 1);

	expect_free("status", LSB_NOT_RUNNING);
	expect_free("stop", LSB_OK);                    /* not running: fine */
	expect_free("reload", LSB_RELOAD_NOT_RUNNING);
	h_stop(&d);
}

Test(init, reload_valid)
{
	pid_t pid = start_daemon(2);

	h_config(&d, "shutdown_timeout = 1500ms\n", "[queue q]\nworkers = 3\n");
	char *out = expect("reload", LSB_OK);
	free(out);
	h_wait_log(&d, "reload: reading", 1);
	h_wait_log(&d, "reload: done", 1);
	h_wait_log(&d, "workers 2 -> 3", 1);
	h_wait_children(&d, 3);
	cr_assert_eq(pidfile_pid(), pid, "reload changed the master");

	/* force-reload of a running daemon is a reload */
	out = expect("force-reload", LSB_OK);
	free(out);
	h_wait_log(&d, "reload: done", 2);

	expect_free("stop", LSB_OK);
	cr_assert(!pidfile_exists());
	expect_free("force-reload", LSB_OK);            /* not running: nothing */
	h_stop(&d);
}

Test(init, reload_broken_keeps_daemon)
{
	pid_t pid = start_daemon(2);

	/* valid [ferryd] lines, then two errors */
	h_config(&d, "shutdown_timeout = 1500ms\ncolour = red\n",
	    "[queue q]\nworkers = 3\nbatch_size = 0\n");
	char *out = expect("reload", LSB_NOT_CONFIGURED);
	assert_contains(out, "colour: unknown key", "reload output");
	assert_contains(out, "batch_size: \"0\" out of range", "reload output");
	/* what is true: ferryd -t's verdict, then the script's */
	char want[600];
	snprintf(want, sizeof(want), "%s is broken: 2 errors (above); a running "
	    "ferryd keeps its current configuration; nothing reloaded", d.config);
	assert_contains(out, want, "reload output");
	snprintf(want, sizeof(want), "%s is broken (errors above); the running "
	    "ferryd (pid %d) keeps its current configuration; nothing reloaded",
	    d.config, (int)pid);
	assert_contains(out, want, "reload output");
	cr_assert_null(strstr(out, "not started"), "%s", out);
	free(out);

	/* no HUP was sent: give a stray one time to show, then look */
	h_sleep_ms(300);
	cr_assert(h_pid_alive(pid), "the daemon died on a refused reload");
	cr_assert_eq(pidfile_pid(), pid, "the pidfile changed");
	cr_assert_eq(h_count_in_file(d.log, "reload: reading"), 0,
	    "the daemon was sent HUP for a broken file");
	h_wait_children(&d, 2);                         /* the old config */

	/* restart refuses too, and leaves the daemon alone */
	out = expect("restart", LSB_NOT_CONFIGURED);
	assert_contains(out, "colour: unknown key", "restart output");
	assert_contains(out, "keeps its current configuration; not restarted",
	    "restart output");
	free(out);
	cr_assert(h_pid_alive(pid), "restart stopped the daemon for a bad file");
	expect_free("status", LSB_OK);

	/* stop still finds it: the pidfile line is intact */
	expect_free("stop", LSB_OK);
	cr_assert(!h_pid_alive(pid));
	cr_assert(!pidfile_exists());
	h_stop(&d);
}

Test(init, configtest_and_broken_start)
{
	char *out = expect("configtest", LSB_OK);
	assert_contains(out, "test is successful", "configtest output");
	free(out);

	h_config(&d, "heartbeat_ttl = 2x\n", QUEUES);
	out = expect("configtest", LSB_NOT_CONFIGURED);
	assert_contains(out, "heartbeat_ttl: \"2x\" is not a duration",
	    "configtest output");
	free(out);

	out = expect("start", LSB_NOT_CONFIGURED);
	assert_contains(out, "heartbeat_ttl", "start output");
	free(out);
	cr_assert(!pidfile_exists(), "a refused start left a pidfile");
	cr_assert_eq(count_daemon_procs(), 0);
	expect_free("status", LSB_NOT_RUNNING);
	h_stop(&d);
}

/* Without /lib/lsb/init-functions, with the pidfile written "key: value"
 * after decoys the parser must skip, and a daemon killed with -9. */
Test(init, plain_messages_and_stale_pidfile)
{
	write_defaults("INIT_FUNCTIONS=/nonexistent\n");
	h_write_file(d.config,
	    "; pidfile = %s/wrong-1.pid\r\n"
	    "[ferryd]\r\n"
	    "# pidfile = %s/wrong-2.pid\r\n"
	    "pidfile:%s ; the real one\r\n"
	    "log = %s\r\n"
	    "control_socket = %s/ferryd.sock\r\n"
	    "redis_port = %d\r\n"
	    "[queue q]\r\n"
	    "workers = 1\r\n", d.dir, d.dir, d.pidfile, d.log, d.dir,
	    d.redis.port);

	char *out = expect("start", LSB_OK);
	assert_contains(out, "Starting", "start output");
	cr_assert_null(strstr(out, "not found"), "a message function is "
	    "missing:\n%s", out);
	free(out);
	pid_t pid = pidfile_pid();
	cr_assert_gt(pid, 0);
	d.pid = pid;
	h_wait_children(&d, 1);

	out = expect("status", LSB_OK);
	assert_contains(out, "is running", "status output");
	free(out);

	/* killed: the pidfile stays behind, status says dead */
	kill(pid, SIGKILL);
	wait_no_daemon(H_DEADLINE_MS);
	cr_assert_eq(count_daemon_procs(), 0);
	cr_assert(pidfile_exists());
	out = expect("status", LSB_DEAD_PIDFILE);
	assert_contains(out, "not running", "status output");
	free(out);
	expect_free("stop", LSB_OK);
	cr_assert(!pidfile_exists(), "stop left a stale pidfile");
	expect_free("status", LSB_NOT_RUNNING);

	/* a stale pidfile does not stop a start */
	h_write_file(d.pidfile, "%d\n", (int)pid);
	start_daemon(1);
	expect_free("stop", LSB_OK);
	cr_assert(!pidfile_exists());
	h_stop(&d);
}

/* /run is a tmpfs: after a reboot the pidfile's folder (the package's
 * /run/ferryd/) is gone, and without systemd nothing makes it again. The
 * script's start makes it, for [ferryd] user. */
Test(init, start_makes_the_pidfile_folder)
{
	struct stat st;
	char piddir[300];

	snprintf(piddir, sizeof(piddir), "%s/run/ferryd", d.dir);
	snprintf(d.pidfile, sizeof(d.pidfile), "%s/ferryd.pid", piddir);
	h_config(&d, "shutdown_timeout = 1500ms\n", QUEUES);
	cr_assert_neq(stat(piddir, &st), 0, "%s exists already", piddir);
	start_daemon(2);
	cr_assert_eq(stat(piddir, &st), 0, "start did not make %s", piddir);
	cr_assert(S_ISDIR(st.st_mode));
	cr_assert_eq(st.st_mode & 07777, 0755);
	expect_free("stop", LSB_OK);
	wait_no_daemon(H_DEADLINE_MS);
	cr_assert(!pidfile_exists(), "pidfile %s left after stop", d.pidfile);
	h_stop(&d);
}
