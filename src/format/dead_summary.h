/* dead_summary.h - the dead-letter entries of a queue grouped by reason
 * (dead_filter_group: the SQLSTATE, else the reason's text), with each
 * group's count, oldest and newest time and an example of its error: what
 * `ferryctl dead summary` prints and GET /api/dead/summary answers. Pure
 * code: the caller feeds it the entries it read. */
#ifndef FERRY_DEAD_SUMMARY_H
#define FERRY_DEAD_SUMMARY_H

#include <stddef.h>

#include "dead_entry.h"

/* Distinct groups kept; the entries of any further one are counted in
 * the group DEAD_SUMMARY_OTHER. */
#define DEAD_SUMMARY_GROUPS_MAX 200
#define DEAD_SUMMARY_OTHER "(other reasons)"

struct dead_group {
	char *name;             /* dead_filter_group */
	long long count;
	long long oldest_ms, newest_ms;  /* -1: no entry with a time */
	char *reason;           /* the newest entry's reason text, or NULL */
	char *last_error;       /* and its last_error, or NULL */
};

struct dead_summary {
	struct dead_group *groups;
	size_t n;
	long long total;
};

void dead_summary_init(struct dead_summary *s);
/* Count e (entries fed newest first: a group's example is its newest). */
void dead_summary_add(struct dead_summary *s, const struct dead_entry *e);
/* Largest group first (ties: by name). */
void dead_summary_sort(struct dead_summary *s);
void dead_summary_free(struct dead_summary *s);

#endif
