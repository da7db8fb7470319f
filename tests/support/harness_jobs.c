/* harness_jobs.c - jobs in and results out of a queue under test
 * (harness.h): pushing, the recorder handler, the dead list, the jobs
 * held, owners. */
#include "harness.h"
#include "wrapper.h"

#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void
h_jobs_file(struct ferryd *f, int total, char *input, size_t size)
{
	snprintf(input, size, "%s/jobs.jsonl", f->dir);
	FILE *fp = fopen(input, "w");
	cr_assert_not_null(fp);
	for (int i = 0; i < total; i++)
		fprintf(fp, "{\"id\":\"r%d\",\"data\":[{\"n\":%d}]}\n", i, i);
	fclose(fp);
}

/* Push jobs {"n":first} .. {"n":first+n-1}, pipelined. */
void
h_push_jobs(struct ferryd *f, const char *queue, int first, int n)
{
	char key[128];

	snprintf(key, sizeof(key), "ferry:{%s}:ready", queue);
	freeReplyObject(h_redis(f, "PING"));    /* reconnects if needed */
	for (int i = first; i < first + n; i++)
		redisAppendCommand(f->rc, "LPUSH %s {\"n\":%d}", key, i);
	for (int i = 0; i < n; i++) {
		redisReply *r;
		cr_assert_eq(redisGetReply(f->rc, (void **)&r), REDIS_OK);
		freeReplyObject(r);
	}
}

/* An exec handler that appends each job's document to `out` and answers
 * ok. Lines look like {"id":"ID","attempts":..,"recoveries":..,"job":DOC}. */
void
h_write_recorder(struct ferryd *f, char *cmd, size_t size)
{
	char path[400];

	snprintf(path, sizeof(path), "%s/record.sh", f->dir);
	h_write_file(path,
	    "#!/bin/sh\n"
	    "exec awk -F'\"' -v out=%s/done.txt '{ print $0 >> out; "
	    "print \"ok \" $4; fflush() }'\n", f->dir);
	chmod(path, 0755);
	snprintf(cmd, size, "%s", path);
}

/* How many distinct {"n":i} with 0 <= i < n the recorder saw. */
int
h_distinct_done(struct ferryd *f, int n)
{
	char path[400], *seen = calloc((size_t)n, 1);
	int count = 0;

	snprintf(path, sizeof(path), "%s/done.txt", f->dir);
	char *text = h_read_file(path);
	for (char *p = text; (p = strstr(p, "\"job\":{\"n\":")) != NULL; p++) {
		int i = atoi(p + 11);
		if (i >= 0 && i < n && !seen[i]) {
			seen[i] = 1;
			count++;
		}
	}
	free(text);
	free(seen);
	return count;
}

void
h_assert_queue_empty(struct ferryd *f, const char *q)
{
	cr_assert_eq(h_redis_int(f, "LLEN ferry:{%s}:ready", q), 0);
	cr_assert_eq(h_redis_int(f, "LLEN ferry:{%s}:requeue", q), 0);
	cr_assert_eq(h_redis_int(f, "ZCARD ferry:{%s}:delayed", q), 0);
	redisReply *r = h_redis(f, "KEYS ferry:{%s}:proc:*", q);
	for (size_t i = 0; i < r->elements; i++)
		cr_assert_eq(h_redis_int(f, "LLEN %s", r->element[i]->str), 0,
		    "%s is not empty", r->element[i]->str);
	freeReplyObject(r);
}

/* The dead-letter entries of q, parsed. */
json_t *
h_dead_entries(struct ferryd *f, const char *q)
{
	json_t *all = json_array();
	redisReply *r = h_redis(f, "LRANGE ferry:{%s}:dead 0 -1", q);
	for (size_t i = 0; i < r->elements; i++) {
		struct wrapper w;
		cr_assert_eq(wrapper_parse(r->element[i]->str, r->element[i]->len,
		    WRAPPER_DEAD, &w), 0, "malformed dead entry: %s",
		    r->element[i]->str);
		json_t *e = json_object(), *stamps = json_array();
		const struct { const char *k; struct wrapper_str v; } strs[] = {
			{ "reason", w.reason }, { "worker", w.worker }, { "id", w.id },
			{ "first_error", w.first_error },
			{ "last_error", w.last_error },
		};
		for (size_t k = 0; k < sizeof(strs) / sizeof(strs[0]); k++) {
			char *t = wrapper_str_text(strs[k].v);
			if (t != NULL)
				json_object_set_new(e, strs[k].k, json_string(t));
			free(t);
		}
		for (int k = 0; k < w.nstamps; k++) {
			char *t = wrapper_str_text(w.stamps[k]);
			json_array_append_new(stamps, json_string(t));
			free(t);
		}
		json_object_set_new(e, "stamps", stamps);
		json_object_set_new(e, "attempts", json_integer(w.attempts));
		json_object_set_new(e, "recoveries", json_integer(w.recoveries));
		json_object_set_new(e, "time", json_integer(w.time));
		/* the document's bytes as a string (NULL member if not UTF-8) */
		json_t *doc = json_stringn(w.doc, w.doc_len);
		json_object_set_new(e, "job", doc ? doc : json_null());
		wrapper_free(&w);
		json_array_append_new(all, e);
	}
	freeReplyObject(r);
	return all;
}

/* Every element of requeue and of the processing lists, in one step (a
 * fetch moves jobs from one to the other). KEYS[1]: requeue. */
#define HELD_LUA "local all = redis.call('LRANGE', KEYS[1], 0, -1) " \
	"local procs = string.sub(KEYS[1], 1, -8) .. 'proc:*' " \
	"for _, k in ipairs(redis.call('KEYS', procs)) do " \
	"for _, e in ipairs(redis.call('LRANGE', k, 0, -1)) do " \
	"all[#all + 1] = e end end return all"

