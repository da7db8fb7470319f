/* ctl_dead_summary.c - `ferryctl dead summary QUEUE [SELECTION]`: the
 * dead entries grouped by reason (dead_summary.h: the SQLSTATE of their
 * error, else the reason's text), the largest group first, a line each:
 * count, oldest and newest time, the group (what --group takes) and an
 * example of its error. What an operator looks at first after an
 * incident. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "ctl_dead.h"
#include "dead_summary.h"

#define EXAMPLE_SHOWN 80        /* bytes of the example error */

static void
print_group(const struct dead_group *g)
{
	char oldest[40], newest[40];

	printf("%lld\t%s\t%s\t", g->count, ctl_time_text(g->oldest_ms, oldest,
	    sizeof(oldest)), ctl_time_text(g->newest_ms, newest,
	    sizeof(newest)));
	ctl_dead_print_text(g->name, 500);
	putchar('\t');
	ctl_dead_print_text(g->last_error != NULL ? g->last_error : g->reason != NULL ?
	    g->reason : "-", EXAMPLE_SHOWN);
	putchar('\n');
}

int
ctl_dead_summary(struct ctl *c, const struct queue_config *q,
    const struct ctl_dead_opts *o)
{
	struct dead_summary s;
	struct queue_keys k;
	size_t n = CTL_CHUNK;

	queue_keys_init(&k, c->cfg->redis_prefix, q->name);
	dead_summary_init(&s);
	for (long start = 0; n == CTL_CHUNK; start += CTL_CHUNK) {
		redisReply *r = redisCommand(c->rc, "LRANGE %s %ld %ld", k.dead,
		    start, start + CTL_CHUNK - 1);
		if (!ctl_reply_ok(r) || r->type != REDIS_REPLY_ARRAY) {
			dead_summary_free(&s);
			return ctl_redis_fail(c, "LRANGE of the dead list", r);
		}
		for (size_t i = 0; i < r->elements; i++) {
			struct dead_entry e;
			char id[JOB_ID_MAX + 1];
			dead_entry_read(&e, r->element[i]->str, r->element[i]->len);
			dead_entry_id(e.ok ? &e.w : NULL, r->element[i]->str,
			    r->element[i]->len, q->max_job_bytes, id);
			if (dead_filter_match(&o->f, &e, id))
				dead_summary_add(&s, &e);
			dead_entry_free(&e);
		}
		n = r->elements;
		freeReplyObject(r);
	}
	dead_summary_sort(&s);
	if (isatty(STDOUT_FILENO))
		printf("COUNT\tOLDEST\tNEWEST\tGROUP\tEXAMPLE\n");
	for (size_t i = 0; i < s.n; i++)
		print_group(&s.groups[i]);
	if (isatty(STDOUT_FILENO))
		printf("%lld dead entr%s in %zu group%s\n", s.total,
		    s.total == 1 ? "y" : "ies", s.n, s.n == 1 ? "" : "s");
	dead_summary_free(&s);
	return 0;
}
