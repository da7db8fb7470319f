/* ctl_push.c - the one way ferryctl pushes many jobs (enqueue, dead
 * restore): in chunks of at most CTL_CHUNK jobs and CTL_CHUNK_BYTES bytes
 * (a single bigger job is a chunk of its own), each sent by the caller as
 * one atomic step (a MULTI transaction, a script), memory_refuse_percent
 * checked before each, the jobs that went in counted, and a progress line
 * on a terminal. What each chunk is and the messages about it stay with
 * the caller. */
#include <stdio.h>

#include "ctl.h"
#include "memory_check.h"

bool
ctl_push_full(const struct ctl_push *p, size_t bytes)
{
	return p->n > 0 && (p->n == CTL_CHUNK ||
	    p->bytes + bytes > CTL_CHUNK_BYTES);
}

void
ctl_push_add(struct ctl_push *p, size_t bytes)
{
	p->n++;
	p->bytes += bytes;
}

int
ctl_push_flush(struct ctl_push *p, ctl_push_send_fn *send, void *arg)
{
	long long went = 0;
	int rc;

	if (p->n == 0)
		return 0;
	if ((rc = ctl_memory_allows(p->c)) == 0 &&
	    (rc = send(arg, p->n, &went)) == 0)
		p->chunks++;
	p->done += went;
	p->n = p->bytes = 0;
	if (rc == 0 && p->progress)
		fprintf(stderr, "\rferryctl: %s %lld of %lld jobs", p->verb, p->done,
		    p->total);
	return rc;
}

void
ctl_push_end(const struct ctl_push *p)
{
	if (p->progress)
		fputc('\n', stderr);
}

static bool memory_unchecked;   /* said so once */

int
ctl_memory_full(struct ctl *c, int pct)
{
	fprintf(stderr, "ferryctl: redis at %s is %d%% full "
	    "(memory_refuse_percent %d): not enqueueing; drain the queue or "
	    "raise maxmemory\n", c->addr, pct, c->cfg->memory_refuse_percent);
	return CTL_EX_TEMPFAIL;
}

void
ctl_memory_unchecked(struct ctl *c, const char *why)
{
	if (memory_unchecked)
		return;
	fprintf(stderr, "ferryctl: redis at %s: %s; memory_refuse_percent not "
	    "checked\n", c->addr, why);
	memory_unchecked = true;
}

/* Backpressure: EX_TEMPFAIL when Redis is at or above
 * memory_refuse_percent of maxmemory (no limit: never). Where INFO is
 * refused (ACL), say so once and push anyway: Redis still refuses (OOM). */
int
ctl_memory_allows(struct ctl *c)
{
	struct redis_memory m;
	char err[256];
	int pct;

	if (memory_unchecked)
		return 0;
	if (memory_fetch(c->rc, &m, false, err, sizeof(err)) == -1) {
		if (c->rc->err) {
			fprintf(stderr, "ferryctl: redis at %s: %s\n", c->addr, err);
			return CTL_EX_UNAVAILABLE;
		}
		ctl_memory_unchecked(c, err);
		return 0;
	}
	if ((pct = memory_percent(&m)) < c->cfg->memory_refuse_percent)
		return 0;
	return ctl_memory_full(c, pct);
}
