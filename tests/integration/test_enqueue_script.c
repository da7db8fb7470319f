/* test_enqueue_script.c - enqueue.lua, the producers' one enqueue, on a
 * real redis-server, held to ferryctl's own checks in C (wrapper_looks_like
 * and job_parse, as src/ferryctl/ctl_enqueue.c applies them): the same hostile
 * documents (invalid UTF-8, non-objects, forged wrappers, too large, too
 * deep, what cjson accepts but strict JSON does not) get the same verdict
 * from both; a refused job pushes nothing, names its index, and takes its
 * whole call with it; cache keys are written or protected (no TTL, counted
 * in the protected hash) in the same step; the memory refusal says what
 * ferryctl says. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "job.h"
#include "lua_scripts.h"
#include "memory_check.h"
#include "queue.h"
#include "wrapper.h"

#define READY "ferry:{q}:ready"
#define CACHE "ferry:{q}:cache:"
#define FIXED_KEYS READY, "ferry:{q}:protected"
#define BIG (1L << 20)

static struct ferryd d;

static void
teardown(void)
{
	h_teardown(&d);
}

TestSuite(enqueue_script, .fini = teardown, .timeout = 120);

/* enqueue.lua with these documents (no cache keys). */
static redisReply *
enqueue_n(long max_bytes, int refuse_pct, int n, const char *const *docs,
    const size_t *lens)
{
	const char *fixed[] = { FIXED_KEYS };
	const char **argv = calloc((size_t)(7 + 4 * n), sizeof(*argv));
	size_t *len = calloc((size_t)(7 + 4 * n), sizeof(*len));
	char max[24], pct[24];
	int a = 0;

	snprintf(max, sizeof(max), "%ld", max_bytes);
	snprintf(pct, sizeof(pct), "%d", refuse_pct);
	for (int k = 0; k < 2; k++)
		argv[a] = fixed[k], len[a++] = strlen(fixed[k]);
	argv[a] = max, len[a++] = strlen(max);
	argv[a] = pct, len[a++] = strlen(pct);
	argv[a] = "0", len[a++] = 1;
	for (int i = 0; i < n; i++) {
		argv[a] = docs[i], len[a++] = lens[i];
		argv[a] = "0", len[a++] = 1;
		argv[a] = "", len[a++] = 0;
		argv[a] = "", len[a++] = 0;     /* binding: none needed */
	}
	redisReply *r = queue_script(d.rc, LUA_ENQUEUE, 2, a, argv, len);
	cr_assert_not_null(r, "enqueue.lua: %s", d.rc->errstr);
	free(argv);
	free(len);
	return r;
}

/* ferryctl's verdict in C: NULL (valid) or why not, into why. */
static const char *
c_refusal(const char *doc, size_t len, long max_bytes, char *why,
    size_t size)
{
	struct job j;

	if (wrapper_looks_like(doc, len))
		return snprintf(why, size, "wrapper"), why;
	job_parse(&j, doc, len, max_bytes);
	if (j.invalid != NULL)
		snprintf(why, size, "%s", j.invalid);
	job_free(&j);
	return j.invalid != NULL ? why : NULL;
}

/* Both say the same of doc; the script's reason is returned (or NULL). */
static char *
agree(const char *doc, size_t len, long max_bytes)
{
	char why[300];
	const char *c = c_refusal(doc, len, max_bytes, why, sizeof(why));
	long long before = h_redis_int(&d, "LLEN " READY);
	redisReply *r = enqueue_n(max_bytes, 0, 1, &doc, &len);
	char *lua = NULL;

	if (r->type == REDIS_REPLY_ERROR) {
		cr_assert(strncmp(r->str, "INVALID 1 ", 10) == 0,
		    "%.80s: not an INVALID refusal: %s", doc, r->str);
		lua = strdup(r->str + 10);
	} else {
		cr_assert_eq(r->type, REDIS_REPLY_ARRAY, "%.80s", doc);
		cr_assert_eq(r->element[0]->integer, 1);
	}
	freeReplyObject(r);
	/* a valid document naming a cache_key that this call does not pass
	 * (so that it could not be protected): the script refuses the call,
	 * not the document */
	if (c == NULL && lua != NULL && strncmp(lua, "it names cache_key ",
	    19) == 0) {
		cr_assert_eq(h_redis_int(&d, "LLEN " READY), before);
		free(lua);
		return NULL;
	}
	cr_assert_eq(c != NULL, lua != NULL, "%.80s (%zu bytes): C says %s, "
	    "enqueue.lua says %s", doc, len, c ? c : "valid",
	    lua ? lua : "valid");
	cr_assert_eq(h_redis_int(&d, "LLEN " READY), before + (lua == NULL));
	return lua;
}

