/* metrics_text.c - `status` (logfmt lines) and `metrics` (Prometheus text
 * format 0.0.4) written from a view of the master (metrics.h), its
 * scoreboard (this host's live workers, plus the totals of their dead
 * predecessors) and the last Redis figures of metrics.c. */
#include "metrics.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util.h"

/* What this host knows of a queue right now. */
struct queue_now {
	struct scoreboard_totals sum;   /* dead processes + live ones */
	int running;                 /* worker processes alive */
	int64_t oldest_batch_ms;     /* age of the oldest batch in hand */
	int in_state[SB_STATES];     /* live workers by scoreboard state */
};

static void
queue_now(const struct metrics_view *v, const struct metrics_queue_view *mq,
    struct queue_now *q)
{
	int64_t now = util_monotonic_ms();

	memset(q, 0, sizeof(*q));
	q->sum = mq->totals;
	for (int i = 0; i < mq->nworkers; i++) {
		const struct metrics_worker_view *w = &mq->workers[i];
		if (w->pid == 0 || w->sb_index == -1)
			continue;
		struct scoreboard_slot *slot = scoreboard_slot(v->sb, w->sb_index);
		int64_t started = atomic_load(&slot->batch_start_ms);
		scoreboard_totals_add_slot(&q->sum, slot);
		q->running++;
		int state = atomic_load(&slot->state);
		if (state >= 0 && state < SB_STATES)
			q->in_state[state]++;
		if (started != 0 && now - started > q->oldest_batch_ms)
			q->oldest_batch_ms = now - started;
	}
}

static void
status_master(const struct metrics *mt, const struct metrics_view *v,
    struct buf *o)
{
	int64_t now = util_monotonic_ms(), used, maxmemory, memory_ms;

	buf_printf(o, "ferryd version=%s pid=%d id=", PACKAGE_VERSION,
	    (int)getpid());
	buf_quoted(o, v->master_id);
	buf_printf(o, " uptime_s=%lld phase=%s quiet=%s config=",
	    (long long)(now - v->started_ms) / 1000, v->phase,
	    atomic_load(&v->sb->header->quiet) ? "yes" : "no");
	buf_quoted(o, v->config_path);
	buf_printf(o, "\nredis up=%s", v->redis_up ? "yes" : "no");
	metrics_memory(mt, &used, &maxmemory, &memory_ms);
	if (memory_ms != 0)
		buf_printf(o, " used_memory=%lld maxmemory=%lld age_ms=%lld",
		    (long long)used, (long long)maxmemory,
		    (long long)(now - memory_ms));
	int64_t unevictable, evicted;
	metrics_eviction(mt, &unevictable, &evicted);
	if (unevictable >= 0)
		buf_printf(o, " unevictable=%lld evicted_keys=%lld",
		    (long long)unevictable, (long long)evicted);
	buf_printf(o, "\n");
}

static void
status_queue(const struct metrics *mt, const struct metrics_view *v,
    const struct metrics_queue_view *mq, struct buf *o)
{
	const struct metrics_figures *f = metrics_figures_of(mt, mq->name);
	struct queue_now q;

	queue_now(v, mq, &q);
	buf_printf(o, "queue name=%s target=%d workers=%d paused=%s",
	    mq->name, mq->target, q.running, mq->paused ? "yes" : "no");
	if (f == NULL) {
		buf_printf(o, " redis_figures=none\n");
		return;
	}
	buf_printf(o, " ready=%lld requeued=%lld processing=%lld "
	    "delayed=%lld scheduled=%lld "
	    "dead=%lld done=%lld retried=%lld deadlettered=%lld recovered=%lld "
	    "cache_missing=%lld bytes=%lld protected_keys=%lld "
	    "protected_bytes=%lld orphans=%lld protected_lost=%lld "
	    "refusing=%s oldest_ready_age_ms=%lld age_ms=%lld\n",
	    (long long)f->ready,
	    (long long)f->requeued,
	    (long long)f->processing, (long long)f->delayed,
	    (long long)f->scheduled, (long long)f->dead,
	    (long long)f->done, (long long)f->retried,
	    (long long)f->deadlettered, (long long)f->recovered,
	    (long long)f->cache_missing, (long long)f->bytes,
	    (long long)f->protected_keys, (long long)f->protected_bytes,
	    (long long)f->orphans, (long long)f->protected_lost,
	    f->refusing ? "yes" : "no", (long long)metrics_oldest_ready_ms(f),
	    (long long)(util_monotonic_ms() - f->updated_ms));
}

