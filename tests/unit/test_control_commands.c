/* test_control_commands.c - the control command table that ferryd and
 * ferryctl share: each row's usage names it with as many words as its
 * arguments, lookups find every row and nothing else, and ferryctl's
 * argument check takes exactly the shapes ferryd serves. */
#include <criterion/criterion.h>
#include <string.h>

#include "control_commands.h"

Test(control_commands, usage_starts_with_name_and_counts_arguments)
{
	for (int i = 0; i < CONTROL_NCOMMANDS; i++) {
		const struct control_command *c = &control_commands[i];
		size_t n = strlen(c->name);
		int words = 0;
		cr_assert_not_null(c->name, "row %d has no name", i);
		cr_assert(strncmp(c->usage, c->name, n) == 0 &&
		    (c->usage[n] == '\0' || c->usage[n] == ' '), "%s", c->usage);
		for (const char *p = c->usage; *p != '\0'; p++)
			words += *p == ' ';
		cr_assert_eq(words, control_command_nargs(c), "%s", c->usage);
	}
}

Test(control_commands, find_every_row_and_nothing_else)
{
	for (int i = 0; i < CONTROL_NCOMMANDS; i++)
		cr_assert_eq(control_command_find(control_commands[i].name),
		    &control_commands[i]);
	cr_assert_null(control_command_find("bogus"));
	cr_assert_null(control_command_find(""));
	cr_assert_null(control_command_find("Status"));
}

Test(control_commands, ferryctl_sends_all_but_help)
{
	cr_assert(control_command_for_ctl(control_command_find("workers")));
	cr_assert(control_command_for_ctl(control_command_find("reload")));
	cr_assert_not(control_command_for_ctl(control_command_find("help")));
	cr_assert_not(control_command_for_ctl(NULL));
}

Test(control_commands, argument_shapes)
{
	const struct control_command *w = control_command_find("workers");
	const struct control_command *p = control_command_find("pause");
	const struct control_command *s = control_command_find("status");
	char *ok[] = { "workers", "q", "3" }, *zero[] = { "workers", "q", "0" };
	char *neg[] = { "workers", "q", "-1" }, *word[] = { "workers", "q", "x" };
	char *empty[] = { "workers", "q", "" }, *tail[] = { "workers", "q", "3x" };
	char *pause[] = { "pause", "q" }, *status[] = { "status", "q" };

	cr_assert(control_command_args_ok(w, 3, ok));
	cr_assert(control_command_args_ok(w, 3, zero));
	cr_assert_not(control_command_args_ok(w, 3, neg));
	cr_assert_not(control_command_args_ok(w, 3, word));
	cr_assert_not(control_command_args_ok(w, 3, empty));
	cr_assert_not(control_command_args_ok(w, 3, tail));
	cr_assert_not(control_command_args_ok(w, 2, ok));
	cr_assert(control_command_args_ok(p, 2, pause));
	cr_assert_not(control_command_args_ok(p, 1, pause));
	cr_assert(control_command_args_ok(s, 1, status));
	cr_assert_not(control_command_args_ok(s, 2, status));
}
