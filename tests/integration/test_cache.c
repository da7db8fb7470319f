/* test_cache.c - cache keys and chunks through real ferryd workers: a job's
 * cache key is read for its handler, deleted when it succeeds, made
 * persistent when it dies, reported when gone; big row arrays are split
 * into chunks that all arrive once; dead entries beyond dead_max are
 * archived before they are trimmed. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "job.h"

static struct ferryd d;
static int nknown;      /* cache keys learnt (learn) */

static void
teardown(void)
{
	h_teardown(&d);
	nknown = 0;
}

TestSuite(cache, .fini = teardown, .timeout = 600);

/* Run `ferryctl -c d.config ARGS...` with `input` on stdin; its exit
 * status, its stdout (malloc'd) when asked; stderr goes to ours. */
static int
ctl(const char *input, char **out, ...)
{
	va_list ap;
	int status;

	va_start(ap, out);
	status = h_ctl_out_v(d.config, input, out, ap);
	va_end(ap);
	return status;
}

/* An exec handler that records each line in DIR/lines.txt and fails the
 * jobs whose line holds "fail-me" while DIR/fail exists (every job when
 * `all`). */
static void
write_handler(char *cmd, size_t size, bool all)
{
	snprintf(cmd, size, "%s/handler.sh", d.dir);
	h_write_file(cmd,
	    "#!/bin/sh\n"
	    "while IFS= read -r line; do\n"
	    "  printf '%%s\\n' \"$line\" >> %s/lines.txt\n"
	    "  id=${line#*\\\"id\\\":\\\"}; id=${id%%%%\\\"*}\n"
	    "  case \"$line\" in *%s*) bad=1;; *) bad=0;; esac\n"
	    "  if [ $bad = 1 ] && [ -e %s/fail ]; then echo \"fail $id boom\";\n"
	    "  else echo \"ok $id\"; fi\n"
	    "done\n", d.dir, all ? "" : "fail-me", d.dir);
	chmod(cmd, 0755);
}

static const char *
dead_reason(const char *id)
{
	static char reason[256];
	json_t *dead = h_dead_entries(&d, "q");

	reason[0] = '\0';
	for (size_t i = 0; i < json_array_size(dead); i++) {
		json_t *e = json_array_get(dead, i);
		if (strcmp(h_jstr(e, "id"), id) == 0)
			snprintf(reason, sizeof(reason), "%s",
			    h_jstr(e, "reason"));
	}
	json_decref(dead);
	return reason;
}

/* The cache keys of ferryctl enqueue --cache ("ferry:{q}:cache:<16
 * hex>.<n>") name no job: the keys each job named, found in the jobs
 * waiting in ready, requeue, delayed, scheduled or dead, are remembered
 * (a key deleted with its job is still asked about later). */
#define KNOWN_MAX 64
static struct known_key {
	char id[64];
	char key[128];
} known[KNOWN_MAX];

static void
learn_doc(const char *text)
{
	json_t *root = json_loads(text, JSON_DECODE_ANY, NULL);
	json_t *o = json_object_get(root, "job");   /* a wrapper, an entry */

	if (!json_is_object(o))
		o = root;
	const char *id = json_string_value(json_object_get(o, "id"));
	const char *key = json_string_value(json_object_get(o, "cache_key"));
	bool seen = false;
	for (int i = 0; id != NULL && key != NULL && i < nknown; i++)
		seen = seen || strcmp(known[i].key, key) == 0;
	if (id != NULL && key != NULL && !seen && nknown < KNOWN_MAX) {
		snprintf(known[nknown].id, sizeof(known[0].id), "%s", id);
		snprintf(known[nknown].key, sizeof(known[0].key), "%s", key);
		nknown++;
	}
	json_decref(root);
}

static void
learn(void)
{
	const char *lists[] = { "LRANGE ferry:{q}:ready 0 -1",
	    "LRANGE ferry:{q}:requeue 0 -1", "LRANGE ferry:{q}:dead 0 -1",
	    "ZRANGE ferry:{q}:delayed 0 -1", "ZRANGE ferry:{q}:scheduled 0 -1" };

	for (size_t l = 0; l < sizeof(lists) / sizeof(lists[0]); l++) {
		redisReply *r = h_redis(&d, lists[l]);
		for (size_t i = 0; i < r->elements; i++) {
			const char *text = r->element[i]->str;
			const char *colon = strchr(text, ':');
			/* scheduled: "<us>-<n>:<document>" */
			learn_doc(l == 4 && colon != NULL ? colon + 1 : text);
		}
		freeReplyObject(r);
	}
}

