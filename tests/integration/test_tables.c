/* test_tables.c - a postgres queue writing several tables (tables =)
 * against a real PostgreSQL: orders and order_lines with a foreign key,
 * child rows before their parents in a batch, routed by a job's
 * table_member or by one array per table in its "data"; a table not
 * configured; a bad row that takes its whole job (every table) to the
 * dead list while the rest commits; an insert table beside an upsert one;
 * a missing key index refused at start; and a run through ferryd whose
 * workers are killed, ending with exact rows in both tables. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "pg_case.h"
#include "pg_target.h"
#include "sink_pg.h"

#define SCHEMA "CREATE TABLE orders (id int PRIMARY KEY, total int NOT NULL " \
	"CHECK (total >= 0));CREATE TABLE order_lines (order_id int NOT NULL " \
	"REFERENCES orders (id), line int NOT NULL, item text)"

/* Queue q writing the tables of the list (tables =) with the extra lines
 * (queue and table sections), loaded into cfg; the schema created. */
static void
load_tables(const char *tables, const char *extra)
{
	struct config_errors errs = { 0, NULL };
	char body[1024];

	h_setup(&pc_d, NULL, "");
	snprintf(body, sizeof(body), "[queue q]\nhandler = postgres\n"
	    "tables = %s\n%s", tables, extra);
	h_config(&pc_d, h_pg_start(&pc_d), body);
	h_pg_exec(&pc_d, SCHEMA);
	cr_assert_eq(config_load(pc_d.config, &pc_cfg, &errs), 0, "%s",
	    errs.n ? errs.msgs[0] : "");
}

static void
load(const char *extra)
{
	load_tables("orders, order_lines", extra);
}

/* load_tables(tables, extra), the sink's start check passed. */
static struct sink_pg *
setup_tables(const char *tables, const char *extra)
{
	char err[512];

	load_tables(tables, extra);
	cr_assert_eq(pg_target_check(&pc_cfg, &pc_cfg.queues[0], true, NULL, err,
	    sizeof(err)), PG_OK, "%s", err);
	return sink_pg_new(&pc_cfg, &pc_cfg.queues[0]);
}

static struct sink_pg *
setup(const char *extra)
{
	return setup_tables("orders, order_lines", extra);
}

/* Sink s and its servers gone, a fresh queue set up (setup_tables). */
static struct sink_pg *
setup_again(struct sink_pg *s, const char *tables, const char *extra)
{
	sink_pg_free(s);
	config_free(&pc_cfg);
	h_stop(&pc_d);
	h_teardown(&pc_d);
	return setup_tables(tables, extra);
}

/* "id=total,...;order_id/line/item,..." */
static void
assert_rows(const char *want)
{
	char *got = h_pg_text(&pc_d, "SELECT coalesce((SELECT string_agg(id || "
	    "'=' || total, ',' ORDER BY id) FROM orders), '') || ';' || "
	    "coalesce((SELECT string_agg(order_id || '/' || line || '/' || "
	    "coalesce(item, '-'), ',' ORDER BY order_id, line) FROM "
	    "order_lines), '')");

	cr_assert_str_eq(got, want);
	free(got);
}

TestSuite(tables, .fini = pc_teardown, .timeout = 300);

/* One array per table in "data": a job's lines before its order, and a
 * job of lines before the job of their order; both commit, replayed
 * under the same key they change nothing. */
Test(tables, data_arrays_parents_first_in_either_order)
{
	static const char *const docs[] = {
		"{\"data\":{\"order_lines\":[{\"order_id\":1,\"line\":1,\"item\":"
		    "\"a\"},{\"order_id\":1,\"line\":2}],\"orders\":[{\"id\":1,"
		    "\"total\":5}]}}",
		"{\"data\":{\"order_lines\":[{\"order_id\":2,\"line\":1,\"item\":"
		    "\"b\"}]}}",
		"{\"data\":{\"orders\":[{\"id\":2,\"total\":7}]}}",
	};
	struct sink_pg *s = setup("");

	for (int round = 0; round < 2; round++) {
		pc_run(s, docs, 3, "w:1", NULL);
		assert_rows("1=5,2=7;1/1/a,1/2/-,2/1/b");
	}
	sink_pg_free(s);
	h_stop(&pc_d);
}

