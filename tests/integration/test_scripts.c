/* test_scripts.c - the worker's two Lua scripts run directly on a real
 * redis-server, without ferryd: fetch.lua takes a batch with one RPOP but
 * still takes a recovered job alone, and settle.lua, which is told only
 * about the jobs that are not simply done, finds them by position; both
 * refuse a worker that was handed back as dead. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "lua_scripts.h"
#include "queue.h"

#define READY "ferry:{q}:ready"
#define PROC "ferry:{q}:proc:w1"
#define BKEYS "ferry:{q}:bkeys"
#define OWNERS "ferry:{q}:owners"
#define DELAYED "ferry:{q}:delayed"
#define DEAD "ferry:{q}:dead"
#define STATS "ferry:{q}:stats"

/* a job handed back by a reclaim: fetched alone */
#define RECOVERED(n) "{\"ferry\":1,\"recoveries\":1,\"attempts\":0," \
	"\"batch\":\"old:1\",\"job\":{\"n\":" #n "}}"

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
	char nbuf[16], hbuf[16];
	snprintf(nbuf, sizeof(nbuf), "%d", n);
	snprintf(hbuf, sizeof(hbuf), "%d", held);
	const char *argv[] = { READY, PROC, BKEYS, OWNERS, nbuf, "w1", "w1:x:1",
		hbuf, "m1" };
	redisReply *r = queue_script(d.rc, LUA_FETCH, 4, 9, argv, NULL);
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

Test(scripts, fetch_takes_a_batch_but_a_recovered_job_alone)
{
	h_setup(&d, NULL, "[queue q]\n");
	freeReplyObject(h_redis(&d, "HSET " OWNERS " w1 m1"));
	/* taken from the right end: n0 first */
	freeReplyObject(h_redis(&d, "LPUSH " READY " {\"n\":0} {\"n\":1} "
	    "{\"n\":2} %s {\"n\":3} {\"n\":4}", RECOVERED(7)));

	/* a batch stops before the recovered job, which stays next */
	assert_elements(fetch(10, 0), "fetch 1", 3, "{\"n\":0}", "{\"n\":1}",
	    "{\"n\":2}");
	assert_elements(h_redis(&d, "LRANGE " PROC " 0 -1"), "proc 1", 3,
	    "{\"n\":0}", "{\"n\":1}", "{\"n\":2}");
	assert_elements(h_redis(&d, "LRANGE " READY " 0 -1"), "ready 1", 3,
	    "{\"n\":4}", "{\"n\":3}", RECOVERED(7));
	redisReply *k = h_redis(&d, "HGET " BKEYS " w1");
	cr_assert_str_eq(k->str, "w1:x:1");
	freeReplyObject(k);

	/* the recovered job comes alone */
	freeReplyObject(h_redis(&d, "DEL " PROC));
	assert_elements(fetch(10, 0), "fetch 2", 1, RECOVERED(7));
	freeReplyObject(h_redis(&d, "DEL " PROC));

	/* not beside a job BLMOVE already took (held = 1) */
	freeReplyObject(h_redis(&d, "RPUSH " READY " %s", RECOVERED(8)));
	assert_elements(fetch(10, 1), "fetch held", 0);
	cr_assert_eq(h_redis_int(&d, "LLEN " READY), 3);
	assert_elements(fetch(10, 0), "fetch 3", 1, RECOVERED(8));
	freeReplyObject(h_redis(&d, "DEL " PROC));
	assert_elements(fetch(1, 0), "fetch 4", 1, "{\"n\":3}");
	assert_elements(fetch(10, 0), "fetch 5", 1, "{\"n\":4}");
	assert_elements(h_redis(&d, "LRANGE " PROC " 0 -1"), "proc 5", 2,
	    "{\"n\":3}", "{\"n\":4}");
	assert_elements(fetch(10, 0), "fetch empty", 0);

	/* a batch bigger than one RPUSH of the script (1000 values) */
	freeReplyObject(h_redis(&d, "DEL " PROC));
	h_push_jobs(&d, "q", 0, 2500);
	redisReply *r = fetch(2400, 0);
	cr_assert_eq(r->elements, 2400);
	freeReplyObject(r);
	cr_assert_eq(h_redis_int(&d, "LLEN " PROC), 2400);
	cr_assert_eq(h_redis_int(&d, "LLEN " READY), 100);

	/* a worker handed back as dead is refused */
	freeReplyObject(h_redis(&d, "HSET " OWNERS " w1 dead:1"));
	r = fetch(10, 0);
	cr_assert_eq(r->type, REDIS_REPLY_ERROR);
	cr_assert_not_null(strstr(r->str, "not registered"), "%s", r->str);
	freeReplyObject(r);
	cr_assert_eq(h_redis_int(&d, "LLEN " READY), 100);
}

static redisReply *
settle(int count, int nargs, const char **args)
{
	char cbuf[16];
	const char *argv[64] = { PROC, DELAYED, DEAD, STATS, BKEYS, OWNERS, "w1",
		"m1", cbuf };

	snprintf(cbuf, sizeof(cbuf), "%d", count);
	for (int i = 0; i < nargs; i++)
		argv[9 + i] = args[i];
	redisReply *r = queue_script(d.rc, LUA_SETTLE, 6, 9 + nargs, argv, NULL);
	cr_assert_not_null(r, "settle: %s", d.rc->errstr);
	return r;
}

