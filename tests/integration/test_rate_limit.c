/* test_rate_limit.c - a queue's rate_limit, shared by every worker on
 * every host: fetch.lua run directly never grants more than the bucket
 * allows (rate * elapsed + burst), counts held jobs into debt, asks the
 * worker to wait and keeps its key without a TTL; ferryd with two masters on one
 * Redis holds a queue to its rate and runs every job once; no limit
 * creates no key; a bad value is refused by `ferryd -t`; a reload sets
 * and lifts the limit; doc/security.md's ACL line for ferry's user covers the
 * bucket; on a Redis Cluster the bucket lives in the queue's slot. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "lua_scripts.h"
#include "servers_cluster.h"
#include "queue.h"
#include "script_args.h"

#define READY "ferry:{q}:ready"
#define PROC "ferry:{q}:proc:w1"
#define BKEYS "ferry:{q}:bkeys"
#define OWNERS "ferry:{q}:owners"
#define RATE "ferry:{q}:rate"

static struct ferryd d, d2;
static struct test_cluster cl;

static void
teardown(void)
{
	h_teardown(&d2);
	h_teardown(&d);
	test_cluster_stop(&cl);
}

TestSuite(rate_scripts, .fini = teardown, .timeout = 180);
TestSuite(rate_limit, .fini = teardown, .timeout = 180);

/* fetch.lua for w1 with n jobs wanted, held already in its list, and a
 * rate (0: none) with a bucket of burst tokens: the jobs it granted;
 * *wait_ms the wait it asked for instead (0: none). */
static int
fetch(int n, int held, long rate, long burst, long long *wait_ms)
{
	struct sargs a;

	sargs_fetch(&a, "ferry", "q", "w1", "m1", "w1:x:1", n, held, 3);
	if (rate > 0)
		sargs_fetch_limit(&a, rate, burst);
	redisReply *r = queue_script(d.rc, a.script, a.nkeys, a.argc, a.argv,
	    a.lens);
	cr_assert(r != NULL && r->type == REDIS_REPLY_ARRAY, "fetch: %s",
	    r == NULL ? d.rc->errstr : r->type == REDIS_REPLY_ERROR ? r->str :
	    "not an array");
	cr_assert_eq(r->elements, 4, "fetch: {kind, {elements}, ms, ids}");
	int got = (int)r->element[1]->elements;
	*wait_ms = r->element[2]->integer;
	cr_assert(*wait_ms == 0 || got == 0,
	    "a fetch that asks to wait took %d jobs", got);
	freeReplyObject(r);
	return got;
}

/* Redis' clock in ms, by one script. */
static long long
redis_ms(void)
{
	return h_redis_int(&d, "EVAL %s 0", "local t = redis.call('TIME') "
	    "return t[1] * 1000 + math.floor(t[2] / 1000)");
}

/* The bucket at `milli` milli-tokens as of `ahead` ms from now: the next
 * fetch takes that for a clock that went back and counts from then on, so
 * the bucket does not refill between this and that fetch. */
static void
set_bucket(long long milli, long long ahead)
{
	char v[64];

	snprintf(v, sizeof(v), "%lld %lld", milli, redis_ms() + ahead);
	freeReplyObject(h_redis(&d, "SET " RATE " %s", v));
}

/* A Redis with worker w1 registered and n jobs in ready. */
static void
start_with_jobs(int n)
{
	h_setup(&d, NULL, "[queue q]\n");
	freeReplyObject(h_redis(&d, "HSET " OWNERS " w1 m1"));
	for (int i = 0; i < n; i += 500)
		h_push_jobs(&d, "q", i, n - i < 500 ? n - i : 500);
}

/* Without a rate the bucket key is never written, and fetch answers as
 * before: {kind, jobs}, no wait. */
Test(rate_scripts, no_rate_no_key)
{
	long long wait;

	start_with_jobs(300);
	cr_assert_eq(fetch(100, 0, 0, 0, &wait), 100);
	cr_assert_eq(wait, 0);
	cr_assert_eq(fetch(1000, 0, 0, 0, &wait), 200);
	cr_assert_eq(fetch(1000, 0, 0, 0, &wait), 0);
	cr_assert_eq(wait, 0);
	cr_assert_eq(h_redis_int(&d, "EXISTS " RATE), 0);
	h_stop(&d);
}

