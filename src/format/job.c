/* job.c - turn one Redis list element into a struct job: peel ferry's wrapper
 * (src/redis/lua/common.lua) off the producer's document, check that document and
 * find its id. The document is checked in place, never copied or rewritten:
 * by json_scan, and by jansson only when json_scan refuses it or it holds
 * what the two may read differently (json_scan's notes), so that jansson's
 * verdict and wording stay the reference. */
#include "job.h"

#include <jansson.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "json_scan.h"
#include "sha1.h"
#include "util.h"
#include "wrapper.h"

/* Integers beyond this are no longer exact as doubles. */
#define JOB_EXACT_REAL 9007199254740992.0

/* An escape is at most 6 bytes for each byte it stands for (\u00XX). */
#define JOB_ESC_MAX 6
#define JOB_KEY_MAX 9           /* "cache_key", the longest key read */

/* The members of a document that job_parse reads; p is NULL if absent. */
struct job_members {
	struct json_scan_span id;
	struct json_scan_span cache_key;
	bool has_data;
};

static void
job_set_invalid(struct job *j, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(j->invalid_buf, sizeof(j->invalid_buf), fmt, ap);
	va_end(ap);
	j->invalid = j->invalid_buf;
}

/* Peel ferry's wrapper (doc/formats.md, src/format/wrapper.c) off el: point raw
 * at the document inside and take the counters and stamps. -1 when the
 * wrapper is malformed (raw is left as the whole element). */
static int
job_unwrap(struct job *j)
{
	struct wrapper w;

	if (wrapper_parse(j->el, j->el_len, WRAPPER_JOB, &w) < 0)
		return -1;
	j->attempts = (int)w.attempts;
	j->recoveries = (int)w.recoveries;
	j->raw = w.doc;
	j->raw_len = w.doc_len;
	if (w.nstamps > 0) {
		j->stamps = xcalloc((size_t)w.nstamps, sizeof(*j->stamps));
		for (int i = 0; i < w.nstamps; i++)
			j->stamps[i] = wrapper_str_text(w.stamps[i]);
		j->nstamps = w.nstamps;
	}
	wrapper_free(&w);
	return 0;
}

/* jansson's columns count characters, not bytes: do the same. */
static void
job_invalid_nul(struct job *j, const char *nul)
{
	int line = 1, column = 1;

	for (const char *p = j->raw; p < nul; p++) {
		if (*p == '\n') {
			line++;
			column = 1;
		} else if (((unsigned char)*p & 0xc0) != 0x80) {
			column++;
		}
	}
	job_set_invalid(j, "malformed JSON: NUL byte at line %d column %d",
	    line, column);
}

/* Parse raw. jansson refuses integers beyond 64 bits ("too big integer"),
 * which are valid JSON and pass through untouched: parse such a document
 * again with integers as reals, and say so in *as_real. Reals beyond
 * DBL_MAX (1e400) are still refused. */
static json_t *
job_load(struct job *j, int *as_real)
{
	const char *nul = memchr(j->raw, '\0', j->raw_len);
	json_error_t err;
	json_t *doc;

	*as_real = 0;
	if (nul != NULL) {
		job_invalid_nul(j, nul);
		return NULL;
	}
	doc = json_loadb(j->raw, j->raw_len, JSON_DECODE_ANY, &err);
	if (doc == NULL &&
	    json_error_code(&err) == json_error_numeric_overflow) {
		*as_real = 1;
		doc = json_loadb(j->raw, j->raw_len,
		    JSON_DECODE_ANY | JSON_DECODE_INT_AS_REAL, &err);
	}
	if (doc == NULL) {
		job_set_invalid(j, "malformed JSON: %s at line %d column %d",
		    err.text, err.line, err.column);
		/* jansson quotes the document and cuts its text at 160 bytes,
		 * maybe inside a character: make it valid UTF-8 */
		util_utf8_fix(j->invalid_buf);
	}
	return doc;
}

/* An integer id read as a real (see job_load), if it is still exact. */
static int
job_real_id(json_t *id, long long *out)
{
	double x = json_real_value(id);

	if (!(x >= -JOB_EXACT_REAL && x <= JOB_EXACT_REAL) ||
	    x != (double)(long long)x)
		return -1;
	*out = (long long)x;
	return 0;
}

static int job_id_text_is_integer(const struct job *j);

