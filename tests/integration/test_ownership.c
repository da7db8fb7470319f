/* test_ownership.c - what belongs to one job and to no other, on a real
 * ferryd, redis-server and PostgreSQL: the id the enqueue script accepted
 * it under (only that job moves it: a plain LPUSH carrying the id, done or
 * dead, leaves it live), its key of ferry's own (read only for it: a job
 * naming another's key is dead and touches nothing, nor does its purge),
 * the ids held when the window is turned off (they still resolve, and are
 * forgotten), and a chunk's id (it names its rows: the same document in
 * other chunks is refused, not written twice). */
#include <criterion/criterion.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "harness.h"

#define READY "ferry:{q}:ready"
#define IDS "ferry:{q}:ids"

static struct ferryd d;

static void
teardown(void)
{
	h_teardown(&d);
}

TestSuite(ownership, .fini = teardown, .timeout = 240);

/* ferryctl with args (NULL-terminated) and `input`: its status; its
 * stdout and stderr into *run (freed by the next call). */
static int
ctl(struct h_run *run, const char *input, ...)
{
	va_list ap;
	int status;

	h_run_free(run);
	va_start(ap, input);
	status = h_ctl_v(run, d.config, input, ap);
	va_end(ap);
	return status;
}

/* A job pushed with a plain LPUSH carrying a waiting job's id, done and
 * dead, moves nothing of that id: the first job is still waiting, so its
 * id stays live (a resend is "already accepted", a waiter "pending"), and
 * only its own settle marks it done. */
Test(ownership, a_forged_job_settles_no_id_of_another)
{
	struct h_run run = { 0 };

	h_setup(&d, NULL, "[queue q]\nworkers = 1\nidempotency_window = 1m\n");
	h_start(&d, 1);
	cr_assert_eq(ctl(&run, NULL, "enqueue", "--delay", "4s", "q",
	    "{\"id\":\"x\",\"n\":1}", NULL), 0, "%s", run.err);
	h_assert_id_live(&d, "q", "x");
	/* done, then dead (a cache key outside the queue's space) */
	freeReplyObject(h_redis(&d, "LPUSH " READY " %s %s",
	    "{\"id\":\"x\",\"n\":2}",
	    "{\"id\":\"x\",\"cache_key\":\"elsewhere\"}"));
	h_wait_redis_int(&d, 1, "HGET ferry:{q}:stats done");
	h_wait_redis_int(&d, 1, "HGET ferry:{q}:stats dead");
	h_assert_id_live(&d, "q", "x");
	cr_assert_eq(ctl(&run, NULL, "enqueue", "q", "{\"id\":\"x\",\"n\":1}",
	    NULL), 0);
	cr_assert_str_eq(run.out, "x already accepted\n");
	/* its own settle: done */
	h_wait_redis_int(&d, 2, "HGET ferry:{q}:stats done");
	cr_assert_geq(h_id_score(&d, "q", "x"), 1);
	h_run_free(&run);
	h_stop(&d);
}

/* The same through --wait: a waiter for x is not told "done" by the
 * forged job's settle, nor "dead" with its error. */
Test(ownership, a_waiter_hears_only_its_own_job)
{
	struct h_run run = { 0 };
	char outp[300], errp[300];

	h_setup(&d, NULL, "[queue q]\nworkers = 1\nidempotency_window = 1m\n");
	h_start(&d, 1);
	snprintf(outp, sizeof(outp), "%s/wait.out", d.dir);
	snprintf(errp, sizeof(errp), "%s/wait.err", d.dir);
	h_write_file(outp, "%s", "");
	char input[300];
	snprintf(input, sizeof(input), "%s/in.jsonl", d.dir);
	h_write_file(input, "{\"id\":\"y\",\"n\":1}\n");
	pid_t w = h_ctl_spawn(d.config, input, outp, errp, "enqueue", "--delay",
	    "3s", "--wait", "q", "-", NULL);
	h_wait_redis_int(&d, 1, "ZCARD ferry:{q}:scheduled");
	freeReplyObject(h_redis(&d, "LPUSH " READY " %s",
	    "{\"id\":\"y\",\"cache_key\":\"elsewhere\"}"));
	h_wait_redis_int(&d, 1, "HGET ferry:{q}:stats dead");
	h_ctl_wait_ok(w, errp, "");
	char *out = h_read_file(outp);
	cr_assert_str_eq(out, "y done\n");
	free(out);
	h_run_free(&run);
	h_stop(&d);
}