/* Fetch as fast as possible for over a second: the jobs granted never
 * exceed rate * elapsed (Redis clock) + burst, every refused fetch says
 * how long to wait, and the bucket empties (it grants about the rate). */
Test(rate_scripts, grants_never_exceed_the_bucket)
{
	const long rate = 200, burst = 200;
	long long wait;
	int total = 0, waits = 0;

	start_with_jobs(5000);
	long long start = redis_ms();
	while (redis_ms() - start < 1500) {
		total += fetch(7, 0, rate, burst, &wait);
		long long elapsed = redis_ms() - start;
		cr_assert_leq(total, rate * elapsed / 1000 + burst + 1,
		    "%d jobs granted in %lld ms", total, elapsed);
		if (wait > 0) {
			waits++;
			cr_assert_leq(wait, 7 * 1000 / rate + 1, "wait %lld ms",
			    wait);
		}
	}
	long long elapsed = redis_ms() - start;
	cr_assert_gt(waits, 0, "the bucket never ran dry");
	cr_assert_geq(total, burst + rate * 1000 / 1000 - 14,
	    "%d jobs in %lld ms", total, elapsed);
	cr_assert_eq(h_redis_int(&d, "LLEN " PROC), total);
	/* no TTL: a volatile-* policy would evict it (one more burst) */
	cr_assert_eq(h_redis_int(&d, "PTTL " RATE), -1);
	h_stop(&d);
}

/* A fetch waits for as many tokens as it could take (its batch, the
 * burst, what the queue holds: requeue's next batch, else ready), then
 * takes what the bucket has. */
Test(rate_scripts, waits_for_a_whole_batch)
{
	long long wait;

	start_with_jobs(5);
	/* 3 tokens, not refilled before the next fetch */
	set_bucket(3000, 100000);
	/* 3 tokens, 5 jobs, batch 10: wait for 2 more tokens at 10/s */
	cr_assert_eq(fetch(10, 0, 10, 10, &wait), 0);
	cr_assert(wait > 0 && wait <= 200, "wait %lld", wait);
	/* batch 3: it takes 3 */
	cr_assert_eq(fetch(3, 0, 10, 10, &wait), 3);
	/* none left: wait for one token even with an empty queue, rather
	 * than block in BLMOVE and take a job into debt */
	freeReplyObject(h_redis(&d, "DEL " READY));
	set_bucket(0, 100000);
	cr_assert_eq(fetch(10, 0, 10, 10, &wait), 0);
	cr_assert(wait > 0 && wait <= 100, "wait %lld", wait);
	/* requeue first, in its shrinking batches: five jobs recovered
	 * max_recoveries times go one by one, so one token is enough */
	for (int i = 0; i < 5; i++)
		freeReplyObject(h_redis(&d, "LPUSH ferry:{q}:requeue %s",
		    "{\"ferry\":1,\"recoveries\":3,\"attempts\":0,"
		    "\"job\":{\"n\":1}}"));
	set_bucket(1000, 100000);
	cr_assert_eq(fetch(10, 0, 10, 10, &wait), 1);
	cr_assert_eq(h_redis_int(&d, "LLEN ferry:{q}:requeue"), 4);
	h_stop(&d);
}

/* A bucket stamped by a clock ahead of this one (a failover to a host
 * whose clock is behind) counts from now: the queue does not stand still
 * until the clock catches up. */
Test(rate_scripts, clock_went_back)
{
	long long wait;
	start_with_jobs(5);
	set_bucket(0, 3600 * 1000);
	cr_assert_eq(fetch(1, 0, 10, 10, &wait), 0);
	cr_assert(wait > 0 && wait <= 100, "wait %lld", wait);
	redisReply *r = h_redis(&d, "GET " RATE);
	long long at = atoll(strchr(r->str, ' ') + 1);
	freeReplyObject(r);
	cr_assert_leq(at, redis_ms(), "the bucket still counts from the future");
	h_sleep_ms(150);        /* over one token at 10/s */
	cr_assert_eq(fetch(1, 0, 10, 10, &wait), 1, "wait %lld", wait);
	h_stop(&d);
}

