/* dead_archive.c - bound a dead-letter list by dead_max without ever
 * dropping an entry unread: take the oldest entries, append them (with the
 * data of their cache keys) to the archive file, fsync, and only then let
 * dead_trim.lua remove exactly those entries and delete their cache keys.
 * A worker does it, not the master, because the append and the fsync
 * block. flock keeps two workers of a host from archiving the same
 * entries; if two hosts race, dead_trim.lua's check lets one trim, and the
 * other's lines are duplicates (an archive is at-least-once). */
#include "dead_archive.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "buf.h"
#include "cache.h"
#include "dead_entry.h"
#include "job.h"
#include "log.h"
#include "secure_open.h"
#include "sha1.h"
#include "util.h"

#define ROUND_ENTRIES 100
#define MAX_ROUNDS 100

struct round {
	redisReply *tail;       /* LRANGE dead -n -1: oldest last */
	struct cache_item *items; /* one per entry; key NULL when none */
	char (*owners)[41];     /* per entry: the SHA-1 of its job's document,
	                         * which a key of ferry's own must be marked
	                         * with to be archived and deleted */
	char **keys;            /* cache keys to delete after the trim */
	int nkeys;
	struct buf out;         /* the lines to append */
};

static bool warned_unset, warned_file;

/* The cache key named by the job inside a dead entry (malloc'd), or NULL,
 * also for a key that is not cache_key_allowed: never read or deleted.
 * For a key of ferry's own, owner gets the SHA-1 of the job's document:
 * the key is the job's only if its mark names that (src/redis/cache.c). */
static char *
entry_cache_key(const redisReply *e, const char *prefix,
    const struct queue_config *q, char owner[41])
{
	struct dead_entry d;
	char *key;

	dead_entry_read(&d, e->str, e->len);
	key = dead_entry_cache_key(&d);
	if (key != NULL && !cache_key_allowed(key, prefix, q)) {
		free(key);
		key = NULL;
	}
	if (key != NULL && cache_own_key(key, prefix, q->name))
		job_sha1_hex(d.ok ? d.w.doc : "", d.ok ? d.w.doc_len : 0, owner);
	dead_entry_free(&d);
	return key;
}

/* The line's members as JSON text without its closing brace: queue,
 * archived, then the entry's header decoded and its job (src/format/dead_entry.c)
 * when it matches the grammar (*whole), else only the first two. NULL when
 * jansson failed. */
static char *
line_head(const char *queue, const redisReply *e, bool *whole)
{
	json_t *o = json_object();
	struct dead_entry d;
	char *text = NULL;

	dead_entry_read(&d, e->str, e->len);
	*whole = false;
	if (o == NULL || json_object_set_new(o, "queue", json_string(queue)) != 0 ||
	    json_object_set_new(o, "archived",
	    json_integer(util_realtime_ms())) != 0)
		goto out;
	if (d.ok) {
		json_t *full = json_copy(o);
		if (full != NULL && dead_entry_decode(full, &d) == 0) {
			json_decref(o);
			o = full;
			*whole = true;
		} else {
			json_decref(full);
			log_error("dead-letter archive: an entry could not be "
			    "encoded; archived as raw_hex");
		}
	}
	text = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
	if (text != NULL)
		text[strlen(text) - 1] = '\0';        /* the closing brace */
out:
	json_decref(o);
	dead_entry_free(&d);
	return text;
}

/* An entry becomes {"queue":..,"archived":ms,<its header>,"job":..
 * [,"cache":<data>]}; one that does not match the grammar
 * {"queue":..,"archived":ms,"raw_hex":".."}. -1 when jansson failed. */
