/* test_python_client.c - clients/python's pytest suite against a real
 * redis-server, PostgreSQL and ferryd started here (queue py without
 * workers, for what the tests read back from Redis; queue pg into a
 * PostgreSQL table), then the rows the Python producer sent counted in
 * PostgreSQL: exactly 4,400 (100 of them delayed), each once. Debian's python3 with python3-redis
 * and python3-pytest (scripts/deps), or $PYTHON3; pytest failing to start
 * fails the test. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

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
	const char *python = getenv("PYTHON3") ? getenv("PYTHON3") :
	    "/usr/bin/python3";
	char line[2048], out[400];

	h_setup(&d, NULL, "");
	h_config(&d, h_pg_start(&d), "[queue pg]\nhandler = postgres\n"
	    "table = events\ncolumns = n\nworkers = 2\n"
	    "[queue py]\nworkers = 0\n");
	h_pg_exec(&d, "CREATE TABLE events (n bigint)");
	snprintf(line, sizeof(line), "%s -c %s init-db >/dev/null",
	    TEST_BUILDDIR "/ferryctl", d.config);
	cr_assert_eq(system(line), 0, "ferryctl init-db failed");
	h_start(&d, 2);
	snprintf(out, sizeof(out), "%s/pytest.out", d.dir);
	snprintf(line, sizeof(line), "cd %s && FERRY_TEST_REDIS_PORT=%d "
	    "FERRY_BUILT_ENQUEUE_LUA=%s PYTHONPATH=%s PYTHONDONTWRITEBYTECODE=1 "
	    "%s -m pytest -p no:cacheprovider -q %s > %s 2>&1", d.dir,
	    d.redis.port, TEST_BUILDDIR "/gen/lua/enqueue.lua",
	    TEST_SRCDIR "/clients/python", python,
	    TEST_SRCDIR "/clients/python/tests", out);
	int status = system(line);
	char *text = h_read_file(out);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	    "pytest failed (%s):\n%s", python, text);
	cr_assert(strstr(text, "25 passed") != NULL, "%s", text);
	free(text);
	cr_assert_eq(h_pg_int(&d, "SELECT count(*) FROM events"), 4400);
	cr_assert_eq(h_pg_int(&d, "SELECT count(DISTINCT n) FROM events"), 4400,
	    "some row was written twice");
	cr_assert_eq(h_pg_int(&d, "SELECT count(*) FROM events WHERE "
	    "n BETWEEN 10000 AND 11499"), 1500);
	cr_assert_eq(h_pg_int(&d, "SELECT count(*) FROM events WHERE "
	    "n BETWEEN 20000 AND 20299"), 300);
	/* enqueued with delay= (test_delayed_rows_reach_postgres_when_due) */
	cr_assert_eq(h_pg_int(&d, "SELECT count(*) FROM events WHERE "
	    "n BETWEEN 30000 AND 30099"), 100);
	h_stop(&d);
}
