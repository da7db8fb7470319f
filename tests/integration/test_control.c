/* test_control.c - the control socket of a real ferryd, spoken to directly
 * and through ferryctl: its file, status, pause/resume, workers, reload,
 * metrics parsed back, and the errors when ferryd is not (or not) there. */
#include <criterion/criterion.h>
#include <errno.h>
#include <pwd.h>
#include <regex.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "util.h"

#define QUEUES "[queue q]\nworkers = %d\n[queue other]\nworkers = 1\n"

static struct ferryd d;

static void
teardown(void)
{
	h_teardown(&d);
}

TestSuite(control, .fini = teardown, .timeout = 240);

static void
start(int q_workers)
{
	char queues[128];

	snprintf(queues, sizeof(queues), QUEUES, q_workers);
	h_setup(&d, NULL, queues);
	h_start(&d, q_workers + 1);
}

static const char *
sock_path(void)
{
	static char path[320];
	snprintf(path, sizeof(path), "%s/ferryd.sock", d.dir);
	return path;
}

static int
dial(const char *path)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);

	cr_assert_lt(strlen(path), sizeof(sun.sun_path), "socket path too long");
	memcpy(sun.sun_path, path, strlen(path) + 1);
	cr_assert_eq(connect(fd, (struct sockaddr *)&sun, sizeof(sun)), 0,
	    "connect %s: %s", path, strerror(errno));
	return fd;
}

static char *
read_all(int fd)
{
	size_t cap = 1 << 16, len = 0;
	char *buf = malloc(cap);
	ssize_t n;

	while ((n = read(fd, buf + len, cap - len - 1)) > 0)
		if ((len += (size_t)n) + 1 == cap)
			buf = realloc(buf, cap *= 2);
	buf[len] = '\0';
	close(fd);
	return buf;
}

/* Send `request` as is on the control socket; the whole answer. */
static char *
ask(const char *request)
{
	int fd = dial(sock_path());
	cr_assert_eq(write(fd, request, strlen(request)),
	    (ssize_t)strlen(request));
	shutdown(fd, SHUT_WR);
	return read_all(fd);
}

#define CTL(r, ...) \
	h_ctl((r), d.config, NULL, __VA_ARGS__, (const char *)NULL)

static void
expect(struct h_run *r, int status, const char *in_err)
{
	cr_assert_eq(r->status, status, "ferryctl exited %d, expected %d\n"
	    "-- stdout:\n%s-- stderr:\n%s", r->status, status, r->out, r->err);
	if (in_err != NULL)
		cr_assert_not_null(strstr(r->err, in_err), "no \"%s\" in: %s",
		    in_err, r->err);
	free(r->out);
	free(r->err);
}

/* How many worker lines of `queue` in status have state `state`. */
static int
workers_in_state(const char *queue, const char *state)
{
	char *st = ask("status\n"), want[96], *line, *save = NULL;
	int n = 0;

	snprintf(want, sizeof(want), "worker queue=%s ", queue);
	for (line = strtok_r(st, "\n", &save); line != NULL;
	    line = strtok_r(NULL, "\n", &save)) {
		char *s = strstr(line, " state=");
		if (strncmp(line, want, strlen(want)) == 0 && s != NULL &&
		    strncmp(s + 7, state, strlen(state)) == 0 &&
		    s[7 + strlen(state)] == ' ')
			n++;
	}
	free(st);
	return n;
}

/* The pid of the first worker of `queue` that status lists. */
static pid_t
worker_pid(const char *queue)
{
	char *st = ask("status\n"), want[96];

	snprintf(want, sizeof(want), "\nworker queue=%s ", queue);
	char *w = strstr(st, want), *pid = w ? strstr(w, " pid=") : NULL;
	cr_assert_not_null(pid, "no worker of %s in: %s", queue, st);
	pid_t p = atoi(pid + 5);
	free(st);
	return p;
}

Test(control, socket_is_private_and_removed_at_exit)
{
	struct stat st;

	start(1);
	cr_assert_eq(lstat(sock_path(), &st), 0, "no %s", sock_path());
	cr_assert(S_ISSOCK(st.st_mode));
	cr_assert_eq(st.st_mode & 07777, 0600, "mode %o", st.st_mode & 07777);
	kill(d.pid, SIGTERM);
	cr_assert_neq(h_wait_exit(d.pid, H_DEADLINE_MS), -1);
	d.pid = 0;
	cr_assert_eq(lstat(sock_path(), &st), -1, "socket left behind");
	h_stop(&d);
}

