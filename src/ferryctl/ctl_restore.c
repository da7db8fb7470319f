/* ctl_restore.c - ferryctl dead restore QUEUE FILE: put the dead-letter
 * entries that workers archived (dead_max, src/redis/dead_archive.c) back in the
 * queue's requeue list as fresh wrappers that keep their stamps, like
 * `dead retry`, recreating
 * the cache keys whose data the archive lines carry (restore.lua: a key
 * that exists again is left alone). The file is locked as the workers
 * lock it, then read twice: first every line is checked (one line that is
 * not an archive entry, and nothing is pushed), then the jobs go in
 * atomic chunks. An archive is at-least-once: a line repeated (apart from
 * its "archived" time) is restored once. The file is not changed:
 * restoring it again enqueues the jobs again. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "cache.h"
#include "ctl.h"
#include "dead_entry.h"
#include "job.h"
#include "lua_scripts.h"
#include "sha1.h"
#include "util.h"

#define RESTORE_ERRORS_SHOWN 20

/* One archive line to push: the original document ("job", or decoded
 * from "job_base64"), its stamps and, when the line carries it, the data
 * of the job's cache key (held by doc). */
struct entry {
	json_t *doc;
	const char *job;
	size_t job_len;
	char *job_buf;          /* job decoded from base64, or NULL */
	json_t *stamps;         /* an array of strings, or NULL */
	json_t *batch;          /* an older archive's one stamp, or NULL */
	char *key;              /* NULL: nothing to recreate */
	json_t *cache;          /* a string, or an object or array of them */
};

/* Entries seen, by the first 8 bytes of the SHA-1 of the entry without
 * its "archived" time: open addressing, 0 = empty. */
struct seen {
	uint64_t *v;
	size_t n, cap;
};

struct restore {
	struct ctl *c;
	const struct queue_config *q;
	const char *path;
	struct queue_keys k;
	long lineno;
	long errors, other_queue, unreplayable, repeated;
	long keys_made, keys_kept;
	struct ctl_push push;   /* its done: jobs restored */
	struct seen seen;
	struct entry v[CTL_CHUNK];
	int n;
};

static void
line_error(struct restore *r, const char *what)
{
	if (++r->errors <= RESTORE_ERRORS_SHOWN)
		fprintf(stderr, "ferryctl: %s:%ld: not an archive entry: %s\n",
		    r->path, r->lineno, what);
}

/* Add h; true when it was there already. */
static bool
seen_add(struct seen *s, uint64_t h)
{
	if (s->n * 2 >= s->cap) {
		struct seen bigger = { NULL, 0, s->cap ? s->cap * 2 : 1024 };
		bigger.v = xcalloc(bigger.cap, sizeof(*bigger.v));
		for (size_t i = 0; i < s->cap; i++)
			if (s->v[i] != 0)
				seen_add(&bigger, s->v[i]);
		free(s->v);
		*s = bigger;
	}
	size_t i = (size_t)(h % s->cap);
	while (s->v[i] != 0 && s->v[i] != h)
		i = (i + 1) % s->cap;
	if (s->v[i] == h)
		return true;
	s->v[i] = h;
	s->n++;
	return false;
}

/* True when this entry (apart from its "archived" time) came before. */
static bool
repeated(struct restore *r, json_t *doc)
{
	json_t *copy = json_copy(doc);
	unsigned char digest[20];
	struct sha1_ctx ctx;
	uint64_t h;

	json_object_del(copy, "archived");
	char *text = json_dumps(copy, JSON_COMPACT | JSON_SORT_KEYS);
	sha1_init(&ctx);
	sha1_update(&ctx, text, strlen(text));
	sha1_final(&ctx, digest);
	free(text);
	json_decref(copy);
	memcpy(&h, digest, sizeof(h));
	return seen_add(&r->seen, h + (h == 0));
}

/* The archived data of a cache key: a string, or a non-empty object or
 * array of strings (what src/redis/cache.c reads); NULL when it is one. */
static const char *
cache_invalid(json_t *cache)
{
	const char *field;
	json_t *v;
	size_t i;

	if (json_is_string(cache))
		return NULL;
	if (json_is_object(cache) && json_object_size(cache) > 0) {
		json_object_foreach(cache, field, v)
			if (!json_is_string(v))
				return "\"cache\" holds a hash value that is not a string";
		return NULL;
	}
	if (json_is_array(cache) && json_array_size(cache) > 0) {
		json_array_foreach(cache, i, v)
			if (!json_is_string(v))
				return "\"cache\" holds a list value that is not a string";
		return NULL;
	}
	return "\"cache\" is not a string, a hash or a list";
}

