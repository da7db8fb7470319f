/* test_upsert.c - [queue] mode = upsert against a real PostgreSQL: the
 * sink driven directly (duplicate keys inside a batch and across batches,
 * a replayed batch, bad rows, version), the start checks of the key, the
 * config keys, and one run through ferryd whose workers are killed with
 * SIGKILL, ending with exact rows and values. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "buf.h"
#include "harness.h"
#include "pg_case.h"
#include "pg_target.h"
#include "sink_pg.h"

static struct ferryd d;
static struct ferry_config cfg;

static void
teardown(void)
{
	config_free(&cfg);
	h_teardown(&d);
}

TestSuite(upsert, .fini = teardown, .timeout = 300);

/* Queue q in mode upsert by `key` with the extra lines. */
static const struct queue_config *
setup_key(const char *key, const char *extra)
{
	char queue[512];

	snprintf(queue, sizeof(queue), "mode = upsert\nkey = %s\n%s", key,
	    extra);
	return pc_setup(&d, &cfg, queue);
}

static const struct queue_config *
setup(const char *extra)
{
	return setup_key("k", extra);
}

static struct sink_pg *
new_sink(const struct queue_config *q)
{
	return pc_sink(&cfg, q);
}

static void
run_ok(struct sink_pg *s, const char *const *docs, int n, const char *key)
{
	pc_run(s, docs, n, key, NULL);
}

static void
assert_rows(const char *want)
{
	pc_assert_rows(&d, want);
}

/* Several jobs of one key in a batch: the last one wins, as if applied one
 * by one in order (any other order would leave another name); rows of one
 * job's array count in their order too. */
Test(upsert, last_job_of_a_key_in_a_batch_wins)
{
	static const char *const docs[] = {
		"{\"k\":1,\"name\":\"a\"}", "{\"k\":2,\"name\":\"b\"}",
		"{\"k\":1,\"name\":\"c\"}", "{\"k\":1,\"name\":\"d\"}",
		"{\"k\":2,\"name\":\"e\"}",
		"{\"data\":[{\"k\":3,\"name\":\"x\"},{\"k\":3,\"name\":\"y\"}]}",
		"{\"k\":1,\"name\":\"f\"}",
	};
	struct sink_pg *s = new_sink(setup(""));

	h_pg_exec(&d, "INSERT INTO profiles VALUES (2, 'old', 0, NULL)");
	run_ok(s, docs, 7, "w:1");
	assert_rows("1=f,2=e,3=y");
	sink_pg_free(s);
	h_stop(&d);
}

/* Batches apply in their order; a key a later batch does not name keeps
 * its value; update_columns leaves the other columns alone. */
Test(upsert, later_batch_updates_earlier_rows)
{
	static const char *const first[] = {
		"{\"k\":1,\"name\":\"a\",\"score\":1}",
		"{\"k\":2,\"name\":\"b\",\"score\":2}",
	};
	static const char *const second[] = {
		"{\"k\":2,\"name\":\"c\",\"score\":20}",
		"{\"k\":1,\"name\":\"d\",\"score\":10}",
		"{\"k\":2,\"name\":\"e\",\"score\":30}",
	};
	struct sink_pg *s = new_sink(setup("update_columns = name\n"));

	run_ok(s, first, 2, "w:1");
	run_ok(s, second, 3, "w:2");
	assert_rows("1=d,2=e");
	cr_assert_eq(h_pg_int(&d, "SELECT sum(score) FROM profiles"), 3,
	    "score is not in update_columns: it keeps its first value");
	sink_pg_free(s);
	h_stop(&d);
}

/* A batch that committed, its ack lost, comes again after a later batch
 * changed its keys: the replay changes nothing. */
