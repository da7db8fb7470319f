/* ctl_restore.c - ferryctl dead restore QUEUE FILE: put the dead-letter
 * entries that workers archived (dead_max, src/dead_archive.c) back in the
 * queue's ready list with fresh counters, like `dead retry`, recreating
 * the cache keys whose data the archive lines carry. The file is read
 * twice: first every line is checked (one line that is not an archive
 * entry, and nothing is pushed), then the jobs go in whole transactions
 * of up to CTL_CHUNK. The file is not changed: restoring it again
 * enqueues the jobs again. */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache.h"
#include "ctl.h"
#include "job.h"
#include "util.h"

#define RESTORE_ERRORS_SHOWN 20

/* One archive line to push: the original document and, when the line
 * carries it, the data of the job's cache key. */
struct entry {
	char *job;
	size_t job_len;
	char *key;              /* NULL: nothing to recreate */
	json_t *cache;
};

struct restore {
	struct ctl *c;
	const struct queue_config *q;
	const char *path;
	struct queue_keys k;
	long lineno;
	long errors, other_queue, unreplayable, restored, keys_made, keys_kept;
	struct entry v[CTL_CHUNK];
	int n;
};

static void
line_error(struct restore *r, const char *fmt, const char *what)
{
	if (++r->errors <= RESTORE_ERRORS_SHOWN) {
		fprintf(stderr, "ferryctl: %s:%ld: ", r->path, r->lineno);
		fprintf(stderr, fmt, what);
		fprintf(stderr, "\n");
	}
}

/* Check one line; with `take`, add its job to r->v. 1: a job of this
 * queue; 0: skipped (another queue, blank, or not replayable); -1: not an
 * archive line. */
static int
entry_read(struct restore *r, const char *line, size_t len, bool take)
{
	json_error_t err;
	json_t *doc, *queue, *job, *cache;
	int rc = -1;

	if (strspn(line, " \t\r\n") == len)
		return 0;
	doc = json_loadb(line, len, JSON_ALLOW_NUL, &err);
	queue = json_object_get(doc, "queue");
	job = json_object_get(doc, "job");
	cache = json_object_get(doc, "cache");
	if (!json_is_object(doc) || !json_is_string(queue)) {
		line_error(r, "not an archive entry (%s)", doc == NULL ? err.text :
		    "no \"queue\" string");
	} else if (strcmp(json_string_value(queue), r->q->name) != 0) {
		r->other_queue += take;
		rc = 0;
	} else if (json_object_get(doc, "raw_hex") != NULL && job == NULL) {
		if (take)
			fprintf(stderr, "ferryctl: %s:%ld: the dead entry was not a "
			    "JSON object (raw_hex): not replayable, skipped\n",
			    r->path, r->lineno);
		r->unreplayable += take;
		rc = 0;
	} else if (!json_is_string(job)) {
		line_error(r, "not an archive entry (%s)", "no \"job\" string");
	} else {
		rc = 1;
	}
	if (rc == 1 && take) {
		struct entry *e = &r->v[r->n++];
		struct job j;
		e->job_len = json_string_length(job);
		e->job = xmalloc(e->job_len + 1);
		memcpy(e->job, json_string_value(job), e->job_len + 1);
		e->key = NULL;
		e->cache = NULL;
		job_parse(&j, e->job, e->job_len, 0);
		if (cache != NULL && j.cache_key != NULL &&
		    !cache_key_foreign(j.cache_key, r->c->cfg->redis_prefix,
		    r->q->name)) {
			e->key = xstrdup(j.cache_key);
			e->cache = json_incref(cache);
		}
		job_free(&j);
	}
	json_decref(doc);
	return rc;
}

static void
entries_free(struct restore *r)
{
	for (int i = 0; i < r->n; i++) {
		free(r->v[i].job);
		free(r->v[i].key);
		json_decref(r->v[i].cache);
	}
	r->n = 0;
}

/* Argument `i` of a command: a value of the archived cache data as Redis
 * text, a string as itself (NUL bytes included), anything else as its
 * JSON. */