/* How many of the cache keys job `id` named exist. */
static long long
keys_of(const char *id)
{
	long long n = 0;

	learn();
	for (int i = 0; i < nknown; i++)
		if (strcmp(known[i].id, id) == 0)
			n += h_redis_int(&d, "EXISTS %s", known[i].key);
	return n;
}

/* The one cache key of job `id` (static). */
static const char *
key_of(const char *id)
{
	const char *key = NULL;
	int n = 0;

	learn();
	for (int i = 0; i < nknown; i++)
		if (strcmp(known[i].id, id) == 0) {
			key = known[i].key;
			n++;
		}
	cr_assert_eq(n, 1, "job %s named %d cache keys", id, n);
	return key;
}

/* How many cache keys the protected hash counts. */
static long long
protected_keys(void)
{
	redisReply *r = h_protected(&d, "q");
	long long n = (long long)r->elements / 2;

	freeReplyObject(r);
	return n;
}

static void
setup_exec(const char *extra, bool fail_all)
{
	char cmd[400], queues[800], flag[400];

	h_setup(&d, NULL, "");
	write_handler(cmd, sizeof(cmd), fail_all);
	snprintf(queues, sizeof(queues), "[queue q]\nworkers = 1\n"
	    "handler = exec\ncommand = %s\n%s", cmd, extra);
	h_config(&d, NULL, queues);
	snprintf(flag, sizeof(flag), "%s/fail", d.dir);
	h_write_file(flag, "\n");
}

Test(cache, deleted_on_success_persisted_on_death_deleted_on_replay)
{
	char *out, flag[400], path[400];

	setup_exec("", false);
	cr_assert_eq(ctl(NULL, &out, "enqueue", "--cache", "q",
	    "{\"id\":\"a\",\"data\":{\"x\":1}}", NULL), 0);
	cr_assert_str_eq(out, "a\n");
	free(out);
	/* protected while the job lives: no TTL, whatever --cache-ttl says */
	cr_assert_eq(h_redis_int(&d, "PTTL %s", key_of("a")), -1);
	cr_assert_eq(h_protected_count(&d, "q", key_of("a")), 1);
	cr_assert_eq(ctl(NULL, NULL, "enqueue", "--cache-ttl", "600", "q",
	    "{\"id\":\"b\",\"data\":{\"fail-me\":1}}", NULL), 0);
	cr_assert_eq(h_redis_int(&d, "PTTL %s", key_of("b")), -1);
	freeReplyObject(h_redis(&d, "HSET ferry:{q}:cache:h f v"));
	freeReplyObject(h_redis(&d, "LPUSH ferry:{q}:ready %s %s %s",
	    "{\"id\":\"h\",\"cache_key\":\"ferry:{q}:cache:h\"}",
	    "{\"id\":\"c\",\"cache_key\":\"ferry:{q}:cache:c\"}",
	    "{\"id\":\"own\",\"cache_key\":\"ferry:{q}:ready\"}"));
	h_start(&d, 1);
	h_wait_redis_int(&d, 2, "HGET ferry:{q}:stats done");
	h_wait_redis_int(&d, 3, "LLEN ferry:{q}:dead");
	cr_assert_eq(keys_of("a"), 0);
	cr_assert_eq(h_redis_int(&d, "EXISTS ferry:{q}:cache:h"), 0);
	cr_assert_eq(h_redis_int(&d, "TTL %s", key_of("b")), -1);
	cr_assert_str_eq(dead_reason("b"), "failed by the handler");
	cr_assert_str_eq(dead_reason("c"), "cache key expired or evicted");
	cr_assert_str_eq(dead_reason("own"), "cache_key \"ferry:{q}:ready\" is "
	    "outside the queue's cache space ferry:{q}:cache: and "
	    "cache_key_prefixes");
	cr_assert_eq(h_redis_int(&d, "HGET ferry:{q}:stats cache_missing"), 1);
	/* and in the metrics (refreshed every second) */
	char *m = NULL;
	long long end = h_now_ms() + H_DEADLINE_MS;
	do {
		free(m);
		h_sleep_ms(200);
		cr_assert_eq(ctl(NULL, &m, "metrics", NULL), 0);
	} while (strstr(m, "\nferry_jobs_cache_missing_total{queue=\"q\"} 1\n")
	    == NULL && h_now_ms() < end);
	cr_assert_not_null(strstr(m, "\nferry_jobs_cache_missing_total{queue="
	    "\"q\"} 1\n"), "%s", m);
	free(m);
	snprintf(path, sizeof(path), "%s/lines.txt", d.dir);
	cr_assert_eq(h_count_in_file(path, "\"cache\":\"{\\\"x\\\":1}\"}"), 1);
	cr_assert_eq(h_count_in_file(path, "\"cache\":{\"f\":\"v\"}}"), 1);

	/* replayed after the cause is fixed: succeeds, its key goes */
	snprintf(flag, sizeof(flag), "%s/fail", d.dir);
	unlink(flag);
	cr_assert_eq(ctl(NULL, NULL, "dead", "retry", "q", "b", NULL), 0);
	h_wait_redis_int(&d, 3, "HGET ferry:{q}:stats done");
	cr_assert_eq(keys_of("b"), 0);
	/* nothing protected, nothing counted, once every job is done */
	cr_assert_eq(h_redis_int(&d, "EXISTS ferry:{q}:protected"), 0);
	h_stop(&d);
}

