/* test_idempotency.c - a queue with an idempotency_window through real
 * ferryd workers, ferryctl and Redis: an enqueue of an id the queue holds
 * (waiting, running, dead, or done within the window) is answered
 * "already accepted" and pushes nothing; the ids go after the window; a
 * ferryctl whose Redis was killed during its calls sends them again, and
 * every job lands in PostgreSQL exactly once. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "job.h"
#include "lua_scripts.h"
#include "queue.h"
#include "util.h"

#define READY "ferry:{q}:ready"
#define IDS "ferry:{q}:ids"

static struct ferryd d;

static void
teardown(void)
{
	h_teardown(&d);
}

TestSuite(idempotency, .fini = teardown, .timeout = 300);

/* `ferryctl -c d.config ARGS...` with `input` on stdin: its exit status
 * and stdout (static, overwritten by the next call); stderr goes to ours. */
static int
ctl(const char *input, const char **out, ...)
{
	static char *last;
	char *now;
	va_list ap;
	int status;

	va_start(ap, out);
	status = h_ctl_out_v(d.config, input, &now, ap);
	va_end(ap);
	free(last);
	last = now;
	if (out != NULL)
		*out = last;
	return status;
}

/* enqueue.lua itself, with "ids": the same call twice, as a producer whose
 * first reply was lost sends it; jobs without an id are taken each time;
 * a job's cache value is not written again for a job already accepted. */
Test(idempotency, the_script_answers_already_accepted)
{
	const char *argv[] = { READY, "ferry:{q}:protected",
	    "ferry:{q}:cache:0123456789abcdef.0", "0", "0", "1", "ids",
	    "{\"id\":\"a\",\"cache_key\":\"ferry:{q}:cache:0123456789abcdef.0\"}",
	    "3", "[1]", "", "a",
	    "{\"id\":\"b\"}", "0", "", "", "b",
	    "{\"id\":\"a\",\"v\":2}", "0", "", "", "a",
	    "{\"v\":3}", "0", "", "", "" };
	int n = (int)(sizeof(argv) / sizeof(*argv));

	h_setup_redis(&d, NULL, "[queue q]\nworkers = 0\n", NULL);
	/* a queue that keeps no ids takes every job */
	redisReply *r = queue_script(d.rc, LUA_ENQUEUE, 3, n, argv, NULL);
	cr_assert_eq(r->type, REDIS_REPLY_ARRAY, "%s", r->str);
	cr_assert_eq(r->element[0]->integer, 4);
	cr_assert_eq(r->element[2]->elements, 0);
	freeReplyObject(r);
	cr_assert_eq(h_redis_int(&d, "EXISTS " IDS), 0);
	freeReplyObject(h_redis(&d, "DEL " READY " ferry:{q}:protected "
	    "ferry:{q}:cache:0123456789abcdef.0"));
	freeReplyObject(h_redis(&d, "HSET ferry:{q}:config idempotency_window "
	    "60000"));
	for (int call = 0; call < 2; call++) {
		r = queue_script(d.rc, LUA_ENQUEUE, 3, n, argv, NULL);
		cr_assert_eq(r->type, REDIS_REPLY_ARRAY, "%s", r->str);
		/* first: a, b, the anonymous one; the second a is the first's */
		cr_assert_eq(r->element[0]->integer, call == 0 ? 3 : 1);
		cr_assert_eq(r->element[2]->elements, call == 0 ? 1 : 3);
		cr_assert_eq(r->element[2]->element[0]->integer, call == 0 ? 3 : 1);
		freeReplyObject(r);
		if (call == 0)  /* the value written once: not again below */
			freeReplyObject(h_redis(&d, "APPEND "
			    "ferry:{q}:cache:0123456789abcdef.0 changed"));
	}
	cr_assert_eq(h_redis_int(&d, "LLEN " READY), 4);
	/* a, b and the marks' member "" */
	cr_assert_eq(h_redis_int(&d, "ZCARD " IDS), 3);
	h_assert_id_live(&d, "q", "a");
	h_assert_id_live(&d, "q", "b");
	cr_assert_eq(h_id_score(&d, "q", "a"), h_id_score(&d, "q", "b"));     /* one call's mark */
	r = h_redis(&d, "GET ferry:{q}:cache:0123456789abcdef.0");
	char sha[41];
	job_sha1_hex(argv[7], strlen(argv[7]), sha);
	cr_assert(strncmp(r->str, sha, 40) == 0 &&
	    strcmp(r->str + 40, ":[1]changed") == 0, "%s", r->str);
	freeReplyObject(r);
	r = h_redis(&d, "HGET ferry:{q}:protected ferry:{q}:cache:"
	    "0123456789abcdef");
	cr_assert_eq(strncmp(r->str, "1 1 ", 4), 0, "%s", r->str);
	freeReplyObject(r);
	/* without "checked", each id must be the document's */
	argv[11] = "A";
	r = queue_script(d.rc, LUA_ENQUEUE, 3, n, argv, NULL);
	cr_assert_eq(r->type, REDIS_REPLY_ERROR);
	cr_assert(strstr(r->str, "INVALID 1 the caller passed id \"A\", the "
	    "job's is \"a\"") != NULL, "%s", r->str);
	freeReplyObject(r);
	h_stop(&d);
}

