/* test_ctl.c - ferryctl run as a subprocess against a real redis-server:
 * enqueue (one, many, all-or-nothing), stats, exit codes, and the dead-letter
 * tools on entries that a real ferryd dead-lettered. */
#include <criterion/criterion.h>
#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "job.h"

#define QUEUES "[queue q]\nworkers = 0\n[queue other]\nworkers = 0\n"

static struct ferryd d;

static void
teardown(void)
{
	h_teardown(&d);
}

TestSuite(ctl, .fini = teardown, .timeout = 300);

#define CTL(r, input, ...) \
	h_ctl((r), d.config, (input), __VA_ARGS__, (const char *)NULL)

static char *
redis_str(const char *fmt, const char *key)
{
	redisReply *r = h_redis(&d, fmt, key);
	char *s = strdup(r->type == REDIS_REPLY_STRING ? r->str : "(nil)");
	freeReplyObject(r);
	return s;
}

Test(ctl, enqueue_one_job)
{
	struct h_run r;
	char sha[41], want[48];

	h_setup(&d, NULL, QUEUES);
	CTL(&r, NULL, "enqueue", "q", "{\"id\":\"order-1\",\"n\":1}");
	h_run_expect(&r, 0);
	cr_assert_str_eq(r.out, "order-1\n");
	h_run_free(&r);
	CTL(&r, NULL, "enqueue", "q", "{\"n\":2}");
	h_run_expect(&r, 0);
	job_sha1_hex("{\"n\":2}", 7, sha);
	snprintf(want, sizeof(want), "%s\n", sha);
	cr_assert_str_eq(r.out, want, "a bare job is named by its SHA-1");
	h_run_free(&r);
	CTL(&r, NULL, "enqueue", "-q", "q", "{\"n\":3}");
	h_run_expect(&r, 0);
	cr_assert_str_eq(r.out, "");
	h_run_free(&r);
	cr_assert_eq(h_redis_int(&d, "LLEN ferry:{q}:ready"), 3);
	/* counted when a worker takes them (fetch.lua), not by ferryctl */
	cr_assert_eq(h_redis_int(&d, "EXISTS ferry:{q}:stats"), 0);
	char *first = redis_str("RPOP %s", "ferry:{q}:ready");
	cr_assert_str_eq(first, "{\"id\":\"order-1\",\"n\":1}");
	free(first);
	h_stop(&d);
}

static char *
numbered_jobs(int n, int bad_line)
{
	char *buf = malloc((size_t)n * 32 + 64), *p = buf;

	for (int i = 0, line = 1; i < n; i++, line++) {
		if (i % 1000 == 500) {
			p += sprintf(p, "\n");      /* empty lines are skipped */
			line++;
		}
		if (line == bad_line)
			p += sprintf(p, "not json\n");
		else
			p += sprintf(p, "{\"n\":%d}\n", i);
	}
	return buf;
}

/* redis_wait_replicas with no replica to acknowledge: the jobs are in the
 * queue, ferryctl says they reached 0 of 1 replicas and exits 3 (they are
 * not pushed again). */
Test(ctl, enqueue_short_of_replicas_exits_3)
{
	struct h_run r;

	h_setup(&d, "redis_wait_replicas = 1\nredis_wait_timeout = 100ms\n",
	    QUEUES);
	CTL(&r, "{\"n\":1}\n{\"n\":2}\n", "enqueue", "-q", "q", "-");
	h_run_expect(&r, 3);
	cr_assert(strstr(r.err, "ferryctl: 2 jobs are in queue q, but reached 0 "
	    "of 1 replicas within redis_wait_timeout (100 ms): a failover now "
	    "would lose them. Not pushed again (that could enqueue them twice)")
	    != NULL, "%s", r.err);
	h_run_free(&r);
	cr_assert_eq(h_redis_int(&d, "LLEN ferry:{q}:ready"), 2);
	h_stop(&d);
}