/* The trust boundary: a job whose cache_key names a key outside the
 * queue's cache space and cache_key_prefixes is dead at once with a reason
 * naming the key, and the key is never read (its idle time keeps growing),
 * deleted or made persistent; keys under an allowed prefix work like the
 * queue's own. ferryctl enqueue refuses what the worker would refuse. */
Test(cache, foreign_cache_key_is_dead_and_untouched)
{
	char path[400];
	struct h_run r;

	setup_exec("cache_key_prefixes = app:cache:, other:\n", false);
	freeReplyObject(h_redis(&d, "SET app:session:1 secret PX 600000"));
	freeReplyObject(h_redis(&d, "SET app:cachex secret2 PX 600000"));
	freeReplyObject(h_redis(&d, "SET app:cache:7 {\"x\":7} PX 600000"));
	freeReplyObject(h_redis(&d, "SET app:cache:8 fail-me PX 600000"));
	freeReplyObject(h_redis(&d, "HSET other:h f v"));
	long long set_at = h_now_ms();

	cr_assert_eq(h_ctl(&r, d.config, NULL, "enqueue", "q",
	    "{\"id\":\"x\",\"cache_key\":\"app:session:1\"}", NULL), 65,
	    "%s", r.err);
	cr_assert_str_eq(r.err, "ferryctl: the job is not valid: cache_key "
	    "\"app:session:1\" is outside the queue's cache space "
	    "ferry:{q}:cache: and cache_key_prefixes\n"
	    "ferryctl: 1 invalid job; nothing was pushed to queue q\n");
	h_run_free(&r);
	cr_assert_eq(h_ctl(&r, d.config, NULL, "enqueue", "q",
	    "{\"id\":\"allowed\",\"cache_key\":\"app:cache:7\"}", NULL), 0,
	    "%s", r.err);
	h_run_free(&r);
	/* producers that bypass ferryctl */
	freeReplyObject(h_redis(&d, "LPUSH ferry:{q}:ready %s %s %s %s",
	    "{\"id\":\"foreign\",\"cache_key\":\"app:session:1\"}",
	    "{\"id\":\"lookalike\",\"cache_key\":\"app:cachex\"}",
	    "{\"id\":\"allowed-dead\",\"cache_key\":\"app:cache:8\"}",
	    "{\"id\":\"hash\",\"cache_key\":\"other:h\"}"));
	h_sleep_ms(2100);       /* OBJECT IDLETIME counts whole seconds */
	h_start(&d, 1);
	h_wait_redis_int(&d, 2, "HGET ferry:{q}:stats done");
	h_wait_redis_int(&d, 3, "LLEN ferry:{q}:dead");

	cr_assert_str_eq(dead_reason("foreign"), "cache_key \"app:session:1\" "
	    "is outside the queue's cache space ferry:{q}:cache: and "
	    "cache_key_prefixes");
	cr_assert_str_eq(dead_reason("lookalike"), "cache_key \"app:cachex\" "
	    "is outside the queue's cache space ferry:{q}:cache: and "
	    "cache_key_prefixes");
	cr_assert_str_eq(dead_reason("allowed-dead"), "failed by the handler");
	/* untouched: never read (TYPE or GET would reset the idle time),
	 * same value, still expiring */
	long long idle_s = (h_now_ms() - set_at) / 1000 - 1;
	cr_assert_geq(h_redis_int(&d, "OBJECT IDLETIME app:session:1"), idle_s);
	cr_assert_geq(h_redis_int(&d, "OBJECT IDLETIME app:cachex"), idle_s);
	long long pttl = h_redis_int(&d, "PTTL app:session:1");
	cr_assert(pttl > 0 && pttl <= 600000 - (h_now_ms() - set_at) + 50,
	    "PTTL %lld", pttl);
	cr_assert_gt(h_redis_int(&d, "PTTL app:cachex"), 0);
	redisReply *v = h_redis(&d, "GET app:session:1");
	cr_assert_str_eq(v->str, "secret");
	freeReplyObject(v);
	/* an allowed prefix works end to end: read into the handler's line,
	 * deleted when done, made persistent when dead */
	snprintf(path, sizeof(path), "%s/lines.txt", d.dir);
	cr_assert_eq(h_count_in_file(path, "\"cache\":\"{\\\"x\\\":7}\"}"), 1);
	cr_assert_eq(h_count_in_file(path, "\"cache\":{\"f\":\"v\"}}"), 1);
	cr_assert_eq(h_count_in_file(path, "app:session:1"), 0);
	cr_assert_eq(h_redis_int(&d, "EXISTS app:cache:7"), 0);
	cr_assert_eq(h_redis_int(&d, "EXISTS other:h"), 0);
	cr_assert_eq(h_redis_int(&d, "PTTL app:cache:8"), -1);
	/* purging the dead jobs leaves the foreign keys alone too */
	cr_assert_eq(ctl(NULL, NULL, "dead", "purge", "q", "--all", NULL), 0);
	cr_assert_eq(h_redis_int(&d, "EXISTS app:session:1"), 1);
	cr_assert_eq(h_redis_int(&d, "EXISTS app:cachex"), 1);
	cr_assert_eq(h_redis_int(&d, "EXISTS app:cache:8"), 0);
	h_stop(&d);
}

