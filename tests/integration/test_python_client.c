/* test_python_client.c - clients/python's pytest suite against a real
 * redis-server, PostgreSQL and ferryd started here (queue py without
 * workers, for what the tests read back from Redis; queue pg into a
 * PostgreSQL table), then the rows the Python producer sent counted in
 * PostgreSQL: exactly 4,400 (100 of them delayed), each once. Debian's
 * python3 with python3-redis and python3-pytest (scripts/deps), or
 * $PYTHON3; pytest failing to start fails the test. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static struct ferryd d;

static void
teardown(void)
{
	h_teardown(&d);
}

TestSuite(python_client, .fini = teardown, .timeout = 300);

Test(python_client, pytest_suite_and_rows_in_postgres)
{
	static const struct h_rows rows[] = {
		{ 10000, 11499, 1500 },  /* split into chunks */
		{ 20000, 20299, 300 },   /* through a cache key */
		{ 30000, 30099, 100 },   /* delay= (test_delayed_rows_...) */
	};
	const char *python = getenv("PYTHON3") ? getenv("PYTHON3") :
	    "/usr/bin/python3";
	char line[2048];

	h_client_start(&d, "[queue py]\nworkers = 0\n[queue pyi]\n"
	    "workers = 0\nidempotency_window = 1m\n", NULL, 2);
	snprintf(line, sizeof(line), "cd %s && FERRY_TEST_REDIS_PORT=%d "
	    "FERRY_BUILT_ENQUEUE_LUA=%s PYTHONPATH=%s PYTHONDONTWRITEBYTECODE=1 "
	    "%s -m pytest -p no:cacheprovider -q %s", d.dir, d.redis.port,
	    TEST_BUILDDIR "/gen/lua/enqueue.lua", TEST_SRCDIR "/clients/python",
	    python, TEST_SRCDIR "/clients/python/tests");
	char *text = h_shell(&d, line, "pytest.out");
	cr_assert(strstr(text, "28 passed") != NULL, "%s", text);
	free(text);
	h_assert_rows(&d, "events", 4400, rows, 3);
	h_stop(&d);
}
