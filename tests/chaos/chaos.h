/* chaos.h - the helper program of scripts/chaos (the fault-injection suite):
 * one binary, one subcommand per module.
 *
 *   chaos_helper servers LINK...   real redis-server (AOF, appendfsync
 *                                  always) and PostgreSQL, a TCP proxy per
 *                                  LINK that can be cut, commands on stdin
 *   chaos_helper plan KEY=VALUE... the seeded fault schedule, on stdout
 *   chaos_helper produce KEY=VALUE... good jobs through the enqueue
 *                                  script (ids, calls of unknown outcome
 *                                  sent again), the plan's hostile
 *                                  elements raw onto the ready lists, and
 *                                  its forged jobs (forge.c)
 *   chaos_helper produce-cache KEY=VALUE... postgres jobs whose rows wait
 *                                  in cache keys, through ferryctl enqueue
 *                                  (killed mid-call at times, run again)
 *   chaos_helper foreign KEY=VALUE... create the foreign keys
 *   chaos_helper churn KEY=VALUE...  an application's cache: keys with a
 *                                  TTL, a few MB/s, so that Redis evicts
 *   chaos_helper check KEY=VALUE...  the checker; exit 1 on a loss, a
 *                                  duplicate, a job of unknown outcome
 *   chaos_helper check-modes KEY=VALUE... the checker of the upsert and
 *                                  two-table queues (modes.c)
 *   chaos_helper wait KEY=VALUE...   wait until every ferry list but dead
 *                                  is empty (bounded)
 *   chaos_helper handle FILE       the exec queue's handler
 *   chaos_helper watch KEY=VALUE...  (--failover) the primary's moves and
 *                                  the first job done after each
 *
 * Everything is on 127.0.0.1; every loop has a deadline. */
#ifndef FERRY_CHAOS_H
#define FERRY_CHAOS_H

#include <stddef.h>
#include <stdint.h>

#include <hiredis/hiredis.h>

#include "../support/servers.h"

/* ------------------------------------------------------------- util */
/* The monotonic clock and the sleep are servers.c's (servers_now_ms,
 * servers_sleep_ms), which the helper is built with. */
long long chaos_epoch_ms(void);    /* CLOCK_REALTIME in ms */
void chaos_die(const char *fmt, ...) __attribute__((format(printf, 1, 2),
    noreturn));

/* KEY=VALUE arguments: the value of `key`, or `def` when absent. */
const char *chaos_arg(int argc, char **argv, const char *key, const char *def);
long long chaos_arg_ll(int argc, char **argv, const char *key, long long def);

/* splitmix64: small, seedable, the same on every machine */
struct chaos_rng {
	uint64_t s;
};
uint64_t chaos_rng_next(struct chaos_rng *r);
/* uniform in [lo, hi] */
long long chaos_rng_range(struct chaos_rng *r, long long lo, long long hi);

/* A Redis connection with connect and command timeouts (ms); NULL when
 * Redis does not answer. */
redisContext *chaos_redis(int port, long timeout_ms);

/* With sentinels ("P1,P2,P3"): the primary they name for `master`, if it
 * answers ROLE master (its port in *port, when not NULL); NULL otherwise. */
redisContext *chaos_redis_primary(const char *sentinels, const char *master,
    long timeout_ms, int *port);
/* sentinels=P1,P2,P3 master=NAME when given (scripts/chaos --failover),
 * else redis=PORT. */
redisContext *chaos_redis_arg(int argc, char **argv, long timeout_ms);

