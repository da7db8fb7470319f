/* test_handler_env.c - what an exec handler's environment holds: PATH, the
 * locale, FERRY_QUEUE and the queue's handler_env, never the rest of
 * ferryd's (a PGPASSWORD); and what handler_env values the loader takes. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "handler.h"
#include "handler_env.h"
#include "util.h"

TestSuite(handler_env, .timeout = 60);

static const char *
check(const char *spec)
{
	static char buf[300];

	return handler_env_check(spec, buf, sizeof(buf));
}

Test(handler_env, values_the_loader_takes)
{
	cr_assert_null(check(""));
	cr_assert_null(check("HOME"));
	cr_assert_null(check("HOME, LC_TIME ,A_1=x y, EMPTY="));
	cr_assert_null(check("PATH=/opt/bin:/usr/bin"));
	cr_assert_null(check("URL=http://x/?a=b"));
}

Test(handler_env, values_the_loader_refuses)
{
	cr_assert_str_eq(check("1A"), "item \"1A\" is not NAME or NAME=VALUE "
	    "(NAME: letters, digits and '_', not a digit first; items are "
	    "separated by commas)");
	cr_assert_not_null(check("A B"));
	cr_assert_not_null(check("A,,B"));
	cr_assert_not_null(check("=x"));
	cr_assert_not_null(check("A-B=1"));
	cr_assert_str_eq(check("FERRY_QUEUE=x"), "item \"FERRY_QUEUE=x\": names "
	    "starting with FERRY_ are ferry's own");
	cr_assert_str_eq(check("A=x\ty"), "item \"A\" has a control character "
	    "in its value");
	char many[400] = "V0";
	for (int i = 1; i <= HANDLER_ENV_MAX; i++)
		snprintf(many + strlen(many), sizeof(many) - strlen(many), ",V%d", i);
	cr_assert_str_eq(check(many), "has more than 32 items");
	char longer[HANDLER_ENV_ITEM_MAX + 10];
	memset(longer, 'A', sizeof(longer) - 1);
	longer[sizeof(longer) - 1] = '\0';
	cr_assert_str_eq(check(longer), "has an item longer than 190 characters");
}

/* the entry NAME=... of env, or NULL */
static const char *
lookup(char **env, const char *name)
{
	size_t n = strlen(name);

	for (; *env != NULL; env++)
		if (strncmp(*env, name, n) == 0 && (*env)[n] == '=')
			return *env + n + 1;
	return NULL;
}

static int
count(char **env)
{
	int n = 0;

	while (env[n] != NULL)
		n++;
	return n;
}

Test(handler_env, only_what_is_named)
{
	struct queue_config q = { .name = "orders" };

	setenv("PATH", "/usr/bin:/bin", 1);
	setenv("LANG", "C.UTF-8", 1);
	unsetenv("LC_ALL");
	unsetenv("TZ");
	setenv("PGPASSWORD", "secret", 1);
	setenv("APP_TOKEN", "t0k", 1);
	unsetenv("NOT_SET_ANYWHERE");

	char **env = handler_env_build(q.name, q.handler_env);
	cr_assert_str_eq(lookup(env, "PATH"), "/usr/bin:/bin");
	cr_assert_str_eq(lookup(env, "LANG"), "C.UTF-8");
	cr_assert_str_eq(lookup(env, "FERRY_QUEUE"), "orders");
	cr_assert_null(lookup(env, "PGPASSWORD"));
	cr_assert_null(lookup(env, "APP_TOKEN"));
	cr_assert_eq(count(env), 3);
	handler_env_free(env);

	q.handler_env = " APP_TOKEN, MODE=fast lane, PATH=/opt/app/bin, "
	    "NOT_SET_ANYWHERE, EMPTY=";
	env = handler_env_build(q.name, q.handler_env);
	cr_assert_str_eq(lookup(env, "APP_TOKEN"), "t0k");
	cr_assert_str_eq(lookup(env, "MODE"), "fast lane");
	cr_assert_str_eq(lookup(env, "PATH"), "/opt/app/bin");
	cr_assert_str_eq(lookup(env, "EMPTY"), "");
	cr_assert_null(lookup(env, "NOT_SET_ANYWHERE"));
	cr_assert_null(lookup(env, "PGPASSWORD"));
	cr_assert_eq(count(env), 6, "PATH is replaced, not added twice");
	handler_env_free(env);

	unsetenv("PATH");
	q.handler_env = NULL;
	env = handler_env_build(q.name, q.handler_env);
	cr_assert_str_eq(lookup(env, "PATH"), "/usr/local/bin:/usr/bin:/bin");
	handler_env_free(env);
	setenv("PATH", "/usr/bin:/bin", 1);
}

/* Through a real handler: what the program sees, and argv[0] looked up in
 * the handler's PATH. */
Test(handler_env, what_the_handler_sees)
{
	char dir[] = "/tmp/ferry-env-XXXXXX", path[100], out[100], cmd[300];
	char err[512], line[300];
	struct job j = { 0 };
	struct handler_result r = { 0 };
	struct queue_config q = { .name = "q", .handler = CONFIG_HANDLER_EXEC,
	    .handler_timeout_ms = 5000 };

	cr_assert_not_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/h.sh", dir);
	snprintf(out, sizeof(out), "%s/env.txt", dir);
	FILE *f = fopen(path, "w");
	cr_assert_not_null(f);
	fprintf(f, "env > %s\nread -r line\necho ok a\n", out);
	fclose(f);
	j.el = j.raw = "{}";
	j.el_len = j.raw_len = 2;
	strcpy(j.id, "a");
	setenv("PATH", "/usr/bin:/bin", 1);
	setenv("PGPASSWORD", "secret", 1);
	setenv("KEEP_ME", "kept", 1);
	q.handler_env = "KEEP_ME";
	snprintf(cmd, sizeof(cmd), "sh %s", path);
	q.command = cmd;
	cr_assert_eq(handler_exec_run(&q, &j, &r, 1, err, sizeof(err)), 0, "%s",
	    err);
	cr_assert_eq(r.outcome, HANDLER_OK, "%s", r.message);
	f = fopen(out, "r");
	cr_assert_not_null(f);
	int pg = 0, keep = 0, queue = 0;
	while (fgets(line, sizeof(line), f) != NULL) {
		pg += strncmp(line, "PGPASSWORD=", 11) == 0;
		keep += strcmp(line, "KEEP_ME=kept\n") == 0;
		queue += strcmp(line, "FERRY_QUEUE=q\n") == 0;
	}
	fclose(f);
	cr_assert_eq(pg, 0, "the handler saw ferryd's PGPASSWORD");
	cr_assert_eq(keep, 1);
	cr_assert_eq(queue, 1);

	/* "sh" is looked up in the handler's PATH, where it is not */
	q.handler_env = "PATH=/nonexistent";
	memset(&r, 0, sizeof(r));
	cr_assert_eq(handler_exec_run(&q, &j, &r, 1, err, sizeof(err)), -1);
	cr_assert_eq(r.outcome, HANDLER_RETRY);
	cr_assert_not_null(strstr(err, "No such file or directory"), "%s", err);
	unlink(out);
	unlink(path);
	rmdir(dir);
}