/* A call tells the ids it added from those held before by its mark: a
 * score above every live score the set holds (the member "" keeps the
 * newest). Nothing a producer may write moves a held id into a call's
 * mark: not the config hash (a counter there once made the mark, and
 * moving it back made a held id read as added: two rows), not a score
 * written by hand into the set, not the marks' member itself. */
Test(idempotency, no_write_makes_a_held_id_read_as_added)
{
	const char *one[] = { READY, "0", "0", "1", "ids",
	    "{\"id\":\"a\"}", "0", "", "", "a" };
	const char *two[] = { READY, "0", "0", "1", "ids",
	    "{\"id\":\"a\"}", "0", "", "", "a", "{\"id\":\"b\"}", "0", "", "",
	    "b", "{\"id\":\"b\"}", "0", "", "", "b" };
	const char *moves[] = {
		"HINCRBY ferry:{q}:config ids_calls -1",
		"DEL ferry:{q}:config",
		"ZADD " IDS " 0.5 forged",
		"ZADD " IDS " 0 %s",
		"ZADD " IDS " 0.0000001 %s",
	};

	h_setup_redis(&d, NULL, "[queue q]\nworkers = 0\n", NULL);
	for (size_t m = 0; m < FERRY_ARRAY_LEN(moves); m++) {
		freeReplyObject(h_redis(&d, "HSET ferry:{q}:config "
		    "idempotency_window 60000"));
		redisReply *r = queue_script(d.rc, LUA_ENQUEUE, 1, 10, one, NULL);
		cr_assert_eq(r->type, REDIS_REPLY_ARRAY, "%s", r->str);
		cr_assert_eq(r->element[0]->integer, m == 0 ? 1 : 0);
		freeReplyObject(r);
		double held = h_id_score(&d, "q", "a");
		/* the member "" where a move names one */
		freeReplyObject(h_redis(&d, moves[m], ""));
		freeReplyObject(h_redis(&d, "HSET ferry:{q}:config "
		    "idempotency_window 60000"));
		r = queue_script(d.rc, LUA_ENQUEUE, 1, 20, two, NULL);
		cr_assert_eq(r->type, REDIS_REPLY_ARRAY, "%s", r->str);
		/* a held before, the second b the first's */
		cr_assert_eq(r->element[0]->integer, m == 0 ? 1 : 0, "after %s",
		    moves[m]);
		cr_assert_eq(r->element[2]->elements, m == 0 ? 2 : 3);
		freeReplyObject(r);
		cr_assert_eq(h_id_score(&d, "q", "a"), held, "a held id keeps its mark");
		h_assert_id_live(&d, "q", "b");
		cr_assert_gt(h_id_score(&d, "q", "b"), h_id_score(&d, "q", "a"));
	}
	cr_assert_eq(h_redis_int(&d, "LLEN " READY), 2);
	/* a new id's mark is above the hand-written live score */
	const char *three[] = { READY, "0", "0", "1", "ids",
	    "{\"id\":\"c\"}", "0", "", "", "c" };
	freeReplyObject(queue_script(d.rc, LUA_ENQUEUE, 1, 10, three, NULL));
	cr_assert_gt(h_id_score(&d, "q", "c"), h_id_score(&d, "q", "forged"));
	cr_assert_lt(h_id_score(&d, "q", "c"), 1);
	/* a live score at the top of (0, 1), only by hand: refused whole */
	freeReplyObject(h_redis(&d, "ZADD " IDS " 0.9999999999999999 top"));
	redisReply *r = queue_script(d.rc, LUA_ENQUEUE, 1, 20, two, NULL);
	cr_assert(r->type == REDIS_REPLY_ERROR &&
	    strncmp(r->str, "IDSTATE ", 8) == 0, "%s", r->str);
	freeReplyObject(r);
	cr_assert_eq(h_redis_int(&d, "LLEN " READY), 3);
	h_stop(&d);
}

