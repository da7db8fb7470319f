/* test_dead_http.c - the dashboard's API on selections of dead entries,
 * over HTTP against a real redis-server and ferryd: GET /api/dead with a
 * selection lists exactly the entries retry-matching's dry run selects
 * (same count, newest first, across pages, through entries whose header
 * or id a prefix cannot show); a paced retry-matching answers at once
 * (202) and runs in the master, its progress in /api/dead/redrives,
 * cancelled half way (every entry dead or requeued exactly once) or run
 * to its end; at most a few redrives at once. With the token configured,
 * every read of dead entries (the list, one entry, the summary, the
 * redrives) is refused without it, with a message saying how to send it,
 * and served with it; the counts stay open. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "harness_http.h"
#include "queue.h"

#define TOKEN "test-token-0123456789abcdef"
#define AUTH "Bearer " TOKEN
#define QUEUES "[queue q]\nworkers = 0\n[queue b]\nworkers = 0\n"
#define BASE_MS 1700000000000LL

static struct ferryd d;
static struct queue_keys k, kb;
static int port;

static void
teardown(void)
{
	h_teardown(&d);
}

static void
setup(void)
{
	char extra[200];

	port = test_free_port();
	snprintf(extra, sizeof(extra), "metrics_listen = 127.0.0.1:%d\n"
	    "http_token = " TOKEN "\n", port);
	h_setup(&d, extra, QUEUES);
	queue_keys_init(&k, "ferry", "q");
	queue_keys_init(&kb, "ferry", "b");
	h_start(&d, 0);
	h_wait_log(&d, "metrics served over HTTP", 1);
}

TestSuite(dead_http, .init = setup, .fini = teardown, .timeout = 300);

/* Entry i: reason i % 3 (23505, a handler's error, 40001). */
static char *
entry(int i)
{
	static const char *const errors[3] = { "23505: duplicate key",
		"handler exited 3: upstream timeout", "40001: could not "
		"serialize" };
	char *el;

	if (asprintf(&el, "{\"reason\":\"failed by the handler\",\"attempts\":1,"
	    "\"recoveries\":0,\"time\":%lld,\"worker\":\"h:1:w0\",\"id\":"
	    "\"job-%06d\",\"last_error\":\"%s\",\"job\":{\"id\":\"job-%06d\"}}",
	    BASE_MS + i, i, errors[i % 3], i) < 0)
		cr_assert_fail("out of memory");
	return el;
}

/* Entries from .. to-1 LPUSHed in order (the last the newest). */
static void
fill(int from, int to)
{
	h_lpush_made(&d, k.dead, from, to, entry);
}

static char *
repeat(char c, int n)
{
	char *s = malloc((size_t)n + 1);

	memset(s, c, (size_t)n);
	s[n] = '\0';
	return s;
}

/* Two entries a prefix of 8 KiB cannot decide: long-1, whose header is
 * 10 KiB long (23505), and big-1, whose id only its 20 KiB document
 * gives (a handler's error). */
static void
push_long_entries(void)
{
	char *w = repeat('w', 2000), *f = repeat('f', 4000), *l = repeat('l',
	    4000), *pad = repeat('z', 20000), *el;

	if (asprintf(&el, "{\"reason\":\"failed by the handler\",\"attempts\":1,"
	    "\"recoveries\":0,\"time\":%lld,\"worker\":\"%s\",\"id\":\"long-1\","
	    "\"first_error\":\"%s\",\"last_error\":\"23505: %s\",\"job\":{}}",
	    BASE_MS + 5000, w, f, l) < 0)
		cr_assert_fail("out of memory");
	freeReplyObject(h_redis(&d, "LPUSH %s %s", k.dead, el));
	free(el);
	if (asprintf(&el, "{\"reason\":\"failed by the handler\",\"attempts\":1,"
	    "\"recoveries\":0,\"time\":%lld,\"worker\":\"w\",\"last_error\":"
	    "\"handler exited 3: upstream timeout\",\"job\":{\"pad\":\"%s\","
	    "\"id\":\"big-1\"}}", BASE_MS + 5000, pad) < 0)
		cr_assert_fail("out of memory");
	freeReplyObject(h_redis(&d, "LPUSH %s %s", k.dead, el));
	free(el);
	free(w);
	free(f);
	free(l);
	free(pad);
}