/* A table named twice in a job's "data": the last array is its rows, as
 * the last of duplicate members is everywhere else (jansson, "data"
 * itself, op_member); both arrays were written. */
Test(tables, duplicate_table_member_the_last_wins)
{
	static const char *const docs[] = {
		"{\"data\":{\"orders\":[{\"id\":5,\"total\":1}],\"orders\":"
		    "[{\"id\":6,\"total\":2}]}}",
	};
	struct sink_pg *s = setup("");

	pc_run(s, docs, 1, "w:1", NULL);
	assert_rows("6=2;");
	sink_pg_free(s);
	h_stop(&pc_d);
}

/* table_member names each job's table; a child job before its parent. */
Test(tables, member_routes_each_job)
{
	static const char *const docs[] = {
		"{\"table\":\"order_lines\",\"data\":[{\"order_id\":3,\"line\":1,"
		    "\"item\":\"x\"}]}",
		"{\"table\":\"orders\",\"data\":{\"id\":3,\"total\":0}}",
		"{\"table\":\"order_lines\",\"data\":{\"order_id\":3,\"line\":2}}",
	};
	struct sink_pg *s = setup("table_member = table\n"
	    "[table q order_lines]\ncolumns = order_id, line, item\n");

	pc_run(s, docs, 3, "w:1", NULL);
	assert_rows("3=0;3/1/x,3/2/-");
	sink_pg_free(s);
	h_stop(&pc_d);
}

/* A table that is not one of the queue's is dead with that reason, both
 * ways of routing; so is a job without its table member, and a "data"
 * that is not an object of tables (a bare document is one). */
Test(tables, unknown_table_is_dead)
{
	static const char *const member[] = {
		"{\"table\":\"invoices\",\"data\":{\"id\":1}}",
		"{\"data\":{\"id\":1}}",
		"{\"table\":\"orders\",\"data\":{\"id\":1,\"total\":1}}",
		"{\"table\":null,\"data\":{\"id\":1}}",
		"{\"table\":[\"orders\"],\"data\":{\"id\":1}}",
	};
	static const char *const member_dead[] = {
		"table \"invoices\" is not one of this queue's tables (orders, "
		    "order_lines)",
		"table: the job has no such member, or it is null (allowed: a "
		    "string naming one of this queue's tables: orders, order_lines)",
		NULL,
		"table: the job has no such member, or it is null (allowed: a "
		    "string naming one of this queue's tables: orders, order_lines)",
		"table: is not a string of at most 127 bytes (allowed: a string "
		    "naming one of this queue's tables: orders, order_lines)",
	};
	static const char *const data[] = {
		"{\"data\":{\"orders\":[{\"id\":2,\"total\":1}],\"invoices\":[]}}",
		"{\"data\":[{\"id\":3,\"total\":1}]}",
		"{\"data\":{\"orders\":[{\"id\":4,\"total\":1}]}}",
		"{\"orders\":[{\"id\":5,\"total\":1}]}",
	};
	static const char *const data_dead[] = {
		"table \"invoices\" is not one of this queue's tables (orders, "
		    "order_lines)",
		"data is not an object of one array of rows per table (allowed "
		    "members: orders, order_lines)",
		NULL, NULL,
	};
	struct sink_pg *s = setup("table_member = table\n");

	pc_run(s, member, 5, "w:1", member_dead);
	assert_rows("1=1;");
	s = setup_again(s, "orders, order_lines", "");
	pc_run(s, data, 4, "w:2", data_dead);
	assert_rows("4=1,5=1;");
	sink_pg_free(s);
	h_stop(&pc_d);
}

/* tables = with one table routes as with several: a job's "data" holds
 * one array per table, or its table_member names the table; a job for
 * another table is dead. Taken for table =, a one-table list would write
 * every job into it whole, as one row of NULLs, and ack it. */
