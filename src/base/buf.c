/* buf.c - the growable byte string of buf.h. Memory comes from xrealloc
 * (util.h): running out of it ends the process, so no call fails. */
#include "buf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

/* Room for n more bytes and the NUL. */
static void
reserve(struct buf *b, size_t n)
{
	if (b->cap - b->len > n)
		return;
	b->cap = b->cap * 2 + n + 256;
	b->s = xrealloc(b->s, b->cap);
}

void
buf_append(struct buf *b, const char *p, size_t n)
{
	reserve(b, n);
	memcpy(b->s + b->len, p, n);
	b->len += n;
	b->s[b->len] = '\0';
}

void
buf_printf(struct buf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	reserve(b, 0);
	for (;;) {
		va_start(ap, fmt);
		n = vsnprintf(b->s + b->len, b->cap - b->len, fmt, ap);
		va_end(ap);
		if (n >= 0 && (size_t)n < b->cap - b->len)
			break;
		reserve(b, n > 0 ? (size_t)n : 0);
	}
	b->len += (size_t)n;
}

void
buf_quoted(struct buf *b, const char *s)
{
	buf_append(b, "\"", 1);
	for (; *s != '\0'; s++) {
		if (*s == '"' || *s == '\\') {
			char esc[2] = { '\\', *s };
			buf_append(b, esc, 2);
		} else if (*s == '\n') {
			buf_append(b, "\\n", 2);
		} else {
			buf_append(b, s, 1);
		}
	}
	buf_append(b, "\"", 1);
}

char *
buf_take(struct buf *b)
{
	char *s = b->s != NULL ? b->s : xstrdup("");

	*b = (struct buf)BUF_INIT;
	return s;
}

void
buf_free(struct buf *b)
{
	free(b->s);
	*b = (struct buf)BUF_INIT;
}
