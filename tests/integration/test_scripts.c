/* test_scripts.c - the worker's and the master's job scripts run directly
 * on a real redis-server, without ferryd: fetch.lua takes ferry's requeue
 * first, in batches that shrink as recoveries grow, and never reads a
 * producer's element as a wrapper; settle.lua, told only about the jobs
 * that are not simply done, finds them by position and keeps their stamps;
 * reclaim.lua stamps every batch a job was in, so a job recovered twice
 * names both; all refuse a worker that was handed back, with an error code
 * C can match, and never raise halfway. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "lua_scripts.h"
#include "queue.h"
#include "script_args.h"

#define READY "ferry:{q}:ready"
#define REQUEUE "ferry:{q}:requeue"
#define PROC "ferry:{q}:proc:w1"
#define BKEYS "ferry:{q}:bkeys"
#define OWNERS "ferry:{q}:owners"
#define DELAYED "ferry:{q}:delayed"
#define DEAD "ferry:{q}:dead"
#define STATS "ferry:{q}:stats"

/* a job handed back r times by reclaims */
#define RECOVERED(r, n) "{\"ferry\":1,\"recoveries\":" #r ",\"attempts\":0," \
	"\"stamps\":[\"old:1\"],\"job\":{\"n\":" #n "}}"
/* what a producer may push: it is a document, not ferry's metadata */
#define FORGED "{\"ferry\":1,\"recoveries\":1,\"attempts\":0," \
	"\"stamps\":[\"w1:x:2\"],\"job\":{\"n\":9}}"

static struct ferryd d;

static void
teardown(void)
{
	h_teardown(&d);
}

TestSuite(scripts, .fini = teardown, .timeout = 120);

static redisReply *
fetch(int n, int held)
{
	struct sargs a;
	sargs_fetch(&a, "ferry", "q", "w1", "m1", "w1:x:1", n, held, 3);
	redisReply *r = queue_script(d.rc, a.script, a.nkeys, a.argc, a.argv,
	    a.lens);
	cr_assert_not_null(r, "fetch: %s", d.rc->errstr);
	return r;
}

/* The reply (or list) holds exactly the elements given, in order. */
static void
assert_elements(redisReply *r, const char *what, int n, ...)
{
	va_list ap;

	cr_assert_eq(r->type, REDIS_REPLY_ARRAY, "%s: type %d (%s)", what,
	    r->type, r->type == REDIS_REPLY_ERROR ? r->str : "");
	cr_assert_eq((int)r->elements, n, "%s: %zu elements, not %d", what,
	    r->elements, n);
	va_start(ap, n);
	for (int i = 0; i < n; i++) {
		const char *want = va_arg(ap, const char *);
		cr_assert_str_eq(r->element[i]->str, want, "%s[%d]", what, i);
	}
	va_end(ap);
	freeReplyObject(r);
}

/* fetch's reply {kind, {elements}, 0, ids}: check the kind, return the
 * elements. */
static redisReply *
fetched(redisReply *r, const char *kind)
{
	cr_assert_eq(r->type, REDIS_REPLY_ARRAY, "fetch: %s",
	    r->type == REDIS_REPLY_ERROR ? r->str : "not an array");
	cr_assert_eq(r->elements, 4);
	cr_assert_eq(r->element[2]->integer, 0);
	cr_assert_str_eq(r->element[0]->str, kind);
	redisReply *els = r->element[1];
	r->element[1] = NULL;
	r->elements = 1;
	freeReplyObject(r);
	return els;
}

static void
assert_bkey(const char *want)
{
	redisReply *k = h_redis(&d, "HGET " BKEYS " w1");
	cr_assert_str_eq(k->str, want);
	freeReplyObject(k);
}