Test(tables, one_table_in_the_list_still_routes)
{
	static const char *const data[] = {
		"{\"data\":{\"orders\":[{\"id\":1,\"total\":1},{\"id\":2,"
		    "\"total\":2}]}}",
		"{\"data\":{\"order_lines\":[{\"order_id\":1,\"line\":1}]}}",
		"{\"data\":{\"orders\":[{\"id\":3,\"total\":3}],"
		    "\"order_lines\":[]}}",
	};
	static const char *const data_dead[] = {
		NULL,
		"table \"order_lines\" is not one of this queue's tables (orders)",
		"table \"order_lines\" is not one of this queue's tables (orders)",
	};
	static const char *const member[] = {
		"{\"table\":\"orders\",\"data\":{\"id\":4,\"total\":4}}",
		"{\"table\":\"order_lines\",\"data\":{\"order_id\":1,"
		    "\"line\":2}}",
		"{\"data\":{\"id\":5,\"total\":5}}",
	};
	static const char *const member_dead[] = {
		NULL,
		"table \"order_lines\" is not one of this queue's tables (orders)",
		"table: the job has no such member, or it is null (allowed: a "
		    "string naming one of this queue's tables: orders)",
	};
	struct sink_pg *s = setup_tables("orders", "");

	pc_run(s, data, 3, "w:1", data_dead);
	assert_rows("1=1,2=2;");
	s = setup_again(s, "orders", "table_member = table\n");
	pc_run(s, member, 3, "w:2", member_dead);
	assert_rows("4=4;");
	sink_pg_free(s);
	h_stop(&pc_d);
}

/* A job ferry cannot read (nested deeper than json_scan's 64) is dead
 * saying so, both ways of routing, not as a job without its table member
 * or a "data" that is not an object of tables. */
Test(tables, too_deep_a_document_says_so)
{
	static const char *const shapes[] = {
		"{\"table\":\"orders\",\"data\":{\"id\":1,\"total\":1},"
		    "\"x\":%s}",
		"{\"data\":{\"orders\":[{\"id\":1,\"total\":1}]},\"x\":%s}",
	};
	static const char *const extra[] = { "table_member = table\n", "" };
	char deep[2 * 65 + 1], el[320], err[256];
	struct handler_result res[1];
	struct sink_pg *s = NULL;
	struct job job;

	memset(deep, '[', 65);
	memset(deep + 65, ']', 65);
	deep[130] = '\0';
	for (int i = 0; i < 2; i++) {
		s = i == 0 ? setup(extra[i]) : setup_again(s,
		    "orders, order_lines", extra[i]);
		h_job_parse(&job, el, sizeof(el), false, shapes[i], deep);
		memset(res, 0, sizeof(res));
		cr_assert_eq(sink_pg_run(s, &job, res, 1, "w:1", err,
		    sizeof(err)), HANDLER_DONE, "%s", err);
		cr_assert_eq(res[0].outcome, HANDLER_FAIL);
		cr_assert_not_null(strstr(res[0].message, "nesting deeper than "
		    "64"), "%s: %s", extra[i], res[0].message);
		assert_rows(";");
		h_jobs_free(&job, 1);
	}
	sink_pg_free(s);
	h_stop(&pc_d);
}

/* A recovered copy B of document D out of max_recoveries (dead) and a
 * fresh copy A of D, refused once by a foreign key to a later order (a bad
 * order Z sends the batch into halves) and written when tried again:
 * D's entry in the batch's record stays (B failed), with B's reason, not
 * A's refusal (23503), which a replay would then give B. */