static void
agree_s(const char *doc)
{
	free(agree(doc, strlen(doc), BIG));
}

/* {"a":[[...]]} nested depth deep in all (the object counts) */
static char *
deep(int depth)
{
	size_t n = 5 + 2 * (size_t)depth + 1;
	char *s = malloc(n + 1), *p = s;

	p += sprintf(p, "{\"a\":");
	for (int i = 1; i < depth; i++)
		*p++ = '[';
	for (int i = 1; i < depth; i++)
		*p++ = ']';
	*p++ = '}';
	*p = '\0';
	return s;
}

Test(enqueue_script, invalid_utf8_as_c)
{
	static const char *const docs[] = {
		"{\"a\":\"\xff\"}", "{\"a\":\"\xc0\xaf\"}", "{\"a\":\"\xed\xa0\x80\"}",
		"{\"a\":\"\xe2\x82\"}", "{\"a\":\"\xf8\x88\x80\x80\x80\"}",
		"{\"a\":\"\xf4\x90\x80\x80\"}", "{\"\xff\":1}", "{\"a\":\"\x80\"}",
		"{\"a\":\"\xe0\x80\xaf\"}", "{\"a\":\"caf\xc3\xa9\"}",
		"{\"a\":\"\xf0\x9f\x98\x80\"}", "{\"a\":\"\xef\xbf\xbf\"}",
		"\xef\xbb\xbf{\"a\":1}", "{\"a\":1}\xff",
	};

	h_setup_redis(&d, NULL, "[queue q]\nworkers = 0\n", NULL);
	for (size_t i = 0; i < sizeof(docs) / sizeof(*docs); i++)
		agree_s(docs[i]);
	/* the three valid ones went in */
	cr_assert_eq(h_redis_int(&d, "LLEN " READY), 3);
	h_stop(&d);
}

