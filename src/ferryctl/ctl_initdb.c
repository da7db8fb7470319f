/* ctl_initdb.c - `ferryctl init-db`: create ferry_batches and check that
 * every postgres queue's table (or tables) and columns exist, and the key
 * indexes of upsert and update, before ferryd needs them.
 * It speaks in its own words: whether ferry_batches was there already or
 * is created, never PostgreSQL's NOTICE lines about it. */
#include <stdio.h>
#include <string.h>

#include "ctl.h"
#include "pg_conn.h"
#include "pg_target.h"

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
	pg_conn_quiet_notices();
	for (int i = 0; i < c->cfg->nqueues; i++) {
		const struct queue_config *q = &c->cfg->queues[i];
		if (q->handler != CONFIG_HANDLER_POSTGRES)
			continue;
		checked++;
		int existed;
		enum pg_status st = pg_target_check(c->cfg, q, true, &existed, err,
		    sizeof(err));
		if (existed != -1 && st != PG_UNAVAILABLE &&
		    strncmp(err, "cannot create ferry_batches", 27) != 0)
			printf("queue %s: %s\n", q->name, existed ?
			    "ferry_batches exists already" :
			    "ferry_batches created");
		if (st == PG_OK) {
			printf("queue %s: %s %s ready\n", q->name, *q->tables ?
			    "tables" : "table", *q->tables ? q->tables : q->table);
			continue;
		}
		fprintf(stderr, "ferryctl: queue %s: %s\n", q->name, err);
		if (st == PG_UNAVAILABLE)
			return CTL_EX_UNAVAILABLE;
		failed++;
	}
	if (checked == 0)
		printf("no queue has handler = postgres: nothing to do\n");
	return failed ? CTL_EX_DATAERR : CTL_EX_OK;
}
