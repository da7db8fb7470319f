/* test_shared_redis.c - one Redis for an application's cache and the
 * queue, set up as ferry is meant to run: maxmemory, a volatile-* policy,
 * an application writing keys with a TTL all the time so that Redis evicts
 * as it goes. A backlog of any age keeps its data (the cache keys of
 * waiting jobs have no TTL: nothing can evict them), producers are held
 * back only by what the queue itself holds, every job's cache data is its
 * own, keys left without a job are swept after the cache TTL, and a
 * protected key that disappears anyway is reported. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "harness_churn.h"

static struct ferryd d;
static struct h_churn churn;

static void
teardown(void)
{
	h_churn_stop(&churn);
	h_teardown(&d);
}

TestSuite(shared_redis, .fini = teardown, .timeout = 600);

/* Run `ferryctl -c d.config ARGS...` with `input` on stdin; its exit
 * status (stderr shown on failure). */
static int
ctl(const char *input, ...)
{
	struct h_run r;
	va_list ap;

	va_start(ap, input);
	h_ctl_v(&r, d.config, input, ap);
	va_end(ap);
	if (r.status != 0)
		fputs(r.err, stderr);
	h_run_free(&r);
	return r.status;
}

/* INFO field `name` as a number (-1: absent). */
static long long
info_int(const char *section, const char *name)
{
	redisReply *r = h_redis(&d, "INFO %s", section);
	char want[64];
	const char *p;
	long long v = -1;

	snprintf(want, sizeof(want), "\r\n%s:", name);
	if ((p = strstr(r->str, want)) != NULL)
		v = atoll(p + strlen(want));
	freeReplyObject(r);
	return v;
}

/* Run ferryctl; on exit 75 (refused for memory) try again for up to
 * `patience_ms`. Returns the exit status; *refused_ms: how long it was
 * refused. */
static int
ctl_patient(const char *input, long patience_ms, long long *refused_ms,
    const char *a1, const char *a2, const char *a3, const char *a4)
{
	long long start = h_now_ms();
	struct h_run r;
	int st;

	for (;;) {
		st = h_ctl(&r, d.config, input, a1, a2, a3, a4, NULL);
		if (st != 75 || h_now_ms() - start > patience_ms)
			break;
		h_run_free(&r);
		h_sleep_ms(200);
	}
	if (st != 0)
		fprintf(stderr, "ferryctl exit %d: %s\n", st, r.err);
	h_run_free(&r);
	*refused_ms = h_now_ms() - start;
	return st;
}

/* {"id":"c<doc>","data":[{"n":first},...]} lines for `docs` documents of
 * `rows` rows each, n counting from `first`. */
static char *
row_docs(int docs, int rows, long long first)
{
	char *s = malloc((size_t)docs * ((size_t)rows * 24 + 64) + 1), *p = s;

	for (int i = 0; i < docs; i++) {
		p += sprintf(p, "{\"id\":\"c%d\",\"data\":[", i);
		for (int k = 0; k < rows; k++)
			p += sprintf(p, "%s{\"n\":%lld}", k ? "," : "",
			    first + (long long)i * rows + k);
		p += sprintf(p, "]}\n");
	}
	return s;
}

#define CACHED_DOCS 40          /* --cache: 40 x 500 rows, 80 jobs */
#define CACHED_ROWS 500
#define APP_KEYS 60             /* application keys: 60 x 50 rows */
#define APP_ROWS 50
#define APP_FIRST 100000

/* The application's own keys, with a TTL, and a job naming each, as an
 * application does it: write the key, enqueue the job; when Redis evicted
 * the key in between (the cache is full and churning: under volatile-lfu
 * and volatile-ttl a fresh key may go first), the enqueue says so and the
 * application writes it again. Returns the enqueues refused so. */