/* The job of a line: "job" (a JSON string) or "job_base64" (the entry as
 * src/format/dead_entry.c shows it). 0, with the bytes in *p (*buf malloc'd when
 * decoded), or -1 after a line error. */
static int
line_job(struct restore *r, json_t *doc, const char **p, size_t *n,
    char **buf)
{
	const char *why;

	if (dead_entry_job_bytes(doc, p, n, buf, &why) == 0)
		return 0;
	line_error(r, why);
	return -1;
}

/* "stamps": absent or an array of strings. */
static bool
stamps_valid(json_t *stamps)
{
	json_t *v;
	size_t i;

	if (stamps == NULL)
		return true;
	if (!json_is_array(stamps))
		return false;
	json_array_foreach(stamps, i, v)
		if (!json_is_string(v))
			return false;
	return true;
}

/* The cache key whose data the line carries (malloc'd), NULL and *why
 * when that data cannot be restored. */
static char *
line_cache_key(struct restore *r, const char *job, size_t job_len,
    json_t *cache, const char **why)
{
	char *key = NULL;
	struct job j;

	job_parse(&j, job, job_len, 0);
	if (j.cache_key == NULL)
		*why = "\"cache\" data for a job that names no cache key";
	else if (!cache_key_allowed(j.cache_key, r->c->cfg->redis_prefix,
	    r->q))
		*why = "\"cache\" data for a key outside the queue's cache "
		    "space and its cache_key_prefixes";
	else if ((*why = cache_invalid(cache)) == NULL)
		key = xstrdup(j.cache_key);
	job_free(&j);
	return key;
}

/* Check one line; with `take`, add its job to r->v. 1: a job to restore;
 * 0: skipped (blank, another queue, repeated, not replayable); -1: not an
 * archive entry. */
static int
entry_read(struct restore *r, const char *line, size_t len, bool take)
{
	json_error_t err;
	json_t *doc, *queue, *cache, *stamps, *batch;
	const char *why = NULL, *job;
	char *key = NULL, *job_buf;
	size_t job_len;

	if (strspn(line, " \t\r\n") == len)
		return 0;
	doc = json_loadb(line, len, JSON_ALLOW_NUL, &err);
	queue = json_object_get(doc, "queue");
	cache = json_object_get(doc, "cache");
	stamps = json_object_get(doc, "stamps");
	batch = json_object_get(doc, "batch");
	if (!json_is_object(doc) || !json_is_string(queue)) {
		line_error(r, doc == NULL ? err.text : "no \"queue\" string");
		json_decref(doc);
		return -1;
	}
	if (json_string_length(queue) != strlen(r->q->name) ||
	    strcmp(json_string_value(queue), r->q->name) != 0) {
		r->other_queue += take;
		json_decref(doc);
		return 0;
	}
	if (json_object_get(doc, "raw_hex") != NULL &&
	    json_object_get(doc, "job") == NULL &&
	    json_object_get(doc, "job_base64") == NULL) {
		if (take)
			fprintf(stderr, "ferryctl: %s:%ld: the dead entry was "
			    "malformed (raw_hex): not replayable, skipped\n",
			    r->path, r->lineno);
		r->unreplayable += take;
		json_decref(doc);
		return 0;
	}
	if (line_job(r, doc, &job, &job_len, &job_buf) == -1) {
		json_decref(doc);
		return -1;
	}
	if (!stamps_valid(stamps))
		why = "\"stamps\" is not an array of strings";
	else if (batch != NULL && !json_is_string(batch))
		why = "\"batch\" is not a string";
	else if (cache != NULL)
		key = line_cache_key(r, job, job_len, cache, &why);
	if (why != NULL) {
		line_error(r, why);
		free(job_buf);
		json_decref(doc);
		return -1;
	}
	if (repeated(r, doc)) {
		r->repeated += take;
		free(key);
		free(job_buf);
		json_decref(doc);
		return 0;
	}
	if (!take) {
		free(key);
		free(job_buf);
		json_decref(doc);
		return 1;
	}
	struct entry *e = &r->v[r->n++];
	e->doc = doc;
	e->job = job;
	e->job_len = job_len;
	e->job_buf = job_buf;
	e->stamps = stamps;
	e->batch = batch;
	e->key = key;
	e->cache = key != NULL ? cache : NULL;
	return 1;
}

static void
entries_free(struct restore *r)
{
	for (int i = 0; i < r->n; i++) {
		free(r->v[i].key);
		free(r->v[i].job_buf);
		json_decref(r->v[i].doc);
	}
	r->n = 0;
}

/* The restore.lua arguments of the chunk: KEYS requeue, stats, protected,
 * cache keys; ARGV per job. */
struct args {
	const char **v;
	size_t *len;
	char (*num)[24];
	size_t n, cap, nnum;
};