Test(enqueue_script, non_objects_and_strict_json_as_c)
{
	static const char *const docs[] = {
		"[]", "[1,2]", "1", "\"s\"", "null", "true", " [ {} ]", "   ",
		"{}", " \t{\"a\":1}\r\n", "{\"a\":\"x\ty\"}", "{\"a\":\"x\\ty\"}",
		"{\"a\":1.}", "{\"a\":1.e5}", "{\"a\":1.5e5}", "{\"a\":1e400}",
		"{\"a\":-1e400}", "{\"a\":1e-400}", "{\"a\":\"\\u0000\"}",
		"{\"a\":\"\\\\u0000\"}", "{\"a\":\"\\ud800\"}",
		"{\"a\":\"\\ud83d\\ude00\"}", "{\"a\":0x10}", "{\"a\":NaN}",
		"{\"a\":Infinity}", "{\"a\":[1,]}", "{\"a\":1,}", "{\"a\":1}x",
		"{\"a\":1}{}", "{\"a\":01}", "{\"a\":-0}", "{\"a\":1,\"a\":2}",
		"{'a':1}", "{\"a\":\"\\x\"}", "{\"a\":\"\x01\"}", "{\"a\":1 ",
		"{\"a\":123456789012345678901234567890}", "{\"a\":\"1.\"}",
		"{\"id\":\"x\"}", "{\"id\":7}", "{\"id\":-7}", "{\"id\":1.5}",
		"{\"id\":null}", "{\"id\":[1]}", "{\"id\":true}",
		"{\"id\":1.0}", "{\"id\":1e2}", "{\"id\" : 1E2 }",
		"{\"id\":-1.5e3}", "{\"a\":{\"id\":1.0},\"id\":2}",
		"{\"id\":1.0,\"id\":\"x\"}", "{\"id\":\"x\",\"id\":1.0}",
		"{\"\\u0069d\":1.0}", "{\"\\u0069d\":3}", "[{\"id\":1.0}]",
		"{\"id\":9007199254740993}", "{\"id\":9223372036854775807}",
		"{\"id\":9223372036854775808}", "{\"id\":12345678901234567890}",
		"{\"id\":-9223372036854775808}", "{\"b\":[\"id\",1.5],\"id\":4}",
		"{\"a\":\"x\\\"y\ty\"}", "{\"a\":\"\\\\\",\t\"b\":1}",
		"{\"a\":\"\\\"\",\n\"b\":\"c\"}", "{\"a\":\"x\\\"\n\"}",
		"{\"a\":\"1.\",\"b\":1.}", "{\"a\":\"\\\\\\u0000\"}",
		"{\"x\":\"e999\",\"a\":1}", "{\"a\":\"1e999 12345678901234567890\"}",
		"{\"a\":1E+999}", "{\"a\":1e0400}", "{\"a\":1e-0400}",
		"{\n\"id\":1.0\n}", "{\"a\":1,\"id\":1.0}", "{\"a\":1,\"id\":10}",
		"{\"a\":\"\\\"id\\\":1.0\",\"id\":3}", "{\"a\":\"\\u00e9\",\"id\":1e1}",
		"{\"a\":\"caf\xc3\xa9\",\"b\":\"\\u0000\"}",
		"{\"cache_key\":\"\"}", "{\"cache_key\":5}", "{\"cache_key\":\"k\"}",
		"{\"cache_key\":\"a\\u0000b\"}",
	};
	char id[300], ck[600];

	h_setup_redis(&d, NULL, "[queue q]\nworkers = 0\n", NULL);
	for (size_t i = 0; i < sizeof(docs) / sizeof(*docs); i++)
		agree_s(docs[i]);
	snprintf(id, sizeof(id), "{\"id\":\"%0128d\"}", 0);
	agree_s(id);
	snprintf(id, sizeof(id), "{\"id\":\"%0129d\"}", 0);
	agree_s(id);
	snprintf(ck, sizeof(ck), "{\"cache_key\":\"%0512d\"}", 0);
	agree_s(ck);
	snprintf(ck, sizeof(ck), "{\"cache_key\":\"%0513d\"}", 0);
	agree_s(ck);
	char *why = agree("[1]", 3, BIG);
	cr_assert_str_eq(why, "job is not a JSON object");
	free(why);
	h_stop(&d);
}

Test(enqueue_script, forged_wrappers_as_c)
{
	static const char *const docs[] = {
		"{\"ferry\":1,\"recoveries\":1,\"attempts\":0,\"stamps\":"
		"[\"w1:x:2\"],\"job\":{\"n\":9}}",
		"{\"ferry\":1,\"recoveries\":0,\"attempts\":0,\"job\":{}}",
		"{\"ferry\":1,}", "{\"ferry\":1,\"x\":2}",
		" {\"ferry\":1,\"recoveries\":0,\"attempts\":0,\"job\":{}}",
		"{\"ferry\":2,\"job\":{}}", "{\"ferry\":1}",
		"{\"reason\":\"x\",\"attempts\":0,\"recoveries\":0,\"time\":1,"
		"\"worker\":\"w\",\"job\":{}}",
	};

	h_setup_redis(&d, NULL, "[queue q]\nworkers = 0\n", NULL);
	for (size_t i = 0; i < sizeof(docs) / sizeof(*docs); i++)
		agree_s(docs[i]);
	char *why = agree(docs[1], strlen(docs[1]), BIG);
	cr_assert(strstr(why, "the prefix of ferry's own wrapper format") != NULL,
	    "%s", why);
	free(why);
	h_stop(&d);
}

Test(enqueue_script, sizes_and_depths_as_c)
{
	char doc[80];

	h_setup_redis(&d, NULL, "[queue q]\nworkers = 0\n", NULL);
	/* exactly max_job_bytes, and one more */
	snprintf(doc, sizeof(doc), "{\"a\":\"%056d\"}", 0);
	cr_assert_eq(strlen(doc), 64);
	free(agree(doc, 64, 64));
	char *why = agree(doc, 64, 63);
	cr_assert_str_eq(why, "job is 64 bytes, over max_job_bytes 63");
	free(why);
	free(agree("", 0, 64));
	static const int depths[] = { 2, 64, 65, 1000, 1001, 2047, 2048, 2049,
	    2050, 5000, 100000 };
	for (size_t i = 0; i < sizeof(depths) / sizeof(*depths); i++) {
		char *s = deep(depths[i]);
		free(agree(s, strlen(s), BIG));
		free(s);
	}
	h_stop(&d);
}