/* Through ferryctl and a worker: held while waiting (in the same call
 * too), while done within the window; forgotten after it by the master. */
Test(idempotency, ids_are_held_while_jobs_live_and_for_the_window)
{
	const char *out;

	h_setup(&d, NULL, "[queue q]\nworkers = 0\nidempotency_window = 2s\n");
	cr_assert_eq(ctl("{\"id\":\"a\",\"v\":1}\n{\"id\":\"b\"}\n"
	    "{\"id\":\"a\",\"v\":2}\n{\"v\":3}\n{\"v\":3}\n", &out, "enqueue", "q",
	    "-", NULL), 0);
	cr_assert_str_eq(out, "a\nb\na already accepted\n"
	    "8ca201b5be4035e9d47d070f3cc7e5ccc014d3e9\n"
	    "8ca201b5be4035e9d47d070f3cc7e5ccc014d3e9\n");
	cr_assert_eq(ctl(NULL, &out, "enqueue", "q", "{\"id\":\"a\"}", NULL), 0);
	cr_assert_str_eq(out, "a already accepted\n");
	cr_assert_eq(h_redis_int(&d, "LLEN " READY), 4);
	/* waiting longer than the window while the master forgets old ids:
	 * a live id stays */
	h_config(&d, NULL, "[queue q]\nworkers = 0\nidempotency_window = 1s\n");
	h_start(&d, 0);
	h_sleep_ms(2500);
	h_assert_id_live(&d, "q", "a");
	h_assert_id_live(&d, "q", "b");
	cr_assert_eq(ctl(NULL, &out, "enqueue", "q", "{\"id\":\"b\"}", NULL), 0);
	cr_assert_str_eq(out, "b already accepted\n");
	h_stop(&d);
	h_config(&d, NULL, "[queue q]\nworkers = 1\nidempotency_window = 2s\n");
	h_start(&d, 1);
	h_wait_redis_int(&d, 4, "HGET ferry:{q}:stats done");
	/* done: held for the window, then forgotten */
	cr_assert_gt(h_redis_int(&d, "ZSCORE " IDS " a"), 0);
	cr_assert_eq(ctl(NULL, &out, "enqueue", "q", "{\"id\":\"a\"}", NULL), 0);
	cr_assert_str_eq(out, "a already accepted\n");
	h_wait_redis_int(&d, 0, "ZCARD " IDS);
	cr_assert_eq(ctl(NULL, &out, "enqueue", "q", "{\"id\":\"a\"}", NULL), 0);
	cr_assert_str_eq(out, "a\n");
	h_wait_redis_int(&d, 5, "HGET ferry:{q}:stats done");
	/* the master publishes the window; 0 takes it back */
	cr_assert_eq(h_redis_int(&d, "HGET ferry:{q}:config "
	    "idempotency_window"), 2000);
	h_config(&d, NULL, "[queue q]\nworkers = 1\n");
	kill(d.pid, SIGHUP);
	h_wait_redis_int(&d, 0, "HEXISTS ferry:{q}:config idempotency_window");
	cr_assert_eq(ctl(NULL, &out, "enqueue", "q", "{\"id\":\"a\"}", NULL), 0);
	cr_assert_eq(ctl(NULL, &out, "enqueue", "q", "{\"id\":\"a\"}", NULL), 0);
	h_wait_redis_int(&d, 7, "HGET ferry:{q}:stats done");
	h_stop(&d);
}

