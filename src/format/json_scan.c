/* json_scan.c - strict RFC 8259 validation by recursive descent bounded by
 * a depth limit, then cheap walks over the validated text. No allocation. */
#include "json_scan.h"

#include <string.h>

#define JS_STR(x) #x
#define JS_XSTR(x) JS_STR(x)

struct scan {
	const unsigned char *base, *p, *end;
	int depth;
	unsigned notes;         /* JSON_SCAN_NOTE_* seen so far */
	struct json_scan_error *e;
};

static int scan_value(struct scan *s);

static int
scan_fail(struct scan *s, const unsigned char *at, const char *what)
{
	s->e->pos = (size_t)(at - s->base);
	s->e->what = what;
	return -1;
}

/* Fail at s->p: "what", or "unexpected end of input" if nothing is left. */
static int
scan_expected(struct scan *s, const char *what)
{
	if (s->p == s->end)
		what = "unexpected end of input";
	return scan_fail(s, s->p, what);
}

static inline int
is_ws(unsigned char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static inline const unsigned char *
skip_ws(const unsigned char *p, const unsigned char *end)
{
	while (p < end && is_ws(*p))
		p++;
	return p;
}

static inline int
is_digit(unsigned char c)
{
	return c >= '0' && c <= '9';
}

/* The type of the value starting with byte c (stored plus one: 0 is a
 * number's digit or minus sign). */
static const unsigned char lead_type[256] = {
	['n'] = JSON_SCAN_NULL + 1, ['f'] = JSON_SCAN_FALSE + 1,
	['t'] = JSON_SCAN_TRUE + 1, ['"'] = JSON_SCAN_STRING + 1,
	['['] = JSON_SCAN_ARRAY + 1, ['{'] = JSON_SCAN_OBJECT + 1,
};

static inline enum json_scan_type
type_of(unsigned char c)
{
	return lead_type[c] ? (enum json_scan_type)(lead_type[c] - 1) :
	    JSON_SCAN_NUMBER;
}

static int
scan_string(struct scan *s)
{
	const unsigned char *open = s->p, *p = s->p + 1, *end = s->end;
	const char *what;
	uint32_t cp;
	size_t n;

	while (p < end) {
		if (*p >= 0x20 && *p < 0x80 && *p != '"' && *p != '\\') {
			p++;
		} else if (*p == '"') {
			s->p = p + 1;
			return 0;
		} else if (*p == '\\') {
			if (end - p < 2)
				break;
			what = json_scan_escape_cp((const char *)p,
			    (size_t)(end - p), &cp, &n);
			if (what != NULL)
				return scan_fail(s, p, what);
			if (cp == 0)
				s->notes |= JSON_SCAN_NOTE_NUL;
			p += n;
		} else if (*p < 0x20) {
			return scan_fail(s, p, "control character in string");
		} else if ((n = json_scan_utf8_len((const char *)p,
		    (size_t)(end - p))) == 0) {
			return scan_fail(s, p, "invalid UTF-8");
		} else {
			p += n;
		}
	}
	return scan_fail(s, open, "unterminated string");
}

static const unsigned char *
skip_digits(const unsigned char *p, const unsigned char *end)
{
	while (p < end && is_digit(*p))
		p++;
	return p;
}

/* Digits at p, noting a run longer than max (JSON_SCAN_NOTE_LONG_NUMBER). */
static const unsigned char *
skip_digits_noted(struct scan *s, const unsigned char *p, size_t max)
{
	const unsigned char *q = skip_digits(p, s->end);

	if ((size_t)(q - p) > max)
		s->notes |= JSON_SCAN_NOTE_LONG_NUMBER;
	return q;
}

/* -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? */
static int
scan_number(struct scan *s)
{
	const unsigned char *start = s->p, *p = s->p, *end = s->end;

	if (p < end && *p == '-')
		p++;
	if (p == end || !is_digit(*p))
		return scan_fail(s, start, *start == '-' ? "bad number" :
		    "expected a value");
	if (*p == '0' && p + 1 < end && is_digit(p[1]))
		return scan_fail(s, start, "leading zero");
	p = skip_digits_noted(s, p, JSON_SCAN_NOTE_DIGITS);
	if (p < end && *p == '.') {
		if (++p == end || !is_digit(*p))
			return scan_fail(s, start, "bad number");
		p = skip_digits_noted(s, p, JSON_SCAN_NOTE_DIGITS);
	}
	if (p < end && (*p == 'e' || *p == 'E')) {
		if (++p < end && (*p == '+' || *p == '-'))
			p++;
		if (p == end || !is_digit(*p))
			return scan_fail(s, start, "bad number");
		p = skip_digits_noted(s, p, JSON_SCAN_NOTE_EXP_DIGITS);
	}
	s->p = p;
	return 0;
}

static int
scan_literal(struct scan *s)
{
	const char *word = *s->p == 't' ? "true" : *s->p == 'f' ? "false" :
	    "null";
	size_t n = strlen(word);

	if ((size_t)(s->end - s->p) < n || memcmp(s->p, word, n) != 0)
		return scan_fail(s, s->p, "invalid literal");
	s->p += n;
	return 0;
}

/* Step into a container: 1 if it closes at once, 0 if not, or -1. */
static int
scan_enter(struct scan *s, unsigned char close)
{
	if (++s->depth > JSON_SCAN_MAX_DEPTH)
		return scan_fail(s, s->p,
		    "nesting deeper than " JS_XSTR(JSON_SCAN_MAX_DEPTH));
	s->p = skip_ws(s->p + 1, s->end);
	if (s->p == s->end || *s->p != close)
		return 0;
	s->p++;
	s->depth--;
	return 1;
}

/* After a member or element: 1 at the closing bracket, 0 after a comma. */
static int
scan_next(struct scan *s, unsigned char close, const char *what)
{
	s->p = skip_ws(s->p, s->end);
	if (s->p < s->end && *s->p == close) {
		s->p++;
		s->depth--;
		return 1;
	}
	if (s->p == s->end || *s->p != ',')
		return scan_expected(s, what);
	s->p = skip_ws(s->p + 1, s->end);
	return 0;
}

static int
scan_array(struct scan *s)
{
	int r;

	if ((r = scan_enter(s, ']')) != 0)
		return r == 1 ? 0 : -1;
	do {
		if (scan_value(s) == -1)
			return -1;
	} while ((r = scan_next(s, ']', "expected ',' or ']'")) == 0);
	return r == 1 ? 0 : -1;
}

static int
scan_member(struct scan *s)
{
	if (s->p == s->end || *s->p != '"')
		return scan_expected(s, "expected a string key");
	if (scan_string(s) == -1)
		return -1;
	s->p = skip_ws(s->p, s->end);
	if (s->p == s->end || *s->p != ':')
		return scan_expected(s, "expected ':'");
	s->p = skip_ws(s->p + 1, s->end);
	return scan_value(s);
}

static int
scan_object(struct scan *s)
{
	int r;

	if ((r = scan_enter(s, '}')) != 0)
		return r == 1 ? 0 : -1;
	do {
		if (scan_member(s) == -1)
			return -1;
	} while ((r = scan_next(s, '}', "expected ',' or '}'")) == 0);
	return r == 1 ? 0 : -1;
}

static int
scan_value(struct scan *s)
{
	if (s->p == s->end)
		return scan_expected(s, "expected a value");
	switch (*s->p) {
	case '"':
		return scan_string(s);
	case '{':
		return scan_object(s);
	case '[':
		return scan_array(s);
	case 't':
	case 'f':
	case 'n':
		return scan_literal(s);
	default:
		return scan_number(s);
	}
}

size_t
json_scan_ws(const char *buf, size_t len, size_t pos)
{
	const unsigned char *b = (const unsigned char *)buf;

	if (pos >= len)
		return len;
	return (size_t)(skip_ws(b + pos, b + len) - b);
}

/* json_scan_value, adding what it saw to *notes. */
static int
value_noted(const char *buf, size_t len, size_t *pos,
    struct json_scan_span *v, struct json_scan_error *e, unsigned *notes)
{
	struct scan s;
	const unsigned char *start;

	s.base = (const unsigned char *)buf;
	s.end = s.base + len;
	s.p = start = s.base + json_scan_ws(buf, len, *pos);
	s.depth = 0;
	s.notes = 0;
	s.e = e;
	int rc = scan_value(&s);
	*notes |= s.notes;
	if (rc == -1)
		return -1;
	v->p = (const char *)start;
	v->len = (size_t)(s.p - start);
	v->type = type_of(*start);
	*pos = (size_t)(s.p - s.base);
	return 0;
}

int
json_scan_value(const char *buf, size_t len, size_t *pos,
    struct json_scan_span *v, struct json_scan_error *e)
{
	unsigned notes = 0;

	return value_noted(buf, len, pos, v, e, &notes);
}

int
json_scan_document_noted(const char *buf, size_t len,
    struct json_scan_span *v, struct json_scan_error *e, unsigned *notes)
{
	size_t pos = 0;

	*notes = 0;
	if (value_noted(buf, len, &pos, v, e, notes) == -1)
		return -1;
	pos = json_scan_ws(buf, len, pos);
	if (pos != len) {
		e->pos = pos;
		e->what = "unexpected data after the value";
		return -1;
	}
	return 0;
}

int
json_scan_document(const char *buf, size_t len, struct json_scan_span *v,
    struct json_scan_error *e)
{
	unsigned notes;

	return json_scan_document_noted(buf, len, v, e, &notes);
}

void
json_scan_trusted(const char *buf, size_t len, struct json_scan_span *v)
{
	const unsigned char *b = (const unsigned char *)buf;
	const unsigned char *p = skip_ws(b, b + len), *end = b + len;

	while (end > p && is_ws(end[-1]))
		end--;
	v->p = (const char *)p;
	v->len = (size_t)(end - p);
	v->type = p < end ? type_of(*p) : JSON_SCAN_NULL;
}

/* Byte classes for walking validated text. */
enum {
	CL_WS = 1, CL_COMMA = 2, CL_CLOSE = 4, CL_OPEN = 8, CL_QUOTE = 16,
	CL_BSLASH = 32,
	CL_SCALAR_END = CL_WS | CL_COMMA | CL_CLOSE,
	CL_NESTING = CL_OPEN | CL_CLOSE | CL_QUOTE,
	CL_IN_STRING = CL_QUOTE | CL_BSLASH,
};
static const unsigned char cl[256] = {
	[' '] = CL_WS, ['\t'] = CL_WS, ['\n'] = CL_WS, ['\r'] = CL_WS,
	[','] = CL_COMMA, [']'] = CL_CLOSE, ['}'] = CL_CLOSE,
	['['] = CL_OPEN, ['{'] = CL_OPEN, ['"'] = CL_QUOTE, ['\\'] = CL_BSLASH,
};

/* Past the first byte at or after p of class c (or end). */
static inline const unsigned char *
find_class(const unsigned char *p, const unsigned char *end, unsigned char c)
{
	while (p < end && (cl[*p] & c) == 0)
		p++;
	return p;
}

/* Past the end of the (valid) string whose opening quote is at p. */
static const unsigned char *
skip_string(const unsigned char *p, const unsigned char *end)
{
	for (p++; (p = find_class(p, end, CL_IN_STRING)) < end; p += 2)
		if (*p == '"')
			return p + 1;
	return end;
}

/* Past the end of the (valid) value at p. */
static const unsigned char *
skip_value(const unsigned char *p, const unsigned char *end)
{
	int depth = 0;

	if (*p == '"')
		return skip_string(p, end);
	if (*p != '{' && *p != '[')
		return find_class(p, end, CL_SCALAR_END);
	while ((p = find_class(p, end, CL_NESTING)) < end) {
		if (*p == '"') {
			p = skip_string(p, end);
			continue;
		}
		if (*p == '{' || *p == '[')
			depth++;
		else if (--depth == 0)
			return p + 1;
		p++;
	}
	return end;
}

void
json_scan_iter_init(struct json_scan_iter *it,
    const struct json_scan_span *container)
{
	it->p = container->p + 1;
	it->end = container->p + container->len - 1;
}

/* The start of the next member or element, or NULL at the end. */
static const char *
iter_start(struct json_scan_iter *it)
{
	const unsigned char *end = (const unsigned char *)it->end;
	const unsigned char *p = skip_ws((const unsigned char *)it->p, end);

	if (p < end && *p == ',')
		p = skip_ws(p + 1, end);
	if (p >= end) {
		it->p = it->end;
		return NULL;
	}
	return (const char *)p;
}

int
json_scan_array_next(struct json_scan_iter *it, struct json_scan_span *val)
{
	const char *p = iter_start(it);

	if (p == NULL)
		return 0;
	it->p = (const char *)skip_value((const unsigned char *)p,
	    (const unsigned char *)it->end);
	val->p = p;
	val->len = (size_t)(it->p - p);
	val->type = type_of((unsigned char)*p);
	return 1;
}

int
json_scan_object_next(struct json_scan_iter *it, struct json_scan_span *key,
    struct json_scan_span *val)
{
	const unsigned char *end = (const unsigned char *)it->end, *p;

	if ((key->p = iter_start(it)) == NULL)
		return 0;
	p = skip_string((const unsigned char *)key->p, end);
	key->len = (size_t)((const char *)p - key->p);
	key->type = JSON_SCAN_STRING;
	p = skip_ws(skip_ws(p, end) + 1, end);     /* the ':' */
	it->p = (const char *)p;
	return json_scan_array_next(it, val);
}