Test(upsert, replayed_batch_changes_nothing)
{
	static const char *const older[] = {
		"{\"k\":1,\"name\":\"old\"}", "{\"k\":2,\"name\":\"old\"}",
	};
	static const char *const newer[] = { "{\"k\":1,\"name\":\"new\"}" };
	struct sink_pg *s = new_sink(setup(""));

	run_ok(s, older, 2, "w:1");
	run_ok(s, newer, 1, "w:2");
	run_ok(s, older, 2, "w:1");
	assert_rows("1=new,2=old");
	cr_assert_eq(h_pg_int(&d, "SELECT count(*) FROM ferry_batches"), 2);
	sink_pg_free(s);
	h_stop(&d);
}

/* The usual table of application state: an identity primary key the
 * table fills, the upsert key a unique column; the staging table must not
 * refuse rows for the identity column LIKE copies as NOT NULL. */
Test(upsert, identity_column_not_written)
{
	static const char *const docs[] = {
		"{\"email\":\"a@x\",\"name\":\"a\"}",
		"{\"email\":\"b@x\",\"name\":\"b\"}",
		"{\"email\":\"a@x\",\"name\":\"c\"}",
	};
	struct config_errors errs = { 0, NULL };

	h_setup(&d, NULL, "");
	h_config(&d, h_pg_start(&d), "[queue q]\nhandler = postgres\n"
	    "table = users\ncolumns = email, name\nmode = upsert\n"
	    "key = email\n");
	h_pg_exec(&d, "CREATE TABLE users (id bigint GENERATED ALWAYS AS "
	    "IDENTITY PRIMARY KEY, email text NOT NULL UNIQUE, name text, "
	    "created timestamptz NOT NULL DEFAULT now())");
	cr_assert_eq(config_load(d.config, &cfg, &errs), 0);
	struct sink_pg *s = new_sink(&cfg.queues[0]);
	run_ok(s, docs, 3, "w:1");
	char *got = h_pg_text(&d, "SELECT string_agg(email || '=' || name, ',' "
	    "ORDER BY email) FROM users");
	cr_assert_str_eq(got, "a@x=c,b@x=b");
	free(got);
	cr_assert_eq(h_pg_int(&d, "SELECT count(*) FROM users WHERE id IS NOT "
	    "NULL AND created IS NOT NULL"), 2);
	sink_pg_free(s);
	h_stop(&d);
}

/* A type error, a NULL key and a CHECK violation (in a row a later job of
 * its key would replace: still refused) are dead with their SQLSTATE; the
 * others commit in order; a replay of the batch says the same. */
Test(upsert, bad_rows_are_dead_and_the_rest_commits)
{
	static const char *const docs[] = {
		"{\"k\":1,\"name\":\"a\",\"score\":1}",
		"{\"k\":2,\"name\":\"b\",\"score\":\"x\"}",
		"{\"k\":1,\"name\":\"c\",\"score\":2}",
		"{\"name\":\"d\",\"score\":3}",
		"{\"k\":3,\"name\":\"e\",\"score\":-1}",
		"{\"k\":3,\"name\":\"f\",\"score\":4}",
	};
	static const char *const sqlstate[] = { NULL, "22P02: ", NULL,
	    "23502: ", "23514: ", NULL };
	struct sink_pg *s = new_sink(setup(""));

	for (int round = 0; round < 2; round++) {
		pc_run(s, docs, 6, "w:1", sqlstate);
		assert_rows("1=c,3=f");
	}
	sink_pg_free(s);
	h_stop(&d);
}

/* With version, a write applies only when its version is greater than the
 * row's: in a batch the greatest wins (of equal ones the first, as in
 * order), and a stale batch committed later changes nothing. */
Test(upsert, version_keeps_the_newest)
{
	static const char *const batch[] = {
		"{\"k\":1,\"name\":\"a\",\"v\":5}", "{\"k\":1,\"name\":\"b\",\"v\":7}",
		"{\"k\":1,\"name\":\"c\",\"v\":6}", "{\"k\":1,\"name\":\"d\",\"v\":7}",
		"{\"k\":2,\"name\":\"e\",\"v\":1}",
	};
	static const char *const stale[] = {
		"{\"k\":1,\"name\":\"s\",\"v\":6}", "{\"k\":2,\"name\":\"t\",\"v\":2}",
	};
	struct sink_pg *s = new_sink(setup("version = v\n"));

	run_ok(s, batch, 5, "w:1");
	assert_rows("1=b/7,2=e/1");
	run_ok(s, stale, 2, "w:2");
	assert_rows("1=b/7,2=t/2");
	sink_pg_free(s);
	h_stop(&d);
}