/* Ids held when the window is turned off still resolve: their jobs, run
 * by a worker of the new configuration (window 0), mark them done (the
 * fetch says the queue holds ids, so the settle names them; a waiter
 * hears it), and they are forgotten after the last window; the set is
 * gone then, and an on/off cycle leaves nothing behind. */
Test(ownership, ids_held_when_the_window_is_turned_off_resolve)
{
	char outp[300], errp[300], input[300];
	struct h_run run = { 0 };

	h_setup(&d, NULL, "[queue q]\nworkers = 0\nidempotency_window = 2s\n");
	h_start(&d, 0);
	snprintf(outp, sizeof(outp), "%s/wait.out", d.dir);
	snprintf(errp, sizeof(errp), "%s/wait.err", d.dir);
	snprintf(input, sizeof(input), "%s/in.jsonl", d.dir);
	h_write_file(input, "{\"id\":\"a\"}\n{\"id\":\"b\"}\n");
	pid_t w = h_ctl_spawn(d.config, input, outp, errp, "enqueue", "--wait",
	    "30s", "q", "-", NULL);
	/* a, b and the marks' member "" */
	h_wait_redis_int(&d, 3, "ZCOUNT " IDS " (0 (1");
	/* the window turned off; then a worker to run the jobs */
	h_config(&d, NULL, "[queue q]\nworkers = 0\n");
	kill(d.pid, SIGHUP);
	h_wait_redis_int(&d, 0, "HEXISTS ferry:{q}:config idempotency_window");
	cr_assert_eq(h_redis_int(&d, "HGET ferry:{q}:config ids_linger"), 2000);
	h_config(&d, NULL, "[queue q]\nworkers = 1\n");
	kill(d.pid, SIGHUP);
	h_ctl_wait_ok(w, errp, "");
	char *out = h_read_file(outp);
	cr_assert_str_eq(out, "a done\nb done\n");
	free(out);
	cr_assert_geq(h_id_score(&d, "q", "a"), 1);
	/* forgotten after the last window: nothing left */
	h_wait_redis_int(&d, 0, "EXISTS " IDS " ferry:{q}:idsha");
	h_wait_redis_int(&d, 0, "HEXISTS ferry:{q}:config ids_linger");
	/* on again: a fresh start */
	h_config(&d, NULL, "[queue q]\nworkers = 1\nidempotency_window = 2s\n");
	kill(d.pid, SIGHUP);
	h_wait_redis_int(&d, 2000, "HGET ferry:{q}:config idempotency_window");
	cr_assert_eq(ctl(&run, NULL, "enqueue", "--wait", "10s", "q",
	    "{\"id\":\"a\"}", NULL), 0, "%s", run.err);
	cr_assert_str_eq(run.out, "a done\n");
	h_wait_redis_int(&d, 0, "EXISTS " IDS " ferry:{q}:idsha");
	h_run_free(&run);
	h_stop(&d);
}

/* A chunk's id names its rows: the same 10-row document sent in chunks of
 * 5 and then of 3 (a retry with another setting, another client's
 * default) is refused the second time, naming why; sent again in chunks
 * of 5 it is already accepted; a document left whole (4 rows) and sent
 * again in chunks is refused too. No row is pushed twice. */
