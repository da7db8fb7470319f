/* config_int.h - what the loader (config.c) and the rules between keys
 * (config_rules.c) share; private to them. */
#ifndef FERRY_CONFIG_INT_H
#define FERRY_CONFIG_INT_H

#include <ini.h>
#include <stdbool.h>
#include <stddef.h>

#include "config.h"
#include "config_keys.h"

#define S_FERRYD CONFIG_SECT_FERRYD
#define S_QUEUE CONFIG_SECT_QUEUE
enum { S_NONE = S_QUEUE + 1, S_IGNORE, S_TABLE };	/* more section states */
enum { L_OTHER, L_KEY, L_CONT };		/* what inih makes of a line */

/* One load of one file: where the reader is, what it has seen. */
struct loader {
	const char *path;
	struct ferry_config *cfg;
	struct config_errors *errs;
	char *text;		/* the whole file */
	size_t len, pos;
	int lineno;		/* of the line inih works on */
	bool long_line;		/* ... which was cut */
	int kind;		/* L_* of that line */
	int sect;		/* S_* of the current section */
	int queue;		/* its index in cfg->queues when S_QUEUE */
	int table;		/* its index in cfg->tables when S_TABLE */
	char label[INI_MAX_LINE + 16];	/* "[queue orders]" */
	char prev_key[INI_MAX_LINE];	/* for continuation lines */
	int ferryd_line;
	int queue_headers;	/* [queue ...] lines, valid or not */
	int syntax_errors;
	int *seen;		/* line each key was set (negative: to a bad
				 * value): ferryd, then queues */
};

/* "FILE:LINE: what", or "FILE: what" when line is 0. */
void config_error(struct loader *st, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The line-numbers row of the [ferryd] section (queue -1) or of a queue. */
int *config_seen_row(struct loader *st, int queue);
/* A [table QUEUE TABLE] header (rest: "QUEUE TABLE"), and a key in that
 * section (config_tables.c). */
void config_enter_table(struct loader *st, const char *rest);
void config_table_key(struct loader *st, const char *name,
    const char *value);
/* After the whole file: every table of each queue with tables, the
 * section's keys or else the queue's, and their rules (config_tables.c). */
void config_check_tables(struct loader *st);
/* After the whole file: the rules between keys (config_rules.c). */
void config_check_rules(struct loader *st);

#endif