static int
put_line(struct round *r, const char *queue, const redisReply *e,
    const struct cache_item *it)
{
	static const char hex[] = "0123456789abcdef";
	bool whole;
	char *head = line_head(queue, e, &whole);

	if (head == NULL) {
		log_error("dead-letter archive: out of memory encoding an entry; "
		    "nothing archived");
		return -1;
	}
	buf_append(&r->out, head, strlen(head));
	free(head);
	if (!whole) {
		buf_append(&r->out, ",\"raw_hex\":\"", 12);
		for (size_t i = 0; i < e->len; i++) {
			unsigned char b = (unsigned char)e->str[i];
			char x[2] = { hex[b >> 4], hex[b & 15] };
			buf_append(&r->out, x, 2);
		}
		buf_append(&r->out, "\"", 1);
	}
	if (it->key != NULL && it->state == CACHE_FOUND) {
		buf_append(&r->out, ",\"cache\":", 9);
		buf_append(&r->out, it->json, it->json_len);
	} else if (it->key != NULL && it->state == CACHE_BAD) {
		json_t *why = json_string(it->why);
		if (why == NULL)
			why = json_string("the key's data cannot be archived");
		char *text = json_dumps(why, JSON_ENCODE_ANY);
		if (text != NULL) {
			buf_append(&r->out, ",\"cache_kept\":", 14);
			buf_append(&r->out, text, strlen(text));
		}
		free(text);
		json_decref(why);
	}
	buf_append(&r->out, "}\n", 2);
	return 0;
}

/* SHA-1 of the tail as dead_trim.lua computes it. */
static void
tail_sha1(const redisReply *tail, char out[41])
{
	size_t total = 0, off = 0;
	char *buf;

	for (size_t i = 0; i < tail->elements; i++)
		total += 24 + tail->element[i]->len;
	buf = xmalloc(total + 1);
	for (size_t i = 0; i < tail->elements; i++) {
		const redisReply *e = tail->element[i];
		off += (size_t)snprintf(buf + off, 24, "%zu:", e->len);
		memcpy(buf + off, e->str, e->len);
		off += e->len;
	}
	job_sha1_hex(buf, off, out);
	free(buf);
}