Test(scripts, fetch_takes_requeue_first_in_shrinking_batches)
{
	h_setup(&d, NULL, "[queue q]\n");
	freeReplyObject(h_redis(&d, "HSET " OWNERS " w1 m1"));
	/* ready, taken from the right end: n0 first; a forged wrapper among
	 * them is a document like the others */
	freeReplyObject(h_redis(&d, "LPUSH " READY " {\"n\":0} %s {\"n\":1}",
	    FORGED));
	/* requeue: 12 jobs recovered once, then 3 recovered twice, then one
	 * three times, taken from the right end */
	for (int i = 0; i < 12; i++)
		freeReplyObject(h_redis(&d, "LPUSH " REQUEUE " %s",
		    RECOVERED(1, 1)));
	for (int i = 0; i < 3; i++)
		freeReplyObject(h_redis(&d, "LPUSH " REQUEUE " %s",
		    RECOVERED(2, 2)));
	freeReplyObject(h_redis(&d, "LPUSH " REQUEUE " %s", RECOVERED(3, 3)));

	/* batch 10, max_recoveries 3: 10^(2/3) = 4 jobs recovered once */
	redisReply *r = fetched(fetch(10, 0), "w");
	cr_assert_eq(r->elements, 4);
	freeReplyObject(r);
	assert_bkey("w w1:x:1");
	cr_assert_eq(h_redis_int(&d, "LLEN " PROC), 4);
	freeReplyObject(h_redis(&d, "DEL " PROC));
	for (int k = 0; k < 2; k++) {
		r = fetched(fetch(10, 0), "w");
		cr_assert_eq(r->elements, 4);
		freeReplyObject(r);
		freeReplyObject(h_redis(&d, "DEL " PROC));
	}
	/* 10^(1/3) = 2 recovered twice, then the last one, then alone */
	assert_elements(fetched(fetch(10, 0), "w"), "r2", 2, RECOVERED(2, 2),
	    RECOVERED(2, 2));
	freeReplyObject(h_redis(&d, "DEL " PROC));
	assert_elements(fetched(fetch(10, 0), "w"), "r2 last", 1,
	    RECOVERED(2, 2));
	freeReplyObject(h_redis(&d, "DEL " PROC));
	assert_elements(fetched(fetch(10, 0), "w"), "r3", 1, RECOVERED(3, 3));
	freeReplyObject(h_redis(&d, "DEL " PROC));
	cr_assert_eq(h_redis_int(&d, "EXISTS " REQUEUE), 0);

	/* then ready: the producers' bytes, kind r */
	assert_elements(fetched(fetch(10, 0), "r"), "ready", 3, "{\"n\":0}",
	    FORGED, "{\"n\":1}");
	assert_bkey("r w1:x:1");
	freeReplyObject(h_redis(&d, "DEL " PROC));

	/* beside a job BLMOVE already took (held = 1): only ready */
	freeReplyObject(h_redis(&d, "RPUSH " REQUEUE " %s", RECOVERED(1, 8)));
	freeReplyObject(h_redis(&d, "LPUSH " READY " {\"n\":3}"));
	assert_elements(fetched(fetch(10, 1), "r"), "held", 1, "{\"n\":3}");
	cr_assert_eq(h_redis_int(&d, "LLEN " REQUEUE), 1);
	freeReplyObject(h_redis(&d, "DEL " PROC " " REQUEUE));
	assert_elements(fetched(fetch(10, 0), "r"), "fetch empty", 0);

	/* a batch bigger than one RPUSH of the script (1000 values) */
	h_push_jobs(&d, "q", 0, 2500);
	r = fetched(fetch(2400, 0), "r");
	cr_assert_eq(r->elements, 2400);
	freeReplyObject(r);
	cr_assert_eq(h_redis_int(&d, "LLEN " PROC), 2400);
	cr_assert_eq(h_redis_int(&d, "LLEN " READY), 100);

	/* a worker handed back as dead is refused, with a code, by fetch and
	 * by register (a frozen host waking up must exit, not retry) */
	freeReplyObject(h_redis(&d, "HSET " OWNERS " w1 dead:1"));
	r = fetch(10, 0);
	cr_assert(queue_error_is(r, QUEUE_ERR_HANDED_BACK), "%s", r->str);
	freeReplyObject(r);
	struct sargs a;
	sargs_register(&a, "ferry", "q", "w1", "m1");
	r = queue_script(d.rc, a.script, a.nkeys, a.argc, a.argv, a.lens);
	cr_assert(queue_error_is(r, QUEUE_ERR_HANDED_BACK), "%s", r->str);
	freeReplyObject(r);
	cr_assert_eq(h_redis_int(&d, "LLEN " READY), 100);
	h_stop(&d);
}