/* One bad job among good ones: nothing is pushed, and it is named. */
Test(enqueue_script, all_or_nothing)
{
	const char *docs[] = { "{\"a\":1}", "{\"a\":2}", "{\"a\":", "{}" };
	size_t lens[] = { 7, 7, 5, 2 };

	h_setup_redis(&d, NULL, "[queue q]\nworkers = 0\n", NULL);
	redisReply *r = enqueue_n(BIG, 0, 4, docs, lens);
	cr_assert_eq(r->type, REDIS_REPLY_ERROR);
	cr_assert(strncmp(r->str, "INVALID 3 malformed JSON: ", 26) == 0, "%s",
	    r->str);
	freeReplyObject(r);
	cr_assert_eq(h_redis_int(&d, "EXISTS " READY), 0);
	r = enqueue_n(BIG, 0, 2, docs, lens);
	cr_assert_eq(r->type, REDIS_REPLY_ARRAY);
	cr_assert_eq(r->element[0]->integer, 2);
	freeReplyObject(r);
	/* in order, as LPUSH of both: the first at the right end */
	r = h_redis(&d, "LRANGE " READY " 0 -1");
	cr_assert_eq(r->elements, 2);
	cr_assert_str_eq(r->element[1]->str, "{\"a\":1}");
	freeReplyObject(r);
	/* nothing counted at enqueue: fetch.lua counts `enqueued` */
	cr_assert_eq(h_redis_int(&d, "EXISTS ferry:{q}:stats"), 0);
	h_stop(&d);
}

/* ferryctl has parsed every job as a worker will and says "checked":
 * the script runs only its cheap checks (a forged wrapper and the size are
 * still refused), not the JSON ones. */
Test(enqueue_script, checked_by_the_caller_skips_the_json_checks)
{
	const char *argv[] = { FIXED_KEYS, "100", "0", "1", "checked",
	    "{\"a\":", "0", "", "", "{\"ferry\":1,\"job\":{}}", "0", "", "" };
	size_t n = sizeof(argv) / sizeof(argv[0]);

	h_setup_redis(&d, NULL, "[queue q]\nworkers = 0\n", NULL);
	/* a forged wrapper: refused even so, and nothing pushed */
	redisReply *r = queue_script(d.rc, LUA_ENQUEUE, 2, (int)n, argv, NULL);
	cr_assert_not_null(r);
	cr_assert_eq(r->type, REDIS_REPLY_ERROR);
	cr_assert(strncmp(r->str, "INVALID 2 it starts with {\"ferry\":1,", 36)
	    == 0, "%s", r->str);
	freeReplyObject(r);
	cr_assert_eq(h_redis_int(&d, "EXISTS " READY), 0);
	/* the JSON is not looked at: the worker will refuse this one */
	r = queue_script(d.rc, LUA_ENQUEUE, 2, (int)n - 4, argv, NULL);
	cr_assert_eq(r->type, REDIS_REPLY_ARRAY, "%s", r->str);
	cr_assert_eq(r->element[0]->integer, 1);
	freeReplyObject(r);
	/* a word other than "checked" there is refused */
	argv[5] = "trusted";
	r = queue_script(d.rc, LUA_ENQUEUE, 2, (int)n - 4, argv, NULL);
	cr_assert_eq(r->type, REDIS_REPLY_ERROR);
	cr_assert(strncmp(r->str, "BADARGS ", 8) == 0, "%s", r->str);
	freeReplyObject(r);
	h_stop(&d);
}

/* The cache key is written in the same step as the push, with no TTL,
 * and counted in the protected hash (how many live jobs name it). */
