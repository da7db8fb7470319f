/* test_dead.c - dead-letter entries in the format of doc/formats.md, made
 * by settle.lua as a worker makes them or pushed by hand, against a real
 * redis-server: ferryctl dead list/show/retry/purge, the archive beyond
 * dead_max and dead restore handle every one of them whatever bytes its
 * job has (invalid UTF-8, a NUL, 5 MB, malformed JSON), and an entry that
 * does not match the grammar is listed, shown, archived and purged but
 * never replayed. A replayed job lands in requeue byte for byte, with its
 * stamps. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base64.h"
#include "config.h"
#include "dead_archive.h"
#include "harness.h"
#include "job.h"
#include "queue.h"
#include "script_args.h"
#include "wrapper.h"

#define QUEUES "[queue q]\nworkers = 0\n"
#define BIG (5 << 20)

static struct ferryd d;
static struct queue_keys k;

static void
teardown(void)
{
	h_teardown(&d);
}

TestSuite(dead, .fini = teardown, .timeout = 300);

#define CTL(r, ...) \
	h_ctl((r), d.config, NULL, __VA_ARGS__, (const char *)NULL)

/* The run exited 0 and printed exactly `want`; freed. */
static void
run_says(struct h_run *r, const char *want)
{
	cr_assert_eq(r->status, 0, "%s", r->err);
	cr_assert_str_eq(r->out, want);
	h_run_free(r);
}

/* ferryctl ARGS... exits 0 and prints exactly `want`. */
#define CTL_SAYS(want, ...) do { \
	struct h_run said_; \
	CTL(&said_, __VA_ARGS__); \
	run_says(&said_, (want)); \
} while (0)

/* The documents of the tests, and the malformed entry. */
struct doc {
	const char *id;         /* as ferryctl names it ("" : SHA-1) */
	char *p;
	size_t n;
};

static struct doc docs[5];
static char malformed[] = "{\"reason\":\"x\",\"job\":1,\"attempts\":0}";
static char malformed_sha[41];

static void
set_doc(struct doc *o, const char *id, const char *p, size_t n)
{
	o->id = id;
	o->p = malloc(n + 1);
	memcpy(o->p, p, n);
	o->n = n;
}

static void
make_docs(void)
{
	static const char utf8[] = "{\"id\":\"utf8bad\",\"s\":\"\xff\xfe\xc3\"}";
	static const char nul[] = "{\"id\":\"nul\",\"s\":\"a\0b\"}";
	static const char badjson[] = "{\"id\":\"x\",\"unclosed\":[1,2";
	static const char stamped[] = "{\"id\":\"stamped\",\"cache_key\":"
	    "\"ferry:{q}:cache:e\"}";
	char *big = malloc(BIG);

	set_doc(&docs[0], "utf8bad", utf8, sizeof(utf8) - 1);
	set_doc(&docs[1], "nul", nul, sizeof(nul) - 1);
	memset(big, 'x', BIG);
	memcpy(big, "{\"id\":\"big\",\"s\":\"", 17);
	memcpy(big + BIG - 2, "\"}", 2);
	set_doc(&docs[2], "big", big, BIG);
	free(big);
	set_doc(&docs[3], "", badjson, sizeof(badjson) - 1);
	set_doc(&docs[4], "stamped", stamped, sizeof(stamped) - 1);
	job_sha1_hex(malformed, strlen(malformed), malformed_sha);
}

static const char *
doc_id(const struct doc *o)
{
	static char sha[41];

	if (o->id[0] != '\0')
		return o->id;
	job_sha1_hex(o->p, o->n, sha);
	return sha;
}

static void
setup(void)
{
	h_setup(&d, NULL, QUEUES);
	queue_keys_init(&k, "ferry", "q");
	make_docs();
}

static void
reply_ok(redisReply *r, int type)
{
	cr_assert_not_null(r, "redis: %s", d.rc->errstr);
	cr_assert_eq(r->type, type, "reply type %d: %s", r->type,
	    r->type == REDIS_REPLY_ERROR ? r->str : "");
}

/* Worker w1 of master m1 holds `els` (from ready, or from requeue when
 * batch is set) and settles every one of them as dead, as consumer.c
 * does: settle.lua writes the entries. */