static void
arg(struct args *a, const char *s, size_t len)
{
	if (a->n == a->cap) {
		a->cap = a->cap ? a->cap * 2 : 256;
		a->v = xrealloc(a->v, a->cap * sizeof(*a->v));
		a->len = xrealloc(a->len, a->cap * sizeof(*a->len));
	}
	a->v[a->n] = s;
	a->len[a->n++] = len;
}

static void
arg_num(struct args *a, long v)
{
	char *s = a->num[a->nnum++];
	snprintf(s, 24, "%ld", v);
	arg(a, s, strlen(s));
}

static void
arg_json_string(struct args *a, json_t *s)
{
	arg(a, json_string_value(s), json_string_length(s));
}

static void
build_args(struct restore *r, struct args *a)
{
	int nkeys = 0;
	const char *field;
	json_t *v;
	size_t i;

	arg(a, r->k.requeue, strlen(r->k.requeue));
	arg(a, r->k.stats, strlen(r->k.stats));
	arg(a, r->k.protected, strlen(r->k.protected));
	for (int e = 0; e < r->n; e++)
		if (r->v[e].key != NULL)
			arg(a, r->v[e].key, strlen(r->v[e].key));
	for (int e = 0; e < r->n; e++) {
		struct entry *en = &r->v[e];
		json_t *c = en->cache;
		arg(a, en->job, en->job_len);
		if (en->stamps != NULL) {
			arg_num(a, (long)json_array_size(en->stamps));
			json_array_foreach(en->stamps, i, v)
				arg_json_string(a, v);
		} else if (en->batch != NULL) {
			arg_num(a, 1);
			arg_json_string(a, en->batch);
		} else {
			arg_num(a, 0);
		}
		arg_num(a, en->key != NULL ? 4 + nkeys++ : 0);
		if (c == NULL) {
			arg(a, "", 0);
			arg_num(a, 0);
		} else if (json_is_string(c)) {
			arg(a, "string", 6);
			arg_num(a, 1);
			arg_json_string(a, c);
		} else if (json_is_object(c)) {
			arg(a, "hash", 4);
			arg_num(a, 2 * (long)json_object_size(c));
			json_object_foreach(c, field, v) {
				arg(a, field, strlen(field));
				arg_json_string(a, v);
			}
		} else {
			arg(a, "list", 4);
			arg_num(a, (long)json_array_size(c));
			json_array_foreach(c, i, v)
				arg_json_string(a, v);
		}
	}
}

/* restore.lua on the chunk in r->v; *restored + what it restored. */
static int
push_chunk(struct restore *r, long long *restored)
{
	struct args a = { 0 };

	a.num = xcalloc((size_t)r->n * 3, sizeof(*a.num));
	build_args(r, &a);
	int nkeys = 3;
	for (int e = 0; e < r->n; e++)
		nkeys += r->v[e].key != NULL;
	redisReply *rep = queue_script(r->c->rc, LUA_RESTORE, nkeys, (int)a.n,
	    a.v, a.len);
	free(a.v);
	free(a.len);
	free(a.num);
	if (rep == NULL) {
		fprintf(stderr, "ferryctl: the connection to redis at %s was lost "
		    "after a chunk of %d jobs was sent: it may or may not have "
		    "gone in (see `ferryctl stats %s`, counter replayed)\n",
		    r->c->addr, r->n, r->q->name);
		return CTL_EX_UNAVAILABLE;
	}
	if (rep->type == REDIS_REPLY_ERROR && strncmp(rep->str, "OOM", 3) == 0) {
		fprintf(stderr, "ferryctl: redis at %s is full (%s): the next %d "
		    "jobs were not restored; drain the queue or raise maxmemory, "
		    "then restore again\n", r->c->addr, rep->str, r->n);
		freeReplyObject(rep);
		return CTL_EX_TEMPFAIL;
	}
	if (rep->type != REDIS_REPLY_ARRAY || rep->elements != 3)
		return ctl_redis_fail(r->c, "restore.lua", rep);
	*restored += rep->element[0]->integer;
	r->keys_made += rep->element[1]->integer;
	r->keys_kept += rep->element[2]->integer;
	freeReplyObject(rep);
	return 0;
}

/* ctl_push_send_fn: the chunk of r->v (n jobs), then it is let go. */
static int
send_chunk(void *arg, size_t n, long long *went)
{
	struct restore *r = arg;
	int rc = push_chunk(r, went);

	(void)n;
	entries_free(r);
	return rc;
}

