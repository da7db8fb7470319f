/* harness_pg.c - the tests' PostgreSQL side (harness.h): a private server
 * for a ferryd, statements on it, slow statements and killed workers for the
 * exactly-once runs, and jobs parsed for the batch writer's tests. */
#include "harness.h"
#include "job.h"

#include <criterion/criterion.h>
#include <libpq-fe.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *
h_pg_start(struct ferryd *d)
{
	static char lines[256];

	cr_assert_eq(test_pg_start(&d->pg), 0, "postgres did not start");
	snprintf(lines, sizeof(lines), "pg_host = 127.0.0.1\npg_port = %d\n"
	    "pg_database = ferry\npg_user = postgres\n", d->pg.port);
	return lines;
}

static PGresult *
pg_query(struct ferryd *d, const char *sql)
{
	PGconn *c = PQconnectdb(d->pg.conninfo);
	cr_assert_eq(PQstatus(c), CONNECTION_OK, "postgres: %s",
	    PQerrorMessage(c));
	PGresult *r = PQexec(c, sql);
	ExecStatusType st = PQresultStatus(r);
	cr_assert(st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK,
	    "%s: %s", sql, PQerrorMessage(c));
	PQfinish(c);
	return r;
}

void
h_pq_exec(struct pg_conn *c, const char *sql)
{
	PGresult *r = PQexec(c, sql);

	cr_assert_eq(PQresultStatus(r), PGRES_COMMAND_OK, "%s: %s", sql,
	    PQerrorMessage(c));
	PQclear(r);
}

void
h_pg_exec(struct ferryd *d, const char *sql)
{
	PQclear(pg_query(d, sql));
}

long long
h_pg_int(struct ferryd *d, const char *sql)
{
	PGresult *r = pg_query(d, sql);
	long long v = PQntuples(r) > 0 ? atoll(PQgetvalue(r, 0, 0)) : -1;
	PQclear(r);
	return v;
}

void
h_wait_pg_int(struct ferryd *d, long long want, const char *sql)
{
	long long end = h_now_ms() + H_DEADLINE_MS * 3, v = 0;

	while (h_now_ms() < end) {
		if ((v = h_pg_int(d, sql)) == want)
			return;
		h_sleep_ms(50);
	}
	h_dump_log(d);
	cr_assert_fail("postgres \"%s\" = %lld, expected %lld", sql, v, want);
}

char *
h_pg_text(struct ferryd *d, const char *sql)
{
	PGresult *r = pg_query(d, sql);
	char *v = PQntuples(r) > 0 && !PQgetisnull(r, 0, 0) ?
	    strdup(PQgetvalue(r, 0, 0)) : NULL;
	PQclear(r);
	return v;
}

void
h_pg_slow(struct ferryd *d, const char *table, const char *event)
{
	char sql[256];

	h_pg_exec(d, "CREATE OR REPLACE FUNCTION ferry_test_slow() RETURNS "
	    "trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_sleep(0.01); "
	    "RETURN NULL; END $$");
	snprintf(sql, sizeof(sql), "CREATE TRIGGER slow AFTER %s ON %s FOR "
	    "EACH STATEMENT EXECUTE FUNCTION ferry_test_slow()", event, table);
	h_pg_exec(d, sql);
}

int
h_kill_workers_until_done(struct ferryd *d, const char *q, long long n)
{
	pid_t pids[H_MAX_PIDS];
	long long end = h_now_ms() + 300000;
	int kills = 0;

	srandom(7);
	while (h_redis_int(d, "HGET ferry:{%s}:stats done", q) < n &&
	    h_now_ms() < end) {
		h_sleep_ms(300);
		int k = h_children(d->pid, pids, H_MAX_PIDS);
		if (k > 0) {
			kill(pids[random() % k], SIGKILL);
			kills++;
		}
	}
	h_wait_redis_int(d, n, "HGET ferry:{%s}:stats done", q);
	cr_assert_geq(kills, 10, "only %d kills: the run was too short", kills);
	return kills;
}

void
h_job_parse(struct job *j, char *el, size_t size, bool wrapped,
    const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(el, size, fmt, ap);
	va_end(ap);
	job_parse_held(j, el, strlen(el), 1 << 20, wrapped);
	cr_assert_null(j->invalid, "%s: %s", el, j->invalid);
}

void
h_jobs_free(struct job *jobs, int n)
{
	for (int i = 0; i < n; i++)
		job_free(&jobs[i]);
}