Test(ctl, enqueue_many_from_a_pipe)
{
	char *input = numbered_jobs(10000, 0), sha[41];
	struct h_run r;

	h_setup(&d, NULL, QUEUES);
	CTL(&r, input, "enqueue", "q", "-");
	h_run_expect(&r, 0);
	cr_assert_eq(h_count_lines(r.out), 10000);
	job_sha1_hex("{\"n\":0}", 7, sha);
	cr_assert_eq(strncmp(r.out, sha, 40), 0, "first id %.40s", r.out);
	cr_assert_eq(h_redis_int(&d, "LLEN ferry:{q}:ready"), 10000);
	char *oldest = redis_str("LINDEX %s -1", "ferry:{q}:ready");
	char *newest = redis_str("LINDEX %s 0", "ferry:{q}:ready");
	cr_assert_str_eq(oldest, "{\"n\":0}", "workers take jobs in order");
	cr_assert_str_eq(newest, "{\"n\":9999}");
	free(oldest);
	free(newest);
	h_run_free(&r);
	free(input);
	h_stop(&d);
}

Test(ctl, a_bad_line_pushes_nothing)
{
	char *input = numbered_jobs(3000, 2004);
	struct h_run r;

	h_setup(&d, NULL, QUEUES);
	CTL(&r, input, "enqueue", "q", "-");
	h_run_expect(&r, 65);
	cr_assert_not_null(strstr(r.err, "line 2004: malformed JSON"), "%s",
	    r.err);
	cr_assert_str_eq(r.out, "");
	h_run_free(&r);
	CTL(&r, NULL, "enqueue", "q", "[1,2]");
	h_run_expect(&r, 65);
	cr_assert_not_null(strstr(r.err, "not a JSON object"), "%s", r.err);
	h_run_free(&r);
	cr_assert_eq(h_redis_int(&d, "EXISTS ferry:{q}:ready"), 0);
	cr_assert_eq(h_redis_int(&d, "EXISTS ferry:{q}:stats"), 0);
	free(input);
	h_stop(&d);
}

static long long
json_at(json_t *root, const char *a, const char *b, const char *c)
{
	json_t *v = json_object_get(json_object_get(root, a), b);
	if (c != NULL)
		v = json_object_get(v, c);
	cr_assert(json_is_integer(v), "no integer %s.%s.%s", a, b, c ? c : "");
	return json_integer_value(v);
}