/* Jobs BLMOVE moved in (held) take tokens even into debt: the next fetch
 * waits the debt off. A resumed batch (bkeys names it) is not charged
 * twice. */
Test(rate_scripts, held_jobs_go_into_debt)
{
	long long wait;

	start_with_jobs(20);
	set_bucket(0, 100000);
	/* two jobs BLMOVE'd into the list, no token: both run, debt 2 */
	freeReplyObject(h_redis(&d, "RPOPLPUSH " READY " " PROC));
	freeReplyObject(h_redis(&d, "RPOPLPUSH " READY " " PROC));
	cr_assert_eq(fetch(10, 2, 10, 10, &wait), 0);
	cr_assert_eq(wait, 0);
	cr_assert_eq(h_redis_int(&d, "LLEN " PROC), 2);
	redisReply *v = h_redis(&d, "GET " RATE);
	cr_assert_eq(atoll(v->str), -2000, "bucket %s", v->str);
	freeReplyObject(v);
	/* the same held jobs again (bkeys names their batch): no charge */
	cr_assert_eq(fetch(0, 2, 10, 10, &wait), 0);
	v = h_redis(&d, "GET " RATE);
	cr_assert_eq(atoll(v->str), -2000, "bucket %s", v->str);
	freeReplyObject(v);
	freeReplyObject(h_redis(&d, "DEL " PROC " " BKEYS));
	/* debt 2: a fetch waits for 3 tokens at 10/s before its first job */
	set_bucket(-2000, 100000);
	cr_assert_eq(fetch(1, 0, 10, 10, &wait), 0);
	cr_assert(wait > 200 && wait <= 300, "wait %lld", wait);
	h_stop(&d);
}

/* One queue line block for rate (NULL: no rate_limit line). */
static void
queue_text(char *out, size_t size, const char *cmd, int workers,
    const char *rate)
{
	snprintf(out, size, "[queue q]\nworkers = %d\nbatch_size = 20\n"
	    "handler = exec\ncommand = %s\n%s%s%s", workers, cmd,
	    rate ? "rate_limit = " : "", rate ? rate : "", rate ? "\n" : "");
}

/* Two masters on one Redis, two workers each, 50/s: 150 jobs take at
 * least (150 - 50 burst - 4 held) / 50 s, and each runs exactly once. */
Test(rate_limit, two_hosts_share_one_limit)
{
	char cmd[400], queues[600];

	h_setup(&d, NULL, "[queue q]\n");
	h_write_recorder(&d, cmd, sizeof(cmd));
	queue_text(queues, sizeof(queues), cmd, 2, "50/s");
	h_config(&d, NULL, queues);
	h_setup_peer(&d2, &d, NULL, queues);
	h_start(&d, 2);
	h_start(&d2, 2);
	h_wait_blocked(&d, 4);          /* all four idle in BLMOVE */
	long long start = h_now_ms();
	h_push_jobs(&d, "q", 0, 150);
	long long end = start + 30000;
	while (h_redis_int(&d, "HGET ferry:{q}:stats done") < 150 &&
	    h_now_ms() < end)
		h_sleep_ms(10);
	long long took = h_now_ms() - start;
	cr_assert_eq(h_redis_int(&d, "HGET ferry:{q}:stats done"), 150);
	fprintf(stderr, "rate_limit: 150 jobs at 50/s on 2 hosts in %lld ms\n",
	    took);
	cr_assert_geq(took, 1800, "150 jobs at 50/s in %lld ms", took);
	char path[400];
	snprintf(path, sizeof(path), "%s/done.txt", d.dir);
	char *text = h_read_file(path);
	cr_assert_eq(h_count_lines(text), 150, "jobs run more than once");
	free(text);
	cr_assert_eq(h_distinct_done(&d, 150), 150);
	h_assert_queue_empty(&d, "q");
	cr_assert_eq(h_redis_int(&d, "EXISTS " RATE), 1);
	h_stop(&d2);
	h_stop(&d);
}

