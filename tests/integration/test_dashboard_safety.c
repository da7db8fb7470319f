/* test_dashboard_safety.c - the dashboard's defences, against ferryd with
 * Redis and PostgreSQL: a page of big dead entries costs the master a few
 * MB (dead_page.lua hands it prefixes) and its loop keeps answering
 * /metrics; /api/dead/one cuts a big entry's document and says so; replay
 * and purge of a big entry by the sha1 the list gave; one dead-list read
 * at a time (503, Retry-After); the Host header must name the listener
 * (DNS rebinding: 421); the answers' headers against framing, referrers
 * and caching; an argument of invalid UTF-8 echoed valid, not a 500; a
 * hostname of HTML's special characters escaped in the page (this test
 * sets it in its own UTS namespace: it needs CAP_SYS_ADMIN). */
#include <criterion/criterion.h>
#include <arpa/inet.h>
#include <sched.h>
#include <jansson.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "harness_http.h"
#include "util.h"

#define TOKEN "test-token-0123456789abcdef"
#define BIG (4u << 20)

static struct ferryd d;
static int port;

static void
teardown(void)
{
	h_teardown(&d);
}

TestSuite(dashboard_safety, .fini = teardown, .timeout = 300);

/* The header lines of a read: this listener's Host and the token (dead
 * entries are read with it only). */
static const char *
reader(void)
{
	static char lines[160];

	snprintf(lines, sizeof(lines), "Host: 127.0.0.1:%d\r\nAuthorization: "
	    "Bearer " TOKEN "\r\n", port);
	return lines;
}

/* GET path as reader() asks: its JSON (200 required). */
static json_t *
get_json(const char *path)
{
	return h_http_json_with(port, path, reader());
}

static void
setup_with(const char *ferryd_extra)
{
	char extra[1024], queues[256];

	port = test_free_port();
	h_setup(&d, NULL, "");
	snprintf(extra, sizeof(extra), "metrics_listen = 127.0.0.1:%d\n"
	    "http_token = " TOKEN "\n%s%s", port, ferryd_extra, h_pg_start(&d));
	snprintf(queues, sizeof(queues), "[queue ex]\nhandler = exec\n"
	    "command = /bin/cat\nworkers = 1\n");
	h_config(&d, extra, queues);
	h_start(&d, 1);
	h_wait_log(&d, "metrics served over HTTP", 1);
}

static void
setup(void)
{
	setup_with("");
}

/* Peak RSS of pid, kB. */
static long
vm_hwm_kb(pid_t pid)
{
	char path[64], line[256];
	long kb = -1;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	FILE *f = fopen(path, "r");
	cr_assert_not_null(f);
	while (fgets(line, sizeof(line), f) != NULL)
		if (strncmp(line, "VmHWM:", 6) == 0)
			kb = atol(line + 6);
	fclose(f);
	return kb;
}

/* The redis-server's pid (INFO server). */
static long
redis_pid(void)
{
	redisReply *r = h_redis(&d, "INFO server");
	const char *p = strstr(r->str, "process_id:");
	cr_assert_not_null(p);
	long pid = atol(p + 11);
	freeReplyObject(r);
	return pid;
}

/* A dead entry of doc/formats.md with id "big-i" and a document of about
 * size bytes of U+00E9 (2 bytes each: a cut may fall inside one). */
static char *
big_entry(int i, size_t size, size_t *len)
{
	char *el = malloc(size + 300);
	int n = snprintf(el, 300, "{\"reason\":\"too big\",\"attempts\":1,"
	    "\"recoveries\":0,\"time\":1700000000000,\"worker\":\"h:1:w0\","
	    "\"id\":\"big-%d\",\"job\":{\"id\":\"big-%d\",\"v\":\"", i, i);
	size_t p = (size_t)n;

	cr_assert_not_null(el);
	for (; p + 2 <= size; p += 2)
		memcpy(el + p, "\xc3\xa9", 2);
	memcpy(el + p, "\"}}", 3);
	*len = p + 3;
	return el;
}

/* Was: one read-only GET /api/dead?limit=100 over 100 entries of 4 MB grew
 * the master from 9 MB to 423 MB and stalled its loop 1.5 s. */
