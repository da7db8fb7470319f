/* ctl.h - ferryctl, the operator's tool: what its commands share (the loaded
 * config, one synchronous Redis connection, messages; the exit codes are
 * in exit_codes.h). */
#ifndef FERRY_CTL_H
#define FERRY_CTL_H

#include <hiredis/hiredis.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "config.h"
#include "exit_codes.h"
#include "lua_scripts.h"
#include "queue.h"

#define CTL_CONNECT_TIMEOUT_MS 10000
#define CTL_CHUNK 1000         /* list elements per round trip */
#define CTL_CHUNK_BYTES (16 << 20) /* bytes of the jobs of one pushed chunk */

struct ctl {
	const char *config_path;
	struct ferry_config *cfg;
	redisContext *rc;      /* NULL until ctl_redis() */
	char queue[CONFIG_QUEUE_NAME_MAX + 1]; /* rc is for it (cluster) */
	char addr[300];        /* the Redis address, for messages */
};

/* The queue named `name` of the config, or NULL after a message saying so
 * (the caller exits CTL_EX_USAGE). */
const struct queue_config *ctl_queue(const struct ctl *c, const char *name);
/* The Redis connection, connecting on first use; NULL after a message
 * naming the address (the caller exits CTL_EX_UNAVAILABLE). */
redisContext *ctl_redis(struct ctl *c);
/* The same for queue: with redis_cluster, the node that serves it (the
 * connection is replaced when another queue's node is asked for). */
redisContext *ctl_redis_for(struct ctl *c, const char *queue);
/* Print why a Redis command failed (r is the reply, or NULL when the
 * connection failed), free r, return CTL_EX_UNAVAILABLE. */
int ctl_redis_fail(struct ctl *c, const char *what, redisReply *r);
/* True (and r left alone) when r is a reply and not an error. */
bool ctl_reply_ok(const redisReply *r);
/* Backpressure, as enqueue.lua judges it (memory.lua): 0 while what
 * Redis cannot evict stays below memory_refuse_percent of maxmemory (or
 * when INFO is refused: Redis still refuses at maxmemory), else
 * CTL_EX_TEMPFAIL (or CTL_EX_UNAVAILABLE), after a message naming the
 * queue's own bytes. */
int ctl_memory_allows(struct ctl *c, const char *queue);
/* The message of a refusal (the scripts' text; CTL_EX_TEMPFAIL), and of a
 * memory check not made because INFO was refused (once; why: "INFO
 * failed: ..."), for the checks made by ctl_memory_allows and by
 * enqueue.lua. */
int ctl_memory_full(struct ctl *c, const char *text);
void ctl_memory_unchecked(struct ctl *c, const char *why);

/* A script call sent again while its outcome is unknown (no reply: the
 * connection failed; LOADING, READONLY, MASTERDOWN, TRYAGAIN,
 * CLUSTERDOWN), on a new connection, after CTL_RESEND_FIRST_MS doubling
 * up to CTL_RESEND_MAX_MS, for CTL_RESEND_FOR_MS at most; only when
 * may_resend (the call is safe to repeat). Each try is said on stderr
 * (what: what the call does). The last reply, or NULL
 * (src/ferryctl/ctl_resend.c). */
#define CTL_RESEND_FOR_MS 60000
#define CTL_RESEND_FIRST_MS 100
#define CTL_RESEND_MAX_MS 2000
redisReply *ctl_script_resent(struct ctl *c, const char *queue,
    bool may_resend, enum lua_script s, int nkeys, int argc,
    const char **argv, const size_t *lens, const char *what);

/* Many jobs pushed in chunks (src/ferryctl/ctl_push.c): enqueue and dead restore
 * add their jobs one by one and send each chunk their own way. */
struct ctl_push {
	struct ctl *c;
	const char *queue;      /* whose memory refusal applies */
	bool script_checks;     /* the send makes it (enqueue.lua): no check
	                         * of its own before each chunk */
	const char *verb;       /* "pushed": the progress line */
	long long total;        /* jobs in all, for the progress line */
	bool progress;          /* print it (ctl_progress_wanted) */
	size_t n, bytes;        /* the chunk being built */
	long long done;         /* jobs that went in */
	long chunks;            /* chunks sent whole */
};
/* Send the n jobs of the chunk as one atomic step: 0, or an exit code after
 * a message; *went + the jobs that went in. */
typedef int ctl_push_send_fn(void *arg, size_t n, long long *went);
/* A job of `bytes` does not fit in the chunk being built: flush it first. */
bool ctl_push_full(const struct ctl_push *p, size_t bytes);
void ctl_push_add(struct ctl_push *p, size_t bytes);
/* Send the chunk being built, if any, after ctl_memory_allows (unless
 * script_checks); count it and print the progress line. 0 or the exit
 * code. */
int ctl_push_flush(struct ctl_push *p, ctl_push_send_fn *send, void *arg);
/* After the last flush: end the progress line. */
void ctl_push_end(const struct ctl_push *p);
/* Progress lines on stderr are worth printing: it is a terminal and stdout
 * (where results go) is not, or results are not printed. */
bool ctl_progress_wanted(bool quiet);
/* 64 random bits (getrandom; the clock and pid where it fails): the seed
 * of the cache keys' own parts (chunk.h). */
uint64_t ctl_random64(void);
/* ms since the epoch as "2026-12-02T01:33:57.123Z" in buf ("-" when it
 * cannot be shown); returns buf. */
const char *ctl_time_text(long long ms, char *buf, size_t size);

/* enqueue --wait (src/ferryctl/ctl_wait.c): wait until each of the n jobs
 * named by ids (on a queue that keeps ids) is done or dead, or timeout_ms
 * has passed (-1: no limit); a line per job on stdout (unless quiet) and a
 * summary on stderr. CTL_EX_OK when all are done, CTL_EX_DEAD when all
 * settled and some are dead, CTL_EX_PENDING when some are pending or
 * unknown. */
int ctl_wait(struct ctl *c, const struct queue_config *q,
    const char *const *ids, size_t n, long long timeout_ms, bool quiet);

void ctl_usage(FILE *out);
int ctl_stats(struct ctl *c, int argc, char **argv);
int ctl_enqueue(struct ctl *c, int argc, char **argv);
int ctl_dead(struct ctl *c, int argc, char **argv);
/* dead restore QUEUE FILE (src/ferryctl/ctl_restore.c) */
int ctl_dead_restore(struct ctl *c, const struct queue_config *q,
    const char *path);
int ctl_init_db(struct ctl *c, int argc, char **argv);
/* status, metrics, reload, pause, resume, workers: ferryd's control socket */
int ctl_control(struct ctl *c, int argc, char **argv);
bool ctl_control_command(const char *name);
/* The same when the config file has nerrors errors (printed): reload is
 * refused (CTL_EX_CONFIG); the others ask the socket the file names
 * (or the default), saying that the running ferryd keeps its old
 * configuration; CTL_EX_CONFIG when no ferryd answers there. */
int ctl_control_broken(const char *config_path, int nerrors, int argc,
    char **argv);

#endif