Test(ctl, stats_of_every_list_and_counter)
{
	struct h_run r;

	h_setup(&d, NULL, QUEUES);
	freeReplyObject(h_redis(&d, "LPUSH ferry:{q}:ready a b c"));
	freeReplyObject(h_redis(&d, "ZADD ferry:{q}:delayed 1 x"));
	freeReplyObject(h_redis(&d, "LPUSH ferry:{q}:dead e1 e2"));
	freeReplyObject(h_redis(&d, "HSET ferry:{q}:owners w1 m1"));
	freeReplyObject(h_redis(&d, "RPUSH ferry:{q}:proc:w1 j1 j2"));
	/* a worker handed back at 2026-12-02T01:33:57.123Z */
	freeReplyObject(h_redis(&d, "HSET ferry:{q}:owners w2 dead:1796175237123"));
	/* taken from ready by workers (the 3 in ready are added) */
	freeReplyObject(h_redis(&d, "HSET ferry:{q}:stats enqueued 7"));
	freeReplyObject(h_redis(&d, "HSET ferry:{q}:stats done 4"));
	/* jobs ever dead-lettered, not the 2 entries the list holds now */
	freeReplyObject(h_redis(&d, "HSET ferry:{q}:stats dead 5"));
	CTL(&r, NULL, "stats", "q");
	h_run_expect(&r, 0);
	for (const char *const *s = (const char *const[]){ "queue q\n",
	    "ready        3\n", "delayed      1\n", "dead         2\n",
	    "processing   2\n", "proc:w1 2 (master m1)\n", "proc:w2 0 (handed "
	    "back at 2026-12-02T01:33:57.123Z: the worker died or was stopped "
	    "and its jobs went back to the queue; its name is kept 30 s so that "
	    "it cannot fetch again)\n", "enqueued 10, done 4,"
	    " retried 0, deadlettered 5, recovered 0, replayed 0, "
	    "cache_missing 0, cache_orphans 0, protected_lost 0\n",
	    "memory       ", "; 0 protected cache keys (0 B)\n", NULL }; *s;
	    s++)
		cr_assert_not_null(strstr(r.out, *s), "no \"%s\" in:\n%s", *s,
		    r.out);
	cr_assert_null(strstr(r.out, "dead:"), "%s", r.out);
	cr_assert_null(strstr(r.out, "queue other"));
	h_run_free(&r);
	CTL(&r, NULL, "stats");
	h_run_expect(&r, 0);
	cr_assert(strstr(r.out, "queue q\n") && strstr(r.out, "queue other\n"));
	h_run_free(&r);
	CTL(&r, NULL, "stats", "--json", "q");
	h_run_expect(&r, 0);
	json_t *root = json_loads(r.out, 0, NULL);
	cr_assert_not_null(root, "not JSON: %s", r.out);
	cr_assert_eq(json_at(root, "q", "ready", NULL), 3);
	cr_assert_eq(json_at(root, "q", "delayed", NULL), 1);
	cr_assert_eq(json_at(root, "q", "dead", NULL), 2);
	cr_assert_eq(json_at(root, "q", "processing", NULL), 2);
	cr_assert_eq(json_at(root, "q", "counters", "enqueued"), 10);
	cr_assert_eq(json_at(root, "q", "counters", "deadlettered"), 5);
	cr_assert_eq(json_at(root, "q", "counters", "replayed"), 0);
	json_t *workers = json_object_get(json_object_get(root, "q"), "workers");
	json_t *w1 = json_object_get(workers, "w1");
	cr_assert_eq(json_integer_value(json_object_get(w1, "jobs")), 2);
	cr_assert_str_eq(h_jstr(w1, "master"), "m1");
	json_t *w2 = json_object_get(workers, "w2");
	cr_assert(json_is_null(json_object_get(w2, "master")));
	cr_assert_str_eq(h_jstr(w2, "handed_back"), "2026-12-02T01:33:57.123Z");
	json_decref(root);
	h_run_free(&r);
	h_stop(&d);
}

Test(ctl, unknown_queue_is_a_usage_error)
{
	struct h_run r;

	h_setup(&d, NULL, QUEUES);
	CTL(&r, NULL, "stats", "nope");
	h_run_expect(&r, 64);
	cr_assert_not_null(strstr(r.err, "\"nope\""), "%s", r.err);
	h_run_free(&r);
	CTL(&r, NULL, "enqueue", "nope", "{}");
	h_run_expect(&r, 64);
	h_run_free(&r);
	CTL(&r, NULL, "dead", "list", "nope");
	h_run_expect(&r, 64);
	h_run_free(&r);
	cr_assert_eq(h_redis_int(&d, "DBSIZE"), 0);
	h_stop(&d);
}

Test(ctl, unreachable_redis_names_the_address)
{
	char config[400], addr[64];
	int port = test_free_port();
	struct h_run r;

	h_setup(&d, NULL, QUEUES);
	snprintf(config, sizeof(config), "%s/down.ini", d.dir);
	h_write_file(config, "[ferryd]\nredis_port = %d\n" QUEUES, port);
	snprintf(addr, sizeof(addr), "127.0.0.1:%d", port);
	const char *const cmds[][3] = { { "stats", NULL, NULL },
	    { "enqueue", "q", "{}" }, { "dead", "list", "q" } };
	for (size_t i = 0; i < 3; i++) {
		h_ctl(&r, config, NULL, cmds[i][0], cmds[i][1], cmds[i][2],
		    (const char *)NULL);
		h_run_expect(&r, 69);
		cr_assert_not_null(strstr(r.err, addr), "%s", r.err);
		h_run_free(&r);
	}
	h_stop(&d);
}

/* A dead entry as reclaim.lua writes it (doc/formats.md): no "id", a NUL
 * in the job. Replayed, the job goes to requeue as a fresh wrapper. */
