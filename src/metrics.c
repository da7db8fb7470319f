/* metrics.c - the figures behind `status` and `metrics`: this host's
 * workers from the scoreboard (plus the totals of their dead predecessors),
 * and each queue's lengths and counters, asked of Redis every second over
 * master_redis.c's connection. Answering never waits for Redis. */
#include "metrics.h"

#include <hiredis/hiredis.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "master.h"
#include "queue.h"
#include "util.h"

#define METRICS_REFRESH_S 1.0

void
metrics_totals_add_slot(struct metrics_totals *t, struct scoreboard_slot *slot)
{
	t->jobs_done += atomic_load(&slot->jobs_done);
	t->batches += atomic_load(&slot->batches);
	t->batch_sum_ms += atomic_load(&slot->batch_sum_ms);
	for (int b = 0; b < SCOREBOARD_BUCKETS; b++)
		t->buckets[b] += atomic_load(&slot->batch_buckets[b]);
	for (int c = 0; c < SB_ERR_CLASSES; c++)
		t->errors[c] += atomic_load(&slot->errors[c]);
}

/* The Redis figures of one queue, kept by name: a queue may go away on
 * reload while the replies about it are still on their way. */
struct figures_entry {
	char queue[CONFIG_QUEUE_NAME_MAX + 1];
	struct metrics_figures v;
	struct figures_entry *next;
};

struct metrics {
	ev_timer timer;
	int pending;              /* replies of the last refresh still due */
	struct figures_entry *figures;
	int64_t used_memory, maxmemory, memory_ms;   /* INFO memory */
};

enum { ASK_READY, ASK_REQUEUED, ASK_DELAYED, ASK_DEAD, ASK_STATS, ASK_OWNERS, ASK_PROC,
    ASK_COUNT };

struct figures_ask {
	struct figures_round *round;
	int what;
};

/* One refresh of one queue, published once every reply has come. */
struct figures_round {
	struct metrics *mt;
	char queue[CONFIG_QUEUE_NAME_MAX + 1];
	struct queue_keys k;
	int outstanding;
	bool failed;
	struct metrics_figures v;
	struct figures_ask asks[ASK_COUNT];
};

static void on_figure(struct master *m, redisReply *rep, void *priv);

static void
ask(struct master *m, struct figures_round *fr, int what, int argc,
    const char **argv)
{
	fr->outstanding++;
	fr->mt->pending++;
	if (master_redis_command(m, fr->queue, on_figure, &fr->asks[what], argc,
	    argv) == -1) {
		fr->failed = true;
		fr->outstanding--;
		fr->mt->pending--;
	}
}

static const struct metrics_figures *
figures_of(const struct master *m, const char *queue)
{
	struct figures_entry *e = m->metrics != NULL ? m->metrics->figures :
	    NULL;

	while (e != NULL && strcmp(e->queue, queue) != 0)
		e = e->next;
	return e != NULL ? &e->v : NULL;
}

static void
figures_publish(struct figures_round *fr)
{
	struct metrics *mt = fr->mt;
	struct figures_entry *e = mt->figures;

	while (e != NULL && strcmp(e->queue, fr->queue) != 0)
		e = e->next;
	if (!fr->failed && e == NULL) {
		e = xcalloc(1, sizeof(*e));
		snprintf(e->queue, sizeof(e->queue), "%s", fr->queue);
		e->next = mt->figures;
		mt->figures = e;
	}
	if (!fr->failed) {
		fr->v.updated_ms = util_monotonic_ms();
		e->v = fr->v;
	}
	free(fr);
}

/* HGETALL of the stats hash: field, value, field, value... */
static void
figures_counters(struct metrics_figures *v, const redisReply *rep)
{
	for (size_t i = 0; i + 1 < rep->elements; i += 2) {
		const char *f = rep->element[i]->str;
		int64_t n = strtoll(rep->element[i + 1]->str, NULL, 10);
		if (strcmp(f, "enqueued") == 0)
			v->enqueued = n;
		else if (strcmp(f, "done") == 0)
			v->done = n;
		else if (strcmp(f, "retried") == 0)
			v->retried = n;
		else if (strcmp(f, "dead") == 0)
			v->deadlettered = n;
		else if (strcmp(f, "recovered") == 0)
			v->recovered = n;
		else if (strcmp(f, "cache_missing") == 0)
			v->cache_missing = n;
	}
}

