/* chunk.c - split a document's "data" rows into jobs of at most chunk_rows
 * rows, and move data into cache values (ferryctl enqueue --chunk-rows,
 * --cache). Rows and members are copied as written, never re-encoded, so
 * numbers keep their exact text. */
#include "chunk.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "json_scan.h"
#include "util.h"

/* The parts of a document that the jobs are built from. */
struct parts {
	struct json_scan_span doc, data;  /* data.p NULL: none */
	size_t nrows;
	bool cache_key;                   /* it names one already */
};

static void
put_json_string(struct buf *b, const char *s)
{
	json_t *v = json_string(s);
	char *text = json_dumps(v, JSON_ENCODE_ANY);

	buf_append(b, text, strlen(text));
	free(text);
	json_decref(v);
}

/* A member key equals `name` (escapes in the key are decoded). Each of
 * name's ASCII bytes may be written as a 6-byte \u escape: job.c reads
 * "\u0064\u0061\u0074\u0061" as "data", and so must this. */
static bool
key_is(const struct json_scan_span *k, const char *name)
{
	char buf[6 * sizeof("cache_key")];
	size_t n = k->len - 2;
	struct json_scan_error e;

	if (memchr(k->p + 1, '\\', n) == NULL)
		return n == strlen(name) && memcmp(k->p + 1, name, n) == 0;
	if (n > sizeof(buf) || json_scan_unescape(k->p + 1, n, buf, &n, &e))
		return false;
	return n == strlen(name) && memcmp(buf, name, n) == 0;
}

static bool
own_key(const struct json_scan_span *k)
{
	return key_is(k, "id") || key_is(k, "data") || key_is(k, "cache_key");
}

/* {"id":<id>,<members but id, data, cache_key>, then `tail` (a member or
 * "") and "}". */
static void
rebuild(struct buf *b, const struct parts *p, const char *id,
    const char *tail, size_t tail_len)
{
	struct json_scan_iter it;
	struct json_scan_span k, v;

	buf_append(b, "{\"id\":", 6);
	put_json_string(b, id);
	json_scan_iter_init(&it, &p->doc);
	while (json_scan_object_next(&it, &k, &v)) {
		if (own_key(&k))
			continue;
		buf_append(b, ",", 1);
		buf_append(b, k.p, k.len);
		buf_append(b, ":", 1);
		buf_append(b, v.p, v.len);
	}
	if (tail_len > 0)
		buf_append(b, ",", 1);
	buf_append(b, tail, tail_len);
	buf_append(b, "}", 1);
}

static struct chunk_job *
add(struct chunk_jobs *out, const char *id)
{
	struct chunk_job *j;

	if (out->n == out->cap) {
		out->cap = out->cap ? out->cap * 2 : 64;
		out->v = xrealloc(out->v, out->cap * sizeof(*out->v));
	}
	j = &out->v[out->n++];
	memset(j, 0, sizeof(*j));
	snprintf(j->id, sizeof(j->id), "%s", id);
	return j;
}

/* The next 64 bits of a key group (splitmix64: every seed gives a
 * sequence without repeats over 2^64 draws). */
