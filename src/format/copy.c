/* copy.c - job documents to rows of PostgreSQL's COPY text format, taken
 * straight from the document's bytes, and the `columns` setting. */
#include "copy.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json_scan.h"
#include "util.h"

#define COPY_NAME_MAX 63
#define COPY_STACK_COLS 64
/* A key that can match a column name unescapes to at most 63 ASCII bytes,
 * each written at worst as a 6-byte \u escape. */
#define COPY_KEY_RAW_MAX (6 * COPY_NAME_MAX)

/* The letter COPY writes after a backslash for a byte, or 0: as is. */
static const char copy_esc[256] = {
	['\b'] = 'b', ['\t'] = 't', ['\n'] = 'n', ['\v'] = 'v',
	['\f'] = 'f', ['\r'] = 'r', ['\\'] = '\\',
};

struct copy_slot {
	const char *key;
	size_t klen;
	struct json_scan_span v;        /* type JSON_SCAN_NULL when missing */
};

struct copy_enc {
	const struct copy_columns *cols;
	struct copy_slot *slots;
	struct copy_buf *out;
	char *err;
	size_t errsize;
};

static void
copy_err(char *err, size_t errsize, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errsize, fmt, ap);
	va_end(ap);
}

static void
buf_grow(struct copy_buf *b, size_t need)
{
	size_t cap = b->cap > 0 ? b->cap : 256;

	while (cap - b->len < need)
		cap *= 2;
	b->data = xrealloc(b->data, cap);
	b->cap = cap;
}

/* Room for need more bytes; where they go. */
static inline char *
buf_room(struct copy_buf *b, size_t need)
{
	if (b->cap - b->len < need || b->data == NULL)
		buf_grow(b, need);
	return b->data + b->len;
}

static inline void
buf_put(struct copy_buf *b, const char *p, size_t n)
{
	memcpy(buf_room(b, n), p, n);
	b->len += n;
}

/* Any text (here: raw JSON of a nested value), COPY-escaped. */
static void
put_text(struct copy_buf *b, const char *p, size_t n)
{
	char *o = buf_room(b, 2 * n), *start = o;
	unsigned char c;
	size_t i;

	for (i = 0; i < n; i++) {
		c = (unsigned char)p[i];
		if (copy_esc[c] != 0) {
			*o++ = '\\';
			*o++ = copy_esc[c];
		} else {
			*o++ = (char)c;
		}
	}
	b->len += (size_t)(o - start);
}

/* The contents of a validated JSON string, unescaped then COPY-escaped in
 * one pass. Between escapes a valid string holds no control character and
 * no backslash, so those runs go out as they are. */
static int
put_string(struct copy_buf *b, const char *p, size_t n, const char **what)
{
	char *o = buf_room(b, 2 * n), *start = o, u[4];
	const char *bs;
	size_t i = 0, run, used;
	int k;

	while (i < n) {
		bs = memchr(p + i, '\\', n - i);
		run = bs != NULL ? (size_t)(bs - (p + i)) : n - i;
		memcpy(o, p + i, run);
		o += run;
		i += run;
		if (i == n)
			break;
		if ((k = json_scan_escape(p + i, n - i, u, &used, what)) == -1)
			return -1;
		if (k == 1 && copy_esc[(unsigned char)u[0]] != 0) {
			*o++ = '\\';
			*o++ = copy_esc[(unsigned char)u[0]];
		} else {
			memcpy(o, u, (size_t)k);
			o += k;
		}
		i += used;
	}
	b->len += (size_t)(o - start);
	return 0;
}

static int
put_value(struct copy_buf *b, const struct json_scan_span *v,
    const char **what)
{
	switch (v->type) {
	case JSON_SCAN_NULL:
		buf_put(b, "\\N", 2);
		return 0;
	case JSON_SCAN_TRUE:
		buf_put(b, "t", 1);
		return 0;
	case JSON_SCAN_FALSE:
		buf_put(b, "f", 1);
		return 0;
	case JSON_SCAN_NUMBER:
		buf_put(b, v->p, v->len);
		return 0;
	case JSON_SCAN_STRING:
		return put_string(b, v->p + 1, v->len - 2, what);
	default:
		put_text(b, v->p, v->len);
		return 0;
	}
}

/* A key's text: its own bytes, or unescaped into buf. -1: it cannot be
 * the name of a column (too long or not text). */
static int
key_text(const struct json_scan_span *k, char *buf, const char **p,
    size_t *n)
{
	struct json_scan_error e;

	*p = k->p + 1;
	*n = k->len - 2;
	if (memchr(*p, '\\', *n) == NULL)
		return 0;
	if (*n > COPY_KEY_RAW_MAX ||
	    json_scan_unescape(*p, *n, buf, n, &e) == -1)
		return -1;
	*p = buf;
	return 0;
}

