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

#endif
