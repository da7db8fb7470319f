/* test_cluster.c - ferry on a Redis Cluster (redis_cluster, three
 * primaries with two replicas each, redis_wait_replicas = 1): three
 * postgres queues whose slots are on three different primaries, each
 * served by the node of its slot; a queue's slot migrated to another
 * primary key by key while its workers run (ASK, TRYAGAIN, then MOVED);
 * the primary of a queue killed so that a replica takes over: every job
 * once in PostgreSQL, nothing dead, no attempt spent. ferryctl enqueue and
 * stats find each queue's node; `ferryctl dead retry --to` another queue
 * is refused (its lists are in another slot). */
#include <criterion/criterion.h>
#include <hiredis/hiredis.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "servers_cluster.h"

static struct ferryd d;
static struct test_cluster cl;
static char names[3][32];
static char redis_lines[512];

static void
teardown(void)
{
	h_teardown(&d);
	test_cluster_stop(&cl);
}

TestSuite(cluster, .fini = teardown, .timeout = 600);

/* The port of the primary that serves queue q now. */
static int
owner(const char *q)
{
	char tag[48];

	snprintf(tag, sizeof(tag), "{%s}", q);
	return test_cluster_owner(&cl, test_cluster_slot_of(tag));
}

static redisContext *
node(int port)
{
	struct timeval tv = { 10, 0 };
	redisContext *c = redisConnectWithTimeout("127.0.0.1", port, tv);

	cr_assert(c != NULL && c->err == 0, "cannot connect to node %d", port);
	return c;
}

/* An integer command on the node that serves q (a missing hash field
 * counts 0). */
static long long
q_int(const char *q, const char *fmt, ...)
{
	redisContext *c = node(owner(q));
	va_list ap;

	va_start(ap, fmt);
	redisReply *r = redisvCommand(c, fmt, ap);
	va_end(ap);
	cr_assert(r != NULL && r->type != REDIS_REPLY_ERROR, "%s: %s", fmt,
	    r != NULL ? r->str : c->errstr);
	long long v = r->type == REDIS_REPLY_INTEGER ? r->integer :
	    r->type == REDIS_REPLY_STRING ? atoll(r->str) : 0;
	freeReplyObject(r);
	redisFree(c);
	return v;
}

static long long
done(const char *q)
{
	return q_int(q, "HGET ferry:{%s}:stats done", q);
}

static void
wait_done(const char *q, long long want)
{
	long long end = h_now_ms() + 60000;

	while (done(q) < want) {
		cr_assert_lt(h_now_ms(), end, "queue %s: %lld of %lld done", q,
		    done(q), want);
		h_sleep_ms(10);
	}
}

/* Jobs {"n":first..} pushed to q on its node, then WAIT on the same
 * connection until both replicas have them. */
static void
push(const char *q, int first, int n)
{
	redisContext *c = node(owner(q));
	char job[64];
	redisReply *r;

	for (int i = first; i < first + n; i++) {
		snprintf(job, sizeof(job), "{\"n\":%d}", i);
		redisAppendCommand(c, "LPUSH ferry:{%s}:ready %s", q, job);
	}
	for (int i = 0; i < n; i++) {
		cr_assert_eq(redisGetReply(c, (void **)&r), REDIS_OK);
		cr_assert_eq(r->type, REDIS_REPLY_INTEGER, "LPUSH: %s", r->str);
		freeReplyObject(r);
	}
	r = redisCommand(c, "WAIT 2 10000");
	cr_assert(r != NULL && r->integer == 2, "the jobs did not reach both "
	    "replicas");
	freeReplyObject(r);
	redisFree(c);
}

/* d in a new folder, its config naming the cluster's nodes. */
static void
use_cluster(void)
{
	size_t len;

	h_setup(&d, NULL, "");
	len = (size_t)snprintf(redis_lines, sizeof(redis_lines),
	    "redis_cluster = ");
	for (int i = 0; i < cl.n; i++)
		len += (size_t)snprintf(redis_lines + len, sizeof(redis_lines) - len,
		    "%s127.0.0.1:%d", i > 0 ? ", " : "", cl.node[i].port);
	snprintf(redis_lines + len, sizeof(redis_lines) - len, "\n");
	d.redis_lines = redis_lines;
}

