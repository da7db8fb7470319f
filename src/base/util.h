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

/* Length of the valid UTF-8 character at p (RFC 3629: no overlong forms,
 * no surrogates, at most U+10FFFF) within n > 0 bytes, or 0. */
size_t util_utf8_char(const unsigned char *p, size_t n);
/* Copy n bytes of src into dst (size bytes, size > 0) as valid UTF-8
 * without control characters, NUL-terminated: a byte that does not start
 * a valid character, and a control character (tab, newline...), becomes
 * '?', and the text is cut at a character boundary where it does not
 * fit. Every message ferry hands to Redis, PostgreSQL or jansson goes
 * through it: a cut inside a character made json_string() return NULL.
 * Returns the length written. */
size_t util_utf8_copy(char *dst, size_t size, const char *src, size_t n);
/* util_utf8_copy of a NUL-terminated string onto itself. */
void util_utf8_fix(char *s);

int64_t util_monotonic_ms(void);   /* for intervals and deadlines */
int64_t util_realtime_ms(void);    /* for log stamps only */

#endif