Test(ctl, dead_entry_without_id_is_named_by_sha1)
{
	static const char job[] = "{\"s\":\"a\0b\"}";
	static const char el[] = "{\"reason\":\"worker died while processing\","
	    "\"attempts\":0,\"recoveries\":4,\"time\":1700000000000,"
	    "\"worker\":\"w1\",\"job\":{\"s\":\"a\0b\"}}";
	static const char back_want[] = "{\"ferry\":1,\"recoveries\":0,"
	    "\"attempts\":0,\"job\":{\"s\":\"a\0b\"}}";
	char sha[41];
	struct h_run r;

	h_setup(&d, NULL, QUEUES);
	freeReplyObject(h_redis(&d, "LPUSH ferry:{q}:dead %b", el,
	    sizeof(el) - 1));
	job_sha1_hex(job, sizeof(job) - 1, sha);
	CTL(&r, NULL, "dead", "list", "q");
	h_run_expect(&r, 0);
	cr_assert_eq(strncmp(r.out, sha, 40), 0, "%s", r.out);
	cr_assert_not_null(strstr(r.out, "\t2023-11-14T22:13:20.000Z\t0\t4\t"
	    "worker died while processing\t-\n"), "%s", r.out);
	h_run_free(&r);
	CTL(&r, NULL, "dead", "show", "q", sha);
	h_run_expect(&r, 0);
	cr_assert_not_null(strstr(r.out, "\"worker\": \"w1\""), "%s", r.out);
	cr_assert_not_null(strstr(r.out, "\"job\": \"{\\\"s\\\":\\\"a\\u0000b"
	    "\\\"}\""), "%s", r.out);
	h_run_free(&r);
	CTL(&r, NULL, "dead", "retry", "q", sha);
	h_run_expect(&r, 0);
	cr_assert_str_eq(r.out, "replayed 1 job to queue q\n");
	h_run_free(&r);
	redisReply *back = h_redis(&d, "LINDEX ferry:{q}:requeue 0");
	cr_assert(back->len == sizeof(back_want) - 1 &&
	    memcmp(back->str, back_want, back->len) == 0, "the job changed");
	freeReplyObject(back);
	cr_assert_eq(h_redis_int(&d, "HGET ferry:{q}:stats replayed"), 1);
	cr_assert_eq(h_redis_int(&d, "LLEN ferry:{q}:dead"), 0);
	cr_assert_eq(h_redis_int(&d, "LLEN ferry:{q}:ready"), 0);
	CTL(&r, NULL, "dead", "retry", "q", sha);
	h_run_expect(&r, 1);
	h_run_free(&r);
	h_stop(&d);
}

/* Fails every job with "poison" in it while the flag file exists. */
#define HANDLER \
	"while IFS= read -r line; do\n" \
	"  id=${line#'{\"id\":\"'}; id=${id%%%%'\"'*}\n" \
	"  case $line in *poison*) if [ -e \"$1\" ]; then\n" \
	"    echo \"fail $id poisoned by the flag file\"; continue; fi;; esac\n" \
	"  echo \"ok $id\"\n" \
	"done\n"

static void
start_poisoned_ferryd(char *flag, size_t size)
{
	char script[400], queues[1200];

	h_setup(&d, NULL, QUEUES);
	snprintf(script, sizeof(script), "%s/handler.sh", d.dir);
	snprintf(flag, size, "%s/poison.flag", d.dir);
	h_write_file(script, HANDLER);
	h_write_file(flag, "1\n");
	snprintf(queues, sizeof(queues), "[queue q]\nworkers = 1\n"
	    "handler = exec\ncommand = /bin/sh %s %s\nmax_attempts = 1\n",
	    script, flag);
	h_config(&d, NULL, queues);
}

static void
check_show(const char *id, const char *job)
{
	struct h_run r;

	CTL(&r, NULL, "dead", "show", "q", id);
	h_run_expect(&r, 0);
	json_t *e = json_loads(r.out, 0, NULL);
	cr_assert_not_null(e, "not JSON: %s", r.out);
	cr_assert_str_eq(h_jstr(e, "id"), id);
	cr_assert_str_eq(h_jstr(e, "job"), job);
	cr_assert_str_eq(h_jstr(e, "reason"),
	    "failed by the handler");
	json_decref(e);
	h_run_free(&r);
}

