/* test_notify.c - ferryd under systemd's notify protocol, read from a real
 * datagram socket named in NOTIFY_SOCKET as systemd would: READY=1 with a
 * STATUS= line once the queues run, RELOADING=1 (with MONOTONIC_USEC) and
 * READY=1 around a reload, STOPPING=1 at SIGTERM; with WATCHDOG_USEC,
 * WATCHDOG=1 at half the interval, none while the master is stopped
 * (SIGSTOP) and again once it runs; the workers get no NOTIFY_SOCKET. */
#include <criterion/criterion.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

static struct ferryd d;
static int sock = -1;

static void
teardown(void)
{
	unsetenv("NOTIFY_SOCKET");
	unsetenv("WATCHDOG_USEC");
	if (sock != -1)
		close(sock);
	sock = -1;
	h_teardown(&d);
}

TestSuite(notify, .fini = teardown, .timeout = 120);

/* The socket in d.dir, named in NOTIFY_SOCKET for the ferryd started next. */
static void
listen_notify(void)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };

	cr_assert_lt(strlen(d.dir) + 13, sizeof(a.sun_path));
	memcpy(a.sun_path, d.dir, strlen(d.dir));
	memcpy(a.sun_path + strlen(d.dir), "/notify.sock", 13);
	sock = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	cr_assert_neq(sock, -1);
	cr_assert_eq(bind(sock, (struct sockaddr *)&a, sizeof(a)), 0);
	setenv("NOTIFY_SOCKET", a.sun_path, 1);
}

/* The messages that arrive within ms, appended to log ("\n---\n" apart);
 * stops early once `until` is in the log (NULL: takes the whole time).
 * Returns log. */
static char *
read_for(char *log, size_t size, long ms, const char *until)
{
	long long end = h_now_ms() + ms;
	char msg[4096];

	while (h_now_ms() < end && (until == NULL || strstr(log, until) == NULL)) {
		struct pollfd p = { sock, POLLIN, 0 };
		if (poll(&p, 1, 20) != 1)
			continue;
		ssize_t n = recv(sock, msg, sizeof(msg) - 1, 0);
		if (n <= 0)
			continue;
		msg[n] = '\0';
		size_t len = strlen(log);
		snprintf(log + len, size - len, "%s\n---\n", msg);
	}
	return log;
}

static int
count(const char *text, const char *needle)
{
	int n = 0;

	for (const char *p = text; (p = strstr(p, needle)) != NULL; p++)
		n++;
	return n;
}

Test(notify, ready_reloading_stopping)
{
	static char log[1 << 16];

	h_setup(&d, NULL, "[queue q]\nworkers = 2\n[queue r]\nworkers = 1\n");
	listen_notify();
	h_start(&d, 3);
	unsetenv("NOTIFY_SOCKET");
	read_for(log, sizeof(log), 10000, "READY=1");
	cr_assert_not_null(strstr(log, "READY=1\nSTATUS=2 queues, 3/3 workers"),
	    "%s", log);
	cr_assert_eq(count(log, "WATCHDOG=1"), 0, "no WatchdogSec: no pings");
	/* the workers do not speak for the service */
	pid_t w[4];
	cr_assert_eq(h_children(d.pid, w, 4), 3);
	char path[64], *env;
	snprintf(path, sizeof(path), "/proc/%d/environ", (int)w[0]);
	FILE *f = fopen(path, "r");
	cr_assert_not_null(f);
	static char envbuf[1 << 16];
	size_t n = fread(envbuf, 1, sizeof(envbuf) - 1, f);
	fclose(f);
	for (size_t i = 0; i < n; i++)
		if (envbuf[i] == '\0')
			envbuf[i] = '\n';
	envbuf[n] = '\0';
	env = envbuf;
	cr_assert_null(strstr(env, "NOTIFY_SOCKET="), "a worker has it");
	/* a reload: RELOADING=1 with the monotonic time, then READY=1 */
	log[0] = '\0';
	kill(d.pid, SIGHUP);
	read_for(log, sizeof(log), 10000, "READY=1");
	char *reloading = strstr(log, "RELOADING=1\nMONOTONIC_USEC=");
	cr_assert_not_null(reloading, "%s", log);
	unsigned long long usec = strtoull(reloading + 27, NULL, 10);
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	unsigned long long now = (unsigned long long)ts.tv_sec * 1000000ull +
	    (unsigned long long)ts.tv_nsec / 1000u;
	cr_assert(usec > 0 && usec <= now && now - usec < 10000000ull,
	    "MONOTONIC_USEC %llu, now %llu", usec, now);
	cr_assert_not_null(strstr(reloading, "READY=1\nSTATUS="), "%s", log);
	/* a broken file: refused, READY=1 all the same (the old one runs) */
	h_write_file(d.config, "[ferryd]\nnot an ini line\n");
	log[0] = '\0';
	kill(d.pid, SIGHUP);
	read_for(log, sizeof(log), 10000, "READY=1");
	cr_assert_not_null(strstr(log, "RELOADING=1"), "%s", log);
	cr_assert_not_null(strstr(log, "READY=1"), "%s", log);
	h_expect_log(&d, "reload");
	/* the stop */
	log[0] = '\0';
	kill(d.pid, SIGTERM);
	read_for(log, sizeof(log), 10000, "STOPPING=1");
	cr_assert_not_null(strstr(log, "STOPPING=1"), "%s", log);
	cr_assert_eq(h_wait_exit(d.pid, H_DEADLINE_MS), 0);
	d.pid = 0;
}

Test(notify, watchdog_pings_stop_while_the_master_is_stopped)
{
	static char log[1 << 16];

	h_setup(&d, NULL, "[queue q]\nworkers = 1\n");
	listen_notify();
	setenv("WATCHDOG_USEC", "400000", 1);     /* a ping every 0.2 s */
	h_start(&d, 1);
	unsetenv("NOTIFY_SOCKET");
	unsetenv("WATCHDOG_USEC");
	read_for(log, sizeof(log), 10000, "READY=1");
	log[0] = '\0';
	read_for(log, sizeof(log), 1000, NULL);
	int pings = count(log, "WATCHDOG=1");
	cr_assert(pings >= 3 && pings <= 7, "%d pings in 1 s:\n%s", pings, log);
	kill(d.pid, SIGSTOP);
	h_wait_stopped(&d, d.pid, true);
	log[0] = '\0';
	read_for(log, sizeof(log), 200, NULL);    /* sent before the stop */
	log[0] = '\0';
	read_for(log, sizeof(log), 1500, NULL);
	cr_assert_eq(count(log, "WATCHDOG=1"), 0, "pings from a stopped "
	    "master:\n%s", log);
	kill(d.pid, SIGCONT);
	log[0] = '\0';
	read_for(log, sizeof(log), 1000, NULL);
	cr_assert_geq(count(log, "WATCHDOG=1"), 2, "%s", log);
	h_stop(&d);
}