static int
app_keys_and_jobs(void)
{
	char value[APP_ROWS * 24], job[128];
	int again = 0;

	for (int i = 0; i < APP_KEYS; i++) {
		char *v = value;
		v += sprintf(v, "[");
		for (int k = 0; k < APP_ROWS; k++)
			v += sprintf(v, "%s{\"n\":%d}", k ? "," : "",
			    APP_FIRST + i * APP_ROWS + k);
		sprintf(v, "]");
		snprintf(job, sizeof(job), "{\"id\":\"a%d\",\"cache_key\":"
		    "\"app:rows:%d\"}", i, i);
		for (int tries = 0; ; tries++) {
			struct h_run r;
			freeReplyObject(h_redis(&d, "SET app:rows:%d %s PX 30000", i,
			    value));
			h_ctl(&r, d.config, NULL, "enqueue", "-q", "q", job, NULL);
			bool evicted = r.status == 65 && strstr(r.err, "does not "
			    "exist: write the key before the job") != NULL;
			if (r.status != 0 && !evicted)
				fputs(r.err, stderr);
			int st = r.status;
			h_run_free(&r);
			if (st == 0)
				break;
			cr_assert(evicted && tries < 20, "enqueue exit %d", st);
			again++;
		}
	}
	return again;
}

/* Every protected key still there, without a TTL. */
static void
assert_protected_intact(long long want)
{
	redisReply *r = h_protected(&d, "q");

	cr_assert_eq((long long)r->elements / 2, want, "%zu protected keys",
	    r->elements / 2);
	for (size_t i = 0; i < r->elements; i += 2)
		cr_assert_eq(h_redis_int(&d, "PTTL %s", r->element[i]->str), -1,
		    "%s was evicted or has a TTL", r->element[i]->str);
	freeReplyObject(r);
}

static void
kill_a_worker(void)
{
	pid_t pids[H_MAX_PIDS];
	int n = h_children(d.pid, pids, H_MAX_PIDS);

	if (n > 0)
		kill(pids[rand() % n], SIGKILL);
}

/* The whole setup under `policy`: a churning cache at maxmemory, a
 * backlog through --cache and through the application's keys that waits
 * while the cache turns over three times, then a drain through a
 * PostgreSQL outage and worker kills. */