/* Copy the envelope id into j->id. A missing id, or "", leaves j->id empty
 * (the caller names the job by its SHA-1: "" cannot name a job in a log or
 * in a handler's "ok ID" line). */
static int
job_take_id(struct job *j, json_t *id, int as_real)
{
	long long v;
	size_t n;

	if (id == NULL)
		return 0;
	if (json_is_string(id)) {
		if ((n = json_string_length(id)) > JOB_ID_MAX) {
			job_set_invalid(j, "job id is longer than %d bytes",
			    JOB_ID_MAX);
			return -1;
		}
		memcpy(j->id, json_string_value(id), n);
		j->id[n] = '\0';
		return 0;
	}
	if (json_is_integer(id))
		v = json_integer_value(id);
	else if (!as_real || !json_is_real(id) || job_real_id(id, &v) < 0 ||
	    !job_id_text_is_integer(j)) {
		/* read as a real only because of an integer elsewhere beyond
		 * 64 bits: the id itself must have been written as an integer
		 * ({"id":1.0} is refused whatever else the document holds) */
		j->invalid = "job id is not a string or integer";
		return -1;
	}
	snprintf(j->id, sizeof(j->id), "%lld", v);
	return 0;
}

/* The envelope's "cache_key": a non-empty string of at most
 * JOB_CACHE_KEY_MAX bytes without NUL, if present. */
static int
job_take_cache_key(struct job *j, json_t *ck)
{
	size_t n;

	if (ck == NULL)
		return 0;
	if (!json_is_string(ck) || (n = json_string_length(ck)) == 0 ||
	    memchr(json_string_value(ck), '\0', n) != NULL) {
		j->invalid = "cache_key is not a non-empty string";
		return -1;
	}
	if (n > JOB_CACHE_KEY_MAX) {
		job_set_invalid(j, "cache_key is longer than %d bytes",
		    JOB_CACHE_KEY_MAX);
		return -1;
	}
	j->cache_key = xstrdup(json_string_value(ck));
	return 0;
}

/* job_check with jansson: the reference, and the source of its wording. */
static int
job_check_slow(struct job *j)
{
	int as_real, rc = -1;
	json_t *doc = job_load(j, &as_real);

	if (doc == NULL)
		return -1;
	if (!json_is_object(doc))
		j->invalid = "job is not a JSON object";
	else if ((rc = job_take_id(j, json_object_get(doc, "id"),
	    as_real)) == 0)        /* a bad cache_key keeps the job's id */
		job_take_cache_key(j, json_object_get(doc, "cache_key"));
	j->has_data = json_is_object(doc) &&
	    json_object_get(doc, "data") != NULL;
	json_decref(doc);
	return rc;
}

/* The unescaped contents of string s into buf (size bytes): its length, or
 * -1 when it cannot fit. s holds no "\u0000" (JSON_SCAN_NOTE_NUL). */
static ssize_t
job_unescape(const struct json_scan_span *s, char *buf, size_t size)
{
	struct json_scan_error e;
	size_t n = s->len - 2;

	if (n > size || json_scan_unescape(s->p + 1, n, buf, &n, &e) < 0)
		return -1;
	return (ssize_t)n;
}

/* The members job_check reads; the last of equal keys wins, as in jansson. */
static void
job_members(const struct json_scan_span *doc, struct job_members *m)
{
	char buf[JOB_KEY_MAX * JOB_ESC_MAX];
	struct json_scan_iter it;
	struct json_scan_span k, v;
	const char *key;
	ssize_t n;

	memset(m, 0, sizeof(*m));
	json_scan_iter_init(&it, doc);
	while (json_scan_object_next(&it, &k, &v)) {
		key = k.p + 1;
		n = (ssize_t)k.len - 2;
		if (memchr(key, '\\', (size_t)n) != NULL) {
			key = buf;
			n = job_unescape(&k, buf, sizeof(buf));
		}
		if (n == 2 && memcmp(key, "id", 2) == 0)
			m->id = v;
		else if (n == 9 && memcmp(key, "cache_key", 9) == 0)
			m->cache_key = v;
		else if (n == 4 && memcmp(key, "data", 4) == 0)
			m->has_data = true;
	}
}

/* Is the document's "id" member written as an integer (no fraction, no
 * exponent)? For documents jansson could only read with integers as
 * reals. */
