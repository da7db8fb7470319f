/* test_dead_redrive.c - `ferryctl dead retry|purge` by a selection, against
 * a real redis-server: 100,000 dead entries of three reasons (pushed
 * straight onto the dead list in the format of doc/formats.md), one reason
 * retried at a rate (its time, and no entry of another reason touched), a
 * redrive killed half way (every entry dead or requeued, never both nor
 * neither), --dry-run (the list's bytes unchanged), and on a few entries
 * what a move keeps and marks: stamps, ids in both queues, cache keys,
 * malformed entries left, summary and list by time, id and limit. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "harness.h"
#include "job.h"
#include "queue.h"

#define QUEUES "[queue q]\nworkers = 0\nidempotency_window = 1h\n" \
	"[queue b]\nworkers = 0\nidempotency_window = 1h\n"
#define N 100000
#define BASE_MS 1700000000000LL

static struct ferryd d;
static struct queue_keys k, kb;

/* The three reasons: entry i has reason i % 3. */
static const char *const reasons[3][2] = {
	{ "failed by the handler", "23505: duplicate key value violates "
	    "unique constraint \\\"events_pkey\\\"" },
	{ "failed by the handler", "handler exited 3: upstream timeout" },
	{ "failed 5 attempts (max_attempts)", "40001: could not serialize "
	    "access due to concurrent update" },
};
/* Entries of each reason among N. */
#define OF_REASON(r) ((N - (r) + 2) / 3)

static void
teardown(void)
{
	h_teardown(&d);
}

static void
setup(void)
{
	h_setup(&d, NULL, QUEUES);
	queue_keys_init(&k, "ferry", "q");
	queue_keys_init(&kb, "ferry", "b");
}

TestSuite(dead_redrive, .init = setup, .fini = teardown, .timeout = 300);

#define CTL(r, ...) \
	h_ctl((r), d.config, NULL, __VA_ARGS__, (const char *)NULL)

static char *
entry(int i)
{
	char *el;

	if (asprintf(&el, "{\"reason\":\"%s\",\"attempts\":1,\"recoveries\":0,"
	    "\"time\":%lld,\"worker\":\"h:1:w0\",\"stamps\":[\"b:%d\"],"
	    "\"last_error\":\"%s\",\"job\":{\"id\":\"job-%06d\",\"n\":%d}}",
	    reasons[i % 3][0], BASE_MS + i, i, reasons[i % 3][1], i, i) < 0)
		cr_assert_fail("out of memory");
	return el;
}

/* Entries 0 .. n-1 onto q's dead list, oldest (0) at the right end,
 * pipelined (h_lpush_made). */
static void
fill(int n)
{
	h_lpush_made(&d, k.dead, 0, n, entry);
	cr_assert_eq(h_redis_int(&d, "LLEN %s", k.dead), n);
}

/* The n of the job in element el ("job-NNNNNN"), or -1. */
static int
job_n(const char *el)
{
	const char *p = strstr(el, "\"id\":\"job-");

	return p != NULL ? atoi(p + 10) : -1;
}

/* Add one to seen[n] for every element of list key; the elements. */
static long long
count_jobs(const char *key, int *seen)
{
	redisReply *r = h_redis(&d, "LRANGE %s 0 -1", key);
	long long n = (long long)r->elements;

	for (size_t i = 0; i < r->elements; i++) {
		int j = job_n(r->element[i]->str);
		cr_assert(j >= 0 && j < N, "not a job of the test: %s",
		    r->element[i]->str);
		seen[j]++;
	}
	freeReplyObject(r);
	return n;
}

/* Every job of the reasons in `moved` (a bit per reason) once in `to`'s
 * list, every other once in q's dead list, in order (oldest at the right
 * end, as pushed). */
