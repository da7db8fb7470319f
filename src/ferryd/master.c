/* master.c - the supervisor: keeps each queue's workers alive, restarts the
 * dead ones with crash-loop backoff, kills hung ones, recycles bloated ones,
 * and turns signals into actions.
 *
 * NOTES on the process model
 * The master forks every worker from its libev loop and never runs a job.
 * One ev_child watcher (pid 0) reaps every child; libev's default loop owns
 * SIGCHLD, so nothing else may call waitpid(). Signal handlers only queue
 * events (ev_signal); the loop acts on them.
 * A queue has a `target` (its config's `workers`, moved by TTIN/TTOU) and a
 * list of worker positions. master_reconcile() adds positions or retires the
 * highest ones until the live count matches the target. A position outlives
 * its processes: when one dies, the position is restarted at once, or after
 * a doubling delay when it keeps dying within restart_backoff_reset.
 * A retiring worker has been sent SIGTERM: it finishes its batch and exits,
 * and its position is then freed. Stopping (TERM) retires everything and
 * waits up to shutdown_timeout before SIGKILL; QUIT kills at once. */
#include "master_int.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backoff.h"
#include "control.h"
#include "metrics.h"
#include "master_events.h"
#include "master_series.h"
#include "master_ids.h"
#include "master_notify.h"
#include "master_sweep.h"
#include "log.h"
#include "master_control.h"
#include "master_memory.h"
#include "master_redis.h"
#include "master_sentinel.h"
#include "proctitle.h"
#include "util.h"
#include "worker.h"

#define MASTER_TICK_S 0.2
#define MASTER_RSS_EVERY 5      /* ticks between RSS checks */

static void spawn(struct master *m, struct master_worker *w);

struct master_queue *
master_queue_new(struct master *m, const struct queue_config *qc)
{
	struct master_queue *mq = xcalloc(1, sizeof(*mq));
	struct master_queue **tail = &m->queues;

	config_queue_copy(&mq->cfg, qc);
	mq->target = qc->workers;
	while (*tail != NULL)
		tail = &(*tail)->next;
	*tail = mq;
	return mq;
}

void
master_queue_set_config(struct master_queue *mq, const struct queue_config *qc)
{
	config_queue_free(&mq->cfg);
	config_queue_copy(&mq->cfg, qc);
	mq->target = qc->workers;
}

static void
queue_free(struct master *m, struct master_queue *mq)
{
	for (struct master_queue **p = &m->queues; *p != NULL; p = &(*p)->next) {
		if (*p == mq) {
			*p = mq->next;
			break;
		}
	}
	config_queue_free(&mq->cfg);
	free(mq);
}

struct master_queue *
master_find_queue(struct master *m, const char *name)
{
	for (struct master_queue *mq = m->queues; mq != NULL; mq = mq->next)
		if (!mq->removed && strcmp(mq->cfg.name, name) == 0)
			return mq;
	return NULL;
}

int
master_live_workers(const struct master_queue *mq)
{
	int n = 0;
	for (const struct master_worker *w = mq->workers; w != NULL; w = w->next)
		if (!w->retiring)
			n++;
	return n;
}

static int
free_number(const struct master_queue *mq)
{
	for (int n = 1;; n++) {
		const struct master_worker *w = mq->workers;
		while (w != NULL && (w->retiring || w->number != n))
			w = w->next;
		if (w == NULL)
			return n;
	}
}

static void
restart_cb(struct ev_loop *loop, ev_timer *t, int revents)
{
	struct master_worker *w = t->data;

	(void)revents;
	w->fatal = false;
	spawn(ev_userdata(loop), w);
}

static struct master_worker *
worker_new(struct master *m, struct master_queue *mq)
{
	struct master_worker *w = xcalloc(1, sizeof(*w));
	struct master_worker **tail = &mq->workers;

	w->queue = mq;
	w->number = free_number(mq);
	w->sb_index = -1;
	ev_timer_init(&w->restart_timer, restart_cb, 0., 0.);
	w->restart_timer.data = w;
	while (*tail != NULL)
		tail = &(*tail)->next;
	*tail = w;
	(void)m;
	return w;
}

