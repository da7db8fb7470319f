/* base64.c - RFC 4648 section 4, strict on decoding: the padding must be
 * there, the unused bits of the last character zero, so every byte string
 * has exactly one text and an archive line cannot be read two ways. */
#include "base64.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "util.h"

static const char alphabet[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

char *
base64_encode(const void *p, size_t n, size_t *out_len)
{
	const unsigned char *b = p;
	size_t len = (n + 2) / 3 * 4;
	char *out = xmalloc(len + 1), *o = out;

	for (size_t i = 0; i < n; i += 3) {
		uint32_t v = (uint32_t)b[i] << 16;
		if (i + 1 < n)
			v |= (uint32_t)b[i + 1] << 8;
		if (i + 2 < n)
			v |= b[i + 2];
		*o++ = alphabet[v >> 18];
		*o++ = alphabet[(v >> 12) & 63];
		*o++ = i + 1 < n ? alphabet[(v >> 6) & 63] : '=';
		*o++ = i + 2 < n ? alphabet[v & 63] : '=';
	}
	*o = '\0';
	if (out_len != NULL)
		*out_len = len;
	return out;
}

static int
value(char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+')
		return 62;
	if (c == '/')
		return 63;
	return -1;
}

int
base64_decode(const char *s, size_t n, char **out, size_t *out_len)
{
	char *buf, *o;
	size_t pad = 0;

	if (n % 4 != 0)
		return -1;
	if (n > 0 && s[n - 1] == '=')
		pad = n > 1 && s[n - 2] == '=' ? 2 : 1;
	buf = o = xmalloc(n / 4 * 3 + 1);
	for (size_t i = 0; i < n; i += 4) {
		bool last = i + 4 == n;
		int v[4];
		for (int k = 0; k < 4; k++) {
			v[k] = value(s[i + k]);
			if (v[k] < 0 && !(last && k >= 4 - (int)pad))
				goto bad;
		}
		uint32_t x = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12;
		*o++ = (char)(x >> 16);
		if (last && pad == 2) {
			if (v[1] & 15)
				goto bad;
			break;
		}
		x |= (uint32_t)v[2] << 6;
		*o++ = (char)(x >> 8 & 255);
		if (last && pad == 1) {
			if (v[2] & 3)
				goto bad;
			break;
		}
		x |= (uint32_t)v[3];
		*o++ = (char)(x & 255);
	}
	*o = '\0';
	*out = buf;
	*out_len = (size_t)(o - buf);
	return 0;
bad:
	free(buf);
	return -1;
}
