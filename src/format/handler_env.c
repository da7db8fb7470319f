/* handler_env.c - the environment an exec handler runs with. Not ferryd's:
 * that holds what ferryd was started with (a PGPASSWORD, a REDISCLI_AUTH,
 * a cloud token) and a handler is the queue's program, not ferryd's. It
 * gets PATH, the locale and time zone (LANG, LC_ALL, TZ, as ferryd has
 * them), FERRY_QUEUE, and what the queue's handler_env names: a NAME
 * passes ferryd's own value on, NAME=VALUE sets one. */
#include "handler_env.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

#define ENV_DEFAULT_PATH "/usr/local/bin:/usr/bin:/bin"

static const char *const passed_on[] = { "LANG", "LC_ALL", "TZ" };

/* Length of the NAME at s (letters, digits, '_', not a digit first). */
static size_t
name_len(const char *s)
{
	size_t n = 0;

	while ((s[n] >= 'A' && s[n] <= 'Z') || (s[n] >= 'a' && s[n] <= 'z') ||
	    s[n] == '_' || (n > 0 && s[n] >= '0' && s[n] <= '9'))
		n++;
	return n;
}

/* One handler_env item, blanks around it trimmed, into item (size
 * HANDLER_ENV_ITEM_MAX + 1); the rest of the list after it. */
static const char *
next_item(const char *s, char *item, size_t *len)
{
	const char *end = strchr(s, ',');
	size_t n = end != NULL ? (size_t)(end - s) : strlen(s);

	while (n > 0 && (*s == ' ' || *s == '\t'))
		s++, n--;
	while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t'))
		n--;
	*len = n;
	if (n <= HANDLER_ENV_ITEM_MAX) {
		memcpy(item, s, n);
		item[n] = '\0';
	}
	return end != NULL ? end + 1 : NULL;
}

const char *
handler_env_check(const char *spec, char *buf, size_t size)
{
	char item[HANDLER_ENV_ITEM_MAX + 1];
	const char *s = spec;
	size_t len;
	int count = 0;

	if (*spec == '\0')
		return NULL;
	while (s != NULL) {
		s = next_item(s, item, &len);
		if (len > HANDLER_ENV_ITEM_MAX) {
			snprintf(buf, size, "has an item longer than %d characters",
			    HANDLER_ENV_ITEM_MAX);
			return buf;
		}
		size_t n = name_len(item);
		if (n == 0 || (item[n] != '\0' && item[n] != '=')) {
			snprintf(buf, size, "item \"%s\" is not NAME or NAME=VALUE "
			    "(NAME: letters, digits and '_', not a digit first; "
			    "items are separated by commas)", item);
			return buf;
		}
		if (strncmp(item, "FERRY_", 6) == 0) {
			snprintf(buf, size, "item \"%s\": names starting with FERRY_ "
			    "are ferry's own", item);
			return buf;
		}
		for (const char *v = item + n; *v != '\0'; v++)
			if ((unsigned char)*v < 0x20 || *v == 0x7f) {
				snprintf(buf, size, "item \"%.*s\" has a control "
				    "character in its value", (int)n, item);
				return buf;
			}
		if (++count > HANDLER_ENV_MAX) {
			snprintf(buf, size, "has more than %d items",
			    HANDLER_ENV_MAX);
			return buf;
		}
	}
	return NULL;
}

/* Add NAME=VALUE to env (n entries so far), replacing an entry of the
 * same NAME. */
static void
env_set(char **env, int *n, const char *name, size_t name_n,
    const char *value)
{
	char *entry = xmalloc(name_n + strlen(value) + 2);

	sprintf(entry, "%.*s=%s", (int)name_n, name, value);
	for (int i = 0; i < *n; i++)
		if (strncmp(env[i], entry, name_n + 1) == 0) {
			free(env[i]);
			env[i] = entry;
			return;
		}
	env[(*n)++] = entry;
}

char **
handler_env_build(const char *queue, const char *spec)
{
	char **env = xcalloc(HANDLER_ENV_MAX + FERRY_ARRAY_LEN(passed_on) + 3,
	    sizeof(*env));
	char item[HANDLER_ENV_ITEM_MAX + 1];
	const char *path = getenv("PATH"), *v;
	size_t len;
	int n = 0;

	env_set(env, &n, "PATH", 4, path != NULL && *path != '\0' ? path :
	    ENV_DEFAULT_PATH);
	for (size_t i = 0; i < FERRY_ARRAY_LEN(passed_on); i++)
		if ((v = getenv(passed_on[i])) != NULL)
			env_set(env, &n, passed_on[i], strlen(passed_on[i]), v);
	env_set(env, &n, "FERRY_QUEUE", 11, queue);
	for (const char *s = spec != NULL && *spec != '\0' ? spec : NULL;
	    s != NULL;) {
		s = next_item(s, item, &len);
		size_t name_n = name_len(item);
		if (len > HANDLER_ENV_ITEM_MAX || name_n == 0)
			continue;       /* refused at load: cannot happen */
		if (item[name_n] == '=') {
			env_set(env, &n, item, name_n, item + name_n + 1);
		} else if ((v = getenv(item)) != NULL) {
			env_set(env, &n, item, name_n, v);
		}
	}
	env[n] = NULL;
	return env;
}

void
handler_env_free(char **env)
{
	if (env == NULL)
		return;
	for (char **e = env; *e != NULL; e++)
		free(*e);
	free(env);
}