/* {"id":ID,"data":[{"r":first},..,{"r":first+n-1}]} and a newline. */
static char *
rows_doc(const char *id, int first, int n)
{
	char *doc = malloc((size_t)n * 16 + 64), *p = doc;

	p += sprintf(p, "{\"id\":\"%s\",\"data\":[", id);
	for (int i = 0; i < n; i++)
		p += sprintf(p, "%s{\"r\":%d}", i ? "," : "", first + i);
	sprintf(p, "]}\n");
	return doc;
}

/* Count each {"r":i} in `rows` (a JSON array) into seen. */
static void
count_rows(json_t *rows, int *seen, int n)
{
	for (size_t k = 0; k < json_array_size(rows); k++) {
		json_int_t r = json_integer_value(json_object_get(
		    json_array_get(rows, k), "r"));
		if (r >= 0 && r < n)
			seen[r]++;
	}
}

/* 10,001 rows in chunks of 1000: 11 jobs, every row handled once; and
 * 2,500 more with --cache: 3 jobs whose rows come from cache keys. */
Test(cache, chunks_arrive_once)
{
	char *out, *doc, path[400];
	static int seen[12501];

	setup_exec("", false);
	doc = rows_doc("big", 0, 10001);
	cr_assert_eq(ctl(doc, &out, "enqueue", "--chunk-rows", "1000", "q", "-",
	    NULL), 0);
	free(doc);
	/* the first chunk goes by the document's id, the others by their
	 * first row */
	cr_assert_eq(strncmp(out, "big\nbig:1000\n", 13), 0, "%s", out);
	cr_assert_not_null(strstr(out, "big:10000\n"));
	cr_assert_null(strstr(out, "big:11000"));
	free(out);
	cr_assert_eq(h_redis_int(&d, "LLEN ferry:{q}:ready"), 11);
	doc = rows_doc("cached", 10001, 2500);
	cr_assert_eq(ctl(doc, NULL, "enqueue", "--cache", "--chunk-rows", "1000",
	    "q", "-", NULL), 0);
	free(doc);
	cr_assert_eq(keys_of("cached") + keys_of("cached:1000") +
	    keys_of("cached:2000"), 3);
	h_start(&d, 1);
	h_wait_redis_int(&d, 14, "HGET ferry:{q}:stats done");
	cr_assert_eq(h_redis_int(&d, "HGET ferry:{q}:stats enqueued"), 14);
	cr_assert_eq(keys_of("cached") + keys_of("cached:1000") +
	    keys_of("cached:2000"), 0);
	snprintf(path, sizeof(path), "%s/lines.txt", d.dir);
	char *text = h_read_file(path);
	for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
		json_t *l = json_loads(line, 0, NULL);
		const char *cache = json_string_value(json_object_get(l,
		    "cache"));
		json_t *c = cache ? json_loads(cache, 0, NULL) : NULL;
		count_rows(c ? c : json_object_get(json_object_get(l, "job"),
		    "data"), seen, 12501);
		json_decref(c);
		json_decref(l);
	}
	free(text);
	for (int i = 0; i < 12501; i++)
		cr_assert_eq(seen[i], 1, "row %d arrived %d times", i, seen[i]);
	h_stop(&d);
}

