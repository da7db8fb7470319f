/* master_reload.c - SIGHUP or `reload`: read the file once into a fresh
 * config; if it has any error, hand them all back (the caller logs or
 * answers them) and keep running on the old one. Otherwise apply it:
 * new queues start, removed queues retire, a queue whose settings changed
 * gets fresh workers first and only then are the old ones told to finish,
 * so it never runs below its old worker count. */
#include <stdlib.h>
#include <string.h>

#include "config_pg.h"
#include "log.h"
#include "master_events.h"
#include "master_int.h"
#include "master_notify.h"
#include "util.h"

static void
warn_static(const char *key, const char *old_value, const char *new_value)
{
	log_warn("reload: [ferryd] %s changed from \"%s\" to \"%s\"; this key is "
	    "read only at start: restart ferryd to apply it", key, old_value,
	    new_value);
}

/* Replace every running worker of mq: start the new ones, then retire the
 * old ones (they finish their batch). */
static void
replace_workers(struct master *m, struct master_queue *mq,
    const struct queue_config *qc)
{
	struct master_worker *old[CONFIG_MAX_WORKERS * 2];
	int n = 0;

	for (struct master_worker *w = mq->workers; w != NULL; w = w->next) {
		if (!w->retiring && n < (int)FERRY_ARRAY_LEN(old)) {
			w->retiring = true;     /* no longer counted by reconcile */
			old[n++] = w;
		}
	}
	log_notice("reload: queue %s changed: replacing its %d workers",
	    qc->name, n);
	master_queue_set_config(mq, qc);
	master_reconcile(m, mq);
	for (int i = 0; i < n; i++)
		master_retire(m, old[i]);
}

static void
apply_queue(struct master *m, const struct ferry_config *old,
    const struct ferry_config *fresh, const struct queue_config *qc)
{
	struct master_queue *mq = master_find_queue(m, qc->name);

	if (mq == NULL) {
		log_notice("reload: new queue %s with %d workers", qc->name,
		    qc->workers);
		master_reconcile(m, master_queue_new(m, qc));
		return;
	}
	if (config_queue_changed(&mq->cfg, qc) ||
	    config_queue_sink_changed(old, &mq->cfg, fresh, qc)) {
		replace_workers(m, mq, qc);
		return;
	}
	if (mq->target != qc->workers)
		log_notice("reload: queue %s: workers %d -> %d", qc->name,
		    mq->target, qc->workers);
	master_queue_set_config(mq, qc);
	master_reconcile(m, mq);
}

static void
retire_removed(struct master *m, const struct ferry_config *fresh)
{
	struct master_queue *mq = m->queues, *next;

	for (; mq != NULL; mq = next) {
		next = mq->next;
		if (mq->removed || config_find_queue(fresh, mq->cfg.name) != NULL)
			continue;
		log_notice("reload: queue %s removed: stopping its workers",
		    mq->cfg.name);
		mq->removed = true;
		mq->target = 0;
		master_reconcile(m, mq);   /* may free mq */
	}
}

/* Workers marked fatal wait for a reload: start them again. */
static void
restart_fatal(struct master *m)
{
	for (struct master_queue *mq = m->queues; mq != NULL; mq = mq->next) {
		for (struct master_worker *w = mq->workers, *next; w != NULL;
		    w = next) {
			next = w->next;
			if (w->fatal) {
				w->fatal = false;
				master_retire(m, w);    /* frees the position */
			}
		}
		master_reconcile(m, mq);
	}
}

void
master_reload_log_errors(const char *path, const struct config_errors *errs)
{
	master_event("reload", "reload refused: %s has %d error%s", path,
	    errs->n, errs->n == 1 ? "" : "s");
	log_error("reload: %s has %d error%s; still running the previous "
	    "configuration", path, errs->n, errs->n == 1 ? "" : "s");
	for (int i = 0; i < errs->n; i++)
		log_error("reload: %s", errs->msgs[i]);
}

int
master_reload(struct master *m, struct config_errors *errs)
{
	struct ferry_config *fresh = xcalloc(1, sizeof(*fresh));
	const char *path = m->cfg->path;

	log_notice("reload: reading %s", path);
	master_notify_reloading(m);
	if (config_load(path, fresh, errs) == -1) {
		free(fresh);
		master_notify_reloaded(m);      /* the old one still runs */
		return -1;
	}
	config_keep_static(m->cfg, fresh, warn_static);
	if (strcmp(fresh->log, m->cfg->log) != 0 &&
	    log_open(fresh->log, fresh->log_level) == -1) {
		log_error("reload: cannot open log %s; keeping %s", fresh->log,
		    m->cfg->log);
		free(fresh->log);
		fresh->log = xstrdup(m->cfg->log);
	}
	log_set_level(fresh->log_level);
	/* every worker forked from here on (spawn gives it m->cfg beside its
	 * queue's) gets the fresh file whole: its [table] sections too */
	struct ferry_config *old = m->cfg;
	m->cfg = fresh;
	retire_removed(m, fresh);
	for (int i = 0; i < fresh->nqueues; i++)
		apply_queue(m, old, fresh, &fresh->queues[i]);
	restart_fatal(m);
	config_free(old);       /* path was the old config's: freed */
	free(old);
	log_notice("reload: done");
	master_event("reload", "reloaded %s", m->cfg->path);
	master_notify_reloaded(m);
	return 0;
}
