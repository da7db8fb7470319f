/* ctl_initdb.c - `ferryctl init-db`: create ferry_batches and check that
 * every postgres queue's table and columns exist, before ferryd needs them.
 * It speaks in its own words: whether ferry_batches was there already or
 * is created, never PostgreSQL's NOTICE lines about it. */
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl.h"
#include "sink_pg.h"
#include "util.h"

/* PostgreSQL's notices ("relation ... already exists, skipping") are not
 * printed: libpq reads PGOPTIONS for every connection that does not set
 * `options` itself (pg_options), sink_pg_check's included. */
static void
quiet_notices(void)
{
	const char *old = getenv("PGOPTIONS");
	char *opts = xasprintf("%s%s-c client_min_messages=warning",
	    old != NULL ? old : "", old != NULL && *old != '\0' ? " " : "");

	setenv("PGOPTIONS", opts, 1);
	free(opts);
}

/* Whether ferry_batches exists where queue q writes: 1 yes, 0 no, -1
 * unknown (the connection failed: sink_pg_check says why). */
static int
batches_exist(const struct ferry_config *cfg, const struct queue_config *q)
{
	char *conninfo = config_pg_conninfo(cfg, q);
	PGconn *conn = PQconnectdb(conninfo);
	int found = -1;

	free(conninfo);
	if (PQstatus(conn) == CONNECTION_OK) {
		PGresult *r = PQexec(conn, "SELECT to_regclass('ferry_batches') "
		    "IS NOT NULL");
		if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1)
			found = strcmp(PQgetvalue(r, 0, 0), "t") == 0;
		PQclear(r);
	}
	PQfinish(conn);
	return found;
}

int
ctl_init_db(struct ctl *c, int argc, char **argv)
{
	char err[512] = "";
	int checked = 0, failed = 0;

	(void)argv;
	if (argc != 1) {
		fprintf(stderr, "usage: ferryctl init-db\n");
		return CTL_EX_USAGE;
	}
	quiet_notices();
	for (int i = 0; i < c->cfg->nqueues; i++) {
		const struct queue_config *q = &c->cfg->queues[i];
		if (q->handler != CONFIG_HANDLER_POSTGRES)
			continue;
		checked++;
		int existed = batches_exist(c->cfg, q);
		enum sink_status st = sink_pg_check(c->cfg, q, 1, err, sizeof(err));
		if (existed != -1 && st != SINK_UNAVAILABLE &&
		    strncmp(err, "cannot create ferry_batches", 27) != 0)
			printf("queue %s: %s\n", q->name, existed ?
			    "ferry_batches exists already" :
			    "ferry_batches created");
		if (st == SINK_OK) {
			printf("queue %s: table %s ready\n", q->name, q->table);
			continue;
		}
		fprintf(stderr, "ferryctl: queue %s: %s\n", q->name, err);
		if (st == SINK_UNAVAILABLE)
			return CTL_EX_UNAVAILABLE;
		failed++;
	}
	if (checked == 0)
		printf("no queue has handler = postgres: nothing to do\n");
	return failed ? CTL_EX_DATAERR : CTL_EX_OK;
}
