/* test_node_client.c - clients/node's `node --test` suites (test/run.js,
 * which leaves the servers to this driver when FERRY_TEST_REDIS_PORT is
 * set) against a real redis-server, PostgreSQL and ferryd started here
 * (the queues of clients/node/test/ferryd.ini: node, later and nodei
 * without workers, for what the tests read back from Redis, pglater into
 * table events, pgi into table waits (test/schema.sql) for the waits of
 * wait.test.js; queue pg into events; queue page_views as doc/bullmq.md's
 * worked example sets it up, clients/node/examples/bullmq-migration), then
 * the rows the Node producer sent checked in PostgreSQL: exactly 4,450
 * events (150 of them delayed) and the example's 2,510 page views, each
 * once. The suites reach PostgreSQL (FERRY_TEST_PG_PORT) and ferryctl
 * (FERRY_TEST_FERRYCTL, FERRY_TEST_CONFIG) too. `npm ci` first installs
 * the pinned redis package (package-lock.json) into
 * clients/node/node_modules. The node and npm on PATH (scripts/deps
 * installs Debian's nodejs and npm when there is no node), or $NODE and
 * $NPM; either missing, npm ci failing or a test failing fails this
 * test. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define NODE_CLIENT TEST_SRCDIR "/clients/node"
#define EXAMPLE NODE_CLIENT "/examples/bullmq-migration"
#define NODE_TESTS 48

static struct ferryd d;

static void
teardown(void)
{
	h_teardown(&d);
}

TestSuite(node_client, .fini = teardown, .timeout = 300);

Test(node_client, node_test_suite_and_rows_in_postgres)
{
	static const struct h_rows rows[] = {
		{ 10000, 11499, 1500 },  /* split into chunks */
		{ 20000, 20299, 300 },   /* through a cache key */
		{ 30000, 30099, 100 },   /* delay (delayed.test.js) */
		{ 31000, 31049, 50 },    /* runAt */
	};
	const char *node = getenv("NODE") ? getenv("NODE") : "node";
	const char *npm = getenv("NPM") ? getenv("NPM") : "npm";
	const char *ferryctl = getenv("FERRYCTL") ? getenv("FERRYCTL") :
	    TEST_BUILDDIR "/ferryctl";
	char line[4096], queues[4096], sql[4096], want[64];
	char *suite = h_read_file(NODE_CLIENT "/test/ferryd.ini");
	char *suite_sql = h_read_file(NODE_CLIENT "/test/schema.sql");
	char *example = h_read_file(EXAMPLE "/ferryd.ini");
	char *schema = h_read_file(EXAMPLE "/schema.sql");

	cr_assert(strstr(example, "[queue page_views]") != NULL,
	    "%s/ferryd.ini: no [queue page_views]", EXAMPLE);
	cr_assert(strstr(suite, "[queue pgi]") != NULL,
	    "%s/test/ferryd.ini: no [queue pgi]", NODE_CLIENT);
	snprintf(queues, sizeof(queues), "%s%s", suite, example);
	snprintf(sql, sizeof(sql), "%s%s", schema, suite_sql);
	/* workers: pg 2, pglater 1, pgi 1, page_views 2 */
	h_client_start(&d, queues, sql, 6);
	free(suite);
	free(suite_sql);
	free(example);
	free(schema);
	snprintf(line, sizeof(line), "cd %s && %s ci --no-audit --no-fund "
	    "--prefer-offline", NODE_CLIENT, npm);
	free(h_shell(&d, line, "npm-ci.out"));
	snprintf(line, sizeof(line), "cd %s && FERRY_TEST_REDIS_PORT=%d "
	    "FERRY_TEST_PG_PORT=%d FERRY_TEST_CONFIG=%s FERRY_TEST_FERRYCTL=%s "
	    "FERRY_BUILT_ENQUEUE_LUA=%s %s test/run.js", NODE_CLIENT,
	    d.redis.port, d.pg.port, d.config, ferryctl,
	    TEST_BUILDDIR "/gen/lua/enqueue.lua", node);
	char *text = h_shell(&d, line, "node-test.out");
	snprintf(want, sizeof(want), "# pass %d\n", NODE_TESTS);
	cr_assert(strstr(text, want) != NULL && strstr(text, "# fail 0\n"),
	    "not %d tests passed:\n%s", NODE_TESTS, text);
	free(text);
	h_assert_rows(&d, "events", 4450, rows, 4);
	/* the example: view i is (i, '/p/' || i % 7, 10:00 + i s), each once;
	 * the batch with a NULL user_id was dead-lettered, not written */
	cr_assert_eq(h_pg_int(&d, "SELECT count(*) FROM page_views"), 2510);
	cr_assert_eq(h_pg_int(&d, "SELECT count(DISTINCT v.user_id) FROM "
	    "page_views v JOIN generate_series(0, 2509) i ON v.user_id = i AND "
	    "v.path = '/p/' || i % 7 AND v.viewed_at = "
	    "'2026-12-02T10:00:00Z'::timestamptz + i * interval '1 second'"),
	    2510, "page_views holds other rows than the example sent");
	struct h_run r;
	h_ctl(&r, d.config, NULL, "dead", "list", "page_views",
	    (const char *)NULL);
	cr_assert_eq(r.status, 0, "%s%s", r.out, r.err);
	cr_assert(strstr(r.out, "views-bad") != NULL && strstr(r.out, "23502")
	    != NULL && h_count_lines(r.out) == 1, "dead list:\n%s", r.out);
	h_run_free(&r);
	h_stop(&d);
}