/* The cluster, three queues on three primaries, PostgreSQL with a table
 * per queue, and the config. */
static void
setup(void)
{
	char queues[2048] = "", global[1024], one[512];
	struct h_run r;

	cr_assert_eq(test_cluster_start(&cl, 3, 2, NULL), 0);
	cr_assert_eq(test_cluster_queue_names(&cl, 3, names), 0);
	use_cluster();
	const char *pg = h_pg_start(&d);
	for (int i = 0; i < 3; i++) {
		snprintf(one, sizeof(one), "CREATE TABLE events_%s (n bigint)",
		    names[i]);
		h_pg_exec(&d, one);
		snprintf(one, sizeof(one), "[queue %s]\nhandler = postgres\n"
		    "table = events_%s\ncolumns = n\nworkers = 1\nbatch_size = 20\n"
		    "max_attempts = 1\n", names[i], names[i]);
		strcat(queues, one);
	}
	snprintf(global, sizeof(global), "%srestart_backoff_min = 10ms\n"
	    "redis_wait_replicas = 1\nredis_wait_timeout = 300ms\n", pg);
	h_config(&d, global, queues);
	cr_assert_eq(h_ctl(&r, d.config, NULL, "init-db", NULL), 0, "%s%s",
	    r.out, r.err);
	h_run_free(&r);
}

/* Every one of n jobs of q once in its table, nothing left, dead or
 * retried on the node that serves it now. */
static void
assert_once(const char *q, int n)
{
	char sql[200];

	wait_done(q, n);
	snprintf(sql, sizeof(sql), "SELECT count(DISTINCT n) FROM events_%s", q);
	cr_assert_eq(h_pg_int(&d, sql), n, "queue %s: a job is missing", q);
	snprintf(sql, sizeof(sql), "SELECT count(*) FROM events_%s", q);
	cr_assert_eq(h_pg_int(&d, sql), n, "queue %s: a job written twice", q);
	cr_assert_eq(q_int(q, "LLEN ferry:{%s}:ready", q), 0);
	cr_assert_eq(q_int(q, "LLEN ferry:{%s}:requeue", q), 0);
	cr_assert_eq(q_int(q, "LLEN ferry:{%s}:dead", q), 0);
	cr_assert_eq(q_int(q, "HGET ferry:{%s}:stats retried", q), 0,
	    "queue %s: attempts spent", q);
}

Test(cluster, three_queues_on_three_nodes)
{
	int n = 2000;
	struct h_run r;
	char jobs[64 * 100] = "";

	setup();
	cr_assert_neq(owner(names[0]), owner(names[1]));
	cr_assert_neq(owner(names[1]), owner(names[2]));
	cr_assert_neq(owner(names[0]), owner(names[2]));
	for (int i = 0; i < 3; i++)
		push(names[i], 0, n);
	h_start(&d, 3);
	for (int i = 0; i < 3; i++)
		assert_once(names[i], n);
	/* ferryctl: enqueue lands on the queue's node, stats reads each */
	for (int i = n; i < n + 100; i++) {
		char one[64];
		snprintf(one, sizeof(one), "{\"n\":%d}\n", i);
		strcat(jobs, one);
	}
	cr_assert_eq(h_ctl(&r, d.config, jobs, "enqueue", "-q", names[2], "-",
	    NULL), 0, "%s%s", r.out, r.err);
	h_run_free(&r);
	assert_once(names[2], n + 100);
	cr_assert_eq(h_ctl(&r, d.config, NULL, "stats", NULL), 0, "%s%s", r.out,
	    r.err);
	for (int i = 0; i < 3; i++)
		cr_assert(strstr(r.out, names[i]) != NULL, "%s", r.out);
	h_run_free(&r);
	h_stop(&d);
}

/* The cluster and ferryd set up, n jobs pushed to q (and `more` to the
 * third queue), ferryd started: returns under load, once 1000 of q's jobs
 * are done. */
static void
start_under_load(const char *q, int n, int more)
{
	setup();
	push(q, 0, n);
	if (more > 0)
		push(names[2], 0, more);
	h_start(&d, 3);
	wait_done(q, 1000);
}

/* The slot of the first queue moves to another primary while its worker
 * runs, two keys at a time with pauses: the source answers ASK and
 * TRYAGAIN for what has moved, then MOVED. */
