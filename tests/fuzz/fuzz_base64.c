/* fuzz_base64.c - src/base/base64.c both ways: any bytes encode to padded
 * standard base64 that decodes back to them, and decoding is strict: a text
 * it accepts is the one text of its bytes (encoding them again gives it
 * back), so an archive line cannot be read two ways. */
#include "fuzz.h"

#include "base64.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *p = (const char *)data;
	size_t n, m;
	char *enc, *dec, *again;

	enc = base64_encode(p, size, &n);
	CHECK(n == (size + 2) / 3 * 4 && strlen(enc) == n);
	for (size_t i = 0; i < n; i++)
		CHECK(strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
		    "0123456789+/=", enc[i]) != NULL && enc[i] != '\0');
	CHECK(base64_decode(enc, n, &dec, &m) == 0);
	CHECK(m == size && memcmp(dec, p, size) == 0 && dec[m] == '\0');
	free(enc);
	free(dec);

	dec = (char *)&dec;    /* must stay untouched on failure */
	if (base64_decode(p, size, &dec, &m) == 0) {
		again = base64_encode(dec, m, &n);
		CHECK(n == size && memcmp(again, p, size) == 0);
		free(again);
		free(dec);
	} else {
		CHECK(dec == (char *)&dec);
	}
	return 0;
}
