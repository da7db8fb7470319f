/* dead_filter.h - which dead-letter entries an operator's selection names
 * (by reason, by time, by id pattern), and the group an entry's reason
 * falls in. `ferryctl dead` (src/ferryctl/ctl_dead*.c) and the dashboard's
 * API (src/ferryd/http/http_dead_*.c) select and group with it, so both mean
 * the same by "--reason 23505" or "--before 2h". Pure code: no Redis. */
#ifndef FERRY_DEAD_FILTER_H
#define FERRY_DEAD_FILTER_H

#include <stdbool.h>
#include <stddef.h>

#include "dead_entry.h"

#define DEAD_FILTER_SQLSTATE_LEN 5
#define DEAD_FILTER_TEXT_MAX 512   /* --reason and --id, in bytes */

/* A selection; every part set must hold (an empty filter selects all). */
struct dead_filter {
	/* A SQLSTATE (5 characters 0-9 A-Z): entries whose error or reason
	 * starts with it and ":"; other text: entries whose reason or
	 * last_error holds it (ASCII case ignored). NULL: any reason. */
	const char *reason;
	/* A group as dead_filter_group names it: exactly its entries.
	 * NULL: any. */
	const char *group;
	/* The reason's text exactly (the dashboard's "all of a reason").
	 * NULL: any. */
	const char *reason_is;
	long long before_ms;    /* died before (time < it); -1: no bound */
	long long after_ms;     /* died at or after it; -1: no bound */
	const char *id_glob;    /* fnmatch(3) of the entry's id; NULL: any */
};

void dead_filter_init(struct dead_filter *f);
/* Does f select anything less than everything? */
bool dead_filter_active(const struct dead_filter *f);
/* Is s a SQLSTATE as --reason takes it (five of 0-9 A-Z)? */
bool dead_filter_is_sqlstate(const char *s);
/* A value of --before or --after: an RFC 3339 time
 * ("2026-12-02T10:00:00Z", "...+01:00"), a date ("2026-12-02": its
 * midnight UTC) or a duration ago ("90s", "30m", "2h", "7d") measured
 * from now_ms. 0 with the time (Unix ms) in *ms, or -1 with err saying
 * why (naming `what`, e.g. "--before"). */
int dead_filter_time(const char *what, const char *s, long long now_ms,
    long long *ms, char *err, size_t errsize);
/* Check every part of f (text lengths, before after after); 0, or -1
 * with err. */
int dead_filter_check(const struct dead_filter *f, char *err,
    size_t errsize);
/* Does f select entry e, named id (dead_entry_id)? A malformed entry has
 * the reason DEAD_ENTRY_MALFORMED and no time: a time bound never
 * selects it. */
bool dead_filter_match(const struct dead_filter *f,
    const struct dead_entry *e, const char *id);

/* The group of e's reason, malloc'd: the SQLSTATE that starts its
 * last_error (else its reason) followed by ":", as "23505"; else the
 * reason's text; DEAD_ENTRY_MALFORMED for a malformed entry. */
char *dead_filter_group(const struct dead_entry *e);

#endif
