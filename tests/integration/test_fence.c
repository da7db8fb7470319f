/* test_fence.c - recovered jobs through a real ferryd, redis-server and
 * PostgreSQL, checked against the batches they may have been written in
 * (their stamps) before anything is written: a worker that dies between
 * COMMIT and ack while cache keys expire, while a reload changes
 * max_job_bytes or cache_key_prefixes under the batch, a job its batch
 * refused retried from the dead list, and a batch still open in another
 * session. Every job must come out once: written, or dead with the reason
 * its batch recorded. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "pg_events.h"

static struct ferryd d;

static void
teardown(void)
{
	h_teardown(&d);
}

TestSuite(fence, .fini = teardown, .timeout = 600);

/* The hook armed (one batch of 100 at a time), the hooks' ferryd, and
 * each COPY's transaction held open 2 s by a statement trigger. */
static void
arm_slow_commit_then_exit(char *hook, size_t hook_size, char *env,
    size_t env_size)
{
	pe_arm_exit_after_commit(&d, hook, hook_size, env, env_size, "no", 3);
	setenv("FERRYD", TEST_BUILDDIR "/tests/ferryd-hooks", 1);
	h_pg_exec(&d, "CREATE FUNCTION nap() RETURNS trigger LANGUAGE plpgsql "
	    "AS $$ BEGIN PERFORM pg_sleep(2); RETURN NULL; END $$");
	h_pg_exec(&d, "CREATE TRIGGER nap AFTER INSERT ON events FOR EACH "
	    "STATEMENT EXECUTE FUNCTION nap()");
}

/* Once the batch is in its transaction (its statement trigger sleeping),
 * reload with the config line `from` replaced by `to`. */
static void
reload_mid_batch(const char *from, const char *to)
{
	char *conf, *at;

	h_wait_pg_int(&d, 1, "SELECT count(*) FROM pg_stat_activity "
	    "WHERE wait_event = 'PgSleep'");
	conf = h_read_file(d.config);
	cr_assert((at = strstr(conf, from)) != NULL, "no \"%s\" in the config",
	    from);
	*at = '\0';
	h_write_file(d.config, "%s%s%s", conf, to, at + strlen(from));
	free(conf);
	kill(d.pid, SIGHUP);
}

/* After the worker died between COMMIT and ack: all 100 jobs recovered,
 * `written` done with one row each, `dead` dead. */
static void
assert_after_death(int written, int dead)
{
	h_wait_log(&d, "test hook: exiting between COMMIT and ack", 1);
	h_wait_redis_int(&d, dead, "LLEN ferry:{q}:dead");
	h_wait_redis_int(&d, written, "HGET ferry:{q}:stats done");
	unsetenv("FERRY_TEST_EXIT_AFTER_COMMIT");
	unsetenv("FERRYD");
	cr_assert_eq(h_pg_int(&d, "SELECT count(DISTINCT n) FROM events"),
	    written);
	cr_assert_eq(h_pg_int(&d, "SELECT count(*) FROM events"), written);
	cr_assert_eq(h_redis_int(&d, "HGET ferry:{q}:stats recovered"), 100);
	h_assert_queue_empty(&d, "q");
}

/* Jobs whose rows come from cache keys (hashes, 1 s TTL): their batch
 * commits while the keys expire (a statement trigger sleeps 2 s), and its
 * worker dies before the ack (test hook). Recovered, the jobs find their
 * cache keys gone: they were dead as "cache key expired or evicted"
 * although written. Now the sink fences them first: the written ones
 * are done; the one whose key was already gone when the batch ran (named
 * in the batch's record) is dead, cache_missing, not taken for written
 * (99 written, 1 dead). */
Test(fence, recovered_jobs_with_expired_cache_keys_are_fenced_first)
{
	char hook[400], env[450];

	arm_slow_commit_then_exit(hook, sizeof(hook), env, sizeof(env));
	freeReplyObject(h_redis(&d, "LPUSH ferry:{q}:ready "
	    "{\"id\":\"gone\",\"cache_key\":\"ferry:{q}:cache:gone\"}"));
	for (int i = 0; i < 99; i++) {   /* one batch of 100 */
		freeReplyObject(h_redis(&d, "HSET ferry:{q}:cache:c%d n %d "
		    "payload p%d", i, i, i));
		freeReplyObject(h_redis(&d, "PEXPIRE ferry:{q}:cache:c%d 1000", i));
		freeReplyObject(h_redis(&d, "LPUSH ferry:{q}:ready "
		    "{\"id\":\"c%d\",\"cache_key\":\"ferry:{q}:cache:c%d\"}", i, i));
	}
	h_start(&d, 1);
	assert_after_death(99, 1);
	cr_assert_eq(h_redis_int(&d, "HGET ferry:{q}:stats cache_missing"), 1);
	json_t *dead = h_dead_entries(&d, "q");
	cr_assert_eq(json_array_size(dead), 1);
	cr_assert_str_eq(h_jstr(json_array_get(dead, 0), "reason"),
	    "cache key expired or evicted");
	json_decref(dead);
	h_stop(&d);
}

