/* ctl_dead_redrive.c - `ferryctl dead retry|purge QUEUE` by a selection
 * (dead_filter.h), with --limit, --dry-run, and for retry --rate and --to:
 * the dead list is read from its oldest end, a window at a time, and the
 * entries selected move in batches, each one dead_move.lua call (removed
 * from the dead list and pushed to the requeue list of the queue they go
 * to, or purged, in one step): interrupted anywhere, every entry is either
 * still dead or moved. Only as many entries as the list held at the start
 * are read, so a job that dies again meanwhile is not moved twice.
 * --rate paces the batches (entries a second, by the monotonic clock).
 * Entries a retry cannot move stay, counted and said: malformed ones, and
 * with --to another queue, those whose jobs name a cache key (its data
 * and its protection belong to QUEUE). With redis_cluster, --to another
 * queue is refused: the two lists are in different slots and no script
 * can take from one and push to the other in one step. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ctl_dead.h"
#include "dead_move_args.h"
#include "util.h"

#define BATCH_ENTRIES 500
#define BATCH_BYTES (4 << 20)
#define BATCHES_A_SECOND 20     /* with --rate: batches of rate/20 */

struct redrive {
	struct ctl *c;
	const struct queue_config *q, *to;
	const struct ctl_dead_opts *o;
	struct queue_keys k;
	bool purge, progress;
	int batch_max;
	long long total, seen, selected, moved, gone, malformed, cached;
	long long would;        /* --dry-run: entries that would move */
	long kept;              /* entries left at the oldest end */
	long long start_ms;
	struct dead_move_args a;
	long removed;           /* of the current window */
};

static bool
limit_reached(const struct redrive *r)
{
	return r->o->limit >= 0 && r->selected >= r->o->limit;
}

/* With --rate: wait until the entries moved so far are due. */
static void
pace(const struct redrive *r)
{
	if (r->o->rate <= 0)
		return;
	long long due = r->start_ms + (long long)((r->moved + r->a.entries) *
	    1000.0 / r->o->rate);
	long long wait = due - util_monotonic_ms();
	if (wait > 0) {
		struct timespec ts = { wait / 1000, (wait % 1000) * 1000000L };
		nanosleep(&ts, NULL);
	}
}

static void
batch_start(struct redrive *r)
{
	dead_move_args_init(&r->a, r->c->cfg->redis_prefix, r->q->name,
	    r->purge ? NULL : r->to->name, ctl_random64());
}

/* Send the batch being built (if any) and start the next. */
static int
flush(struct redrive *r)
{
	redisReply *rep;

	if (r->a.entries == 0)
		return 0;
	pace(r);
	dead_move_args_finish(&r->a);
	rep = queue_script(r->c->rc, r->a.script, r->a.nkeys, r->a.argc,
	    r->a.argv, r->a.lens);
	if (!ctl_reply_ok(rep) || rep->type != REDIS_REPLY_ARRAY ||
	    rep->elements != 2)
		return ctl_redis_fail(r->c, r->purge ? "purging a batch of dead "
		    "entries (dead_move.lua)" : "replaying a batch of dead entries "
		    "(dead_move.lua)", rep);
	r->moved += rep->element[0]->integer;
	r->gone += rep->element[1]->integer;
	r->removed += (long)(rep->element[0]->integer + rep->element[1]->integer);
	freeReplyObject(rep);
	dead_move_args_free(&r->a);
	batch_start(r);
	if (r->progress)
		fprintf(stderr, "\rferryctl: %s %lld of %lld read", r->purge ?
		    "purged" : "replayed", r->moved, r->seen);
	return 0;
}

/* May this selected entry move? False when it stays (counted). */
static bool
movable(struct redrive *r, const struct dead_entry *e)
{
	char *key;

	if (r->purge)
		return true;
	if (!e->ok) {
		r->malformed++;
		return false;
	}
	if (r->to == r->q || (key = dead_entry_cache_key(e)) == NULL)
		return true;
	free(key);
	r->cached++;
	return false;
}

/* Entry el, at pos from the window's oldest end. */
static int
consider(struct redrive *r, const redisReply *el, long pos)
{
	struct dead_entry e;
	char id[JOB_ID_MAX + 1];
	int rc = 0;

	r->seen++;
	dead_entry_read(&e, el->str, el->len);
	dead_entry_id(e.ok ? &e.w : NULL, el->str, el->len, r->q->max_job_bytes,
	    id);
	if (!limit_reached(r) && dead_filter_match(&r->o->f, &e, id)) {
		r->selected++;
		if (!movable(r, &e)) {
			/* stays: counted */
		} else if (r->o->dry_run) {
			ctl_dead_print_line(&e, id);
			r->would++;
		} else {
			if (r->a.entries >= r->batch_max ||
			    r->a.bytes + el->len > BATCH_BYTES)
				rc = flush(r);
			char *key = r->purge ? ctl_dead_cache_key(r->c, r->q, &e) : NULL;
			dead_move_args_add(&r->a, -(r->kept + pos + 1 - r->removed),
			    el->str, el->len, key);
			free(key);
		}
	}
	dead_entry_free(&e);
	return rc;
}