/* ferryd's start and init-db refuse a key that no unique index matches:
 * a partial unique index does not count. */
Test(upsert, key_without_unique_index_is_refused)
{
	char err[512], *out;
	const char *args[] = { "-f", "-c", d.config, NULL };
	const struct queue_config *q = setup_key("k", "");

	h_pg_exec(&d, "ALTER TABLE profiles DROP CONSTRAINT profiles_pkey");
	h_pg_exec(&d, "CREATE UNIQUE INDEX ON profiles (k) WHERE k > 0");
	cr_assert_eq(pg_target_check(&cfg, q, true, NULL, err, sizeof(err)),
	    PG_FATAL, "%s", err);
	cr_assert_str_eq(err, "[queue q] key: \"k\" is not the primary key or "
	    "a unique index of table \"profiles\" (allowed: the columns of a "
	    "primary key or of a unique index that is not partial, not on "
	    "expressions, not deferrable; create one, e.g. CREATE UNIQUE INDEX "
	    "ON profiles (k))");
	int status = h_run_ferryd(args, &out);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 1, "%s", out);
	cr_assert(strstr(out, "key: \"k\" is not the primary key") != NULL,
	    "%s", out);
	free(out);
	struct h_run r;
	cr_assert_eq(h_ctl(&r, d.config, NULL, "init-db", NULL), 65, "%s%s",
	    r.out, r.err);
	cr_assert(strstr(r.err, "key: \"k\" is not the primary key") != NULL,
	    "%s%s", r.out, r.err);
	h_run_free(&r);
	h_pg_exec(&d, "CREATE UNIQUE INDEX ON profiles (k)");
	cr_assert_eq(pg_target_check(&cfg, q, false, NULL, err, sizeof(err)),
	    PG_OK, "%s", err);
	h_stop(&d);
}

/* A key of two columns matches a unique index on them in either order. */
Test(upsert, key_of_two_columns_in_any_order)
{
	char err[512];
	const struct queue_config *q = setup_key("k, name", "");
	static const char *const docs[] = {
		"{\"k\":1,\"name\":\"a\",\"score\":1}",
		"{\"k\":1,\"name\":\"b\",\"score\":2}",
		"{\"k\":1,\"name\":\"a\",\"score\":3}",
	};

	cr_assert_eq(pg_target_check(&cfg, q, true, NULL, err, sizeof(err)),
	    PG_FATAL, "%s", err);
	h_pg_exec(&d, "ALTER TABLE profiles DROP CONSTRAINT profiles_pkey");
	h_pg_exec(&d, "CREATE UNIQUE INDEX ON profiles (name, k)");
	cr_assert_eq(pg_target_check(&cfg, q, true, NULL, err, sizeof(err)),
	    PG_OK, "%s", err);
	struct sink_pg *s = new_sink(q);
	run_ok(s, docs, 3, "w:1");
	cr_assert_eq(h_pg_int(&d, "SELECT count(*) FROM profiles"), 2);
	cr_assert_eq(h_pg_int(&d, "SELECT score FROM profiles WHERE name = "
	    "'a'"), 3);
	sink_pg_free(s);
	h_stop(&d);
}

/* key, update_columns and version must name columns the queue writes. */
Test(upsert, key_columns_must_be_written)
{
	char err[512];

	setup("columns = k, name\nversion = v\n");
	cr_assert_eq(pg_target_check(&cfg, &cfg.queues[0], true, NULL, err,
	    sizeof(err)), PG_FATAL, "%s", err);
	cr_assert(strstr(err, "[queue q] version: column \"v\" is not one that "
	    "the queue writes") != NULL, "%s", err);
	h_stop(&d);
}