static void
worker_free(struct master *m, struct master_worker *w)
{
	struct master_queue *mq = w->queue;

	ev_timer_stop(m->loop, &w->restart_timer);
	if (w->sb_index != -1)
		scoreboard_release(&m->sb, w->sb_index);
	for (struct master_worker **p = &mq->workers; *p != NULL; p = &(*p)->next) {
		if (*p == w) {
			*p = w->next;
			break;
		}
	}
	free(w);
	if (mq->removed && mq->workers == NULL)
		queue_free(m, mq);
}

static void
spawn(struct master *m, struct master_worker *w)
{
	struct master_queue *mq = w->queue;

	if (m->phase != MASTER_RUNNING)
		return;
	if (w->sb_index != -1)
		scoreboard_release(&m->sb, w->sb_index);
	w->sb_index = scoreboard_acquire(&m->sb);
	if (w->sb_index == -1) {
		log_error("queue %s: cannot start worker %d: all %d scoreboard "
		    "slots are taken; lower the worker counts", mq->cfg.name,
		    w->number, MASTER_SCOREBOARD_SLOTS);
		return;
	}
	atomic_store(&scoreboard_slot(&m->sb, w->sb_index)->paused, mq->paused);
	pid_t master_pid = getpid();
	sigset_t all, saved;
	/* a signal sent to the new worker before it has replaced libev's
	 * inherited handlers would be lost: keep them pending until then */
	sigfillset(&all);
	sigprocmask(SIG_SETMASK, &all, &saved);
	pid_t pid = fork();
	if (pid != 0)
		sigprocmask(SIG_SETMASK, &saved, NULL);
	if (pid == -1) {
		log_error("queue %s: cannot fork worker %d: %s (retrying in 1 s)",
		    mq->cfg.name, w->number, strerror(errno));
		ev_timer_set(&w->restart_timer, 1., 0.);
		ev_timer_start(m->loop, &w->restart_timer);
		return;
	}
	if (pid == 0) {
		/* systemd's socket and watchdog are the master's alone (a
		 * handler program must not speak for the service) */
		unsetenv("NOTIFY_SOCKET");
		unsetenv("WATCHDOG_USEC");
		unsetenv("WATCHDOG_PID");
		struct worker_args args = {
			.cfg = m->cfg, .queue = &mq->cfg, .sb = &m->sb,
			.sb_index = w->sb_index, .number = w->number,
			.master_pid = master_pid, .master_id = m->master_id,
		};
		worker_main(&args);
	}
	w->pid = pid;
	w->started_ms = util_monotonic_ms();
	w->term_sent_ms = 0;
	atomic_store(&scoreboard_slot(&m->sb, w->sb_index)->pid, pid);
	log_info("queue %s: started worker %d (pid %d)", mq->cfg.name, w->number,
	    (int)pid);
}

void
master_retire(struct master *m, struct master_worker *w)
{
	w->retiring = true;
	if (w->pid == 0) {
		worker_free(m, w);
		return;
	}
	kill(w->pid, SIGTERM);
}

void
master_reconcile(struct master *m, struct master_queue *mq)
{
	if (m->phase != MASTER_RUNNING)
		return;
	int live = master_live_workers(mq);
	while (live < mq->target) {
		spawn(m, worker_new(m, mq));
		live++;
	}
	while (live > mq->target) {
		struct master_worker *last = NULL;
		for (struct master_worker *w = mq->workers; w != NULL; w = w->next)
			if (!w->retiring && (last == NULL || w->number > last->number))
				last = w;
		master_retire(m, last);
		live--;
	}
}

static struct master_worker *
find_worker(struct master *m, pid_t pid)
{
	for (struct master_queue *mq = m->queues; mq != NULL; mq = mq->next)
		for (struct master_worker *w = mq->workers; w != NULL; w = w->next)
			if (w->pid == pid)
				return w;
	return NULL;
}

static int
running_workers(struct master *m)
{
	int n = 0;
	for (struct master_queue *mq = m->queues; mq != NULL; mq = mq->next)
		for (struct master_worker *w = mq->workers; w != NULL; w = w->next)
			if (w->pid != 0)
				n++;
	return n;
}

static void
describe_status(int status, char *buf, size_t size)
{
	if (WIFEXITED(status))
		snprintf(buf, size, "exited with status %d", WEXITSTATUS(status));
	else if (WIFSIGNALED(status))
		snprintf(buf, size, "was killed by signal %d (SIG%s)",
		    WTERMSIG(status), sigabbrev_np(WTERMSIG(status)) ?
		    sigabbrev_np(WTERMSIG(status)) : "?");
	else
		snprintf(buf, size, "ended with wait status %d", status);
}