Test(enqueue_script, cache_keys_are_written_protected)
{
	const char *argv[] = { FIXED_KEYS, CACHE "j1:0a", "1048576", "90", "0",
	    "{\"id\":\"j1\",\"cache_key\":\"" CACHE "j1:0a\"}", "3", "[[1,2]]",
	    "", "{\"id\":\"j2\"}", "0", "", "" };
	size_t n = sizeof(argv) / sizeof(*argv);

	h_setup_redis(&d, NULL, "[queue q]\nworkers = 0\n", NULL);
	redisReply *r = queue_script(d.rc, LUA_ENQUEUE, 3, (int)n, argv, NULL);
	cr_assert_eq(r->type, REDIS_REPLY_ARRAY, "%s", r->str);
	cr_assert_eq(r->element[0]->integer, 2);
	cr_assert_str_eq(r->element[1]->str, "");
	freeReplyObject(r);
	cr_assert_eq(h_redis_int(&d, "PTTL " CACHE "j1:0a"), -1, "no TTL");
	r = h_redis(&d, "GET " CACHE "j1:0a");
	cr_assert_str_eq(r->str, "[[1,2]]");
	freeReplyObject(r);
	cr_assert_eq(h_redis_int(&d, "HGET ferry:{q}:protected " CACHE "j1:0a"),
	    1);
	cr_assert_eq(h_redis_int(&d, "LLEN " READY), 2);
	/* a value may be written only in the queue's cache space */
	argv[2] = "ferry:{q}:requeue";
	r = queue_script(d.rc, LUA_ENQUEUE, 3, (int)n, argv, NULL);
	cr_assert_eq(r->type, REDIS_REPLY_ERROR);
	cr_assert(strncmp(r->str, "BADARGS ", 8) == 0, "%s", r->str);
	freeReplyObject(r);
	cr_assert_eq(h_redis_int(&d, "EXISTS ferry:{q}:requeue"), 0);
	cr_assert_eq(h_redis_int(&d, "LLEN " READY), 2);
	h_stop(&d);
}

/* Keys of ferry's own ("<cache space><16 hex>.<n>") are counted by
 * group, one entry "JOBS N BYTES LOST" (src/redis/lua/common.lua): a call's
 * keys cost one field, not one each. Such a key is its job's alone: no
 * other job of the call may write it, no job may name it (-K). */