Test(scripts, settle_finds_the_named_jobs_by_position)
{
	h_setup(&d, NULL, "[queue q]\n");
	/* 2 and 4 were recovered from batches that may still commit late */
	freeReplyObject(h_redis(&d, "RPUSH " PROC " {\"n\":1} %s {\"n\":3} %s "
	    "{\"n\":5}", "{\"ferry\":1,\"recoveries\":1,\"attempts\":0,"
	    "\"batch\":\"old:2\",\"job\":{\"n\":2}}", "{\"ferry\":1,"
	    "\"recoveries\":1,\"attempts\":0,\"batch\":\"old:4\",\"job\":"
	    "{\"n\":4}}"));
	freeReplyObject(h_redis(&d, "HSET " BKEYS " w1 w1:x:1"));
	freeReplyObject(h_redis(&d, "HSET " OWNERS " w1 m1"));
	freeReplyObject(h_redis(&d, "SET ferry:{q}:cache:5 rows"));
	freeReplyObject(h_redis(&d, "SET ferry:{q}:cache:4 rows EX 100"));

	/* a count that does not match the list: refused, nothing changes */
	redisReply *r = settle(4, 0, NULL);
	cr_assert_eq(r->type, REDIS_REPLY_ERROR);
	cr_assert_not_null(strstr(r->str, "holds 5 jobs"), "%s", r->str);
	freeReplyObject(r);
	cr_assert_eq(h_redis_int(&d, "LLEN " PROC), 5);

	/* 1 and 3 done (not named), 2 retried, 4 dead, 5 done with a cache key */
	const char *args[] = {
		"2", "retry", "j2", "60000", "boom", "",
		"4", "dead", "j4", "failed by the handler", "bad row",
		"ferry:{q}:cache:4",
		"5", "ok", "", "", "", "ferry:{q}:cache:5",
	};
	r = settle(5, 18, args);
	cr_assert_eq(r->type, REDIS_REPLY_ARRAY, "%s",
	    r->type == REDIS_REPLY_ERROR ? r->str : "");
	cr_assert_eq(r->element[0]->integer, 3);
	cr_assert_eq(r->element[1]->integer, 1);
	cr_assert_eq(r->element[2]->integer, 1);
	freeReplyObject(r);

	cr_assert_eq(h_redis_int(&d, "EXISTS " PROC), 0);
	cr_assert_eq(h_redis_int(&d, "HEXISTS " BKEYS " w1"), 0);
	cr_assert_eq(h_redis_int(&d, "HGET " STATS " done"), 3);
	cr_assert_eq(h_redis_int(&d, "HGET " STATS " retried"), 1);
	cr_assert_eq(h_redis_int(&d, "HGET " STATS " dead"), 1);
	cr_assert_eq(h_redis_int(&d, "EXISTS ferry:{q}:cache:5"), 0);
	cr_assert_eq(h_redis_int(&d, "TTL ferry:{q}:cache:4"), -1,
	    "a dead job's cache key must not expire");

	r = h_redis(&d, "ZRANGE " DELAYED " 0 -1");
	cr_assert_eq(r->elements, 1);
	cr_assert_not_null(strstr(r->element[0]->str, "\"attempts\":1"), "%s",
	    r->element[0]->str);
	cr_assert_not_null(strstr(r->element[0]->str, "\"last_error\":\"boom\""
	    ",\"seq\":1,\"job\":{\"n\":2}}"), "%s", r->element[0]->str);
	cr_assert_not_null(strstr(r->element[0]->str, "\"batch\":\"old:2\""),
	    "a retry keeps its batch stamp: %s", r->element[0]->str);
	freeReplyObject(r);

	json_t *dead = h_dead_entries(&d, "q");
	cr_assert_eq(json_array_size(dead), 1);
	json_t *e = json_array_get(dead, 0);
	cr_assert_str_eq(h_jstr(e, "job"),
	    "{\"n\":4}");
	cr_assert_str_eq(h_jstr(e, "id"), "j4");
	cr_assert_str_eq(h_jstr(e, "reason"),
	    "failed by the handler");
	cr_assert_str_eq(h_jstr(e, "last_error"),
	    "bad row");
	cr_assert_str_eq(h_jstr(e, "batch"),
	    "old:4");
	json_decref(dead);

	/* replayed: the job goes back stamped with its batch, fresh counters */
	redisReply *entry = h_redis(&d, "LINDEX " DEAD " 0");
	const char *dargv[] = { DEAD, READY, STATS, entry->str, "{\"n\":4}" };
	r = queue_script(d.rc, LUA_DEAD_RETRY, 3, 5, dargv, NULL);
	cr_assert_eq(r->type, REDIS_REPLY_INTEGER);
	cr_assert_eq(r->integer, 1);
	freeReplyObject(r);
	freeReplyObject(entry);
	assert_elements(h_redis(&d, "LRANGE " READY " 0 -1"), "replayed", 1,
	    "{\"ferry\":1,\"recoveries\":0,\"attempts\":0,\"batch\":"
	    "\"old:4\",\"job\":{\"n\":4}}");

	/* repeated after a lost reply: nothing left to do */
	r = settle(5, 18, args);
	cr_assert_eq(r->type, REDIS_REPLY_INTEGER);
	cr_assert_eq(r->integer, 0);
	freeReplyObject(r);
	cr_assert_eq(h_redis_int(&d, "HGET " STATS " done"), 3);

	/* handed back as dead, then a job moved in (its BLMOVE was still
	 * queued): the worker settles nothing, the reaper sweeps the job */
	freeReplyObject(h_redis(&d, "HSET " OWNERS " w1 dead:1"));
	freeReplyObject(h_redis(&d, "RPUSH " PROC " {\"n\":6}"));
	r = settle(1, 0, NULL);
	cr_assert_eq(r->type, REDIS_REPLY_ERROR);
	cr_assert_not_null(strstr(r->str, "is not registered"), "%s", r->str);
	freeReplyObject(r);
	cr_assert_eq(h_redis_int(&d, "LLEN " PROC), 1);
	cr_assert_eq(h_redis_int(&d, "HGET " STATS " done"), 3);
}