Test(control, status_lists_every_worker)
{
	pid_t kids[H_MAX_PIDS], listed[H_MAX_PIDS];
	int n = 0;

	start(2);
	int nkids = h_children(d.pid, kids, H_MAX_PIDS);
	char *st = ask("status\n");
	cr_assert_eq(strncmp(st, "ferryd ", 7), 0, "%s", st);
	cr_assert(strlen(st) > 3 && strcmp(st + strlen(st) - 4, "\nok\n") == 0,
	    "no final ok line: %s", st);
	cr_assert_not_null(strstr(st, "queue name=q target=2 workers=2 "
	    "paused=no"), "%s", st);
	for (char *p = st; (p = strstr(p, "\nworker ")) != NULL; p++) {
		char *pid = strstr(p, " pid=");
		cr_assert_not_null(pid);
		listed[n++] = atoi(pid + 5);
	}
	free(st);
	cr_assert_eq(n, nkids, "%d workers listed, %d children", n, nkids);
	for (int i = 0; i < n; i++) {
		bool found = false;
		for (int j = 0; j < nkids; j++)
			found |= listed[i] == kids[j];
		cr_assert(found, "listed pid %d is not a child", (int)listed[i]);
	}
	struct h_run r;
	CTL(&r, "status");
	cr_assert_not_null(strstr(r.out, "worker queue=other number=1 "));
	cr_assert_null(strstr(r.out, "\nok\n"), "ferryctl prints no ok line");
	expect(&r, 0, NULL);
	h_stop(&d);
}

Test(control, pause_stops_a_queue_and_resume_restarts_it)
{
	struct h_run r;

	start(2);
	CTL(&r, "pause", "q");
	expect(&r, 0, NULL);
	long long end = h_now_ms() + H_DEADLINE_MS;
	while (workers_in_state("q", "paused") < 2 && h_now_ms() < end)
		h_sleep_ms(50);
	cr_assert_eq(workers_in_state("q", "paused"), 2);
	cr_assert_eq(workers_in_state("other", "paused"), 0);
	h_push_jobs(&d, "q", 0, 100);
	h_push_jobs(&d, "other", 0, 10);
	h_wait_redis_int(&d, 0, "LLEN ferry:{other}:ready");
	h_sleep_ms(1500);       /* the point: q fetches nothing meanwhile */
	cr_assert_eq(h_redis_int(&d, "LLEN ferry:{q}:ready"), 100,
	    "a paused queue fetched jobs");
	/* a worker started while paused is paused too */
	CTL(&r, "workers", "q", "3");
	expect(&r, 0, NULL);
	h_wait_children(&d, 4);
	h_sleep_ms(500);        /* the point: the new one fetches nothing */
	cr_assert_eq(h_redis_int(&d, "LLEN ferry:{q}:ready"), 100);
	CTL(&r, "resume", "q");
	expect(&r, 0, NULL);
	h_wait_redis_int(&d, 100, "HGET ferry:{q}:stats done");
	cr_assert_eq(h_redis_int(&d, "LLEN ferry:{q}:ready"), 0);
	CTL(&r, "pause", "nope");
	expect(&r, 1, "unknown queue nope");
	h_stop(&d);
}

Test(control, workers_sets_the_count)
{
	struct h_run r;

	start(1);
	CTL(&r, "workers", "q", "4");
	expect(&r, 0, NULL);
	h_wait_children(&d, 5);
	CTL(&r, "workers", "q", "0");
	expect(&r, 0, NULL);
	h_wait_children(&d, 1);
	CTL(&r, "workers", "q", "257");
	expect(&r, 1, "not a number in 0..256");
	CTL(&r, "workers", "q", "x");
	expect(&r, 64, "usage: ferryctl workers QUEUE N");
	char *a = ask("workers q 2\n");
	cr_assert_str_eq(a, "queue q: workers 0 -> 2\nok\n");
	free(a);
	h_wait_children(&d, 3);
	h_stop(&d);
}

