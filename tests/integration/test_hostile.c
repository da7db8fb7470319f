/* test_hostile.c - what a producer can push onto `ready` cannot touch
 * ferry's own state, through a real
 * ferryd, redis-server and PostgreSQL: forged wrappers and forged batch
 * stamps are documents like any other, so they can neither make ferry ack
 * jobs it never wrote nor make a batch run forever; an oversized job is
 * dead-lettered byte for byte without being encoded inside Redis; a queue
 * key of the wrong type is logged once, not thousands of times. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static struct ferryd d;

static void
teardown(void)
{
	h_teardown(&d);
}

TestSuite(hostile, .fini = teardown, .timeout = 300);

static void
setup_pg(const char *queue_extra)
{
	char queues[512];

	snprintf(queues, sizeof(queues), "[queue q]\nhandler = postgres\n"
	    "table = events\ncolumns = n\n%s", queue_extra);
	h_setup_pg(&d, queues, "CREATE TABLE events (n bigint)",
	    (const char *)NULL);
}

/* A batch key a worker has used, from ferry_batches. */
static char *
some_batch_key(void)
{
	return h_pg_text(&d, "SELECT key FROM ferry_batches WHERE state = "
	    "'committed' ORDER BY created_at DESC LIMIT 1");
}

/* Forged stamps naming a worker's next batch keys must not make the sink
 * fence them, which would ack the worker's own jobs under those keys with
 * no row: a forged wrapper is the producer's document. */
Test(hostile, forged_stamps_cannot_ack_jobs_unwritten)
{
	setup_pg("workers = 1\nbatch_size = 1\n");
	h_start(&d, 1);
	freeReplyObject(h_redis(&d, "LPUSH ferry:{q}:ready {\"n\":0}"));
	h_wait_redis_int(&d, 1, "HGET ferry:{q}:stats done");
	char *key = some_batch_key(), prefix[256];
	cr_assert_not_null(key);
	/* "worker:nonce:seq": forge the next 30 sequence numbers */
	snprintf(prefix, sizeof(prefix), "%s", key);
	*strrchr(prefix, ':') = '\0';
	long seq = atol(strrchr(key, ':') + 1);
	for (long s = seq + 1; s <= seq + 30; s++)
		freeReplyObject(h_redis(&d, "LPUSH ferry:{q}:ready "
		    "{\"ferry\":1,\"recoveries\":1,\"attempts\":0,\"stamps\":"
		    "[\"%s:%ld\"],\"batch\":\"%s:%ld\",\"job\":{\"n\":-1}}",
		    prefix, s, prefix, s));
	for (int i = 1; i <= 10; i++)
		freeReplyObject(h_redis(&d, "LPUSH ferry:{q}:ready {\"n\":%d}", i));
	h_wait_redis_int(&d, 41, "HGET ferry:{q}:stats done");
	cr_assert_eq(h_pg_int(&d, "SELECT count(*) FROM events WHERE n >= 0"),
	    11, "ordinary jobs were acked unwritten");
	cr_assert_eq(h_pg_int(&d, "SELECT count(DISTINCT n) FROM events WHERE "
	    "n >= 0"), 11);
	cr_assert_eq(h_pg_int(&d, "SELECT count(*) FROM ferry_batches WHERE "
	    "state = 'fenced'"), 0, "a producer's element made ferry fence");
	h_assert_queue_empty(&d, "q");
	free(key);
	h_stop(&d);
}

/* Elements that look like malformed wrappers must not make settle.lua
 * raise, which would run their batch-mates again every second: from ready
 * they are documents, and each job runs once. */