static void
assert_moved(const char *to, int moved)
{
	int *seen = calloc(N, sizeof(*seen));
	long long in_dead = count_jobs(k.dead, seen);
	long long in_to = 0, want = 0;

	for (int r = 0; r < 3; r++)
		if (moved & (1 << r))
			want += OF_REASON(r);
	redisReply *rep = h_redis(&d, "LRANGE %s 0 -1", to);
	in_to = (long long)rep->elements;
	for (size_t i = 0; i < rep->elements; i++) {
		const char *el = rep->element[i]->str;
		int j = job_n(el);
		cr_assert(j >= 0 && moved & (1 << (j % 3)), "job %d of reason %d "
		    "was moved", j, j % 3);
		cr_assert_eq(strncmp(el, "{\"ferry\":1,\"recoveries\":0,"
		    "\"attempts\":0,\"stamps\":[\"b:", 51), 0, "%s", el);
		seen[j]++;
	}
	freeReplyObject(rep);
	cr_assert_eq(in_to, want);
	cr_assert_eq(in_dead, N - want);
	for (int j = 0; j < N; j++)
		cr_assert_eq(seen[j], 1, "job %d is in %d lists", j, seen[j]);
	free(seen);
	/* what stayed is in its order, bytes unchanged */
	rep = h_redis(&d, "LRANGE %s 0 -1", k.dead);
	int last = N;
	for (size_t i = 0; i < rep->elements; i++) {
		int j = job_n(rep->element[i]->str);
		char *el = entry(j);
		cr_assert(j < last, "dead list out of order at %zu", i);
		cr_assert_str_eq(rep->element[i]->str, el);
		free(el);
		last = j;
	}
	freeReplyObject(rep);
}

Test(dead_redrive, one_reason_at_a_rate_touches_no_other)
{
	struct h_run r;

	fill(N);
	long long t0 = h_now_ms();
	CTL(&r, "dead", "retry", "q", "--reason", "23505", "--rate", "5000/s");
	long long took = h_now_ms() - t0;
	h_run_expect(&r, 0);
	cr_assert_str_eq(r.out, "replayed 33334 jobs of queue q to queue q\n");
	h_run_free(&r);
	/* 33,334 at 5,000/s: 6.7 s, never less; noise only adds */
	cr_log_info("retried 33334 entries at --rate 5000/s in %lld ms", took);
	cr_assert(took >= 6600 && took <= 12000, "took %lld ms", took);
	assert_moved(k.requeue, 1 << 0);
	cr_assert_eq(h_redis_int(&d, "HGET %s replayed", k.stats), 33334);
	h_stop(&d);
}

Test(dead_redrive, killed_half_way_loses_and_duplicates_nothing)
{
	char out[400], err[400];
	struct h_run r;
	int status;

	fill(N);
	snprintf(out, sizeof(out), "%s/out", d.dir);
	snprintf(err, sizeof(err), "%s/err", d.dir);
	/* two reasons to queue b, about 3.3 s at this rate */
	pid_t pid = h_ctl_spawn(d.config, "/dev/null", out, err, "dead",
	    "retry", "q", "--reason", "failed by the handler", "--to", "b",
	    "--rate", "20000/s", (const char *)NULL);
	long long deadline = h_now_ms() + H_DEADLINE_MS;
	while (h_redis_int(&d, "LLEN %s", kb.requeue) < 30000 &&
	    h_now_ms() < deadline)
		h_sleep_ms(5);
	kill(pid, SIGKILL);
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFSIGNALED(status), "ferryctl ended before the kill");
	long long moved = h_redis_int(&d, "LLEN %s", kb.requeue);
	cr_log_info("killed after %lld of 66667 moved", moved);
	cr_assert(moved >= 30000 && moved < 66667, "%lld moved", moved);
	cr_assert_eq(h_redis_int(&d, "LLEN %s", k.dead) + moved, N);
	int *seen = calloc(N, sizeof(*seen));
	cr_assert_eq(count_jobs(k.dead, seen) + count_jobs(kb.requeue, seen), N);
	for (int j = 0; j < N; j++)
		cr_assert_eq(seen[j], 1, "job %d is in %d lists", j, seen[j]);
	free(seen);

	/* the same command again finishes the job */
	CTL(&r, "dead", "retry", "q", "--reason", "failed by the handler",
	    "--to", "b");
	h_run_expect(&r, 0);
	char want[100];
	snprintf(want, sizeof(want), "replayed %lld jobs of queue q to queue b\n",
	    66667 - moved);
	cr_assert_str_eq(r.out, want);
	h_run_free(&r);
	assert_moved(kb.requeue, 1 << 0 | 1 << 1);
	cr_assert_eq(h_redis_int(&d, "HGET %s replayed", k.stats), 66667);
	h_stop(&d);
}

/* DUMP of q's dead list: its exact bytes. */
static char *
dump_dead(size_t *n)
{
	redisReply *r = h_redis(&d, "DUMP %s", k.dead);
	char *copy = malloc(r->len);

	memcpy(copy, r->str, r->len);
	*n = r->len;
	freeReplyObject(r);
	return copy;
}

