/* sink_case.h - the PostgreSQL sink driven directly, for test_sink_pg and
 * test_batch_row: queue q (handler postgres) into events (n bigint) on a
 * real PostgreSQL, jobs {"n": N}, recovered ones stamped with batches. */
#ifndef FERRY_TEST_SINK_CASE_H
#define FERRY_TEST_SINK_CASE_H

#include "config.h"
#include "harness.h"
#include "handler.h"
#include "job.h"
#include "sink_pg.h"

/* The test's PostgreSQL and loaded config, and the .fini freeing both. */
extern struct ferryd sc_d;
extern struct ferry_config sc_cfg;
void sc_teardown(void);

/* PostgreSQL, table events, queue q; ferry_batches created. */
const struct queue_config *sc_setup(void);
/* n jobs {"n":first..}, optionally stamped with the batches they were in
 * (stamps: the JSON strings inside the array, e.g. "\"a:1\",\"b:2\""). */
void sc_make_jobs(struct job *jobs, char els[][128], int first, int n,
    const char *stamps);
/* Every result res[0..n) has this outcome. */
void sc_assert_all(struct handler_result *res, int n, int outcome);
/* Run the batch jobs[0..n) under key: it commits, every job done. */
void sc_run_ok(struct sink_pg *s, struct job *jobs,
    struct handler_result *res, int n, const char *key);

#endif