Test(enqueue_script, own_keys_are_counted_by_group)
{
#define G CACHE "0123456789abcdef"
	const char *argv[] = { FIXED_KEYS, G ".0", G ".1", G ".7", "0", "0",
	    "0", "{\"id\":1,\"cache_key\":\"" G ".0\"}", "3", "[1]", "",
	    "{\"id\":1,\"cache_key\":\"" G ".1\"}", "4", "[2]", "",
	    "{\"id\":2,\"cache_key\":\"" G ".7\"}", "5", "[3]", "" };
	size_t n = sizeof(argv) / sizeof(*argv);
	/* its value with its job's mark (SHA-1 and ':'), its name, 64 */
	long long per_key = 41 + 3 + (long long)strlen(G ".0") + 64;

	h_setup_redis(&d, NULL, "[queue q]\nworkers = 0\n", NULL);
	redisReply *r = queue_script(d.rc, LUA_ENQUEUE, 5, (int)n, argv, NULL);
	cr_assert_eq(r->type, REDIS_REPLY_ARRAY, "%s", r->str);
	cr_assert_eq(r->element[0]->integer, 3);
	freeReplyObject(r);
	cr_assert_eq(h_redis_int(&d, "HLEN ferry:{q}:protected"), 1);
	r = h_redis(&d, "HGET ferry:{q}:protected " G);
	char want[64];
	snprintf(want, sizeof(want), "3 8 %lld 0", 3 * per_key);
	cr_assert_str_eq(r->str, want);
	freeReplyObject(r);
	cr_assert_eq(h_redis_int(&d, "PTTL " G ".7"), -1);
	/* its value starts with the mark of its job: the SHA-1 of the
	 * document and ':' (src/redis/cache.c reads it only for that job) */
	char mark[64], sha[41];
	job_sha1_hex(argv[16], strlen(argv[16]), sha);
	snprintf(mark, sizeof(mark), "%s:[3]", sha);
	r = h_redis(&d, "GET " G ".7");
	cr_assert_str_eq(r->str, mark);
	freeReplyObject(r);
	/* written only where no key is, or again by the same job (the same
	 * call sent again): a call naming a key another job wrote (as a
	 * forged call would, whatever its random part) is refused whole,
	 * the values left as they were */
	argv[16] = "{\"id\":2,\"v\":9,\"cache_key\":\"" G ".7\"}";
	r = queue_script(d.rc, LUA_ENQUEUE, 5, (int)n, argv, NULL);
	cr_assert_eq(r->type, REDIS_REPLY_ERROR);
	cr_assert(strstr(r->str, "INVALID 3 its cache key \"" G ".7\" exists "
	    "already, written for another job") != NULL, "%s", r->str);
	freeReplyObject(r);
	r = h_redis(&d, "GET " G ".7");
	cr_assert_str_eq(r->str, mark);
	freeReplyObject(r);
	cr_assert_eq(h_redis_int(&d, "LLEN " READY), 3);
	/* the same key written twice in one call */
#define H CACHE "fedcba9876543210"
	argv[2] = H ".0", argv[3] = H ".1", argv[4] = H ".0";
	argv[8] = "{\"id\":1,\"cache_key\":\"" H ".0\"}";
	argv[12] = "{\"id\":1,\"cache_key\":\"" H ".1\"}";
	argv[16] = "{\"id\":2,\"cache_key\":\"" H ".0\"}";
	r = queue_script(d.rc, LUA_ENQUEUE, 5, (int)n, argv, NULL);
	cr_assert_eq(r->type, REDIS_REPLY_ERROR);
	cr_assert(strstr(r->str, "INVALID 3 its cache key \"" H ".0\" is "
	    "written by another job of this call") != NULL, "%s", r->str);
	freeReplyObject(r);
	cr_assert_eq(h_redis_int(&d, "EXISTS " H ".0 " H ".1"), 0);
#undef H
	/* named by another job */
	const char *named[] = { FIXED_KEYS, G ".1", "0", "0", "0",
	    "{\"id\":3,\"cache_key\":\"" G ".1\"}", "-3", "", "" };
	r = queue_script(d.rc, LUA_ENQUEUE, 3,
	    (int)(sizeof(named) / sizeof(*named)), named, NULL);
	cr_assert_eq(r->type, REDIS_REPLY_ERROR);
	cr_assert(strstr(r->str, "INVALID 1 cache_key \"" G ".1\" is a key "
	    "of ferry's own") != NULL, "%s", r->str);
	freeReplyObject(r);
	cr_assert_eq(h_redis_int(&d, "LLEN " READY), 3);
	r = h_redis(&d, "HGET ferry:{q}:protected " G);
	cr_assert_str_eq(r->str, want);
	freeReplyObject(r);
	h_stop(&d);
#undef G
}

/* An application's key that a job names (-K) is protected as it is: its
 * TTL removed, counted once however many jobs name it. It must exist, and
 * lie in the queue's cache space or under a "prefix=" option; ferry's own
 * keys never. Without "checked", a document naming a key the caller did
 * not declare is refused (it would not be protected). */
