/* master_id.h - who this master is in Redis (doc/design.md, 1 and I8): an
 * id unique to each start, a token that its heartbeat entry holds, the
 * claim of that entry at start, and the arguments of heartbeat.lua. */
#ifndef FERRY_MASTER_ID_H
#define FERRY_MASTER_ID_H

#include <stddef.h>

#include "config.h"
#include "queue.h"

#define MASTER_ID_MAX 128
#define MASTER_TOKEN_MAX 48
/* Test-only: the whole master id, to make two masters collide. */
#define MASTER_ID_TEST_ENV "FERRYD_TEST_MASTER_ID"

struct master_ident {
	/* "host:pid:8hex": readable, and unique though containers share a
	 * hostname and run ferryd as pid 1 */
	char id[MASTER_ID_MAX];
	/* "pid:16hex", unique to this start even when the id is not */
	char token[MASTER_TOKEN_MAX];
};

/* Make the id and token of this start (after any fork: they carry the
 * pid). -1 with a message in err when the kernel gives no random bytes
 * or MASTER_ID_TEST_ENV is not a usable id. */
int master_ident_init(struct master_ident *mi, char *err, size_t errsize);

/* Claim the heartbeat entry before any worker runs: 0 when it is ours now,
 * or when Redis does not answer (then the master's first asynchronous
 * beat makes the same check); -1, logged, when a live heartbeat of
 * another start holds this id. */
int master_ident_claim(const struct ferry_config *cfg,
    const struct master_ident *mi);

/* KEYS and ARGV of heartbeat.lua: a beat with ttl_ms, or with 0 the
 * release of the entry at exit (deleted only while it is still ours). */
struct master_beat {
	char masters[QUEUE_KEY_MAX];
	char clock[QUEUE_KEY_MAX];
	char ttl[24];
	const char *args[5];
};
#define MASTER_BEAT_KEYS 2
#define MASTER_BEAT_ARGS 5
/* ... for queue: the masters and the clock hashes live in each queue's
 * slot. */
void master_beat_init(struct master_beat *b, const struct ferry_config *cfg,
    const char *queue, const char *id, const char *token, long ttl_ms);

/* The error code heartbeat.lua answers when the entry is another's. */
#define MASTER_ID_TAKEN "IDTAKEN "

#endif