/* One pass over the file: check (take = false) or push (take = true). */
static int
pass(struct restore *r, FILE *f, bool take, long *jobs)
{
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;
	int rc = 0;

	rewind(f);
	free(r->seen.v);
	memset(&r->seen, 0, sizeof(r->seen));
	for (r->lineno = 1; rc == 0 && (len = getline(&line, &cap, f)) != -1;
	    r->lineno++) {
		if (take && ctl_push_full(&r->push, (size_t)len) &&
		    (rc = ctl_push_flush(&r->push, send_chunk, r)) != 0)
			break;
		if (entry_read(r, line, (size_t)len, take) != 1)
			continue;
		if (take)
			ctl_push_add(&r->push, (size_t)len);
		else
			(*jobs)++;
	}
	if (rc == 0 && ferror(f)) {
		fprintf(stderr, "ferryctl: reading %s: %s\n", r->path,
		    strerror(errno));
		rc = CTL_EX_IOERR;
	}
	if (rc == 0 && take)
		rc = ctl_push_flush(&r->push, send_chunk, r);
	entries_free(r);
	if (take)
		ctl_push_end(&r->push);
	free(line);
	return rc;
}

/* The file, locked as a worker locks dead_archive: a worker of this host
 * writing to it is waited for, and none starts while we read. */
static FILE *
open_locked(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	FILE *f;

	if (fd == -1) {
		fprintf(stderr, "ferryctl: cannot read %s: %s\n", path,
		    strerror(errno));
		return NULL;
	}
	if (flock(fd, LOCK_EX | LOCK_NB) == -1) {
		fprintf(stderr, "ferryctl: %s is being written by a worker: "
		    "waiting for it\n", path);
		flock(fd, LOCK_EX);
	}
	if ((f = fdopen(fd, "r")) == NULL)
		close(fd);
	return f;
}

static void
report(struct restore *r)
{
	printf("restored %lld job%s to queue %s (%ld cache key%s recreated, %ld "
	    "already there)", r->push.done, r->push.done == 1 ? "" : "s",
	    r->q->name, r->keys_made, r->keys_made == 1 ? "" : "s",
	    r->keys_kept);
	if (r->repeated > 0)
		printf("; %ld repeated line%s restored once", r->repeated,
		    r->repeated == 1 ? "" : "s");
	if (r->other_queue > 0)
		printf("; %ld entr%s of other queues skipped", r->other_queue,
		    r->other_queue == 1 ? "y" : "ies");
	if (r->unreplayable > 0)
		printf("; %ld not replayable", r->unreplayable);
	printf("\n");
	if (r->push.done > 0)
		fprintf(stderr, "ferryctl: %s is unchanged: restoring it again "
		    "would enqueue these jobs again\n", r->path);
}

int
ctl_dead_restore(struct ctl *c, const struct queue_config *q,
    const char *path)
{
	struct restore *r = xcalloc(1, sizeof(*r));
	FILE *f = open_locked(path);
	long jobs = 0;
	int rc = f == NULL ? CTL_EX_IOERR : 0;

	r->c = c;
	r->q = q;
	r->path = path;
	queue_keys_init(&r->k, c->cfg->redis_prefix, q->name);
	if (rc == 0)
		rc = pass(r, f, false, &jobs);
	if (rc == 0 && r->errors > 0) {
		if (r->errors > RESTORE_ERRORS_SHOWN)
			fprintf(stderr, "ferryctl: ... and %ld more\n",
			    r->errors - RESTORE_ERRORS_SHOWN);
		fprintf(stderr, "ferryctl: %s has %ld line%s that %s: nothing was "
		    "restored\n", path, r->errors, r->errors == 1 ? "" : "s",
		    r->errors == 1 ? "is not an archive entry" :
		    "are not archive entries");
		rc = CTL_EX_DATAERR;
	}
	if (rc == 0 && ctl_redis_for(c, q->name) == NULL)
		rc = CTL_EX_UNAVAILABLE;
	r->push = (struct ctl_push){ .c = c, .queue = q->name,
	    .verb = "restored", .total = jobs,
	    .progress = jobs > CTL_CHUNK && ctl_progress_wanted(true) };
	if (rc == 0)
		rc = pass(r, f, true, &jobs);
	if (rc == 0 && r->errors > 0) {    /* the file changed under us */
		fprintf(stderr, "ferryctl: %s changed while it was restored\n",
		    path);
		rc = CTL_EX_DATAERR;
	}
	if (rc != 0 && r->push.done > 0)
		fprintf(stderr, "ferryctl: %lld of %ld jobs were restored to queue "
		    "%s (in whole chunks, oldest first); the others were not\n",
		    r->push.done, jobs, q->name);
	if (rc == 0)
		report(r);
	if (f != NULL)
		fclose(f);              /* and the lock */
	free(r->seen.v);
	free(r);
	return rc;
}