Test(enqueue_script, application_keys_are_protected)
{
	const char *argv[] = { FIXED_KEYS, "app:c:1", "0", "0", "1",
	    "prefix=app:c:", "{\"id\":1,\"cache_key\":\"app:c:1\"}", "-3", "",
	    "", "{\"id\":2,\"cache_key\":\"app:c:1\"}", "-3", "", "" };
	size_t n = sizeof(argv) / sizeof(*argv);
	redisReply *r;

	h_setup_redis(&d, NULL, "[queue q]\nworkers = 0\n", NULL);
	/* not there yet: refused, nothing written */
	r = queue_script(d.rc, LUA_ENQUEUE, 3, (int)n, argv, NULL);
	cr_assert_eq(r->type, REDIS_REPLY_ERROR);
	cr_assert_str_eq(r->str, "INVALID 1 cache_key \"app:c:1\" does not "
	    "exist: write the key before the job that names it");
	freeReplyObject(r);
	freeReplyObject(h_redis(&d, "SET app:c:1 [{\"a\":1}] PX 60000"));
	/* outside the prefixes: refused */
	argv[6] = "prefix=other:";
	r = queue_script(d.rc, LUA_ENQUEUE, 3, (int)n, argv, NULL);
	cr_assert_eq(r->type, REDIS_REPLY_ERROR);
	cr_assert(strstr(r->str, "is outside the queue's cache space "
	    "ferry:{q}:cache: and cache_key_prefixes") != NULL, "%s", r->str);
	freeReplyObject(r);
	cr_assert_gt(h_redis_int(&d, "PTTL app:c:1"), 0);
	argv[6] = "prefix=app:c:";
	r = queue_script(d.rc, LUA_ENQUEUE, 3, (int)n, argv, NULL);
	cr_assert_eq(r->type, REDIS_REPLY_ARRAY, "%s", r->str);
	cr_assert_eq(r->element[0]->integer, 2);
	freeReplyObject(r);
	cr_assert_eq(h_redis_int(&d, "PTTL app:c:1"), -1);
	cr_assert_eq(h_redis_int(&d, "HGET ferry:{q}:protected app:c:1"), 2);
	/* ferry's own keys, whatever the prefixes */
	argv[2] = "ferry:{q}:stats";
	argv[6] = "prefix=ferry:";
	argv[7] = "{\"id\":1,\"cache_key\":\"ferry:{q}:stats\"}";
	r = queue_script(d.rc, LUA_ENQUEUE, 3, (int)n - 4, argv, NULL);
	cr_assert_eq(r->type, REDIS_REPLY_ERROR);
	cr_assert(strstr(r->str, "INVALID 1 cache_key \"ferry:{q}:stats\" is "
	    "outside") != NULL, "%s", r->str);
	freeReplyObject(r);
	/* a document naming a key the caller did not pass */
	const char *undeclared[] = { FIXED_KEYS, "0", "0", "0",
	    "{\"id\":1,\"cache_key\":\"ferry:{q}:stats\"}", "0", "", "" };
	r = queue_script(d.rc, LUA_ENQUEUE, 2, 9, undeclared, NULL);
	cr_assert_eq(r->type, REDIS_REPLY_ERROR);
	cr_assert(strstr(r->str, "INVALID 1 it names cache_key "
	    "\"ferry:{q}:stats\": the caller must pass that key") != NULL, "%s",
	    r->str);
	freeReplyObject(r);
	cr_assert_eq(h_redis_int(&d, "LLEN " READY), 2);
	h_stop(&d);
}

/* Above memory_refuse_percent: FULL, with ferryctl's words. */
Test(enqueue_script, refuses_above_memory_refuse_percent)
{
	static const char *const maxmem[] = { "--maxmemory", "20mb", NULL };
	const char *doc = "{\"a\":1}";
	size_t len = 7;

	h_setup_redis(&d, NULL, "[queue q]\nworkers = 0\n", maxmem);
	redisReply *r = enqueue_n(BIG, 1, 1, &doc, &len);
	cr_assert_eq(r->type, REDIS_REPLY_ERROR);
	int pct, limit;
	cr_assert_eq(sscanf(r->str, "FULL %d %d ", &pct, &limit), 2, "%s",
	    r->str);
	cr_assert_eq(limit, 1);
	cr_assert(strstr(r->str, "% full (maxmemory 20.0 MiB, noeviction), "
	    "queue q holds 0 B of it (its jobs and protected cache keys); "
	    "memory_refuse_percent 1: not enqueueing; drain the queue (is "
	    "ferryd running, its sink up?) or raise maxmemory") != NULL, "%s",
	    r->str);
	freeReplyObject(r);
	cr_assert_eq(h_redis_int(&d, "EXISTS " READY), 0);
	r = enqueue_n(BIG, 90, 1, &doc, &len);
	cr_assert_eq(r->type, REDIS_REPLY_ARRAY);
	freeReplyObject(r);
	cr_assert_eq(h_redis_int(&d, "LLEN " READY), 1);
	h_stop(&d);
}

/* memory.lua: {used, max, policy, keys, volatile, unevictable, own, own
 * keys, evicted_keys, info, refusal}. */
