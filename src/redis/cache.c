/* cache.c - read the cache keys that jobs name: TYPE for all of them in one
 * pipeline, then GET, HGETALL or LRANGE in a second; each value becomes
 * JSON for an exec handler and, for the postgres sink, its rows. A key that
 * is gone is reported, never skipped: its job is dead-lettered. */
#include "cache.h"

#include <ctype.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json_scan.h"
#include "util.h"

#define QUEUE_OWN_MAX (32 + CONFIG_QUEUE_NAME_MAX + 16) /* p:{q}:cache: */

enum { K_NONE, K_STRING, K_HASH, K_LIST, K_OTHER };

static const char *const read_cmd[] = {
	[K_STRING] = "GET %s", [K_HASH] = "HGETALL %s",
	[K_LIST] = "LRANGE %s 0 -1",
};

static int
kind_of(const redisReply *r)
{
	if (r->type != REDIS_REPLY_STATUS && r->type != REDIS_REPLY_STRING)
		return K_OTHER;
	if (strcmp(r->str, "none") == 0)
		return K_NONE;
	if (strcmp(r->str, "string") == 0)
		return K_STRING;
	if (strcmp(r->str, "hash") == 0)
		return K_HASH;
	return strcmp(r->str, "list") == 0 ? K_LIST : K_OTHER;
}

static void __attribute__((format(printf, 2, 3)))
bad(struct cache_item *it, const char *fmt, ...)
{
	va_list ap;

	it->state = CACHE_BAD;
	va_start(ap, fmt);
	vsnprintf(it->why, sizeof(it->why), fmt, ap);
	va_end(ap);
}

/* A hash (field, value, ...) or a list as JSON; NULL when a field or value
 * is not UTF-8 text. */
static json_t *
container_json(int kind, const redisReply *r)
{
	json_t *v = kind == K_HASH ? json_object() : json_array();
	size_t step = kind == K_HASH ? 2 : 1;

	for (size_t i = 0; i + step - 1 < r->elements; i += step) {
		const redisReply *e = r->element[i + step - 1];
		json_t *s = json_stringn(e->str, e->len);
		int rc = -1;
		if (s != NULL && kind == K_HASH &&
		    strlen(r->element[i]->str) == r->element[i]->len)
			rc = json_object_set_new(v, r->element[i]->str, s);
		else if (s != NULL && kind == K_LIST)
			rc = json_array_append_new(v, s);
		else
			json_decref(s);
		if (rc == -1) {
			json_decref(v);
			return NULL;
		}
	}
	return v;
}

/* {"data":<text>} */
static void
set_rows(struct cache_item *it, const char *text, size_t len)
{
	it->rows = xmalloc(len + 10);
	memcpy(it->rows, "{\"data\":", 8);
	memcpy(it->rows + 8, text, len);
	memcpy(it->rows + 8 + len, "}", 2);
	it->rows_len = len + 9;
}

/* A key of ferry's own read for a job its mark does not name. */
static void
foreign(struct cache_item *it)
{
	bad(it, "cache_key \"%.80s\" is a key of ferry's own written for "
	    "another job (its mark names another document): a job may name "
	    "only the key written with it", it->key);
	it->foreign = true;
}

/* A key of ferry's own: its value r (a string, or the mark alone) must
 * start with the owner's mark; how many bytes to skip, or -1 (foreign). */
static long
own_mark(struct cache_item *it, int kind, const redisReply *r)
{
	if (kind != K_STRING || r->type != REDIS_REPLY_STRING ||
	    r->len < CACHE_OWN_MARK_LEN ||
	    strncmp(r->str, it->owner, CACHE_OWN_MARK_LEN - 1) != 0 ||
	    r->str[CACHE_OWN_MARK_LEN - 1] != ':') {
		foreign(it);
		return -1;
	}
	return CACHE_OWN_MARK_LEN;
}

/* The value as JSON into it->json; false (it is then GONE or BAD) when
 * there is none. */