/* A dead job's id is held (-1) until it is purged, then for the window
 * (minus the time to forget it at);
 * a dead retry makes it live again. Purged one by one and with --all. */
Test(idempotency, dead_ids_are_held_until_purged)
{
	char cmd[400], queues[600];
	const char *out;

	h_setup(&d, NULL, "");
	h_write_script(&d, "handler.sh", cmd, sizeof(cmd),
	    "while IFS= read -r line; do\n  echo \"fail boom\"\ndone\n");
	snprintf(queues, sizeof(queues), "[queue q]\nworkers = 1\n"
	    "handler = exec\ncommand = %s\nmax_attempts = 1\n"
	    "idempotency_window = 1s\n", cmd);
	h_config(&d, NULL, queues);
	h_start(&d, 1);
	cr_assert_eq(ctl("{\"id\":\"x\"}\n{\"id\":\"y\"}\n{\"id\":\"z\"}\n",
	    NULL, "enqueue", "q", "-", NULL), 0);
	h_wait_redis_int(&d, 3, "LLEN ferry:{q}:dead");
	cr_assert_eq(h_redis_int(&d, "ZSCORE " IDS " x"), -1);
	cr_assert_eq(ctl(NULL, &out, "enqueue", "q", "{\"id\":\"x\"}", NULL), 0);
	cr_assert_str_eq(out, "x already accepted\n");
	cr_assert_eq(ctl(NULL, NULL, "dead", "retry", "q", "x", NULL), 0);
	h_wait_redis_int(&d, 4, "HGET ferry:{q}:stats dead");
	cr_assert_eq(h_redis_int(&d, "ZSCORE " IDS " x"), -1);
	h_sleep_ms(2500);       /* dead ids outlive the window */
	cr_assert_eq(h_redis_int(&d, "ZCARD " IDS), 3);
	cr_assert_eq(ctl(NULL, NULL, "dead", "purge", "q", "x", NULL), 0);
	cr_assert_lt(h_redis_int(&d, "ZSCORE " IDS " x"), -1);
	h_wait_redis_int(&d, 0, "ZSCORE " IDS " x");
	cr_assert_eq(h_redis_int(&d, "ZCARD " IDS), 2);
	cr_assert_eq(ctl(NULL, NULL, "dead", "purge", "q", "--all", NULL), 0);
	h_wait_redis_int(&d, 0, "ZCARD " IDS);
	cr_assert_eq(ctl(NULL, &out, "enqueue", "q", "{\"id\":\"y\"}", NULL), 0);
	cr_assert_str_eq(out, "y\n");
	h_stop(&d);
}

/* ferryctl enqueue q - of the file input, in the background; its stdout
 * and stderr into files of d.dir named after `tag`. */
static pid_t
spawn_enqueue(const char *input, const char *tag)
{
	char outp[300], errp[300];

	snprintf(outp, sizeof(outp), "%s/%s.out", d.dir, tag);
	snprintf(errp, sizeof(errp), "%s/%s.err", d.dir, tag);
	return h_ctl_spawn(d.config, input, outp, errp, "enqueue", "q", "-",
	    NULL);
}

/* A postgres queue keeping ids for 10 minutes, and a file of `total` jobs
 * r0.. for it (its path into input). */
static void
setup_rows(const char *const *redis_args, int total, char *input,
    size_t size)
{
	h_setup_redis(&d, NULL, "", redis_args);
	h_config(&d, h_pg_start(&d), "[queue q]\nworkers = 2\n"
	    "handler = postgres\ntable = rows\nidempotency_window = 10m\n");
	h_pg_exec(&d, "CREATE TABLE rows (n int)");
	struct h_run init;
	h_ctl(&init, d.config, NULL, "init-db", NULL);
	h_run_expect(&init, 0);
	h_run_free(&init);
	h_jobs_file(&d, total, input, size);
}

/* Every one of `total` jobs written once, each id held. */
static void
assert_rows_once(int total)
{
	h_start(&d, 2);
	h_wait_pg_int(&d, total, "SELECT count(*) FROM rows");
	h_wait_redis_int(&d, 0, "LLEN " READY);
	h_sleep_ms(1000);
	cr_assert_eq(h_pg_int(&d, "SELECT count(*) FROM rows"), total);
	cr_assert_eq(h_pg_int(&d, "SELECT count(DISTINCT n) FROM rows"), total);
	/* every id, and no more: the marks' member goes with the last live
	 * mark (ids.lua, once a second) */
	h_wait_redis_int(&d, total, "ZCARD " IDS);
}

