/* master_control.c - the control socket's commands (src/format/control_commands.c
 * lists them; control.c reads them off the socket): status, metrics,
 * reload, pause, resume, workers, help, each an answer written into a
 * buffer; and the view of the master that metrics.c and metrics_text.c
 * write `status` and `metrics` from. */
#include "master_control.h"

#include <stdlib.h>
#include <string.h>

#include "control_commands.h"
#include "log.h"
#include "master_int.h"
#include "master_redis.h"
#include "metrics.h"
#include "util.h"

static const char *
phase_name(enum master_phase phase)
{
	return phase == MASTER_RUNNING ? "running" :
	    phase == MASTER_STOPPING ? "stopping" : "quitting";
}

static void
view_queue(struct master_queue *mq, struct metrics_queue_view *q)
{
	int n = 0;

	for (struct master_worker *w = mq->workers; w != NULL; w = w->next)
		n++;
	*q = (struct metrics_queue_view){
		.name = mq->cfg.name, .target = mq->target, .paused = mq->paused,
		.removed = mq->removed, .totals = mq->totals, .nworkers = n,
		.workers = xcalloc((size_t)n + 1, sizeof(*q->workers)),
	};
	n = 0;
	for (struct master_worker *w = mq->workers; w != NULL; w = w->next)
		q->workers[n++] = (struct metrics_worker_view){
			.queue = mq->cfg.name, .number = w->number, .pid = w->pid,
			.sb_index = w->sb_index, .retiring = w->retiring,
			.fatal = w->fatal, .restarts = w->restarts,
		};
}

void
master_control_view(struct master *m, struct metrics_view *v)
{
	int n = 0;

	for (struct master_queue *mq = m->queues; mq != NULL; mq = mq->next)
		n++;
	*v = (struct metrics_view){
		.master_id = m->master_id, .config_path = m->cfg->path,
		.redis_prefix = m->cfg->redis_prefix,
		.phase = phase_name(m->phase), .started_ms = m->started_ms,
		.redis_up = master_redis_up(m), .sb = &m->sb, .nqueues = n,
		.memory_warn_percent = m->cfg->memory_warn_percent,
		.memory_refuse_percent = m->cfg->memory_refuse_percent,
		.heartbeat_ttl_ms = m->cfg->heartbeat_ttl_ms,
		.queues = xcalloc((size_t)n + 1, sizeof(*v->queues)),
	};
	n = 0;
	for (struct master_queue *mq = m->queues; mq != NULL; mq = mq->next)
		view_queue(mq, &v->queues[n++]);
}

const struct ferry_config *
master_control_config(const struct master *m)
{
	return m->cfg;
}

struct ev_loop *
master_control_loop(const struct master *m)
{
	return m->loop;
}

const struct metrics *
master_control_figures(const struct master *m)
{
	return m->metrics;
}

void
master_control_metrics(struct master *m, struct buf *o)
{
	struct metrics_view v;

	master_control_view(m, &v);
	metrics_prometheus(m->metrics, &v, o);
	metrics_view_free(&v);
}

static void
cmd_reload(struct master *m, char **argv, struct buf *o)
{
	struct config_errors errs = { 0, NULL };
	(void)argv;

	if (m->phase != MASTER_RUNNING) {
		buf_printf(o, "error: ferryd is stopping\n");
		return;
	}
	log_notice("control: reload");
	if (master_reload(m, &errs) == 0) {
		buf_printf(o, "reloaded %s\nok\n", m->cfg->path);
		return;
	}
	master_reload_log_errors(m->cfg->path, &errs);
	buf_printf(o, "error: reload: %s has %d error%s; still running the "
	    "previous configuration\n", m->cfg->path, errs.n,
	    errs.n == 1 ? "" : "s");
	for (int i = 0; i < errs.n; i++)
		buf_printf(o, "%s\n", errs.msgs[i]);
	config_errors_free(&errs);
}

static void
set_paused(struct master *m, struct master_queue *mq, bool paused)
{
	mq->paused = paused;
	for (struct master_worker *w = mq->workers; w != NULL; w = w->next)
		if (w->sb_index != -1)
			atomic_store(&scoreboard_slot(&m->sb, w->sb_index)->paused,
			    paused);
}

static void
cmd_pause(struct master *m, char **argv, struct buf *o)
{
	bool pause = strcmp(argv[0], "pause") == 0;
	struct master_queue *mq = master_find_queue(m, argv[1]);

	if (mq == NULL) {
		buf_printf(o, "error: unknown queue %s\n", argv[1]);
		return;
	}
	if (mq->paused == pause) {
		buf_printf(o, "queue %s was already %s\nok\n", argv[1],
		    pause ? "paused" : "running");
		return;
	}
	set_paused(m, mq, pause);
	log_notice(pause ? "queue %s: paused (control socket): its workers "
	    "finish their batch and stop fetching" : "queue %s: resumed "
	    "(control socket): its workers fetch jobs again", argv[1]);
	buf_printf(o, pause ? "queue %s paused: its workers finish "
	    "their batch and stop fetching\nok\n" : "queue %s resumed\nok\n",
	    argv[1]);
}

static void
cmd_workers(struct master *m, char **argv, struct buf *o)
{
	struct master_queue *mq = master_find_queue(m, argv[1]);
	char *end;
	long n = strtol(argv[2], &end, 10);

	if (mq == NULL) {
		buf_printf(o, "error: unknown queue %s\n", argv[1]);
		return;
	}
	if (*argv[2] == '\0' || *end != '\0' || n < 0 ||
	    n > CONFIG_MAX_WORKERS) {
		buf_printf(o, "error: workers: \"%s\" is not a number in "
		    "0..%d\n", argv[2], CONFIG_MAX_WORKERS);
		return;
	}
	if (m->phase != MASTER_RUNNING) {
		buf_printf(o, "error: ferryd is stopping\n");
		return;
	}
	int old = mq->target;
	mq->target = (int)n;
	log_notice("queue %s: workers %d -> %ld (control socket)", argv[1], old,
	    n);
	master_reconcile(m, mq);
	buf_printf(o, "queue %s: workers %d -> %ld\nok\n", argv[1], old, n);
}

static void
cmd_status(struct master *m, char **argv, struct buf *o)
{
	struct metrics_view v;
	(void)argv;

	master_control_view(m, &v);
	metrics_status(m->metrics, &v, o);
	metrics_view_free(&v);
	buf_printf(o, "ok\n");
}

static void
cmd_metrics(struct master *m, char **argv, struct buf *o)
{
	(void)argv;
	master_control_metrics(m, o);
	buf_printf(o, "ok\n");
}

static void
cmd_help(struct master *m, char **argv, struct buf *o)
{
	(void)m;
	(void)argv;
	for (int i = 0; i < CONTROL_NCOMMANDS; i++)
		buf_printf(o, "%s\n", control_commands[i].usage);
	buf_printf(o, "ok\n");
}

/* What serves each command of src/control_commands.c. */
static void (*const handlers[CONTROL_NCOMMANDS])(struct master *, char **,
    struct buf *) = {
	[CONTROL_STATUS] = cmd_status,
	[CONTROL_METRICS] = cmd_metrics,
	[CONTROL_RELOAD] = cmd_reload,
	[CONTROL_PAUSE] = cmd_pause,
	[CONTROL_RESUME] = cmd_pause,
	[CONTROL_WORKERS] = cmd_workers,
	[CONTROL_HELP] = cmd_help,
};

void
master_control_run(struct master *m, int command, char **argv,
    struct buf *o)
{
	handlers[command](m, argv, o);
}
