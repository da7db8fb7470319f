/* master_ids.c - each queue's idempotency on the master's loop
 * (master_ids.h): once a second, ids.lua publishes the queue's
 * idempotency_window in its config hash (where the enqueue script reads
 * it) and forgets the ids whose window has passed, MASTER_IDS_STEP at most
 * a call; a call that forgot that many is followed by the next one at once,
 * so that the set shrinks as fast as jobs are done while Redis is never
 * held long. Every master does it for every queue it serves: the steps
 * are idempotent. */
#include "master_ids.h"

#include <ev.h>
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lua_scripts.h"
#include "master_int.h"
#include "master_redis.h"
#include "queue.h"
#include "util.h"

struct ids_queue {
	char name[CONFIG_QUEUE_NAME_MAX + 1];
	bool busy;              /* a step in flight */
	bool again;             /* the last step forgot MASTER_IDS_STEP */
	bool orphaned;          /* stopped: its reply frees it */
	struct ids_queue *next;
};

static struct {
	struct master *m;
	ev_timer timer;         /* every MASTER_IDS_EVERY_S */
	ev_timer soon;          /* steps that follow a full one */
	struct ids_queue *queues;
} ids;

static struct ids_queue *
queue_of(const char *name)
{
	struct ids_queue *iq;

	for (iq = ids.queues; iq != NULL; iq = iq->next)
		if (strcmp(iq->name, name) == 0)
			return iq;
	iq = xcalloc(1, sizeof(*iq));
	snprintf(iq->name, sizeof(iq->name), "%s", name);
	iq->next = ids.queues;
	ids.queues = iq;
	return iq;
}

static void
on_step(struct master *m, redisReply *rep, void *priv)
{
	struct ids_queue *iq = priv;
	(void)m;

	iq->busy = false;
	if (iq->orphaned) {
		free(iq);
		return;
	}
	/* an error or a lost connection: the link logs it; the next tick
	 * tries again */
	iq->again = rep != NULL && rep->type == REDIS_REPLY_INTEGER &&
	    rep->integer >= MASTER_IDS_STEP;
	if (iq->again && !ev_is_active(&ids.soon)) {
		ev_timer_set(&ids.soon, 0.0, 0.0);
		ev_timer_start(ids.m->loop, &ids.soon);
	}
}

static void
step(struct master_queue *mq, struct ids_queue *iq)
{
	struct queue_keys k;
	char window[24], count[16];

	queue_keys_init(&k, ids.m->cfg->redis_prefix, mq->cfg.name);
	snprintf(window, sizeof(window), "%ld", mq->cfg.idempotency_window_ms);
	snprintf(count, sizeof(count), "%d", MASTER_IDS_STEP);
	const char *argv[] = { "EVAL", lua_script_source[LUA_IDS], "3",
	    k.config, k.ids, k.idsha, window, count };
	iq->again = false;
	if (master_redis_command(ids.m, mq->cfg.name, on_step, iq, 8,
	    argv) == 0)
		iq->busy = true;
}

/* Every queue's step (all: the tick), or only those whose last step was
 * full (the steps that follow at once). */
static void
steps(bool all)
{
	for (struct master_queue *mq = ids.m->queues; mq != NULL; mq = mq->next) {
		struct ids_queue *iq = queue_of(mq->cfg.name);
		if (!iq->busy && !mq->removed && (all || iq->again))
			step(mq, iq);
	}
	/* queues gone from the config: forgotten once idle */
	for (struct ids_queue **pp = &ids.queues; *pp != NULL;) {
		struct ids_queue *iq = *pp;
		if (!iq->busy && master_find_queue(ids.m, iq->name) == NULL) {
			*pp = iq->next;
			free(iq);
		} else {
			pp = &iq->next;
		}
	}
}

static void
tick_cb(struct ev_loop *loop, ev_timer *t, int revents)
{
	(void)loop;
	(void)t;
	(void)revents;
	steps(true);
}

static void
soon_cb(struct ev_loop *loop, ev_timer *t, int revents)
{
	(void)loop;
	(void)t;
	(void)revents;
	steps(false);
}

void
master_ids_start(struct master *m)
{
	ids.m = m;
	ev_timer_init(&ids.timer, tick_cb, MASTER_IDS_EVERY_S,
	    MASTER_IDS_EVERY_S);
	ev_timer_init(&ids.soon, soon_cb, 0.0, 0.0);
	ev_timer_start(m->loop, &ids.timer);
}

void
master_ids_stop(struct master *m)
{
	ev_timer_stop(m->loop, &ids.timer);
	ev_timer_stop(m->loop, &ids.soon);
	while (ids.queues != NULL) {
		struct ids_queue *iq = ids.queues;
		ids.queues = iq->next;
		if (iq->busy)
			iq->orphaned = true;
		else
			free(iq);
	}
}
