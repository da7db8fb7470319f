/* test_python_client.c - clients/python's pytest suite (whose conftest.py
 * leaves the servers to this driver when FERRY_TEST_REDIS_PORT is set)
 * against a real redis-server, PostgreSQL and ferryd started here (the
 * queues of clients/python/tests/ferryd.ini: py and pyi without workers,
 * for what the tests read back from Redis, pgi into table waits
 * (tests/schema.sql) for the waits of test_wait.py; queue pg into table
 * events), then the rows the Python producer sent into events counted in
 * PostgreSQL: exactly 4,400 (100 of them delayed), each once. The suite
 * reaches PostgreSQL (FERRY_TEST_PG_PORT) and ferryctl
 * (FERRY_TEST_FERRYCTL, FERRY_TEST_CONFIG) too. Debian's python3 with
 * python3-redis and python3-pytest (scripts/deps), or $PYTHON3; pytest
 * failing to start fails the test. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define PYTHON_CLIENT TEST_SRCDIR "/clients/python"
#define PYTHON_TESTS "37 passed"

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
	const char *ferryctl = getenv("FERRYCTL") ? getenv("FERRYCTL") :
	    TEST_BUILDDIR "/ferryctl";
	char line[4096];
	char *queues = h_read_file(PYTHON_CLIENT "/tests/ferryd.ini");
	char *sql = h_read_file(PYTHON_CLIENT "/tests/schema.sql");

	cr_assert(strstr(queues, "[queue pgi]") != NULL,
	    "%s/tests/ferryd.ini: no [queue pgi]", PYTHON_CLIENT);
	/* workers: pg 2, pgi 1 */
	h_client_start(&d, queues, sql, 3);
	free(queues);
	free(sql);
	snprintf(line, sizeof(line), "cd %s && FERRY_TEST_REDIS_PORT=%d "
	    "FERRY_TEST_PG_PORT=%d FERRY_TEST_CONFIG=%s FERRY_TEST_FERRYCTL=%s "
	    "FERRY_BUILT_ENQUEUE_LUA=%s PYTHONPATH=%s PYTHONDONTWRITEBYTECODE=1 "
	    "%s -m pytest -p no:cacheprovider -q %s", d.dir, d.redis.port,
	    d.pg.port, d.config, ferryctl,
	    TEST_BUILDDIR "/gen/lua/enqueue.lua", PYTHON_CLIENT, python,
	    PYTHON_CLIENT "/tests");
	char *text = h_shell(&d, line, "pytest.out");
	cr_assert(strstr(text, PYTHON_TESTS) != NULL, "not %s:\n%s",
	    PYTHON_TESTS, text);
	free(text);
	h_assert_rows(&d, "events", 4400, rows, 3);
	h_stop(&d);
}