Test(tables, kept_record_entry_has_the_reason_of_the_copy_that_failed)
{
	static const char D[] = "{\"data\":{\"order_lines\":[{\"order_id\":"
	    "7,\"line\":1}]}}";
	char el[4][256];
	struct job jobs[4];
	struct handler_result res[4];
	struct sink_pg *s = setup("[table q orders]\nmode = upsert\nkey = id\n");

	h_job_parse(&jobs[0], el[0], 256, true, "{\"ferry\":1,\"recoveries\":5,"
	    "\"attempts\":0,\"stamps\":[\"q:1\"],\"job\":%s}", D);
	jobs[0].bury = true;
	h_job_parse(&jobs[1], el[1], 256, false, "%s", D);
	h_job_parse(&jobs[2], el[2], 256, false, "%s",
	    "{\"data\":{\"orders\":[{\"id\":9,\"total\":-1}]}}");
	h_job_parse(&jobs[3], el[3], 256, false, "%s",
	    "{\"data\":{\"orders\":[{\"id\":7,\"total\":7}]}}");
	char err[256];
	memset(res, 0, sizeof(res));
	cr_assert_eq(sink_pg_run(s, jobs, res, 4, "c:1", err, sizeof(err)),
	    HANDLER_DONE, "%s", err);
	cr_assert_eq(res[0].outcome, HANDLER_FAIL);
	cr_assert_eq(res[1].outcome, HANDLER_OK, "%s", res[1].message);
	cr_assert_eq(res[2].outcome, HANDLER_FAIL);
	cr_assert_eq(res[3].outcome, HANDLER_OK, "%s", res[3].message);
	assert_rows("7=7;7/1/-");
	char sql[160];
	snprintf(sql, sizeof(sql), "SELECT failed::jsonb ->> '%s' FROM "
	    "ferry_batches WHERE key = 'c:1'", job_digest(&jobs[1]));
	char *why = h_pg_text(&pc_d, sql);
	cr_assert_str_eq(why, res[0].message);
	free(why);
	h_jobs_free(jobs, 4);
	sink_pg_free(s);
	h_stop(&pc_d);
}

/* A CHECK violation in one table and a foreign key to no order take their
 * whole jobs (the rows in the other table too) to the dead list with
 * their SQLSTATE; the rest commits, lines before their order included. */
Test(tables, bad_row_kills_its_whole_job)
{
	static const char *const docs[] = {
		"{\"data\":{\"order_lines\":[{\"order_id\":6,\"line\":1}]}}",
		"{\"data\":{\"orders\":[{\"id\":5,\"total\":-1}],\"order_lines\":"
		    "[{\"order_id\":5,\"line\":1}]}}",
		"{\"data\":{\"orders\":[{\"id\":6,\"total\":6}]}}",
		"{\"data\":{\"orders\":[{\"id\":7,\"total\":7}],\"order_lines\":"
		    "[{\"order_id\":99,\"line\":1}]}}",
		"{\"data\":{\"orders\":[{\"id\":8,\"total\":\"x\"}]}}",
		"{\"data\":{\"orders\":[{\"id\":9,\"total\":9}],\"order_lines\":"
		    "[{\"order_id\":9,\"line\":1}]}}",
	};
	static const char *const dead[] = { NULL, "23514: ", NULL, "23503: ",
	    "22P02: ", NULL };
	struct sink_pg *s = setup("");

	for (int round = 0; round < 2; round++) {
		pc_run(s, docs, 6, "w:1", dead);
		assert_rows("6=6,9=9;6/1/-,9/1/-");
	}
	sink_pg_free(s);
	h_stop(&pc_d);
}

/* orders upserted by id (the last of a key wins), order_lines inserted:
 * one batch, one transaction; a delete of an order goes after the
 * deletes of its lines (there are none here: the child table inserts). */
Test(tables, upsert_table_beside_insert_table)
{
	static const char *const docs[] = {
		"{\"data\":{\"order_lines\":[{\"order_id\":1,\"line\":1}],"
		    "\"orders\":[{\"id\":1,\"total\":1}]}}",
		"{\"data\":{\"orders\":[{\"id\":1,\"total\":2}],\"order_lines\":"
		    "[{\"order_id\":1,\"line\":2}]}}",
		"{\"data\":{\"orders\":[{\"id\":2,\"total\":3}]}}",
	};
	static const char *const later[] = {
		"{\"data\":{\"orders\":[{\"id\":2,\"total\":4}]}}",
		"{\"op\":\"delete\",\"data\":{\"orders\":[{\"id\":3}]}}",
	};
	struct sink_pg *s = setup("[table q orders]\nmode = upsert\n"
	    "key = id\n");

	pc_run(s, docs, 3, "w:1", NULL);
	assert_rows("1=2,2=3;1/1/-,1/2/-");
	pc_run(s, docs, 3, "w:1", NULL);       /* a replay */
	assert_rows("1=2,2=3;1/1/-,1/2/-");
	pc_run(s, later, 2, "w:2", NULL);
	assert_rows("1=2,2=4;1/1/-,1/2/-");
	sink_pg_free(s);
	h_stop(&pc_d);
}