static void
backlog_keeps_its_data(const char *policy)
{
	struct h_churn_opts co = { "app:cache:", 8192, 60000, 8 << 20 };
	long long refused_ms, evicted, cached_jobs = CACHED_DOCS * 2;
	char *docs;

	srand(1);
	h_setup(&d, NULL, "");
	h_config(&d, h_pg_start(&d), "[queue q]\nworkers = 2\nbatch_size = 10\n"
	    "handler = postgres\ntable = events\nchunk_rows = 250\n"
	    "cache_key_prefixes = app:rows:\n");
	h_pg_exec(&d, "CREATE TABLE events (n bigint)");
	h_pg_slow(&d, "events", "INSERT");
	struct h_run init;
	h_ctl(&init, d.config, NULL, "init-db", NULL);
	h_run_expect(&init, 0);
	h_run_free(&init);
	freeReplyObject(h_redis(&d, "CONFIG SET maxmemory 24mb"));
	freeReplyObject(h_redis(&d, "CONFIG SET maxmemory-policy %s", policy));
	cr_assert_eq(h_churn_start(&churn, d.redis.port, &co), 0);
	while (info_int("stats", "evicted_keys") < 100)
		h_sleep_ms(100);

	/* the cache is full: producers go through at once */
	docs = row_docs(CACHED_DOCS, CACHED_ROWS, 0);
	cr_assert_eq(ctl_patient(docs, 5000, &refused_ms, "enqueue", "--cache",
	    "q", "-"), 0);
	cr_assert_lt(refused_ms, 5000);
	free(docs);
	fprintf(stderr, "%s: %d application keys were evicted before their "
	    "job came and written again\n", policy, app_keys_and_jobs());
	assert_protected_intact(cached_jobs + APP_KEYS);

	/* the cache turns over three times while the backlog waits */
	evicted = info_int("stats", "evicted_keys");
	while (info_int("stats", "evicted_keys") < evicted + 3 * 3000)
		h_sleep_ms(200);
	assert_protected_intact(cached_jobs + APP_KEYS);
	cr_assert_eq(h_redis_int(&d, "LLEN ferry:{q}:ready"),
	    cached_jobs + APP_KEYS);

	/* the drain, through an outage and kills */
	h_start(&d, 2);
	h_wait_redis_int(&d, 1, "EXISTS ferry:{q}:bkeys");
	kill_a_worker();
	cr_assert_eq(test_pg_pause(&d.pg), 0);
	h_sleep_ms(3000);
	cr_assert_eq(test_pg_resume(&d.pg), 0);
	h_sleep_ms(300);
	kill_a_worker();
	h_sleep_ms(500);
	kill_a_worker();
	h_wait_redis_int(&d, cached_jobs + APP_KEYS, "HGET ferry:{q}:stats done");

	static const struct h_rows rows[] = {
		{ 0, CACHED_DOCS * CACHED_ROWS - 1, CACHED_DOCS * CACHED_ROWS },
		{ APP_FIRST, APP_FIRST + APP_KEYS * APP_ROWS - 1,
		    APP_KEYS * APP_ROWS },
	};
	h_assert_rows(&d, "events", CACHED_DOCS * CACHED_ROWS +
	    APP_KEYS * APP_ROWS, rows, 2);
	cr_assert_eq(h_redis_int(&d, "LLEN ferry:{q}:dead"), 0);
	cr_assert_eq(h_redis_int(&d, "HGET ferry:{q}:stats cache_missing"), 0);
	h_assert_queue_empty(&d, "q");
	/* nothing left behind: no cache key, no protection */
	redisReply *r = h_redis(&d, "KEYS ferry:{q}:cache:*");
	cr_assert_eq(r->elements, 0);
	freeReplyObject(r);
	r = h_redis(&d, "KEYS app:rows:*");
	cr_assert_eq(r->elements, 0);
	freeReplyObject(r);
	cr_assert_eq(h_redis_int(&d, "EXISTS ferry:{q}:protected"), 0);
	cr_assert_eq(h_redis_int(&d, "HGET ferry:{q}:stats protected_lost"), 0);
	/* the application was never refused a write */
	h_churn_stop(&churn);
	cr_assert_eq(churn.errors, 0, "%lld of the application's writes failed",
	    churn.errors);
	h_stop(&d);
}

Test(shared_redis, backlog_keeps_its_data_volatile_lru)
{
	backlog_keeps_its_data("volatile-lru");
}

Test(shared_redis, backlog_keeps_its_data_volatile_lfu)
{
	backlog_keeps_its_data("volatile-lfu");
}

Test(shared_redis, backlog_keeps_its_data_volatile_ttl)
{
	backlog_keeps_its_data("volatile-ttl");
}

/* Keys the sweep finds without a live job get the cache TTL, and go after
 * it: a key written into the cache space and never named by a job (a
 * producer that died before its job went in), the key of a job removed by
 * hand. The keys of waiting and dead jobs stay, protected; a key that
 * has a TTL already (an older ferryd's) is left to it. */
