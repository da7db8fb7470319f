/* ctl_push.c - the one way ferryctl pushes many jobs (enqueue, dead
 * restore): in chunks of at most CTL_CHUNK jobs and CTL_CHUNK_BYTES bytes
 * (a single bigger job is a chunk of its own), each sent by the caller as
 * one atomic step (a MULTI transaction, a script), memory_refuse_percent
 * checked before each, the jobs that went in counted, and a progress line
 * on a terminal. What each chunk is and the messages about it stay with
 * the caller. */
#include <stdio.h>

#include <string.h>

#include "ctl.h"
#include "lua_scripts.h"
#include "queue.h"

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
	int rc = 0;

	if (p->n == 0)
		return 0;
	if (!p->script_checks)
		rc = ctl_memory_allows(p->c, p->queue);
	if (rc == 0 && (rc = send(arg, p->n, &went)) == 0)
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
ctl_memory_full(struct ctl *c, const char *text)
{
	fprintf(stderr, "ferryctl: redis at %s: %s\n", c->addr, text);
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

/* Backpressure: memory.lua's verdict (the one enqueue.lua reaches). Where
 * INFO is refused (ACL), say so once and push anyway: Redis still refuses
 * at maxmemory (OOM). */
int
ctl_memory_allows(struct ctl *c, const char *queue)
{
	struct queue_keys k;
	char pct[16];
	redisReply *r;
	int rc = 0;

	if (memory_unchecked)
		return 0;
	queue_keys_init(&k, c->cfg->redis_prefix, queue);
	snprintf(pct, sizeof(pct), "%d", c->cfg->memory_refuse_percent);
	const char *argv[] = { k.ready, pct };
	r = queue_script(c->rc, LUA_MEMORY, 1, 2, argv, NULL);
	if (r == NULL) {
		fprintf(stderr, "ferryctl: redis at %s: %s\n", c->addr,
		    c->rc->errstr);
		return CTL_EX_UNAVAILABLE;
	}
	if (r->type == REDIS_REPLY_ERROR)
		ctl_memory_unchecked(c, strncmp(r->str, "NOINFO ", 7) == 0 ?
		    r->str + 7 : r->str);
	else if (r->type == REDIS_REPLY_ARRAY && r->elements >= 11 &&
	    r->element[10]->type == REDIS_REPLY_STRING &&
	    r->element[10]->len > 0)
		rc = ctl_memory_full(c, r->element[10]->str);
	freeReplyObject(r);
	return rc;
}
