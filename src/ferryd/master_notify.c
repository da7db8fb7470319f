/* master_notify.c - systemd's service protocol on the master's loop
 * (master_notify.h), through libsystemd's sd_notify(). The watchdog pings
 * come from a timer of the same loop that supervises the workers, so a
 * master wedged anywhere stops pinging and systemd restarts it; its
 * workers' jobs are then handed back by the next master, as after any
 * master's death. */
#include "master_notify.h"

#include <ev.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-daemon.h>
#include <time.h>

#include "config.h"
#include "log.h"
#include "master_int.h"
#include "metrics.h"
#include "util.h"

static struct {
	struct master *m;
	bool on;                /* NOTIFY_SOCKET is set */
	ev_timer watchdog;      /* WATCHDOG=1 at half of WatchdogSec= */
	ev_timer status;        /* STATUS= every MASTER_NOTIFY_STATUS_S */
	int64_t done;           /* the queues' done counters last time */
	int64_t done_ms;
} notify;

/* The jobs done by every queue, from the last Redis figures, or -1. */
static int64_t
done_total(struct master *m)
{
	int64_t total = 0;

	for (struct master_queue *mq = m->queues; mq != NULL; mq = mq->next) {
		const struct metrics_figures *f = m->metrics != NULL ?
		    metrics_figures_of(m->metrics, mq->cfg.name) : NULL;
		if (f == NULL)
			return -1;
		total += f->done;
	}
	return total;
}

/* "3 queues, 6/6 workers, 1250 jobs/s, last error: ..." */
static void
status_line(struct master *m, char *out, size_t size)
{
	int queues = 0, wanted = 0, live = 0;
	char err[SCOREBOARD_ERROR_MAX] = "";
	int64_t now = util_monotonic_ms(), done = done_total(m);
	double rate = -1;

	for (struct master_queue *mq = m->queues; mq != NULL; mq = mq->next) {
		queues++;
		wanted += mq->target;
		live += master_live_workers(mq);
		for (struct master_worker *w = mq->workers; w != NULL &&
		    err[0] == '\0'; w = w->next)
			if (w->sb_index != -1)
				scoreboard_get_error(scoreboard_slot(&m->sb,
				    w->sb_index), err, sizeof(err));
	}
	if (done >= 0 && notify.done >= 0 && now > notify.done_ms &&
	    notify.done_ms != 0)
		rate = (double)(done - notify.done) * 1000. /
		    (double)(now - notify.done_ms);
	notify.done = done;
	notify.done_ms = now;
	int n = snprintf(out, size, "%d queue%s, %d/%d workers", queues,
	    queues == 1 ? "" : "s", live, wanted);
	if (rate >= 0 && n > 0 && (size_t)n < size)
		n += snprintf(out + n, size - (size_t)n, ", %.0f jobs/s", rate);
	if (err[0] != '\0' && n > 0 && (size_t)n < size)
		snprintf(out + n, size - (size_t)n, ", last error: %s", err);
	for (char *p = out; *p != '\0'; p++)
		if (*p == '\n')
			*p = ' ';
}

static void
send_status(struct master *m, const char *state)
{
	char status[SCOREBOARD_ERROR_MAX + 128];

	status_line(m, status, sizeof(status));
	sd_notifyf(0, "%sSTATUS=%s", state, status);
}

static void
status_cb(struct ev_loop *loop, ev_timer *t, int revents)
{
	(void)loop;
	(void)t;
	(void)revents;
	send_status(notify.m, "");
}

static void
watchdog_cb(struct ev_loop *loop, ev_timer *t, int revents)
{
	(void)loop;
	(void)t;
	(void)revents;
	sd_notify(0, "WATCHDOG=1");
}

void
master_notify_start(struct master *m)
{
	uint64_t usec = 0;
	const char *sock = getenv("NOTIFY_SOCKET");

	notify.m = m;
	notify.on = sock != NULL && *sock != '\0';
	notify.done = -1;
	if (!notify.on)
		return;
	send_status(m, "READY=1\n");
	ev_timer_init(&notify.status, status_cb, MASTER_NOTIFY_STATUS_S,
	    MASTER_NOTIFY_STATUS_S);
	ev_timer_start(m->loop, &notify.status);
	if (sd_watchdog_enabled(0, &usec) > 0 && usec > 0) {
		double every = (double)usec / 2e6;
		ev_timer_init(&notify.watchdog, watchdog_cb, 0., every);
		ev_timer_start(m->loop, &notify.watchdog);
		log_info("systemd watchdog: pinging every %.3f s", every);
	}
}

void
master_notify_reloading(struct master *m)
{
	struct timespec ts;

	(void)m;
	if (!notify.on)
		return;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	sd_notifyf(0, "RELOADING=1\nMONOTONIC_USEC=%" PRIu64 "\n"
	    "STATUS=reloading", (uint64_t)ts.tv_sec * 1000000u +
	    (uint64_t)ts.tv_nsec / 1000u);
}

void
master_notify_reloaded(struct master *m)
{
	if (notify.on)
		send_status(m, "READY=1\n");
}

void
master_notify_stopping(struct master *m)
{
	(void)m;
	if (notify.on)
		sd_notify(0, "STOPPING=1\nSTATUS=stopping: the workers finish "
		    "their batches");
}

void
master_notify_stop(struct master *m)
{
	if (!notify.on)
		return;
	ev_timer_stop(m->loop, &notify.status);
	ev_timer_stop(m->loop, &notify.watchdog);
}