Test(shared_redis, orphans_are_swept_after_the_cache_ttl)
{
	char cmd[400], queues[600], flag[400];

	h_setup(&d, "cache_ttl = 2s\n", "");
	snprintf(flag, sizeof(flag), "%s/fail", d.dir);
	h_write_script(&d, "handler.sh", cmd, sizeof(cmd),
	    H_SH_EACH_JOB "  echo \"fail $id poisoned\"\ndone\n");
	snprintf(queues, sizeof(queues), "[queue q]\nworkers = 1\n"
	    "handler = exec\ncommand = %s\nmax_attempts = 1\n"
	    "[queue w]\nworkers = 0\n", cmd);
	h_config(&d, "cache_ttl = 2s\n", queues);
	/* a waiting job (queue w has no workers) and a job that will die */
	cr_assert_eq(ctl(NULL, "enqueue",
	    "--cache", "w", "{\"id\":\"waits\",\"data\":[1]}", NULL), 0);
	cr_assert_eq(ctl(NULL, "enqueue",
	    "--cache", "q", "{\"id\":\"dies\",\"data\":[2]}", NULL), 0);
	/* orphans: written, never named; named by a job deleted by hand */
	freeReplyObject(h_redis(&d, "SET ferry:{q}:cache:lost-producer x"));
	freeReplyObject(h_redis(&d, "SET ferry:{q}:cache:removed y"));
	freeReplyObject(h_redis(&d, "LPUSH ferry:{q}:scheduled "
	    "{\"id\":\"r\",\"cache_key\":\"ferry:{q}:cache:removed\"}"));
	freeReplyObject(h_redis(&d, "DEL ferry:{q}:scheduled"));
	/* an older ferryd's key, with its TTL */
	freeReplyObject(h_redis(&d, "SET ferry:{q}:cache:old z PX 600000"));
	h_start(&d, 1);
	h_wait_redis_int(&d, 1, "LLEN ferry:{q}:dead");
	h_wait_redis_int(&d, 2, "HGET ferry:{q}:stats orphans");
	cr_assert_gt(h_redis_int(&d, "PTTL ferry:{q}:cache:lost-producer"), 0);
	h_wait_redis_int(&d, 0, "EXISTS ferry:{q}:cache:lost-producer "
	    "ferry:{q}:cache:removed");
	h_sleep_ms(1000);       /* more passes: nothing else is touched */
	cr_assert_eq(h_redis_int(&d, "HGET ferry:{q}:stats orphans"), 2);
	cr_assert_gt(h_redis_int(&d, "PTTL ferry:{q}:cache:old"), 590000);
	redisReply *r = h_redis(&d, "KEYS ferry:{?}:cache:????????????????.*");
	cr_assert_eq(r->elements, 2, "the waiting and the dead job's keys");
	for (size_t i = 0; i < r->elements; i++)
		cr_assert_eq(h_redis_int(&d, "PTTL %s", r->element[i]->str), -1);
	freeReplyObject(r);
	h_stop(&d);
}

/* A protected key that disappears anyway (a DEL by hand here; FLUSHDB or
 * a policy changed to allkeys-* at run time alike) is found by the sweep,
 * counted once and logged at error level once for the lot; a key the
 * application gave a TTL again is made persistent again. All of ferry's
 * keys gone at once (FLUSHALL) is found by the next heartbeat. */