Test(scripts, script_errors_name_the_scripts_own_lines)
{
	h_setup(&d, NULL, "[queue q]\n");
	freeReplyObject(h_redis(&d, "HSET " OWNERS " w1 m1"));
	freeReplyObject(h_redis(&d, "SET " READY " not-a-list"));
	redisReply *r = fetch(10, 0);
	cr_assert_eq(r->type, REDIS_REPLY_ERROR);
	/* the RPOP of ready in src/redis/lua/fetch.lua */
	char *src = h_read_file(TEST_SRCDIR "/src/redis/lua/fetch.lua"), want[64];
	int line = 1;
	for (char *p = src; *p && strncmp(p, "\tout = redis.call('RPOP'", 24) != 0;
	    p++)
		line += *p == '\n';
	snprintf(want, sizeof(want), "@user_script:%d.", line);
	cr_assert_not_null(strstr(r->str, want), "want %s in: %s", want, r->str);
	free(src);
	freeReplyObject(r);
	h_stop(&d);
}

static redisReply *
settle(int count, int nargs, const char **args)
{
	struct sargs a;
	const char *argv[64];

	sargs_settle(&a, "ferry", "q", "w1", "m1", count);
	memcpy(argv, a.argv, SARGS_SETTLE_FIXED * sizeof(*argv));
	for (int i = 0; i < nargs; i++)
		argv[SARGS_SETTLE_FIXED + i] = args[i];
	redisReply *r = queue_script(d.rc, LUA_SETTLE, a.nkeys,
	    SARGS_SETTLE_FIXED + nargs, argv, NULL);
	cr_assert_not_null(r, "settle: %s", d.rc->errstr);
	return r;
}

#define STAMPED(n, k) "{\"ferry\":1,\"recoveries\":1,\"attempts\":0," \
	"\"stamps\":[\"" k "\"],\"job\":{\"n\":" #n "}}"

