/* ctl_wait.c - ferryctl enqueue --wait: after the push, wait until each job
 * is done (its rows committed) or dead, or the time is up, by reading the
 * scores of the jobs' ids in the queue's ids set (doc/formats.md, "Waiting
 * for jobs"). Nothing is written and no worker does anything for a wait:
 * the scores are the whole state, so a connection lost meanwhile (Redis
 * restarted, a Sentinel failover) is made up by the next read. The reasons
 * of the dead ones come from their entries in the dead-letter list. */
#include "ctl.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dead_entry.h"
#include "util.h"

#define WAIT_CALL 1000          /* ids a ZMSCORE; entries a LRANGE */
#define WAIT_PAUSE_FIRST_MS 10  /* within WAIT_QUICK_MS of an outcome */
#define WAIT_QUICK_MS 1000      /* (or of the start) */
#define WAIT_PAUSE_MAX_MS 250   /* then 1.5 times the last pause, up to this */
#define WAIT_FULL_ROUND_MS 2000 /* a round that reads every pending id */

enum wait_state { WAIT_PENDING, WAIT_DONE, WAIT_DEAD, WAIT_PURGED,
	WAIT_UNKNOWN };

struct wait_job {
	const char *id;
	enum wait_state state;
	char *reason;           /* a dead one's, malloc'd */
};

struct waiter {
	struct ctl *c;
	const struct queue_config *q;
	struct queue_keys k;
	struct wait_job *jobs;
	size_t n;
	size_t *pending;        /* indexes into jobs, in push order */
	size_t npending;
	bool cut;               /* the connection failed: said once */
};

static void
pause_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/* A score as the ids set holds it: [0, 1) pending, -1 dead, T >= 1
 * done, -T < -1 dead then purged; no member: unknown. */
static enum wait_state
state_of(const redisReply *score)
{
	if (score->type != REDIS_REPLY_STRING)
		return WAIT_UNKNOWN;
	double v = strtod(score->str, NULL);
	return v >= 0 && v < 1 ? WAIT_PENDING : v == -1 ? WAIT_DEAD : v >= 1 ?
	    WAIT_DONE : WAIT_PURGED;
}

/* The connection failed: say so once per outage, connect again. */
static void
reconnect(struct waiter *w)
{
	if (!w->cut)
		fprintf(stderr, "ferryctl: redis at %s: reading the jobs' outcomes "
		    "failed: %s; still waiting (nothing is lost: the outcomes "
		    "are kept in Redis)\n", w->c->addr, w->c->rc != NULL &&
		    w->c->rc->errstr[0] != '\0' ? w->c->rc->errstr :
		    "no connection");
	w->cut = true;
	if (w->c->rc != NULL) {
		redisFree(w->c->rc);
		w->c->rc = NULL;
	}
	(void)ctl_redis_for(w->c, w->q->name);
}

/* Read the scores of pending[from, from + n); the number of outcomes seen,
 * or -1 when the connection failed. */
static long
read_scores(struct waiter *w, size_t from, size_t n)
{
	const char **argv = xmalloc((n + 2) * sizeof(*argv));
	redisReply *r = NULL;
	long seen = 0;

	argv[0] = "ZMSCORE";
	argv[1] = w->k.ids;
	for (size_t i = 0; i < n; i++)
		argv[i + 2] = w->jobs[w->pending[from + i]].id;
	if (w->c->rc != NULL)
		r = redisCommandArgv(w->c->rc, (int)n + 2, argv, NULL);
	free(argv);
	if (r == NULL || r->type != REDIS_REPLY_ARRAY || r->elements != n) {
		if (r != NULL && r->type == REDIS_REPLY_ERROR && !w->cut)
			fprintf(stderr, "ferryctl: redis at %s: ZMSCORE %s: %s\n",
			    w->c->addr, w->k.ids, r->str);
		if (r != NULL)
			freeReplyObject(r);
		return -1;
	}
	w->cut = false;
	for (size_t i = 0; i < n; i++) {
		struct wait_job *j = &w->jobs[w->pending[from + i]];
		j->state = state_of(r->element[i]);
		seen += j->state != WAIT_PENDING;
	}
	freeReplyObject(r);
	return seen;
}