static int
job_id_text_is_integer(const struct job *j)
{
	struct json_scan_error e;
	struct json_scan_span doc;
	struct job_members m;

	if (json_scan_document(j->raw, j->raw_len, &doc, &e) < 0 ||
	    doc.type != JSON_SCAN_OBJECT)
		return 0;
	job_members(&doc, &m);
	return m.id.p != NULL && m.id.type == JSON_SCAN_NUMBER &&
	    memchr(m.id.p, '.', m.id.len) == NULL &&
	    memchr(m.id.p, 'e', m.id.len) == NULL &&
	    memchr(m.id.p, 'E', m.id.len) == NULL;
}

/* job_take_id for a span. An integer has at most JSON_SCAN_NOTE_DIGITS
 * digits (JSON_SCAN_NOTE_LONG_NUMBER) and is printed as jansson reads it
 * ("-0" is "0"). */
static int
job_span_id(struct job *j, const struct json_scan_span *id)
{
	char buf[JOB_ID_MAX * JOB_ESC_MAX];
	ssize_t n;

	if (id->p == NULL)
		return 0;
	if (id->type == JSON_SCAN_STRING) {
		if ((n = job_unescape(id, buf, sizeof(buf))) < 0 ||
		    n > JOB_ID_MAX) {
			job_set_invalid(j, "job id is longer than %d bytes",
			    JOB_ID_MAX);
			return -1;
		}
		memcpy(j->id, buf, (size_t)n);
		j->id[n] = '\0';
		return 0;
	}
	if (id->type != JSON_SCAN_NUMBER || id->len >= sizeof(buf) ||
	    memchr(id->p, '.', id->len) != NULL ||
	    memchr(id->p, 'e', id->len) != NULL ||
	    memchr(id->p, 'E', id->len) != NULL) {
		j->invalid = "job id is not a string or integer";
		return -1;
	}
	memcpy(buf, id->p, id->len);
	buf[id->len] = '\0';
	snprintf(j->id, sizeof(j->id), "%lld", strtoll(buf, NULL, 10));
	return 0;
}

/* job_take_cache_key for a span. */
static int
job_span_cache_key(struct job *j, const struct json_scan_span *ck)
{
	char buf[JOB_CACHE_KEY_MAX * JOB_ESC_MAX];
	ssize_t n;

	if (ck->p == NULL)
		return 0;
	if (ck->type != JSON_SCAN_STRING || ck->len == 2) {
		j->invalid = "cache_key is not a non-empty string";
		return -1;
	}
	if ((n = job_unescape(ck, buf, sizeof(buf))) < 0 ||
	    n > JOB_CACHE_KEY_MAX) {
		job_set_invalid(j, "cache_key is longer than %d bytes",
		    JOB_CACHE_KEY_MAX);
		return -1;
	}
	j->cache_key = xmalloc((size_t)n + 1);
	memcpy(j->cache_key, buf, (size_t)n);
	j->cache_key[n] = '\0';
	return 0;
}

/* Validate the document and take its id and cache key; 0 when the id is
 * usable (j->invalid may still be set, by the cache key). What json_scan
 * refuses, or may read unlike jansson, goes to job_check_slow. */
static int
job_check(struct job *j)
{
	struct json_scan_error e;
	struct json_scan_span doc;
	struct job_members m;
	unsigned notes;

	if (json_scan_document_noted(j->raw, j->raw_len, &doc, &e,
	    &notes) < 0 || notes != 0)
		return job_check_slow(j);
	if (doc.type != JSON_SCAN_OBJECT) {
		j->invalid = "job is not a JSON object";
		return -1;
	}
	j->scanned = true;
	job_members(&doc, &m);
	j->has_data = m.has_data;
	if (job_span_id(j, &m.id) < 0)
		return -1;
	job_span_cache_key(j, &m.cache_key);    /* a bad one keeps the id */
	return 0;
}

/* The checks in order; only the first failure is reported. A job keeps the
 * wrapper's counters even when its document is invalid. A job without a
 * usable id (none, "", or an invalid document) is named by the SHA-1 of its
 * document, so wrapping it later does not rename it. max_job_bytes <= 0
 * means no limit. Call job_free before parsing into the same struct again.
 * j->invalid may point into j (invalid_buf): do not move a parsed job by
 * copying the struct. */
