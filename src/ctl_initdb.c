/* ctl_initdb.c - `ferryctl init-db`: create ferry_batches and check that
 * every postgres queue's table and columns exist, before ferryd needs them. */
#include <stdio.h>
#include <string.h>

#include "ctl.h"
#include "sink_pg.h"

int
ctl_init_db(struct ctl *c, int argc, char **argv)
{
	char err[512];
	int checked = 0, failed = 0;

	(void)argv;
	if (argc != 1) {
		fprintf(stderr, "usage: ferryctl init-db\n");
		return CTL_EX_USAGE;
	}
	for (int i = 0; i < c->cfg->nqueues; i++) {
		const struct queue_config *q = &c->cfg->queues[i];
		if (q->handler != CONFIG_HANDLER_POSTGRES)
			continue;
		checked++;
		enum sink_status st = sink_pg_check(c->cfg, q, 1, err, sizeof(err));
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