/* One round: the pending ids in calls of WAIT_CALL, oldest first; unless
 * `full`, it stops at the first call that saw no outcome (jobs are mostly
 * done in the order they were pushed). The outcomes seen, or -1. */
static long
round_of(struct waiter *w, bool full)
{
	long seen = 0;
	size_t kept = 0, i;

	for (i = 0; i < w->npending; i += WAIT_CALL) {
		size_t n = w->npending - i < WAIT_CALL ? w->npending - i :
		    WAIT_CALL;
		long got = read_scores(w, i, n);
		if (got < 0) {
			reconnect(w);
			seen = -1;
			break;
		}
		seen += got;
		if (got == 0 && !full)
			break;
	}
	for (i = 0; i < w->npending; i++)
		if (w->jobs[w->pending[i]].state == WAIT_PENDING)
			w->pending[kept++] = w->pending[i];
	w->npending = kept;
	return seen;
}

static const struct wait_job *sort_jobs;   /* for qsort and bsearch */

static int
by_id(const void *a, const void *b)
{
	return strcmp(sort_jobs[*(const size_t *)a].id,
	    sort_jobs[*(const size_t *)b].id);
}

static int
id_is(const void *key, const void *elem)
{
	return strcmp(key, sort_jobs[*(const size_t *)elem].id);
}

/* A reason on one line: control characters as spaces. */
static char *
one_line(char *s)
{
	for (char *p = s; p != NULL && *p != '\0'; p++)
		if ((unsigned char)*p < 0x20)
			*p = ' ';
	return s;
}

/* "REASON: LAST_ERROR" of an entry (the reason alone when it has no
 * error, or the error is the reason), on one line; malloc'd. */
static char *
reason_of(const struct dead_entry *d)
{
	if (!d->ok)
		return xstrdup(DEAD_ENTRY_MALFORMED);
	char *reason = wrapper_str_text(d->w.reason);
	char *error = wrapper_str_text(d->w.last_error);
	if (reason == NULL)
		reason = xstrdup("");
	if (error != NULL && strcmp(error, reason) != 0) {
		char *both = xmalloc(strlen(reason) + strlen(error) + 3);
		sprintf(both, "%s: %s", reason, error);
		free(reason);
		reason = both;
	}
	free(error);
	return one_line(reason);
}

/* The reasons of the dead jobs, from the dead-letter list, newest first. */
static void
read_reasons(struct waiter *w)
{
	size_t *dead = xmalloc(w->n * sizeof(*dead)), ndead = 0, missing;
	char id[JOB_ID_MAX + 1];

	for (size_t i = 0; i < w->n; i++)
		if (w->jobs[i].state == WAIT_DEAD)
			dead[ndead++] = i;
	sort_jobs = w->jobs;
	qsort(dead, ndead, sizeof(*dead), by_id);
	missing = ndead;
	for (long start = 0; missing > 0 && w->c->rc != NULL;
	    start += WAIT_CALL) {
		redisReply *r = redisCommand(w->c->rc, "LRANGE %s %ld %ld",
		    w->k.dead, start, start + WAIT_CALL - 1);
		if (r == NULL || r->type != REDIS_REPLY_ARRAY ||
		    r->elements == 0) {
			if (r != NULL)
				freeReplyObject(r);
			break;
		}
		for (size_t e = 0; e < r->elements; e++) {
			const redisReply *el = r->element[e];
			struct dead_entry d;
			size_t *at;
			if (el->type != REDIS_REPLY_STRING)
				continue;
			dead_entry_read(&d, el->str, el->len);
			dead_entry_id(d.ok ? &d.w : NULL, el->str, el->len,
			    w->q->max_job_bytes, id);
			at = bsearch(id, dead, ndead, sizeof(*dead), id_is);
			if (at != NULL && w->jobs[*at].reason == NULL) {
				w->jobs[*at].reason = reason_of(&d);
				missing--;
			}
			dead_entry_free(&d);
		}
		freeReplyObject(r);
	}
	free(dead);
}

