/* config_check.c - what a value of the key table may be: one checker per
 * kind of string value (paths, addresses, names, lists), each returning
 * NULL or why not, with the allowed values, for config_keys.c's table. */
#include "config.h"
#include "config_int.h"
#include "copy.h"
#include "util.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *
config_check_log(const char *v, char *buf, size_t size)
{
	(void)buf;
	(void)size;
	if (strcmp(v, "stderr") == 0 || strcmp(v, "syslog") == 0 || v[0] == '/')
		return NULL;
	return "is not valid (allowed: stderr, syslog or an absolute file path)";
}

const char *
config_check_abs_path(const char *v, char *buf, size_t size)
{
	(void)buf;
	(void)size;
	return v[0] == '\0' || v[0] == '/' ? NULL :
	    "is not an absolute path (allowed: empty or /path)";
}

/* the daemon runs in /, and removes its pidfile by name at exit */
const char *
config_check_pidfile(const char *v, char *buf, size_t size)
{
	(void)buf;
	(void)size;
	return v[0] == '/' ? NULL : "is not an absolute path (allowed: /path)";
}

const char *
config_check_listen(const char *v, char *buf, size_t size)
{
	char addr[64];
	int port;

	if (*v == '\0' ||
	    config_parse_listen(v, addr, sizeof(addr), &port, buf, size) == 0)
		return NULL;
	return buf;
}

int
config_parse_listen(const char *listen, char *addr, size_t addrsize,
    int *port, char *err, size_t errsize)
{
	const char *colon = strrchr(listen, ':');
	struct in_addr a;
	char *end;

	if (colon == NULL || (size_t)(colon - listen) >= addrsize) {
		snprintf(err, errsize, "is not valid (allowed: empty, or IPV4:PORT "
		    "such as 127.0.0.1:9187)");
		return -1;
	}
	memcpy(addr, listen, (size_t)(colon - listen));
	addr[colon - listen] = '\0';
	long p = strtol(colon + 1, &end, 10);
	if (inet_pton(AF_INET, addr, &a) != 1 || !isdigit((unsigned char)colon[1]) ||
	    *end != '\0' || p < 1 || p > 65535) {
		snprintf(err, errsize, "is not valid (allowed: empty, or IPV4:PORT "
		    "with a port in 1..65535, such as 127.0.0.1:9187)");
		return -1;
	}
	*port = (int)p;
	return 0;
}

const char *
config_check_prefix(const char *v, char *buf, size_t size)
{
	(void)buf;
	(void)size;
	return config_valid_name(v, 32) ? NULL :
	    "is not valid (allowed: 1..32 characters of " CONFIG_NAME_CHARS ")";
}

/* redis_sentinels, redis_cluster: HOST:PORT items (config_parse_hostport),
 * at most CONFIG_MAX_SENTINELS. */
static const char *
config_check_hostports(const char *v, const char *what, char *buf,
    size_t size)
{
	const char *cur = v, *item;
	char host[CONFIG_HOST_MAX], one[CONFIG_HOST_MAX + 16];
	size_t len;
	int port, n = 0;

	while (config_list_next(&cur, &item, &len)) {
		snprintf(one, sizeof(one), "%.*s", (int)len, item);
		if (len >= sizeof(one) || config_parse_hostport(one, host,
		    sizeof(host), &port) == -1) {
			snprintf(buf, size, "has \"%s\", which is not HOST:PORT "
			    "(allowed: %s addresses separated by commas, such as "
			    "%s)", one, what, strcmp(what, "sentinel") == 0 ?
			    "10.0.0.1:26379, 10.0.0.2:26379" :
			    "10.0.0.1:6379, 10.0.0.2:6379");
			return buf;
		}
		if (++n > CONFIG_MAX_SENTINELS) {
			snprintf(buf, size, "names over %d %s nodes (allowed: 1..%d)",
			    CONFIG_MAX_SENTINELS, what, CONFIG_MAX_SENTINELS);
			return buf;
		}
	}
	return NULL;
}

const char *
config_check_sentinels(const char *v, char *buf, size_t size)
{
	return config_check_hostports(v, "sentinel", buf, size);
}