/* orders upserted, order_lines inserted, the lines' jobs before their
 * orders' and a bad order among them: the bad row sends the batch
 * statement by statement, where the halves with lines but not their
 * orders fail the foreign key. Jobs that write only insert tables go
 * again once the rest is in, as with insert alone, also when another
 * table of the queue is upsert (not dead with 23503). */
Test(tables, lines_before_their_upserted_orders_beside_a_bad_row)
{
	static const char *const docs[] = {
		"{\"data\":{\"order_lines\":[{\"order_id\":1,\"line\":1}]}}",
		"{\"data\":{\"order_lines\":[{\"order_id\":2,\"line\":1}]}}",
		"{\"data\":{\"order_lines\":[{\"order_id\":3,\"line\":1}]}}",
		"{\"data\":{\"orders\":[{\"id\":9,\"total\":-1}]}}",
		"{\"data\":{\"orders\":[{\"id\":1,\"total\":1}]}}",
		"{\"data\":{\"orders\":[{\"id\":2,\"total\":2}]}}",
		"{\"data\":{\"orders\":[{\"id\":3,\"total\":3}]}}",
	};
	static const char *const dead[] = { NULL, NULL, NULL, "23514: ", NULL,
	    NULL, NULL };
	struct sink_pg *s = setup("[table q orders]\nmode = upsert\n"
	    "key = id\n");

	pc_run(s, docs, 7, "w:1", dead);
	assert_rows("1=1,2=2,3=3;1/1/-,2/1/-,3/1/-");
	pc_run(s, docs, 7, "w:1", dead);       /* a replay */
	assert_rows("1=1,2=2,3=3;1/1/-,2/1/-,3/1/-");
	sink_pg_free(s);
	h_stop(&pc_d);
}

/* Both tables upserted; a later job deletes an order with its lines (the
 * order first in its document): the lines go first (children first), so
 * the foreign key holds. */
Test(tables, deletes_children_first)
{
	static const char *const docs[] = {
		"{\"data\":{\"order_lines\":[{\"order_id\":1,\"line\":1}],"
		    "\"orders\":[{\"id\":1,\"total\":1},{\"id\":2,\"total\":2}]}}",
		"{\"op\":\"delete\",\"data\":{\"orders\":[{\"id\":1}],"
		    "\"order_lines\":[{\"order_id\":1,\"line\":1}]}}",
	};
	struct sink_pg *s;
	char err[512];

	load("mode = upsert\nkey = id\n[table q order_lines]\n"
	    "key = order_id, line\n");
	h_pg_exec(&pc_d, "CREATE UNIQUE INDEX ON order_lines (order_id, line)");
	cr_assert_eq(pg_target_check(&pc_cfg, &pc_cfg.queues[0], true, NULL, err,
	    sizeof(err)), PG_OK, "%s", err);
	s = sink_pg_new(&pc_cfg, &pc_cfg.queues[0]);
	pc_run(s, docs, 1, "w:1", NULL);
	assert_rows("1=1,2=2;1/1/-");
	pc_run(s, docs + 1, 1, "w:2", NULL);
	assert_rows("2=2;");
	sink_pg_free(s);
	h_stop(&pc_d);
}

/* ferryd's start check refuses a key no unique index matches, naming the
 * table; the other table's key is fine. */