/* dead_max 5: the 7 oldest of 12 dead jobs go to the archive with their
 * cache data, fsynced, and only then leave Redis with their keys. */
Test(cache, dead_entries_archived_beyond_dead_max)
{
	char extra[512], path[400], input[2048] = "", *p = input;

	snprintf(path, sizeof(path), "/tmp/ferry-archive-%d.jsonl",
	    (int)getpid());
	unlink(path);
	snprintf(extra, sizeof(extra), "dead_max = 5\ndead_archive = %s\n",
	    path);
	setup_exec(extra, true);
	for (int i = 0; i < 12; i++)
		p += sprintf(p, "{\"id\":\"j%d\",\"data\":{\"i\":%d}}\n", i, i);
	cr_assert_eq(ctl(input, NULL, "enqueue", "--cache", "q", "-", NULL), 0);
	h_start(&d, 1);
	h_wait_redis_int(&d, 12, "HGET ferry:{q}:stats dead");
	h_wait_redis_int(&d, 5, "LLEN ferry:{q}:dead");
	h_wait_log(&d, "archived", 1);
	char *text = h_read_file(path);
	int lines = 0;
	for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
		json_t *l = json_loads(line, 0, NULL);
		cr_assert_not_null(l, "not JSON: %s", line);
		cr_assert_str_eq(h_jstr(l, "queue"),
		    "q");
		cr_assert_str_eq(h_jstr(l, "reason"),
		    "failed by the handler");
		char want[32];
		snprintf(want, sizeof(want), "{\"i\":%d}", lines);
		cr_assert_str_eq(h_jstr(l, "cache"),
		    want, "line %d: %s", lines, line);
		json_decref(l);
		lines++;
	}
	free(text);
	unlink(path);
	cr_assert_eq(lines, 7);
	cr_assert_eq(keys_of("j0") + keys_of("j6"), 0);
	cr_assert_eq(h_redis_int(&d, "TTL %s", key_of("j7")), -1);
	cr_assert_eq(h_redis_int(&d, "TTL %s", key_of("j11")), -1);
	cr_assert_eq(protected_keys(), 5);
	h_stop(&d);
}

Test(cache, dead_entries_kept_without_archive)
{
	setup_exec("dead_max = 2\n", true);
	cr_assert_eq(ctl("{\"id\":1}\n{\"id\":2}\n{\"id\":3}\n{\"id\":4}\n",
	    NULL, "enqueue", "q", "-", NULL), 0);
	h_start(&d, 1);
	h_wait_redis_int(&d, 4, "LLEN ferry:{q}:dead");
	h_wait_log(&d, "over dead_max 2; none is trimmed because dead_archive "
	    "is not set", 1);
	cr_assert_eq(h_redis_int(&d, "LLEN ferry:{q}:dead"), 4);
	h_stop(&d);
}

/* handler = postgres: rows from a cached JSON string and from a hash; a
 * cached list cannot be rows. */