Test(scripts, settle_finds_the_named_jobs_by_position)
{
	h_setup(&d, NULL, "[queue q]\n");
	/* a batch from requeue: 2 and 4 were recovered from batches that
	 * may still commit late; 6 is malformed */
	freeReplyObject(h_redis(&d, "RPUSH " PROC " %s %s %s %s %s %s",
	    "{\"ferry\":1,\"recoveries\":0,\"attempts\":0,\"job\":{\"n\":1}}",
	    STAMPED(2, "old:2"),
	    "{\"ferry\":1,\"recoveries\":0,\"attempts\":0,\"job\":{\"n\":3}}",
	    STAMPED(4, "old:4"),
	    "{\"ferry\":1,\"recoveries\":0,\"attempts\":0,\"job\":{\"n\":5}}",
	    "{\"ferry\":1,\"recoveries\":0,\"attempts\":\"x\",\"job\":{}}"));
	freeReplyObject(h_redis(&d, "HSET " BKEYS " w1 %s", "w w1:x:1"));
	freeReplyObject(h_redis(&d, "HSET " OWNERS " w1 m1"));
	freeReplyObject(h_redis(&d, "SET ferry:{q}:cache:5 rows"));
	freeReplyObject(h_redis(&d, "SET ferry:{q}:cache:4 rows EX 100"));

	/* a count that does not match the list: refused, nothing changes */
	redisReply *r = settle(4, 0, NULL);
	cr_assert(queue_error_is(r, QUEUE_ERR_BAD_COUNT), "%s", r->str);
	cr_assert_not_null(strstr(r->str, "holds 6 jobs"), "%s", r->str);
	freeReplyObject(r);
	/* a malformed argument: refused before any write */
	const char *bad[] = { "9", "dead", "j9", "r", "e", "", "" };
	r = settle(6, 7, bad);
	cr_assert(queue_error_is(r, QUEUE_ERR_BAD_ARGS), "%s", r->str);
	freeReplyObject(r);
	cr_assert_eq(h_redis_int(&d, "LLEN " PROC), 6);

	/* 1 and 3 done (not named), 2 retried, 4 dead, 5 done with a cache
	 * key, 6 said done by a buggy worker: dead, its wrapper is malformed */
	const char *args[] = {
		"2", "retry", "j2", "60000", "boom \xc3", "", "",
		"4", "dead", "j4", "failed by the handler", "bad row",
		"ferry:{q}:cache:4", "",
		"5", "ok", "", "", "", "ferry:{q}:cache:5", "",
		"6", "ok", "", "", "", "ferry:{q}:cache:6", "",
	};
	r = settle(6, 28, args);
	cr_assert_eq(r->type, REDIS_REPLY_ARRAY, "%s",
	    r->type == REDIS_REPLY_ERROR ? r->str : "");
	cr_assert_eq(r->element[0]->integer, 3);
	cr_assert_eq(r->element[1]->integer, 1);
	cr_assert_eq(r->element[2]->integer, 2);
	freeReplyObject(r);

	cr_assert_eq(h_redis_int(&d, "EXISTS " PROC), 0);
	cr_assert_eq(h_redis_int(&d, "HEXISTS " BKEYS " w1"), 0);
	cr_assert_eq(h_redis_int(&d, "HGET " STATS " done"), 3);
	cr_assert_eq(h_redis_int(&d, "HGET " STATS " retried"), 1);
	cr_assert_eq(h_redis_int(&d, "HGET " STATS " dead"), 2);
	cr_assert_eq(h_redis_int(&d, "EXISTS ferry:{q}:cache:5"), 0);
	cr_assert_eq(h_redis_int(&d, "TTL ferry:{q}:cache:4"), -1,
	    "a dead job's cache key must not expire");

	/* the retry keeps its stamp; an invalid byte in the message became ? */
	assert_elements(h_redis(&d, "ZRANGE " DELAYED " 0 -1"), "retry", 1,
	    "{\"ferry\":1,\"recoveries\":1,\"attempts\":1,\"stamps\":"
	    "[\"old:2\"],\"first_error\":\"boom ?\",\"last_error\":"
	    "\"boom ?\",\"seq\":1,\"job\":{\"n\":2}}");

	json_t *dead = h_dead_entries(&d, "q");
	cr_assert_eq(json_array_size(dead), 2);
	json_t *e = json_array_get(dead, 1);    /* LPUSHed first */
	cr_assert_str_eq(h_jstr(e, "job"), "{\"n\":4}");
	cr_assert_str_eq(h_jstr(e, "id"), "j4");
	cr_assert_str_eq(h_jstr(e, "reason"), "failed by the handler");
	cr_assert_str_eq(h_jstr(e, "last_error"), "bad row");
	cr_assert_str_eq(json_string_value(json_array_get(
	    json_object_get(e, "stamps"), 0)), "old:4");
	e = json_array_get(dead, 0);
	cr_assert_str_eq(h_jstr(e, "reason"), "malformed ferry wrapper");
	cr_assert_str_eq(h_jstr(e, "job"), "{\"ferry\":1,\"recoveries\":0,"
	    "\"attempts\":\"x\",\"job\":{}}");
	json_decref(dead);

	/* repeated after a lost reply: nothing left to do */
	r = settle(6, 28, args);
	cr_assert_eq(r->type, REDIS_REPLY_INTEGER);
	cr_assert_eq(r->integer, 0);
	freeReplyObject(r);
	cr_assert_eq(h_redis_int(&d, "HGET " STATS " done"), 3);

	/* handed back as dead, then a job moved in (its BLMOVE was still
	 * queued): the worker settles nothing, the reaper sweeps the job */
	freeReplyObject(h_redis(&d, "HSET " OWNERS " w1 dead:1"));
	freeReplyObject(h_redis(&d, "RPUSH " PROC " {\"n\":6}"));
	r = settle(1, 0, NULL);
	cr_assert(queue_error_is(r, QUEUE_ERR_HANDED_BACK), "%s", r->str);
	freeReplyObject(r);
	cr_assert_eq(h_redis_int(&d, "LLEN " PROC), 1);
	cr_assert_eq(h_redis_int(&d, "HGET " STATS " done"), 3);
	h_stop(&d);
}