/* The config's errors for `queue` (a [queue q] body), joined by "\n". */
static char *
load_errors(const char *queue)
{
	char path[] = "/tmp/ferry-upsert-XXXXXX";
	struct config_errors errs = { 0, NULL };
	struct ferry_config c;
	struct buf b = BUF_INIT;
	int fd = mkstemp(path);

	cr_assert_geq(fd, 0);
	close(fd);
	h_write_file(path, "[queue q]\n%s", queue);
	if (config_load(path, &c, &errs) == 0)
		config_free(&c);
	for (int i = 0; i < errs.n; i++)
		buf_printf(&b, "%s%s", i ? "\n" : "", errs.msgs[i]);
	config_errors_free(&errs);
	unlink(path);
	return buf_take(&b);
}

static void
assert_error(const char *queue, const char *want)
{
	char *got = load_errors(queue);
	cr_assert(strstr(got, want) != NULL, "want \"%s\" in:\n%s", want, got);
	free(got);
}

/* Each key refused at load, naming section, key and what is allowed. */
Test(upsert_config, keys_are_checked_at_load)
{
	const char *pg = "handler = postgres\ntable = t\n";
	char body[256], *got;

	snprintf(body, sizeof(body), "%smode = replace\n", pg);
	assert_error(body, "[queue q] mode: \"replace\" is not one of insert, "
	    "upsert");
	assert_error("mode = upsert\nkey = id\n", "[queue q] mode: \"upsert\" "
	    "is set but handler = noop (only used with handler = postgres)");
	snprintf(body, sizeof(body), "%smode = upsert\n", pg);
	assert_error(body, "[queue q] key: required when mode = upsert");
	snprintf(body, sizeof(body), "%skey = id\nversion = v\n", pg);
	assert_error(body, "[queue q] key: \"id\" is set but mode = insert "
	    "(only used with mode = upsert or update)");
	assert_error(body, "[queue q] version: \"v\" is set but mode = insert");
	snprintf(body, sizeof(body), "%smode = upsert\nkey = id, 2x\n", pg);
	assert_error(body, "\"2x\" is not a valid column name (allowed: names "
	    "separated by commas");
	snprintf(body, sizeof(body), "%smode = upsert\nkey = id\n"
	    "update_columns = a, b, a\n", pg);
	assert_error(body, "column \"a\" is named twice (allowed: each column "
	    "once)");
	snprintf(body, sizeof(body), "%smode = upsert\nkey = id\n"
	    "version = a b\n", pg);
	assert_error(body, "version: \"a b\" is not a valid column name");
	snprintf(body, sizeof(body), "%smode = upsert\nkey = tenant, id\n"
	    "update_columns = name\nversion = v\n", pg);
	got = load_errors(body);
	cr_assert_str_eq(got, "");
	free(got);
}

TestSuite(upsert_ferryd, .fini = teardown, .timeout = 600);

/* Queue q upserting into profiles by k through ferryd; init-db run. */
static void
setup_ferryd(const char *ferryd_extra, const char *queue_extra)
{
	char queue[512];

	snprintf(queue, sizeof(queue), "mode = upsert\nkey = k\n%s",
	    queue_extra);
	pc_setup_ferryd(&d, ferryd_extra, queue);
}

/* 20,000 jobs over 500 keys, 4 workers, one killed with SIGKILL every
 * 300 ms (each apply made 10 ms longer so that kills land inside
 * transactions and between COMMIT and ack): with version, every key ends
 * with its last job, whatever order the workers committed in. */
Test(upsert_ferryd, newest_value_survives_killed_workers)
{
	setup_ferryd("restart_backoff_min = 10ms\nrestart_backoff_max = 100ms\n",
	    "workers = 4\nbatch_size = 20\nmax_recoveries = 1000\n"
	    "version = v\n");
	h_pg_slow(&d, "profiles", "INSERT");
	pc_push(&d, 20000, 500, 0);
	h_start(&d, 4);
	h_kill_workers_until_done(&d, "q", 20000);
	pc_assert_last_of_each_key(&d, 20000, 500);
	cr_assert_gt(h_redis_int(&d, "HGET ferry:{q}:stats recovered"), 0);
	h_stop(&d);
}