Test(tables, missing_key_index_refused_at_start)
{
	char err[512], *out;
	const char *args[] = { "-f", "-c", pc_d.config, NULL };
	struct h_run r;

	load("mode = upsert\nkey = id\n[table q order_lines]\n"
	    "key = order_id, line\n");
	cr_assert_eq(pg_target_check(&pc_cfg, &pc_cfg.queues[0], false, NULL, err,
	    sizeof(err)), PG_FATAL, "%s", err);
	cr_assert_str_eq(err, "[queue q] key: \"order_id, line\" is not the "
	    "primary key or a unique index of table \"order_lines\" (allowed: "
	    "the columns of a primary key or of a unique index that is not "
	    "partial, not on expressions, not deferrable; create one, e.g. "
	    "CREATE UNIQUE INDEX ON order_lines (order_id, line))");
	int status = h_run_ferryd(args, &out);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 1, "%s", out);
	cr_assert(strstr(out, "table \"order_lines\"") != NULL, "%s", out);
	free(out);
	cr_assert_eq(h_ctl(&r, pc_d.config, NULL, "init-db", NULL), 65, "%s%s",
	    r.out, r.err);
	cr_assert(strstr(r.err, "table \"order_lines\"") != NULL, "%s%s",
	    r.out, r.err);
	h_run_free(&r);
	h_pg_exec(&pc_d, "CREATE UNIQUE INDEX ON order_lines (line, order_id)");
	cr_assert_eq(pg_target_check(&pc_cfg, &pc_cfg.queues[0], false, NULL, err,
	    sizeof(err)), PG_OK, "%s", err);
	h_stop(&pc_d);
}

TestSuite(tables_ferryd, .fini = pc_teardown, .timeout = 600);

static char ferryd_global[512];   /* setup_ferryd's [ferryd] lines */

/* Queue q writing both tables through ferryd (queue lines `extra`),
 * init-db run; n jobs of one order and its two lines (lines first). */
static void
setup_ferryd(const char *extra, int n)
{
	char body[512];
	struct h_run r;

	h_setup(&pc_d, NULL, "");
	snprintf(body, sizeof(body), "[queue q]\nhandler = postgres\n"
	    "tables = orders, order_lines\n%s", extra);
	snprintf(ferryd_global, sizeof(ferryd_global), "%srestart_backoff_min = "
	    "10ms\nrestart_backoff_max = 100ms\n", h_pg_start(&pc_d));
	h_config(&pc_d, ferryd_global, body);
	h_pg_exec(&pc_d, SCHEMA);
	cr_assert_eq(h_ctl(&r, pc_d.config, NULL, "init-db", NULL), 0, "%s%s",
	    r.out, r.err);
	h_run_free(&r);
	freeReplyObject(h_redis(&pc_d, "PING"));
	for (int i = 0; i < n; i++)
		redisAppendCommand(pc_d.rc, "LPUSH ferry:{q}:ready {\"data\":{"
		    "\"order_lines\":[{\"order_id\":%d,\"line\":1},{\"order_id\":"
		    "%d,\"line\":2}],\"orders\":[{\"id\":%d,\"total\":%d}]}}", i, i,
		    i, i);
	for (int i = 0; i < n; i++) {
		redisReply *rep;
		cr_assert_eq(redisGetReply(pc_d.rc, (void **)&rep), REDIS_OK);
		freeReplyObject(rep);
	}
}

/* n orders and 2n lines, each once; nothing dead, nothing left. */
static void
assert_exactly_once(int n)
{
	cr_assert_eq(h_pg_int(&pc_d, "SELECT count(*) FROM orders"), n);
	cr_assert_eq(h_pg_int(&pc_d, "SELECT count(*) FROM order_lines"), 2 * n);
	cr_assert_eq(h_pg_int(&pc_d, "SELECT count(DISTINCT (order_id, line)) "
	    "FROM order_lines"), 2 * n);
	h_assert_queue_empty(&pc_d, "q");
	cr_assert_eq(h_redis_int(&pc_d, "LLEN ferry:{q}:dead"), 0);
}

/* The worker dies right after the first batch's COMMIT, before the ack
 * (test hook): its jobs come back stamped, the fence finds the batch
 * committed, and they are acked without being written again (the lines
 * have no key: written twice, they would be counted twice). */