/* Point each column's slot at its value in the row; the last of
 * duplicate keys wins. */
static void
row_collect(struct copy_enc *e, const struct json_scan_span *row)
{
	struct json_scan_iter it;
	struct json_scan_span k, v;
	char buf[COPY_KEY_RAW_MAX];
	const char *kp;
	size_t kn;
	int i, n = e->cols->n;

	for (i = 0; i < n; i++) {
		e->slots[i].v.p = NULL;
		e->slots[i].v.len = 0;
		e->slots[i].v.type = JSON_SCAN_NULL;
	}
	json_scan_iter_init(&it, row);
	while (json_scan_object_next(&it, &k, &v)) {
		if (key_text(&k, buf, &kp, &kn) == -1)
			continue;
		for (i = 0; i < n; i++)
			if (e->slots[i].klen == kn &&
			    memcmp(e->slots[i].key, kp, kn) == 0)
				e->slots[i].v = v;
	}
}

static int
row_encode(struct copy_enc *e, const struct json_scan_span *row, int rowno)
{
	const char *what;
	int i;

	row_collect(e, row);
	for (i = 0; i < e->cols->n; i++) {
		if (i > 0)
			buf_put(e->out, "\t", 1);
		if (put_value(e->out, &e->slots[i].v, &what) == -1) {
			copy_err(e->err, e->errsize, "row %d: column \"%s\": %s",
			    rowno, e->cols->columns[i], what);
			return -1;
		}
	}
	buf_put(e->out, "\n", 1);
	return 0;
}

/* rows is an object (one row) or an array of objects. */
static int
rows_encode(struct copy_enc *e, const struct json_scan_span *rows)
{
	struct json_scan_iter it;
	struct json_scan_span v;
	int n = 0;

	if (rows->type == JSON_SCAN_OBJECT)
		return row_encode(e, rows, 1) == -1 ? -1 : 1;
	json_scan_iter_init(&it, rows);
	while (json_scan_array_next(&it, &v)) {
		n++;
		if (v.type != JSON_SCAN_OBJECT) {
			copy_err(e->err, e->errsize, "row %d is not an object", n);
			return -1;
		}
		if (row_encode(e, &v, n) == -1)
			return -1;
	}
	return n;
}

/* The rows of a document: its "data" member if it is an envelope (an
 * object with "data"; the last "data" wins), else itself. */
static const char *
find_rows(const struct json_scan_span *doc, struct json_scan_span *rows)
{
	struct json_scan_iter it;
	struct json_scan_span k, v;
	char buf[COPY_KEY_RAW_MAX];
	const char *kp;
	size_t kn;
	int found = 0;

	*rows = *doc;
	if (doc->type == JSON_SCAN_ARRAY)
		return NULL;
	if (doc->type != JSON_SCAN_OBJECT)
		return "document is not an object or an array of objects";
	json_scan_iter_init(&it, doc);
	while (json_scan_object_next(&it, &k, &v))
		if (key_text(&k, buf, &kp, &kn) == 0 && kn == 4 &&
		    memcmp(kp, "data", 4) == 0) {
			*rows = v;
			found = 1;
		}
	if (found && rows->type != JSON_SCAN_OBJECT &&
	    rows->type != JSON_SCAN_ARRAY)
		return "data is not an object or an array of objects";
	return NULL;
}

/* The rows of the valid document d into out. */
static int
encode_document(const struct json_scan_span *d,
    const struct copy_columns *cols, struct copy_buf *out, char *err,
    size_t errsize)
{
	struct copy_slot stack[COPY_STACK_COLS];
	struct json_scan_span rows;
	struct copy_enc e;
	size_t start = out->len;
	const char *what;
	int i, n;

	if ((what = find_rows(d, &rows)) != NULL) {
		copy_err(err, errsize, "%s", what);
		return -1;
	}
	e.cols = cols;
	e.out = out;
	e.err = err;
	e.errsize = errsize;
	e.slots = cols->n <= COPY_STACK_COLS ? stack :
	    xmalloc((size_t)cols->n * sizeof(*e.slots));
	for (i = 0; i < cols->n; i++) {
		e.slots[i].key = cols->keys[i];
		e.slots[i].klen = strlen(cols->keys[i]);
	}
	n = rows_encode(&e, &rows);
	if (e.slots != stack)
		free(e.slots);
	if (n == -1)
		out->len = start;
	return n;
}

int
copy_encode_job(const char *doc, size_t len,
    const struct copy_columns *cols, struct copy_buf *out, char *err,
    size_t errsize)
{
	struct json_scan_span d;
	struct json_scan_error je;

	if (json_scan_document(doc, len, &d, &je) == -1) {
		copy_err(err, errsize, "malformed JSON at byte %zu: %s", je.pos,
		    je.what);
		return -1;
	}
	return encode_document(&d, cols, out, err, errsize);
}