Test(control, reload_through_the_socket)
{
	struct h_run r;
	char queues[128];

	start(1);
	h_expect_log(&d, "msg=\"reload: ");    /* the refused reload */
	snprintf(queues, sizeof(queues), QUEUES, 3);
	h_config(&d, NULL, queues);
	CTL(&r, "reload");
	expect(&r, 0, NULL);
	h_wait_children(&d, 4);
	/* ferryctl reads the file first: a broken one stops it there */
	h_write_file(d.config, "[ferryd]\ncolour = blue\n");
	CTL(&r, "reload");
	expect(&r, 78, "colour: unknown key");
	/* ferryd answers the errors too */
	char *a = ask("reload\n");
	cr_assert_eq(strncmp(a, "error: reload: ", 15), 0, "%s", a);
	cr_assert_not_null(strstr(a, "colour: unknown key"), "%s", a);
	free(a);
	h_wait_log(&d, "still running the previous configuration", 1);
	h_sleep_ms(300);        /* the point: no worker changes meanwhile */
	h_wait_children(&d, 4);
	h_stop(&d);
}

/* Every line of the exposition is a comment or a valid sample; every
 * sample belongs to a family with HELP and TYPE. */
static void
check_exposition(char *text)
{
	regex_t re;
	char helps[8192] = " ", types[8192] = " ", *save = NULL, name[128];

	cr_assert_eq(regcomp(&re, "^[a-zA-Z_:][a-zA-Z0-9_:]*(\\{[^}]*\\})? "
	    "-?[0-9.eE+Inf-]+$", REG_EXTENDED | REG_NOSUB), 0);
	for (char *l = strtok_r(text, "\n", &save); l != NULL;
	    l = strtok_r(NULL, "\n", &save)) {
		if (sscanf(l, "# HELP %127s", name) == 1) {
			strcat(strcat(helps, name), " ");
			continue;
		}
		if (sscanf(l, "# TYPE %127s", name) == 1) {
			strcat(strcat(types, name), " ");
			continue;
		}
		cr_assert_eq(regexec(&re, l, 0, NULL, 0), 0, "bad line: %s", l);
		snprintf(name, sizeof(name), " %.*s ", (int)strcspn(l, "{ "), l);
		char *suffix = NULL;
		if (strstr(types, name) == NULL) {   /* histogram parts */
			for (const char *const *s = (const char *const[]){ "_bucket ",
			    "_sum ", "_count ", NULL }; *s && !suffix; s++)
				if (strlen(name) > strlen(*s) && strcmp(name +
				    strlen(name) - strlen(*s), *s) == 0)
					suffix = name + strlen(name) - strlen(*s);
			cr_assert_not_null(suffix, "no TYPE for %s", name);
			strcpy(suffix, " ");
		}
		cr_assert_not_null(strstr(types, name), "no TYPE for %s", name);
		cr_assert_not_null(strstr(helps, name), "no HELP for %s", name);
	}
	regfree(&re);
}

static bool
has_line(const char *text, const char *line)
{
	char want[256];
	snprintf(want, sizeof(want), "\n%s\n", line);
	return strstr(text, want) != NULL;
}

Test(control, metrics_parse_and_count)
{
	struct h_run r;
	char *m = NULL;

	start(2);
	h_push_jobs(&d, "q", 0, 500);
	h_wait_redis_int(&d, 500, "HGET ferry:{q}:stats done");
	long long end = h_now_ms() + H_DEADLINE_MS;
	do {    /* the figures are refreshed every second */
		free(m);
		h_sleep_ms(100);
		m = ask("metrics\n");
	} while (!has_line(m, "ferry_jobs_done_total{queue=\"q\"} 500") &&
	    h_now_ms() < end);
	for (const char *const *l = (const char *const[]){
	    "ferry_jobs_enqueued_total{queue=\"q\"} 500",
	    "ferry_jobs_done_total{queue=\"q\"} 500",
	    "ferry_jobs_done_total{queue=\"other\"} 0",
	    "ferry_jobs_dead_total{queue=\"q\"} 0",
	    "ferry_jobs_cache_missing_total{queue=\"q\"} 0",
	    "ferry_queue_ready{queue=\"q\"} 0",
	    "ferry_queue_processing{queue=\"q\"} 0",
	    "ferry_worker_jobs_done_total{queue=\"q\"} 500",
	    "ferry_workers{queue=\"q\"} 2",
	    "ferry_workers{queue=\"other\"} 1",
	    "ferry_worker_restarts_total{queue=\"q\"} 0",
	    "ferry_redis_up 1", "ok", NULL }; *l; l++)
		cr_assert(has_line(m, *l), "no line \"%s\" in:\n%s", *l, m);
	cr_assert_not_null(strstr(m, "\nferry_redis_used_memory_bytes "));
	cr_assert_not_null(strstr(m, "ferry_batch_duration_seconds_bucket{queue="
	    "\"q\",le=\"+Inf\"} "));
	*strstr(m, "\nok\n") = '\0';
	check_exposition(m);
	free(m);

	/* counts survive a worker's death; restarts are counted */
	kill(worker_pid("q"), SIGKILL);
	h_wait_log(&d, "was killed by signal 9", 1);
	h_wait_children(&d, 3);
	CTL(&r, "metrics");
	cr_assert(has_line(r.out, "ferry_worker_jobs_done_total{queue=\"q\"} 500"),
	    "%s", r.out);
	cr_assert(has_line(r.out, "ferry_worker_restarts_total{queue=\"q\"} 1"));
	cr_assert_null(strstr(r.out, "\nok\n"));
	expect(&r, 0, NULL);
	h_stop(&d);
}