Test(cache, postgres_rows_from_cache_keys)
{
	h_setup(&d, NULL, "");
	h_config(&d, h_pg_start(&d), "[queue q]\nworkers = 1\n"
	    "handler = postgres\ntable = t\n");
	h_pg_exec(&d, "CREATE TABLE t (a int, b text)");
	cr_assert_eq(ctl(NULL, NULL, "init-db", NULL), 0);
	cr_assert_eq(ctl(NULL, NULL, "enqueue", "--cache", "q", "{\"id\":\"p\","
	    "\"data\":[{\"a\":1,\"b\":\"x\"},{\"a\":2,\"b\":\"y\"}]}", NULL), 0);
	freeReplyObject(h_redis(&d, "HSET ferry:{q}:cache:h a 3 b z"));
	freeReplyObject(h_redis(&d, "RPUSH ferry:{q}:cache:l {\"a\":4}"));
	freeReplyObject(h_redis(&d, "LPUSH ferry:{q}:ready %s %s",
	    "{\"id\":\"h\",\"cache_key\":\"ferry:{q}:cache:h\"}",
	    "{\"id\":\"l\",\"cache_key\":\"ferry:{q}:cache:l\"}"));
	h_start(&d, 1);
	h_wait_redis_int(&d, 2, "HGET ferry:{q}:stats done");
	h_wait_redis_int(&d, 1, "LLEN ferry:{q}:dead");
	cr_assert_eq(h_pg_int(&d, "SELECT count(*) FROM t"), 3);
	cr_assert_eq(h_pg_int(&d, "SELECT sum(a) FROM t"), 6);
	char *b = h_pg_text(&d, "SELECT b FROM t WHERE a = 3");
	cr_assert_str_eq(b, "z");
	free(b);
	cr_assert(strstr(dead_reason("l"), "cache key holds a list") != NULL);
	cr_assert_eq(keys_of("p") + h_redis_int(&d, "EXISTS ferry:{q}:cache:h"),
	    0);
	cr_assert_eq(h_redis_int(&d, "TTL ferry:{q}:cache:l"), -1);
	h_stop(&d);
}

/* A settle that Redis lost after its batch committed (a restart with
 * appendfsync everysec, a failover): the worker's list and batch key come
 * back, and the worker, reconnected, resumes the batch, which its row
 * says committed: a replay. Job J's cache key expired meanwhile: J was
 * dead as "cache key expired or evicted" although written; now a job of a
 * resumed batch refused so is checked against the batch first: done. */
Test(cache, replay_of_a_lost_settle_after_the_cache_key_expired)
{
	const char *doc = "{\"id\":\"J\",\"cache_key\":\"ferry:{q}:cache:j\"}";

	h_setup(&d, NULL, "");
	h_config(&d, h_pg_start(&d), "[queue q]\nworkers = 1\n"
	    "handler = postgres\ntable = t\npipeline = no\n");
	h_pg_exec(&d, "CREATE TABLE t (a int, b text)");
	cr_assert_eq(ctl(NULL, NULL, "init-db", NULL), 0);
	freeReplyObject(h_redis(&d, "HSET ferry:{q}:cache:j a 7 b j"));
	freeReplyObject(h_redis(&d, "LPUSH ferry:{q}:ready %s", doc));
	h_start(&d, 1);
	h_wait_redis_int(&d, 1, "HGET ferry:{q}:stats done");
	cr_assert_eq(h_pg_int(&d, "SELECT count(*) FROM ferry_batches"), 1);
	char *key = h_pg_text(&d, "SELECT key FROM ferry_batches");
	redisReply *r = h_redis(&d, "HKEYS ferry:{q}:owners");
	cr_assert_eq(r->elements, 1);
	char *worker = strdup(r->element[0]->str);
	freeReplyObject(r);
	/* what Redis held before the lost settle, the cache key gone */
	freeReplyObject(h_redis(&d, "RPUSH ferry:{q}:proc:%s %s", worker, doc));
	char kind_key[200];
	snprintf(kind_key, sizeof(kind_key), "r %s", key);   /* batch_of */
	freeReplyObject(h_redis(&d, "HSET ferry:{q}:bkeys %s %s", worker,
	    kind_key));
	freeReplyObject(h_redis(&d, "CLIENT KILL TYPE normal SKIPME yes"));
	h_wait_log(&d, "resuming a batch of 1 jobs", 1);
	h_wait_redis_int(&d, 2, "HGET ferry:{q}:stats done");
	cr_assert_eq(h_redis_int(&d, "LLEN ferry:{q}:dead"), 0);
	cr_assert_eq(h_pg_int(&d, "SELECT count(*) FROM t WHERE a = 7"), 1);
	cr_assert_eq(h_redis_int(&d, "LLEN ferry:{q}:proc:%s", worker), 0);
	free(worker);
	free(key);
	h_stop(&d);
}

/* Purging dead jobs deletes the cache keys they kept, and the entries
 * that protected them. */
