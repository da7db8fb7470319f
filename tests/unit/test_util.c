/* test_util.c - cutting messages: util_utf8_copy always gives valid UTF-8
 * without control characters, cut at a character boundary (a cut inside a
 * character would make json_string() fail). */
#include <criterion/criterion.h>
#include <jansson.h>
#include <string.h>

#include "util.h"

static void
expect_copy(const char *src, size_t n, size_t size, const char *want)
{
	char out[64];

	cr_assert_leq(size, sizeof(out));
	size_t len = util_utf8_copy(out, size, src, n);
	cr_assert_str_eq(out, want);
	cr_assert_eq(len, strlen(want));
	json_t *j = json_string(out);
	cr_assert_not_null(j, "not valid UTF-8: %s", out);
	json_decref(j);
}

Test(util, cuts_at_a_character_boundary)
{
	/* "é" is 2 bytes, "€" 3, "😀" 4: room for 4 bytes + NUL */
	expect_copy("ab\xc3\xa9", 4, 5, "ab\xc3\xa9");
	expect_copy("abc\xc3\xa9", 5, 5, "abc");
	expect_copy("a\xe2\x82\xac\xe2\x82\xac", 7, 5, "a\xe2\x82\xac");
	expect_copy("ab\xf0\x9f\x98\x80", 6, 5, "ab");
	expect_copy("\xf0\x9f\x98\x80", 4, 5, "\xf0\x9f\x98\x80");
	expect_copy("abc", 3, 1, "");
}

Test(util, invalid_bytes_and_controls_become_question_marks)
{
	expect_copy("a\xff" "b", 3, 16, "a?b");
	expect_copy("\xc3", 1, 16, "?");                 /* cut by the sender */
	expect_copy("\xed\xa0\x80", 3, 16, "???");       /* a surrogate */
	expect_copy("\xc0\xaf", 2, 16, "??");            /* overlong */
	expect_copy("a\tb\nc\x7f", 6, 16, "a?b?c?");
	expect_copy("a\0b", 3, 16, "a?b");
}

Test(util, utf8_char_lengths)
{
	cr_assert_eq(util_utf8_char((const unsigned char *)"a", 1), 1);
	cr_assert_eq(util_utf8_char((const unsigned char *)"\xc3\xa9", 2), 2);
	cr_assert_eq(util_utf8_char((const unsigned char *)"\xc3\xa9", 1), 0);
	cr_assert_eq(util_utf8_char((const unsigned char *)"\xf4\x8f\xbf\xbf", 4),
	    4);
	cr_assert_eq(util_utf8_char((const unsigned char *)"\xf4\x90\x80\x80", 4),
	    0);
	cr_assert_eq(util_utf8_char((const unsigned char *)"\xe0\x80\x80", 3), 0);
}
