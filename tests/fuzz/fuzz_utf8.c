/* fuzz_utf8.c - util_utf8_copy (src/base/util.c), which every message passes
 * before it reaches Redis, PostgreSQL or jansson: the output is valid UTF-8
 * per jansson with no control character, NUL-terminated, at most size - 1
 * bytes, and a cut keeps a prefix: the copy into a small buffer is the
 * start of the copy into a large one, cut only where the next character
 * would not fit. The first two input bytes pick size. */
#include "fuzz.h"

#include "util.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t dsize, n, full_n;
	char *dst, *full, *fixed;

	if (size < 2)
		return 0;
	dsize = 1 + ((size_t)data[0] | (size_t)data[1] << 8) % 300;
	data += 2;
	size -= 2;

	dst = malloc(dsize);
	full = malloc(4 * size + 1);
	CHECK(dst != NULL && full != NULL);
	n = util_utf8_copy(dst, dsize, (const char *)data, size);
	full_n = util_utf8_copy(full, 4 * size + 1, (const char *)data, size);
	CHECK(n <= dsize - 1 && strlen(dst) == n);
	CHECK(full_n <= size && strlen(full) == full_n);
	CHECK(fuzz_utf8_ok(dst, n) && fuzz_utf8_ok(full, full_n));
	for (size_t i = 0; i < full_n; i++)
		CHECK((unsigned char)full[i] >= 0x20 && full[i] != 0x7f);
	/* a prefix of the whole copy, cut at one of its character starts */
	CHECK(n <= full_n && memcmp(dst, full, n) == 0);
	CHECK(n == full_n || ((unsigned char)full[n] & 0xc0) != 0x80);
	/* cut only where the next character does not fit */
	if (n < full_n) {
		size_t next = 1;
		while (n + next < full_n &&
		    ((unsigned char)full[n + next] & 0xc0) == 0x80)
			next++;
		CHECK(n + next > dsize - 1);
	}
	/* valid text without control characters is copied as it is */
	if (fuzz_utf8_ok((const char *)data, size) &&
	    memchr(data, '\0', size) == NULL) {
		bool ctl = false;
		for (size_t i = 0; i < size; i++)
			ctl = ctl || data[i] < 0x20 || data[i] == 0x7f;
		if (!ctl)
			CHECK(full_n == size && memcmp(full, data, size) == 0);
	}
	/* util_utf8_fix is the same copy in place */
	fixed = malloc(size + 1);
	memcpy(fixed, data, size);
	fixed[size] = '\0';
	util_utf8_fix(fixed);
	n = strnlen((const char *)data, size);
	util_utf8_copy(full, 4 * size + 1, (const char *)data, n);
	CHECK(strcmp(fixed, full) == 0);
	free(fixed);
	free(dst);
	free(full);
	return 0;
}