static bool
value_json(struct cache_item *it, int kind, const redisReply *r)
{
	json_t *v = NULL;
	long skip = 0;

	if (r->type == REDIS_REPLY_NIL || (r->type == REDIS_REPLY_ARRAY &&
	    r->elements == 0) || (it->mode == CACHE_EXISTS &&
	    r->type == REDIS_REPLY_STRING && r->len == 0)) {
		it->state = CACHE_GONE;         /* expired since TYPE */
		return false;
	}
	if (it->owner != NULL && (skip = own_mark(it, kind, r)) < 0)
		return false;
	if (it->mode == CACHE_EXISTS)
		return true;                    /* the mark was all it read */
	if (kind == K_STRING && r->type == REDIS_REPLY_STRING)
		v = json_stringn(r->str + skip, r->len - (size_t)skip);
	else if (kind != K_STRING && r->type == REDIS_REPLY_ARRAY)
		v = container_json(kind, r);
	if (v == NULL && r->type == REDIS_REPLY_ERROR)
		bad(it, "cache key changed while read: %s", r->str);
	else if (v == NULL)
		bad(it, "cache value is not UTF-8 text");
	if (v == NULL)
		return false;
	it->json = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
	json_decref(v);
	it->json_len = strlen(it->json);
	if (it->max_bytes > 0 && it->json_len > (size_t)it->max_bytes)
		bad(it, "cache value is %zu bytes as JSON, over max_job_bytes "
		    "%ld", it->json_len, it->max_bytes);
	return it->state != CACHE_BAD;
}

static void
item_value(struct cache_item *it, int kind, const redisReply *r)
{
	if (!value_json(it, kind, r) || it->mode != CACHE_ROWS)
		return;
	if (kind == K_STRING)
		set_rows(it, r->str + (it->owner != NULL ? CACHE_OWN_MARK_LEN : 0),
		    r->len - (it->owner != NULL ? CACHE_OWN_MARK_LEN : 0));
	else if (kind == K_HASH)
		set_rows(it, it->json, it->json_len);
	else
		bad(it, "cache key holds a list: the postgres sink reads a string "
		    "(JSON rows) or a hash (one row)");
}

/* Round 1: TYPE of every key; kinds[i] gets each. */
static int
read_types(redisContext *c, struct cache_item *items, int n, int *kinds)
{
	redisReply *r;

	for (int i = 0; i < n; i++)
		redisAppendCommand(c, "TYPE %s", items[i].key);
	for (int i = 0; i < n; i++) {
		if (redisGetReply(c, (void **)&r) != REDIS_OK)
			return -1;
		kinds[i] = kind_of(r);
		items[i].state = CACHE_FOUND;
		if (kinds[i] == K_NONE)
			items[i].state = CACHE_GONE;
		else if (kinds[i] == K_OTHER)
			bad(&items[i], "cache key holds a %s, not a string, hash or "
			    "list", r->type == REDIS_REPLY_ERROR ? "?" : r->str);
		freeReplyObject(r);
	}
	return 0;
}

/* Round 2 reads a value, or for a key of ferry's own in CACHE_EXISTS
 * mode its mark (GETRANGE); a key of ferry's own that is not a string is
 * another's (the enqueue writes strings only). */
static bool
wants_value(struct cache_item *it, int kind)
{
	if (it->state != CACHE_FOUND || kind == K_NONE || kind == K_OTHER)
		return false;
	if (it->owner != NULL && kind != K_STRING) {
		foreign(it);
		return false;
	}
	return it->mode != CACHE_EXISTS || it->owner != NULL;
}

static void
append_read(redisContext *c, const struct cache_item *it, int kind)
{
	if (it->mode == CACHE_EXISTS)
		redisAppendCommand(c, "GETRANGE %s 0 %d", it->key,
		    CACHE_OWN_MARK_LEN - 1);
	else
		redisAppendCommand(c, read_cmd[kind], it->key);
}

int
cache_read(redisContext *c, struct cache_item *items, int n)
{
	int *kinds = xcalloc((size_t)(n > 0 ? n : 1), sizeof(*kinds));
	int rc = read_types(c, items, n, kinds);
	redisReply *r;

	bool *reads = xcalloc((size_t)(n > 0 ? n : 1), sizeof(*reads));

	for (int i = 0; rc == 0 && i < n; i++)
		if ((reads[i] = wants_value(&items[i], kinds[i])))
			append_read(c, &items[i], kinds[i]);
	for (int i = 0; rc == 0 && i < n; i++) {
		if (!reads[i])
			continue;
		if (redisGetReply(c, (void **)&r) != REDIS_OK) {
			rc = -1;
			break;
		}
		item_value(&items[i], kinds[i], r);
		freeReplyObject(r);
	}
	free(reads);
	free(kinds);
	return rc;
}

void
cache_item_free(struct cache_item *it)
{
	free(it->json);
	free(it->rows);
	it->json = it->rows = NULL;
}

