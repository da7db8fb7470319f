/* dead_summary.c - see dead_summary.h. */
#include "dead_summary.h"

#include <stdlib.h>
#include <string.h>

#include "dead_filter.h"
#include "util.h"

void
dead_summary_init(struct dead_summary *s)
{
	memset(s, 0, sizeof(*s));
}

static struct dead_group *
group_named(struct dead_summary *s, char *name)
{
	for (size_t i = 0; i < s->n; i++)
		if (strcmp(s->groups[i].name, name) == 0) {
			free(name);
			return &s->groups[i];
		}
	if (s->n == DEAD_SUMMARY_GROUPS_MAX) {
		free(name);
		return group_named(s, xstrdup(DEAD_SUMMARY_OTHER));
	}
	s->groups = xrealloc(s->groups, (s->n + 1) * sizeof(*s->groups));
	struct dead_group *g = &s->groups[s->n++];
	memset(g, 0, sizeof(*g));
	g->name = name;
	g->oldest_ms = g->newest_ms = -1;
	return g;
}

void
dead_summary_add(struct dead_summary *s, const struct dead_entry *e)
{
	struct dead_group *g = group_named(s, dead_filter_group(e));

	s->total++;
	if (g->count++ == 0 && e->ok) {
		g->reason = wrapper_str_text(e->w.reason);
		g->last_error = wrapper_str_text(e->w.last_error);
	}
	if (!e->ok)
		return;
	if (g->oldest_ms < 0 || e->w.time < g->oldest_ms)
		g->oldest_ms = e->w.time;
	if (e->w.time > g->newest_ms)
		g->newest_ms = e->w.time;
}

static int
by_count(const void *a, const void *b)
{
	const struct dead_group *x = a, *y = b;

	if (x->count != y->count)
		return x->count > y->count ? -1 : 1;
	return strcmp(x->name, y->name);
}

void
dead_summary_sort(struct dead_summary *s)
{
	if (s->n > 1)
		qsort(s->groups, s->n, sizeof(*s->groups), by_count);
}

void
dead_summary_free(struct dead_summary *s)
{
	for (size_t i = 0; i < s->n; i++) {
		free(s->groups[i].name);
		free(s->groups[i].reason);
		free(s->groups[i].last_error);
	}
	free(s->groups);
	dead_summary_init(s);
}
