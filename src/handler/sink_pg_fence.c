/* sink_pg_fence.c - recovered jobs checked against the batches they may
 * have been written in (their stamps), before their batch is written
 * (doc/design.md, 4.1 and I3). The fences go in a transaction of their
 * own, committed before the batch's, so that what they found stands
 * whatever becomes of the batch (R6); the distinct stamps are fenced once
 * each, in key order, so that two workers fencing the same batches never
 * wait for each other in a cycle. */
#include "sink_pg_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

/* One stamp's batch, as its fence found it. */
struct fenced_batch {
	const char *key;
	bool committed;           /* else fenced now, or before */
	json_t *failed;           /* its record of failed jobs, or NULL */
};

static int
stamp_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int
fenced_cmp(const void *key, const void *b)
{
	return strcmp(key, ((const struct fenced_batch *)b)->key);
}

/* The distinct stamps of the jobs to check, in key order. */
static struct fenced_batch *
distinct_stamps(const struct job *jobs, int n, int *count)
{
	int total = 0, distinct = 0;

	for (int i = 0; i < n; i++)
		if (jobs[i].invalid == NULL)
			total += jobs[i].nstamps;
	const char **all = xmalloc(sizeof(*all) * (size_t)(total > 0 ? total : 1));
	total = 0;
	for (int i = 0; i < n; i++)
		for (int k = 0; k < jobs[i].nstamps && !jobs[i].invalid; k++)
			all[total++] = jobs[i].stamps[k];
	qsort(all, (size_t)total, sizeof(*all), stamp_cmp);
	struct fenced_batch *b = xcalloc((size_t)(total > 0 ? total : 1),
	    sizeof(*b));
	for (int k = 0; k < total; k++)
		if (k == 0 || strcmp(all[k - 1], all[k]) != 0)
			b[distinct++].key = all[k];
	free(all);
	*count = distinct;
	return b;
}

/* The fence of a batch still open in another session (a worker stopped
 * mid-batch: its transaction may yet commit) waits for it. Timed by the
 * batch clock, that wait would stop worker after worker until BURY_MARGIN
 * dead-lettered written jobs (doc/design.md, R7, I10). So the fences of a
 * batch wait at most half of job_timeout (and of statement_timeout, which
 * would cancel the wait) together, then the batch waits as in an outage.
 * lock_timeout is per lock: the time is shared by the distinct stamps,
 * each at least FENCE_WAIT_MIN_MS. */
#define FENCE_WAIT_MIN_MS 50

static bool
fence_wait(struct sink_pg *s, int distinct, struct pg_failure *f)
{
	long ms = s->q->job_timeout_ms / 2;
	char sql[64];

	if (s->cfg->pg_statement_timeout_ms / 2 < ms)
		ms = s->cfg->pg_statement_timeout_ms / 2;
	ms /= distinct > 0 ? distinct : 1;
	snprintf(sql, sizeof(sql), "SET LOCAL lock_timeout = %ld",
	    ms > FENCE_WAIT_MIN_MS ? ms : FENCE_WAIT_MIN_MS);
	return sink_pg_sql(s, sql, f);
}

/* Fence batch b and read what it did. */
static bool
fence_one(struct sink_pg *s, struct fenced_batch *b, struct pg_failure *f)
{
	char state[16];

	if (!pg_conn_exec(s->conn, s->batches.fence_sql, 1, b->key, NULL, f,
	    NULL)) {
		if (strcmp(f->sqlstate, "55P03") == 0)
			snprintf(f->msg, sizeof(f->msg), "55P03: batch %s "
			    "(recovered jobs may be in it) is still open in another "
			    "session (its worker's, or a frozen host's): waiting; if "
			    "it never ends, pg_blocking_pids() names it, "
			    "pg_terminate_backend() ends it", b->key);
		return false;
	}
	if (!pg_target_batches_read(s->conn, &s->batches, b->key, state,
	    sizeof(state), &b->failed, f))
		return false;
	b->committed = strcmp(state, "committed") == 0;
	return true;
}

/* Fence every batch in b[0..n), in one transaction. Whatever fails here
 * involves no job's data (a lock still held, the server gone): the batch
 * waits as in an outage and the fences go again (they are idempotent). */
static bool
fence_all(struct sink_pg *s, struct fenced_batch *b, int n,
    struct pg_failure *f)
{
	bool ok = sink_pg_sql(s, "BEGIN", f) && fence_wait(s, n, f);

	for (int k = 0; ok && k < n; k++)
		ok = fence_one(s, &b[k], f);
	if (ok)
		ok = sink_pg_sql(s, "COMMIT", f);
	if (!ok) {
		if (PQstatus(s->conn) == CONNECTION_OK)
			PQclear(PQexec(s->conn, "ROLLBACK"));
		f->cls = PG_ERR_UNAVAILABLE;
	}
	return ok;
}

/* Job j after its batches were fenced: written here only when none had
 * written it. A batch that failed it wrote nothing of it, so it goes on as
 * if that batch had not committed (a `dead retry` after the cause is fixed
 * takes effect; the job runs under the settings of now), unless it is
 * buried: then it is dead with that batch's reason. At most one stamp can
 * be committed with the job in it (doc/design.md, I3). True: write it. */
static bool
decide(const struct job *j, const struct fenced_batch *b, int nb,
    struct handler_result *res)
{
	bool failed_before = false;

	for (int k = 0; k < j->nstamps; k++) {
		const struct fenced_batch *fb = bsearch(j->stamps[k], b,
		    (size_t)nb, sizeof(*b), fenced_cmp);
		if (fb == NULL || !fb->committed)
			continue;
		/* the first batch that failed it gives the reason */
		struct handler_result r;
		bool written = sink_pg_record_result(fb->failed, fb->key,
		    (struct job *)j, &r);
		if (written || !failed_before)
			*res = r;
		if (written)
			return false;
		failed_before = true;
	}
	if (!j->bury)
		return true;
	/* buried: dead with the reason of the batch that failed it, or,
	 * never written, with its own (and now fenced everywhere) */
	if (!failed_before)
		sink_pg_set_result(res, HANDLER_FAIL, j->bury_reason != NULL ?
		    j->bury_reason : "worker died while processing");
	return false;
}

bool
sink_pg_fence(struct sink_pg *s, struct job *jobs,
    struct handler_result *res, int n, struct pg_failure *f)
{
	int nb;
	struct fenced_batch *b = distinct_stamps(jobs, n, &nb);
	bool ok = nb == 0 || fence_all(s, b, nb, f);

	for (int i = 0; ok && i < n; i++)
		s->b.enc.skip[i] = jobs[i].invalid == NULL &&
		    (jobs[i].nstamps > 0 || jobs[i].bury) &&
		    !decide(&jobs[i], b, nb, &res[i]);
	s->b.decided = ok;
	for (int k = 0; k < nb; k++)
		json_decref(b[k].failed);
	free(b);
	return ok;
}