/* Every window from the oldest end, the selected entries moved. */
static int
walk(struct redrive *r)
{
	redisReply *rep = redisCommand(r->c->rc, "LLEN %s", r->k.dead);
	int rc = 0;

	if (!ctl_reply_ok(rep) || rep->type != REDIS_REPLY_INTEGER)
		return ctl_redis_fail(r->c, "LLEN of the dead list", rep);
	r->total = rep->integer;
	freeReplyObject(rep);
	batch_start(r);
	while (rc == 0 && r->seen < r->total && !limit_reached(r)) {
		long n = r->total - r->seen < CTL_CHUNK ?
		    (long)(r->total - r->seen) : CTL_CHUNK;
		rep = redisCommand(r->c->rc, "LRANGE %s %ld %ld", r->k.dead,
		    -r->kept - n, -r->kept - 1);
		if (!ctl_reply_ok(rep) || rep->type != REDIS_REPLY_ARRAY) {
			dead_move_args_free(&r->a);
			return ctl_redis_fail(r->c, "LRANGE of the dead list", rep);
		}
		if (rep->elements == 0)
			r->total = r->seen;     /* shorter than it was: done */
		r->removed = 0;
		for (size_t i = rep->elements; i-- > 0 && rc == 0; )
			rc = consider(r, rep->element[i], (long)(rep->elements - 1 - i));
		if (rc == 0)
			rc = flush(r);         /* the window's entries go with it */
		r->kept += (long)rep->elements - r->removed;
		freeReplyObject(rep);
	}
	dead_move_args_free(&r->a);
	if (r->progress && r->seen > 0)
		fputc('\n', stderr);
	return rc;
}

static void
report(const struct redrive *r)
{
	const char *name = r->q->name;

	if (r->o->dry_run)
		printf("dry run: would %s %lld dead entr%s of queue %s%s%s "
		    "(nothing changed)\n", r->purge ? "purge" : "replay",
		    r->would, r->would == 1 ? "y" : "ies", name,
		    r->purge ? "" : " to queue ", r->purge ? "" : r->to->name);
	else if (r->purge)
		printf("purged %lld dead entr%s from queue %s\n", r->moved,
		    r->moved == 1 ? "y" : "ies", name);
	else
		printf("replayed %lld job%s of queue %s to queue %s\n", r->moved,
		    r->moved == 1 ? "" : "s", name, r->to->name);
	if (r->gone > 0)
		fprintf(stderr, "ferryctl: %lld selected entr%s of queue %s were "
		    "gone before they could be moved (another ferryctl or the "
		    "dashboard?)\n", r->gone, r->gone == 1 ? "y" : "ies", name);
	if (r->malformed > 0)
		fprintf(stderr, "ferryctl: %lld malformed dead entr%s left in queue "
		    "%s: they cannot be replayed, only shown and purged (see "
		    "`ferryctl dead list %s --reason '%s'`)\n", r->malformed,
		    r->malformed == 1 ? "y" : "ies", name, name,
		    DEAD_ENTRY_MALFORMED);
	if (r->cached > 0)
		fprintf(stderr, "ferryctl: %lld dead entr%s left in queue %s: "
		    "their jobs name a cache key, whose data and protection belong "
		    "to queue %s; replay them to queue %s itself\n", r->cached,
		    r->cached == 1 ? "y" : "ies", name, name, name);
}

/* --to: a configured queue, reachable in one script. */
static int
target(struct redrive *r)
{
	if (r->o->to == NULL) {
		r->to = r->q;
		return 0;
	}
	if ((r->to = ctl_queue(r->c, r->o->to)) == NULL)
		return CTL_EX_USAGE;
	if (r->to != r->q && *r->c->cfg->redis_cluster != '\0') {
		fprintf(stderr, "ferryctl: dead retry --to %s: with redis_cluster, "
		    "the dead list of queue %s and the requeue list of queue %s are "
		    "in different slots, and no single step can move an entry "
		    "between them; replay to queue %s itself (after fixing its "
		    "settings), or show the jobs and enqueue them to %s\n",
		    r->to->name, r->q->name, r->to->name, r->q->name, r->to->name);
		return CTL_EX_USAGE;
	}
	return 0;
}

int
ctl_dead_redrive(struct ctl *c, const struct queue_config *q,
    const struct ctl_dead_opts *o)
{
	struct redrive r = { .c = c, .q = q, .o = o };
	int rc;

	r.purge = strcmp(o->sub, "purge") == 0;
	if ((rc = target(&r)) != 0)
		return rc;
	queue_keys_init(&r.k, c->cfg->redis_prefix, q->name);
	r.progress = !o->dry_run && ctl_progress_wanted(false);
	r.batch_max = BATCH_ENTRIES;
	if (o->rate > 0 && o->rate / BATCHES_A_SECOND < BATCH_ENTRIES)
		r.batch_max = o->rate / BATCHES_A_SECOND >= 1 ?
		    (int)(o->rate / BATCHES_A_SECOND) : 1;
	r.start_ms = util_monotonic_ms();
	if ((rc = walk(&r)) != 0)
		return rc;
	report(&r);
	return 0;
}