const char *
config_check_cluster(const char *v, char *buf, size_t size)
{
	return config_check_hostports(v, "cluster", buf, size);
}

int
config_parse_hostport(const char *s, char *host, size_t hostsize, int *port)
{
	const char *colon = strrchr(s, ':');
	char *end;
	long p;

	if (colon == NULL || colon == s || (size_t)(colon - s) >= hostsize ||
	    !isdigit((unsigned char)colon[1]))
		return -1;
	p = strtol(colon + 1, &end, 10);
	if (*end != '\0' || p < 1 || p > 65535)
		return -1;
	for (const char *c = s; c < colon; c++)
		if (isspace((unsigned char)*c) || iscntrl((unsigned char)*c))
			return -1;
	memcpy(host, s, (size_t)(colon - s));
	host[colon - s] = '\0';
	*port = (int)p;
	return 0;
}

int
config_list_hostport(const char *list, int i, char *host, size_t hostsize,
    int *port)
{
	const char *cur = list, *item;
	char one[CONFIG_HOST_MAX + 16];
	size_t len;

	for (int k = 0; config_list_next(&cur, &item, &len); k++) {
		if (k != i)
			continue;
		snprintf(one, sizeof(one), "%.*s", (int)len, item);
		return config_parse_hostport(one, host, hostsize, port);
	}
	return -1;
}

/* A sentinel master name is one argument of SENTINEL commands. */
const char *
config_check_sentinel_master(const char *v, char *buf, size_t size)
{
	(void)buf;
	(void)size;
	return *v == '\0' || config_valid_name(v, 64) ? NULL :
	    "is not valid (allowed: 1..64 characters of " CONFIG_NAME_CHARS
	    ", the name in the sentinels' \"sentinel monitor NAME ...\")";
}

/* A Redis ACL user name is one argument of AUTH: a blank would make ferry
 * authenticate as someone else in a redis-cli paste, a control character
 * is a typo. Empty: the default user. */
const char *
config_check_redis_user(const char *v, char *buf, size_t size)
{
	(void)buf;
	(void)size;
	for (const unsigned char *p = (const unsigned char *)v; *p; p++)
		if (isspace(*p) || iscntrl(*p))
			return "is not valid (a Redis ACL user name: no blanks or "
			    "control characters)";
	return strlen(v) > 128 ? "is too long (at most 128 characters)" : NULL;
}

/* The dashboard's token goes in an HTTP header: printable, no blanks, and
 * long enough not to be guessed. Empty: no actions. */
const char *
config_check_http_token(const char *v, char *buf, size_t size)
{
	size_t n = strlen(v);
	(void)buf;
	(void)size;
	for (const unsigned char *p = (const unsigned char *)v; *p; p++)
		if (*p <= ' ' || *p >= 0x7f)
			return "is not valid (printable ASCII without blanks: it is "
			    "sent as \"Authorization: Bearer TOKEN\")";
	return n > 0 && n < 16 ? "is too short (at least 16 characters; e.g. "
	    "openssl rand -hex 24)" : n > 1024 ? "is too long (at most 1024 "
	    "characters)" : NULL;
}

const char *
config_check_http_hosts(const char *v, char *buf, size_t size)
{
	(void)buf;
	(void)size;
	if (strlen(v) > 1024)
		return "is too long (at most 1024 characters)";
	while (*(v += strspn(v, " \t,")) != '\0') {
		size_t n = strcspn(v, " \t,");
		size_t ok = v[0] == '[' ? (v[n - 1] == ']' && n > 2 ?
		    1 + strspn(v + 1, "0123456789abcdefABCDEF:.") + 1 : 0) :
		    strspn(v, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
		    "0123456789.-");
		if (ok != n || n > 255)
			return "is not valid (allowed: host names of A-Z a-z 0-9 . - "
			    "or [IPv6 address], without a port, separated by blanks "
			    "or commas)";
		v += n;
	}
	return NULL;
}

/* [A-Za-z_][A-Za-z0-9_]*, 1..CONFIG_IDENT_MAX bytes: the sink quotes it as
 * an identifier, so case matters and nothing else is allowed. */