bool
cache_key_allowed(const char *key, const char *prefix,
    const struct queue_config *q)
{
	size_t n = strlen(prefix), len;
	const char *cur = q->cache_key_prefixes, *item;
	char own[QUEUE_OWN_MAX];

	snprintf(own, sizeof(own), "%s:{%s}:cache:", prefix, q->name);
	if (strncmp(key, own, strlen(own)) == 0)
		return true;
	if (strncmp(key, prefix, n) == 0 && key[n] == ':')
		return false;           /* ferry's own keys: never */
	while (cur != NULL && config_list_next(&cur, &item, &len))
		if (len > 0 && strncmp(key, item, len) == 0)
			return true;
	return false;
}

bool
cache_own_key(const char *key, const char *prefix, const char *queue)
{
	char space[QUEUE_OWN_MAX];
	size_t n = (size_t)snprintf(space, sizeof(space), "%s:{%s}:cache:",
	    prefix, queue), i;

	if (n >= sizeof(space) || strncmp(key, space, n) != 0)
		return false;
	for (i = n; i < n + 16; i++)
		if (!isxdigit((unsigned char)key[i]))
			return false;
	if (key[i++] != '.' || !isdigit((unsigned char)key[i]))
		return false;
	size_t digits = strspn(key + i, "0123456789");
	return key[i + digits] == '\0' && digits <= 3 &&
	    (digits == 1 || key[i] != '0');
}

void
cache_key_refusal(char *buf, size_t size, const char *key,
    const char *prefix, const char *queue)
{
	char shown[64];
	size_t n = strlen(key), i = 0, o = 0, w;

	while (i < n) {
		w = json_scan_utf8_len(key + i, n - i);     /* 0: not shown */
		if (o + (w == 0 ? 1 : w) > sizeof(shown) - 4)
			break;
		if (w == 0)
			shown[o++] = '?';
		else
			memcpy(shown + o, key + i, w);
		o += w;
		i += w == 0 ? 1 : w;
	}
	if (i < n) {
		memcpy(shown + o, "...", 3);
		o += 3;
	}
	shown[o] = '\0';
	snprintf(buf, size, "cache_key \"%s\" is outside the queue's cache "
	    "space %s:{%s}:cache: and cache_key_prefixes", shown, prefix,
	    queue);
}

static void
job_result(struct job *j, struct cache_item *it)
{
	if (it->state == CACHE_GONE) {
		j->invalid = CACHE_MISSING_REASON;
		j->cache_missing = j->refusal_varies = true;
	} else if (it->state == CACHE_BAD) {
		snprintf(j->invalid_buf, sizeof(j->invalid_buf), "%s", it->why);
		j->invalid = j->invalid_buf;
		j->refusal_varies = true;
		if (it->foreign) {
			/* another job's: never released nor made persistent */
			free(j->cache_key);
			j->cache_key = NULL;
		}
	} else {
		j->cache = it->json;
		j->cache_len = it->json_len;
		j->rows = it->rows;
		j->rows_len = it->rows_len;
		it->json = it->rows = NULL;
	}
	cache_item_free(it);
}

int
cache_load(redisContext *c, struct job *jobs, int n, const char *prefix,
    const struct queue_config *q, enum cache_mode mode)
{
	struct cache_item *items = xcalloc((size_t)(n > 0 ? n : 1),
	    sizeof(*items));
	int *idx = xcalloc((size_t)(n > 0 ? n : 1), sizeof(*idx)), m = 0, rc;

	for (int i = 0; i < n; i++) {
		struct job *j = &jobs[i];
		if (j->cache_key == NULL)
			continue;
		if (!cache_key_allowed(j->cache_key, prefix, q)) {
			/* refused whether or not the job is invalid already: its
			 * dead-lettering must not PERSIST the key either */
			if (j->invalid == NULL) {
				cache_key_refusal(j->invalid_buf,
				    sizeof(j->invalid_buf), j->cache_key, prefix,
				    q->name);
				j->invalid = j->invalid_buf;
				j->refusal_varies = true;   /* a reload may */
			}
			free(j->cache_key);
			j->cache_key = NULL;
			continue;
		}
		/* a buried job is never run: its cache is not read (a key
		 * gone would make a poison job look merely missing) */
		if (j->invalid != NULL || j->bury)
			continue;
		items[m].key = j->cache_key;
		items[m].mode = mode == CACHE_ROWS && j->has_data ?
		    CACHE_EXISTS : (int)mode;
		items[m].max_bytes = q->max_job_bytes;
		if (cache_own_key(j->cache_key, prefix, q->name))
			items[m].owner = job_digest(j);
		idx[m++] = i;
	}
	rc = m > 0 ? cache_read(c, items, m) : 0;
	for (int k = 0; k < m; k++) {
		if (rc == 0)
			job_result(&jobs[idx[k]], &items[k]);
		cache_item_free(&items[k]);
	}
	free(items);
	free(idx);
	return rc;
}
