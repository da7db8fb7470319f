/* ctl_dead.h - what the files of `ferryctl dead` share: the command line
 * as read (ctl_dead_options.c), the printing of an entry's list line
 * (ctl_dead.c), the selection's redrive (ctl_dead_redrive.c) and summary
 * (ctl_dead_summary.c). */
#ifndef FERRY_CTL_DEAD_H
#define FERRY_CTL_DEAD_H

#include <stdbool.h>

#include "ctl.h"
#include "dead_entry.h"
#include "dead_filter.h"

/* `ferryctl dead SUB QUEUE [ID|FILE] [--all] [selection] [options]` */
struct ctl_dead_opts {
	const char *sub;        /* list, show, retry, purge, summary, restore */
	const char *queue;
	const char *id;         /* the ID (restore: the archive file), or NULL */
	bool all;               /* --all: every entry */
	bool dry_run;
	struct dead_filter f;   /* --reason, --group, --before, --after, --id */
	const char *before, *after;  /* as given: read by ctl_dead_times */
	long long limit;        /* --limit: entries selected at most; -1: no limit */
	double rate;            /* --rate: entries a second; 0: unpaced */
	const char *to;         /* --to: the queue retried to; NULL: QUEUE */
};

/* Print the usage of `ferryctl dead`; CTL_EX_USAGE. */
int ctl_dead_usage(void);
/* Read the command line: 0, or -1 after a message (usage). */
int ctl_dead_options(struct ctl_dead_opts *o, int argc, char **argv);
/* Does the command go through the selection's redrive (retry or purge by
 * a filter, --limit, --dry-run, --rate, --to) rather than one ID or the
 * plain --all? */
bool ctl_dead_selects(const struct ctl_dead_opts *o);
/* --before and --after into o->f: durations ago are measured from the
 * Redis clock (the clock of the entries' times). 0 or an exit code. */
int ctl_dead_times(struct ctl *c, struct ctl_dead_opts *o);

/* s on one line (control characters as blanks), cut after max bytes at
 * a character boundary ("..." then). */
void ctl_dead_print_text(const char *s, size_t max);
/* The cache key e's job names, if it lies in q's cache space or
 * cache_key_prefixes (cache_key_allowed), malloc'd; else NULL. A purge
 * releases it. */
char *ctl_dead_cache_key(const struct ctl *c, const struct queue_config *q,
    const struct dead_entry *e);
/* Print an entry's line of `dead list` (id, time, attempts, recoveries,
 * reason, last error). */
void ctl_dead_print_line(const struct dead_entry *e, const char *id);

int ctl_dead_redrive(struct ctl *c, const struct queue_config *q,
    const struct ctl_dead_opts *o);
int ctl_dead_summary(struct ctl *c, const struct queue_config *q,
    const struct ctl_dead_opts *o);

#endif
