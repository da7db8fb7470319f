/* json_scan.h - a strict (RFC 8259) JSON scanner over a byte buffer that
 * need not be NUL-terminated: validate, walk objects and arrays, unescape
 * strings. It never allocates; values are spans of the caller's bytes. */
#ifndef FERRY_JSON_SCAN_H
#define FERRY_JSON_SCAN_H

#include <stddef.h>
#include <stdint.h>

#define JSON_SCAN_MAX_DEPTH 64  /* containers nested deeper are refused */

enum json_scan_type {
	JSON_SCAN_NULL,
	JSON_SCAN_FALSE,
	JSON_SCAN_TRUE,
	JSON_SCAN_NUMBER,
	JSON_SCAN_STRING,
	JSON_SCAN_ARRAY,
	JSON_SCAN_OBJECT,
};

/* One value's text as written: a string includes its quotes (its contents,
 * still escaped, are p + 1 and len - 2), a container its brackets. */
struct json_scan_span {
	const char *p;
	size_t len;
	enum json_scan_type type;
};

/* Where and what: pos is a 0-based byte offset from the start of the
 * buffer given; what is static text such as "expected ':'". */
struct json_scan_error {
	size_t pos;
	const char *what;
};

/* Offset of the first byte at or after pos that is not JSON whitespace. */
size_t json_scan_ws(const char *buf, size_t len, size_t pos);

/* Validate the value at buf[*pos] (leading whitespace skipped) and move
 * *pos just past it. Returns 0, or -1 with e filled. */
int json_scan_value(const char *buf, size_t len, size_t *pos,
    struct json_scan_span *v, struct json_scan_error *e);

/* Validate a whole document: one value, whitespace around it allowed. */
int json_scan_document(const char *buf, size_t len, struct json_scan_span *v,
    struct json_scan_error *e);

/* What a valid document may hold that other readers (jansson) take
 * differently: a "\u0000" escape (in a string or a key), or a number with
 * a run of more than JSON_SCAN_NOTE_DIGITS digits (an integer beyond
 * int64, a value beyond a double) or more than JSON_SCAN_NOTE_EXP_DIGITS
 * in its exponent. */
#define JSON_SCAN_NOTE_NUL 1u
#define JSON_SCAN_NOTE_LONG_NUMBER 2u
#define JSON_SCAN_NOTE_DIGITS 18        /* digits that always fit an int64 */
#define JSON_SCAN_NOTE_EXP_DIGITS 2

/* json_scan_document, and in *notes the JSON_SCAN_NOTE_* bits of what it
 * read (on failure: of what it read before the error). */
int json_scan_document_noted(const char *buf, size_t len,
    struct json_scan_span *v, struct json_scan_error *e, unsigned *notes);

/* The span of a document that json_scan_document accepted before (text
 * known valid, not checked again): whitespace around it trimmed. */
void json_scan_trusted(const char *buf, size_t len, struct json_scan_span *v);

/* Walks the members of an object or the elements of an array. The
 * container must be a span returned by the functions above: it is known
 * valid, so walking it checks nothing again. */
struct json_scan_iter {
	const char *p;          /* next byte to look at */
	const char *end;        /* the container's closing bracket */
};
void json_scan_iter_init(struct json_scan_iter *it,
    const struct json_scan_span *container);
/* Return 1 with the next member (key is a string span) or element, or 0
 * at the end. */
int json_scan_object_next(struct json_scan_iter *it,
    struct json_scan_span *key, struct json_scan_span *val);
int json_scan_array_next(struct json_scan_iter *it,
    struct json_scan_span *val);

/* The code point of the escape at s (s[0] is the backslash, n bytes
 * readable; a surrogate pair is one escape, \u0000 is 0): NULL with the
 * bytes read in *used, or what is wrong: "bad escape", "bad \\u escape",
 * "lone surrogate". */
const char *json_scan_escape_cp(const char *s, size_t n, uint32_t *cp,
    size_t *used);

/* Length of the well-formed UTF-8 character at s (n bytes readable; ASCII
 * control characters are not), or 0: overlong forms, surrogates and code
 * points past U+10FFFF are not well-formed. */
size_t json_scan_utf8_len(const char *s, size_t n);

/* Decode the escape at s (s[0] is the backslash, n bytes readable; a
 * surrogate pair is one escape) into out as UTF-8. Returns the number of
 * bytes written (1-4) and the bytes read in *used, or -1 with *what:
 * as json_scan_escape_cp, or "string holds \\u0000" (PostgreSQL text
 * cannot hold NUL). */
int json_scan_escape(const char *s, size_t n, char out[4], size_t *used,
    const char **what);

/* Unescape the contents of a validated string (between its quotes, n
 * bytes) into out, which must have room for n bytes: the text never grows.
 * Returns 0 with the length in *outlen, or -1 with e (pos from s). */
int json_scan_unescape(const char *s, size_t n, char *out, size_t *outlen,
    struct json_scan_error *e);

#endif
