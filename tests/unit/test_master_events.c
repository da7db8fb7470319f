/* test_master_events.c - the ring behind /api/events (src/ferryd/master_events.c):
 * a text longer than an event holds is cut at a character boundary, so
 * the event is still listed (json_pack refuses invalid UTF-8). */
#include <criterion/criterion.h>
#include <jansson.h>
#include <string.h>

#include "master_events.h"

Test(master_events, a_long_text_is_cut_between_characters)
{
	char text[601];

	for (int i = 0; i < 300; i++)        /* 300 x U+00E9, 2 bytes each */
		memcpy(text + 2 * i, "\xc3\xa9", 2);
	text[600] = '\0';
	master_event("worker", "%s", text);  /* 239 bytes: inside a char */
	json_t *a = master_events_json();
	cr_assert_eq(json_array_size(a), 1);
	const char *got = json_string_value(json_object_get(json_array_get(a,
	    0), "text"));
	cr_assert_not_null(got);
	cr_assert_eq(strlen(got), 238, "%zu bytes", strlen(got));
	cr_assert_eq(strncmp(got, "\xc3\xa9", 2), 0);
	json_decref(a);
}
