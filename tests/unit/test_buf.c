/* test_buf.c - the growable string of src/base/buf.c: appends and printf past
 * any initial size keep every byte, logfmt quoting escapes what it must,
 * take hands the text over and leaves the buffer empty. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"

Test(buf, printf_and_append_grow_keeping_every_byte)
{
	struct buf b = BUF_INIT;
	char want[4096 * 3 + 1] = "";

	for (int i = 0; i < 4096; i++) {
		buf_printf(&b, "%02d", i % 100);
		buf_append(&b, "x", 1);
		char part[16];
		snprintf(part, sizeof(part), "%02dx", i % 100);
		strcat(want, part);
	}
	cr_assert_eq(b.len, strlen(want));
	cr_assert_str_eq(b.s, want);
	buf_free(&b);
	cr_assert_null(b.s);
	cr_assert_eq(b.len, 0);
}

Test(buf, one_printf_longer_than_the_room)
{
	struct buf b = BUF_INIT;
	char big[2000];

	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	buf_printf(&b, "<%s>", big);
	cr_assert_eq(b.len, sizeof(big) + 1);
	cr_assert_eq(b.s[0], '<');
	cr_assert_eq(b.s[b.len - 1], '>');
	cr_assert_eq(b.s[b.len], '\0');
	buf_free(&b);
}

Test(buf, quoted_escapes_quote_backslash_newline)
{
	struct buf b = BUF_INIT;

	buf_quoted(&b, "a\"b\\c\nd");
	cr_assert_str_eq(b.s, "\"a\\\"b\\\\c\\nd\"");
	buf_quoted(&b, "");
	cr_assert_str_eq(b.s, "\"a\\\"b\\\\c\\nd\"\"\"");
	buf_free(&b);
}

Test(buf, take_gives_the_text_and_empties)
{
	struct buf b = BUF_INIT;

	char *empty = buf_take(&b);
	cr_assert_str_eq(empty, "");
	free(empty);
	buf_printf(&b, "%s %d", "ok", 7);
	char *s = buf_take(&b);
	cr_assert_str_eq(s, "ok 7");
	cr_assert_null(b.s);
	cr_assert_eq(b.len, 0);
	free(s);
	buf_printf(&b, "again");
	cr_assert_str_eq(b.s, "again");
	buf_free(&b);
}