Test(shared_redis, lost_protected_keys_are_reported)
{
	char jobs[1024] = "", *p = jobs;

	h_setup(&d, NULL, "[queue q]\nworkers = 0\n"
	    "cache_key_prefixes = app:\n");
	for (int i = 0; i < 5; i++)
		p += sprintf(p, "{\"id\":\"j%d\",\"data\":[%d]}\n", i, i);
	cr_assert_eq(ctl(jobs, "enqueue",
	    "--cache", "q", "-", NULL), 0);
	freeReplyObject(h_redis(&d, "SET app:k v PX 60000"));
	cr_assert_eq(ctl(NULL, "enqueue", "q",
	    "{\"id\":\"a\",\"cache_key\":\"app:k\"}", NULL), 0);
	cr_assert_eq(h_redis_int(&d, "PTTL app:k"), -1);
	h_expect_log(&d, "protected cache key");
	h_start(&d, 0);
	redisReply *r = h_protected(&d, "q");
	cr_assert_eq(r->elements, 12);
	for (size_t i = 0, gone = 0; i < r->elements && gone < 3; i += 2)
		if (strncmp(r->element[i]->str, "ferry:", 6) == 0) {
			freeReplyObject(h_redis(&d, "DEL %s",
			    r->element[i]->str));
			gone++;
		}
	freeReplyObject(r);
	freeReplyObject(h_redis(&d, "SET app:k v2 PX 60000"));
	h_wait_redis_int(&d, 3, "HGET ferry:{q}:stats protected_lost");
	h_wait_redis_int(&d, -1, "PTTL app:k");
	h_wait_log(&d, "protected cache keys disappeared from Redis", 1);
	h_sleep_ms(6000);       /* another whole pass counts nothing again */
	cr_assert_eq(h_redis_int(&d, "HGET ferry:{q}:stats protected_lost"), 3);
	cr_assert_eq(h_count_in_file(d.log, "disappeared from Redis"), 1);
	cr_assert_eq(h_redis_int(&d, "HGET ferry:{q}:stats reprotected"), 1);
	h_wait_log(&d, "had a TTL again", 1);
	/* and the metrics say so */
	struct h_run m;
	h_ctl(&m, d.config, NULL, "metrics", NULL);
	h_run_expect(&m, 0);
	cr_assert_not_null(strstr(m.out, "\nferry_cache_protected_lost_total"
	    "{queue=\"q\"} 3\n"), "%s", m.out);
	cr_assert_not_null(strstr(m.out, "\nferry_cache_protected_keys"
	    "{queue=\"q\"} 3\n"), "%s", m.out);
	h_run_free(&m);
	/* everything gone at once: the master says so, once */
	h_expect_log(&d, "ferry's keys in redis at");
	freeReplyObject(h_redis(&d, "FLUSHALL"));
	h_wait_log(&d, "ferry's keys in redis at", 1);
	h_sleep_ms(3000);       /* more beats: said once */
	cr_assert_eq(h_count_in_file(d.log, "ferry's keys in redis at"), 1);
	h_stop(&d);
}

/* The keys ferry writes are checked a group at a time, a bounded number
 * of keys a step (sweep.lua): three groups of 1,000 keys take two steps,
 * and the group the first step did not get to is checked by the next one
 * (a pass would otherwise stop at the same field every time). A key lost
 * in each group: three found, each once. */
Test(shared_redis, lost_keys_of_every_group_are_found)
{
	size_t size = 3000 * 24;
	char *jobs = malloc(size), *p = jobs;

	h_setup(&d, NULL, "[queue q]\nworkers = 0\n");
	for (int i = 0; i < 3000; i++)
		p += sprintf(p, "{\"data\":[%d]}\n", i);
	cr_assert_eq(ctl(jobs, "enqueue", "--cache", "q", "-", NULL), 0);
	free(jobs);
	cr_assert_eq(h_redis_int(&d, "HLEN ferry:{q}:protected"), 3);
	redisReply *r = h_redis(&d, "HKEYS ferry:{q}:protected");
	for (size_t i = 0; i < r->elements; i++)
		freeReplyObject(h_redis(&d, "DEL %s.%d", r->element[i]->str,
		    (int)i * 7));
	freeReplyObject(r);
	h_expect_log(&d, "protected cache key");
	h_start(&d, 0);
	h_wait_redis_int(&d, 3, "HGET ferry:{q}:stats protected_lost");
	h_sleep_ms(6000);       /* another whole pass counts nothing again */
	cr_assert_eq(h_redis_int(&d, "HGET ferry:{q}:stats protected_lost"), 3);
	r = h_protected(&d, "q");
	cr_assert_eq(r->elements, 2 * 3000);
	size_t gone = 0;
	for (size_t i = 0; i < r->elements; i += 2)
		gone += strcmp(r->element[i]->str + strlen(r->element[i]->str) -
		    2, ".?") == 0;
	cr_assert_eq(gone, 3);
	freeReplyObject(r);
	h_stop(&d);
}

/* Jobs of one id (in one call and in two), and byte-identical jobs, each
 * carry their own data in a key of their own: each value is written
 * exactly once. A dead job's data survives a later job of its id, and its
 * dead retry writes it. */