Test(control, protocol_errors)
{
	char *a;

	start(1);
	a = ask("bogus\n");
	cr_assert_str_eq(a, "error: unknown command bogus\n");
	free(a);
	a = ask("pause\n");
	cr_assert_str_eq(a, "error: usage: pause QUEUE\n");
	free(a);
	char big[2048];
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	a = ask(big);
	cr_assert_str_eq(a, "error: request too long\n");
	free(a);
	a = ask("help");         /* EOF ends a line too */
	cr_assert_not_null(strstr(a, "workers QUEUE N\nhelp\nok\n"), "%s", a);
	free(a);
	/* a silent client is dropped; others are served meanwhile */
	long long t0 = h_now_ms();
	int silent = dial(sock_path());
	a = ask("status\n");
	cr_assert(strlen(a) > 3 && strcmp(a + strlen(a) - 3, "ok\n") == 0);
	free(a);
	a = read_all(silent);
	cr_assert_str_eq(a, "");
	cr_assert_geq(h_now_ms() - t0, 4000);
	free(a);
	h_stop(&d);
}

Test(control, ferryctl_without_ferryd)
{
	char config[400], want[512], path[100];
	struct h_run r;

	h_setup(&d, NULL, "[queue q]\n");
	/* redis is not needed: point it at a closed port */
	snprintf(config, sizeof(config), "%s/down.ini", d.dir);
	snprintf(path, sizeof(path), "%.80s/none.sock", d.dir);
	h_write_file(config, "[ferryd]\nredis_port = %d\ncontrol_socket = %s\n"
	    "[queue q]\n", test_free_port(), path);
	snprintf(want, sizeof(want), "ferryd is not running (nothing listens "
	    "on %s)", path);
	const char *cmds[][3] = { { "status" }, { "metrics" }, { "reload" },
	    { "pause", "q" }, { "resume", "q" }, { "workers", "q", "2" } };
	for (size_t i = 0; i < FERRY_ARRAY_LEN(cmds); i++) {
		h_ctl(&r, config, NULL, cmds[i][0], cmds[i][1], cmds[i][2],
		    (const char *)NULL);
		expect(&r, 69, want);
	}
	/* a socket file nobody listens on: the same */
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);
	snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", path);
	cr_assert_eq(bind(fd, (struct sockaddr *)&sun, sizeof(sun)), 0);
	close(fd);
	h_ctl(&r, config, NULL, "status", (const char *)NULL);
	expect(&r, 69, want);
	/* something else listens there */
	unlink(path);
	fd = socket(AF_UNIX, SOCK_STREAM, 0);
	cr_assert_eq(bind(fd, (struct sockaddr *)&sun, sizeof(sun)), 0);
	cr_assert_eq(listen(fd, 4), 0);
	pid_t pid = fork();
	if (pid == 0) {
		int c = accept(fd, NULL, NULL);
		const char junk[] = "HTTP/1.0 400 Bad Request\r\n\r\n";
		_exit(write(c, junk, sizeof(junk) - 1) == sizeof(junk) - 1 ? 0 : 1);
	}
	close(fd);
	h_ctl(&r, config, NULL, "status", (const char *)NULL);
	waitpid(pid, NULL, 0);
	expect(&r, 76, "not a ferryd control socket");
	h_stop(&d);
}