static void
figures_store(struct master *m, struct figures_round *fr, int what,
    const redisReply *rep)
{
	char key[QUEUE_KEY_MAX + 160];

	switch (what) {
	case ASK_READY: fr->v.ready = rep->integer; break;
	case ASK_DELAYED: fr->v.delayed = rep->integer; break;
	case ASK_REQUEUED: fr->v.requeued = rep->integer; break;
	case ASK_DEAD: fr->v.dead = rep->integer; break;
	case ASK_PROC: fr->v.processing += rep->integer; break;
	case ASK_STATS: figures_counters(&fr->v, rep); break;
	case ASK_OWNERS:
		/* every processing list of the queue, on any host */
		for (size_t i = 0; i < rep->elements; i++) {
			queue_proc_key(&fr->k, rep->element[i]->str, key, sizeof(key));
			const char *argv[] = { "LLEN", key };
			ask(m, fr, ASK_PROC, 2, argv);
		}
		break;
	}
}

static void
on_figure(struct master *m, redisReply *rep, void *priv)
{
	struct figures_ask *a = priv;
	struct figures_round *fr = a->round;
	int want = a->what == ASK_STATS || a->what == ASK_OWNERS ?
	    REDIS_REPLY_ARRAY : REDIS_REPLY_INTEGER;

	fr->mt->pending--;
	if (rep == NULL || rep->type != want)
		fr->failed = true;
	else
		figures_store(m, fr, a->what, rep);
	if (--fr->outstanding == 0)
		figures_publish(fr);
}

static void
figures_queue(struct master *m, const char *queue)
{
	struct figures_round *fr = xcalloc(1, sizeof(*fr));

	fr->mt = m->metrics;
	snprintf(fr->queue, sizeof(fr->queue), "%s", queue);
	queue_keys_init(&fr->k, m->cfg->redis_prefix, queue);
	for (int i = 0; i < ASK_COUNT; i++)
		fr->asks[i] = (struct figures_ask){ fr, i };
	const char *ready[] = { "LLEN", fr->k.ready };
	const char *delayed[] = { "ZCARD", fr->k.delayed };
	const char *requeued[] = { "LLEN", fr->k.requeue };
	const char *dead[] = { "LLEN", fr->k.dead };
	const char *stats[] = { "HGETALL", fr->k.stats };
	const char *owners[] = { "HKEYS", fr->k.owners };
	fr->outstanding = 1;    /* hold it until every ask is sent */
	ask(m, fr, ASK_READY, 2, ready);
	ask(m, fr, ASK_DELAYED, 2, delayed);
	ask(m, fr, ASK_REQUEUED, 2, requeued);
	ask(m, fr, ASK_DEAD, 2, dead);
	ask(m, fr, ASK_STATS, 2, stats);
	ask(m, fr, ASK_OWNERS, 2, owners);
	if (--fr->outstanding == 0)
		figures_publish(fr);
}

/* A "name:value" line of an INFO reply, or -1. */
static int64_t
info_field(const char *info, const char *name)
{
	size_t n = strlen(name);

	for (const char *p = info; p != NULL; p = strchr(p, '\n')) {
		p += *p == '\n';
		if (strncmp(p, name, n) == 0 && p[n] == ':')
			return strtoll(p + n + 1, NULL, 10);
	}
	return -1;
}

static void
on_info(struct master *m, redisReply *rep, void *priv)
{
	struct metrics *mt = m->metrics;
	(void)priv;

	mt->pending--;
	if (rep == NULL || rep->type != REDIS_REPLY_STRING)
		return;
	mt->used_memory = info_field(rep->str, "used_memory");
	mt->maxmemory = info_field(rep->str, "maxmemory");
	mt->memory_ms = util_monotonic_ms();
}

/* Every second: lengths and counters of each queue, INFO memory. A slow
 * Redis gets no new round before the last one is answered. */
