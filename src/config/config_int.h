/* config_int.h - the private half of config.h, shared by config*.c only:
 * the key table (config_keys.c: find a key, store a value string into its
 * field, apply defaults), the checkers of values (config_check.c), and what
 * the loader (config.c) and the rules between keys (config_rules.c,
 * config_tables.c) share. */
#ifndef FERRY_CONFIG_INT_H
#define FERRY_CONFIG_INT_H

#include <ini.h>
#include <stdbool.h>
#include <stddef.h>

#include "config.h"

/* The key table (config_keys.c). */
#define CONFIG_NAME_CHARS "A-Z a-z 0-9 _ . -"

enum config_section { CONFIG_SECT_FERRYD, CONFIG_SECT_QUEUE };

extern const size_t config_nkeys;

/* The name of key `key` (0 <= key < config_nkeys); its section in *sect. */
const char *config_key_name(int key, int *sect);

/* Index of `name` in the rows of `sect`, or -1. */
int config_key_find(int sect, const char *name);
/* Store `value` into the field of key `key` in the struct at `base` (a
 * ferry_config or queue_config); NULL, or what is wrong (to be freed). */
char *config_key_set(int key, void *base, const char *value);
void config_keys_default(int sect, void *base);
/* The other row that sets key's field (a key and its old name, such as
 * http_listen and metrics_listen: the first row is the name, the later
 * the old one), or -1. */
int config_key_alias(int key);
/* The value of a string key's field in the struct at base (NULL: not a
 * string key, or unset). */
const char *config_key_string(int key, const void *base);
void config_keys_free(int sect, void *base);

bool config_valid_name(const char *s, size_t max);

/* The checkers of string values (config_check.c): NULL when v is allowed,
 * else why not (a constant, or written into buf). */
const char *config_check_abs_path(const char *v, char *buf, size_t size);
const char *config_check_cache_prefixes(const char *v, char *buf, size_t size);
const char *config_check_cluster(const char *v, char *buf, size_t size);
const char *config_check_columns(const char *v, char *buf, size_t size);
const char *config_check_column(const char *v, char *buf, size_t size);
const char *config_check_column_list(const char *v, char *buf, size_t size);
const char *config_check_listen(const char *v, char *buf, size_t size);
const char *config_check_http_token(const char *v, char *buf, size_t size);
/* Host names (A-Z a-z 0-9 . -, or [IPv6]) separated by blanks or commas. */
const char *config_check_http_hosts(const char *v, char *buf, size_t size);
const char *config_check_log(const char *v, char *buf, size_t size);
const char *config_check_pg_ports(const char *v, char *buf, size_t size);
const char *config_check_pg_tsa(const char *v, char *buf, size_t size);
const char *config_check_pidfile(const char *v, char *buf, size_t size);
const char *config_check_prefix(const char *v, char *buf, size_t size);
const char *config_check_redis_user(const char *v, char *buf, size_t size);
const char *config_check_sentinel_master(const char *v, char *buf, size_t size);
const char *config_check_sentinels(const char *v, char *buf, size_t size);
const char *config_check_table(const char *v, char *buf, size_t size);
const char *config_check_table_list(const char *v, char *buf, size_t size);
const char *config_check_schema(const char *v, char *buf, size_t size);
const char *config_fmt_duration(long ms, char *buf, size_t size);

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