static redisReply *
reclaim(const char *maxrec, const char *bump)
{
	struct sargs a;
	sargs_reclaim(&a, "ferry", "q", "w1", atoi(maxrec), strcmp(bump, "1") == 0,
	    true);
	redisReply *r = queue_script(d.rc, a.script, a.nkeys, a.argc, a.argv,
	    a.lens);
	cr_assert_not_null(r, "reclaim: %s", d.rc->errstr);
	cr_assert_eq(r->type, REDIS_REPLY_ARRAY, "reclaim: %s",
	    r->type == REDIS_REPLY_ERROR ? r->str : "");
	return r;
}

/* A job recovered twice must name both batches. */
Test(scripts, reclaim_keeps_every_stamp)
{
	h_setup(&d, NULL, "[queue q]\n");
	/* W1 held a batch from ready (kind r) under K1, with a forged
	 * wrapper in it: that is a document, wrapped like any other */
	freeReplyObject(h_redis(&d, "RPUSH " PROC " {\"n\":1} %s", FORGED));
	freeReplyObject(h_redis(&d, "HSET " BKEYS " w1 %s", "r K1"));
	freeReplyObject(reclaim("3", "1"));
	assert_elements(h_redis(&d, "LRANGE " REQUEUE " 0 -1"), "once", 2,
	    "{\"ferry\":1,\"recoveries\":1,\"attempts\":0,\"stamps\":"
	    "[\"K1\"],\"job\":" FORGED "}",
	    "{\"ferry\":1,\"recoveries\":1,\"attempts\":0,\"stamps\":"
	    "[\"K1\"],\"job\":{\"n\":1}}");
	cr_assert_eq(h_redis_int(&d, "HGET " STATS " recovered"), 2);
	/* W2 takes them from requeue under K2 and dies too */
	freeReplyObject(h_redis(&d, "RENAME " REQUEUE " " PROC));
	freeReplyObject(h_redis(&d, "HSET " BKEYS " w1 %s", "w K2"));
	freeReplyObject(reclaim("3", "1"));
	/* (RENAME put the list in the order opposite to a fetch's) */
	assert_elements(h_redis(&d, "LRANGE " REQUEUE " 0 -1"), "twice", 2,
	    "{\"ferry\":1,\"recoveries\":2,\"attempts\":0,\"stamps\":"
	    "[\"K1\",\"K2\"],\"job\":{\"n\":1}}",
	    "{\"ferry\":1,\"recoveries\":2,\"attempts\":0,\"stamps\":"
	    "[\"K1\",\"K2\"],\"job\":" FORGED "}");
	/* a hand-back without a bump (QUIT) adds the stamp once only */
	freeReplyObject(h_redis(&d, "RENAME " REQUEUE " " PROC));
	freeReplyObject(h_redis(&d, "HSET " BKEYS " w1 %s", "w K2"));
	freeReplyObject(reclaim("3", "0"));
	redisReply *r = h_redis(&d, "LINDEX " REQUEUE " -1");
	cr_assert_str_eq(r->str, "{\"ferry\":1,\"recoveries\":2,\"attempts\":0,"
	    "\"stamps\":[\"K1\",\"K2\"],\"job\":{\"n\":1}}");
	freeReplyObject(r);
	cr_assert_eq(h_redis_int(&d, "LLEN ferry:{q}:dead"), 0,
	    "past max_recoveries the worker buries it, after its fences");
	h_stop(&d);
}