static void
expect_out(const char *out_want, int status, const char *a, const char *b,
    const char *c)
{
	struct h_run r;

	CTL(&r, NULL, "dead", a, "q", b, c);
	h_run_expect(&r, status);
	cr_assert_str_eq(r.out, out_want, "dead %s q %s", a, b);
	h_run_free(&r);
}

Test(ctl, dead_letters_of_a_real_ferryd)
{
	char flag[400], bad_sha[41];
	struct h_run r;

	start_poisoned_ferryd(flag, sizeof(flag));
	CTL(&r, "{\"id\":\"good-1\"}\n{\"id\":\"poison-1\",\"poison\":1}"
	    "\n{\"id\":\"poison-2\",\"poison\":2}\n", "enqueue", "q", "-");
	h_run_expect(&r, 0);
	h_run_free(&r);
	freeReplyObject(h_redis(&d, "LPUSH ferry:{q}:ready %s", "not json"));
	job_sha1_hex("not json", 8, bad_sha);
	h_start(&d, 1);
	h_wait_redis_int(&d, 3, "HGET ferry:{q}:stats dead");
	h_wait_redis_int(&d, 1, "HGET ferry:{q}:stats done");

	CTL(&r, NULL, "dead", "list", "q");
	h_run_expect(&r, 0);
	cr_assert_eq(h_count_lines(r.out), 3, "%s", r.out);
	for (const char *const *s = (const char *const[]){ "poison-1\t",
	    "poison-2\t", bad_sha, "\t1\t0\tfailed by the handler\tpoisoned by "
	    "the flag file\n", "malformed JSON", NULL }; *s; s++)
		cr_assert_not_null(strstr(r.out, *s), "no %s in\n%s", *s, r.out);
	h_run_free(&r);
	check_show("poison-1", "{\"id\":\"poison-1\",\"poison\":1}");
	expect_out("", 1, "show", "nope", NULL);

	unlink(flag);
	expect_out("replayed 1 job to queue q\n", 0, "retry", "poison-1", NULL);
	h_wait_redis_int(&d, 2, "HGET ferry:{q}:stats done");
	cr_assert_eq(h_redis_int(&d, "LLEN ferry:{q}:dead"), 2);
	expect_out("purged 1 dead entry from queue q\n", 0, "purge", "poison-2",
	    NULL);
	expect_out("replayed 1 job to queue q\n", 0, "retry", "--all", NULL);
	h_wait_redis_int(&d, 4, "HGET ferry:{q}:stats dead");  /* not json */
	expect_out("purged 1 dead entry from queue q\n", 0, "purge", "--all",
	    NULL);
	expect_out("purged 0 dead entries from queue q\n", 0, "purge", "--all",
	    NULL);
	expect_out("", 1, "retry", "poison-1", NULL);
	cr_assert_eq(h_redis_int(&d, "EXISTS ferry:{q}:dead"), 0);
	cr_assert_eq(h_redis_int(&d, "HGET ferry:{q}:stats replayed"), 2);
	cr_assert_eq(h_redis_int(&d, "HGET ferry:{q}:stats done"), 2);
	/* the three of ferryctl and the one LPUSH: all arrived */
	cr_assert_eq(h_redis_int(&d, "HGET ferry:{q}:stats enqueued"), 4);
	h_stop(&d);
}

static long long
stats_enqueued(void)
{
	struct h_run r;

	CTL(&r, NULL, "stats", "--json", "q");
	h_run_expect(&r, 0);
	json_t *root = json_loads(r.out, 0, NULL);
	cr_assert_not_null(root, "not JSON: %s", r.out);
	long long n = json_at(root, "q", "counters", "enqueued");
	json_decref(root);
	h_run_free(&r);
	return n;
}

/* Jobs a producer pushes with plain LPUSH (the documented
 * path) are counted as enqueued, while they wait and once done. */