/* A growable byte buffer. */
struct chaos_buf {
	char *p;
	size_t len, cap;
};
void chaos_buf_add(struct chaos_buf *b, const void *data, size_t n);
void chaos_buf_printf(struct chaos_buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void chaos_buf_free(struct chaos_buf *b);

/* A set of strings: a list, searched in order (a few hundred at most). */
struct chaos_keys {
	char **k;
	size_t n, cap;
};
void chaos_keys_add(struct chaos_keys *s, const char *k);
int chaos_keys_has(const struct chaos_keys *s, const char *k);
void chaos_keys_free(struct chaos_keys *s);

/* Foreign keys: keys of "another application" that hostile cache_keys
 * name; created by `foreign`, verified by `check`. */
extern const char *const chaos_foreign_keys[];
int chaos_foreign_create(redisContext *c);
/* Number of foreign keys changed (each printed to stdout); app:session:1,
 * which has a TTL, may be gone: evicted (volatile-lru). */
int chaos_foreign_check(redisContext *c);

/* The cache at the end of a run (chaos_helper.c): queues' stats
 * cache_missing 0, no dead entry "cache key expired or evicted", no cache
 * key of theirs (nor one under keyprefix without a TTL) nor protected
 * entry left that no dead job names; prints the cached producer's
 * (cache_stats) and the churn's (churn) reports. The number of failures. */
int chaos_cache_check(redisContext *c, const char *prefix,
    const char *const *queues, int nq, const char *keyprefix,
    const char *cache_stats, const char *churn);

/* The value of KEY=... in the one-line report of file `path` (churn's,
 * the producers'); -1 when absent (cache_check.c). */
long long chaos_report_value(const char *path, const char *key);

/* The hostile element kinds (plan.c), NULL-terminated. */
extern const char *const chaos_hostile_kinds[];

/* What the hostile elements are made from (hostile.c). */
struct chaos_hostile {
	redisContext *c;        /* to read the batch keys in flight (NULL:
	                         * made up ones) */
	const char *prefix, *pgq, *execq;
	const char *good;       /* the queue's last good document, or NULL */
	long long max_job_bytes;
	long long n;            /* elements made: ids h-1, h-2, ... */
};
/* The hostile element KIND (variant idx) for queue q (0 pg, 1 exec),
 * appended to b. */
void chaos_hostile_element(struct chaos_hostile *h, int q, const char *kind,
    long long idx, struct chaos_buf *b);

/* The hostile producer's forged jobs (forge.c): pushed past the enqueue
 * script with the id of a live honest job, or naming an honest job's key
 * of ferry's own, each with the marker "forged":"f-K". */
int chaos_forged_nkinds(void);
/* The name of kind k, and its queue ("pg" or "exec") in *queue. */
const char *chaos_forged_name(int k, const char **queue);
/* Kind `name`'s number, or -1. */
int chaos_forged_kind(const char *name);
/* K of the marker "forged":"f-K" that bytes el hold (a document, a
 * wrapper, a dead entry), or 0: not a forged job's. */
long long chaos_forged_of(const char *el, size_t len);

/* The producer's side: what it learnt of the queue (the keys of ferry's
 * own that honest dead jobs name) and how many jobs it forged. */
struct chaos_forger {
	struct chaos_keys keys;
	long long dead_seen, n;
};
struct chaos_forged {
	const char *kind;       /* the kind made (key-waiting with no key
	                         * waiting: key-dead) */
	char fid[24];           /* f-K */
	char target[200];       /* the honest id it carries, or the key */
	int head;               /* RPUSH: ahead of the job that names the key */
	struct chaos_buf doc;
};
/* Forge a job of `kind` for queue q (idx: the plan's index, which of the
 * candidates) from what Redis holds now, into out; -1 when there is nothing
 * to forge it from (no live id, no key). */
int chaos_forge(struct chaos_forger *f, redisContext *c, const char *prefix,
    const char *q, const char *kind, long long idx, struct chaos_forged *out);
void chaos_forger_free(struct chaos_forger *f);

/* The checker's side: a forged job at the end of the run (the honest id
 * or key it targets, its push's ledger letter st, rows written, dead: its
 * first dead entry's reason and last error, how often handled); 1 when it
 * broke a promise (counted and noted for the report). A kind's job that
 * could not be made: unmade. */
int chaos_forged_verdict(int k, const char *fid, const char *target, char st,
    int rows, int dead, const char *reason, const char *error, int handled);
void chaos_forged_unmade(int k);
/* Print the figures; then the failures, a FAIL line if any. */
void chaos_forged_report(void);
void chaos_forged_failures(void);

/* The non-empty lists and sorted sets of queue q but dead (printed when
 * `say`); dead entries are handed to dead_cb. -1 when Redis fails. */
long long chaos_leftovers(redisContext *c, const char *prefix, const char *q,
    int say, void (*dead_cb)(const char *, size_t, const char *));

/* The upsert queue's and the two-table queue's jobs (modes.c). */
struct chaos_modes {
	struct chaos_rng rng;
	long long keys;
	long long *ver;      /* per key: the last version sent */
	long long next[2];   /* job numbers: [0] upsert, [1] tables */
};
void chaos_modes_init(struct chaos_modes *m, uint64_t seed, long long keys);
void chaos_modes_free(struct chaos_modes *m);
/* The next job of mode queue w (0 upsert, 1 tables): its id, its document
 * (appended to doc) and the rest of its ledger line. */
void chaos_modes_job(struct chaos_modes *m, int w, char *id, size_t idn,
    struct chaos_buf *doc, char *tail, size_t tailn);

/* --------------------------------------------------------- commands */
int chaos_servers_main(int argc, char **argv);
int chaos_plan_main(int argc, char **argv);
int chaos_produce_main(int argc, char **argv);
int chaos_produce_cache_main(int argc, char **argv);
int chaos_churn_main(int argc, char **argv);        /* churn.c */
int chaos_check_main(int argc, char **argv);
int chaos_modes_check_main(int argc, char **argv);
int chaos_wait_main(int argc, char **argv);        /* wait.c */
int chaos_handle_main(int argc, char **argv);
int chaos_watch_main(int argc, char **argv);

#endif
