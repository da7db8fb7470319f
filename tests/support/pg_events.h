/* pg_events.h - the "events" fixture of test_pg and test_fence: one
 * postgres queue q into events (n bigint CHECK (n >= 0), payload text)
 * through a real ferryd, ferryctl runs, and the fault point "exit between
 * COMMIT and ack" of tests/ferryd-hooks. */
#ifndef FERRY_TEST_PG_EVENTS_H
#define FERRY_TEST_PG_EVENTS_H

#include <stddef.h>

#include "harness.h"

#define PE_EVENTS_TABLE "CREATE TABLE events (n bigint CHECK (n >= 0), " \
	"payload text)"

/* Redis + PostgreSQL + config for one postgres queue `q` into `events`
 * (columns n, payload), the [ferryd] and [queue q] lines added. */
void pe_setup(struct ferryd *d, const char *ferryd_extra,
    const char *queue_extra);
/* ... its redis-server started with redis_args (NULL-terminated, or NULL:
 * h_setup_redis). */
void pe_setup_redis(struct ferryd *d, const char *const *redis_args,
    const char *ferryd_extra, const char *queue_extra);
/* n rows in events, each n once; nothing left in q's lists, nothing dead. */
void pe_assert_rows_once(struct ferryd *d, int n);
/* ferryctl -c CONFIG cmd: its exit status, its output in *out (malloc'd)
 * when out is not NULL. */
int pe_ctl(struct ferryd *d, const char *cmd, char **out);
/* pe_setup with one worker, batches of 100, max_job_bytes = 1024 and
 * cache_key_prefixes = app:a:, init-db run, and the fault point armed:
 * the file hook, named in env (putenv keeps env). */
void pe_arm_exit_after_commit(struct ferryd *d, char *hook, size_t hook_size,
    char *env, size_t env_size, const char *pipeline, int max_recoveries);

#endif