static void
refresh_cb(struct ev_loop *loop, ev_timer *t, int revents)
{
	struct master *m = ev_userdata(loop);
	const char *info[] = { "INFO", "memory" };
	(void)t;
	(void)revents;

	if (!master_redis_up(m) || m->metrics->pending > 0)
		return;
	m->metrics->pending++;
	if (master_redis_command(m, NULL, on_info, NULL, 2, info) == -1)
		m->metrics->pending--;
	for (struct master_queue *mq = m->queues; mq != NULL; mq = mq->next)
		if (!mq->removed)
			figures_queue(m, mq->cfg.name);
}

void
metrics_start(struct master *m)
{
	m->metrics = xcalloc(1, sizeof(*m->metrics));
	ev_timer_init(&m->metrics->timer, refresh_cb, METRICS_REFRESH_S,
	    METRICS_REFRESH_S);
	ev_timer_start(m->loop, &m->metrics->timer);
}

void
metrics_stop(struct master *m)
{
	struct metrics *mt = m->metrics;

	if (mt == NULL)
		return;
	ev_timer_stop(m->loop, &mt->timer);
	while (mt->figures != NULL) {
		struct figures_entry *e = mt->figures;
		mt->figures = e->next;
		free(e);
	}
	free(mt);
	m->metrics = NULL;
}

/* What this host knows of a queue right now. */
struct queue_now {
	struct metrics_totals sum;   /* dead processes + live ones */
	int running;                 /* worker processes alive */
	int64_t oldest_batch_ms;     /* age of the oldest batch in hand */
	int in_state[SB_STATES];     /* live workers by scoreboard state */
};

static void
queue_now(struct master *m, struct master_queue *mq, struct queue_now *q)
{
	int64_t now = util_monotonic_ms();

	memset(q, 0, sizeof(*q));
	q->sum = mq->totals;
	for (struct master_worker *w = mq->workers; w != NULL; w = w->next) {
		if (w->pid == 0 || w->sb_index == -1)
			continue;
		struct scoreboard_slot *slot = scoreboard_slot(&m->sb, w->sb_index);
		int64_t started = atomic_load(&slot->batch_start_ms);
		metrics_totals_add_slot(&q->sum, slot);
		q->running++;
		int state = atomic_load(&slot->state);
		if (state >= 0 && state < SB_STATES)
			q->in_state[state]++;
		if (started != 0 && now - started > q->oldest_batch_ms)
			q->oldest_batch_ms = now - started;
	}
}

static const char *
phase_name(enum master_phase phase)
{
	return phase == MASTER_RUNNING ? "running" :
	    phase == MASTER_STOPPING ? "stopping" : "quitting";
}

static void
status_master(struct master *m, struct control_out *o)
{
	const struct metrics *mt = m->metrics;
	int64_t now = util_monotonic_ms();

	control_out_printf(o, "ferryd version=%s pid=%d id=", PACKAGE_VERSION,
	    (int)getpid());
	control_out_quoted(o, m->master_id);
	control_out_printf(o, " uptime_s=%lld phase=%s quiet=%s config=",
	    (long long)(now - m->started_ms) / 1000, phase_name(m->phase),
	    atomic_load(&m->sb.header->quiet) ? "yes" : "no");
	control_out_quoted(o, m->cfg->path);
	control_out_printf(o, "\nredis up=%s", master_redis_up(m) ? "yes" :
	    "no");
	if (mt->memory_ms != 0)
		control_out_printf(o, " used_memory=%lld maxmemory=%lld age_ms=%lld",
		    (long long)mt->used_memory, (long long)mt->maxmemory,
		    (long long)(now - mt->memory_ms));
	control_out_printf(o, "\n");
}

static void
status_queue(struct master *m, struct master_queue *mq, struct control_out *o)
{
	const struct metrics_figures *f = figures_of(m,
	    mq->cfg.name);
	struct queue_now q;

	queue_now(m, mq, &q);
	control_out_printf(o, "queue name=%s target=%d workers=%d paused=%s",
	    mq->cfg.name, mq->target, q.running, mq->paused ? "yes" : "no");
	if (f == NULL) {
		control_out_printf(o, " redis_figures=none\n");
		return;
	}
	control_out_printf(o, " ready=%lld requeued=%lld processing=%lld "
	    "delayed=%lld "
	    "dead=%lld done=%lld retried=%lld deadlettered=%lld recovered=%lld "
	    "cache_missing=%lld age_ms=%lld\n", (long long)f->ready,
	    (long long)f->requeued,
	    (long long)f->processing, (long long)f->delayed, (long long)f->dead,
	    (long long)f->done, (long long)f->retried,
	    (long long)f->deadlettered, (long long)f->recovered,
	    (long long)f->cache_missing,
	    (long long)(util_monotonic_ms() - f->updated_ms));
}