static uint64_t
next_key_part(uint64_t *seed)
{
	uint64_t z = (*seed += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* One job of the rows `rows` (a JSON array's text), rows first to
 * first + count - 1 of the document. */
static void
emit(struct chunk_jobs *out, const struct parts *p, const char *id,
    const char *rows, size_t rows_len, size_t first, size_t count,
    const char *cache_prefix)
{
	struct chunk_job *j = add(out, id);
	struct buf el = { 0 }, tail = { 0 };

	snprintf(j->layout, sizeof(j->layout), " %zu+%zu", first, count);
	if (cache_prefix != NULL) {
		unsigned n = out->key_count++ % CHUNK_KEY_GROUP;
		if (n == 0)
			out->key_group = next_key_part(&out->key_seed);
		j->key = xasprintf("%s%016llx.%u", cache_prefix,
		    (unsigned long long)out->key_group, n);
		j->cache = xmalloc(rows_len + 1);
		memcpy(j->cache, rows, rows_len);
		j->cache[rows_len] = '\0';
		j->cache_len = rows_len;
		buf_append(&tail, "\"cache_key\":", 12);
		put_json_string(&tail, j->key);
	} else {
		buf_append(&tail, "\"data\":", 7);
		buf_append(&tail, rows, rows_len);
	}
	rebuild(&el, p, id, tail.s, tail.len);
	free(tail.s);
	j->el = el.s;
	j->el_len = el.len;
	j->owned = true;
}

static int
find_parts(const char *doc, size_t len, struct parts *p, char *err,
    size_t errsize)
{
	struct json_scan_iter it;
	struct json_scan_span k, v;
	struct json_scan_error e;

	memset(p, 0, sizeof(*p));
	if (json_scan_document(doc, len, &p->doc, &e) == -1) {
		snprintf(err, errsize, "cannot read the job's rows: %s at byte %zu",
		    e.what, e.pos);
		return -1;
	}
	if (p->doc.type != JSON_SCAN_OBJECT) {
		snprintf(err, errsize, "the job is not a JSON object");
		return -1;
	}
	json_scan_iter_init(&it, &p->doc);
	while (json_scan_object_next(&it, &k, &v)) {
		if (key_is(&k, "data"))
			p->data = v;            /* the last one wins */
		p->cache_key = p->cache_key || key_is(&k, "cache_key");
	}
	if (p->data.p != NULL && p->data.type == JSON_SCAN_ARRAY) {
		json_scan_iter_init(&it, &p->data);
		while (json_scan_array_next(&it, &v))
			p->nrows++;
	}
	return 0;
}

/* Jobs of chunk_rows rows each: "[" row "," row ... "]". */
static int
split(struct chunk_jobs *out, const struct parts *p, const char *id,
    int chunk_rows, const char *cache_prefix, char *err, size_t errsize)
{
	struct json_scan_iter it;
	struct json_scan_span v;
	struct buf rows = { 0 };
	char cid[JOB_ID_MAX + 32];
	size_t in_chunk = 0, first = 0, last = (p->nrows - 1) / chunk_rows *
	    (size_t)chunk_rows;

	if (snprintf(cid, sizeof(cid), "%s:%zu", id, last) > JOB_ID_MAX) {
		snprintf(err, errsize, "the job id is too long to name its "
		    "chunks (\"%s:%zu\", its last chunk's, must fit in %d bytes)",
		    id, last, JOB_ID_MAX);
		return -1;
	}
	json_scan_iter_init(&it, &p->data);
	while (json_scan_array_next(&it, &v)) {
		buf_append(&rows, in_chunk == 0 ? "[" : ",", 1);
		buf_append(&rows, v.p, v.len);
		if (++in_chunk < (size_t)chunk_rows &&
		    first + in_chunk < p->nrows)
			continue;
		buf_append(&rows, "]", 1);
		/* the first chunk goes by the document's id, the others by
		 * their first row: the same id for the same rows */
		if (first == 0)
			snprintf(cid, sizeof(cid), "%s", id);
		else
			snprintf(cid, sizeof(cid), "%s:%zu", id, first);
		emit(out, p, cid, rows.s, rows.len, first, in_chunk,
		    cache_prefix);
		first += in_chunk;
		rows.len = in_chunk = 0;
	}
	if (in_chunk > 0) {             /* not reached: nrows counted them */
		buf_append(&rows, "]", 1);
		snprintf(cid, sizeof(cid), "%s:%zu", id, first);
		emit(out, p, cid, rows.s, rows.len, first, in_chunk,
		    cache_prefix);
	}
	free(rows.s);
	return 0;
}

int
chunk_document(const char *doc, size_t len, const char *id, int chunk_rows,
    const char *cache_prefix, struct chunk_jobs *out, char *err,
    size_t errsize)
{
	struct parts p;
	struct chunk_job *j;
	int rc = find_parts(doc, len, &p, err, errsize);

	/* a document the worker reads (jansson) but the scanner does not
	 * (nested deeper than it goes) is pushed as it is, unsplit */
	if (rc == -1 && cache_prefix == NULL)
		memset(&p, 0, sizeof(p));
	else if (rc == -1)
		return -1;
	if (p.cache_key && (cache_prefix != NULL ||
	    p.nrows > (size_t)chunk_rows)) {
		snprintf(err, errsize, "the job names a cache_key already: it "
		    "cannot be %s", cache_prefix != NULL ? "cached again (--cache)" :
		    "split into chunks (its key would be shared)");
		return -1;
	}
	if (cache_prefix != NULL && p.data.p == NULL) {
		snprintf(err, errsize, "%s", CHUNK_BARE_REFUSAL);
		return -1;
	}
	if (p.nrows > (size_t)chunk_rows)
		return split(out, &p, id, chunk_rows, cache_prefix, err, errsize);
	if (cache_prefix != NULL) {
		emit(out, &p, id, p.data.p, p.data.len, 0, p.nrows,
		    cache_prefix);
		if (p.data.type != JSON_SCAN_ARRAY)     /* rows of no array */
			out->v[out->n - 1].layout[0] = '\0';
	}
	else {
		j = add(out, id);
		j->el = doc;
		j->el_len = len;
		if (p.data.p != NULL && p.data.type == JSON_SCAN_ARRAY)
			snprintf(j->layout, sizeof(j->layout), " 0+%zu",
			    p.nrows);
	}
	return 0;
}

void
chunk_jobs_free(struct chunk_jobs *jobs)
{
	for (size_t i = 0; i < jobs->n; i++) {
		if (jobs->v[i].owned)
			free((char *)jobs->v[i].el);
		free(jobs->v[i].key);
		free(jobs->v[i].cache);
		free(jobs->v[i].named_key);
	}
	free(jobs->v);
	jobs->v = NULL;
	jobs->n = jobs->cap = 0;
}