static void
settle_dead(const char *const *els, const size_t *lens, int n,
    const char *const *ids, const char *batch)
{
	char pos[16][16];
	const char *argv[SARGS_SETTLE_FIXED + 16 * SARGS_SETTLE_PER_JOB];
	size_t argl[SARGS_SETTLE_FIXED + 16 * SARGS_SETTLE_PER_JOB];
	struct sargs sa;
	int a = 0;

	cr_assert(n <= 16);
	sargs_settle(&sa, "ferry", "q", "w1", "m1", n);
	const char *proc = sa.argv[0];
	freeReplyObject(h_redis(&d, "HSET %s w1 m1", k.owners));
	if (batch != NULL)
		freeReplyObject(h_redis(&d, "HSET %s w1 %s", k.bkeys, batch));
	for (int i = 0; i < n; i++)
		freeReplyObject(h_redis(&d, "RPUSH %s %b", proc, els[i], lens[i]));
	for (; a < SARGS_SETTLE_FIXED; a++) {
		argv[a] = sa.argv[a];
		argl[a] = sa.lens[a];
	}
	for (int i = 0; i < n; i++) {
		snprintf(pos[i], sizeof(pos[i]), "%d", i + 1);
		const char *v[] = { pos[i], "dead", ids[i],
		    "failed by the handler", "handler said \xc3\xa9\xff no", "",
		    "" };
		for (int j = 0; j < SARGS_SETTLE_PER_JOB; j++) {
			argv[a] = v[j];
			argl[a++] = strlen(v[j]);
		}
	}
	redisReply *r = queue_script(d.rc, LUA_SETTLE, sa.nkeys, a, argv, argl);
	reply_ok(r, REDIS_REPLY_ARRAY);
	cr_assert_eq(r->element[2]->integer, n);
	freeReplyObject(r);
}

/* The five documents dead-lettered by settle.lua (the stamped one as a
 * wrapper of a requeue batch, with two stamps), then the malformed entry
 * pushed by hand: six entries, the malformed one newest. */
static void
fill_dead(void)
{
	const char *els[4];
	size_t lens[4];
	const char *ids[4] = { "utf8bad", "nul", "big", "" };

	for (int i = 0; i < 4; i++) {
		els[i] = docs[i].p;
		lens[i] = docs[i].n;
	}
	settle_dead(els, lens, 4, ids, NULL);
	char *w = NULL;
	size_t wn = (size_t)asprintf(&w, "{\"ferry\":1,\"recoveries\":1,"
	    "\"attempts\":0,\"stamps\":[\"old:1\",\"old:2\"],\"job\":%.*s}",
	    (int)docs[4].n, docs[4].p);
	const char *wels[] = { w };
	const char *wids[] = { "stamped" };
	settle_dead(wels, &wn, 1, wids, "w new:7");
	free(w);
	freeReplyObject(h_redis(&d, "LPUSH %s %s", k.dead, malformed));
	cr_assert_eq(h_redis_int(&d, "LLEN %s", k.dead), 6);
}

static json_t *
show(const char *id)
{
	struct h_run r;
	json_error_t err;

	CTL(&r, "dead", "show", "q", id);
	cr_assert_eq(r.status, 0, "show %s: %s", id, r.err);
	json_t *o = json_loadb(r.out, strlen(r.out), JSON_ALLOW_NUL, &err);
	cr_assert_not_null(o, "show %s: not JSON (%s)", id, err.text);
	h_run_free(&r);
	return o;
}

static void
assert_bytes(json_t *s, const char *p, size_t n, const char *what)
{
	cr_assert(json_is_string(s), "%s: not a string", what);
	cr_assert_eq(json_string_length(s), n, "%s: length", what);
	cr_assert_eq(memcmp(json_string_value(s), p, n), 0, "%s: bytes", what);
}

static void
assert_b64(json_t *s, const char *p, size_t n, const char *what)
{
	char *bytes;
	size_t len;

	cr_assert(json_is_string(s), "%s: not a string", what);
	cr_assert_eq(base64_decode(json_string_value(s), json_string_length(s),
	    &bytes, &len), 0, "%s: not base64", what);
	cr_assert(len == n && memcmp(bytes, p, n) == 0, "%s: bytes", what);
	free(bytes);
}

static void
assert_stamps(json_t *a)
{
	cr_assert_eq(json_array_size(a), 2);
	cr_assert_str_eq(json_string_value(json_array_get(a, 0)), "old:1");
	cr_assert_str_eq(json_string_value(json_array_get(a, 1)), "old:2");
}