static void
status_worker(struct master *m, struct master_worker *w, int64_t now,
    struct control_out *o)
{
	const char *state = w->fatal ? "fatal" : "restarting";
	int64_t started = 0, jobs = 0;
	char err[SCOREBOARD_ERROR_MAX] = "";

	if (w->pid != 0 && w->sb_index != -1) {
		struct scoreboard_slot *slot = scoreboard_slot(&m->sb, w->sb_index);
		state = scoreboard_state_name(atomic_load(&slot->state));
		started = atomic_load(&slot->batch_start_ms);
		jobs = atomic_load(&slot->jobs_done);
		scoreboard_get_error(slot, err, sizeof(err));
	}
	control_out_printf(o, "worker queue=%s number=%d pid=%d state=%s "
	    "retiring=%s batch_age_ms=%lld jobs_done=%lld restarts=%d "
	    "last_error=", w->queue->cfg.name, w->number, (int)w->pid, state,
	    w->retiring ? "yes" : "no",
	    (long long)(started != 0 ? now - started : 0), (long long)jobs,
	    w->restarts);
	control_out_quoted(o, err);
	control_out_printf(o, "\n");
}

void
metrics_status(struct master *m, struct control_out *o)
{
	int64_t now = util_monotonic_ms();

	status_master(m, o);
	for (struct master_queue *mq = m->queues; mq != NULL; mq = mq->next)
		if (!mq->removed)
			status_queue(m, mq, o);
	for (struct master_queue *mq = m->queues; mq != NULL; mq = mq->next)
		for (struct master_worker *w = mq->workers; w != NULL; w = w->next)
			status_worker(m, w, now, o);
}

static void
family(struct control_out *o, const char *name, const char *type,
    const char *help)
{
	control_out_printf(o, "# HELP %s %s\n# TYPE %s %s\n", name, help, name,
	    type);
}

/* Families read from Redis: lengths and the stats hash, all hosts. */
static const struct {
	const char *name, *type, *help;
	size_t off;
} redis_families[] = {
	{ "ferry_jobs_enqueued_total", "counter", "Producers' jobs a worker "
	    "took from the ready list, whoever pushed them (those still waiting "
	    "are ferry_queue_ready).", offsetof(struct metrics_figures, enqueued) },
	{ "ferry_jobs_done_total", "counter", "Jobs handled successfully, by "
	    "every host (the queue's stats hash).",
	    offsetof(struct metrics_figures, done) },
	{ "ferry_jobs_retried_total", "counter", "Jobs scheduled for another "
	    "attempt.", offsetof(struct metrics_figures, retried) },
	{ "ferry_jobs_dead_total", "counter", "Jobs moved to the dead-letter "
	    "list.", offsetof(struct metrics_figures, deadlettered) },
	{ "ferry_jobs_recovered_total", "counter", "Jobs handed back after "
	    "their worker or host died.",
	    offsetof(struct metrics_figures, recovered) },
	{ "ferry_jobs_cache_missing_total", "counter", "Jobs dead-lettered "
	    "because their cache key had expired or been evicted.",
	    offsetof(struct metrics_figures, cache_missing) },
	{ "ferry_queue_ready", "gauge", "Jobs waiting in the ready list.",
	    offsetof(struct metrics_figures, ready) },
	{ "ferry_queue_requeued", "gauge", "Jobs ferry put back (recovered, "
	    "retried, replayed), taken before the ready list.",
	    offsetof(struct metrics_figures, requeued) },
	{ "ferry_queue_processing", "gauge", "Jobs held in processing lists, "
	    "on every host.", offsetof(struct metrics_figures, processing) },
	{ "ferry_queue_delayed", "gauge", "Jobs waiting for their retry time.",
	    offsetof(struct metrics_figures, delayed) },
	{ "ferry_queue_dead", "gauge", "Entries in the dead-letter list.",
	    offsetof(struct metrics_figures, dead) },
};