Test(cache, purge_deletes_cache_keys)
{
	setup_exec("", true);
	cr_assert_eq(ctl("{\"id\":\"p0\",\"data\":0}\n{\"id\":\"p1\",\"data\":1}\n"
	    "{\"id\":\"p2\",\"data\":2}\n", NULL, "enqueue", "--cache", "q", "-",
	    NULL), 0);
	h_start(&d, 1);
	h_wait_redis_int(&d, 3, "LLEN ferry:{q}:dead");
	cr_assert_eq(h_redis_int(&d, "TTL %s", key_of("p0")), -1);
	cr_assert_eq(protected_keys(), 3);
	cr_assert_eq(ctl(NULL, NULL, "dead", "purge", "q", "p0", NULL), 0);
	cr_assert_eq(keys_of("p0"), 0);
	cr_assert_eq(keys_of("p1") + keys_of("p2"), 2);
	cr_assert_eq(protected_keys(), 2);
	cr_assert_eq(ctl(NULL, NULL, "dead", "purge", "q", "--all", NULL), 0);
	cr_assert_eq(keys_of("p1") + keys_of("p2"), 0);
	cr_assert_eq(h_redis_int(&d, "LLEN ferry:{q}:dead"), 0);
	cr_assert_eq(h_redis_int(&d, "EXISTS ferry:{q}:protected"), 0);
	h_stop(&d);
}

/* The cache key job `id` names in an archive's text (its "job" is a
 * JSON string: \"id\":\"ID\",\"cache_key\":\"KEY\"). */
static void
archived_key(const char *text, const char *id, char *key, size_t size)
{
	char needle[128];

	snprintf(needle, sizeof(needle), "\\\"id\\\":\\\"%s\\\",\\\"cache_key\\\":"
	    "\\\"", id);
	const char *at = strstr(text, needle);
	cr_assert_not_null(at, "%s in %s", needle, text);
	at += strlen(needle);
	size_t n = strcspn(at, "\\");
	cr_assert_lt(n, size);
	snprintf(key, size, "%.*s", (int)n, at);
}

/* A cache value the worker would refuse is refused at enqueue. */
Test(cache, enqueue_refuses_oversized_cache_values)
{
	char doc[80] = "{\"id\":\"x\",\"data\":{\"q\":\"";

	/* 64 bytes, but its data escaped as a JSON string is 90 */
	for (int i = 0; i < 19; i++)
		strcat(doc, "\\\"");
	strcat(doc, "\"}}");
	cr_assert_eq(strlen(doc), 64);
	setup_exec("max_job_bytes = 64\n", false);
	cr_assert_eq(ctl(NULL, NULL, "enqueue", "--cache", "q", doc, NULL), 65);
	cr_assert_eq(keys_of("x"), 0);
	cr_assert_eq(h_redis_int(&d, "LLEN ferry:{q}:ready"), 0);
	cr_assert_eq(ctl(NULL, NULL, "enqueue", "--cache", "q", "{\"id\":\"y\","
	    "\"data\":{\"pad\":\"01234567890123456789\"}}", NULL), 0);
	h_stop(&d);
}

/* Entries archived beyond dead_max come back with `dead restore`: the jobs
 * with fresh counters, their cache keys recreated from the archive (a
 * string, a hash, a list), a key that exists again left alone; lines of
 * other queues skipped; a file with a line that is not an entry restores
 * nothing. */
