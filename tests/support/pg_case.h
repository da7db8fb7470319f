/* pg_case.h - the table "profiles" written by key (mode = upsert and
 * update) for test_upsert and test_update: a sink driven directly on
 * batches of documents, a queue through ferryd, the rows as text. */
#ifndef FERRY_TEST_PG_CASE_H
#define FERRY_TEST_PG_CASE_H

#include "config.h"
#include "harness.h"
#include "sink_pg.h"

#define PC_PROFILES "CREATE TABLE profiles (k bigint PRIMARY KEY, " \
	"name text, score int CHECK (score >= 0), v bigint)"

/* A test's ferryd and loaded config, and the .fini freeing both. */
extern struct ferryd pc_d;
extern struct ferry_config pc_cfg;
void pc_teardown(void);

/* Redis, PostgreSQL, table profiles, and [queue q] (handler postgres,
 * table profiles, then the `queue` lines); the config loaded into cfg. */
const struct queue_config *pc_setup(struct ferryd *d,
    struct ferry_config *cfg, const char *queue);
/* init-db's check (creating ferry_batches) passes; a sink for q. */
struct sink_pg *pc_sink(struct ferry_config *cfg,
    const struct queue_config *q);
/* Documents (each at most 127 bytes) as one batch under key: HANDLER_DONE,
 * and job i done, or dead when dead (NULL: none) has dead[i], its
 * message starting with dead[i]. */
void pc_run(struct sink_pg *s, const char *const *docs, int n,
    const char *key, const char *const *dead);
/* The table as "k=name/v,..." by k ("-" for a NULL name, no "/v" for a
 * NULL v). */
void pc_assert_rows(struct ferryd *d, const char *want);

/* Queue q writing profiles through ferryd (handler postgres, table
 * profiles, columns k, name, v, then the `queue` lines); init-db run. */
void pc_setup_ferryd(struct ferryd *d, const char *ferryd_extra,
    const char *queue);
/* Jobs i = 0..n-1 in queue order, {"k": i % keys, "name": "n<i>",
 * "v": i}; with delete_every > 0, every delete_every-th job before the
 * last one of its key is {"op":"delete", "k": ..., "v": i} instead. */
void pc_push(struct ferryd *d, int n, int keys, int delete_every);
/* One row per key, each holding the last job of its key (as pc_push
 * made them), all n jobs done, none dead, the queue empty. */
void pc_assert_last_of_each_key(struct ferryd *d, int n, int keys);

#endif
