/* master_series.c - the ring of per-queue counter samples behind the
 * dashboard's chart. A sample is what metrics.c last heard from Redis
 * (the master asks nothing more of Redis for it); a queue seen for the
 * first time gets its own ring, one that goes from the config keeps its
 * ring until it is full of nothing new (it is small: 181 samples). */
#include "master_series.h"

#include <ev.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "master_int.h"
#include "metrics.h"
#include "util.h"

enum { C_DONE, C_RETRIED, C_DEAD, C_RECOVERED, C_COUNT };
static const char *const counter_names[C_COUNT] = {
	"done", "retried", "dead", "recovered",
};

struct sample {
	int64_t time_ms;          /* CLOCK_REALTIME */
	int64_t c[C_COUNT];
};

struct series {
	char queue[CONFIG_QUEUE_NAME_MAX + 1];
	struct sample ring[MASTER_SERIES_SAMPLES];
	unsigned long n;          /* samples ever taken */
	struct series *next;
};

static struct {
	struct master *m;
	ev_timer timer;
	struct series *all;
} S;

static int64_t
wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static struct series *
series_of(const char *queue)
{
	struct series *s;

	for (s = S.all; s != NULL; s = s->next)
		if (strcmp(s->queue, queue) == 0)
			return s;
	s = xcalloc(1, sizeof(*s));
	snprintf(s->queue, sizeof(s->queue), "%s", queue);
	s->next = S.all;
	S.all = s;
	return s;
}

static void
sample_cb(struct ev_loop *loop, ev_timer *t, int revents)
{
	int64_t now = wall_ms();
	(void)loop;
	(void)t;
	(void)revents;

	for (struct master_queue *mq = S.m->queues; mq != NULL; mq = mq->next) {
		const struct metrics_figures *f = metrics_figures_of(S.m->metrics,
		    mq->cfg.name);
		if (f == NULL || mq->removed)
			continue;
		struct series *s = series_of(mq->cfg.name);
		struct sample *x = &s->ring[s->n++ % MASTER_SERIES_SAMPLES];
		x->time_ms = now;
		x->c[C_DONE] = f->done;
		x->c[C_RETRIED] = f->retried;
		x->c[C_DEAD] = f->deadlettered;
		x->c[C_RECOVERED] = f->recovered;
	}
}

void
master_series_start(struct master *m)
{
	S.m = m;
	/* the first sample soon after the first figures, then every step */
	ev_timer_init(&S.timer, sample_cb, 1.5, MASTER_SERIES_STEP_S);
	ev_timer_start(m->loop, &S.timer);
}

void
master_series_stop(struct master *m)
{
	ev_timer_stop(m->loop, &S.timer);
	while (S.all != NULL) {
		struct series *s = S.all;
		S.all = s->next;
		free(s);
	}
}

/* The rates between samples a and b (b later); a counter that went down
 * (the stats hash was reset) counts as 0. */
static json_t *
rate_json(const struct sample *a, const struct sample *b)
{
	json_t *o = json_object();
	double dt = (double)(b->time_ms - a->time_ms) / 1000.;

	json_object_set_new(o, "time_ms", json_integer(b->time_ms));
	for (int i = 0; i < C_COUNT; i++) {
		int64_t d = b->c[i] - a->c[i];
		json_object_set_new(o, counter_names[i], json_real(d > 0 && dt > 0 ?
		    (double)d / dt : 0.));
	}
	return o;
}

json_t *
master_series_json(void)
{
	json_t *queues = json_object();

	for (struct series *s = S.all; s != NULL; s = s->next) {
		json_t *a = json_array();
		unsigned long n = s->n < MASTER_SERIES_SAMPLES ? s->n :
		    MASTER_SERIES_SAMPLES;
		for (unsigned long i = 1; i < n; i++) {
			unsigned long at = s->n - n + i;
			json_array_append_new(a, rate_json(
			    &s->ring[(at - 1) % MASTER_SERIES_SAMPLES],
			    &s->ring[at % MASTER_SERIES_SAMPLES]));
		}
		json_object_set_new(queues, s->queue, a);
	}
	return json_pack("{s:i, s:o}", "step_s", MASTER_SERIES_STEP_S, "queues",
	    queues);
}