static json_t *
post(const char *path, int want)
{
	char *body;
	int status = h_http(port, "POST", path, AUTH, &body);
	json_t *o = json_loads(body, 0, NULL);

	cr_assert_eq(status, want, "POST %s: %d %s", path, status, body);
	cr_assert_not_null(o, "%s", body);
	free(body);
	return o;
}

static long long
jint(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);

	cr_assert(json_is_integer(v), "%s: not an integer in %s", key,
	    json_dumps(o, 0));
	return json_integer_value(v);
}

/* Every page of /api/dead?queue=q&SEL, limit 100 from offset 0 on,
 * following next: the ids listed, joined by ","; the requests in *pages. */
static char *
list_all(const char *sel, int *pages)
{
	size_t cap = 1 << 20, len = 0;
	char *ids = calloc(1, cap), path[600];
	long long next = 0;

	*pages = 0;
	for (;;) {
		snprintf(path, sizeof(path), "/api/dead?queue=q&limit=100&offset="
		    "%lld&%s", next, sel);
		json_t *o = h_http_json_with(port, path, "Authorization: " AUTH
		    "\r\n");
		json_t *e;
		size_t i;
		(*pages)++;
		cr_assert(json_is_true(json_object_get(o, "filtered")));
		json_array_foreach(json_object_get(o, "entries"), i, e) {
			/* big-1's id is in its document, past the header shown */
			const char *id = json_is_null(json_object_get(e, "id")) &&
			    json_is_true(json_object_get(e, "truncated")) ? "big-1" :
			    h_jstr(e, "id");
			cr_assert_lt(len + strlen(id) + 2, cap);
			len += (size_t)sprintf(ids + len, "%s%s", len ? "," : "", id);
			/* the index names the entry: LINDEX there holds its id */
			redisReply *r = h_redis(&d, "LINDEX %s %lld", k.dead,
			    jint(e, "index"));
			cr_assert(r->type == REDIS_REPLY_STRING && strstr(r->str, id),
			    "index %lld is not %s", jint(e, "index"), id);
			freeReplyObject(r);
		}
		json_t *n = json_object_get(o, "next");
		bool more = json_is_true(json_object_get(o, "more"));
		cr_assert_eq(more, json_is_integer(n));
		if (!more) {
			json_decref(o);
			return ids;
		}
		cr_assert_gt(json_integer_value(n), next, "next does not advance");
		next = json_integer_value(n);
		json_decref(o);
	}
}

/* The list by sel holds exactly want (ids newest first), as many as
 * retry-matching's dry run and the summary select. */
static void
assert_listed(const char *sel, const char *want, int min_pages)
{
	char path[600];
	int pages;
	char *ids = list_all(sel, &pages);
	int n = *want ? 1 : 0;

	for (const char *p = want; *p; p++)
		n += *p == ',';
	cr_assert_str_eq(ids, want, "%s", sel);
	cr_assert_geq(pages, min_pages, "%s: %d pages", sel, pages);
	snprintf(path, sizeof(path), "/api/dead/retry-matching?queue=q&"
	    "dry_run=1&%s", sel);
	json_t *o = post(path, 200);
	cr_assert_eq(jint(o, "selected"), n, "%s: listed %d, dry run %lld",
	    sel, n, jint(o, "selected"));
	json_decref(o);
	snprintf(path, sizeof(path), "/api/dead/summary?queue=q&%s", sel);
	o = h_http_json_with(port, path, "Authorization: " AUTH "\r\n");
	cr_assert_eq(jint(o, "total"), n, "%s: summary", sel);
	json_decref(o);
	free(ids);
	cr_log_info("%s: %d entries in %d pages", sel, n, pages);
}

/* ids of the entries i (newest first) that pred selects, with long-1 and
 * big-1 where they are: between 6000 and 5999. */
static char *
expect(bool (*pred)(int), bool lng, bool big)
{
	char *s = calloc(1, 1 << 20);
	size_t len = 0;

	for (int i = 11999; i >= 0; i--) {
		if (i == 5999 && big)
			len += (size_t)sprintf(s + len, "%sbig-1", len ? "," : "");
		if (i == 5999 && lng)
			len += (size_t)sprintf(s + len, "%slong-1", len ? "," : "");
		if (pred(i))
			len += (size_t)sprintf(s + len, "%sjob-%06d", len ? "," : "",
			    i);
	}
	return s;
}

static bool is_23505(int i) { return i % 3 == 0; }
static bool none(int i) { (void)i; return false; }
static bool oldest5(int i) { return i < 5; }
static bool handler_before_6000(int i) { return i % 3 == 1 && i < 6000; }