Test(dashboard_safety, a_page_of_big_dead_entries_costs_the_master_little)
{
	size_t len;
	char *body;

	setup();
	for (int i = 0; i < 100; i++) {
		char *el = big_entry(i, BIG, &len);
		freeReplyObject(h_redis(&d, "LPUSH ferry:{ex}:dead %b", el, len));
		free(el);
	}
	long before = vm_hwm_kb(d.pid);
	pid_t rpid = (pid_t)redis_pid();
	long rbefore = vm_hwm_kb(rpid);
	long long t0 = h_now_ms();
	pid_t kid = fork();
	if (kid == 0) {
		json_t *o = get_json("/api/dead?queue=ex&limit=100");
		_exit(json_array_size(json_object_get(o, "entries")) == 8 ? 0 : 1);
	}
	/* meanwhile the loop answers /metrics */
	int st = -1, metrics = 0;
	while (waitpid(kid, &st, WNOHANG) == 0) {
		cr_assert_eq(h_http_exchange(port, "GET", "/metrics", "", NULL, &body), 200);
		free(body);
		metrics++;
		h_sleep_ms(20);
	}
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the child's GET "
	    "did not list 8 entries");
	long after = vm_hwm_kb(d.pid);
	fprintf(stderr, "master VmHWM: %ld kB before, %ld kB after one GET "
	    "/api/dead?limit=100 (100 entries of 4 MB); %d /metrics meanwhile\n",
	    before, after, metrics);
	fprintf(stderr, "redis VmHWM: %ld kB before, %ld kB after; the GET took "
	    "%lld ms\n", rbefore, vm_hwm_kb(rpid), h_now_ms() - t0);
	redisReply *sl = h_redis(&d, "SLOWLOG GET 1");
	if (sl->elements > 0)
		fprintf(stderr, "slowest command %lld us\n",
		    sl->element[0]->element[2]->integer);
	freeReplyObject(sl);
	cr_assert_lt(after - before, 50 * 1024, "one read-only GET grew the "
	    "master by %ld kB", after - before);

	/* the page: 8 entries (32 MB read in Redis), headers whole, and more
	 * after them */
	json_t *o = get_json("/api/dead?queue=ex&limit=100");
	json_t *a = json_object_get(o, "entries");
	cr_assert_eq(json_array_size(a), 8);
	cr_assert(json_is_true(json_object_get(o, "more")));
	cr_assert_eq(json_integer_value(json_object_get(o, "total")), 100);
	json_t *e0 = json_array_get(a, 0);
	cr_assert_str_eq(h_jstr(e0, "id"), "big-99");
	cr_assert_str_eq(h_jstr(e0, "reason"), "too big");
	cr_assert_eq(json_integer_value(json_object_get(e0, "bytes")),
	    (json_int_t)len);
	cr_assert(json_is_true(json_object_get(e0, "truncated")));
	cr_assert_null(json_object_get(e0, "job"));
	cr_assert_str_eq(h_jstr(json_array_get(a, 7), "id"), "big-92");
	json_decref(o);
	o = get_json("/api/dead?queue=ex&offset=96&limit=100");
	a = json_object_get(o, "entries");
	cr_assert_eq(json_array_size(a), 4);
	cr_assert_str_eq(h_jstr(json_array_get(a, 3), "id"), "big-0");
	cr_assert(json_is_false(json_object_get(o, "more")));
	json_decref(o);
	/* entries of 100 KB: 64 a page (512 KB of their 8 KB prefixes) */
	freeReplyObject(h_redis(&d, "DEL ferry:{ex}:dead"));
	for (int i = 0; i < 100; i++) {
		char *el = big_entry(i, 100000, &len);
		freeReplyObject(h_redis(&d, "LPUSH ferry:{ex}:dead %b", el, len));
		free(el);
	}
	o = get_json("/api/dead?queue=ex&limit=100");
	cr_assert_eq(json_array_size(json_object_get(o, "entries")), 64);
	cr_assert(json_is_true(json_object_get(o, "more")));
	json_decref(o);
	h_stop(&d);
}

/* A 2 MB entry: its first MB shown, valid UTF-8, with a note; purged and
 * replayed by the sha1 the list gave (dead_page.lua's and the master's
 * dead_entry_ref agree); a stale sha1 is refused. */
