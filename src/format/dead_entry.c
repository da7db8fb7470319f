/* dead_entry.c - see dead_entry.h. Every jansson call is checked:
 * json_string* returns NULL on invalid UTF-8, and json_object_set_new
 * fails on a NULL value, so a member cannot vanish unnoticed. */
#include "dead_entry.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base64.h"
#include "util.h"

/* obj[name] = v (stolen); -1 when v is NULL or the set failed. */
static int
set(json_t *obj, const char *name, json_t *v)
{
	return v != NULL && json_object_set_new(obj, name, v) == 0 ? 0 : -1;
}

/* A token decoded as a JSON string, or NULL (never for a token the
 * grammar accepted: its text is valid UTF-8 without NUL). */
static json_t *
token(struct wrapper_str s)
{
	char *text = wrapper_str_text(s);
	json_t *v = text != NULL ? json_string(text) : NULL;

	free(text);
	return v;
}

static int
set_token(json_t *obj, const char *name, struct wrapper_str s)
{
	return s.p == NULL ? 0 : set(obj, name, token(s));
}

static int
set_stamps(json_t *obj, const struct wrapper *w)
{
	json_t *a;

	if (w->nstamps == 0)
		return 0;
	if ((a = json_array()) == NULL)
		return -1;
	for (int i = 0; i < w->nstamps; i++)
		if (json_array_append_new(a, token(w->stamps[i])) != 0) {
			json_decref(a);
			return -1;
		}
	return set(obj, "stamps", a);
}

void
dead_entry_read(struct dead_entry *e, const char *el, size_t len)
{
	e->el = el;
	e->len = e->total = len;
	e->truncated = false;
	e->buf = NULL;
	e->ok = wrapper_parse(el, len, WRAPPER_DEAD, &e->w) == 0;
}

void
dead_entry_read_cut(struct dead_entry *e, const char *el, size_t len,
    size_t total)
{
	if (len >= total) {
		dead_entry_read(e, el, len);
		return;
	}
	/* the grammar wants the closing brace: the prefix gets one, and
	 * the document is what follows the job mark, without it */
	char *buf = xmalloc(len + 1);
	memcpy(buf, el, len);
	buf[len] = '}';
	dead_entry_read(e, buf, len + 1);
	e->el = buf;
	e->len = len;
	e->total = total;
	e->truncated = true;
	e->buf = buf;
	if (!e->ok)
		return;
	/* back to the start of the last character; drop it when cut */
	const unsigned char *d = (const unsigned char *)e->w.doc;
	size_t n = e->w.doc_len, c = n;
	while (c > 0 && n - c < 4 && (d[c - 1] & 0xc0) == 0x80)
		c--;
	if (c > 0 && d[c - 1] >= 0xc0 && util_utf8_char(d + c - 1,
	    n - c + 1) != n - c + 1)
		e->w.doc_len = c - 1;
}

void
dead_entry_free(struct dead_entry *e)
{
	wrapper_free(&e->w);
	free(e->buf);
	e->buf = NULL;
	e->ok = false;
}

void
dead_entry_ref(const char *el, size_t len, size_t total, char out[41])
{
	char buf[DEAD_ENTRY_REF_BYTES + 24];
	size_t n = len < DEAD_ENTRY_REF_BYTES ? len : DEAD_ENTRY_REF_BYTES;

	memcpy(buf, el, n);
	n += (size_t)snprintf(buf + n, sizeof(buf) - n, "%zu", total);
	job_sha1_hex(buf, n, out);
}

int
dead_entry_header(json_t *obj, const struct wrapper *w)
{
	if (set_token(obj, "reason", w->reason) != 0 ||
	    set(obj, "attempts", json_integer(w->attempts)) != 0 ||
	    set(obj, "recoveries", json_integer(w->recoveries)) != 0 ||
	    set(obj, "time", json_integer(w->time)) != 0 ||
	    set_token(obj, "worker", w->worker) != 0 ||
	    set_token(obj, "id", w->id) != 0 ||
	    set_stamps(obj, w) != 0 ||
	    set_token(obj, "first_error", w->first_error) != 0 ||
	    set_token(obj, "last_error", w->last_error) != 0)
		return -1;
	return 0;
}

/* bytes as "name" (a JSON string) when valid UTF-8, else as b64name. */
static int
set_bytes(json_t *obj, const char *name, const char *b64name,
    const char *p, size_t len, int both)
{
	json_t *s = json_stringn(p, len);
	char *b64;
	int rc;

	if (s != NULL && set(obj, name, s) != 0)
		return -1;
	if (s != NULL && !both)
		return 0;
	b64 = base64_encode(p, len, &len);
	rc = set(obj, b64name, json_stringn(b64, len));
	free(b64);
	return rc;
}

int
dead_entry_job(json_t *obj, const char *doc, size_t len)
{
	return set_bytes(obj, "job", "job_base64", doc, len, 0);
}

int
dead_entry_raw(json_t *obj, const char *el, size_t len)
{
	return set_bytes(obj, "raw", "raw_base64", el, len, 1);
}

int
dead_entry_decode(json_t *obj, const struct dead_entry *e)
{
	if (!e->ok || dead_entry_header(obj, &e->w) != 0)
		return -1;
	return dead_entry_job(obj, e->w.doc, e->w.doc_len);
}

char *
dead_entry_cache_key(const struct dead_entry *e)
{
	char *key = NULL;
	struct job j;

	if (!e->ok)
		return NULL;
	job_parse(&j, e->w.doc, e->w.doc_len, 0);
	if (j.cache_key != NULL)
		key = xstrdup(j.cache_key);
	job_free(&j);
	return key;
}

int
dead_entry_job_bytes(json_t *obj, const char **p, size_t *n, char **buf,
    const char **why)
{
	json_t *job = json_object_get(obj, "job");
	json_t *b64 = json_object_get(obj, "job_base64");

	*buf = NULL;
	if (job != NULL && b64 != NULL) {
		*why = "both \"job\" and \"job_base64\"";
		return -1;
	}
	if (json_is_string(job)) {
		*p = json_string_value(job);
		*n = json_string_length(job);
		return 0;
	}
	if (json_is_string(b64) && base64_decode(json_string_value(b64),
	    json_string_length(b64), buf, n) == 0) {
		*p = *buf;
		return 0;
	}
	*why = b64 != NULL ? "\"job_base64\" is not base64" :
	    "no \"job\" string";
	return -1;
}

void
dead_entry_id(const struct wrapper *w, const char *el, size_t len,
    long max_job_bytes, char out[JOB_ID_MAX + 1])
{
	struct job j;
	char *id;
	size_t n;

	if (w == NULL) {
		char sha[41];
		job_sha1_hex(el, len, sha);
		snprintf(out, JOB_ID_MAX + 1, "%s", sha);
		return;
	}
	if (w->id.p != NULL && w->id.n > 2) {
		id = wrapper_str_text(w->id);
		n = strlen(id);
		if (n > JOB_ID_MAX) {   /* cut at a character boundary */
			n = JOB_ID_MAX;
			while (n > 0 && ((unsigned char)id[n] & 0xc0) == 0x80)
				n--;
		}
		memcpy(out, id, n);
		out[n] = '\0';
		free(id);
		return;
	}
	job_parse(&j, w->doc, w->doc_len, max_job_bytes);
	snprintf(out, JOB_ID_MAX + 1, "%s", job_id(&j));
	job_free(&j);
}
