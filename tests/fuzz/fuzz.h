/* fuzz.h - what every libFuzzer target of tests/fuzz shares: invariants
 * that abort with the line that failed (libFuzzer keeps the input), and the
 * checks several targets make of text. Built by scripts/fuzz only. */
#ifndef FERRY_FUZZ_H
#define FERRY_FUZZ_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json_scan.h"

#define CHECK(cond) do {                                                \
	if (!(cond)) {                                                  \
		fprintf(stderr, "%s:%d: invariant failed: %s\n",        \
		    __FILE__, __LINE__, #cond);                         \
		abort();                                                \
	}                                                               \
} while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Valid UTF-8 as jansson sees it (the library every message ends in). */
static inline bool
fuzz_utf8_ok(const char *p, size_t n)
{
	json_t *s = json_stringn(p, n);

	json_decref(s);
	return s != NULL;
}

/* s is a JSON string literal (quotes included) that jansson reads as the
 * n bytes at text. */
static inline bool
fuzz_jansson_string_is(const char *s, size_t slen, const char *text,
    size_t n)
{
	json_error_t err;
	json_t *v = json_loadb(s, slen, JSON_DECODE_ANY | JSON_ALLOW_NUL,
	    &err);
	bool ok = v != NULL && json_is_string(v) &&
	    json_string_length(v) == n &&
	    memcmp(json_string_value(v), text, n) == 0;

	json_decref(v);
	return ok;
}

/* json_scan's notes, the conservative way, from the text alone (as job.c
 * decided before it had them): 1 if the document may hold what json_scan
 * accepts but jansson does not
 * ("\u0000", a number beyond a double: a long exponent or integer part) or
 * an integer beyond 64 bits, which jansson reads as a real (see job_load).
 * Conservative: digits inside strings count too. */
static inline int
fuzz_text_unlike_jansson(const char *p, size_t n)
{
	const char *end = p + n;
	size_t run = 0;
	int exp = 0;

	for (; p < end; p++) {
		if (*p >= '0' && *p <= '9') {
			if (++run > JSON_SCAN_NOTE_DIGITS || (exp && run > 2))
				return 1;
			continue;
		}
		run = 0;
		if (*p == 'e' || *p == 'E')
			exp = 1;
		else if (*p != '+' && *p != '-')
			exp = 0;
		if (*p == '\\' && end - p >= 6 && memcmp(p, "\\u0000", 6) == 0)
			return 1;
	}
	return 0;
}

#endif
