/* fuzz_job.c - job_parse, job_parse_held (wrapped and not), job_id and
 * job_handler_line (src/format/job.c). job.c is included so that its fast path
 * (json_scan) can be held to its reference (job_check_slow, jansson): the
 * two must agree on every document, verdict, wording, id, cache_key and
 * "data" alike. A wrapped element names the same job as its document, and
 * the handler line of a valid job is one line of JSON that carries the
 * document unchanged. The first input byte picks max_job_bytes. */
#include "fuzz.h"

#include "../../src/format/job.c"

/* An invalid job is named by the SHA-1 of its document, except that a bad
 * cache_key keeps the job's own id (src/format/job.c). */
static int
named_by_sha(const struct job *j)
{
	return j->invalid != NULL && strncmp(j->invalid, "cache_key ", 10) != 0;
}

static void
check_named(struct job *j)
{
	const char *id = job_id(j);
	size_t n = strlen(id);
	char sha[41];

	CHECK(n > 0 && n <= JOB_ID_MAX);
	CHECK(fuzz_utf8_ok(id, n));
	if (named_by_sha(j)) {
		job_sha1_hex(j->raw, j->raw_len, sha);
		CHECK(strcmp(id, sha) == 0);
	}
	if (j->invalid != NULL) {
		CHECK(j->invalid[0] != '\0');
		CHECK(fuzz_utf8_ok(j->invalid, strlen(j->invalid)));
	}
	if (j->cache_key != NULL) {
		n = strlen(j->cache_key);
		CHECK(n > 0 && n <= JOB_CACHE_KEY_MAX);
		CHECK(fuzz_utf8_ok(j->cache_key, n));
	}
}

/* The fast path and the reference read the document alike. */
static void
check_fast_is_slow(const char *doc, size_t len)
{
	struct job a, b;
	int ra, rb;

	memset(&a, 0, sizeof(a));
	memset(&b, 0, sizeof(b));
	a.el = a.raw = b.el = b.raw = doc;
	a.el_len = a.raw_len = b.el_len = b.raw_len = len;
	ra = job_check(&a);
	rb = job_check_slow(&b);
	CHECK(ra == rb);
	CHECK((a.invalid == NULL) == (b.invalid == NULL));
	if (a.invalid != NULL)
		CHECK(strcmp(a.invalid, b.invalid) == 0);
	CHECK(strcmp(a.id, b.id) == 0);
	CHECK((a.cache_key == NULL) == (b.cache_key == NULL));
	if (a.cache_key != NULL)
		CHECK(strcmp(a.cache_key, b.cache_key) == 0);
	CHECK(a.has_data == b.has_data);
	job_free(&a);
	job_free(&b);
}

static json_t *
load(const char *p, size_t n)
{
	json_error_t err;
	json_t *v = json_loadb(p, n, JSON_DECODE_ANY, &err);

	if (v == NULL && json_error_code(&err) == json_error_numeric_overflow)
		v = json_loadb(p, n, JSON_DECODE_ANY | JSON_DECODE_INT_AS_REAL,
		    &err);
	return v;
}

static void
check_line(struct job *j)
{
	size_t len;
	char *line = job_handler_line(j, &len);
	json_t *v, *doc;

	CHECK(len >= 2 && line[len - 1] == '\n' && line[len] == '\0');
	CHECK(memchr(line, '\n', len - 1) == NULL);
	CHECK(memchr(line, '\r', len) == NULL);
	v = load(line, len - 1);
	doc = load(j->raw, j->raw_len);
	CHECK(v != NULL && doc != NULL && json_is_object(v));
	CHECK(json_equal(json_object_get(v, "job"), doc));
	CHECK(json_is_string(json_object_get(v, "id")) &&
	    strcmp(json_string_value(json_object_get(v, "id")), j->id) == 0);
	CHECK(json_integer_value(json_object_get(v, "attempts")) ==
	    j->attempts);
	CHECK(json_integer_value(json_object_get(v, "recoveries")) ==
	    j->recoveries);
	json_decref(v);
	json_decref(doc);
	free(line);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const long limits[] = { 0, 0, 64, 1 << 20 };
	struct job plain, held, wrapped, inner;
	struct wrapper w;
	const char *el;
	long max;

	if (size < 1)
		return 0;
	max = limits[data[0] & 3];
	el = (const char *)data + 1;
	size--;

	job_parse(&plain, el, size, max);
	CHECK(plain.raw == el && plain.raw_len == size);
	CHECK(plain.attempts == 0 && plain.recoveries == 0 &&
	    plain.nstamps == 0);   /* a wrapper-looking document is a document */
	check_named(&plain);
	check_fast_is_slow(el, size);
	if (plain.invalid == NULL)
		check_line(&plain);

	job_parse_held(&held, el, size, max, false);
	CHECK(strcmp(job_id(&held), plain.id) == 0);
	CHECK((held.invalid == NULL) == (plain.invalid == NULL));

	job_parse_held(&wrapped, el, size, max, true);
	if (wrapper_parse(el, size, WRAPPER_JOB, &w) != 0) {
		CHECK(wrapped.invalid != NULL &&
		    strcmp(wrapped.invalid, "malformed ferry wrapper") == 0);
		CHECK(strcmp(job_id(&wrapped), plain.id) == 0 ||
		    !named_by_sha(&plain));
	} else {
		CHECK(wrapped.raw == w.doc && wrapped.raw_len == w.doc_len);
		CHECK(wrapped.attempts == w.attempts &&
		    wrapped.recoveries == w.recoveries);
		CHECK(wrapped.nstamps == w.nstamps);
		for (int i = 0; i < w.nstamps; i++) {
			char *t = wrapper_str_text(w.stamps[i]);
			CHECK(strcmp(t, wrapped.stamps[i]) == 0);
			free(t);
		}
		/* wrapping a job does not rename it or change its verdict */
		job_parse(&inner, w.doc, w.doc_len, max);
		CHECK(strcmp(job_id(&wrapped), inner.id) == 0);
		CHECK((wrapped.invalid == NULL) == (inner.invalid == NULL));
		if (inner.invalid != NULL)
			CHECK(strcmp(wrapped.invalid, inner.invalid) == 0);
		check_named(&wrapped);
		if (wrapped.invalid == NULL)
			check_line(&wrapped);
		job_free(&inner);
		wrapper_free(&w);
	}
	job_free(&plain);
	job_free(&held);
	job_free(&wrapped);
	return 0;
}