static void
report(const struct waiter *w, bool quiet, int64_t started)
{
	size_t count[WAIT_UNKNOWN + 1] = { 0 };

	for (size_t i = 0; i < w->n; i++) {
		const struct wait_job *j = &w->jobs[i];
		count[j->state]++;
		if (quiet)
			continue;
		if (j->state == WAIT_DEAD)
			printf("%s dead %s\n", j->id, j->reason != NULL ? j->reason :
			    "(its dead entry is gone: purged or archived)");
		else
			printf("%s %s\n", j->id, j->state == WAIT_DONE ? "done" :
			    j->state == WAIT_PURGED ? "dead (its entry was purged "
			    "or archived since)" : j->state == WAIT_PENDING ?
			    "pending" : "unknown");
	}
	fprintf(stderr, "ferryctl: queue %s: %zu done, %zu dead, %zu pending, "
	    "%zu unknown after %.1f s\n", w->q->name, count[WAIT_DONE],
	    count[WAIT_DEAD] + count[WAIT_PURGED], count[WAIT_PENDING],
	    count[WAIT_UNKNOWN], (double)(util_monotonic_ms() - started) / 1000);
	if (count[WAIT_UNKNOWN] > 0)
		fprintf(stderr, "ferryctl: %zu job%s unknown to queue %s: not in "
		    "%s (lost with a Redis that failed before a replica had "
		    "them, or forgotten idempotency_window after they were "
		    "done): enqueue %s again with the same ids, which is safe\n",
		    count[WAIT_UNKNOWN], count[WAIT_UNKNOWN] == 1 ? " is" : "s are",
		    w->q->name, w->k.ids, count[WAIT_UNKNOWN] == 1 ? "it" : "them");
}

int
ctl_wait(struct ctl *c, const struct queue_config *q,
    const char *const *ids, size_t n, long long timeout_ms, bool quiet)
{
	struct waiter w = { .c = c, .q = q, .n = n };
	int64_t started = util_monotonic_ms(), last_full = started;
	int64_t last_outcome = started;
	long pause = WAIT_PAUSE_FIRST_MS;
	int rc = CTL_EX_OK;

	queue_keys_init(&w.k, c->cfg->redis_prefix, q->name);
	w.jobs = xcalloc(n + 1, sizeof(*w.jobs));
	w.pending = xmalloc((n + 1) * sizeof(*w.pending));
	for (size_t i = 0; i < n; i++) {
		w.jobs[i].id = ids[i];
		w.pending[w.npending++] = i;
	}
	for (bool first = true; w.npending > 0; first = false) {
		int64_t now = util_monotonic_ms();
		bool full = first || now - last_full >= WAIT_FULL_ROUND_MS;
		if (full)
			last_full = now;
		long seen = round_of(&w, full);
		if (w.npending == 0)
			break;
		now = util_monotonic_ms();
		if (timeout_ms >= 0 && now >= started + timeout_ms)
			break;
		if (seen > 0)
			last_outcome = now;
		pause = now - last_outcome < WAIT_QUICK_MS ? WAIT_PAUSE_FIRST_MS :
		    pause * 3 / 2 > WAIT_PAUSE_MAX_MS ? WAIT_PAUSE_MAX_MS :
		    pause * 3 / 2;
		if (timeout_ms >= 0 && now + pause > started + timeout_ms)
			pause = (long)(started + timeout_ms - now);
		pause_ms(pause);
	}
	read_reasons(&w);
	report(&w, quiet, started);
	for (size_t i = 0; i < n; i++) {
		if (w.jobs[i].state == WAIT_PENDING ||
		    w.jobs[i].state == WAIT_UNKNOWN)
			rc = CTL_EX_PENDING;
		else if (w.jobs[i].state != WAIT_DONE && rc == CTL_EX_OK)
			rc = CTL_EX_DEAD;
		free(w.jobs[i].reason);
	}
	free(w.jobs);
	free(w.pending);
	return rc;
}