Test(ownership, a_document_sent_again_in_other_chunks_is_refused)
{
	struct h_run run = { 0 };
	const char *doc = "{\"id\":\"d\",\"data\":[0,1,2,3,4,5,6,7,8,9]}";

	h_setup(&d, NULL, "[queue q]\nworkers = 0\nidempotency_window = 1m\n");
	cr_assert_eq(ctl(&run, NULL, "enqueue", "--chunk-rows", "5", "q", doc,
	    NULL), 0, "%s", run.err);
	cr_assert_str_eq(run.out, "d\nd:5\n");
	cr_assert_eq(ctl(&run, NULL, "enqueue", "--chunk-rows", "3", "q", doc,
	    NULL), 65);
	cr_assert(strstr(run.err, "is held for rows 0+5 (first+count) of its "
	    "document, and this job has rows 0+3: the document was sent before "
	    "in other chunks") != NULL, "%s", run.err);
	cr_assert_null(strstr(run.err, "please report"), "%s", run.err);
	cr_assert_eq(ctl(&run, NULL, "enqueue", "--chunk-rows", "5", "q", doc,
	    NULL), 0);
	cr_assert_str_eq(run.out, "d already accepted\nd:5 already accepted\n");
	cr_assert_eq(ctl(&run, NULL, "enqueue", "--chunk-rows", "5", "q",
	    "{\"id\":\"w\",\"data\":[0,1,2,3]}", NULL), 0);
	cr_assert_eq(ctl(&run, NULL, "enqueue", "--chunk-rows", "3", "q",
	    "{\"id\":\"w\",\"data\":[0,1,2,3]}", NULL), 65);
	cr_assert_eq(ctl(&run, NULL, "enqueue", "--chunk-rows", "10", "q",
	    "{\"id\":\"w\",\"data\":[0,1,2,3]}", NULL), 0);
	cr_assert_str_eq(run.out, "w already accepted\n");
	cr_assert_eq(h_redis_int(&d, "LLEN " READY), 3);
	h_run_free(&run);
	h_stop(&d);
}

/* A plain LPUSH naming a waiting job's key of ferry's own: the forged job
 * is dead with a reason and reads nothing (the victim's rows are written
 * once); purging its dead entry releases nothing of the victim's, which
 * still finds its data when it runs. */
Test(ownership, a_job_naming_anothers_own_key_is_dead_and_touches_nothing)
{
	struct h_run run = { 0 };
	char key[300], forged[600];

	h_setup_pg(&d, "[queue q]\nworkers = 1\nhandler = postgres\n"
	    "table = rows\n", "CREATE TABLE rows (n int)", (const char *)NULL);
	cr_assert_eq(ctl(&run, NULL, "enqueue", "--cache", "--delay", "6s", "q",
	    "{\"id\":\"v\",\"data\":[{\"n\":1},{\"n\":2}]}", NULL), 0, "%s",
	    run.err);
	redisReply *m = h_redis(&d, "ZRANGE ferry:{q}:scheduled 0 0");
	json_t *victim = json_loads(strchr(m->element[0]->str, ':') + 1, 0,
	    NULL);
	snprintf(key, sizeof(key), "%s", h_jstr(victim, "cache_key"));
	json_decref(victim);
	freeReplyObject(m);
	snprintf(forged, sizeof(forged), "{\"id\":\"f\",\"cache_key\":\"%s\"}",
	    key);
	freeReplyObject(h_redis(&d, "LPUSH " READY " %s", forged));
	h_start(&d, 1);
	h_wait_redis_int(&d, 1, "HGET ferry:{q}:stats dead");
	json_t *dead = h_dead_entries(&d, "q");
	cr_assert(strstr(h_jstr(json_array_get(dead, 0), "reason"), "is a key "
	    "of ferry's own written for another job") != NULL, "%s",
	    h_jstr(json_array_get(dead, 0), "reason"));
	json_decref(dead);
	cr_assert_eq(h_redis_int(&d, "EXISTS %s", key), 1);
	cr_assert_eq(ctl(&run, NULL, "dead", "purge", "q", "--all", NULL), 0,
	    "%s", run.err);
	cr_assert_eq(h_redis_int(&d, "EXISTS %s", key), 1,
	    "the purge of the forged job released the victim's key");
	h_wait_redis_int(&d, 1, "HGET ferry:{q}:stats done");
	cr_assert_eq(h_pg_int(&d, "SELECT count(*) FROM rows"), 2);
	cr_assert_eq(h_pg_int(&d, "SELECT count(DISTINCT n) FROM rows"), 2);
	/* the victim's own settle released its key */
	cr_assert_eq(h_redis_int(&d, "EXISTS %s", key), 0);
	cr_assert_eq(h_redis_int(&d, "HLEN ferry:{q}:protected"), 0);
	h_run_free(&run);
	h_stop(&d);
}