Test(ctl, enqueued_counts_plain_lpush)
{
	char flag[400];

	start_poisoned_ferryd(flag, sizeof(flag));
	h_push_jobs(&d, "q", 0, 50);
	cr_assert_eq(stats_enqueued(), 50);
	h_start(&d, 1);
	h_wait_redis_int(&d, 50, "HGET ferry:{q}:stats done");
	cr_assert_eq(h_redis_int(&d, "HGET ferry:{q}:stats enqueued"), 50);
	cr_assert_eq(stats_enqueued(), 50);
	h_stop(&d);
}

/* init-db says in its words whether ferry_batches was there, and
 * prints none of PostgreSQL's NOTICE lines ("already exists, skipping"). */
Test(ctl, init_db_in_its_own_words)
{
	struct h_run r;

	h_setup(&d, NULL, "");
	const char *global = h_pg_start(&d);
	h_config(&d, global, "[queue q]\nhandler = postgres\ntable = events\n"
	    "columns = n\n");
	h_pg_exec(&d, "CREATE TABLE events (n bigint)");
	CTL(&r, NULL, "init-db");
	h_run_expect(&r, 0);
	cr_assert_str_eq(r.out, "queue q: ferry_batches created\n"
	    "queue q: table events ready\n");
	cr_assert_str_eq(r.err, "");
	h_run_free(&r);
	CTL(&r, NULL, "init-db");
	h_run_expect(&r, 0);
	cr_assert_str_eq(r.out, "queue q: ferry_batches exists already\n"
	    "queue q: table events ready\n");
	cr_assert_null(strstr(r.err, "NOTICE"), "%s", r.err);
	cr_assert_str_eq(r.err, "");
	h_run_free(&r);
	h_stop(&d);
}

/* With a broken file the control commands still reach the
 * running ferryd (it keeps its old configuration) and say so; reload is
 * refused; the Redis commands say why they cannot run. */
Test(ctl, broken_file_still_reaches_the_running_ferryd)
{
	char flag[400], other[400];
	struct h_run r;

	start_poisoned_ferryd(flag, sizeof(flag));
	h_start(&d, 1);
	/* valid lines (control_socket among them), and one error */
	h_config(&d, "colour = red\n", "[queue q]\nworkers = 1\n");
	CTL(&r, NULL, "status");
	h_run_expect(&r, 0);
	cr_assert_not_null(strstr(r.out, "worker queue=q number=1 "), "%s",
	    r.out);
	cr_assert_not_null(strstr(r.err, "colour: unknown key"), "%s", r.err);
	cr_assert_not_null(strstr(r.err, " is broken (1 error above): this is "
	    "the running ferryd, which keeps its old configuration; fix the "
	    "file and check it with `ferryd -t`"), "%s", r.err);
	h_run_free(&r);

	CTL(&r, NULL, "reload");
	h_run_expect(&r, 78);
	cr_assert_not_null(strstr(r.err, "the running ferryd keeps its current "
	    "configuration; nothing reloaded"), "%s", r.err);
	h_run_free(&r);
	cr_assert_eq(h_count_in_file(d.log, "reload: reading"), 0);

	CTL(&r, NULL, "stats");
	h_run_expect(&r, 78);
	cr_assert_not_null(strstr(r.err, "stats needs the file's Redis address "
	    "and queues"), "%s", r.err);
	h_run_free(&r);

	/* a broken file that names a socket nobody listens on */
	snprintf(other, sizeof(other), "%s/other.ini", d.dir);
	h_write_file(other, "[ferryd]\ncontrol_socket = %s/none.sock\n"
	    "colour = red\n[queue q]\n", d.dir);
	h_ctl(&r, other, NULL, "status", (const char *)NULL);
	h_run_expect(&r, 78);
	cr_assert_not_null(strstr(r.err, "is broken (1 error above): cannot "
	    "find the daemon (no ferryd answers on "), "%s", r.err);
	cr_assert_not_null(strstr(r.err, "/none.sock"), "%s", r.err);
	h_run_free(&r);
	h_stop(&d);
}