static void
put_arg(const char **argv, size_t *lens, char **owned, size_t i, json_t *v)
{
	if (json_is_string(v)) {
		argv[i] = json_string_value(v);
		lens[i] = json_string_length(v);
	} else {
		owned[i] = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
		argv[i] = owned[i];
		lens[i] = strlen(owned[i]);
	}
}

/* Queue the command that recreates key from its archived data (a string:
 * SET; an object: HSET; an array: RPUSH); false when it cannot be (an
 * empty hash or list does not exist in Redis). */
static bool
append_cache(redisContext *redis, const char *key, json_t *data)
{
	size_t n = json_is_object(data) ? 2 + 2 * json_object_size(data) :
	    json_is_array(data) ? 2 + json_array_size(data) : 3;
	const char **argv = xcalloc(n, sizeof(*argv));
	size_t *lens = xcalloc(n, sizeof(*lens));
	char **owned = xcalloc(n, sizeof(*owned));
	size_t argc = 2, i;
	const char *field;
	json_t *v;

	argv[1] = key;
	lens[1] = strlen(key);
	if (json_is_object(data)) {
		argv[0] = "HSET";
		json_object_foreach(data, field, v) {
			argv[argc] = field;
			lens[argc++] = strlen(field);
			put_arg(argv, lens, owned, argc++, v);
		}
	} else if (json_is_array(data)) {
		argv[0] = "RPUSH";
		json_array_foreach(data, i, v)
			put_arg(argv, lens, owned, argc++, v);
	} else {
		argv[0] = "SET";
		put_arg(argv, lens, owned, argc++, data);
	}
	lens[0] = strlen(argv[0]);
	if (argc > 2)
		redisAppendCommandArgv(redis, (int)argc, argv, lens);
	for (i = 0; i < n; i++)
		free(owned[i]);
	free(argv);
	free(lens);
	free(owned);
	return argc > 2;
}

/* Which cache keys of r->v do not exist (missing[i] = 1). */
static int
missing_keys(struct restore *r, char *missing)
{
	redisReply *rep;

	for (int i = 0; i < r->n; i++)
		if (r->v[i].key != NULL)
			redisAppendCommand(r->c->rc, "EXISTS %s", r->v[i].key);
	for (int i = 0; i < r->n; i++) {
		missing[i] = 0;
		if (r->v[i].key == NULL)
			continue;
		if (redisGetReply(r->c->rc, (void **)&rep) != REDIS_OK ||
		    !ctl_reply_ok(rep))
			return ctl_redis_fail(r->c, "EXISTS of a cache key",
			    r->c->rc->err ? NULL : rep);
		missing[i] = rep->integer == 0;
		freeReplyObject(rep);
	}
	return 0;
}

/* MULTI, the missing cache keys, LPUSH of the jobs, the counter, EXEC. */
static int
push_chunk(struct restore *r)
{
	char missing[CTL_CHUNK];
	redisContext *rc = r->c->rc;
	redisReply *rep;
	int status = ctl_memory_allows(r->c), sent = 0, made = 0;

	if (status != 0 || (status = missing_keys(r, missing)) != 0)
		return status;
	redisAppendCommand(rc, "MULTI");
	sent++;
	for (int i = 0; i < r->n; i++) {
		if (r->v[i].key == NULL)
			continue;
		if (!missing[i]) {
			r->keys_kept++;   /* newer data is there: left alone */
		} else if (append_cache(rc, r->v[i].key, r->v[i].cache)) {
			sent++;
			made++;
		}
	}
	for (int i = 0; i < r->n; i++) {
		redisAppendCommand(rc, "LPUSH %s %b", r->k.ready, r->v[i].job,
		    r->v[i].job_len);
		sent++;
	}
	redisAppendCommand(rc, "HINCRBY %s replayed %d", r->k.stats, r->n);
	redisAppendCommand(rc, "EXEC");
	sent += 2;
	for (int i = 0; i < sent; i++) {
		if (redisGetReply(rc, (void **)&rep) != REDIS_OK)
			return ctl_redis_fail(r->c, "the restore transaction", NULL);
		bool bad = !ctl_reply_ok(rep) || (i == sent - 1 &&
		    rep->type != REDIS_REPLY_ARRAY);
		for (size_t e = 0; !bad && i == sent - 1 && e < rep->elements; e++)
			bad = rep->element[e]->type == REDIS_REPLY_ERROR;
		if (bad)
			return ctl_redis_fail(r->c, "the restore transaction", rep);
		freeReplyObject(rep);
	}
	r->restored += r->n;
	r->keys_made += made;
	return 0;
}