static bool
valid_ident(const char *s, size_t n)
{
	static const char chars[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
	    "abcdefghijklmnopqrstuvwxyz_0123456789";
	size_t i;

	if (n == 0 || n > CONFIG_IDENT_MAX || (s[0] >= '0' && s[0] <= '9'))
		return false;
	for (i = 0; i < n; i++)
		if (s[i] == '\0' || strchr(chars, s[i]) == NULL)
			return false;
	return true;
}

/* Empty is allowed here: check_queue wants it with handler = postgres. */
const char *
config_check_table(const char *v, char *buf, size_t size)
{
	const char *dot = strchr(v, '.');
	bool ok;

	(void)buf;
	(void)size;
	if (*v == '\0')
		return NULL;
	if (dot == NULL)
		ok = valid_ident(v, strlen(v));
	else
		ok = valid_ident(v, (size_t)(dot - v)) &&
		    valid_ident(dot + 1, strlen(dot + 1));
	return ok ? NULL : "is not a valid table name (allowed: name or "
	    "schema.name, each part 1..63 characters of A-Z a-z 0-9 _, not "
	    "starting with a digit)";
}

const char *
config_check_schema(const char *v, char *buf, size_t size)
{
	(void)buf;
	(void)size;
	return valid_ident(v, strlen(v)) ? NULL : "is not a valid schema name "
	    "(allowed: 1..63 characters of A-Z a-z 0-9 _, not starting with a "
	    "digit; quoted, so case matters)";
}

/* tables: table names (config_check_table) separated by commas, each
 * once; empty: the queue writes its one table. */
const char *
config_check_table_list(const char *v, char *buf, size_t size)
{
	const char *cur = v, *item, *prev, *pitem;
	char name[2 * CONFIG_IDENT_MAX + 2];
	size_t len, plen;

	while (config_list_next(&cur, &item, &len)) {
		snprintf(name, sizeof(name), "%.*s", (int)len, item);
		if (len == 0 || len >= sizeof(name) ||
		    config_check_table(name, buf, size) != NULL) {
			snprintf(buf, size, "\"%.*s\" is not a valid table name "
			    "(allowed: names or schema.names separated by commas, "
			    "each part 1..63 characters of A-Z a-z 0-9 _, not "
			    "starting with a digit)", len > 64 ? 64 : (int)len, item);
			return buf;
		}
		for (prev = v; config_list_next(&prev, &pitem, &plen) &&
		    pitem < item; )
			if (plen == len && strncmp(pitem, item, len) == 0) {
				snprintf(buf, size, "table \"%s\" is named twice "
				    "(allowed: each table once)", name);
				return buf;
			}
	}
	return NULL;
}

/* The sink parses it again; parse it now so a bad spec fails the load. */
const char *
config_check_columns(const char *v, char *buf, size_t size)
{
	struct copy_columns cols;

	if (*v == '\0')
		return NULL;
	memset(&cols, 0, sizeof(cols));
	if (copy_columns_parse(v, &cols, buf, size) == -1)
		return buf;
	copy_columns_free(&cols);
	return NULL;
}

/* One column (version); empty: none. */
const char *
config_check_column(const char *v, char *buf, size_t size)
{
	(void)buf;
	(void)size;
	return *v == '\0' || valid_ident(v, strlen(v)) ? NULL : "is not a "
	    "valid column name (allowed: one name of 1..63 characters of A-Z "
	    "a-z 0-9 _, not starting with a digit)";
}

/* key, update_columns: "col, col", no duplicates; empty: not set. */
const char *
config_check_column_list(const char *v, char *buf, size_t size)
{
	const char *cur = v, *item, *prev, *pitem;
	size_t len, plen;

	while (config_list_next(&cur, &item, &len)) {
		if (!valid_ident(item, len)) {
			snprintf(buf, size, "\"%.*s\" is not a valid column name "
			    "(allowed: names separated by commas, each 1..63 "
			    "characters of A-Z a-z 0-9 _, not starting with a digit)",
			    (int)len, item);
			return buf;
		}
		for (prev = v; config_list_next(&prev, &pitem, &plen) &&
		    pitem < item; )
			if (plen == len && strncmp(pitem, item, len) == 0) {
				snprintf(buf, size, "column \"%.*s\" is named twice "
				    "(allowed: each column once)", (int)len, item);
				return buf;
			}
	}
	return NULL;
}

bool
config_list_next(const char **cursor, const char **item, size_t *len)
{
	const char *p = *cursor, *e;

	p += strspn(p, " \t");
	if (*p == '\0')
		return false;      /* the end (a trailing comma included) */
	e = p + strcspn(p, ",");
	*cursor = *e == ',' ? e + 1 : e;
	while (e > p && (e[-1] == ' ' || e[-1] == '\t'))
		e--;
	*item = p;
	*len = (size_t)(e - p);
	return true;
}

/* Every item 1..CONFIG_CACHE_PREFIX_MAX printable ASCII characters, no
 * blanks: an empty one would allow every key. config.c checks them
 * against redis_prefix, which this row cannot see. */
const char *
config_check_cache_prefixes(const char *v, char *buf, size_t size)
{
	const char *cur = v, *item;
	size_t len, n = 0, i;

	while (config_list_next(&cur, &item, &len)) {
		for (i = 0; i < len && item[i] > ' ' && item[i] < 0x7f; i++)
			;
		if (++n > CONFIG_CACHE_PREFIXES)
			snprintf(buf, size, "has more than %d prefixes",
			    CONFIG_CACHE_PREFIXES);
		else if (len == 0)
			snprintf(buf, size, "has an empty prefix (item %zu), which "
			    "would let a job name any key", n);
		else if (len > CONFIG_CACHE_PREFIX_MAX || i < len)
			snprintf(buf, size, "prefix \"%.*s\" is not valid", (int)
			    (len > CONFIG_CACHE_PREFIX_MAX ? CONFIG_CACHE_PREFIX_MAX :
			    len), item);
		else
			continue;
		snprintf(buf + strlen(buf), size - strlen(buf), " (allowed: "
		    "empty, or up to %d key prefixes separated by commas, such as "
		    "app:cache:, other: ; each 1..%d printable ASCII characters "
		    "without blanks)", CONFIG_CACHE_PREFIXES,
		    CONFIG_CACHE_PREFIX_MAX);
		return buf;
	}
	return NULL;
}

/* Empty (the default: [ferryd]'s, or 5432 there), one port, or one per
 * pg_host host (config.c counts them: this row cannot see pg_host). */
const char *
config_check_pg_ports(const char *v, char *buf, size_t size)
{
	const char *cur = v, *item;
	size_t len, n = 0;

	while (config_list_next(&cur, &item, &len)) {
		char port[8];
		long p = 0;
		n++;
		if (len > 0 && len < sizeof(port) &&
		    strspn(item, "0123456789") >= len) {
			memcpy(port, item, len);
			port[len] = '\0';
			p = strtol(port, NULL, 10);
		}
		if (p >= 1 && p <= 65535)
			continue;
		snprintf(buf, size, "item %zu (\"%.*s\") is not a port 1..65535 "
		    "(allowed: one port, or one per pg_host host separated by "
		    "commas, such as 5432, 5433)", n, (int)(len > 16 ? 16 : len),
		    item);
		return buf;
	}
	return NULL;
}

/* libpq's values for PostgreSQL 15; empty: read-write with several hosts,
 * libpq's own default (any) with one. */
const char *
config_check_pg_tsa(const char *v, char *buf, size_t size)
{
	static const char *const ok[] = { "", "any", "read-write", "read-only",
	    "primary", "standby", "prefer-standby" };

	(void)buf;
	(void)size;
	for (size_t i = 0; i < FERRY_ARRAY_LEN(ok); i++)
		if (strcmp(v, ok[i]) == 0)
			return NULL;
	return "is not valid (allowed: empty, any, read-write, read-only, "
	    "primary, standby, prefer-standby)";
}

/* 90000 -> "90s": the largest unit that divides the value exactly. */