Test(dead_http, filtered_list_is_what_retry_matching_selects)
{
	fill(0, 6000);
	push_long_entries();
	fill(6000, 12000);
	char *want = expect(is_23505, true, false);
	assert_listed("reason=23505", want, 41);
	free(want);
	want = expect(none, false, true);
	assert_listed("id=big-%2A", want, 1);
	free(want);
	/* the 5 oldest: past what one request reads, the list says where
	 * to go on */
	want = expect(oldest5, false, false);
	assert_listed("id=job-00000%5B0-4%5D", want, 2);
	free(want);
	want = expect(handler_before_6000, false, true);
	assert_listed("group=failed%20by%20the%20handler&before=2023-11-14T22:"
	    "13:26.000Z", want, 21);
	free(want);
	/* without a selection: as before, one read, offset and limit */
	json_t *o = h_http_json_with(port, "/api/dead?queue=q&offset=5&limit=3",
	    "Authorization: " AUTH "\r\n");
	cr_assert_eq(json_array_size(json_object_get(o, "entries")), 3);
	cr_assert_str_eq(h_jstr(json_array_get(json_object_get(o, "entries"), 0),
	    "id"), "job-011994");
	cr_assert_eq(jint(o, "next"), 8);
	cr_assert_eq(jint(o, "total"), 12002);
	json_decref(o);
	char *body;
	cr_assert_eq(h_http(port, "GET", "/api/dead?queue=q&after=tomorrow",
	    AUTH, &body), 400);
	cr_assert(strstr(body, "after 'tomorrow': neither a time") != NULL, "%s",
	    body);
	free(body);
	h_stop(&d);
}

/* Redrive id in GET /api/dead/redrives (a new reference). */
static json_t *
redrive(long long id)
{
	json_t *o = h_http_json_with(port, "/api/dead/redrives",
	    "Authorization: " AUTH "\r\n"), *rd;
	size_t i;

	json_array_foreach(json_object_get(o, "redrives"), i, rd)
		if (jint(rd, "id") == id) {
			json_incref(rd);
			json_decref(o);
			return rd;
		}
	cr_assert_fail("no redrive %lld in %s", id, json_dumps(o, 0));
	return NULL;
}

/* Wait until redrive id is no longer running: its last state. */
static json_t *
wait_ended(long long id)
{
	long long end = h_now_ms() + H_DEADLINE_MS;

	for (;;) {
		json_t *rd = redrive(id);
		if (strcmp(h_jstr(rd, "state"), "running") != 0)
			return rd;
		cr_assert_lt(h_now_ms(), end, "redrive %lld still runs: %s", id,
		    json_dumps(rd, 0));
		json_decref(rd);
		h_sleep_ms(50);
	}
}

/* Every job-NNNNNN of 0 .. n-1 once in q's dead list and the requeue
 * lists of q and b together, none in two; the requeued ones. */
static long long
assert_each_once(int n)
{
	int *seen = calloc((size_t)n, sizeof(*seen));
	const char *keys[] = { k.dead, k.requeue, kb.requeue };
	long long requeued = 0;

	for (int l = 0; l < 3; l++) {
		redisReply *r = h_redis(&d, "LRANGE %s 0 -1", keys[l]);
		for (size_t i = 0; i < r->elements; i++) {
			const char *p = strstr(r->element[i]->str, "\"job\":{\"id\":"
			    "\"job-");
			cr_assert_not_null(p, "%s", r->element[i]->str);
			int j = atoi(p + 17);
			cr_assert(j >= 0 && j < n);
			seen[j]++;
		}
		if (l > 0)
			requeued += (long long)r->elements;
		freeReplyObject(r);
	}
	for (int j = 0; j < n; j++)
		cr_assert_eq(seen[j], 1, "job %d is in %d lists", j, seen[j]);
	free(seen);
	return requeued;
}