/* A worker's process ended: free its position, or restart it. */
static void
worker_died(struct master *m, struct master_worker *w, int status)
{
	struct master_queue *mq = w->queue;
	const struct ferry_config *cfg = m->cfg;
	int64_t now = util_monotonic_ms();
	pid_t pid = w->pid;
	char what[96];

	describe_status(status, what, sizeof(what));
	if (!w->retiring && m->phase == MASTER_RUNNING &&
	    !(WIFEXITED(status) && WEXITSTATUS(status) == FERRY_EXIT_OK))
		master_event("worker", "queue %s: worker %d (pid %d) %s",
		    mq->cfg.name, w->number, (int)pid, what);
	w->pid = 0;
	/* its processing lists: two when it said so (pipeline), before it
	 * registered the second; and those it was working on (busy) */
	int lanes = 1, busy = 1;
	if (w->sb_index != -1) {  /* its slot goes to the next process */
		struct scoreboard_slot *slot = scoreboard_slot(&m->sb, w->sb_index);
		scoreboard_totals_add_slot(&mq->totals, slot);
		lanes = atomic_load(&slot->lanes);
		busy = atomic_load(&slot->lanes_busy);
		atomic_store(&slot->lanes, 0);
		atomic_store(&slot->lanes_busy, 0);
	}
	/* a recovery is counted only when the worker died on its own: not
	 * for a clean or fatal exit, nor when we killed it to stop */
	master_redis_reclaim(m, &mq->cfg, pid, lanes, busy, !m->killing &&
	    !(WIFEXITED(status) && (WEXITSTATUS(status) == FERRY_EXIT_OK ||
	    WEXITSTATUS(status) == FERRY_EXIT_FATAL)));
	if (w->retiring || m->phase != MASTER_RUNNING) {
		log_info("queue %s: worker %d (pid %d) %s; stopped", mq->cfg.name,
		    w->number, (int)pid, what);
		worker_free(m, w);
		return;
	}
	if (WIFEXITED(status) && WEXITSTATUS(status) == FERRY_EXIT_FATAL) {
		/* what it found (credentials refused, commits not safe) may be
		 * fixed without telling ferryd: try again after the longest
		 * backoff, at once on a reload */
		log_error("queue %s: worker %d (pid %d) exited with fatal code %d; "
		    "it is started again in %.1f s, or at a reload (SIGHUP) once "
		    "the cause is fixed", mq->cfg.name, w->number, (int)pid,
		    FERRY_EXIT_FATAL, (double)cfg->restart_backoff_max_ms / 1000.);
		w->fatal = true;
		w->restarts++;
		mq->totals.restarts++;
		ev_timer_set(&w->restart_timer,
		    (double)cfg->restart_backoff_max_ms / 1000., 0.);
		ev_timer_start(m->loop, &w->restart_timer);
		return;
	}
	bool clean = WIFEXITED(status) && WEXITSTATUS(status) == FERRY_EXIT_OK;
	if (clean || w->term_sent_ms != 0 ||
	    now - w->started_ms >= cfg->restart_backoff_reset_ms)
		w->streak = 0;
	long delay = backoff_restart_delay(w->streak, cfg->restart_backoff_min_ms,
	    cfg->restart_backoff_max_ms);
	w->streak++;
	w->restarts++;
	mq->totals.restarts++;
	log_msg(clean ? LOG_LEVEL_INFO : LOG_LEVEL_WARN,
	    "queue %s: worker %d (pid %d) %s after %.1f s; restart %d in %ld ms",
	    mq->cfg.name, w->number, (int)pid, what,
	    (double)(now - w->started_ms) / 1000., w->restarts, delay);
	if (delay == 0) {
		spawn(m, w);
	} else {
		ev_timer_set(&w->restart_timer, (double)delay / 1000., 0.);
		ev_timer_start(m->loop, &w->restart_timer);
	}
}

static void
child_cb(struct ev_loop *loop, ev_child *c, int revents)
{
	struct master *m = c->data;
	struct master_worker *w = find_worker(m, c->rpid);
	(void)revents;

	if (w != NULL)
		worker_died(m, w, c->rstatus);
	if (m->phase != MASTER_RUNNING && running_workers(m) == 0)
		ev_break(loop, EVBREAK_ALL);
}