Test(cluster, slot_migrated_mid_run)
{
	int n = 20000;
	const char *q = names[0];

	start_under_load(q, n, 0);
	char tag[48];
	snprintf(tag, sizeof(tag), "{%s}", q);
	int slot = test_cluster_slot_of(tag), from = owner(q), to = owner(names[1]);
	cr_assert_eq(test_cluster_migrate_begin(&cl, slot, to), 0);
	long long end = h_now_ms() + 60000;
	while (test_cluster_migrate_step(&cl, slot, to, 2) > 0 ||
	    test_cluster_migrate_end(&cl, slot, to) != 0) {
		cr_assert_lt(h_now_ms(), end, "the migration never ended");
		h_sleep_ms(30);
	}
	cr_assert_eq(owner(q), to);
	cr_assert_neq(from, to);
	fprintf(stderr, "cluster: slot %d of queue %s moved from %d to %d with "
	    "%lld of %d jobs done\n", slot, q, from, to, done(q), n);
	assert_once(q, n);
	cr_assert_gt(h_count_in_file(d.log, ": MOVED ") +
	    h_count_in_file(d.log, ": ASK ") +
	    h_count_in_file(d.log, ": TRYAGAIN "), 0,
	    "no worker met the migration");
	h_stop(&d);
}

/* The primary of the second queue is killed -9 under load: one of its
 * replicas takes over its slots and the worker follows. */
Test(cluster, primary_killed_every_job_once)
{
	int n = 20000;
	const char *q = names[1];

	start_under_load(q, n, 500);
	int dead = owner(q);
	test_cluster_kill_primary(&cl, dead);
	long long killed = h_now_ms();
	int now = test_cluster_wait_failover(&cl, dead, 30000);
	cr_assert_gt(now, 0);
	long long base = done(q);
	while (done(q) == base && base < n) {
		cr_assert_lt(h_now_ms(), killed + 60000, "nothing done after");
		h_sleep_ms(5);
	}
	fprintf(stderr, "cluster: primary %d killed, replica %d serves queue %s: "
	    "first job done there %lld ms after the kill\n", dead, now, q,
	    h_now_ms() - killed);
	assert_once(q, n);
	assert_once(names[2], 500);
	h_stop(&d);
}

/* `ferryctl dead retry --to` another queue: on a cluster the two queues'
 * lists are in different slots and no script can move an entry between
 * them: refused (64) with what to do instead, nothing moved. */
Test(cluster, dead_retry_to_another_queue_refused)
{
	char queues[512], global[600];
	struct h_run r;

	cr_assert_eq(test_cluster_start(&cl, 3, 0, NULL), 0);
	cr_assert_eq(test_cluster_queue_names(&cl, 2, names), 0);
	use_cluster();
	snprintf(queues, sizeof(queues), "[queue %s]\nworkers = 0\n[queue %s]\n"
	    "workers = 0\n", names[0], names[1]);
	snprintf(global, sizeof(global), "restart_backoff_min = 10ms\n");
	h_config(&d, global, queues);
	q_int(names[0], "LPUSH ferry:{%s}:dead %s", names[0], "{\"reason\":"
	    "\"failed by the handler\",\"attempts\":1,\"recoveries\":0,\"time\":"
	    "1700000000000,\"worker\":\"w\",\"job\":{\"id\":\"x\"}}");
	h_ctl(&r, d.config, NULL, "dead", "retry", names[0], "--all", "--to",
	    names[1], (const char *)NULL);
	h_run_expect(&r, 64);
	char want[400];
	snprintf(want, sizeof(want), "ferryctl: dead retry --to %s: with "
	    "redis_cluster, the dead list of queue %s and the requeue list of "
	    "queue %s are in different slots, and no single step can move an "
	    "entry between them; replay to queue %s itself", names[1], names[0],
	    names[1], names[0]);
	cr_assert_not_null(strstr(r.err, want), "%s", r.err);
	h_run_free(&r);
	cr_assert_eq(q_int(names[0], "LLEN ferry:{%s}:dead", names[0]), 1);
	cr_assert_eq(q_int(names[1], "LLEN ferry:{%s}:requeue", names[1]), 0);
}
