/* test_node_client.c - clients/node's `node --test` suite against a real
 * redis-server, PostgreSQL and ferryd started here (queue node without
 * workers, for what the tests read back from Redis; queue pg into a
 * PostgreSQL table), then the rows the Node producer sent counted in
 * PostgreSQL: exactly 4,300, each once. `npm ci` first installs the pinned
 * redis package (package-lock.json) into clients/node/node_modules. The
 * node and npm on PATH (scripts/deps installs Debian's nodejs and npm when
 * there is no node), or $NODE and $NPM; either missing, npm ci failing or
 * a test failing fails this test. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "harness.h"

#define NODE_CLIENT TEST_SRCDIR "/clients/node"
#define NODE_TESTS 20

static struct ferryd d;

static void
teardown(void)
{
	h_teardown(&d);
}

TestSuite(node_client, .fini = teardown, .timeout = 300);

Test(node_client, node_test_suite_and_rows_in_postgres)
{
	const char *node = getenv("NODE") ? getenv("NODE") : "node";
	const char *npm = getenv("NPM") ? getenv("NPM") : "npm";
	char line[2048], want[64];

	snprintf(line, sizeof(line), "cd %s && %s ci --no-audit --no-fund "
	    "--prefer-offline", NODE_CLIENT, npm);
	free(h_sh_or_fail(&d, line, "npm-ci.out"));

	h_setup(&d, NULL, "");
	h_config(&d, h_pg_start(&d), "[queue pg]\nhandler = postgres\n"
	    "table = events\ncolumns = n\nworkers = 2\n"
	    "[queue node]\nworkers = 0\n");
	h_pg_exec(&d, "CREATE TABLE events (n bigint)");
	snprintf(line, sizeof(line), "%s -c %s init-db >/dev/null",
	    TEST_BUILDDIR "/ferryctl", d.config);
	cr_assert_eq(system(line), 0, "ferryctl init-db failed");
	h_start(&d, 2);
	snprintf(line, sizeof(line), "cd %s && FERRY_TEST_REDIS_PORT=%d "
	    "FERRY_BUILT_ENQUEUE_LUA=%s %s --test --test-reporter=tap "
	    "test/enqueue.test.js", NODE_CLIENT, d.redis.port,
	    TEST_BUILDDIR "/gen/lua/enqueue.lua", node);
	char *text = h_sh_or_fail(&d, line, "node-test.out");
	snprintf(want, sizeof(want), "# pass %d\n", NODE_TESTS);
	cr_assert(strstr(text, want) != NULL && strstr(text, "# fail 0\n"),
	    "not %d tests passed:\n%s", NODE_TESTS, text);
	free(text);
	cr_assert_eq(h_pg_int(&d, "SELECT count(*) FROM events"), 4300);
	cr_assert_eq(h_pg_int(&d, "SELECT count(DISTINCT n) FROM events"), 4300,
	    "some row was written twice");
	cr_assert_eq(h_pg_int(&d, "SELECT count(*) FROM events WHERE "
	    "n BETWEEN 10000 AND 11499"), 1500);
	cr_assert_eq(h_pg_int(&d, "SELECT count(*) FROM events WHERE "
	    "n BETWEEN 20000 AND 20299"), 300);
	h_stop(&d);
}