/* Three workers on 40 hot keys with deletes, no faults: their batches lock
 * shared rows in different orders, and PostgreSQL ends some in a deadlock
 * (40P01). Such a batch goes again in place, no attempt spent, so with
 * max_attempts = 1 none is dead (were each deadlock to spend an attempt of
 * every job of its batch, about 1 job in 12 would be). */
Test(upsert_ferryd, deadlocks_between_workers_spend_no_attempt)
{
	const int n = 12000;
	long long end = h_now_ms() + 3 * H_DEADLINE_MS, settled = 0;

	setup_ferryd("", "workers = 3\nbatch_size = 20\nmax_attempts = 1\n"
	    "version = v\n");
	pc_push(&d, n, 40, 7);
	h_start(&d, 3);
	while (settled < n && h_now_ms() < end) {
		h_sleep_ms(50);
		settled = h_redis_int(&d, "HGET ferry:{q}:stats done") +
		    h_redis_int(&d, "LLEN ferry:{q}:dead");
	}
	cr_assert_eq(h_redis_int(&d, "LLEN ferry:{q}:dead"), 0,
	    "jobs dead (a deadlock spent their one attempt?)");
	pc_assert_last_of_each_key(&d, n, 40);
	h_stop(&d);
}

/* The worker dies right after the first batch's COMMIT, before the ack
 * (test hook): its jobs come back stamped, the fence finds the batch
 * committed, and they are acked without being applied again (no version:
 * a re-applied batch would leave older values, or, before the later
 * batches, apply a job's row twice, which a trigger records). */
Test(upsert_ferryd, death_between_commit_and_ack_applies_nothing_again)
{
	char hook[400], env[450];

	setup_ferryd("", "workers = 1\nbatch_size = 100\n");
	h_pg_exec(&d, "CREATE TABLE applied (v bigint)");
	h_pg_exec(&d, "CREATE FUNCTION record() RETURNS trigger LANGUAGE "
	    "plpgsql AS $$ BEGIN INSERT INTO applied VALUES (NEW.v); RETURN "
	    "NULL; END $$");
	h_pg_exec(&d, "CREATE TRIGGER record AFTER INSERT OR UPDATE ON profiles "
	    "FOR EACH ROW EXECUTE FUNCTION record()");
	snprintf(hook, sizeof(hook), "%s/exit-after-commit", d.dir);
	h_write_file(hook, "once\n");
	snprintf(env, sizeof(env), "FERRY_TEST_EXIT_AFTER_COMMIT=%s", hook);
	putenv(env);
	setenv("FERRYD", TEST_BUILDDIR "/tests/ferryd-hooks", 1);
	pc_push(&d, 300, 50, 0);
	h_start(&d, 1);
	h_wait_log(&d, "test hook: exiting between COMMIT and ack", 1);
	h_wait_redis_int(&d, 300, "HGET ferry:{q}:stats done");
	unsetenv("FERRY_TEST_EXIT_AFTER_COMMIT");
	unsetenv("FERRYD");
	pc_assert_last_of_each_key(&d, 300, 50);
	cr_assert_eq(h_pg_int(&d, "SELECT count(*) - count(DISTINCT v) FROM "
	    "applied"), 0, "a job's row was applied twice");
	cr_assert_geq(h_pg_int(&d, "SELECT count(*) FROM applied"), 150);
	/* pipeline (the default): the committed batch and the next one,
	 * already fetched into the worker's second list, both handed back */
	cr_assert_eq(h_redis_int(&d, "HGET ferry:{q}:stats recovered"), 200);
	cr_assert_eq(access(hook, F_OK), -1, "the hook did not fire");
	h_stop(&d);
}