Test(dead_http, paced_redrive_runs_in_the_master)
{
	fill(0, 3000);
	/* 1,000 of 23505 at 200/s: 5 s; the answer comes at once */
	long long t0 = h_now_ms();
	json_t *o = post("/api/dead/retry-matching?queue=q&reason=23505&"
	    "rate=200&to=b", 202);
	long long took = h_now_ms() - t0, id = jint(o, "id");
	cr_assert_lt(took, 1500, "answered after %lld ms", took);
	cr_assert_eq(jint(o, "selected"), 1000);
	cr_assert_str_eq(h_jstr(o, "state"), "running");
	cr_assert_str_eq(h_jstr(o, "to"), "b");
	cr_assert_str_eq(h_jstr(json_object_get(o, "selection"), "reason"),
	    "23505");
	json_decref(o);
	/* its progress, then cancelled half way */
	long long end = h_now_ms() + H_DEADLINE_MS, moved = 0;
	json_t *rd = NULL;
	while (moved < 300) {
		json_decref(rd);
		rd = redrive(id);
		moved = jint(rd, "moved");
		cr_assert_lt(h_now_ms(), end, "%s", json_dumps(rd, 0));
		h_sleep_ms(50);
	}
	cr_assert_str_eq(h_jstr(rd, "state"), "running");
	cr_assert_eq(jint(rd, "selected"), 1000);
	cr_assert_eq(jint(rd, "left"), 1000 - moved, "%s", json_dumps(rd, 0));
	json_decref(rd);
	char path[200];
	snprintf(path, sizeof(path), "/api/dead/redrive/cancel?id=%lld", id);
	json_decref(post(path, 200));
	rd = wait_ended(id);
	cr_assert_str_eq(h_jstr(rd, "state"), "cancelled");
	moved = jint(rd, "moved");
	cr_assert(moved >= 300 && moved < 1000, "%lld moved", moved);
	cr_assert(json_is_integer(json_object_get(rd, "finished")));
	json_decref(rd);
	h_sleep_ms(300);        /* nothing moves after the end */
	cr_assert_eq(h_redis_int(&d, "LLEN %s", kb.requeue), moved);
	cr_assert_eq(assert_each_once(3000), moved);
	char *body;
	cr_assert_eq(h_http(port, "POST", path, AUTH, &body), 409, "%s", body);
	cr_assert(strstr(body, "is cancelled already") != NULL, "%s", body);
	free(body);

	/* the rest, to q itself, to the end */
	o = post("/api/dead/retry-matching?queue=q&reason=23505&rate=2000",
	    202);
	cr_assert_eq(jint(o, "selected"), 1000 - moved);
	id = jint(o, "id");
	json_decref(o);
	rd = wait_ended(id);
	cr_assert_str_eq(h_jstr(rd, "state"), "done");
	cr_assert_eq(jint(rd, "moved"), 1000 - moved);
	cr_assert_eq(jint(rd, "left"), 0);
	json_decref(rd);
	cr_assert_eq(h_redis_int(&d, "LLEN %s", k.requeue), 1000 - moved);
	cr_assert_eq(assert_each_once(3000), 1000);
	cr_assert_eq(h_redis_int(&d, "LLEN %s", k.dead), 2000);
	/* counted in the metrics */
	cr_assert_eq(h_http(port, "GET", "/metrics", NULL, &body), 200);
	cr_assert(strstr(body, "ferry_dead_redrives_total{state=\"done\"} 1\n")
	    && strstr(body, "ferry_dead_redrives_total{state=\"cancelled\"} 1\n")
	    && strstr(body, "ferry_dead_redrives_running 0\n"), "%s", body);
	free(body);
	/* the list needs the token */
	cr_assert_eq(h_http(port, "GET", "/api/dead/redrives", NULL, &body),
	    403);
	free(body);
	h_stop(&d);
}