static void
jobs_of_one_id_keep_their_own_data(const char *pipeline)
{
	char queues[300];

	snprintf(queues, sizeof(queues), "[queue q]\nworkers = 1\n"
	    "handler = postgres\ntable = t\npipeline = %s\n", pipeline);
	h_setup_pg(&d, queues, "CREATE TABLE t (id int, v text, CONSTRAINT "
	    "no_poison CHECK (v <> 'poison'))", (const char *)NULL);
	cr_assert_eq(ctl("{\"id\":7,\"data\":[{\"id\":7,\"v\":\"first\"}]}\n"
	    "{\"id\":7,\"data\":[{\"id\":7,\"v\":\"second\"}]}\n"
	    "{\"id\":8,\"data\":[{\"id\":8,\"v\":\"twin\"}]}\n"
	    "{\"id\":8,\"data\":[{\"id\":8,\"v\":\"twin\"}]}\n"
	    "{\"id\":9,\"data\":[{\"id\":9,\"v\":\"poison\"}]}\n", "enqueue",
	    "--cache", "q", "-", NULL), 0);
	cr_assert_eq(ctl("{\"id\":7,\"data\":[{\"id\":7,\"v\":\"third\"}]}\n",
	    "enqueue", "--cache", "q", "-", NULL), 0);
	h_start(&d, 1);
	h_wait_redis_int(&d, 1, "LLEN ferry:{q}:dead");
	h_wait_redis_int(&d, 5, "HGET ferry:{q}:stats done");
	/* a later job of the dead one's id */
	cr_assert_eq(ctl(NULL, "enqueue", "--cache", "q",
	    "{\"id\":9,\"data\":[{\"id\":9,\"v\":\"later\"}]}", NULL), 0);
	h_wait_redis_int(&d, 6, "HGET ferry:{q}:stats done");
	cr_assert_eq(h_pg_int(&d, "SELECT count(*) FROM t"), 6);
	cr_assert_eq(h_pg_int(&d, "SELECT count(*) FROM t WHERE id = 7 AND "
	    "v IN ('first', 'second', 'third')"), 3);
	cr_assert_eq(h_pg_int(&d, "SELECT count(DISTINCT v) FROM t WHERE "
	    "id = 7"), 3);
	cr_assert_eq(h_pg_int(&d, "SELECT count(*) FROM t WHERE v = 'twin'"),
	    2);
	cr_assert_eq(h_pg_int(&d, "SELECT count(*) FROM t WHERE v = 'later'"),
	    1);
	/* the dead job's data is still there, protected, and whole */
	redisReply *r = h_protected(&d, "q");
	cr_assert_eq(r->elements, 2);
	redisReply *v = h_redis(&d, "GET %s", r->element[0]->str);
	/* after the mark of its job (its document's SHA-1 and ':') */
	cr_assert(v->len > 41 && v->str[40] == ':', "%s", v->str);
	cr_assert_str_eq(v->str + 41, "[{\"id\":9,\"v\":\"poison\"}]");
	freeReplyObject(v);
	freeReplyObject(r);
	h_pg_exec(&d, "ALTER TABLE t DROP CONSTRAINT no_poison");
	cr_assert_eq(ctl(NULL, "dead", "retry", "q", "9", NULL), 0);
	h_wait_redis_int(&d, 7, "HGET ferry:{q}:stats done");
	cr_assert_eq(h_pg_int(&d, "SELECT count(*) FROM t WHERE v = 'poison'"),
	    1);
	cr_assert_eq(h_pg_int(&d, "SELECT count(*) FROM t"), 7);
	cr_assert_eq(h_redis_int(&d, "EXISTS ferry:{q}:protected"), 0);
	r = h_redis(&d, "KEYS ferry:{q}:cache:*");
	cr_assert_eq(r->elements, 0);
	freeReplyObject(r);
	h_stop(&d);
}

Test(shared_redis, jobs_of_one_id_keep_their_own_data)
{
	jobs_of_one_id_keep_their_own_data("no");
}

Test(shared_redis, jobs_of_one_id_keep_their_own_data_pipelined)
{
	jobs_of_one_id_keep_their_own_data("yes");
}

