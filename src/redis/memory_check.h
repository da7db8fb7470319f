/* memory_check.h - what ferry must know about a Redis server's memory: read
 * INFO and CONFIG GET replies, judge the eviction policy, persistence and
 * fullness against the config (doc/design.md, 3.8). */
#ifndef FERRY_MEMORY_CHECK_H
#define FERRY_MEMORY_CHECK_H

#include <hiredis/hiredis.h>
#include <stdbool.h>
#include <stddef.h>

enum memory_verdict {
	MEMORY_OK,
	MEMORY_WARN,            /* start, but say so loudly */
	MEMORY_REFUSE,          /* do not start */
};

struct redis_memory {
	long long used;         /* used_memory */
	long long max;          /* maxmemory; 0: no limit */
	long long dataset;      /* used_memory_dataset */
	long long keys;         /* keys of every db (INFO keyspace) */
	long long volatile_keys; /* ... of which with a TTL (expires) */
	char policy[32];        /* maxmemory-policy; "" when unknown */
	bool config_refused;    /* CONFIG GET failed: policy read from INFO */
	char config_error[160]; /* ... and why */
	int aof;                /* aof_enabled: 1, 0, or -1 unknown */
	int save;               /* CONFIG GET save: 1 set, 0 empty, -1 unknown */
	bool rdb_failed;        /* rdb_last_bgsave_status:err */
	bool aof_failed;        /* aof_last_write_status:err */
};

/* Start from "nothing known". */
void memory_init(struct redis_memory *m);
/* The fields above found in an INFO reply's text (any sections). */
void memory_parse_info(struct redis_memory *m, const char *info);
/* A CONFIG GET maxmemory-policy (policy) or CONFIG GET save reply; an
 * error reply marks CONFIG as refused. */
void memory_parse_config(struct redis_memory *m, const redisReply *r,
    bool policy);
/* used / max in whole percent (rounded down), or -1 without maxmemory. */
int memory_percent(const struct redis_memory *m);
/* The table entries of a key with a TTL (in the main and the expires
 * dict), freed when it is evicted. */
#define MEMORY_KEY_ENTRIES 64
/* What Redis cannot evict, in bytes, given a queue's own bytes and keys:
 * under a volatile-* policy with maxmemory, used_memory less an estimate
 * of what it can evict (the keys with a TTL get their share, by count, of
 * the data that is not the queue's, and their table entries); under any
 * other policy all of used_memory. The same arithmetic, in doubles and in
 * the same order, as memory_view in src/redis/lua/common.lua, which the
 * producers' refusal runs: a test holds the two to the same answer on the
 * same INFO text. */
long long memory_unevictable(const struct redis_memory *m, long long own,
    long long own_keys);
/* unevictable / max in whole percent, or -1 without maxmemory. */
int memory_unevictable_percent(const struct redis_memory *m,
    long long unevictable);
/* Judge the policy and persistence; msg gets the text (empty for OK). */
enum memory_verdict memory_judge_eviction(const struct redis_memory *m,
    bool allow_unsafe, char *msg, size_t size);
enum memory_verdict memory_judge_persistence(const struct redis_memory *m,
    bool require, char *msg, size_t size);
/* Where used / maxmemory stands against memory_warn_percent and
 * memory_refuse_percent. */
enum memory_mark { MEMORY_BELOW_WARN, MEMORY_ABOVE_WARN, MEMORY_ABOVE_REFUSE };
#define MEMORY_MARK_HYSTERESIS 5
/* The mark for pct (-1: no maxmemory) coming from `was`: up at once, down
 * only once pct is MEMORY_MARK_HYSTERESIS points below the mark it
 * leaves, so that usage hovering at a mark does not fill the log. */
enum memory_mark memory_mark(int pct, int warn, int refuse,
    enum memory_mark was);
/* "1.5 MiB", "512 B" */
const char *memory_fmt_bytes(long long n, char *buf, size_t size);

/* Synchronously: INFO memory; with `settings` INFO (all of it) and
 * CONFIG GET maxmemory-policy and save (pipelined). -1 with err when the
 * connection failed or INFO was refused. */
int memory_fetch(redisContext *c, struct redis_memory *m, bool settings,
    char *err, size_t errsize);

#endif