Test(control, stale_socket_does_not_stop_a_new_ferryd)
{
	char config2[400], *out = NULL;

	start(1);
	/* a second ferryd on the same socket (other pidfile) refuses */
	snprintf(config2, sizeof(config2), "%s/second.ini", d.dir);
	h_write_file(config2, "[ferryd]\npidfile = %s/second.pid\nlog = stderr\n"
	    "control_socket = %s\nredis_port = %d\n[queue q]\n", d.dir,
	    sock_path(), d.redis.port);
	int st = h_run_ferryd((const char *const[]){ "-f", "-c", config2, NULL },
	    &out);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 1, "status %d: %s", st,
	    out);
	cr_assert_not_null(strstr(out, "another ferryd answers on it"), "%s",
	    out);
	free(out);
	/* kill -9: the socket file stays behind */
	pid_t orphan[H_MAX_PIDS];
	cr_assert_eq(h_children(d.pid, orphan, H_MAX_PIDS), 2);
	kill(d.pid, SIGKILL);
	cr_assert_neq(h_wait_exit(d.pid, H_DEADLINE_MS), -1);
	d.pid = 0;
	struct stat sb;
	cr_assert_eq(lstat(sock_path(), &sb), 0, "socket file gone");
	for (int i = 0; i < 2; i++)     /* they see their master gone */
		h_wait_gone(&d, orphan[i]);
	h_start(&d, 2);
	h_wait_log(&d, "removed stale control socket", 1);
	char *a = ask("status\n");
	cr_assert_not_null(strstr(a, "\nok\n"), "%s", a);
	free(a);
	h_stop(&d);
}

/* With [ferryd] user, the socket is made before privileges are dropped (so
 * it may live in a root-owned folder such as /run) and handed to the user.
 * Here the test's folder is root's, mode 0755: the dropped master could not
 * create a file in it. */
Test(control, socket_made_before_privileges_are_dropped)
{
	struct stat st;
	struct passwd *pw = getpwnam("nobody");

	cr_assert_not_null(pw, "no user nobody on this machine");
	h_setup(&d, "user = nobody\n", "[queue q]\nworkers = 1\n");
	chmod(d.config, 0644);    /* read again on HUP, as nobody */
	if (getuid() != 0) {      /* only root can switch users */
		char *out = NULL;
		int status = h_run_ferryd((const char *const[]){ "-f", "-c",
		    d.config, NULL }, &out);
		cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 1, "%s", out);
		free(out);
		cr_assert_gt(h_count_in_file(d.log, "cannot switch to user"), 0);
		h_expect_log(&d, "cannot switch to user");
		h_stop(&d);
		return;
	}
	h_start(&d, 1);
	h_wait_log(&d, "dropped privileges to user nobody", 1);
	cr_assert_eq(lstat(sock_path(), &st), 0, "no %s", sock_path());
	cr_assert_eq(st.st_uid, pw->pw_uid, "socket owned by uid %d",
	    (int)st.st_uid);
	cr_assert_eq(st.st_mode & 07777, 0600);
	char *a = ask("status\n");
	cr_assert_not_null(strstr(a, "\nok\n"), "%s", a);
	free(a);
	struct h_run r;
	CTL(&r, "status");
	expect(&r, 0, NULL);
	char proc[64];
	snprintf(proc, sizeof(proc), "/proc/%d", (int)d.pid);
	cr_assert_eq(stat(proc, &st), 0);
	cr_assert_eq(st.st_uid, pw->pw_uid, "master runs as uid %d",
	    (int)st.st_uid);
	/* a reload still works (the file is read as nobody) */
	kill(d.pid, SIGHUP);
	h_wait_log(&d, "reload: done", 1);
	h_stop(&d);
}