void
job_parse_held(struct job *j, const char *el, size_t len,
    long max_job_bytes, bool wrapped)
{
	memset(j, 0, sizeof(*j));
	j->el = j->raw = el;
	j->el_len = j->raw_len = len;
	if (wrapped && job_unwrap(j) < 0)
		j->invalid = "malformed ferry wrapper";
	else if (j->raw_len == 0)
		j->invalid = "empty job";
	else if (max_job_bytes > 0 && j->raw_len > (size_t)max_job_bytes) {
		job_set_invalid(j, "job is %zu bytes, over max_job_bytes %ld",
		    j->raw_len, max_job_bytes);
		j->refusal_varies = true;
	}
	else if (job_check(j) == 0)
		return;
	j->id[0] = '\0';        /* an invalid document is named by its SHA-1 */
}

const char *
job_id(struct job *j)
{
	if (j->id[0] == '\0')      /* no id of its own: its digest */
		memcpy(j->id, job_digest(j), sizeof(j->digest));
	return j->id;
}

const char *
job_digest(struct job *j)
{
	if (j->digest[0] == '\0')
		job_sha1_hex(j->raw, j->raw_len, j->digest);
	return j->digest;
}

void
job_parse(struct job *j, const char *doc, size_t len, long max_job_bytes)
{
	job_parse_held(j, doc, len, max_job_bytes, false);
	job_id(j);
}

void
job_free(struct job *j)
{
	for (int i = 0; i < j->nstamps; i++)
		free(j->stamps[i]);
	free(j->stamps);
	free(j->cache_key);
	free(j->cache);
	free(j->rows);
	j->stamps = NULL;
	j->nstamps = 0;
	j->cache_key = j->cache = j->rows = NULL;
}

/* s as the inside of a JSON string, into out (room for 6 * strlen + 1). */
static size_t
job_escape(const char *s, char *out)
{
	static const char hex[] = "0123456789abcdef";
	char *o = out;

	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p == '"' || *p == '\\') {
			*o++ = '\\';
			*o++ = (char)*p;
		} else if (*p < 0x20) {
			memcpy(o, "\\u00", 4);
			o[4] = hex[*p >> 4];
			o[5] = hex[*p & 15];
			o += 6;
		} else {
			*o++ = (char)*p;
		}
	}
	*o = '\0';
	return (size_t)(o - out);
}

/* A valid document has CR and LF only as whitespace between tokens (inside
 * strings they are escaped): blank them so the job stays on one line. */
static void
job_flatten(char *p, size_t n)
{
	char *end = p + n, *q;

	for (q = p; (q = memchr(q, '\n', (size_t)(end - q))) != NULL; )
		*q = ' ';
	for (q = p; (q = memchr(q, '\r', (size_t)(end - q))) != NULL; )
		*q = ' ';
}

/* Only for valid jobs (j->invalid == NULL): the document is embedded as is,
 * numbers and all, except that line breaks between tokens become blanks. */
char *
job_handler_line(const struct job *j, size_t *len)
{
	static const char cache_mark[] = ",\"cache\":";
	char id[JOB_ID_MAX * 6 + 1], head[sizeof(id) + 80], *line, *p;
	size_t extra = j->cache != NULL ? sizeof(cache_mark) - 1 +
	    j->cache_len : 0;
	int n;

	job_escape(j->id, id);
	n = snprintf(head, sizeof(head),
	    "{\"id\":\"%s\",\"attempts\":%d,\"recoveries\":%d,\"job\":",
	    id, j->attempts, j->recoveries);
	line = xmalloc((size_t)n + j->raw_len + extra + 3);
	memcpy(line, head, (size_t)n);
	memcpy(line + n, j->raw, j->raw_len);
	job_flatten(line + n, j->raw_len);
	p = line + n + j->raw_len;
	if (j->cache != NULL) {
		memcpy(p, cache_mark, sizeof(cache_mark) - 1);
		memcpy(p + sizeof(cache_mark) - 1, j->cache, j->cache_len);
		p += extra;
	}
	memcpy(p, "}\n", 3);
	*len = (size_t)(p - line) + 2;
	return line;
}

void
job_sha1_hex(const void *data, size_t len, char out[41])
{
	static const char hex[] = "0123456789abcdef";
	unsigned char d[SHA1_DIGEST_LEN];
	struct sha1_ctx c;

	sha1_init(&c);
	sha1_update(&c, data, len);
	sha1_final(&c, d);
	for (int i = 0; i < SHA1_DIGEST_LEN; i++) {
		out[2 * i] = hex[d[i] >> 4];
		out[2 * i + 1] = hex[d[i] & 15];
	}
	out[40] = '\0';
}
