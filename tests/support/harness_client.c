/* harness_client.c - what the drivers of the producer clients' own suites
 * share (test_python_client.c, test_node_client.c): Redis, PostgreSQL and
 * ferryd with a postgres queue for the suite to fill, a suite run through
 * the shell with its output kept, and the rows it sent counted exactly.
 * Declared in harness.h. */
#include "harness.h"

#include <criterion/criterion.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>

void
h_setup_pg(struct ferryd *d, const char *queues, ...)
{
	struct h_run r;
	const char *sql;
	va_list ap;

	h_setup(d, NULL, "");
	h_config(d, h_pg_start(d), queues);
	va_start(ap, queues);
	while ((sql = va_arg(ap, const char *)) != NULL)
		h_pg_exec(d, sql);
	va_end(ap);
	h_ctl(&r, d->config, NULL, "init-db", (const char *)NULL);
	cr_assert_eq(r.status, 0, "ferryctl init-db failed (exit %d):\n%s%s",
	    r.status, r.out, r.err);
	h_run_free(&r);
}

void
h_client_start(struct ferryd *d, const char *queues, const char *sql,
    int workers)
{
	char all[8192];

	snprintf(all, sizeof(all), "[queue pg]\nhandler = postgres\n"
	    "table = events\ncolumns = n\nworkers = 2\n%s", queues);
	/* sql NULL ends the list there */
	h_setup_pg(d, all, "CREATE TABLE events (n bigint)", sql,
	    (const char *)NULL);
	h_start(d, workers);
}

void
h_assert_rows(struct ferryd *d, const char *table, long long total,
    const struct h_rows *ranges, int nranges)
{
	char sql[512];

	snprintf(sql, sizeof(sql), "SELECT count(*) FROM %s", table);
	cr_assert_eq(h_pg_int(d, sql), total, "%s: not %lld rows", table,
	    total);
	snprintf(sql, sizeof(sql), "SELECT count(DISTINCT n) FROM %s", table);
	cr_assert_eq(h_pg_int(d, sql), total, "%s: some row was written twice",
	    table);
	for (int i = 0; i < nranges; i++) {
		snprintf(sql, sizeof(sql), "SELECT count(*) FROM %s WHERE n "
		    "BETWEEN %lld AND %lld", table, ranges[i].lo, ranges[i].hi);
		cr_assert_eq(h_pg_int(d, sql), ranges[i].count,
		    "%s: not %lld rows with n from %lld to %lld", table,
		    ranges[i].count, ranges[i].lo, ranges[i].hi);
	}
}