/* No rate_limit: the queue drains and no bucket key appears. */
Test(rate_limit, no_limit_creates_no_key)
{
	h_setup(&d, NULL, "[queue q]\nworkers = 2\n");
	h_start(&d, 2);
	h_push_jobs(&d, "q", 0, 300);
	h_wait_redis_int(&d, 300, "HGET ferry:{q}:stats done");
	cr_assert_eq(h_redis_int(&d, "EXISTS " RATE), 0);
	h_stop(&d);
}

/* A bad value is refused by `ferryd -t`, naming section, key and what is
 * allowed; N/s and plain N pass. */
Test(rate_limit, bad_value_refused_by_check)
{
	static const char *const bad[] = { "30/m", "-5", "5 /s", "1.5/s",
		"1000001", "fast" };
	char queues[200], *out;
	const char *args[] = { "-t", "-c", NULL, NULL };

	h_setup(&d, NULL, "[queue q]\n");
	args[2] = d.config;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(queues, sizeof(queues), "[queue q]\nrate_limit = %s\n",
		    bad[i]);
		h_config(&d, NULL, queues);
		int status = h_run_ferryd(args, &out);
		cr_assert(WIFEXITED(status) && WEXITSTATUS(status) != 0,
		    "%s accepted: %s", bad[i], out);
		char want[200];
		snprintf(want, sizeof(want), "[queue q] rate_limit: \"%s\" is "
		    "not a rate (allowed: N/s or N, jobs per second, "
		    "0..1000000; 0 or empty: no limit)", bad[i]);
		cr_assert(strstr(out, want) != NULL, "%s: %s", bad[i], out);
		free(out);
	}
	static const char *const good[] = { "500/s", "500", "0", "" };
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		snprintf(queues, sizeof(queues), "[queue q]\nrate_limit = %s\n",
		    good[i]);
		h_config(&d, NULL, queues);
		int status = h_run_ferryd(args, &out);
		cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		    "%s refused: %s", good[i], out);
		free(out);
	}
	h_stop(&d);
}

/* Wait until the reload replaced the queue's `n` workers. */
static void
reloaded(int times, int n)
{
	h_wait_log(&d, "queue q changed: replacing its", times);
	h_wait_log(&d, "reload: done", times);
	h_wait_children(&d, n);
}

/* SIGHUP sets a limit on a running queue and lifts it again. */
Test(rate_limit, reload_sets_and_lifts_the_limit)
{
	char cmd[400], queues[600];

	h_setup(&d, NULL, "[queue q]\n");
	h_write_recorder(&d, cmd, sizeof(cmd));
	queue_text(queues, sizeof(queues), cmd, 2, NULL);
	h_config(&d, NULL, queues);
	h_start(&d, 2);
	h_push_jobs(&d, "q", 0, 40);
	h_wait_redis_int(&d, 40, "HGET ferry:{q}:stats done");
	cr_assert_eq(h_redis_int(&d, "EXISTS " RATE), 0);

	/* 1/s: a burst of one, then one a second (and one per idle worker
	 * that BLMOVE hands a job into debt) */
	queue_text(queues, sizeof(queues), cmd, 2, "1/s");
	h_config(&d, NULL, queues);
	kill(d.pid, SIGHUP);
	reloaded(1, 2);
	long long start = h_now_ms();
	h_push_jobs(&d, "q", 40, 40);
	h_sleep_ms(2000);
	long long done = h_redis_int(&d, "HGET ferry:{q}:stats done") - 40;
	long long took = h_now_ms() - start;
	cr_assert_leq(done, 1 + took / 1000 + 2 + 1, "%lld jobs in %lld ms",
	    done, took);
	cr_assert_gt(done, 0);
	cr_assert_eq(h_redis_int(&d, "EXISTS " RATE), 1);

	/* lifted: the rest (about 35 jobs, over half a minute at 1/s) runs
	 * within the harness' deadline */
	queue_text(queues, sizeof(queues), cmd, 2, "");
	h_config(&d, NULL, queues);
	kill(d.pid, SIGHUP);
	reloaded(2, 2);
	h_wait_redis_int(&d, 80, "HGET ferry:{q}:stats done");
	cr_assert_eq(h_distinct_done(&d, 80), 80);
	h_stop(&d);
}