/* With the cache a job keeps the members the sink reads of it: a cached
 * delete deletes its row, a cached routed job reaches its table. A job
 * without "data" is refused with the cache, saying why. */
Test(shared_redis, cached_jobs_keep_what_the_sink_reads)
{
	struct h_run r;

	h_setup(&d, NULL, "");
	h_config(&d, h_pg_start(&d), "[queue u]\nworkers = 1\n"
	    "handler = postgres\ntable = items\nmode = upsert\nkey = id\n"
	    "[queue r]\nworkers = 1\nhandler = postgres\n"
	    "tables = orders, lines\ntable_member = table\n");
	h_pg_exec(&d, "CREATE TABLE items (id int PRIMARY KEY, v text)");
	h_pg_exec(&d, "CREATE TABLE orders (id int, total int)");
	h_pg_exec(&d, "CREATE TABLE lines (order_id int, line int)");
	cr_assert_eq(ctl(NULL, "init-db", NULL), 0);
	cr_assert_eq(ctl(NULL, "enqueue", "--cache", "u", "{\"id\":\"i1\","
	    "\"data\":[{\"id\":42,\"v\":\"a\"},{\"id\":43,\"v\":\"b\"}]}", NULL),
	    0);
	h_start(&d, 2);
	h_wait_pg_int(&d, 2, "SELECT count(*) FROM items");
	cr_assert_eq(ctl(NULL, "enqueue", "--cache", "u", "{\"id\":\"d1\","
	    "\"op\":\"delete\",\"data\":{\"id\":42}}", NULL), 0);
	cr_assert_eq(ctl(NULL, "enqueue", "--cache", "r", "{\"id\":\"l1\","
	    "\"table\":\"lines\",\"data\":[{\"order_id\":1,\"line\":1}]}", NULL),
	    0);
	h_wait_pg_int(&d, 1, "SELECT count(*) FROM items");
	h_wait_pg_int(&d, 1, "SELECT count(*) FROM lines");
	cr_assert_eq(h_pg_int(&d, "SELECT id FROM items"), 43);
	char *v = h_pg_text(&d, "SELECT v FROM items");
	cr_assert_str_eq(v, "b", "the other row was not touched");
	free(v);
	cr_assert_eq(h_pg_int(&d, "SELECT count(*) FROM orders"), 0);
	/* a bare document: refused, nothing pushed */
	h_ctl(&r, d.config, NULL, "enqueue", "--cache", "u",
	    "{\"op\":\"delete\",\"id\":43}", NULL);
	cr_assert_eq(r.status, 65, "%s", r.err);
	cr_assert_not_null(strstr(r.err, "a job without \"data\" cannot be "
	    "cached: its members are its row and also what ferry reads of the "
	    "job (op, the table member)"), "%s", r.err);
	h_run_free(&r);
	cr_assert_eq(h_redis_int(&d, "HGET ferry:{u}:stats dead"), 0);
	cr_assert_eq(h_redis_int(&d, "HGET ferry:{r}:stats dead"), 0);
	h_stop(&d);
}

/* Refused while what Redis cannot evict is over memory_refuse_percent (a
 * backlog here: the cache beside it does not count), and accepted again
 * as soon as the queue drains below the mark. */
