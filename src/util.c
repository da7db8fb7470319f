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