Test(dead, list_and_show_whatever_bytes, .init = setup)
{
	struct h_run r;
	json_t *o;

	fill_dead();
	CTL(&r, "dead", "list", "q");
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert_eq(h_count_lines(r.out), 6, "%s", r.out);
	for (int i = 0; i < 5; i++) {
		char line[200];
		snprintf(line, sizeof(line), "%s\t", doc_id(&docs[i]));
		cr_assert_not_null(strstr(r.out, line), "no %s in\n%s", line,
		    r.out);
	}
	cr_assert_not_null(strstr(r.out, "\t1\t0\tfailed by the handler\t"
	    "handler said \xc3\xa9? no\n"), "%s", r.out);
	cr_assert_not_null(strstr(r.out, "stamped\t"), "%s", r.out);
	char want[200];
	snprintf(want, sizeof(want), "%s\t-\t-\t-\tmalformed dead entry\t-\n",
	    malformed_sha);
	cr_assert_not_null(strstr(r.out, want), "%s", r.out);
	h_run_free(&r);

	o = show("utf8bad");
	cr_assert_null(json_object_get(o, "job"));
	cr_assert_null(json_object_get(o, "document"));
	assert_b64(json_object_get(o, "job_base64"), docs[0].p, docs[0].n,
	    "utf8bad");
	cr_assert_str_eq(h_jstr(o, "reason"), "failed by the handler");
	cr_assert_str_eq(h_jstr(o, "last_error"), "handler said \xc3\xa9? no");
	cr_assert_eq(json_integer_value(json_object_get(o, "attempts")), 1);
	json_decref(o);

	o = show("nul");
	assert_bytes(json_object_get(o, "job"), docs[1].p, docs[1].n, "nul");
	cr_assert_null(json_object_get(o, "document"));   /* a raw NUL */
	json_decref(o);

	o = show("big");
	assert_bytes(json_object_get(o, "job"), docs[2].p, docs[2].n, "big");
	cr_assert_eq(json_string_length(json_object_get(json_object_get(o,
	    "document"), "s")), BIG - 19);
	json_decref(o);

	o = show(doc_id(&docs[3]));
	assert_bytes(json_object_get(o, "job"), docs[3].p, docs[3].n, "badjson");
	cr_assert_null(json_object_get(o, "document"));
	cr_assert_null(json_object_get(o, "id"));
	json_decref(o);

	o = show("stamped");
	assert_stamps(json_object_get(o, "stamps"));
	cr_assert_eq(json_integer_value(json_object_get(o, "recoveries")), 1);
	cr_assert_str_eq(h_jstr(json_object_get(o, "document"), "cache_key"),
	    "ferry:{q}:cache:e");
	json_decref(o);

	o = show(malformed_sha);
	cr_assert_str_eq(h_jstr(o, "reason"), "malformed dead entry");
	cr_assert_str_eq(h_jstr(o, "raw"), malformed);
	assert_b64(json_object_get(o, "raw_base64"), malformed,
	    strlen(malformed), "raw_base64");
	json_decref(o);
	h_stop(&d);
}

/* requeue holds exactly `n` wrappers, fresh, with these documents (any
 * order) and, for the stamped one, its stamps. */
static void
assert_requeue(const struct doc *const *want, int n)
{
	redisReply *r = h_redis(&d, "LRANGE %s 0 -1", k.requeue);
	bool seen[8] = { false };

	cr_assert_eq((int)r->elements, n);
	for (size_t i = 0; i < r->elements; i++) {
		struct wrapper w;
		int at = -1;
		cr_assert_eq(wrapper_parse(r->element[i]->str, r->element[i]->len,
		    WRAPPER_JOB, &w), 0, "requeue %zu is not a wrapper", i);
		cr_assert_eq(w.attempts, 0);
		cr_assert_eq(w.recoveries, 0);
		for (int j = 0; j < n; j++)
			if (!seen[j] && want[j]->n == w.doc_len &&
			    memcmp(want[j]->p, w.doc, w.doc_len) == 0)
				at = j;
		cr_assert_neq(at, -1, "requeue %zu: a document changed", i);
		seen[at] = true;
		if (want[at] == &docs[4]) {
			cr_assert_eq(w.nstamps, 2);
			cr_assert(w.stamps[0].n == 7 && memcmp(w.stamps[0].p,
			    "\"old:1\"", 7) == 0);
			cr_assert(w.stamps[1].n == 7 && memcmp(w.stamps[1].p,
			    "\"old:2\"", 7) == 0);
		} else {
			cr_assert_eq(w.nstamps, 0);
		}
		wrapper_free(&w);
	}
	freeReplyObject(r);
}

