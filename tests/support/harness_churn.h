/* harness_churn.h - an application's cache beside the queue: a forked
 * writer that keeps SETting keys with a TTL into a Redis at a given rate,
 * as a busy application does, so that a Redis with maxmemory and a
 * volatile-* policy evicts all the time (doc/design.md, 3.8). Link with
 * $(harness) (harness.c's clock). */
#ifndef FERRY_TEST_HARNESS_CHURN_H
#define FERRY_TEST_HARNESS_CHURN_H

#include <stddef.h>
#include <sys/types.h>

/* What the writer writes: keys <prefix><n> (n = 0, 1, 2, ...) of
 * value_size bytes, each with a TTL of ttl_ms, bytes_per_s value bytes a
 * second (pipelined, in steps of a few ms). */
struct h_churn_opts {
	const char *prefix;     /* NULL: "app:cache:" */
	size_t value_size;      /* 0: 1024 */
	long ttl_ms;            /* 0: 60000 */
	long long bytes_per_s;  /* > 0 */
};

struct h_churn {
	pid_t pid;              /* the writer; 0 when not running */
	int fd;                 /* the read end of its report */
	long long keys;         /* after h_churn_stop: SETs Redis took */
	long long errors;       /* ... and refused (an OOM when nothing was
	                         * left to evict, a lost connection) */
};

/* Fork the writer against the Redis on 127.0.0.1:port and wait until it
 * is connected; it runs until h_churn_stop (or until the test process
 * dies: it gets PR_SET_PDEATHSIG), reconnecting when the connection is
 * lost. 0, or -1 with a message on stderr when it cannot fork or connect
 * within 10 s (callers: cr_assert_eq(rc, 0)). */
int h_churn_start(struct h_churn *c, int port, const struct h_churn_opts *o);
/* Stop the writer, wait for it and read its report into c->keys and
 * c->errors; returns c->keys, or -1 (with a message) when the writer died
 * without a report. Safe on a zeroed or stopped struct (returns what it
 * reported before, or 0), so .fini may call it too. */
long long h_churn_stop(struct h_churn *c);

#endif