static void
prom_redis(struct master *m, struct control_out *o)
{
	int64_t now = util_monotonic_ms();

	for (size_t i = 0; i < FERRY_ARRAY_LEN(redis_families); i++) {
		family(o, redis_families[i].name, redis_families[i].type,
		    redis_families[i].help);
		for (struct master_queue *mq = m->queues; mq; mq = mq->next) {
			const struct metrics_figures *f = figures_of(m,
			    mq->cfg.name);
			if (f == NULL || mq->removed)
				continue;
			int64_t v = *(const int64_t *)(const void *)
			    ((const char *)f + redis_families[i].off);
			control_out_printf(o, "%s{queue=\"%s\"} %lld\n",
			    redis_families[i].name, mq->cfg.name, (long long)v);
		}
	}
	family(o, "ferry_queue_figures_age_seconds", "gauge", "Age of the "
	    "Redis figures above (refreshed every second).");
	for (struct master_queue *mq = m->queues; mq; mq = mq->next) {
		const struct metrics_figures *f = figures_of(m,
		    mq->cfg.name);
		if (f != NULL && !mq->removed)
			control_out_printf(o, "ferry_queue_figures_age_seconds"
			    "{queue=\"%s\"} %.3f\n", mq->cfg.name,
			    (double)(now - f->updated_ms) / 1000.);
	}
}

static void
prom_memory(struct master *m, struct control_out *o)
{
	const struct metrics *mt = m->metrics;

	family(o, "ferry_redis_up", "gauge", "1 when the master's Redis "
	    "connection is up.");
	control_out_printf(o, "ferry_redis_up %d\n", master_redis_up(m));
	family(o, "ferry_redis_used_memory_bytes", "gauge", "Redis used_memory "
	    "(INFO memory).");
	if (mt->memory_ms != 0 && mt->used_memory >= 0)
		control_out_printf(o, "ferry_redis_used_memory_bytes %lld\n",
		    (long long)mt->used_memory);
	family(o, "ferry_redis_maxmemory_bytes", "gauge", "Redis maxmemory "
	    "(0: no limit).");
	if (mt->memory_ms != 0 && mt->maxmemory >= 0)
		control_out_printf(o, "ferry_redis_maxmemory_bytes %lld\n",
		    (long long)mt->maxmemory);
}

/* Families of this host's workers, one line per queue. */
static void
prom_workers(struct master *m, struct control_out *o, const struct
    queue_now *qs)
{
	static const char *const names[] = {
		"ferry_workers", "ferry_workers_target", "ferry_queue_paused",
		"ferry_worker_restarts_total", "ferry_worker_jobs_done_total",
		"ferry_worker_batch_age_seconds", "ferry_redis_errors_total",
	};
	static const char *const types[] = {
		"gauge", "gauge", "gauge", "counter", "counter", "gauge", "counter",
	};
	static const char *const helps[] = {
		"Worker processes of this ferryd running.",
		"Worker processes wanted (config, TTIN/TTOU, workers command).",
		"1 while the queue is paused by the control socket.",
		"Worker processes restarted after they exited.",
		"Jobs settled by this ferryd's workers.",
		"Age of the oldest batch this ferryd's workers hold (0: none).",
		"Redis errors this ferryd's workers met (lost connection, failed "
		    "script).",
	};

	for (size_t i = 0; i < FERRY_ARRAY_LEN(names); i++) {
		family(o, names[i], types[i], helps[i]);
		int k = 0;
		for (struct master_queue *mq = m->queues; mq; mq = mq->next, k++) {
			const struct queue_now *q = &qs[k];
			double v[] = { q->running, mq->target, mq->paused,
			    (double)q->sum.restarts, (double)q->sum.jobs_done,
			    (double)q->oldest_batch_ms / 1000.,
			    (double)q->sum.errors[SB_ERR_REDIS] };
			if (!mq->removed)
				control_out_printf(o, "%s{queue=\"%s\"} %.15g\n",
				    names[i], mq->cfg.name, v[i]);
		}
	}
}