/* One dead entry says want, in its reason or its last error (an
 * oversized job is named by the SHA-1 of its document, not its id). */
static void
assert_dead_with(json_t *dead, const char *want)
{
	for (size_t i = 0; i < json_array_size(dead); i++) {
		json_t *o = json_array_get(dead, i);
		if (strstr(h_jstr(o, "reason"), want) != NULL ||
		    strstr(h_jstr(o, "last_error"), want) != NULL)
			return;
	}
	cr_assert_fail("no dead entry says \"%s\"", want);
}

/* A reload sets max_job_bytes from 1024 to `limit` while a batch is in
 * its transaction (a statement trigger sleeps 2 s), and its worker dies
 * after the COMMIT, before the ack (test hook). In the batch: 96 small
 * jobs; "m", 600 bytes; "f", 600 bytes, which the table's CHECK refuses;
 * "L", 2,000 bytes, over 1024; "J", 600 bytes of malformed JSON.
 * Recovered under the new limit: `written` jobs done with a row each (the
 * small ones, m, and what else the new limit lets through), the others
 * dead, one dead entry saying each of `reasons`. */
static void
reload_limit_between_commit_and_ack(const char *limit, int written,
    const char *const *reasons, int ndead)
{
	char hook[400], env[450], pad[2001], doc[2100];
	const char *big[] = { "m\",\"n\":1000", "f\",\"n\":-5",
	    "L\",\"n\":1001", "J\",\"n\":1002" };

	arm_slow_commit_then_exit(hook, sizeof(hook), env, sizeof(env));
	memset(pad, 'x', sizeof(pad) - 1);
	pad[sizeof(pad) - 1] = '\0';
	h_push_jobs(&d, "q", 0, 48);
	for (int i = 0; i < 4; i++) {      /* J: malformed, no closing brace */
		snprintf(doc, sizeof(doc), "{\"id\":\"%s,\"payload\":\"%.*s\"%s",
		    big[i], i == 2 ? 2000 : 560, pad, i == 3 ? "" : "}");
		freeReplyObject(h_redis(&d, "LPUSH ferry:{q}:ready %s", doc));
	}
	h_push_jobs(&d, "q", 48, 48);
	h_start(&d, 1);
	reload_mid_batch("max_job_bytes = 1024", limit);
	assert_after_death(written, ndead);
	cr_assert_eq(h_pg_int(&d, "SELECT count(*) FROM events WHERE n = 1000"),
	    1, "job m, written before the reload, is not in the table once");
	json_t *dead = h_dead_entries(&d, "q");
	cr_assert_eq(json_array_size(dead), (size_t)ndead);
	for (int i = 0; i < ndead; i++)
		assert_dead_with(dead, reasons[i]);
	json_decref(dead);
	h_stop(&d);
}

/* Lowered to 256: m, f and J come back over it. m was dead as oversized
 * although written; now the sink fences it first (done). f's batch names
 * it by the SHA-1 of its document, which the limit does not change (by
 * its id, the oversized f was not found and was acked, never written). L
 * was named too (without that, acked), and so is J, whose batch refused
 * it as malformed (only the refusals that may change were named: J,
 * buried as oversized, was acked, never written). Buried, f, L and J are
 * dead with the reasons their batch recorded. */
Test(fence, recovered_jobs_over_a_lowered_max_job_bytes_are_fenced_first)
{
	static const char *const reasons[] = { "23514",
	    "over max_job_bytes 1024", "malformed JSON" };

	reload_limit_between_commit_and_ack("max_job_bytes = 256", 97, reasons,
	    3);
}

/* Raised to 4096: L comes back valid. Its batch's record says it failed
 * there, so that batch did not write it: it is written now, under the
 * limit of now (named by id, it was acked unwritten). f runs again too,
 * and the table refuses it again; J is still malformed. */
Test(fence, recovered_job_its_batch_refused_runs_under_a_raised_max_job_bytes)
{
	static const char *const reasons[] = { "23514", "malformed JSON" };

	reload_limit_between_commit_and_ack("max_job_bytes = 4096", 98, reasons,
	    2);
	cr_assert_eq(h_pg_int(&d, "SELECT count(*) FROM events WHERE n = 1001"),
	    1);
}

/* A job the table refuses (CHECK n >= 0) in a batch whose worker dies
 * between COMMIT and ack: recovered, the batch's record says it failed
 * there, so it runs again and is refused again (dead, its stamps kept).
 * The operator drops the CHECK and retries it: it is written. Taking the
 * record's word as final, it was dead again on every retry while its
 * batch's row was kept (done_retention). */