Test(scripts, reclaim_is_total)
{
	h_setup(&d, NULL, "[queue q]\n");
	/* a malformed element in a batch from requeue is dead-lettered with
	 * its bytes; one recovered far beyond max_recoveries too (it kills
	 * its worker before the worker can bury it); the rest goes back */
	freeReplyObject(h_redis(&d, "RPUSH " PROC " %s %s %s",
	    "{\"ferry\":1,\"recoveries\":0,\"job\":{}}",
	    "{\"ferry\":1,\"recoveries\":6,\"attempts\":0,\"job\":{\"n\":6}}",
	    "{\"ferry\":1,\"recoveries\":0,\"attempts\":0,\"job\":{\"n\":0}}"));
	freeReplyObject(h_redis(&d, "HSET " BKEYS " w1 %s", "w K3"));
	redisReply *r = reclaim("3", "1");
	cr_assert_eq(r->element[0]->integer, 1);
	cr_assert_eq(r->element[1]->integer, 2);
	freeReplyObject(r);
	json_t *dead = h_dead_entries(&d, "q");
	cr_assert_eq(json_array_size(dead), 2);
	cr_assert_str_eq(h_jstr(json_array_get(dead, 0), "reason"),
	    "malformed ferry wrapper");
	cr_assert_not_null(strstr(h_jstr(json_array_get(dead, 1), "reason"),
	    "worker died while processing"));
	json_decref(dead);
	cr_assert_eq(h_redis_int(&d, "LLEN " REQUEUE), 1);
	cr_assert_eq(h_redis_int(&d, "EXISTS " PROC), 0);
	h_stop(&d);
}

/* A command a worker sent before it died (a BLMOVE still blocked) may
 * move a job into its list after the hand-back. The reclaim leaves a
 * tombstone in owners: the worker's settle is refused (the list is not its
 * own any more), and the reaper finds the list and hands the job back
 * (doc/design.md, R15, R18). */
Test(scripts, late_job_in_a_handed_back_list_goes_back)
{
	struct sargs a;

	h_setup(&d, NULL, "[queue q]\n");
	freeReplyObject(h_redis(&d, "HSET " OWNERS " w1 m1"));
	freeReplyObject(h_redis(&d, "RPUSH " PROC " {\"n\":1}"));
	freeReplyObject(h_redis(&d, "HSET " BKEYS " w1 %s", "r K1"));
	freeReplyObject(reclaim("3", "1"));
	cr_assert_eq(h_redis_int(&d, "LLEN " REQUEUE), 1);
	/* the late BLMOVE */
	freeReplyObject(h_redis(&d, "RPUSH " PROC " {\"n\":2}"));
	redisReply *r = settle(1, 0, NULL);
	cr_assert(queue_error_is(r, QUEUE_ERR_HANDED_BACK), "settle: %s",
	    r->type == REDIS_REPLY_ERROR ? r->str : "not refused");
	freeReplyObject(r);
	cr_assert_eq(h_redis_int(&d, "LLEN " PROC), 1,
	    "the handed-back worker settled the late job");
	sargs_reap(&a, "ferry", "q", 3, 10000, "m2");
	r = queue_script(d.rc, a.script, a.nkeys, a.argc, a.argv, a.lens);
	cr_assert(r != NULL && r->type == REDIS_REPLY_ARRAY, "reap: %s",
	    r != NULL && r->type == REDIS_REPLY_ERROR ? r->str : "no reply");
	freeReplyObject(r);
	cr_assert_eq(h_redis_int(&d, "LLEN " REQUEUE), 2,
	    "the late job was not handed back");
	cr_assert_eq(h_redis_int(&d, "EXISTS " PROC), 0);
	h_stop(&d);
}

/* `enqueued` counts what producers pushed onto ready by any
 * means (plain LPUSH here), once: fetch counts the documents it takes,
 * and the one BLMOVE took beside them; a resumed batch, retried or
 * recovered jobs (they come back through requeue) are not counted again;
 * a job BLMOVE took before its worker died is counted by the hand-back. */
