/* master_health.c - the master's look at each running worker, every
 * tick: a batch held over job_timeout (or a fetch not come back, which
 * may have moved jobs into its list), a process over max_worker_rss_mb
 * (recycled), and SIGKILL for one still there kill_grace_ms after its
 * SIGTERM; and a worker that reached Redis while the master's own
 * connection is down, which then tries again at once. */
#include <signal.h>
#include <stdio.h>
#include <unistd.h>

#include "log.h"
#include "master_int.h"
#include "master_redis.h"

/* Resident set size of a process in MiB, or -1. */
static long
rss_mb(pid_t pid)
{
	char path[64];
	long pages_total, pages_resident;

	snprintf(path, sizeof(path), "/proc/%d/statm", (int)pid);
	FILE *f = fopen(path, "r");
	if (f == NULL)
		return -1;
	int n = fscanf(f, "%ld %ld", &pages_total, &pages_resident);
	fclose(f);
	if (n != 2)
		return -1;
	return pages_resident * (sysconf(_SC_PAGESIZE) / 1024) / 1024;
}

void
master_health_check(struct master *m, struct master_worker *w, int64_t now,
    bool check_rss)
{
	const struct queue_config *q = &w->queue->cfg;
	struct scoreboard_slot *slot = scoreboard_slot(&m->sb, w->sb_index);
	int64_t started = atomic_load(&slot->batch_start_ms);

	if (w->term_sent_ms != 0) {
		if (now - w->term_sent_ms >= m->cfg->kill_grace_ms) {
			log_warn("queue %s: worker %d (pid %d) still running %ld ms "
			    "after SIGTERM: sending SIGKILL", q->name, w->number,
			    (int)w->pid, m->cfg->kill_grace_ms);
			kill(w->pid, SIGKILL);
			w->term_sent_ms = now;   /* repeat after another grace */
		}
		return;
	}
	int64_t fetching = atomic_load(&slot->fetch_start_ms);
	/* a stalled Redis holds a live worker's fetch up to its timeout */
	long fetch_limit = q->job_timeout_ms > SB_FETCH_LIMIT_MS ?
	    q->job_timeout_ms : SB_FETCH_LIMIT_MS;
	const char *what = NULL;
	char note[96] = "";
	int64_t since = 0;
	if (started != 0 && now - started > q->job_timeout_ms) {
		what = "has run its batch";
		since = started;
	} else if (fetching != 0 && now - fetching > fetch_limit) {
		/* Redis may have moved the jobs into its list already */
		what = "has not come back from a fetch";
		since = fetching;
		if (fetch_limit > q->job_timeout_ms)
			snprintf(note, sizeof(note), " (a fetch is given %.1f s: a "
			    "live worker's Redis request gives up sooner)",
			    (double)fetch_limit / 1000.);
	}
	if (what != NULL) {
		log_warn("queue %s: worker %d (pid %d) %s for %.1f s, over "
		    "job_timeout %.1f s%s: stopping it", q->name, w->number,
		    (int)w->pid, what, (double)(now - since) / 1000.,
		    (double)q->job_timeout_ms / 1000., note);
		kill(w->pid, SIGTERM);
		w->term_sent_ms = now;
		return;
	}
	long rss = check_rss && q->max_worker_rss_mb > 0 ? rss_mb(w->pid) : -1;
	if (rss > q->max_worker_rss_mb) {
		log_notice("queue %s: worker %d (pid %d) uses %ld MiB, over "
		    "max_worker_rss_mb %ld: recycling it", q->name, w->number,
		    (int)w->pid, rss, q->max_worker_rss_mb);
		kill(w->pid, SIGTERM);
		w->term_sent_ms = now;
	}
}

void
master_health_redis(struct master *m)
{
	unsigned reached = atomic_load(&m->sb.header->redis_reached);

	if (reached == m->redis_reached)
		return;
	m->redis_reached = reached;
	/* Redis answers a worker: the master's connection, down and waiting
	 * out its backoff, need not (/readyz follows it: doc/monitoring.md) */
	if (!master_redis_up(m))
		master_redis_retry_now(m);
}
