/* test_proctitle.c - the title written over argv and environ is what
 * /proc/self/cmdline shows, the environment still works, argv's strings
 * survive, and comm takes the short name. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proctitle.h"

static char *
read_proc(const char *path, size_t *len)
{
	static char buf[65536];
	FILE *f = fopen(path, "r");

	cr_assert_not_null(f, "%s", path);
	*len = fread(buf, 1, sizeof(buf) - 1, f);
	buf[*len] = '\0';
	fclose(f);
	return buf;
}

Test(proctitle, title_env_and_comm)
{
	size_t len;

	setenv("FERRY_PROCTITLE_TEST", "kept", 1);
	char *before = strdup(getenv("PATH") != NULL ? getenv("PATH") : "");
	cr_assert_eq(proctitle_init(), 0);
	proctitle_set("worker %s/%d idle", "orders", 2);
	char *cmd = read_proc("/proc/self/cmdline", &len);
	cr_assert_str_eq(cmd, "ferryd: worker orders/2 idle");
	/* nothing after the title but NULs */
	for (size_t i = strlen(cmd); i < len; i++)
		cr_assert_eq(cmd[i], '\0', "byte %zu after the title", i);
	cr_assert_str_eq(getenv("FERRY_PROCTITLE_TEST"), "kept");
	cr_assert_str_eq(getenv("PATH") != NULL ? getenv("PATH") : "", before);
	setenv("FERRY_PROCTITLE_TEST", "changed", 1);
	setenv("FERRY_PROCTITLE_NEW", "added", 1);
	cr_assert_str_eq(getenv("FERRY_PROCTITLE_NEW"), "added");

	/* shorter after longer: the rest is cleared */
	proctitle_set("master");
	cmd = read_proc("/proc/self/cmdline", &len);
	cr_assert_str_eq(cmd, "ferryd: master");
	for (size_t i = strlen(cmd); i < len; i++)
		cr_assert_eq(cmd[i], '\0');

	/* longer than the whole area: cut, never past it */
	char big[70000];
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	proctitle_set("%s", big);
	cmd = read_proc("/proc/self/cmdline", &len);
	cr_assert_eq(strncmp(cmd, "ferryd: xxx", 11), 0);
	cr_assert_lt(strlen(cmd), sizeof(big));
	cr_assert_str_eq(getenv("FERRY_PROCTITLE_TEST"), "changed");
	cr_assert_str_eq(getenv("FERRY_PROCTITLE_NEW"), "added");

	proctitle_set_comm("ferry:a-very-long-queue-name");
	char *comm = read_proc("/proc/self/comm", &len);
	cr_assert_str_eq(comm, "ferry:a-very-lo\n");
	free(before);
}
