/* util.h - small helpers every part of ferry uses: allocation that cannot
 * return NULL, formatted strings, clocks. */
#ifndef FERRY_UTIL_H
#define FERRY_UTIL_H

#include <stddef.h>
#include <stdint.h>

#define FERRY_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

void *xmalloc(size_t n);
void *xcalloc(size_t count, size_t size);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

int64_t util_monotonic_ms(void);   /* for intervals and deadlines */
int64_t util_realtime_ms(void);    /* for log stamps only */

#endif