static void
signal_all(struct master *m, int sig)
{
	for (struct master_queue *mq = m->queues; mq != NULL; mq = mq->next)
		for (struct master_worker *w = mq->workers; w != NULL; w = w->next)
			if (w->pid != 0)
				kill(w->pid, sig);
}

static void
stop_restarts(struct master *m)
{
	for (struct master_queue *mq = m->queues; mq != NULL; mq = mq->next)
		for (struct master_worker *w = mq->workers; w != NULL; w = w->next)
			ev_timer_stop(m->loop, &w->restart_timer);
}

static void
begin_stop(struct master *m, enum master_phase phase)
{
	int n = running_workers(m);

	if (m->phase == MASTER_QUITTING ||
	    (m->phase == MASTER_STOPPING && phase == MASTER_STOPPING))
		return;
	m->phase = phase;
	stop_restarts(m);
	m->http.stopping(m->http.server);
	master_notify_stopping(m);
	if (phase == MASTER_STOPPING) {
		m->stop_deadline_ms = util_monotonic_ms() +
		    m->cfg->shutdown_timeout_ms;
		log_notice("graceful stop: waiting up to %ld s for %d workers to "
		    "finish their batch", m->cfg->shutdown_timeout_ms / 1000, n);
		signal_all(m, SIGTERM);
	} else {
		log_notice("fast stop: killing %d workers; their jobs go back to "
		    "the queue", n);
		m->killing = true;
		signal_all(m, SIGKILL);
	}
	if (n == 0)
		ev_break(m->loop, EVBREAK_ALL);
}

static void
change_all_targets(struct master *m, int delta)
{
	for (struct master_queue *mq = m->queues; mq != NULL; mq = mq->next) {
		if (mq->removed)
			continue;
		int target = mq->target + delta;
		if (target < 0 || target > CONFIG_MAX_WORKERS)
			continue;
		mq->target = target;
		log_notice("queue %s: workers %d -> %d (SIG%s)", mq->cfg.name,
		    target - delta, target, delta > 0 ? "TTIN" : "TTOU");
		master_reconcile(m, mq);
	}
}

/* SIGHUP: errors of the file are logged (the old config keeps running). */
static void
reload_logged(struct master *m)
{
	struct config_errors errs = { 0, NULL };

	if (master_reload(m, &errs) == -1) {
		master_reload_log_errors(m->cfg->path, &errs);
		config_errors_free(&errs);
	}
}

static void
signal_cb(struct ev_loop *loop, ev_signal *s, int revents)
{
	struct master *m = s->data;
	(void)loop;
	(void)revents;

	switch (s->signum) {
	case SIGHUP:
		if (m->phase == MASTER_RUNNING)
			reload_logged(m);
		break;
	case SIGTERM:
	case SIGINT:
		begin_stop(m, MASTER_STOPPING);
		break;
	case SIGQUIT:
		begin_stop(m, MASTER_QUITTING);
		break;
	case SIGUSR1:
		if (log_reopen() == -1)
			log_error("cannot reopen log %s: %s", m->cfg->log,
			    strerror(errno));
		else
			log_notice("log reopened");
		signal_all(m, SIGUSR1);
		break;
	case SIGTTIN:
		change_all_targets(m, +1);
		break;
	case SIGTTOU:
		change_all_targets(m, -1);
		break;
	case SIGTSTP:
		atomic_store(&m->sb.header->quiet, 1);
		log_notice("quiet: workers stop fetching jobs (SIGCONT resumes)");
		break;
	case SIGCONT:
		if (atomic_exchange(&m->sb.header->quiet, 0))
			log_notice("resumed: workers fetch jobs again");
		break;
	}
}

static void
tick_cb(struct ev_loop *loop, ev_timer *t, int revents)
{
	struct master *m = t->data;
	static unsigned ticks;
	int64_t now = util_monotonic_ms();
	bool check_rss = ++ticks % MASTER_RSS_EVERY == 0;
	(void)loop;
	(void)revents;

	if (m->phase == MASTER_STOPPING && now >= m->stop_deadline_ms) {
		log_warn("shutdown_timeout (%ld s) passed: killing %d workers that "
		    "are still busy", m->cfg->shutdown_timeout_ms / 1000,
		    running_workers(m));
		m->phase = MASTER_QUITTING;
		m->killing = true;
		signal_all(m, SIGKILL);
		return;
	}
	for (struct master_queue *mq = m->queues; mq != NULL; mq = mq->next)
		for (struct master_worker *w = mq->workers; w != NULL; w = w->next)
			if (w->pid != 0 && w->sb_index != -1)
				master_health_check(m, w, now, check_rss);
	master_health_redis(m);
}