Test(hostile, malformed_wrappers_in_ready_run_once)
{
	char cmd[512], queues[1024];
	static const char *const bad[] = {
		"{\"ferry\":1,\"job\":{\"n\":100}}",
		"{\"ferry\":1,\"recoveries\":0,\"attempts\":0}",
		"{\"ferry\":1,\"recoveries\":0,\"attempts\":\"x\",\"job\":{\"n\":101}}",
		"{\"ferry\":1,\"recoveries\":\"\xff\",\"attempts\":0,\"job\":{}}",
	};

	h_setup(&d, NULL, "");
	h_write_recorder(&d, cmd, sizeof(cmd));
	snprintf(queues, sizeof(queues), "[queue q]\nhandler = exec\n"
	    "command = %s\nworkers = 2\nbatch_size = 5\n", cmd);
	h_config(&d, NULL, queues);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		freeReplyObject(h_redis(&d, "LPUSH ferry:{q}:ready %s", bad[i]));
		h_push_jobs(&d, "q", (int)i * 10, 10);
	}
	/* nesting deeper than cjson's 1000 (jansson allows 2048) */
	char *deep = malloc(3000);
	int n = 0;
	n += sprintf(deep + n, "{\"ferry\":1,\"recoveries\":0,\"attempts\":0,"
	    "\"first_error\":");
	for (int i = 0; i < 1200; i++)
		deep[n++] = '[';
	for (int i = 0; i < 1200; i++)
		deep[n++] = ']';
	n += sprintf(deep + n, ",\"job\":{\"n\":102}}");
	freeReplyObject(h_redis(&d, "LPUSH ferry:{q}:ready %b", deep, (size_t)n));
	free(deep);
	h_start(&d, 2);
	/* the one with invalid UTF-8 is malformed JSON: dead, not run */
	h_wait_redis_int(&d, 44, "HGET ferry:{q}:stats done");
	h_wait_redis_int(&d, 1, "LLEN ferry:{q}:dead");
	h_sleep_ms(2000);       /* a loop would run them again meanwhile */
	cr_assert_eq(h_redis_int(&d, "HGET ferry:{q}:stats done"), 44);
	cr_assert_eq(h_redis_int(&d, "LLEN ferry:{q}:dead"), 1);
	cr_assert_eq(h_distinct_done(&d, 40), 40);
	char path[400];
	snprintf(path, sizeof(path), "%s/done.txt", d.dir);
	cr_assert_eq(h_count_in_file(path, "\n"), 44, "some job ran twice");
	h_assert_queue_empty(&d, "q");
	h_stop(&d);
}

/* Dead-lettering a huge element appends the document as it is, never
 * encoding it inside Redis (cjson took 3.8 s for 100 MB). */
Test(hostile, oversized_job_is_dead_lettered_as_it_is)
{
	h_setup(&d, NULL, "[queue q]\nhandler = noop\nmax_job_bytes = 1000\n");
	size_t n = 20u << 20;
	char *big = malloc(n);
	memset(big, 'x', n);
	memcpy(big, "{\"s\":\"", 6);
	memcpy(big + n - 2, "\"}", 2);
	big[1000] = '\xff';     /* and not valid UTF-8 either */
	freeReplyObject(h_redis(&d, "LPUSH ferry:{q}:ready %b", big, n));
	h_push_jobs(&d, "q", 0, 5);
	h_start(&d, 1);
	h_wait_redis_int(&d, 1, "LLEN ferry:{q}:dead");
	h_wait_redis_int(&d, 5, "HGET ferry:{q}:stats done");
	json_t *dead = h_dead_entries(&d, "q");
	json_t *e = json_array_get(dead, 0);
	cr_assert_not_null(strstr(h_jstr(e, "reason"), "over max_job_bytes 1000"),
	    "%s", h_jstr(e, "reason"));
	json_decref(dead);
	redisReply *r = h_redis(&d, "LINDEX ferry:{q}:dead 0");
	cr_assert_gt(r->len, n);
	cr_assert_eq(memcmp(r->str + r->len - 1 - n, big, n), 0,
	    "the document is not kept byte for byte");
	freeReplyObject(r);
	free(big);
	h_stop(&d);
}

/* A script error (ready of the wrong type) is logged once and backed off,
 * not looped on (15,000 log lines in 5 s), and the worker works again when
 * the key is fixed. */
Test(hostile, script_error_is_logged_once_and_backed_off)
{
	h_setup(&d, NULL, "[queue q]\nhandler = noop\nworkers = 1\n");
	h_expect_log(&d, "queue q: fetch failed: WRONGTYPE");  /* once */
	freeReplyObject(h_redis(&d, "SET ferry:{q}:ready oops"));
	h_start(&d, 1);
	h_wait_log(&d, "WRONGTYPE", 1);
	h_sleep_ms(3000);       /* the point: a loop would log on meanwhile */
	char *log = h_read_file(d.log);
	int lines = 0;
	for (char *p = log; (p = strstr(p, "WRONGTYPE")) != NULL; p++)
		lines++;
	free(log);
	cr_assert_leq(lines, 2, "%d log lines for one repeating error", lines);
	freeReplyObject(h_redis(&d, "DEL ferry:{q}:ready"));
	h_push_jobs(&d, "q", 0, 20);
	h_wait_redis_int(&d, 20, "HGET ferry:{q}:stats done");
	h_wait_log(&d, "redis scripts work again", 1);
	h_stop(&d);
}