static void
prom_errors(struct master *m, struct control_out *o, const struct
    queue_now *qs)
{
	static const int classes[] = {
		SB_ERR_POSTGRES, SB_ERR_SCHEMA, SB_ERR_HANDLER, SB_ERR_OTHER,
	};
	int k = 0;

	family(o, "ferry_sink_errors_total", "counter", "Errors writing jobs "
	    "out, by class: postgres (server failing or unreachable), schema "
	    "(table or columns missing), handler (exec handler failed), other.");
	for (struct master_queue *mq = m->queues; mq; mq = mq->next, k++)
		for (size_t c = 0; c < FERRY_ARRAY_LEN(classes) && !mq->removed;
		    c++)
			control_out_printf(o, "ferry_sink_errors_total{queue=\"%s\","
			    "class=\"%s\"} %lld\n", mq->cfg.name,
			    scoreboard_error_class_name(classes[c]),
			    (long long)qs[k].sum.errors[classes[c]]);
}

/* Workers holding back for an outage, by what they wait for. */
static void
prom_waiting(struct master *m, struct control_out *o, const struct
    queue_now *qs)
{
	static const int states[] = {
		SB_WAIT_POSTGRES, SB_WAIT_REDIS, SB_WAIT_REPLICAS,
	};
	static const char *const what[] = { "postgres", "redis", "replicas" };
	int k = 0;

	family(o, "ferry_workers_waiting", "gauge", "Worker processes waiting "
	    "for postgres (a sink outage), redis (unreachable, loading, not the "
	    "primary) or replicas (redis_wait_replicas).");
	for (struct master_queue *mq = m->queues; mq; mq = mq->next, k++)
		for (size_t i = 0; i < FERRY_ARRAY_LEN(states) && !mq->removed; i++)
			control_out_printf(o, "ferry_workers_waiting{queue=\"%s\","
			    "for=\"%s\"} %d\n", mq->cfg.name, what[i],
			    qs[k].in_state[states[i]]);
}

static void
prom_histogram(struct master *m, struct control_out *o, const struct
    queue_now *qs)
{
	const char *name = "ferry_batch_duration_seconds";
	int k = 0;

	family(o, name, "histogram", "Time from fetching a batch to settling "
	    "it, for this ferryd's workers.");
	for (struct master_queue *mq = m->queues; mq; mq = mq->next, k++) {
		const struct metrics_totals *t = &qs[k].sum;
		int64_t cumulative = 0;
		if (mq->removed)
			continue;
		for (int b = 0; b < SCOREBOARD_BUCKETS; b++) {
			cumulative += t->buckets[b];
			if (b < SCOREBOARD_BUCKETS - 1)
				control_out_printf(o, "%s_bucket{queue=\"%s\",le=\"%g\"} "
				    "%lld\n", name, mq->cfg.name,
				    (double)scoreboard_bucket_ms[b] / 1000.,
				    (long long)cumulative);
			else
				control_out_printf(o, "%s_bucket{queue=\"%s\",le=\"+Inf\"} "
				    "%lld\n", name, mq->cfg.name, (long long)cumulative);
		}
		control_out_printf(o, "%s_sum{queue=\"%s\"} %.3f\n%s_count"
		    "{queue=\"%s\"} %lld\n", name, mq->cfg.name,
		    (double)t->batch_sum_ms / 1000., name, mq->cfg.name,
		    (long long)t->batches);
	}
}

/* Queue names need no escaping in labels: the config allows only
 * letters, digits, '_', '-' and '.'. */
void
metrics_prometheus(struct master *m, struct control_out *o)
{
	int n = 0, k = 0;

	for (struct master_queue *mq = m->queues; mq != NULL; mq = mq->next)
		n++;
	struct queue_now *qs = xcalloc((size_t)n + 1, sizeof(*qs));
	for (struct master_queue *mq = m->queues; mq != NULL; mq = mq->next)
		queue_now(m, mq, &qs[k++]);
	prom_redis(m, o);
	prom_memory(m, o);
	prom_workers(m, o, qs);
	prom_errors(m, o, qs);
	prom_waiting(m, o, qs);
	prom_histogram(m, o, qs);
	free(qs);
}