static void
status_worker(const struct metrics_view *v,
    const struct metrics_worker_view *w, int64_t now, struct buf *o)
{
	const char *state = w->fatal ? "fatal" : "restarting";
	int64_t started = 0, jobs = 0;
	char err[SCOREBOARD_ERROR_MAX] = "";

	if (w->sb_index != -1) {
		struct scoreboard_slot *slot = scoreboard_slot(v->sb, w->sb_index);
		/* a fatal or restarting worker's slot keeps why it stopped */
		scoreboard_get_error(slot, err, sizeof(err));
		if (w->pid != 0) {
			state = scoreboard_state_name(atomic_load(&slot->state));
			started = atomic_load(&slot->batch_start_ms);
			jobs = atomic_load(&slot->jobs_done);
		}
	}
	buf_printf(o, "worker queue=%s number=%d pid=%d state=%s "
	    "retiring=%s batch_age_ms=%lld jobs_done=%lld restarts=%d "
	    "last_error=", w->queue, w->number, (int)w->pid, state,
	    w->retiring ? "yes" : "no",
	    (long long)(started != 0 ? now - started : 0), (long long)jobs,
	    w->restarts);
	buf_quoted(o, err);
	buf_printf(o, "\n");
}

void
metrics_status(const struct metrics *mt, const struct metrics_view *v,
    struct buf *o)
{
	int64_t now = util_monotonic_ms();

	status_master(mt, v, o);
	for (int k = 0; k < v->nqueues; k++)
		if (!v->queues[k].removed)
			status_queue(mt, v, &v->queues[k], o);
	for (int k = 0; k < v->nqueues; k++)
		for (int i = 0; i < v->queues[k].nworkers; i++)
			status_worker(v, &v->queues[k].workers[i], now, o);
}

