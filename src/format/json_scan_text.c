/* json_scan_text.c - the text inside JSON strings: escapes (surrogate pairs
 * joined), well-formed UTF-8, and unescaping for the caller. */
#include "json_scan.h"

#include <string.h>

static int
hex4(const unsigned char *p, uint32_t *out)
{
	uint32_t v = 0;
	unsigned char c;
	int i;

	for (i = 0; i < 4; i++) {
		c = p[i];
		v <<= 4;
		if (c >= '0' && c <= '9')
			v |= (uint32_t)(c - '0');
		else if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f')
			v |= (uint32_t)((c | 0x20) - 'a' + 10);
		else
			return -1;
	}
	*out = v;
	return 0;
}

/* The \u escape at s (6 bytes readable), joining a surrogate pair. */
static const char *
escape_u(const unsigned char *s, size_t n, uint32_t *cp, size_t *used)
{
	uint32_t lo;

	if (hex4(s + 2, cp) == -1)
		return "bad \\u escape";
	*used = 6;
	if (*cp < 0xd800 || *cp > 0xdfff)
		return NULL;
	if (*cp >= 0xdc00 || n < 12 || s[6] != '\\' || s[7] != 'u' ||
	    hex4(s + 8, &lo) == -1 || lo < 0xdc00 || lo > 0xdfff)
		return "lone surrogate";
	*cp = 0x10000 + ((*cp - 0xd800) << 10) + (lo - 0xdc00);
	*used = 12;
	return NULL;
}

const char *
json_scan_escape_cp(const char *s, size_t n, uint32_t *cp, size_t *used)
{
	static const unsigned char simple[256] = {
		['"'] = '"', ['\\'] = '\\', ['/'] = '/', ['b'] = '\b',
		['f'] = '\f', ['n'] = '\n', ['r'] = '\r', ['t'] = '\t',
	};
	const unsigned char *u = (const unsigned char *)s;

	*used = 2;
	if (n < 2 || simple[u[1]] == 0) {
		if (n >= 2 && u[1] == 'u')
			return n < 6 ? "bad \\u escape" :
			    escape_u(u, n, cp, used);
		return "bad escape";
	}
	*cp = simple[u[1]];
	return NULL;
}

size_t
json_scan_utf8_len(const char *s, size_t n)
{
	const unsigned char *p = (const unsigned char *)s;
	unsigned char c = n > 0 ? p[0] : 0;
	unsigned char lo = c == 0xe0 ? 0xa0 : c == 0xf0 ? 0x90 : 0x80;
	unsigned char hi = c == 0xed ? 0x9f : c == 0xf4 ? 0x8f : 0xbf;
	size_t len = c < 0xc2 ? 0 : c < 0xe0 ? 2 : c < 0xf0 ? 3 : c < 0xf5 ? 4 : 0;
	size_t i;

	if (n == 0)
		return 0;
	if (c >= 0x20 && c < 0x80)
		return 1;
	if (len == 0 || n < len || p[1] < lo || p[1] > hi)
		return 0;
	for (i = 2; i < len; i++)
		if ((p[i] & 0xc0) != 0x80)
			return 0;
	return len;
}

static size_t
utf8_put(uint32_t cp, unsigned char *o)
{
	size_t n, i;

	if (cp < 0x80) {
		o[0] = (unsigned char)cp;
		return 1;
	}
	n = cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
	for (i = n - 1; i > 0; i--, cp >>= 6)
		o[i] = (unsigned char)(0x80 | (cp & 0x3f));
	o[0] = (unsigned char)(((0xff00 >> n) & 0xff) | cp);
	return n;
}

int
json_scan_escape(const char *s, size_t n, char out[4], size_t *used,
    const char **what)
{
	uint32_t cp;

	*what = json_scan_escape_cp(s, n, &cp, used);
	if (*what == NULL && cp == 0)
		*what = "string holds \\u0000";
	if (*what != NULL)
		return -1;
	return (int)utf8_put(cp, (unsigned char *)out);
}

int
json_scan_unescape(const char *s, size_t n, char *out, size_t *outlen,
    struct json_scan_error *e)
{
	const char *bs;
	size_t i = 0, o = 0, run, used;
	int k;

	while (i < n) {
		bs = memchr(s + i, '\\', n - i);
		run = bs != NULL ? (size_t)(bs - (s + i)) : n - i;
		memcpy(out + o, s + i, run);
		i += run;
		o += run;
		if (i == n)
			break;
		k = json_scan_escape(s + i, n - i, out + o, &used, &e->what);
		if (k == -1) {
			e->pos = i;
			return -1;
		}
		i += used;
		o += (size_t)k;
	}
	*outlen = o;
	return 0;
}