/* ferry's user with exactly doc/security.md's ACL line (one inline command,
 * which Redis splits at blanks) runs a limited queue: nothing refused. */
Test(rate_limit, doc_acl_covers_the_bucket)
{
	const char *start = "ACL SETUSER ferry ";
	char *text = h_read_file(TEST_SRCDIR "/doc/security.md"), *at, *pw, buf[256];

	h_setup(&d, "redis_user = ferry\nredis_password = rl-pw\n",
	    "[queue q]\nworkers = 2\nrate_limit = 1000/s\n");
	cr_assert_not_null(at = strstr(text, start));
	at[strcspn(at, "\n")] = '\0';
	cr_assert_not_null(pw = strstr(at, ">SECRET "));
	memcpy(pw, ">rl-pw  ", 8);
	cr_assert_gt(test_redis_command(d.redis.port, at, buf, sizeof(buf)), 0);
	cr_assert_str_eq(buf, "+OK\r\n");
	free(text);
	h_start(&d, 2);
	h_push_jobs(&d, "q", 0, 200);
	h_wait_redis_int(&d, 200, "HGET ferry:{q}:stats done");
	cr_assert_eq(h_redis_int(&d, "EXISTS " RATE), 1);
	redisReply *log = h_redis(&d, "ACL LOG");
	cr_assert_eq(log->elements, 0, "the ACL refused ferry something");
	freeReplyObject(log);
	h_stop(&d);
}

/* One inline command on the cluster node at port: an integer reply, or a
 * bulk string read as one (nil: 0). */
static long long
node_int(int port, const char *cmd)
{
	char buf[256];

	cr_assert_gt(test_redis_command(port, cmd, buf, sizeof(buf)), 0,
	    "%s: no reply", cmd);
	cr_assert(buf[0] == ':' || buf[0] == '$', "%s: %s", cmd, buf);
	if (strncmp(buf, "$-1", 3) == 0)
		return 0;
	return atoll(buf[0] == ':' ? buf + 1 : strstr(buf, "\r\n") + 2);
}

/* Redis Cluster: the bucket has the queue's hash tag, so the fetch script
 * (all its keys in one slot) runs on the node that serves the queue, and
 * holds it to its rate there: 250 jobs at 100/s take at least
 * (250 - 100 burst - 2 held) / 100 s. */
Test(rate_limit, on_a_redis_cluster)
{
	char lines[512], push[8192];
	size_t len;

	cr_assert_eq(test_cluster_start(&cl, 3, 0, NULL), 0);
	h_setup(&d, NULL, "");
	len = (size_t)snprintf(lines, sizeof(lines), "redis_cluster = ");
	for (int i = 0; i < cl.n; i++)
		len += (size_t)snprintf(lines + len, sizeof(lines) - len,
		    "%s127.0.0.1:%d", i > 0 ? ", " : "", cl.node[i].port);
	snprintf(lines + len, sizeof(lines) - len, "\n");
	d.redis_lines = lines;
	h_config(&d, NULL, "[queue q]\nworkers = 2\nbatch_size = 20\n"
	    "rate_limit = 100/s\n");
	int port = test_cluster_owner(&cl, test_cluster_slot_of("{q}"));
	cr_assert_gt(port, 0);
	len = (size_t)snprintf(push, sizeof(push), "LPUSH ferry:{q}:ready");
	for (int i = 0; i < 250; i++)
		len += (size_t)snprintf(push + len, sizeof(push) - len,
		    " '{\"n\":%d}'", i);
	h_start(&d, 2);
	long long start = h_now_ms();
	cr_assert_eq(node_int(port, push), 250);
	while (node_int(port, "HGET ferry:{q}:stats done") < 250 &&
	    h_now_ms() < start + 30000)
		h_sleep_ms(10);
	long long took = h_now_ms() - start;
	cr_assert_eq(node_int(port, "HGET ferry:{q}:stats done"), 250);
	cr_assert_geq(took, 1300, "250 jobs at 100/s in %lld ms", took);
	cr_assert_eq(node_int(port, "EXISTS ferry:{q}:rate"), 1);
	cr_assert_eq(node_int(port, "LLEN ferry:{q}:ready"), 0);
	h_stop(&d);
}