Test(fence, dead_retry_of_a_job_its_committed_batch_failed_takes_effect)
{
	char hook[400], env[450];

	pe_arm_exit_after_commit(&d, hook, sizeof(hook), env, sizeof(env), "no",
	    3);
	setenv("FERRYD", TEST_BUILDDIR "/tests/ferryd-hooks", 1);
	h_push_jobs(&d, "q", 0, 99);
	freeReplyObject(h_redis(&d, "LPUSH ferry:{q}:ready "
	    "{\"id\":\"neg\",\"n\":-7}"));
	h_start(&d, 1);
	assert_after_death(99, 1);
	json_t *dead = h_dead_entries(&d, "q");
	assert_dead_with(dead, "23514");
	cr_assert_gt(json_array_size(json_object_get(json_array_get(dead, 0),
	    "stamps")), 0);
	json_decref(dead);
	h_pg_exec(&d, "ALTER TABLE events DROP CONSTRAINT events_n_check");
	cr_assert_eq(pe_ctl(&d, "dead retry q neg", NULL), 0);
	h_wait_redis_int(&d, 100, "HGET ferry:{q}:stats done");
	cr_assert_eq(h_pg_int(&d, "SELECT count(*) FROM events WHERE n = -7"), 1);
	cr_assert_eq(h_pg_int(&d, "SELECT count(*) FROM events"), 100);
	cr_assert_eq(h_redis_int(&d, "LLEN ferry:{q}:dead"), 0);
	h_stop(&d);
}

/* The same with jobs whose rows come from cache keys, and a reload of
 * cache_key_prefixes from app:a: to app:b: and of max_job_bytes from 1024
 * to 256: A (key app:a:1, refused after the reload) and C (its hash 591
 * bytes as JSON, over 256) were dead unchecked although written; B (key
 * app:b:1, refused by its batch, allowed after the reload) was acked,
 * never written. Now A and C are done, and B, which its batch names as
 * refused (so not written there), is written under the prefixes of now. */
Test(fence, recovered_jobs_refused_by_a_reloaded_cache_setting_are_fenced_first)
{
	char hook[400], env[450], pad[561];

	arm_slow_commit_then_exit(hook, sizeof(hook), env, sizeof(env));
	memset(pad, 'x', sizeof(pad) - 1);
	pad[sizeof(pad) - 1] = '\0';
	freeReplyObject(h_redis(&d, "HSET app:a:1 n 2000 payload a"));
	freeReplyObject(h_redis(&d, "HSET app:b:1 n 2001 payload b"));
	freeReplyObject(h_redis(&d, "HSET ferry:{q}:cache:c n 2002 payload %s",
	    pad));
	h_push_jobs(&d, "q", 0, 48);
	freeReplyObject(h_redis(&d, "LPUSH ferry:{q}:ready "
	    "{\"id\":\"A\",\"cache_key\":\"app:a:1\"}"));
	freeReplyObject(h_redis(&d, "LPUSH ferry:{q}:ready "
	    "{\"id\":\"B\",\"cache_key\":\"app:b:1\"}"));
	freeReplyObject(h_redis(&d, "LPUSH ferry:{q}:ready "
	    "{\"id\":\"C\",\"cache_key\":\"ferry:{q}:cache:c\"}"));
	h_push_jobs(&d, "q", 48, 49);
	h_start(&d, 1);
	reload_mid_batch("max_job_bytes = 1024\ncache_key_prefixes = app:a:",
	    "max_job_bytes = 256\ncache_key_prefixes = app:b:");
	assert_after_death(100, 0);
	cr_assert_eq(h_pg_int(&d, "SELECT count(*) FROM events WHERE n IN "
	    "(2000, 2001, 2002)"), 3);
	h_stop(&d);
}

/* A batch whose transaction outlasts job_timeout (a row trigger sleeps
 * 20 s on job 11; pg_statement_timeout is 60 s): its worker is stopped,
 * but its backend runs on and commits the 30 rows. The next worker's
 * fence of that batch waited for it under the batch clock, was stopped
 * too, and so on, each time a recovery more, until the master
 * dead-lettered the jobs unchecked ("it died before it could check the
 * job's batches") although they were written. Now the fence waits at
 * most half of job_timeout and the batch then waits as in an outage: one
 * worker stopped, 30 rows once, none dead. */
Test(fence, recovered_jobs_wait_for_their_batch_still_open)
{
	pe_setup(&d, "kill_grace = 300ms\n", "workers = 1\nbatch_size = 30\n"
	    "job_timeout = 2s\nhandler_timeout = 1s\nmax_recoveries = 1\n");
	cr_assert_eq(pe_ctl(&d, "init-db", NULL), 0);
	h_pg_exec(&d, "CREATE FUNCTION slow_row() RETURNS trigger LANGUAGE "
	    "plpgsql AS $$ BEGIN IF NEW.n = 11 THEN PERFORM pg_sleep(20); END IF; "
	    "RETURN NEW; END $$");
	h_pg_exec(&d, "CREATE TRIGGER slow BEFORE INSERT ON events FOR EACH ROW "
	    "EXECUTE FUNCTION slow_row()");
	h_push_jobs(&d, "q", 0, 30);
	h_start(&d, 1);
	h_wait_redis_int(&d, 30, "HGET ferry:{q}:stats done");
	pe_assert_rows_once(&d, 30);
	cr_assert_eq(h_count_in_file(d.log, "over job_timeout"), 1,
	    "workers stopped: %d", h_count_in_file(d.log, "over job_timeout"));
	cr_assert_geq(h_count_in_file(d.log, "is still open in another session"),
	    1);
	cr_assert_eq(h_redis_int(&d, "HGET ferry:{q}:stats dead"), 0);
	h_stop(&d);
}