static void
family(struct buf *o, const char *name, const char *type,
    const char *help)
{
	buf_printf(o, "# HELP %s %s\n# TYPE %s %s\n", name, help, name,
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
	{ "ferry_queue_scheduled", "gauge", "Producers' delayed jobs waiting "
	    "for their due time (enqueue --delay/--at).",
	    offsetof(struct metrics_figures, scheduled) },
	{ "ferry_queue_dead", "gauge", "Entries in the dead-letter list.",
	    offsetof(struct metrics_figures, dead) },
	{ "ferry_queue_bytes", "gauge", "Bytes the queue holds in Redis: its "
	    "lists, sets and hashes and its protected cache keys (what the "
	    "producers' refusal counts as the queue's own).",
	    offsetof(struct metrics_figures, bytes) },
	{ "ferry_cache_protected_keys", "gauge", "Cache keys that live jobs "
	    "name, protected (no TTL) until the last of them is done or "
	    "purged.", offsetof(struct metrics_figures, protected_keys) },
	{ "ferry_cache_protected_bytes", "gauge", "Bytes of the protected "
	    "cache keys.", offsetof(struct metrics_figures, protected_bytes) },
	{ "ferry_cache_orphans_total", "counter", "Keys of the queue's cache "
	    "space that no live job named, given the cache TTL by the sweep.",
	    offsetof(struct metrics_figures, orphans) },
	{ "ferry_cache_reprotected_total", "counter", "Protected cache keys "
	    "found with a TTL again (written by the application with EX or "
	    "PX) and made persistent again.",
	    offsetof(struct metrics_figures, reprotected) },
	{ "ferry_cache_protected_lost_total", "counter", "Protected cache "
	    "keys found gone (FLUSHDB, a DEL by hand, an allkeys-* policy set "
	    "at run time); should stay 0.",
	    offsetof(struct metrics_figures, protected_lost) },
	{ "ferry_queue_refusing", "gauge", "1 while the queue's producers are "
	    "refused: what Redis cannot evict is at memory_refuse_percent of "
	    "maxmemory.", offsetof(struct metrics_figures, refusing) },
};

/* A family in seconds of every queue's figures: their age, or that of
 * the oldest job in ready. */
static void
prom_ages(const struct metrics *mt, const struct metrics_view *v,
    struct buf *o, const char *name, const char *help, bool oldest)
{
	int64_t now = util_monotonic_ms();

	family(o, name, "gauge", help);
	for (int k = 0; k < v->nqueues; k++) {
		const struct metrics_queue_view *mq = &v->queues[k];
		const struct metrics_figures *f = metrics_figures_of(mt,
		    mq->name);
		if (f != NULL && !mq->removed)
			buf_printf(o, "%s{queue=\"%s\"} %.3f\n", name, mq->name,
			    (double)(oldest ? metrics_oldest_ready_ms(f) :
			    now - f->updated_ms) / 1000.);
	}
}

static void
prom_redis(const struct metrics *mt, const struct metrics_view *v,
    struct buf *o)
{
	for (size_t i = 0; i < FERRY_ARRAY_LEN(redis_families); i++) {
		family(o, redis_families[i].name, redis_families[i].type,
		    redis_families[i].help);
		for (int k = 0; k < v->nqueues; k++) {
			const struct metrics_queue_view *mq = &v->queues[k];
			const struct metrics_figures *f = metrics_figures_of(mt,
			    mq->name);
			if (f == NULL || mq->removed)
				continue;
			int64_t n = *(const int64_t *)(const void *)
			    ((const char *)f + redis_families[i].off);
			buf_printf(o, "%s{queue=\"%s\"} %lld\n",
			    redis_families[i].name, mq->name, (long long)n);
		}
	}
	prom_ages(mt, v, o, "ferry_queue_figures_age_seconds", "Age of the "
	    "Redis figures above (refreshed every second).", false);
	prom_ages(mt, v, o, "ferry_queue_oldest_ready_age_seconds", "Age of "
	    "the oldest job waiting in the ready list (0: empty), dated by the "
	    "refresh that first saw it (at most an hour back, and not before "
	    "this ferryd started: an older job shows as that old).", true);
}

static const struct {
	const char *name, *help;
} marks[] = {
	{ "ferry_redis_memory_warn_ratio", "memory_warn_percent / 100: the "
	    "master warns at this unevictable / maxmemory." },
	{ "ferry_redis_memory_refuse_ratio", "memory_refuse_percent / 100: "
	    "enqueue refuses at this unevictable / maxmemory." },
	{ "ferry_heartbeat_ttl_seconds", "heartbeat_ttl: other masters reap "
	    "this one's jobs once Redis has had no heartbeat of it for this "
	    "long." },
};

static void
prom_memory(const struct metrics *mt, const struct metrics_view *v,
    struct buf *o)
{
	int64_t used, maxmemory, memory_ms;

	metrics_memory(mt, &used, &maxmemory, &memory_ms);
	family(o, "ferry_redis_up", "gauge", "1 when the master's Redis "
	    "connection is up.");
	buf_printf(o, "ferry_redis_up %d\n", v->redis_up);
	family(o, "ferry_redis_used_memory_bytes", "gauge", "Redis used_memory "
	    "(INFO memory).");
	if (memory_ms != 0 && used >= 0)
		buf_printf(o, "ferry_redis_used_memory_bytes %lld\n",
		    (long long)used);
	family(o, "ferry_redis_maxmemory_bytes", "gauge", "Redis maxmemory "
	    "(0: no limit).");
	if (memory_ms != 0 && maxmemory >= 0)
		buf_printf(o, "ferry_redis_maxmemory_bytes %lld\n",
		    (long long)maxmemory);
	int64_t unevictable, evicted;
	metrics_eviction(mt, &unevictable, &evicted);
	family(o, "ferry_redis_unevictable_bytes", "gauge", "What Redis cannot "
	    "evict: under a volatile-* policy used_memory less an estimate of "
	    "the keys with a TTL; else used_memory. The producers' refusal "
	    "compares it with maxmemory.");
	if (unevictable >= 0)
		buf_printf(o, "ferry_redis_unevictable_bytes %lld\n",
		    (long long)unevictable);
	family(o, "ferry_redis_evicted_keys_total", "counter", "Keys Redis "
	    "evicted (INFO stats evicted_keys): the cache at work; compare "
	    "ferry_cache_protected_lost_total, which should stay 0.");
	if (evicted >= 0)
		buf_printf(o, "ferry_redis_evicted_keys_total %lld\n",
		    (long long)evicted);
	/* the configured marks, for alert rules to compare with */
	for (size_t i = 0; i < FERRY_ARRAY_LEN(marks); i++) {
		double val[] = { v->memory_warn_percent / 100.,
		    v->memory_refuse_percent / 100.,
		    (double)v->heartbeat_ttl_ms / 1000. };
		family(o, marks[i].name, "gauge", marks[i].help);
		buf_printf(o, "%s %.15g\n", marks[i].name, val[i]);
	}
}

/* Families of this host's workers, one line per queue. */
static void
prom_workers(const struct metrics_view *v, struct buf *o,
    const struct queue_now *qs)
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
		for (int k = 0; k < v->nqueues; k++) {
			const struct metrics_queue_view *mq = &v->queues[k];
			const struct queue_now *q = &qs[k];
			double val[] = { q->running, mq->target, mq->paused,
			    (double)q->sum.restarts, (double)q->sum.jobs_done,
			    (double)q->oldest_batch_ms / 1000.,
			    (double)q->sum.errors[SB_ERR_REDIS] };
			if (!mq->removed)
				buf_printf(o, "%s{queue=\"%s\"} %.15g\n",
				    names[i], mq->name, val[i]);
		}
	}
}

