/* dead_move_args.h - the KEYS and ARGV of dead_move.lua (a batch of dead
 * entries retried or purged in one step), built in one place for
 * `ferryctl dead` (src/ferryctl/ctl_dead_redrive.c) and the dashboard's
 * API (src/ferryd/http/http_dead_select.c). A batch holds any number of
 * entries, so unlike script_args.h the arrays grow. Pure code. */
#ifndef FERRY_DEAD_MOVE_ARGS_H
#define FERRY_DEAD_MOVE_ARGS_H

#include <stdbool.h>
#include <stddef.h>

#include "lua_scripts.h"
#include "queue.h"

#define DEAD_MOVE_TOMB_LEN 48

struct dead_move_args {
	enum lua_script script;         /* LUA_DEAD_MOVE */
	bool purge;
	int nkeys, argc, entries;       /* argv: nkeys KEYS, then ARGV */
	size_t bytes;                   /* of the entries added */
	const char **argv;
	size_t *lens;
	/* private */
	struct queue_keys from, to;
	char tomb[DEAD_MOVE_TOMB_LEN];
	char **owned;                   /* index texts and cache keys */
	int nowned;
	const char **keys, **vals;
	size_t *vlens;
	int nk, nv, cap_k, cap_v;
};

/* A batch of queue's entries: retried to to_queue's requeue (to_queue
 * may be queue itself), or purged when to_queue is NULL. tomb_seed: 64
 * random bits naming the tombstone of this batch. */
void dead_move_args_init(struct dead_move_args *a, const char *prefix,
    const char *queue, const char *to_queue, unsigned long long tomb_seed);
/* One entry: the index at which it was read (negative, from the oldest
 * end), its bytes (el must outlive the call) and, for a purge, the cache
 * key its job names (NULL: none; copied). */
void dead_move_args_add(struct dead_move_args *a, long index, const char *el,
    size_t len, const char *cache_key);
/* Fill argv, lens, nkeys and argc for queue_script; call after the last
 * add (again after more adds). */
void dead_move_args_finish(struct dead_move_args *a);
void dead_move_args_free(struct dead_move_args *a);

#endif