Test(dashboard_safety, a_big_entry_shown_cut_and_acted_on_by_its_sha1)
{
	char path[200], auth[80], host[64], lines[200], *body;
	size_t len;

	setup();
	for (int i = 0; i < 3; i++) {
		char *el = big_entry(i, 2u << 20, &len);
		freeReplyObject(h_redis(&d, "LPUSH ferry:{ex}:dead %b", el, len));
		free(el);
	}
	json_t *one = get_json("/api/dead/one?queue=ex&index=0");
	cr_assert_str_eq(h_jstr(one, "id"), "big-2");
	cr_assert(json_is_true(json_object_get(one, "truncated")));
	cr_assert_eq(json_integer_value(json_object_get(one, "bytes")),
	    (json_int_t)len);
	const char *job = h_jstr(one, "job");      /* a string: valid UTF-8 */
	cr_assert(strlen(job) < (1u << 20) && strlen(job) > (1u << 20) - 300,
	    "%zu bytes", strlen(job));
	cr_assert(strstr(h_jstr(one, "note"), "ferryctl dead show ex") != NULL,
	    "%s", h_jstr(one, "note"));

	json_t *list = get_json("/api/dead?queue=ex");
	json_t *a = json_object_get(list, "entries");
	cr_assert_str_eq(h_jstr(one, "sha1"), h_jstr(json_array_get(a, 0),
	    "sha1"));
	snprintf(host, sizeof(host), "Host: 127.0.0.1:%d\r\n", port);
	snprintf(auth, sizeof(auth), "Authorization: Bearer %s\r\n", TOKEN);
	snprintf(lines, sizeof(lines), "%s%s", host, auth);
	/* big-1's sha1 at big-2's index: 409, nothing done */
	snprintf(path, sizeof(path), "/api/dead/purge?queue=ex&index=0&sha1=%s",
	    h_jstr(json_array_get(a, 1), "sha1"));
	cr_assert_eq(h_http_exchange(port, "POST", path, lines, NULL, &body), 409, "%s", body);
	free(body);
	cr_assert_eq(h_redis_int(&d, "LLEN ferry:{ex}:dead"), 3);
	/* purge big-1, replay big-0 (/bin/cat answers nothing: it is
	 * requeued, out of the dead list) */
	snprintf(path, sizeof(path), "/api/dead/purge?queue=ex&index=1&sha1=%s",
	    h_jstr(json_array_get(a, 1), "sha1"));
	cr_assert_eq(h_http_exchange(port, "POST", path, lines, NULL, &body), 200, "%s", body);
	cr_assert(strstr(body, "\"id\":\"big-1\"") != NULL, "%s", body);
	free(body);
	cr_assert_eq(h_redis_int(&d, "LLEN ferry:{ex}:dead"), 2);
	snprintf(path, sizeof(path), "/api/dead/replay?queue=ex&index=1&sha1=%s",
	    h_jstr(json_array_get(a, 2), "sha1"));
	cr_assert_eq(h_http_exchange(port, "POST", path, lines, NULL, &body), 200, "%s", body);
	free(body);
	/* the same click again: the entry is gone from there */
	cr_assert_neq(h_http_exchange(port, "POST", path, lines, NULL, &body), 200, "%s",
	    body);
	free(body);
	json_decref(list);
	json_decref(one);
	h_stop(&d);
}

/* While one read of the dead list waits for Redis (paused), another is
 * refused at once: 503 with Retry-After: 1; the first then answers. */
Test(dashboard_safety, one_dead_list_read_at_a_time)
{
	char *head, *body;

	setup();
	freeReplyObject(h_redis(&d, "LPUSH ferry:{ex}:dead %s", "not an entry"));
	freeReplyObject(h_redis(&d, "CLIENT PAUSE 1500 ALL"));
	pid_t kid = fork();
	if (kid == 0) {
		json_t *o = get_json("/api/dead?queue=ex");
		_exit(json_array_size(json_object_get(o, "entries")) == 1 ? 0 : 1);
	}
	h_sleep_ms(500);
	cr_assert_eq(h_http_exchange(port, "GET", "/api/dead/one?queue=ex&index=0",
	    reader(), &head, &body), 503, "%s\n%s", head, body);
	cr_assert(strstr(head, "\r\nRetry-After: 1\r\n") != NULL, "%s", head);
	cr_assert(strstr(body, "one at a time") != NULL, "%s", body);
	free(head);
	free(body);
	int st = -1;
	cr_assert_eq(waitpid(kid, &st, 0), kid);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	json_t *o = get_json("/api/dead/one?queue=ex&index=0");
	cr_assert_str_eq(h_jstr(o, "reason"), "malformed dead entry");
	json_decref(o);
	h_stop(&d);
}

/* DNS rebinding: a page of evil.example whose name now resolves to
 * 127.0.0.1 sends "Host: evil.example:PORT": refused (421), reads and
 * POSTs alike; the listener's own names pass, and those of [ferryd]
 * http_allowed_hosts; /metrics is served to any (scrapers name the host
 * as they like). */