/* Append r->out; on failure cut the file back to where it was. */
static int
append(int fd, const struct round *r, const char *path)
{
	off_t start = lseek(fd, 0, SEEK_END);
	size_t off = 0;
	ssize_t n;

	while (off < r->out.len) {
		n = write(fd, r->out.s + off, r->out.len - off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		off += (size_t)n;
	}
	if (off == r->out.len && fsync(fd) == 0)
		return 0;
	log_error("dead-letter archive %s: %s; nothing trimmed", path,
	    strerror(errno != 0 ? errno : EIO));
	if (start != (off_t)-1 && ftruncate(fd, start) == -1)
		log_error("dead-letter archive %s: cannot cut a partial line: %s",
		    path, strerror(errno));
	return -1;
}

static long long
trim(redisContext *c, const struct queue_keys *k, struct round *r)
{
	int argc = 4 + r->nkeys;
	const char **argv = xcalloc((size_t)argc, sizeof(*argv));
	char n[24], sha[41];
	long long done;

	snprintf(n, sizeof(n), "%zu", r->tail->elements);
	tail_sha1(r->tail, sha);
	argv[0] = k->dead;
	argv[1] = k->protected;
	argv[2] = n;
	argv[3] = sha;
	for (int i = 0; i < r->nkeys; i++)
		argv[4 + i] = r->keys[i];
	redisReply *rep = queue_script(c, LUA_DEAD_TRIM, 2, argc, argv, NULL);
	free(argv);
	if (rep == NULL)
		return -1;
	done = rep->type == REDIS_REPLY_INTEGER ? rep->integer : 0;
	if (rep->type == REDIS_REPLY_ERROR)
		log_error("dead-letter trim failed: %s", rep->str);
	freeReplyObject(rep);
	return done;
}

static void
round_free(struct round *r)
{
	for (size_t i = 0; r->items != NULL && i < r->tail->elements; i++) {
		free((char *)r->items[i].key);
		cache_item_free(&r->items[i]);
	}
	free(r->items);
	free(r->owners);
	free(r->keys);
	buf_free(&r->out);
	freeReplyObject(r->tail);
}

/* Read the cache data of the entries and build the lines, oldest first. */
static int
build(redisContext *c, const char *prefix, const struct queue_config *q,
    struct round *r)
{
	size_t n = r->tail->elements, m = 0;
	struct cache_item *want = xcalloc(n, sizeof(*want));
	int rc;

	r->items = xcalloc(n, sizeof(*r->items));
	r->owners = xcalloc(n, sizeof(*r->owners));
	r->keys = xcalloc(n, sizeof(*r->keys));
	for (size_t i = 0; i < n; i++) {
		r->items[i].key = entry_cache_key(r->tail->element[i], prefix, q,
		    r->owners[i]);
		r->items[i].mode = CACHE_JSON;
		if (r->owners[i][0] != '\0')
			r->items[i].owner = r->owners[i];
		if (r->items[i].key != NULL)
			want[m++] = r->items[i];
	}
	rc = cache_read(c, want, (int)m);
	for (size_t i = 0, w = 0; i < n; i++) {
		if (r->items[i].key == NULL)
			continue;
		r->items[i] = want[w++];    /* takes its json */
		if (rc == 0 && r->items[i].state == CACHE_FOUND)
			r->keys[r->nkeys++] = (char *)r->items[i].key;
	}
	free(want);
	for (size_t i = n; rc == 0 && i-- > 0; )
		rc = put_line(r, q->name, r->tail->element[i], &r->items[i]);
	return rc;
}

/* One round of up to n entries: trimmed count, -1 connection failed, -2
 * the file failed. */
static long long
archive_round(redisContext *c, const char *prefix,
    const struct queue_config *q, const struct queue_keys *k, int fd,
    long n)
{
	struct round r;
	long long rc = -1;

	memset(&r, 0, sizeof(r));
	r.tail = redisCommand(c, "LRANGE %s %ld -1", k->dead, -n);
	if (r.tail == NULL)
		return -1;
	if (r.tail->type != REDIS_REPLY_ARRAY || r.tail->elements == 0)
		rc = 0;
	else if (build(c, prefix, q, &r) == 0)
		rc = append(fd, &r, q->dead_archive) == 0 ? trim(c, k, &r) : -2;
	round_free(&r);
	return rc;
}

static int
open_archive(const struct queue_config *q)
{
	char why[256];
	int fd = secure_open_file(q->dead_archive, O_WRONLY | O_APPEND |
	    O_CREAT, 0640, why, sizeof(why));

	if (fd == -1) {
		if (!warned_file)
			log_error("queue %s: cannot open dead_archive %s: %s; the "
			    "dead-letter list stays over dead_max", q->name,
			    q->dead_archive, why);
		warned_file = true;
		return -1;
	}
	if (flock(fd, LOCK_EX | LOCK_NB) == -1) {
		close(fd);      /* another worker of this host archives */
		return -1;
	}
	return fd;
}

static long long
over_max(redisContext *c, const struct queue_config *q,
    const struct queue_keys *k)
{
	redisReply *r = redisCommand(c, "LLEN %s", k->dead);
	long long excess;

	if (r == NULL)
		return -1;
	excess = r->type == REDIS_REPLY_INTEGER ? r->integer - q->dead_max : 0;
	if (excess > 0 && q->dead_archive[0] == '\0' && !warned_unset)
		log_warn("queue %s: the dead-letter list holds %lld entries, over "
		    "dead_max %ld; none is trimmed because dead_archive is not set "
		    "(entries are never dropped unarchived): set dead_archive, or "
		    "replay or purge them with ferryctl dead", q->name,
		    r->integer, q->dead_max);
	warned_unset = warned_unset || (excess > 0 && !q->dead_archive[0]);
	freeReplyObject(r);
	return excess > 0 ? excess : 0;
}

long long
dead_archive_run(redisContext *c, const char *prefix,
    const struct queue_config *q, const struct queue_keys *k)
{
	long long excess = over_max(c, q, k), total = 0, got = 0;
	int fd;

	if (excess <= 0 || q->dead_archive[0] == '\0')
		return excess < 0 ? -1 : 0;
	if ((fd = open_archive(q)) == -1)
		return 0;
	for (int i = 0; i < MAX_ROUNDS && excess > 0; i++) {
		got = archive_round(c, prefix, q, k, fd, excess < ROUND_ENTRIES ?
		    (long)excess : ROUND_ENTRIES);
		if (got <= 0)
			break;
		excess -= got;
		total += got;
	}
	close(fd);
	if (total > 0)
		log_notice("queue %s: archived %lld dead-letter entries to %s "
		    "(dead_max %ld)", q->name, total, q->dead_archive, q->dead_max);
	return got == -1 ? -1 : total;
}