int
copy_encode_scanned(const char *doc, size_t len,
    const struct copy_columns *cols, struct copy_buf *out, char *err,
    size_t errsize)
{
	struct json_scan_span d;

	json_scan_trusted(doc, len, &d);
	return encode_document(&d, cols, out, err, errsize);
}

void
copy_buf_free(struct copy_buf *b)
{
	free(b->data);
	b->data = NULL;
	b->len = b->cap = 0;
}

static const char *
trim(const char *p, size_t *n)
{
	while (*n > 0 && (*p == ' ' || *p == '\t')) {
		p++;
		(*n)--;
	}
	while (*n > 0 && (p[*n - 1] == ' ' || p[*n - 1] == '\t'))
		(*n)--;
	return p;
}

static int
check_name(const char *p, size_t n, const char *kind, char *err,
    size_t errsize)
{
	size_t i;
	int ok = n > 0 && !(p[0] >= '0' && p[0] <= '9');

	for (i = 0; ok && i < n; i++)
		ok = p[i] == '_' || (p[i] >= 'a' && p[i] <= 'z') ||
		    (p[i] >= 'A' && p[i] <= 'Z') || (p[i] >= '0' && p[i] <= '9');
	if (!ok) {
		copy_err(err, errsize, "bad %s name \"%.*s\" in columns", kind,
		    n > 64 ? 64 : (int)n, p);
		return -1;
	}
	if (n > COPY_NAME_MAX) {
		copy_err(err, errsize, "%s name \"%.*s...\" is longer than %d "
		    "bytes", kind, 32, p, COPY_NAME_MAX);
		return -1;
	}
	return 0;
}

static char *
dup_n(const char *p, size_t n)
{
	char *s = xmalloc(n + 1);

	memcpy(s, p, n);
	s[n] = '\0';
	return s;
}

/* One "column" or "column=key" item (n bytes at p, item number no). */
static int
columns_item(struct copy_columns *c, const char *p, size_t n, int no,
    char *err, size_t errsize)
{
	const char *eq, *name, *key;
	size_t nn, kn;
	int i;

	name = trim(p, &n);
	if (n == 0) {
		copy_err(err, errsize, "item %d of columns is empty", no);
		return -1;
	}
	eq = memchr(name, '=', n);
	nn = eq != NULL ? (size_t)(eq - name) : n;
	kn = eq != NULL ? n - nn - 1 : nn;
	name = trim(name, &nn);
	key = eq != NULL ? trim(eq + 1, &kn) : name;
	if (check_name(name, nn, "column", err, errsize) == -1 ||
	    check_name(key, kn, "key", err, errsize) == -1)
		return -1;
	for (i = 0; i < c->n; i++)
		if (strlen(c->columns[i]) == nn &&
		    memcmp(c->columns[i], name, nn) == 0) {
			copy_err(err, errsize, "duplicate column \"%.*s\" in "
			    "columns", (int)nn, name);
			return -1;
		}
	c->columns = xrealloc(c->columns, (size_t)(c->n + 1) * sizeof(char *));
	c->keys = xrealloc(c->keys, (size_t)(c->n + 1) * sizeof(char *));
	c->columns[c->n] = dup_n(name, nn);
	c->keys[c->n] = dup_n(key, kn);
	c->n++;
	return 0;
}

int
copy_columns_parse(const char *spec, struct copy_columns *out, char *err,
    size_t errsize)
{
	const char *p = spec, *comma;
	size_t n;
	int no = 0;

	memset(out, 0, sizeof(*out));
	n = strlen(spec);
	trim(spec, &n);
	if (n == 0) {
		copy_err(err, errsize, "columns is empty");
		return -1;
	}
	do {
		comma = strchr(p, ',');
		n = comma != NULL ? (size_t)(comma - p) : strlen(p);
		if (columns_item(out, p, n, ++no, err, errsize) == -1) {
			copy_columns_free(out);
			return -1;
		}
		if (comma != NULL)      /* NULL + 1 is undefined */
			p = comma + 1;
	} while (comma != NULL);
	return 0;
}

void
copy_columns_same(struct copy_columns *out, char *const *names, int n)
{
	int i;

	out->n = n;
	out->columns = xmalloc((size_t)n * sizeof(char *));
	out->keys = xmalloc((size_t)n * sizeof(char *));
	for (i = 0; i < n; i++) {
		out->columns[i] = xstrdup(names[i]);
		out->keys[i] = xstrdup(names[i]);
	}
}

void
copy_columns_free(struct copy_columns *c)
{
	int i;

	for (i = 0; i < c->n; i++) {
		free(c->columns[i]);
		free(c->keys[i]);
	}
	free(c->columns);
	free(c->keys);
	memset(c, 0, sizeof(*c));
}