/* GET HTTP/1.0 `request` from 127.0.0.1:port; the whole answer. */
static char *
http(int port, const char *request)
{
	struct sockaddr_in sin = { .sin_family = AF_INET,
		.sin_port = htons((uint16_t)port),
		.sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	cr_assert_eq(connect(fd, (struct sockaddr *)&sin, sizeof(sin)), 0,
	    "connect 127.0.0.1:%d: %s", port, strerror(errno));
	cr_assert_eq(write(fd, request, strlen(request)),
	    (ssize_t)strlen(request));
	return read_all(fd);
}

/* metrics_listen: the same exposition over HTTP, for a Prometheus scraper;
 * only GET /metrics; a port in use stops ferryd at start. A healthy start
 * has nothing to warn about (MHD warns when its EXTERNAL_LOGGER is not the
 * first option: each of its messages is a warn line "metrics_listen ..."). */
Test(control, metrics_over_http)
{
	char extra[64], *a, *out = NULL;
	int port = test_free_port();

	snprintf(extra, sizeof(extra), "metrics_listen = 127.0.0.1:%d\n", port);
	h_setup(&d, extra, "[queue q]\nworkers = 1\n");
	h_start(&d, 1);
	h_wait_log(&d, "metrics served over HTTP", 1);
	snprintf(extra, sizeof(extra), "msg=\"metrics_listen 127.0.0.1:%d: ",
	    port);
	int warned = h_count_in_file(d.log, extra);
	if (warned != 0)
		h_dump_log(&d);
	cr_assert_eq(warned, 0, "%d warnings from the HTTP endpoint at a "
	    "healthy start", warned);
	h_push_jobs(&d, "q", 0, 50);
	h_wait_redis_int(&d, 50, "HGET ferry:{q}:stats done");
	long long end = h_now_ms() + H_DEADLINE_MS;
	for (a = NULL; a == NULL || (strstr(a, "\nferry_jobs_done_total{queue="
	    "\"q\"} 50\n") == NULL && h_now_ms() < end);) {
		free(a);
		h_sleep_ms(200);
		a = http(port, "GET /metrics HTTP/1.0\r\n\r\n");
	}
	cr_assert_eq(strncmp(a, "HTTP/1.1 200 OK\r\n", 17), 0, "%.200s", a);
	cr_assert_not_null(strstr(a, "Content-Type: text/plain; version=0.0.4"),
	    "%.400s", a);
	char *body = strstr(a, "\r\n\r\n");
	cr_assert_not_null(body);
	cr_assert_not_null(strstr(body, "\nferry_jobs_done_total{queue=\"q\"} "
	    "50\n"), "%s", body);
	cr_assert_null(strstr(body, "\nok\n"), "no control-socket ok line");
	check_exposition(body + 4);
	free(a);
	a = http(port, "GET /nothing HTTP/1.0\r\n\r\n");
	cr_assert_eq(strncmp(a, "HTTP/1.1 404 ", 13), 0, "%.200s", a);
	free(a);
	/* POST is for the dashboard's actions: refused without http_token */
	a = http(port, "POST /metrics HTTP/1.0\r\nContent-Length: 2\r\n\r\nhi");
	cr_assert_eq(strncmp(a, "HTTP/1.1 403 ", 13), 0, "%.200s", a);
	free(a);
	a = http(port, "PUT /metrics HTTP/1.0\r\nContent-Length: 2\r\n\r\nhi");
	cr_assert_eq(strncmp(a, "HTTP/1.1 405 ", 13), 0, "%.200s", a);
	free(a);
	/* a scraper that connects and says nothing does not stop the master */
	int silent = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sin = { .sin_family = AF_INET,
		.sin_port = htons((uint16_t)port),
		.sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	cr_assert_eq(connect(silent, (struct sockaddr *)&sin, sizeof(sin)), 0);
	a = ask("status\n");
	cr_assert_not_null(strstr(a, "\nok\n"), "%s", a);
	free(a);
	close(silent);

	/* the port is taken (by this ferryd): a second one refuses to start */
	char config2[400];
	snprintf(config2, sizeof(config2), "%s/second.ini", d.dir);
	h_write_file(config2, "[ferryd]\npidfile = %s/second.pid\nlog = stderr\n"
	    "control_socket =\nredis_port = %d\nmetrics_listen = 127.0.0.1:%d\n"
	    "[queue q]\n", d.dir, d.redis.port, port);
	int st = h_run_ferryd((const char *const[]){ "-f", "-c", config2, NULL },
	    &out);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 1, "status %d: %s", st,
	    out);
	cr_assert_not_null(strstr(out, "cannot listen on 127.0.0.1:"), "%s", out);
	free(out);
	h_stop(&d);
}
