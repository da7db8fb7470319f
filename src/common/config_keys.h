/* config_keys.h - the key table behind config.c (private to config*.c):
 * find a key, store a value string into its field, apply defaults. */
#ifndef FERRY_CONFIG_KEYS_H
#define FERRY_CONFIG_KEYS_H

#include <stdbool.h>
#include <stddef.h>

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

#endif