Test(dead, retry_every_entry_but_the_malformed_one, .init = setup)
{
	struct h_run r;

	fill_dead();
	CTL(&r, "dead", "retry", "q", malformed_sha);
	cr_assert_eq(r.status, 65, "%d %s", r.status, r.err);
	cr_assert_not_null(strstr(r.err, "malformed"), "%s", r.err);
	cr_assert_not_null(strstr(r.err, "only shown and purged"), "%s", r.err);
	h_run_free(&r);
	cr_assert_eq(h_redis_int(&d, "LLEN %s", k.dead), 6);

	CTL_SAYS("replayed 1 job to queue q\n", "dead", "retry", "q",
	    "stamped");
	redisReply *el = h_redis(&d, "LINDEX %s 0", k.requeue);
	char *want = NULL;
	int wn = asprintf(&want, "{\"ferry\":1,\"recoveries\":0,\"attempts\":0,"
	    "\"stamps\":[\"old:1\",\"old:2\"],\"job\":%.*s}", (int)docs[4].n,
	    docs[4].p);
	cr_assert(el->len == (size_t)wn && memcmp(el->str, want, el->len) == 0,
	    "requeue: %s", el->str);
	free(want);
	freeReplyObject(el);

	CTL(&r, "dead", "retry", "q", "--all");
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert_str_eq(r.out, "replayed 4 jobs to queue q\n");
	cr_assert_not_null(strstr(r.err, "1 malformed dead entry left"), "%s",
	    r.err);
	h_run_free(&r);
	const struct doc *all[] = { &docs[0], &docs[1], &docs[2], &docs[3],
	    &docs[4] };
	assert_requeue(all, 5);
	cr_assert_eq(h_redis_int(&d, "LLEN %s", k.ready), 0);
	cr_assert_eq(h_redis_int(&d, "LLEN %s", k.dead), 1);
	cr_assert_eq(h_redis_int(&d, "HGET %s replayed", k.stats), 5);

	CTL_SAYS("replayed 0 jobs to queue q\n", "dead", "retry", "q", "--all");
	CTL_SAYS("purged 1 dead entry from queue q\n", "dead", "purge", "q",
	    malformed_sha);
	cr_assert_eq(h_redis_int(&d, "EXISTS %s", k.dead), 0);
	h_stop(&d);
}

/* dead_retry.lua itself refuses an entry that is not one, and leaves it. */
Test(dead, dead_retry_lua_refuses_a_malformed_entry, .init = setup)
{
	const char *argv[] = { k.dead, k.requeue, k.stats, malformed };

	freeReplyObject(h_redis(&d, "LPUSH %s %s", k.dead, malformed));
	redisReply *r = queue_script(d.rc, LUA_DEAD_RETRY, 3, 4, argv, NULL);
	reply_ok(r, REDIS_REPLY_ERROR);
	cr_assert_eq(strncmp(r->str, "BADENTRY ", 9), 0, "%s", r->str);
	freeReplyObject(r);
	cr_assert_eq(h_redis_int(&d, "LLEN %s", k.dead), 1);
	cr_assert_eq(h_redis_int(&d, "EXISTS %s", k.requeue), 0);
	h_stop(&d);
}

Test(dead, purge_by_id_and_all_whatever_bytes, .init = setup)
{
	struct h_run r;

	fill_dead();
	freeReplyObject(h_redis(&d, "SET ferry:{q}:cache:e v"));
	CTL_SAYS("purged 1 dead entry from queue q\n", "dead", "purge", "q",
	    "utf8bad");
	CTL(&r, "dead", "purge", "q", "stamped");
	cr_assert_str_eq(r.out, "purged 1 dead entry from queue q\n");
	h_run_free(&r);
	cr_assert_eq(h_redis_int(&d, "EXISTS ferry:{q}:cache:e"), 0);
	cr_assert_eq(h_redis_int(&d, "LLEN %s", k.dead), 4);
	CTL_SAYS("purged 4 dead entries from queue q\n", "dead", "purge", "q",
	    "--all");
	cr_assert_eq(h_redis_int(&d, "EXISTS %s", k.dead), 0);
	h_stop(&d);
}