/* One pass over the file: check (take = false) or push (take = true). */
static int
pass(struct restore *r, bool take, long *jobs)
{
	FILE *f = fopen(r->path, "r");
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;
	int rc = 0;

	if (f == NULL) {
		fprintf(stderr, "ferryctl: cannot read %s: %s\n", r->path,
		    strerror(errno));
		return CTL_EX_IOERR;
	}
	bool progress = take && *jobs > CTL_CHUNK && ctl_progress_wanted(true);
	for (r->lineno = 1; rc == 0 && (len = getline(&line, &cap, f)) != -1;
	    r->lineno++) {
		if (entry_read(r, line, (size_t)len, take) == 1 && !take)
			(*jobs)++;
		if (take && r->n == CTL_CHUNK && (rc = push_chunk(r)) == 0 &&
		    progress)
			fprintf(stderr, "\rferryctl: restored %ld of %ld jobs",
			    r->restored, *jobs);
		if (take && r->n == CTL_CHUNK)
			entries_free(r);
	}
	if (rc == 0 && ferror(f)) {
		fprintf(stderr, "ferryctl: reading %s: %s\n", r->path,
		    strerror(errno));
		rc = CTL_EX_IOERR;
	}
	if (rc == 0 && take && r->n > 0)
		rc = push_chunk(r);
	entries_free(r);
	if (progress)
		fprintf(stderr, "\n");
	free(line);
	fclose(f);
	return rc;
}

int
ctl_dead_restore(struct ctl *c, const struct queue_config *q,
    const char *path)
{
	struct restore *r = xcalloc(1, sizeof(*r));
	long jobs = 0;
	int rc;

	r->c = c;
	r->q = q;
	r->path = path;
	queue_keys_init(&r->k, c->cfg->redis_prefix, q->name);
	if ((rc = pass(r, false, &jobs)) == 0 && r->errors > 0) {
		if (r->errors > RESTORE_ERRORS_SHOWN)
			fprintf(stderr, "ferryctl: ... and %ld more\n",
			    r->errors - RESTORE_ERRORS_SHOWN);
		fprintf(stderr, "ferryctl: %s has %ld line%s that %s: nothing was "
		    "restored\n", path, r->errors, r->errors == 1 ? "" : "s",
		    r->errors == 1 ? "is not an archive entry" :
		    "are not archive entries");
		rc = CTL_EX_DATAERR;
	}
	if (rc == 0 && ctl_redis(c) == NULL)
		rc = CTL_EX_UNAVAILABLE;
	if (rc == 0)
		rc = pass(r, true, &jobs);
	if (rc != 0 && r->restored > 0)
		fprintf(stderr, "ferryctl: %ld of %ld jobs were restored to queue "
		    "%s in whole transactions of %d; the others were not\n",
		    r->restored, jobs, q->name, CTL_CHUNK);
	if (rc == 0) {
		printf("restored %ld job%s to queue %s (%ld cache key%s "
		    "recreated, %ld already there)", r->restored,
		    r->restored == 1 ? "" : "s", q->name, r->keys_made,
		    r->keys_made == 1 ? "" : "s", r->keys_kept);
		if (r->other_queue > 0)
			printf("; %ld entr%s of other queues skipped",
			    r->other_queue, r->other_queue == 1 ? "y" : "ies");
		if (r->unreplayable > 0)
			printf("; %ld not replayable", r->unreplayable);
		printf("\n");
		if (r->restored > 0)
			fprintf(stderr, "ferryctl: %s is unchanged: restoring it "
			    "again would enqueue these jobs again\n", path);
	}
	free(r);
	return rc;
}