int
h_held_jobs(struct ferryd *f, const char *q, int recoveries)
{
	redisReply *r = h_redis(f, "EVAL %s 1 ferry:{%s}:requeue", HELD_LUA, q);
	int n = 0;

	for (size_t i = 0; i < r->elements; i++) {
		const char *el = r->element[i]->str;
		struct wrapper w;
		long long times = 0;    /* a document from ready: never */
		if (strncmp(el, WRAPPER_HEAD, strlen(WRAPPER_HEAD)) == 0) {
			cr_assert_eq(wrapper_parse(el, r->element[i]->len,
			    WRAPPER_JOB, &w), 0, "malformed wrapper: %s", el);
			times = w.recoveries;
			wrapper_free(&w);
		}
		n += times == recoveries;
	}
	freeReplyObject(r);
	return n;
}

int
h_live_owners(struct ferryd *f, const char *q)
{
	redisReply *r = h_redis(f, "HVALS ferry:{%s}:owners", q);
	int n = 0;

	for (size_t i = 0; i < r->elements; i++)
		n += strncmp(r->element[i]->str, "dead:", 5) != 0;
	freeReplyObject(r);
	return n;
}

const char *
h_jstr(json_t *o, const char *key)
{
	const char *s = json_string_value(json_object_get(o, key));
	return s != NULL ? s : "(none)";
}

/* Each cache key queue q's protected hash counts (src/redis/lua/common.lua),
 * read in one step: an entry of its own gives its key and count; a
 * group's entry ("JOBS N BYTES LOST") gives each key of the group that
 * exists, counted 1, and "<group>.?" once for each job more than that (a
 * key lost). */
static const char protected_lua[] =
	"local out = {}\n"
	"local all = redis.call('HGETALL', KEYS[1])\n"
	"for i = 1, #all, 2 do\n"
	"  local f, v = all[i], all[i + 1]\n"
	"  local c, n = string.match(v, '^(%d+) (%d+) %d+ %d+$')\n"
	"  if c then\n"
	"    local seen = 0\n"
	"    for j = 0, tonumber(n) - 1 do\n"
	"      local k = f .. '.' .. j\n"
	"      if redis.call('EXISTS', k) == 1 then\n"
	"        out[#out + 1] = k\n"
	"        out[#out + 1] = 1\n"
	"        seen = seen + 1\n"
	"      end\n"
	"    end\n"
	"    for j = seen + 1, tonumber(c) do\n"
	"      out[#out + 1] = f .. '.?'\n"
	"      out[#out + 1] = 1\n"
	"    end\n"
	"  else\n"
	"    out[#out + 1] = f\n"
	"    out[#out + 1] = tonumber(v)\n"
	"  end\n"
	"end\n"
	"return out\n";

redisReply *
h_protected(struct ferryd *f, const char *q)
{
	char key[128];

	snprintf(key, sizeof(key), "ferry:{%s}:protected", q);
	redisReply *r = redisCommand(f->rc, "EVAL %s 1 %s", protected_lua, key);
	cr_assert(r != NULL && r->type == REDIS_REPLY_ARRAY,
	    "reading %s failed: %s", key, r != NULL && r->str != NULL ? r->str :
	    "no reply");
	return r;
}

/* How many jobs the protected hash of q counts for cache key `key` (0:
 * none). */
long long
h_protected_count(struct ferryd *f, const char *q, const char *key)
{
	redisReply *r = h_protected(f, q);
	long long n = 0;

	for (size_t i = 0; i + 1 < r->elements; i += 2)
		if (strcmp(r->element[i]->str, key) == 0)
			n = r->element[i + 1]->integer;
	freeReplyObject(r);
	return n;
}

void
h_lpush_made(struct ferryd *d, const char *key, int from, int to,
    char *(*make)(int))
{
	enum { PER = 1000 };
	const char *argv[PER + 2] = { "LPUSH", key };
	size_t lens[PER + 2] = { 5, strlen(key) };
	char *els[PER];
	int sent = 0;

	for (int at = from; at < to; at += PER) {
		int m = to - at < PER ? to - at : PER;
		for (int j = 0; j < m; j++) {
			els[j] = make(at + j);
			argv[j + 2] = els[j];
			lens[j + 2] = strlen(els[j]);
		}
		cr_assert_eq(redisAppendCommandArgv(d->rc, m + 2, argv, lens),
		    REDIS_OK);
		for (int j = 0; j < m; j++)
			free(els[j]);
		sent++;
	}
	for (int i = 0; i < sent; i++) {
		redisReply *r;
		cr_assert_eq(redisGetReply(d->rc, (void **)&r), REDIS_OK);
		cr_assert_eq(r->type, REDIS_REPLY_INTEGER, "LPUSH %s: %s", key,
		    r->type == REDIS_REPLY_ERROR ? r->str : "not an integer");
		freeReplyObject(r);
	}
}

double
h_id_score(struct ferryd *f, const char *queue, const char *id)
{
	redisReply *r = h_redis(f, "ZSCORE ferry:{%s}:ids %s", queue, id);
	double v = r->type == REDIS_REPLY_STRING ? strtod(r->str, NULL) : NAN;

	freeReplyObject(r);
	return v;
}

void
h_assert_id_live(struct ferryd *f, const char *queue, const char *id)
{
	double v = h_id_score(f, queue, id);

	cr_assert(v > 0 && v < 1, "id %s of queue %s is held with %g, not a "
	    "live mark", id, queue, v);
}