/* The archive beyond dead_max: one JSON object a line for each entry
 * (job or job_base64, the header decoded, raw_hex for the malformed one),
 * the cache data with it; then dead restore puts the five jobs back in
 * requeue byte for byte with their stamps and the cache key recreated. */
Test(dead, archived_and_restored_whatever_bytes, .init = setup)
{
	char path[400], extra[600];
	struct ferry_config cfg = { 0 };
	struct config_errors errs = { 0 };
	struct h_run r;

	snprintf(path, sizeof(path), "%s/archive.jsonl", d.dir);
	snprintf(extra, sizeof(extra), "[queue q]\nworkers = 0\ndead_max = 1\n"
	    "dead_archive = %s\n", path);
	h_config(&d, NULL, extra);
	cr_assert_eq(config_load(d.config, &cfg, &errs), 0);
	fill_dead();
	freeReplyObject(h_redis(&d, "SET ferry:{q}:cache:e cached-data"));
	freeReplyObject(h_redis(&d, "LPUSH %s %s", k.dead, malformed));

	cr_assert_eq(dead_archive_run(d.rc, "ferry",
	    config_find_queue(&cfg, "q"), &k), 6);
	cr_assert_eq(h_redis_int(&d, "LLEN %s", k.dead), 1);
	cr_assert_eq(h_redis_int(&d, "EXISTS ferry:{q}:cache:e"), 0);
	char *text = h_read_file(path), *line = text, *nl;
	int lines = 0, raw = 0, b64 = 0;
	while ((nl = strchr(line, '\n')) != NULL) {
		json_error_t err;
		json_t *o = json_loadb(line, (size_t)(nl - line), JSON_ALLOW_NUL,
		    &err);
		cr_assert_not_null(o, "line %d: %s", lines + 1, err.text);
		cr_assert_str_eq(h_jstr(o, "queue"), "q");
		raw += json_object_get(o, "raw_hex") != NULL;
		b64 += json_object_get(o, "job_base64") != NULL;
		if (strcmp(h_jstr(o, "id"), "stamped") == 0) {
			assert_stamps(json_object_get(o, "stamps"));
			cr_assert_str_eq(h_jstr(o, "cache"), "cached-data");
			cr_assert_str_eq(h_jstr(o, "reason"), "failed by the handler");
		}
		if (strcmp(h_jstr(o, "id"), "nul") == 0)
			assert_bytes(json_object_get(o, "job"), docs[1].p, docs[1].n,
			    "archived nul");
		json_decref(o);
		lines++;
		line = nl + 1;
	}
	cr_assert_eq(lines, 6);
	cr_assert_eq(raw, 1);
	cr_assert_eq(b64, 1);
	free(text);

	CTL(&r, "dead", "restore", "q", path);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert_str_eq(r.out, "restored 5 jobs to queue q (1 cache key "
	    "recreated, 0 already there); 1 not replayable\n");
	cr_assert_not_null(strstr(r.err, "malformed (raw_hex)"), "%s", r.err);
	h_run_free(&r);
	const struct doc *all[] = { &docs[0], &docs[1], &docs[2], &docs[3],
	    &docs[4] };
	assert_requeue(all, 5);
	redisReply *v = h_redis(&d, "GET ferry:{q}:cache:e");
	cr_assert_str_eq(v->str, "cached-data");
	freeReplyObject(v);
	cr_assert_eq(h_redis_int(&d, "LLEN %s", k.ready), 0);
	config_free(&cfg);
	config_errors_free(&errs);
	h_stop(&d);
}

/* A line whose job_base64 is not base64, or whose stamps are not strings,
 * is not an archive entry: nothing is restored. */