Test(tables_ferryd, death_between_commit_and_ack_writes_nothing_again)
{
	char hook[400], env[450];

	setup_ferryd("workers = 1\nbatch_size = 100\n", 300);
	snprintf(hook, sizeof(hook), "%s/exit-after-commit", pc_d.dir);
	h_write_file(hook, "once\n");
	snprintf(env, sizeof(env), "FERRY_TEST_EXIT_AFTER_COMMIT=%s", hook);
	putenv(env);
	setenv("FERRYD", TEST_BUILDDIR "/tests/ferryd-hooks", 1);
	h_start(&pc_d, 1);
	h_wait_log(&pc_d, "test hook: exiting between COMMIT and ack", 1);
	h_wait_redis_int(&pc_d, 300, "HGET ferry:{q}:stats done");
	unsetenv("FERRY_TEST_EXIT_AFTER_COMMIT");
	unsetenv("FERRYD");
	assert_exactly_once(300);
	/* pipeline (the default): the committed batch and the next one,
	 * already fetched into the worker's second list, both handed back */
	cr_assert_eq(h_redis_int(&pc_d, "HGET ferry:{q}:stats recovered"), 200);
	cr_assert_eq(access(hook, F_OK), -1, "the hook did not fire");
	h_stop(&pc_d);
}

/* 12,000 jobs, each an order and its two lines (lines first in the
 * document), 3 workers, one killed with SIGKILL every 300 ms (each
 * INSERT made 10 ms longer, so that kills land inside transactions and
 * between COMMIT and ack): every order once, every line once, none
 * dead. */
Test(tables_ferryd, exactly_once_under_killed_workers)
{
	const int n = 12000;

	setup_ferryd("workers = 3\nbatch_size = 10\nmax_recoveries = 1000\n",
	    n);
	h_pg_slow(&pc_d, "orders", "INSERT");
	h_pg_slow(&pc_d, "order_lines", "INSERT");
	h_start(&pc_d, 3);
	h_kill_workers_until_done(&pc_d, "q", n);
	assert_exactly_once(n);
	cr_assert_gt(h_redis_int(&pc_d, "HGET ferry:{q}:stats recovered"), 0);
	h_stop(&pc_d);
}

/* A reload that changes only a table's section (order_lines from insert
 * to upsert by key): the queue's new workers write by it. Workers forked
 * before the master took the fresh file would get the old [table]
 * sections beside the new queue: the second line of a key would be dead
 * with 23505 (or, with a table new to the file, the worker would crash). */
Test(tables_ferryd, reload_of_a_table_section_reaches_the_new_workers)
{
	setup_ferryd("workers = 1\n", 0);
	h_pg_exec(&pc_d, "CREATE UNIQUE INDEX ON order_lines (order_id, line)");
	h_start(&pc_d, 1);
	h_config(&pc_d, ferryd_global, "[queue q]\nhandler = postgres\n"
	    "tables = orders, order_lines\nworkers = 1\n"
	    "[table q order_lines]\nmode = upsert\nkey = order_id, line\n");
	kill(pc_d.pid, SIGHUP);
	h_wait_log(&pc_d, "reload: done", 1);
	h_wait_log(&pc_d, "exited with status 0; stopped", 1);  /* the old one */
	freeReplyObject(h_redis(&pc_d, "LPUSH ferry:{q}:ready %s",
	    "{\"data\":{\"orders\":[{\"id\":1,\"total\":1}],\"order_lines\":"
	    "[{\"order_id\":1,\"line\":1,\"item\":\"a\"}]}}"));
	h_wait_redis_int(&pc_d, 1, "HGET ferry:{q}:stats done");
	freeReplyObject(h_redis(&pc_d, "LPUSH ferry:{q}:ready %s",
	    "{\"data\":{\"order_lines\":[{\"order_id\":1,\"line\":1,"
	    "\"item\":\"b\"}]}}"));
	h_wait_redis_int(&pc_d, 2, "HGET ferry:{q}:stats done");
	cr_assert_eq(h_redis_int(&pc_d, "LLEN ferry:{q}:dead"), 0);
	assert_rows("1=1;1/1/b");
	h_stop(&pc_d);
}
