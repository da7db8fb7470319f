/* config_pg.h - a queue's way to PostgreSQL from its configuration: the
 * libpq conninfo (a queue's pg_* keys over [ferryd]'s), its hosts, whether
 * a reload changed it, and whether a server's commit settings survive a
 * failover. */
#ifndef FERRY_CONFIG_PG_H
#define FERRY_CONFIG_PG_H

#include <stdbool.h>

#include "config.h"

/* The libpq conninfo string for queue `q` (NULL: [ferryd] alone): host,
 * port, dbname, user and password, each from `q` when set there, else from
 * [ferryd], omitted when empty; values in single quotes with ' and \
 * escaped (host and port lists without the blanks around their items).
 * Then target_session_attrs (pg_target_session_attrs, or read-write when
 * there are several hosts), pg_options (the queue's if set, else
 * [ferryd]'s) verbatim, and connect_timeout=5 and application_name=ferryd;
 * pg_options wins over the three. Malloc'd. */
char *config_pg_conninfo(const struct ferry_config *cfg,
    const struct queue_config *q);

/* How many hosts queue `q` (NULL: [ferryd] alone) names in pg_host, its
 * own or [ferryd]'s: 0 (libpq's default), 1, or more (a failover set). */
int config_pg_nhosts(const struct ferry_config *cfg,
    const struct queue_config *q);

/* True when queue `a` under config `ca` and queue `b` under `cb` (the same
 * queue before and after a reload) use the postgres handler and talk to
 * PostgreSQL differently: the conninfo (inherited [ferryd] pg_* keys
 * included) or [ferryd] pg_statement_timeout. config_queue_changed, which
 * sees only the queues, cannot tell. */
bool config_queue_sink_changed(const struct ferry_config *ca,
    const struct queue_config *a, const struct ferry_config *cb,
    const struct queue_config *b);

/* Whether a COMMIT on a server with these settings (SHOW
 * synchronous_commit, SHOW synchronous_standby_names) waits until a
 * standby has it: NULL if it does, else why not (a constant). */
const char *config_pg_commit_risk(const char *synchronous_commit,
    const char *standby_names);

#endif
