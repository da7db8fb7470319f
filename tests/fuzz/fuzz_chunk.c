/* fuzz_chunk.c - chunk_document (src/format/chunk.c), what ferryctl enqueue pushes
 * for a document job_parse accepts: every job it makes is valid and named
 * as it says, the jobs' rows (or cache values) are the document's "data"
 * rows in order, and every other member survives; with --cache each job
 * names a key of its own (16 hex digits, a group's, and its index in the
 * group), and a document without
 * "data" is refused; the members it finds ("data", "cache_key") are those
 * jansson finds, escaped keys included.
 * The first input byte picks chunk_rows (1-4) and --cache. */
#include "fuzz.h"

#include "chunk.h"
#include "job.h"

#define PREFIX "ferry:{q}:cache:"

/* Integers as reals: a document with one beyond 64 bits is read so, and
 * its chunks must compare equal to it. */
static json_t *
load(const char *p, size_t n)
{
	json_error_t err;

	return json_loadb(p, n, JSON_DECODE_ANY | JSON_DECODE_INT_AS_REAL,
	    &err);
}

/* doc without the members ferry sets (id, data, cache_key). */
static json_t *
others(json_t *doc)
{
	json_t *o = json_deep_copy(doc);

	json_object_del(o, "id");
	json_object_del(o, "data");
	json_object_del(o, "cache_key");
	return o;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct chunk_jobs out = { 0 };
	struct job src, j;
	const char *doc, *prefix;
	char err[512], id[JOB_ID_MAX + 1];
	int rows;
	json_t *jdoc, *jdata, *rest, *got;

	if (size < 1)
		return 0;
	rows = 1 + (data[0] & 3);
	prefix = data[0] & 4 ? PREFIX : NULL;
	doc = (const char *)data + 1;
	size--;
	job_parse(&src, doc, size, 0);
	if (src.invalid != NULL) {
		job_free(&src);
		return 0;
	}
	snprintf(id, sizeof(id), "%s", job_id(&src));
	jdoc = load(doc, size);
	CHECK(jdoc != NULL && json_is_object(jdoc));
	jdata = json_object_get(jdoc, "data");
	size_t nrows = json_is_array(jdata) ? json_array_size(jdata) : 0;
	bool has_ck = json_object_get(jdoc, "cache_key") != NULL;
	CHECK(src.has_data == (jdata != NULL));

	/* the last chunk's id, "<id>:<its first row>" */
	size_t last_first = nrows > 0 ? (nrows - 1) / (size_t)rows *
	    (size_t)rows : 0;
	int last_len = snprintf(NULL, 0, "%s:%zu", id, last_first);
	if (chunk_document(doc, size, id, rows, prefix, &out, err,
	    sizeof(err)) != 0) {
		CHECK(out.n == 0 && err[0] != '\0');
		/* refused: a cache_key it cannot keep, chunk ids too long, or
		 * (with --cache) a document nested deeper than the scanner or
		 * without "data" */
		CHECK((has_ck && (prefix != NULL || nrows > (size_t)rows)) ||
		    (nrows > (size_t)rows && last_len > JOB_ID_MAX) ||
		    (prefix != NULL && strstr(err, "cannot read") != NULL) ||
		    (prefix != NULL && jdata == NULL &&
		    strcmp(err, CHUNK_BARE_REFUSAL) == 0));
		goto done;
	}
	CHECK(!(prefix != NULL && jdata == NULL));
	CHECK(!(has_ck && (prefix != NULL || nrows > (size_t)rows)));
	CHECK(out.n == (nrows > (size_t)rows ?
	    (nrows + (size_t)rows - 1) / (size_t)rows : 1));
	if (out.n == 1 && prefix == NULL && nrows <= (size_t)rows) {
		CHECK(out.v[0].el == doc && out.v[0].el_len == size &&
		    strcmp(out.v[0].id, id) == 0);
		/* a whole document's rows are its layout */
		char whole[48] = "";
		if (json_is_array(jdata))
			snprintf(whole, sizeof(whole), " 0+%zu", nrows);
		CHECK(strcmp(out.v[0].layout, whole) == 0);
		goto done;
	}
	rest = others(jdoc);
	got = json_array();
	for (size_t i = 0; i < out.n; i++) {
		struct chunk_job *c = &out.v[i];
		json_t *el = load(c->el, c->el_len), *part;
		char want[JOB_ID_MAX + 32];

		CHECK(el != NULL && json_is_object(el));
		/* the first chunk goes by the id, the others by their first
		 * row; each with its layout, none for data that is no array */
		size_t first = i * (size_t)rows;
		if (i > 0)
			snprintf(want, sizeof(want), "%s:%zu", id, first);
		else
			snprintf(want, sizeof(want), "%s", id);
		CHECK(strcmp(c->id, want) == 0);
		char layout[48] = "";
		if (json_is_array(jdata))
			snprintf(layout, sizeof(layout), " %zu+%zu", first,
			    nrows - first < (size_t)rows ? nrows - first :
			    (size_t)rows);
		CHECK(strcmp(c->layout, layout) == 0);
		job_parse(&j, c->el, c->el_len, 0);
		CHECK(j.invalid == NULL && strcmp(j.id, want) == 0);
		if (prefix != NULL) {
			/* PREFIX, 16 hex digits (its group), "." and its
			 * index in the group */
			char tail[32];
			size_t klen = c->key != NULL ? strlen(c->key) : 0;
			size_t plen = strlen(PREFIX);
			snprintf(tail, sizeof(tail), ".%zu", i % CHUNK_KEY_GROUP);
			CHECK(klen == plen + 16 + strlen(tail) &&
			    strncmp(c->key, PREFIX, plen) == 0 &&
			    strspn(c->key + plen, "0123456789abcdef") == 16 &&
			    strcmp(c->key + plen + 16, tail) == 0 &&
			    strncmp(c->key, out.v[i - i % CHUNK_KEY_GROUP].key,
			    plen + 16) == 0);
			CHECK(j.cache_key != NULL &&
			    strcmp(j.cache_key, c->key) == 0);
			CHECK(!j.has_data);
			part = load(c->cache, c->cache_len);
			CHECK(part != NULL);
		} else {
			CHECK(c->key == NULL && c->cache == NULL);
			part = json_incref(json_object_get(el, "data"));
			CHECK(part != NULL);
		}
		json_t *o = others(el);
		CHECK(json_equal(o, rest));
		json_decref(o);
		if (nrows > (size_t)rows)
			json_array_extend(got, part);
		else
			CHECK(json_equal(part, jdata != NULL ? jdata : jdoc));
		json_decref(part);
		json_decref(el);
		job_free(&j);
	}
	if (nrows > (size_t)rows)
		CHECK(json_equal(got, jdata));
	json_decref(got);
	json_decref(rest);
done:
	chunk_jobs_free(&out);
	json_decref(jdoc);
	job_free(&src);
	return 0;
}