Test(dead_redrive, dry_run_changes_nothing)
{
	struct h_run r;
	size_t n0, n1;

	fill(N);
	char *before = dump_dead(&n0);
	CTL(&r, "dead", "retry", "q", "--reason", "40001", "--to", "b",
	    "--dry-run");
	h_run_expect(&r, 0);
	cr_assert_eq(h_count_lines(r.out), 33333 + 1);
	cr_assert_not_null(strstr(r.out, "dry run: would replay 33333 dead "
	    "entries of queue q to queue b (nothing changed)\n"), "%.300s",
	    r.out);
	h_run_free(&r);
	CTL(&r, "dead", "purge", "q", "--before", "2023-11-14T22:13:20.050Z",
	    "--dry-run");
	h_run_expect(&r, 0);
	cr_assert_not_null(strstr(r.out, "dry run: would purge 50 dead entries "
	    "of queue q (nothing changed)\n"), "%s", r.out);
	h_run_free(&r);
	char *after = dump_dead(&n1);
	cr_assert(n0 == n1 && memcmp(before, after, n0) == 0,
	    "the dead list changed");
	cr_assert_eq(h_redis_int(&d, "EXISTS %s %s %s", k.requeue, kb.requeue,
	    k.stats), 0);
	free(before);
	free(after);
	h_stop(&d);
}

Test(dead_redrive, selection_by_time_id_and_limit)
{
	struct h_run r;

	fill(30);
	/* entries 10 .. 19 by time, of them the ids matching job-00001[2-5] */
	CTL(&r, "dead", "list", "q", "--after", "2023-11-14T22:13:20.010Z",
	    "--before", "2023-11-14T22:13:20.020Z", "--id", "job-00001[2-5]");
	h_run_expect(&r, 0);
	cr_assert_eq(h_count_lines(r.out), 4, "%s", r.out);
	cr_assert_eq(strncmp(r.out, "job-000015\t", 11), 0, "%s", r.out);
	h_run_free(&r);
	CTL(&r, "dead", "list", "q", "--reason", "UPSTREAM timeout", "--limit",
	    "2");
	h_run_expect(&r, 0);
	cr_assert_eq(h_count_lines(r.out), 2, "%s", r.out);
	cr_assert_eq(strncmp(r.out, "job-000028\t", 11), 0, "%s", r.out);
	h_run_free(&r);
	/* all entries are older than an hour ago: none after it */
	CTL(&r, "dead", "summary", "q", "--after", "1h");
	h_run_expect(&r, 0);
	cr_assert_str_eq(r.out, "");
	h_run_free(&r);
	CTL(&r, "dead", "summary", "q");
	h_run_expect(&r, 0);
	cr_assert_str_eq(r.out,
	    "10\t2023-11-14T22:13:20.000Z\t2023-11-14T22:13:20.027Z\t23505\t"
	    "23505: duplicate key value violates unique constraint "
	    "\"events_pkey\"\n"
	    "10\t2023-11-14T22:13:20.002Z\t2023-11-14T22:13:20.029Z\t40001\t"
	    "40001: could not serialize access due to concurrent update\n"
	    "10\t2023-11-14T22:13:20.001Z\t2023-11-14T22:13:20.028Z\t"
	    "failed by the handler\thandler exited 3: upstream timeout\n");
	h_run_free(&r);
	/* the oldest 4 of a group, then the group's rest */
	CTL(&r, "dead", "purge", "q", "--group", "failed by the handler",
	    "--limit", "4");
	h_run_expect(&r, 0);
	cr_assert_str_eq(r.out, "purged 4 dead entries from queue q\n");
	h_run_free(&r);
	CTL(&r, "dead", "show", "q", "--group", "failed by the handler",
	    "--limit", "1");
	h_run_expect(&r, 0);
	cr_assert_not_null(strstr(r.out, "\"id\":\"job-000028\""), "%s", r.out);
	h_run_free(&r);
	CTL(&r, "dead", "list", "q", "--group", "failed by the handler");
	cr_assert_eq(h_count_lines(r.out), 6, "%s", r.out);
	cr_assert_null(strstr(r.out, "job-000010\t"), "%s", r.out);
	cr_assert_not_null(strstr(r.out, "job-000013\t"), "%s", r.out);
	h_run_free(&r);
	CTL(&r, "dead", "retry", "q", "--after", "tomorrow");
	h_run_expect(&r, 64);
	cr_assert_not_null(strstr(r.err, "--after 'tomorrow': neither a time"),
	    "%s", r.err);
	h_run_free(&r);
	CTL(&r, "dead", "retry", "q", "--all", "--reason", "x");
	h_run_expect(&r, 64);
	h_run_free(&r);
	h_stop(&d);
}

