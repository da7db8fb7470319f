/* buf.h - a growable byte string: append to it, printf into it, take the
 * text away or free it. Always NUL-terminated once anything was added.
 * A zeroed struct buf (BUF_INIT) is an empty buffer. */
#ifndef FERRY_BUF_H
#define FERRY_BUF_H

#include <stddef.h>

struct buf {
	char *s;                  /* NULL until something is added */
	size_t len, cap;
};

#define BUF_INIT { NULL, 0, 0 }

void buf_append(struct buf *b, const char *p, size_t n);
void buf_printf(struct buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* s as a logfmt value: quoted, backslash, quote and newline escaped. */
void buf_quoted(struct buf *b, const char *s);
/* The text (the caller frees it; "" when empty); b is empty again. */
char *buf_take(struct buf *b);
void buf_free(struct buf *b);

#endif