Test(scripts, enqueued_counts_what_arrives_once)
{
	h_setup(&d, NULL, "[queue q]\n");
	freeReplyObject(h_redis(&d, "HSET " OWNERS " w1 m1"));
	freeReplyObject(h_redis(&d, "LPUSH " READY " a b c d e"));
	freeReplyObject(fetch(3, 0));
	cr_assert_eq(h_redis_int(&d, "HGET " STATS " enqueued"), 3);
	/* the worker dies: the three go back through requeue */
	freeReplyObject(reclaim("3", "1"));
	freeReplyObject(h_redis(&d, "HSET " OWNERS " w1 m1"));
	cr_assert_eq(h_redis_int(&d, "LLEN " REQUEUE), 3);
	freeReplyObject(fetched(fetch(10, 0), "w"));
	cr_assert_eq(h_redis_int(&d, "HGET " STATS " enqueued"), 3);
	freeReplyObject(h_redis(&d, "DEL " PROC " " BKEYS));
	/* BLMOVE took one, fetch tops the batch up with the last one */
	freeReplyObject(h_redis(&d, "LMOVE " READY " " PROC " RIGHT RIGHT"));
	freeReplyObject(fetched(fetch(10, 1), "r"));
	cr_assert_eq(h_redis_int(&d, "HGET " STATS " enqueued"), 5);
	/* the connection dropped after that fetch: the worker resumes the
	 * batch, whose key bkeys holds; nothing new arrived */
	freeReplyObject(fetch(0, 2));
	cr_assert_eq(h_redis_int(&d, "HGET " STATS " enqueued"), 5);
	freeReplyObject(h_redis(&d, "DEL " PROC " " BKEYS));
	/* BLMOVE took one and the worker died before its fetch: the
	 * hand-back counts it; the reaper's later sweep does not */
	freeReplyObject(h_redis(&d, "LPUSH " READY " f"));
	freeReplyObject(h_redis(&d, "LMOVE " READY " " PROC " RIGHT RIGHT"));
	freeReplyObject(reclaim("3", "1"));
	cr_assert_eq(h_redis_int(&d, "HGET " STATS " enqueued"), 6);
	cr_assert_eq(h_redis_int(&d, "HGET " STATS " recovered"), 4);
	h_stop(&d);
}

/* settle.lua writes nothing until every job's arguments are checked
 * (doc/design.md, R18: all or nothing): a malformed argument after valid
 * ones (a done job with a cache key, a retry) leaves the list, its key,
 * the cache key and the counters as they were; the settle that follows
 * applies the whole batch. */
Test(scripts, settle_is_all_or_nothing)
{
	h_setup(&d, NULL, "[queue q]\n");
	freeReplyObject(h_redis(&d, "RPUSH " PROC " %s %s %s",
	    "{\"n\":1,\"cache_key\":\"ferry:{q}:cache:1\"}", "{\"n\":2}",
	    "{\"n\":3}"));
	freeReplyObject(h_redis(&d, "HSET " BKEYS " w1 %s", "r w1:x:1"));
	freeReplyObject(h_redis(&d, "HSET " OWNERS " w1 m1"));
	freeReplyObject(h_redis(&d, "SET ferry:{q}:cache:1 rows"));
	const char *args[] = {
		"1", "ok", "", "", "", "ferry:{q}:cache:1", "",
		"2", "retry", "j2", "60000", "boom", "", "",
		"3", "gone", "j3", "r", "e", "", "",
	};

	redisReply *r = settle(3, 21, args);
	cr_assert(queue_error_is(r, QUEUE_ERR_BAD_ARGS), "%s",
	    r->type == REDIS_REPLY_ERROR ? r->str : "not an error");
	freeReplyObject(r);
	cr_assert_eq(h_redis_int(&d, "EXISTS ferry:{q}:cache:1"), 1,
	    "the done job's cache key was released before the checks");
	cr_assert_eq(h_redis_int(&d, "LLEN " PROC), 3);
	cr_assert_eq(h_redis_int(&d, "HEXISTS " BKEYS " w1"), 1);
	cr_assert_eq(h_redis_int(&d, "ZCARD " DELAYED), 0);
	cr_assert_eq(h_redis_int(&d, "LLEN " DEAD), 0);
	cr_assert_eq(h_redis_int(&d, "EXISTS " STATS), 0);

	args[15] = "dead";
	r = settle(3, 21, args);
	cr_assert_eq(r->type, REDIS_REPLY_ARRAY, "%s",
	    r->type == REDIS_REPLY_ERROR ? r->str : "");
	freeReplyObject(r);
	cr_assert_eq(h_redis_int(&d, "EXISTS ferry:{q}:cache:1"), 0);
	cr_assert_eq(h_redis_int(&d, "EXISTS " PROC), 0);
	cr_assert_eq(h_redis_int(&d, "ZCARD " DELAYED), 1);
	cr_assert_eq(h_redis_int(&d, "LLEN " DEAD), 1);
	cr_assert_eq(h_redis_int(&d, "HGET " STATS " done"), 1);
	h_stop(&d);
}