static double
zscore(const char *key, const char *member)
{
	redisReply *r = h_redis(&d, "ZSCORE %s %s", key, member);
	double v;

	cr_assert_eq(r->type, REDIS_REPLY_STRING, "%s has no %s", key, member);
	v = atof(r->str);
	freeReplyObject(r);
	return v;
}

/* --to: stamps kept, the id accepted by b and gone from q; a job naming
 * a cache key and a malformed entry stay, said; a purge releases the
 * cache key. */
Test(dead_redrive, to_another_queue_marks_ids_and_keeps_stamps)
{
	static const char cached[] = "{\"reason\":\"failed by the handler\","
	    "\"attempts\":1,\"recoveries\":0,\"time\":1700000000500,\"worker\":"
	    "\"w\",\"last_error\":\"23505: dup\",\"job\":{\"id\":\"c1\","
	    "\"cache_key\":\"ferry:{q}:cache:k1\"}}";
	static const char malformed[] = "{\"reason\":\"23505: x\",\"job\":1}";
	struct h_run r;

	fill(3);
	freeReplyObject(h_redis(&d, "LPUSH %s %s %s", k.dead, cached,
	    malformed));
	freeReplyObject(h_redis(&d, "SET ferry:{q}:cache:k1 data"));
	freeReplyObject(h_redis(&d, "HSET %s ferry:{q}:cache:k1 1",
	    k.protected));
	freeReplyObject(h_redis(&d, "ZADD %s -1 job-000000 -1 c1", k.ids));
	/* each id bound to its job (the SHA-1 of its document), as the
	 * enqueue binds it: only that job's entry moves it */
	char sha0[41], sha1[41];
	const char *doc0 = "{\"id\":\"job-000000\",\"n\":0}",
	    *doc1 = "{\"id\":\"c1\",\"cache_key\":\"ferry:{q}:cache:k1\"}";
	job_sha1_hex(doc0, strlen(doc0), sha0);
	job_sha1_hex(doc1, strlen(doc1), sha1);
	freeReplyObject(h_redis(&d, "HSET %s job-000000 %s c1 %s", k.idsha,
	    sha0, sha1));
	/* what the masters publish (ids.lua): both queues keep ids */
	freeReplyObject(h_redis(&d, "HSET %s idempotency_window 3600000",
	    k.config));
	freeReplyObject(h_redis(&d, "HSET %s idempotency_window 3600000",
	    kb.config));
	CTL(&r, "dead", "retry", "q", "--reason", "malformed", "--to", "b");
	h_run_expect(&r, 0);
	cr_assert_str_eq(r.out, "replayed 0 jobs of queue q to queue b\n");
	cr_assert_not_null(strstr(r.err, "1 malformed dead entry left"), "%s",
	    r.err);
	h_run_free(&r);
	CTL(&r, "dead", "retry", "q", "--reason", "23505", "--to", "b");
	h_run_expect(&r, 0);
	cr_assert_str_eq(r.out, "replayed 1 job of queue q to queue b\n");
	cr_assert_not_null(strstr(r.err, "1 dead entry left in queue q: their "
	    "jobs name a cache key"), "%s", r.err);
	h_run_free(&r);
	redisReply *w = h_redis(&d, "LRANGE %s 0 -1", kb.requeue);
	cr_assert_eq(w->elements, 1);
	cr_assert_str_eq(w->element[0]->str, "{\"ferry\":1,\"recoveries\":0,"
	    "\"attempts\":0,\"stamps\":[\"b:0\"],\"job\":{\"id\":\"job-000000\","
	    "\"n\":0}}");
	freeReplyObject(w);
	cr_assert_eq(zscore(kb.ids, "job-000000"), 0);
	cr_assert(zscore(k.ids, "job-000000") < -1);
	redisReply *bound = h_redis(&d, "HGET %s job-000000", kb.idsha);
	cr_assert_str_eq(bound->str, sha0, "held in b for the same job");
	freeReplyObject(bound);
	cr_assert_eq(h_redis_int(&d, "LLEN %s", k.dead), 4);

	CTL(&r, "dead", "purge", "q", "--id", "c?");
	h_run_expect(&r, 0);
	cr_assert_str_eq(r.out, "purged 1 dead entry from queue q\n");
	h_run_free(&r);
	cr_assert_eq(h_redis_int(&d, "EXISTS ferry:{q}:cache:k1"), 0);
	cr_assert_eq(h_redis_int(&d, "HEXISTS %s ferry:{q}:cache:k1",
	    k.protected), 0);
	cr_assert(zscore(k.ids, "c1") < -1);
	cr_assert_eq(h_redis_int(&d, "LLEN %s", k.dead), 3);
	h_stop(&d);
}
