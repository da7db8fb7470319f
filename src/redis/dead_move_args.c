/* dead_move_args.c - see dead_move_args.h. */
#include "dead_move_args.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

static char *
own(struct dead_move_args *a, char *s)
{
	a->owned = xrealloc(a->owned, (size_t)(a->nowned + 1) *
	    sizeof(*a->owned));
	a->owned[a->nowned++] = s;
	return s;
}

static void
key(struct dead_move_args *a, const char *k)
{
	if (a->nk == a->cap_k) {
		a->cap_k = a->cap_k ? a->cap_k * 2 : 16;
		a->keys = xrealloc(a->keys, (size_t)a->cap_k * sizeof(*a->keys));
	}
	a->keys[a->nk++] = k;
}

static void
val(struct dead_move_args *a, const char *v, size_t n)
{
	if (a->nv == a->cap_v) {
		a->cap_v = a->cap_v ? a->cap_v * 2 : 64;
		a->vals = xrealloc(a->vals, (size_t)a->cap_v * sizeof(*a->vals));
		a->vlens = xrealloc(a->vlens, (size_t)a->cap_v *
		    sizeof(*a->vlens));
	}
	a->vals[a->nv] = v;
	a->vlens[a->nv++] = n;
}

void
dead_move_args_init(struct dead_move_args *a, const char *prefix,
    const char *queue, const char *to_queue, unsigned long long tomb_seed)
{
	memset(a, 0, sizeof(*a));
	a->script = LUA_DEAD_MOVE;
	a->purge = to_queue == NULL;
	queue_keys_init(&a->from, prefix, queue);
	queue_keys_init(&a->to, prefix, to_queue != NULL ? to_queue : queue);
	snprintf(a->tomb, sizeof(a->tomb), "ferry dead_move tombstone %016llx",
	    tomb_seed);
	/* KEYS: dead, stats, protected, requeue */
	key(a, a->from.dead);
	key(a, a->from.stats);
	key(a, a->from.protected);
	key(a, a->to.requeue);
	val(a, a->purge ? "purge" : "retry", 5);
	val(a, a->tomb, strlen(a->tomb));
}

void
dead_move_args_add(struct dead_move_args *a, long index, const char *el,
    size_t len, const char *cache_key)
{
	char *at = own(a, xasprintf("%ld", index));

	val(a, at, strlen(at));
	val(a, el, len);
	a->entries++;
	a->bytes += len;
	if (!a->purge)
		return;
	if (cache_key == NULL) {
		val(a, "0", 1);
		return;
	}
	key(a, own(a, xstrdup(cache_key)));
	char *pos = own(a, xasprintf("%d", a->nk));
	val(a, pos, strlen(pos));
}

void
dead_move_args_finish(struct dead_move_args *a)
{
	int n = a->nk + a->nv;

	a->argv = xrealloc(a->argv, (size_t)n * sizeof(*a->argv));
	a->lens = xrealloc(a->lens, (size_t)n * sizeof(*a->lens));
	for (int i = 0; i < a->nk; i++) {
		a->argv[i] = a->keys[i];
		a->lens[i] = strlen(a->keys[i]);
	}
	for (int i = 0; i < a->nv; i++) {
		a->argv[a->nk + i] = a->vals[i];
		a->lens[a->nk + i] = a->vlens[i];
	}
	a->nkeys = a->nk;
	a->argc = n;
}

void
dead_move_args_free(struct dead_move_args *a)
{
	for (int i = 0; i < a->nowned; i++)
		free(a->owned[i]);
	free(a->owned);
	free(a->keys);
	free(a->vals);
	free(a->vlens);
	free(a->argv);
	free(a->lens);
	memset(a, 0, sizeof(*a));
}