/* ferryctl SIGKILLed half way through 50,000 jobs, then run again with
 * the same input: the jobs it had pushed are already accepted, the others
 * go in; every job written once. */
Test(idempotency, a_producer_killed_and_run_again)
{
	char input[300];
	int total = 50000, status;

	setup_rows(NULL, total, input, sizeof(input));
	pid_t pid = spawn_enqueue(input, "first");
	while (h_redis_int(&d, "LLEN " READY) < 3000)
		h_sleep_ms(1);
	kill(pid, SIGKILL);
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	h_sleep_ms(300);        /* a call it sent is run all the same */
	long long before = h_redis_int(&d, "LLEN " READY);
	cr_assert_lt(before, total, "killed before the end");
	pid = spawn_enqueue(input, "again");
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	char path[400];
	snprintf(path, sizeof(path), "%s/again.out", d.dir);
	cr_assert_eq(h_count_in_file(path, " already accepted"), before);
	cr_assert_eq(h_redis_int(&d, "LLEN " READY), total);
	assert_rows_once(total);
	h_stop(&d);
}

/* A postgres queue of `total` jobs with AOF `fsync`, ferryctl pushing them
 * in calls of 1,000 (no ferryd yet), Redis SIGKILLed a few calls in and
 * restarted 1.5 s later: ferryctl's pid; its stderr's path into errp. */
static pid_t
kill_redis_while_enqueueing(const char *fsync, int total, char *errp,
    size_t size)
{
	const char *const aof[] = { "--appendonly", "yes", "--appendfsync",
	    fsync, NULL };
	char input[300];

	setup_rows(aof, total, input, sizeof(input));
	pid_t pid = spawn_enqueue(input, "enqueue");
	while (h_redis_int(&d, "LLEN " READY) < 3000)
		h_sleep_ms(1);
	test_redis_kill9(&d.redis);
	h_sleep_ms(1500);
	cr_assert_eq(test_redis_restart(&d.redis, aof), 0);
	snprintf(errp, size, "%s/enqueue.err", d.dir);
	return pid;
}

/* Redis SIGKILLed while ferryctl pushes 50,000 jobs with AOF `fsync`:
 * ferryctl sends the call whose reply it lost again, and the next ones;
 * every job is written to PostgreSQL exactly once. */
static void
redis_killed_during_the_call(const char *fsync)
{
	char errp[400];
	int total = 50000;
	pid_t pid = kill_redis_while_enqueueing(fsync, total, errp,
	    sizeof(errp));

	h_ctl_wait_ok(pid, errp, "so it is safe to send again");
	assert_rows_once(total);
	h_stop(&d);
}

/* appendfsync always: what Redis answered is on disk. */
Test(idempotency, a_call_whose_reply_was_lost_is_sent_again)
{
	redis_killed_during_the_call("always");
}

/* appendfsync everysec: Redis may forget what it acknowledged in its last
 * two seconds when it is killed (while a background fsync is slow it
 * postpones its AOF writes, and answers all the same: doc/redis.md, what a
 * restart or a crash of Redis loses). What it kept is written exactly once,
 * and a job it forgot is forgotten with its id (a waiter calls it unknown),
 * never half: the test holds whether or not this run lost anything. */
Test(idempotency, everysec_writes_once_what_a_killed_redis_kept)
{
	char errp[400];
	int total = 50000, status;
	pid_t pid = kill_redis_while_enqueueing("everysec", total, errp,
	    sizeof(errp));

	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s",
	    h_read_file(errp));
	long long kept = h_redis_int(&d, "LLEN " READY);
	/* every job kept has its id, every id its job ("" is the marks') */
	cr_assert_eq(h_redis_int(&d, "ZCARD " IDS), kept + (kept > 0));
	cr_assert_leq(kept, total);
	fprintf(stderr, "everysec: %lld of %d acknowledged jobs kept\n", kept,
	    total);
	assert_rows_once((int)kept);
	h_stop(&d);
}