Test(dashboard_safety, the_host_header_must_name_the_listener)
{
	char lines[300], *body;
	const char *refused[] = { "evil.example:%d", "127.0.0.1:%d0",
		"localhost", "127.0.0.2:%d", "localhost.evil.example:%d",
		"ferry.example:%d", "example.com:%d", "ferry.example.com" };
	const char *served[] = { "127.0.0.1:%d", "localhost:%d",
		"LOCALHOST:%d", "[::1]:%d", "ferry.example.com:%d",
		"FERRY.example.COM:%d", "[fe80::1]:%d" };
	const char *paths[] = { "/", "/api/queues", "/api/dead?queue=ex",
		"/api/dead/one?queue=ex&index=0" };

	setup_with("http_allowed_hosts = ferry.example.com,[fe80::1]\n");
	for (size_t i = 0; i < FERRY_ARRAY_LEN(refused); i++) {
		char host[100];
		snprintf(host, sizeof(host), refused[i], port);
		snprintf(lines, sizeof(lines), "Host: %s\r\n", host);
		for (size_t j = 0; j < FERRY_ARRAY_LEN(paths); j++) {
			cr_assert_eq(h_http_exchange(port, "GET", paths[j], lines, NULL, &body), 421,
			    "Host: %s GET %s: %s", host, paths[j], body);
			free(body);
		}
		cr_assert_eq(h_http_exchange(port, "GET", "/metrics", lines, NULL, &body), 200);
		free(body);
		snprintf(lines, sizeof(lines), "Host: %s\r\nAuthorization: Bearer "
		    TOKEN "\r\n", host);
		cr_assert_eq(h_http_exchange(port, "POST", "/api/pause?queue=ex", lines, NULL,
		    &body), 421, "%s", body);
		cr_assert(strstr(body, "Host: not this listener") != NULL, "%s",
		    body);
		free(body);
	}
	json_t *q = get_json("/api/queues");         /* not paused */
	cr_assert(json_is_false(json_object_get(json_array_get(
	    json_object_get(q, "queues"), 0), "paused")));
	json_decref(q);
	for (size_t i = 0; i < FERRY_ARRAY_LEN(served); i++) {
		char host[100];
		snprintf(host, sizeof(host), served[i], port);
		snprintf(lines, sizeof(lines), "Host: %s\r\n", host);
		cr_assert_eq(h_http_exchange(port, "GET", "/api/queues", lines, NULL, &body), 200,
		    "Host: %s: %s", host, body);
		free(body);
	}
	h_stop(&d);
}

/* Every answer forbids framing and referrers, the page's policy lets its
 * inline style and script run (the browser test runs them), and /api is
 * not cached. An argument of invalid UTF-8 is echoed made valid: 404,
 * not a 500 "out of memory". */
Test(dashboard_safety, headers_and_invalid_utf8_arguments)
{
	char host[64], *head, *body;

	setup();
	snprintf(host, sizeof(host), "Host: 127.0.0.1:%d\r\n", port);
	const char *paths[] = { "/", "/api/queues", "/metrics" };
	for (size_t i = 0; i < FERRY_ARRAY_LEN(paths); i++) {
		cr_assert_eq(h_http_exchange(port, "GET", paths[i], host, &head, &body), 200);
		cr_assert(strstr(head, "\r\nX-Frame-Options: DENY\r\n") != NULL,
		    "%s", head);
		cr_assert(strstr(head, "\r\nReferrer-Policy: no-referrer\r\n") !=
		    NULL, "%s", head);
		cr_assert(strstr(head, "\r\nCache-Control: no-store\r\n") != NULL,
		    "%s", head);
		cr_assert(strstr(head, "\r\nContent-Security-Policy: default-src "
		    "'self'; script-src 'self' 'unsafe-inline'; ") != NULL, "%s",
		    head);
		cr_assert(strstr(head, "frame-ancestors 'none'\r\n") != NULL, "%s",
		    head);
		free(head);
		free(body);
	}
	cr_assert_eq(h_http_exchange(port, "GET", "/api/dead?queue=%FF%C3",
	    reader(), NULL, &body), 404, "%s", body);
	cr_assert(strstr(body, "no queue \\\"??\\\"") != NULL, "%s", body);
	free(body);
	cr_assert_eq(h_http_exchange(port, "GET", "/api/dead?queue=ex&limit=%FF",
	    reader(), NULL, &body), 400, "%s", body);
	cr_assert(strstr(body, "limit: \\\"?\\\" is not a number") != NULL,
	    "%s", body);
	free(body);
	h_stop(&d);
}

/* The host part of the master id goes into <title> and #host escaped:
 * a hostname may hold any byte. */
Test(dashboard_safety, the_hostname_is_escaped_in_the_page)
{
	static const char name[] = "x<b>y&z\"";
	char host[64], *body;

	cr_assert_eq(unshare(CLONE_NEWUTS), 0, "unshare(CLONE_NEWUTS): this "
	    "test needs CAP_SYS_ADMIN (run it as root)");
	cr_assert_eq(sethostname(name, strlen(name)), 0);
	setup();
	snprintf(host, sizeof(host), "Host: 127.0.0.1:%d\r\n", port);
	cr_assert_eq(h_http_exchange(port, "GET", "/", host, NULL, &body), 200);
	cr_assert(strstr(body, "<title>ferry &middot; x&lt;b&gt;y&amp;z&quot;"
	    "</title>") != NULL, "%.600s", body);
	cr_assert(strstr(body, "<span id=\"host\">x&lt;b&gt;y&amp;z&quot;"
	    "</span>") != NULL, "%.600s", body);
	cr_assert_null(strstr(body, "<b>"), "%.600s", body);
	free(body);
	h_stop(&d);
}