Test(shared_redis, refused_producer_goes_through_once_the_queue_drains)
{
	struct h_churn_opts co = { "app:cache:", 4096, 60000, 4 << 20 };
	struct h_run r;
	char *jobs = malloc(4000 * 1100 + 1), *p = jobs;

	h_setup(&d, "memory_warn_percent = 40\nmemory_refuse_percent = 50\n",
	    "[queue q]\nworkers = 1\n"
	    "batch_size = 500\n");
	freeReplyObject(h_redis(&d, "CONFIG SET maxmemory 16mb"));
	freeReplyObject(h_redis(&d, "CONFIG SET maxmemory-policy volatile-lru"));
	cr_assert_eq(h_churn_start(&churn, d.redis.port, &co), 0);
	while (info_int("stats", "evicted_keys") < 100)
		h_sleep_ms(100);
	/* the cache is full: accepted */
	cr_assert_eq(ctl(NULL, "enqueue", "q", "{\"n\":0}", NULL), 0);
	/* a backlog of 10 MB of jobs, pushed past the script */
	for (int i = 0; i < 10; i++)
		freeReplyObject(h_redis(&d, "EVAL %s 1 ferry:{q}:ready",
		    "for i = 1, 1000 do redis.call('LPUSH', KEYS[1], "
		    "'{\"pad\":\"' .. string.rep('p', 1000) .. '\"}') end"));
	h_ctl(&r, d.config, NULL, "enqueue", "q", "{\"n\":1}", NULL);
	cr_assert_eq(r.status, 75, "%s", r.err);
	cr_assert_not_null(strstr(r.err, "what redis cannot evict is "), "%s",
	    r.err);
	cr_assert_not_null(strstr(r.err, "queue q holds "), "%s", r.err);
	h_run_free(&r);
	/* the drain: the producer, retrying, goes through once it is done */
	h_start(&d, 1);
	long long start = h_now_ms(), accepted = 0;
	for (int i = 0; i < 4000; i++)
		p += sprintf(p, "{\"n\":%d,\"pad\":\"%01000d\"}\n", i, 0);
	while (h_now_ms() - start < H_DEADLINE_MS) {
		h_ctl(&r, d.config, jobs, "enqueue", "-q", "q", "-", NULL);
		int st = r.status;
		h_run_free(&r);
		if (st == 0) {
			accepted = h_now_ms();
			break;
		}
		cr_assert_eq(st, 75);
		h_sleep_ms(100);
	}
	cr_assert_gt(accepted, 0, "still refused after the drain");
	h_wait_redis_int(&d, 1 + 10000 + 4000, "HGET ferry:{q}:stats done");
	free(jobs);
	h_churn_stop(&churn);
	h_stop(&d);
}

/* A job pushed past the enqueue script (a plain LPUSH) names a key with
 * the application's TTL: protected from its first retry on, so its
 * backoff spends no TTL; deleted when it is done. */
Test(shared_redis, raw_job_key_is_protected_from_its_first_retry)
{
	char cmd[400], queues[600], flag[400];

	h_setup(&d, NULL, "");
	snprintf(flag, sizeof(flag), "%s/fail", d.dir);
	h_write_script(&d, "handler.sh", cmd, sizeof(cmd),
	    "while IFS= read -r line; do\n"
	    "  if [ -e %s ]; then echo \"retry raw once more\"; "
	    "else echo \"ok raw\"; fi\ndone\n", flag);
	h_write_file(flag, "\n");
	snprintf(queues, sizeof(queues), "[queue q]\nworkers = 1\n"
	    "handler = exec\ncommand = %s\nbackoff_base_ms = 2s\n"
	    "backoff_max_ms = 2s\n", cmd);
	h_config(&d, NULL, queues);
	freeReplyObject(h_redis(&d, "SET ferry:{q}:cache:raw v PX 600000"));
	freeReplyObject(h_redis(&d, "LPUSH ferry:{q}:ready "
	    "{\"id\":\"raw\",\"cache_key\":\"ferry:{q}:cache:raw\"}"));
	h_start(&d, 1);
	h_wait_redis_int(&d, 1, "HGET ferry:{q}:stats retried");
	cr_assert_eq(h_redis_int(&d, "PTTL ferry:{q}:cache:raw"), -1);
	cr_assert_eq(h_redis_int(&d, "HEXISTS ferry:{q}:protected "
	    "ferry:{q}:cache:raw"), 1);
	unlink(flag);
	h_wait_redis_int(&d, 1, "HGET ferry:{q}:stats done");
	cr_assert_eq(h_redis_int(&d, "EXISTS ferry:{q}:cache:raw "
	    "ferry:{q}:protected"), 0);
	h_stop(&d);
}