static redisReply *
memory_lua(int refuse_pct)
{
	char pct[16];
	const char *argv[] = { READY, pct };

	snprintf(pct, sizeof(pct), "%d", refuse_pct);
	redisReply *r = queue_script(d.rc, LUA_MEMORY, 1, 2, argv, NULL);
	cr_assert_not_null(r);
	cr_assert_eq(r->type, REDIS_REPLY_ARRAY, "%s", r->str);
	cr_assert_eq(r->elements, 13);
	return r;
}

/* C (memory_unevictable) and Lua (memory_view) reach the same figure from
 * the same INFO text. */
static void
agree_on_memory(void)
{
	redisReply *r = memory_lua(90);
	struct redis_memory m;

	memory_init(&m);
	memory_parse_info(&m, r->element[9]->str);
	cr_assert_eq(m.used, r->element[0]->integer);
	cr_assert_eq(m.max, r->element[1]->integer);
	cr_assert_str_eq(m.policy, r->element[2]->str);
	cr_assert_eq(m.keys, r->element[3]->integer);
	cr_assert_eq(m.volatile_keys, r->element[4]->integer);
	cr_assert_eq(memory_unevictable(&m, r->element[6]->integer,
	    r->element[7]->integer), r->element[5]->integer,
	    "C and memory.lua disagree on %s", r->element[9]->str);
	freeReplyObject(r);
}

/* Under volatile-lru an application's cache keeps Redis at maxmemory:
 * that alone refuses no producer (Redis evicts the cache to make room);
 * a backlog that Redis cannot evict does, named in the refusal, and the
 * refusal lifts as soon as the backlog is gone. C and Lua agree on the
 * figure at every step. */
Test(enqueue_script, a_full_cache_refuses_nobody_a_backlog_does)
{
	static const char *const redis_args[] = { "--maxmemory", "8mb",
	    "--maxmemory-policy", "volatile-lru", NULL };
	const char *doc = "{\"a\":1}";
	size_t len = 7;
	char *value = malloc(8192);

	memset(value, 'v', 8191);
	value[8191] = '\0';
	h_setup_redis(&d, NULL, "[queue q]\nworkers = 0\n", redis_args);
	agree_on_memory();
	/* the cache: 3,000 keys of 8 KB with a TTL into 8 MB */
	for (int i = 0; i < 3000; i++)
		freeReplyObject(h_redis(&d, "SET app:cache:%d %s PX 600000", i,
		    value));
	redisReply *info = h_redis(&d, "INFO stats");
	cr_assert(strstr(info->str, "evicted_keys:0\r\n") == NULL,
	    "the cache did not fill Redis: %s", info->str);
	freeReplyObject(info);
	agree_on_memory();
	redisReply *r = enqueue_n(BIG, 90, 1, &doc, &len);
	cr_assert_eq(r->type, REDIS_REPLY_ARRAY, "refused with the cache "
	    "full: %s", r->str);
	freeReplyObject(r);
	/* a backlog of 6 MB that nothing evicts */
	for (int i = 0; i < 6; i++) {
		redisReply *p = h_redis(&d, "EVAL %s 1 %s", "for i = 1, 1000 do "
		    "redis.call('LPUSH', KEYS[1], string.rep('j', 1000)) end",
		    READY);
		freeReplyObject(p);
	}
	agree_on_memory();
	r = enqueue_n(BIG, 60, 1, &doc, &len);
	cr_assert_eq(r->type, REDIS_REPLY_ERROR);
	cr_assert(strstr(r->str, "what redis cannot evict is ") != NULL &&
	    strstr(r->str, "(volatile-lru evicts only keys with a TTL), queue "
	    "q holds ") != NULL && strstr(r->str, "memory_refuse_percent 60: "
	    "not enqueueing") != NULL, "%s", r->str);
	freeReplyObject(r);
	r = memory_lua(60);
	cr_assert_gt(r->element[6]->integer, 6000000, "own bytes %lld",
	    r->element[6]->integer);
	cr_assert_gt(r->element[10]->len, 0);
	freeReplyObject(r);
	/* drained: accepted at once */
	freeReplyObject(h_redis(&d, "DEL " READY));
	agree_on_memory();
	r = enqueue_n(BIG, 60, 1, &doc, &len);
	cr_assert_eq(r->type, REDIS_REPLY_ARRAY, "%s", r->str);
	freeReplyObject(r);
	free(value);
	h_stop(&d);
}