static const int master_signals[] = {
	SIGHUP, SIGTERM, SIGINT, SIGQUIT, SIGUSR1, SIGTTIN, SIGTTOU, SIGTSTP,
	SIGCONT,
};

void
master_signal_set(sigset_t *set)
{
	sigemptyset(set);
	for (size_t i = 0; i < FERRY_ARRAY_LEN(master_signals); i++)
		sigaddset(set, master_signals[i]);
}

static void
free_all(struct master *m)
{
	while (m->queues != NULL) {
		struct master_queue *mq = m->queues;
		while (mq->workers != NULL) {
			struct master_worker *w = mq->workers;
			mq->workers = w->next;
			free(w);
		}
		m->queues = mq->next;
		config_queue_free(&mq->cfg);
		free(mq);
	}
	scoreboard_destroy(&m->sb);
	config_free(m->cfg);
	free(m->cfg);
}

void
master_stop(struct master *m, int exit_code)
{
	m->exit_code = exit_code;
	begin_stop(m, MASTER_STOPPING);
}

int
master_run(struct ferry_config *cfg, struct control *control,
    const struct master_http *http, const struct master_ident *ident)
{
	struct master master, *m = &master;
	int workers = 0;

	memset(m, 0, sizeof(*m));
	m->cfg = cfg;
	m->control = control;
	m->http = *http;
	m->started_ms = util_monotonic_ms();
	/* nothing reads argv any more: its memory becomes the title */
	if (proctitle_init() == 0)
		proctitle_set("master");
	if (scoreboard_create(&m->sb, MASTER_SCOREBOARD_SLOTS) == -1) {
		log_error("cannot map the scoreboard: %s", strerror(errno));
		control_close(control);
		http->close(http->server);
		config_free(cfg);
		free(cfg);
		return 1;
	}
	m->loop = ev_default_loop(EVFLAG_AUTO);
	ev_set_userdata(m->loop, m);
	signal(SIGPIPE, SIG_IGN);
	for (size_t i = 0; i < FERRY_ARRAY_LEN(master_signals); i++) {
		ev_signal_init(&m->signals[i], signal_cb, master_signals[i]);
		m->signals[i].data = m;
		ev_signal_start(m->loop, &m->signals[i]);
	}
	sigset_t managed;             /* blocked by main until now */
	master_signal_set(&managed);
	sigprocmask(SIG_UNBLOCK, &managed, NULL);
	ev_child_init(&m->child, child_cb, 0, 0);
	m->child.data = m;
	ev_child_start(m->loop, &m->child);
	ev_timer_init(&m->tick, tick_cb, MASTER_TICK_S, MASTER_TICK_S);
	m->tick.data = m;
	ev_timer_start(m->loop, &m->tick);
	snprintf(m->master_id, sizeof(m->master_id), "%s", ident->id);
	snprintf(m->master_token, sizeof(m->master_token), "%s", ident->token);
	master_redis_start(m);
	master_memory_start(m);
	master_sentinel_start(m);
	m->metrics = metrics_start(m->loop, m, master_control_view);
	master_series_start(m);
	master_sweep_start(m);
	master_ids_start(m);
	control_start(m->control, m->loop, m);
	m->http.start(m->http.server, m->loop, m);

	for (int i = 0; i < cfg->nqueues; i++) {
		master_reconcile(m, master_queue_new(m, &cfg->queues[i]));
		workers += cfg->queues[i].workers;
	}
	log_notice("ferryd %s started as %s: %d queues, %d workers, config %s",
	    PACKAGE_VERSION, m->master_id, cfg->nqueues, workers, cfg->path);
	master_notify_start(m);
	ev_run(m->loop, 0);
	master_notify_stop(m);
	control_close(m->control);
	m->http.close(m->http.server);
	master_sentinel_stop(m);
	master_memory_stop(m);
	master_sweep_stop(m);
	master_ids_stop(m);
	master_redis_finish(m);
	m->http.release(m->http.server);
	master_series_stop(m);
	metrics_stop(m->metrics);
	m->metrics = NULL;
	log_notice("ferryd stopped");
	free_all(m);
	return m->exit_code;
}