Test(dead_http, a_few_redrives_at_once)
{
	long long ids[5];
	char *body, path[200];

	fill(0, 300);
	for (int i = 0; i < 4; i++) {
		json_t *o = post("/api/dead/retry-matching?queue=q&reason=23505&"
		    "rate=1", 202);
		ids[i] = jint(o, "id");
		json_decref(o);
	}
	/* a fifth, paced or not, is refused; a dry run changes nothing and
	 * runs */
	const char *more[] = { "/api/dead/retry-matching?queue=q&rate=5",
		"/api/dead/purge-matching?queue=q&reason=40001" };
	for (int i = 0; i < 2; i++) {
		cr_assert_eq(h_http(port, "POST", more[i], AUTH, &body), 429, "%s",
		    body);
		cr_assert(strstr(body, "4 redrives are running on this ferryd, the "
		    "most it runs at once: wait for one to end or cancel one") !=
		    NULL, "%s", body);
		free(body);
	}
	json_decref(post("/api/dead/purge-matching?queue=q&reason=40001&"
	    "dry_run=1", 200));
	json_t *o = h_http_json_with(port, "/api/dead/redrives", "Authorization: "
	    AUTH "\r\n");
	cr_assert_eq(jint(o, "running"), 4);
	cr_assert_eq(jint(o, "max"), 4);
	json_decref(o);
	/* one cancelled (waiting on its timer: it ends at once), then a
	 * fifth starts */
	snprintf(path, sizeof(path), "/api/dead/redrive/cancel?id=%lld",
	    ids[1]);
	o = post(path, 200);
	cr_assert_str_eq(h_jstr(o, "state"), "cancelled");
	json_decref(o);
	o = post("/api/dead/purge-matching?queue=q&reason=40001", 200);
	cr_assert_eq(jint(o, "purged"), 100);
	json_decref(o);
	o = post("/api/dead/retry-matching?queue=q&reason=exited&rate=1", 202);
	ids[4] = jint(o, "id");
	json_decref(o);
	cr_assert_eq(h_http(port, "POST", "/api/dead/redrive/cancel?id=99",
	    AUTH, &body), 404, "%s", body);
	free(body);
	/* ferryd stops with 4 running: they end between batches */
	h_stop(&d);
	cr_assert_eq(h_redis_int(&d, "LLEN %s", k.dead) + h_redis_int(&d,
	    "LLEN %s", k.requeue), 200);
}

/* Was: with the token configured, GET /api/dead/one gave any client a dead
 * job's whole document, and GET /api/dead its errors, while
 * /api/dead/summary refused the same client. Every read under /api/dead
 * needs the token now; the counts do not. */
Test(dead_http, every_dead_read_needs_the_token)
{
	static const struct {
		const char *path;
		int status;             /* with the token */
		const char *shows;      /* in that answer */
	} reads[] = {
		{ "/api/dead?queue=q", 200, "\"job-000004\"" },
		{ "/api/dead?queue=q&reason=23505", 200, "23505: duplicate key" },
		{ "/api/dead/one?queue=q&index=0", 200,
		    "\"job\":\"{\\\"id\\\":\\\"job-000004\\\"}\"" },
		{ "/api/dead/summary?queue=q", 200, "could not serialize" },
		{ "/api/dead/redrives", 200, "\"redrives\":[" },
		{ "/api/dead/nothing?queue=q", 404, "" },
	};
	const char *refused[] = { NULL, "Bearer wrong-token-0123456789abcdef",
		"Bearer", "Basic dGVzdDp0ZXN0", "Bearer " TOKEN "x" };
	char *body, want[80];

	fill(0, 5);
	for (size_t i = 0; i < sizeof(reads) / sizeof(reads[0]); i++) {
		for (size_t j = 0; j < sizeof(refused) / sizeof(refused[0]); j++) {
			int status = h_http(port, "GET", reads[i].path, refused[j],
			    &body);
			cr_assert_eq(status, 403, "GET %s with %s: %d %s", reads[i].path,
			    refused[j] != NULL ? refused[j] : "no token", status, body);
			cr_assert(strstr(body, "send the token of [ferryd] http_token as "
			    "\\\"Authorization: Bearer TOKEN\\\"") != NULL, "%s", body);
			cr_assert(strstr(body, "job-") == NULL && strstr(body,
			    "duplicate") == NULL, "%s", body);
			free(body);
		}
		int status = h_http(port, "GET", reads[i].path, AUTH, &body);
		cr_assert_eq(status, reads[i].status, "GET %s with the token: %d %s",
		    reads[i].path, status, body);
		cr_assert(strstr(body, reads[i].shows) != NULL, "GET %s: no %s in %s",
		    reads[i].path, reads[i].shows, body);
		free(body);
	}
	/* the counts: /api/queues, /metrics and the page, without the token */
	h_wait_api_queue(port, "q", "dead", 5);
	cr_assert_eq(h_http(port, "GET", "/metrics", NULL, &body), 200);
	cr_assert(strstr(body, "ferry_queue_dead{queue=\"q\"} 5\n") != NULL,
	    "%s", body);
	free(body);
	cr_assert_eq(h_http(port, "GET", "/", NULL, &body), 200);
	snprintf(want, sizeof(want), "<td data-k=\"dead\">5</td>");
	cr_assert(strstr(body, want) != NULL, "no %s in the page", want);
	cr_assert(strstr(body, "dead entries are hidden: enter the token of "
	    "[ferryd] http_token") != NULL, "the page does not say why");
	cr_assert(strstr(body, "job-0") == NULL, "an entry in the page");
	free(body);
	h_stop(&d);
}