Test(dead, restore_refuses_bad_job_base64_and_stamps, .init = setup)
{
	char path[400];
	struct h_run r;

	snprintf(path, sizeof(path), "%s/bad.jsonl", d.dir);
	h_write_file(path, "{\"queue\":\"q\",\"archived\":1,\"job\":\"{}\"}\n"
	    "{\"queue\":\"q\",\"archived\":1,\"job_base64\":\"Zg=\"}\n"
	    "{\"queue\":\"q\",\"archived\":1,\"stamps\":[1],\"job\":\"{}\"}\n");
	CTL(&r, "dead", "restore", "q", path);
	cr_assert_eq(r.status, 65, "%s", r.err);
	cr_assert_not_null(strstr(r.err, ":2: not an archive entry: "
	    "\"job_base64\" is not base64"), "%s", r.err);
	cr_assert_not_null(strstr(r.err, ":3: not an archive entry: "
	    "\"stamps\" is not an array of strings"), "%s", r.err);
	h_run_free(&r);
	cr_assert_eq(h_redis_int(&d, "EXISTS %s", k.requeue), 0);

	/* an older archive's "batch" is kept as a stamp */
	h_write_file(path, "{\"queue\":\"q\",\"archived\":1,\"batch\":\"b:1\","
	    "\"job\":\"{\\\"id\\\":1}\"}\n");
	CTL(&r, "dead", "restore", "q", path);
	cr_assert_eq(r.status, 0, "%s", r.err);
	h_run_free(&r);
	redisReply *el = h_redis(&d, "LINDEX %s 0", k.requeue);
	cr_assert_str_eq(el->str, "{\"ferry\":1,\"recoveries\":0,\"attempts\":0,"
	    "\"stamps\":[\"b:1\"],\"job\":{\"id\":1}}");
	freeReplyObject(el);
	h_stop(&d);
}

Test(dead, enqueue_refuses_a_wrapper_looking_document, .init = setup)
{
	struct h_run r;

	h_ctl(&r, d.config, NULL, "enqueue", "q", "{\"ferry\":1,\"recoveries\":0,"
	    "\"attempts\":0,\"job\":{}}", (const char *)NULL);
	cr_assert_eq(r.status, 65, "%s", r.err);
	cr_assert_not_null(strstr(r.err, "ferry's own wrapper format"), "%s",
	    r.err);
	h_run_free(&r);
	h_ctl(&r, d.config, "{\"id\":1}\n{\"ferry\":1,\"x\":2}\n", "enqueue", "q",
	    "-", (const char *)NULL);
	cr_assert_eq(r.status, 65, "%s", r.err);
	cr_assert_not_null(strstr(r.err, "stdin line 2: it starts with "
	    "{\"ferry\":1,"), "%s", r.err);
	h_run_free(&r);
	cr_assert_eq(h_redis_int(&d, "EXISTS %s", k.ready), 0);
	/* not the prefix: a document like any other */
	h_ctl(&r, d.config, NULL, "enqueue", "q", "{\"ferry\":2}",
	    (const char *)NULL);
	cr_assert_eq(r.status, 0, "%s", r.err);
	h_run_free(&r);
	cr_assert_eq(h_redis_int(&d, "LLEN %s", k.ready), 1);
	h_stop(&d);
}

/* restore.lua checks every argument before its first write: a chunk with
 * one malformed job pushes nothing and creates no key. */
Test(dead, restore_lua_writes_nothing_on_bad_arguments, .init = setup)
{
	const char *argv[] = { k.requeue, k.stats, k.protected,
	    "ferry:{q}:cache:a", "{\"id\":1}", "1", "s:1", "4", "string", "1",
	    "value", "{\"id\":2}", "x", "0", "", "0" };
	redisReply *r = queue_script(d.rc, LUA_RESTORE, 4, 16, argv, NULL);

	reply_ok(r, REDIS_REPLY_ERROR);
	cr_assert_eq(strncmp(r->str, "BADARGS ", 8), 0, "%s", r->str);
	freeReplyObject(r);
	cr_assert_eq(h_redis_int(&d, "EXISTS %s %s ferry:{q}:cache:a", k.requeue,
	    k.stats), 0);
	argv[12] = "0";                 /* now both are well formed */
	argv[13] = "0";
	argv[14] = "";
	argv[15] = "0";
	r = queue_script(d.rc, LUA_RESTORE, 4, 15, argv, NULL);
	reply_ok(r, REDIS_REPLY_ERROR);         /* one argument short */
	freeReplyObject(r);
	r = queue_script(d.rc, LUA_RESTORE, 4, 16, argv, NULL);
	reply_ok(r, REDIS_REPLY_ARRAY);
	cr_assert_eq(r->element[0]->integer, 2);
	cr_assert_eq(r->element[1]->integer, 1);
	freeReplyObject(r);
	redisReply *el = h_redis(&d, "LINDEX %s -1", k.requeue);
	cr_assert_str_eq(el->str, "{\"ferry\":1,\"recoveries\":0,\"attempts\":0,"
	    "\"stamps\":[\"s:1\"],\"job\":{\"id\":1}}");
	freeReplyObject(el);
	cr_assert_eq(h_redis_int(&d, "EXISTS ferry:{q}:cache:a"), 1);
	h_stop(&d);
}
