/* base64.h - RFC 4648 base64 (standard alphabet, padded), for bytes that
 * must travel inside JSON but are not valid UTF-8: a dead job's document
 * in `ferryctl dead show` and in the dead-letter archive. Pure code. */
#ifndef FERRY_BASE64_H
#define FERRY_BASE64_H

#include <stddef.h>

/* The base64 text of n bytes, malloc'd and NUL-terminated; its length in
 * *out_len (may be NULL). */
char *base64_encode(const void *p, size_t n, size_t *out_len);
/* Decode n characters of padded base64 (no white space). 0 and a malloc'd
 * buffer (NUL-terminated for convenience) in *out, its length in
 * *out_len; -1 when s is not base64 (*out untouched). */
int base64_decode(const char *s, size_t n, char **out, size_t *out_len);

#endif