Test(cache, archived_entries_are_restored)
{
	char extra[512], path[400], bad[420], input[2048] = "", *p = input, *out;

	/* the archive goes in a folder of its own (setup makes d.dir) */
	snprintf(path, sizeof(path), "/tmp/ferry-restore-%d.jsonl", (int)getpid());
	unlink(path);
	snprintf(extra, sizeof(extra), "dead_max = 2\ndead_archive = %s\n",
	    path);
	setup_exec(extra, true);
	/* first two jobs whose cache keys are a hash and a list */
	freeReplyObject(h_redis(&d, "HSET ferry:{q}:cache:h f v g w"));
	freeReplyObject(h_redis(&d, "RPUSH ferry:{q}:cache:l a b"));
	freeReplyObject(h_redis(&d, "LPUSH ferry:{q}:ready %s %s",
	    "{\"id\":\"h\",\"cache_key\":\"ferry:{q}:cache:h\"}",
	    "{\"id\":\"l\",\"cache_key\":\"ferry:{q}:cache:l\"}"));
	for (int i = 0; i < 6; i++)
		p += sprintf(p, "{\"id\":\"j%d\",\"data\":{\"i\":%d}}\n", i, i);
	cr_assert_eq(ctl(input, NULL, "enqueue", "--cache", "q", "-", NULL), 0);
	h_start(&d, 1);
	h_wait_redis_int(&d, 8, "HGET ferry:{q}:stats dead");
	h_wait_log(&d, "archived", 1);
	h_wait_redis_int(&d, 2, "LLEN ferry:{q}:dead");
	cr_assert_eq(h_count_in_file(path, "\"queue\":\"q\""), 6);
	cr_assert_eq(keys_of("j0") + h_redis_int(&d, "EXISTS ferry:{q}:cache:h "
	    "ferry:{q}:cache:l"), 0, "trimmed keys are gone");

	/* lines that are not entries: nothing is restored */
	snprintf(bad, sizeof(bad), "%s.bad", path);
	char *text = h_read_file(path);
	/* j0's and j1's own keys, as the archive names them */
	char j0_key[80], j1_key[80];
	archived_key(text, "j0", j0_key, sizeof(j0_key));
	archived_key(text, "j1", j1_key, sizeof(j1_key));
	h_write_file(bad, "%snot json\n{\"queue\":\"q\",\"job\":"
	    "\"{\\\"cache_key\\\":\\\"ferry:{q}:cache:z\\\"}\",\"cache\":5}\n",
	    text);
	cr_assert_eq(ctl(NULL, NULL, "dead", "restore", "q", bad, NULL), 65);
	cr_assert_eq(h_redis_int(&d, "HGET ferry:{q}:stats replayed"), 0);
	/* another queue's line is skipped; a line archived twice (by two
	 * hosts) is restored once; an existing key is left alone */
	char *again = strdup(text), *at = strstr(again, "\"archived\":");
	cr_assert_not_null(at);
	at[11] = at[11] == '9' ? '8' : '9';     /* another archive time */
	*strchr(again, '\n') = '\0';
	h_write_file(bad, "%s%s\n{\"queue\":\"other\",\"job\":\"{}\"}\n"
	    "{\"queue\":\"q\",\"archived\":1,\"batch\":\"old:9\",\"job\":"
	    "\"{\\\"id\\\":\\\"b9\\\"}\"}\n", text, again);
	free(again);
	free(text);
	unlink(path);
	/* newer data under j1's key, written for j1 (its mark: the SHA-1 of
	 * its document, as the enqueue wrote it) */
	char j1_doc[160], sha[41];
	snprintf(j1_doc, sizeof(j1_doc), "{\"id\":\"j1\",\"cache_key\":\"%s\"}",
	    j1_key);
	job_sha1_hex(j1_doc, strlen(j1_doc), sha);
	freeReplyObject(h_redis(&d, "SET %s %s:newer", j1_key, sha));
	char flag[400];                 /* the handler fails no more */
	snprintf(flag, sizeof(flag), "%s/fail", d.dir);
	unlink(flag);
	cr_assert_eq(ctl(NULL, &out, "dead", "restore", "q", bad, NULL), 0);
	unlink(bad);
	cr_assert_str_eq(out, "restored 7 jobs to queue q (5 cache keys "
	    "recreated, 1 already there); 1 repeated line restored once; 1 "
	    "entry of other queues skipped\n");
	free(out);
	h_wait_redis_int(&d, 7, "HGET ferry:{q}:stats done");
	cr_assert_eq(h_redis_int(&d, "HGET ferry:{q}:stats replayed"), 7);
	snprintf(path, sizeof(path), "%s/lines.txt", d.dir);
	cr_assert_eq(h_count_in_file(path, "\"cache\":\"{\\\"i\\\":0}\"}"), 2,
	    "j0 ran with its recreated cache (once dead, once restored)");
	cr_assert_eq(h_count_in_file(path, "\"cache\":\"newer\"}"), 1);
	cr_assert_eq(h_count_in_file(path, "\"cache\":{\"f\":\"v\",\"g\":\"w\"}}"),
	    2);
	cr_assert_eq(h_count_in_file(path, "\"cache\":[\"a\",\"b\"]}"), 2);
	/* done jobs took their keys with them */
	cr_assert_eq(h_redis_int(&d, "EXISTS %s %s ferry:{q}:cache:h "
	    "ferry:{q}:cache:l", j0_key, j1_key), 0);
	/* only the keys of the two jobs still dead stay protected */
	cr_assert_eq(h_redis_int(&d, "LLEN ferry:{q}:dead"), 2);
	cr_assert_eq(protected_keys(), 2);
	h_assert_queue_empty(&d, "q");
	h_stop(&d);
}
