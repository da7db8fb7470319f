/* util.c - allocation that aborts with a message instead of returning NULL
 * (a daemon that cannot allocate a few bytes cannot do anything useful), and
 * the two clocks. */
#include "util.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void
out_of_memory(size_t n)
{
	fprintf(stderr, "ferry: out of memory allocating %zu bytes\n", n);
	abort();
}

void *
xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);
	if (p == NULL)
		out_of_memory(n);
	return p;
}

void *
xcalloc(size_t count, size_t size)
{
	void *p = calloc(count ? count : 1, size ? size : 1);
	if (p == NULL)
		out_of_memory(count * size);
	return p;
}

void *
xrealloc(void *p, size_t n)
{
	p = realloc(p, n ? n : 1);
	if (p == NULL)
		out_of_memory(n);
	return p;
}

char *
xstrdup(const char *s)
{
	size_t n = strlen(s) + 1;
	return memcpy(xmalloc(n), s, n);
}

char *
xasprintf(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char probe[1];
	int n = vsnprintf(probe, sizeof(probe), fmt, ap);
	va_end(ap);
	if (n < 0)
		out_of_memory(0);
	char *s = xmalloc((size_t)n + 1);
	va_start(ap, fmt);
	vsnprintf(s, (size_t)n + 1, fmt, ap);
	va_end(ap);
	return s;
}

static int64_t
clock_ms(clockid_t id)
{
	struct timespec ts;
	clock_gettime(id, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t
util_monotonic_ms(void)
{
	return clock_ms(CLOCK_MONOTONIC);
}

int64_t
util_realtime_ms(void)
{
	return clock_ms(CLOCK_REALTIME);
}

size_t
util_utf8_char(const unsigned char *p, size_t n)
{
	size_t len;
	unsigned char lo = 0x80, hi = 0xbf;

	if (*p < 0x80)
		return 1;
	if (*p >= 0xc2 && *p <= 0xdf)
		len = 2;
	else if (*p >= 0xe0 && *p <= 0xef)
		len = 3;
	else if (*p >= 0xf0 && *p <= 0xf4)
		len = 4;
	else
		return 0;
	if (n < len)
		return 0;
	if (*p == 0xe0)
		lo = 0xa0;
	else if (*p == 0xed)
		hi = 0x9f;
	else if (*p == 0xf0)
		lo = 0x90;
	else if (*p == 0xf4)
		hi = 0x8f;
	if (p[1] < lo || p[1] > hi)
		return 0;
	for (size_t i = 2; i < len; i++)
		if (p[i] < 0x80 || p[i] > 0xbf)
			return 0;
	return len;
}

size_t
util_utf8_copy(char *dst, size_t size, const char *src, size_t n)
{
	const unsigned char *p = (const unsigned char *)src, *end = p + n;
	size_t o = 0;

	while (p < end) {
		size_t len = util_utf8_char(p, (size_t)(end - p));
		if (o + (len ? len : 1) > size - 1)
			break;
		if (len == 0 || *p < 0x20 || *p == 0x7f) {
			dst[o++] = '?';
			p++;
		} else {
			memcpy(dst + o, p, len);
			o += len;
			p += len;
		}
	}
	dst[o] = '\0';
	return o;
}

void
util_utf8_fix(char *s)
{
	size_t n = strlen(s);
	char *tmp = xmalloc(n + 1);

	util_utf8_copy(tmp, n + 1, s, n);
	memcpy(s, tmp, strlen(tmp) + 1);
	free(tmp);
}