static void
prom_errors(const struct metrics_view *v, struct buf *o,
    const struct queue_now *qs)
{
	static const int classes[] = {
		SB_ERR_POSTGRES, SB_ERR_SCHEMA, SB_ERR_HANDLER, SB_ERR_OTHER,
	};

	family(o, "ferry_sink_errors_total", "counter", "Errors writing jobs "
	    "out, by class: postgres (server failing or unreachable), schema "
	    "(table or columns missing), handler (exec handler could not start, "
	    "crashed, timed out or printed nonsense, leaving jobs without a "
	    "result: not jobs it answered fail), other.");
	for (int k = 0; k < v->nqueues; k++)
		for (size_t c = 0; c < FERRY_ARRAY_LEN(classes) &&
		    !v->queues[k].removed; c++)
			buf_printf(o, "ferry_sink_errors_total{queue=\"%s\","
			    "class=\"%s\"} %lld\n", v->queues[k].name,
			    scoreboard_error_class_name(classes[c]),
			    (long long)qs[k].sum.errors[classes[c]]);
}

/* Workers holding back for an outage, by what they wait for. */
static void
prom_waiting(const struct metrics_view *v, struct buf *o,
    const struct queue_now *qs)
{
	static const int states[] = {
		SB_WAIT_POSTGRES, SB_WAIT_REDIS, SB_WAIT_REPLICAS,
	};
	static const char *const what[] = { "postgres", "redis", "replicas" };

	family(o, "ferry_workers_waiting", "gauge", "Worker processes waiting "
	    "for postgres (a sink outage), redis (unreachable, loading, not the "
	    "primary) or replicas (redis_wait_replicas).");
	for (int k = 0; k < v->nqueues; k++)
		for (size_t i = 0; i < FERRY_ARRAY_LEN(states) &&
		    !v->queues[k].removed; i++)
			buf_printf(o, "ferry_workers_waiting{queue=\"%s\","
			    "for=\"%s\"} %d\n", v->queues[k].name, what[i],
			    qs[k].in_state[states[i]]);
}

static void
prom_histogram(const struct metrics_view *v, struct buf *o,
    const struct queue_now *qs)
{
	const char *name = "ferry_batch_duration_seconds";

	family(o, name, "histogram", "Time from fetching a batch to settling "
	    "it, for this ferryd's workers.");
	for (int k = 0; k < v->nqueues; k++) {
		const struct metrics_queue_view *mq = &v->queues[k];
		const struct scoreboard_totals *t = &qs[k].sum;
		int64_t cumulative = 0;
		if (mq->removed)
			continue;
		for (int b = 0; b < SCOREBOARD_BUCKETS; b++) {
			cumulative += t->buckets[b];
			if (b < SCOREBOARD_BUCKETS - 1)
				buf_printf(o, "%s_bucket{queue=\"%s\",le=\"%g\"} "
				    "%lld\n", name, mq->name,
				    (double)scoreboard_bucket_ms[b] / 1000.,
				    (long long)cumulative);
			else
				buf_printf(o, "%s_bucket{queue=\"%s\",le=\"+Inf\"} "
				    "%lld\n", name, mq->name, (long long)cumulative);
		}
		buf_printf(o, "%s_sum{queue=\"%s\"} %.3f\n%s_count"
		    "{queue=\"%s\"} %lld\n", name, mq->name,
		    (double)t->batch_sum_ms / 1000., name, mq->name,
		    (long long)t->batches);
	}
}

/* Queue names need no escaping in labels: the config allows only
 * letters, digits, '_', '-' and '.'. */
void
metrics_prometheus(const struct metrics *mt, const struct metrics_view *v,
    struct buf *o)
{
	struct queue_now *qs = xcalloc((size_t)v->nqueues + 1, sizeof(*qs));

	for (int k = 0; k < v->nqueues; k++)
		queue_now(v, &v->queues[k], &qs[k]);
	prom_redis(mt, v, o);
	prom_memory(mt, v, o);
	prom_workers(v, o, qs);
	prom_errors(v, o, qs);
	prom_waiting(v, o, qs);
	prom_histogram(v, o, qs);
	free(qs);
}
