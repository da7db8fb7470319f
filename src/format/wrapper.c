/* wrapper.c - the grammar of doc/formats.md in C. Every step either
 * matches or the whole element is malformed; src/redis/lua/common.lua makes the
 * same decisions in the same order, and tests/integration/test_formats.c
 * holds the two to that. */
#include "wrapper.h"

#include <stdlib.h>
#include <string.h>

#include "util.h"

struct cursor {
	const unsigned char *p, *end;   /* end: the element's last byte "}" */
};

static bool
lit(struct cursor *c, const char *s)
{
	size_t n = strlen(s);

	if ((size_t)(c->end - c->p) < n || memcmp(c->p, s, n) != 0)
		return false;
	c->p += n;
	return true;
}

/* A number without sign or leading zeros, at most max_digits digits. */
static bool
number(struct cursor *c, int max_digits, long long *out)
{
	long long v = 0;
	int n = 0;

	while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
		if (++n > max_digits || (n == 2 && v == 0))
			return false;
		v = v * 10 + (*c->p++ - '0');
	}
	*out = v;
	return n > 0;
}

static int
hex(unsigned char x)
{
	if (x >= '0' && x <= '9')
		return x - '0';
	if (x >= 'a' && x <= 'f')
		return x - 'a' + 10;
	if (x >= 'A' && x <= 'F')
		return x - 'A' + 10;
	return -1;
}

static bool
str(struct cursor *c, struct wrapper_str *out)
{
	const unsigned char *start = c->p;

	if (c->p >= c->end || *c->p != '"')
		return false;
	c->p++;
	for (;;) {
		if (c->p >= c->end)
			return false;
		unsigned char b = *c->p;
		if (b == '"')
			break;
		if (b < 0x20)
			return false;
		if (b == '\\') {
			if (c->end - c->p < 2)
				return false;
			unsigned char e = c->p[1];
			if (strchr("\"\\/bfnrt", e) != NULL && e != '\0') {
				c->p += 2;
				continue;
			}
			if (e != 'u' || c->end - c->p < 6)
				return false;
			int v = 0;
			for (int i = 2; i < 6; i++) {
				int h = hex(c->p[i]);
				if (h < 0)
					return false;
				v = v * 16 + h;
			}
			if (!((v >= 0x01 && v <= 0x1f) || v == 0x7f))
				return false;
			c->p += 6;
			continue;
		}
		size_t n = util_utf8_char(c->p, (size_t)(c->end - c->p));
		if (n == 0)
			return false;
		c->p += n;
		if (c->p - start > WRAPPER_STR_MAX)
			return false;   /* bounded work; the verdict is the same */
	}
	c->p++;
	if (c->p - start > WRAPPER_STR_MAX)
		return false;
	out->p = (const char *)start;
	out->n = (size_t)(c->p - start);
	return true;
}

/* ,"name":str when the member comes next, else nothing (optional). */
static bool
opt_str(struct cursor *c, const char *member, struct wrapper_str *out)
{
	if (!lit(c, member))
		return true;
	return str(c, out);
}

static bool
stamps(struct cursor *c, struct wrapper *w)
{
	int cap = 0;

	if (!lit(c, ",\"stamps\":["))
		return true;
	if (lit(c, "]"))
		return true;
	for (;;) {
		if (w->nstamps == cap) {
			cap = cap ? cap * 2 : 4;
			w->stamps = xrealloc(w->stamps, sizeof(*w->stamps) *
			    (size_t)cap);
		}
		if (!str(c, &w->stamps[w->nstamps]))
			return false;
		w->nstamps++;
		if (lit(c, "]"))
			return true;
		if (!lit(c, ","))
			return false;
	}
}

int
wrapper_parse(const char *el, size_t len, enum wrapper_kind kind,
    struct wrapper *w)
{
	struct cursor c = { (const unsigned char *)el,
	    (const unsigned char *)el + len - 1 };
	bool ok;

	memset(w, 0, sizeof(*w));
	w->seq = w->time = -1;
	if (len < 2 || el[len - 1] != '}')
		return -1;
	if (kind == WRAPPER_JOB) {
		ok = lit(&c, WRAPPER_HEAD "\"recoveries\":") &&
		    number(&c, 9, &w->recoveries) &&
		    lit(&c, ",\"attempts\":") && number(&c, 9, &w->attempts) &&
		    stamps(&c, w) &&
		    opt_str(&c, ",\"first_error\":", &w->first_error) &&
		    opt_str(&c, ",\"last_error\":", &w->last_error) &&
		    (!lit(&c, ",\"seq\":") || number(&c, 15, &w->seq));
	} else {
		ok = lit(&c, "{\"reason\":") && str(&c, &w->reason) &&
		    lit(&c, ",\"attempts\":") && number(&c, 9, &w->attempts) &&
		    lit(&c, ",\"recoveries\":") &&
		    number(&c, 9, &w->recoveries) &&
		    lit(&c, ",\"time\":") && number(&c, 15, &w->time) &&
		    lit(&c, ",\"worker\":") && str(&c, &w->worker) &&
		    opt_str(&c, ",\"id\":", &w->id) && stamps(&c, w) &&
		    opt_str(&c, ",\"first_error\":", &w->first_error) &&
		    opt_str(&c, ",\"last_error\":", &w->last_error);
	}
	if (!ok || !lit(&c, WRAPPER_JOB_MARK)) {
		wrapper_free(w);
		memset(w, 0, sizeof(*w));
		w->seq = w->time = -1;
		return -1;
	}
	w->doc = (const char *)c.p;
	w->doc_len = (size_t)(c.end - c.p);
	return 0;
}

void
wrapper_free(struct wrapper *w)
{
	free(w->stamps);
	w->stamps = NULL;
	w->nstamps = 0;
}

char *
wrapper_str_text(struct wrapper_str s)
{
	char *out, *o;

	if (s.p == NULL)
		return NULL;
	out = o = xmalloc(s.n);
	for (size_t i = 1; i + 1 < s.n; i++) {
		if (s.p[i] != '\\') {
			*o++ = s.p[i];
			continue;
		}
		char e = s.p[++i];
		switch (e) {
		case 'b': *o++ = '\b'; break;
		case 'f': *o++ = '\f'; break;
		case 'n': *o++ = '\n'; break;
		case 'r': *o++ = '\r'; break;
		case 't': *o++ = '\t'; break;
		case 'u':
			*o++ = (char)(hex((unsigned char)s.p[i + 3]) * 16 +
			    hex((unsigned char)s.p[i + 4]));
			i += 4;
			break;
		default: *o++ = e; break;      /* " \ / */
		}
	}
	*o = '\0';
	return out;
}

bool
wrapper_looks_like(const char *el, size_t len)
{
	size_t n = sizeof(WRAPPER_HEAD) - 1;

	return len >= n && memcmp(el, WRAPPER_HEAD, n) == 0;
}
