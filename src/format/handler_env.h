/* handler_env.h - the environment of an exec handler (handler_env.c): PATH,
 * LANG, LC_ALL and TZ as ferryd has them, FERRY_QUEUE, and the queue's
 * handler_env: "NAME, NAME=VALUE, ..." (a bare NAME passes ferryd's value
 * on). Nothing else of ferryd's environment. A leaf: the loader checks
 * handler_env values with it, the exec handler builds the environment. */
#ifndef FERRY_HANDLER_ENV_H
#define FERRY_HANDLER_ENV_H

#include <stddef.h>

#define HANDLER_ENV_MAX 32          /* handler_env items */
#define HANDLER_ENV_ITEM_MAX 190

/* NULL when spec is a valid handler_env value, else why not (in buf). */
const char *handler_env_check(const char *spec, char *buf, size_t size);
/* A NULL-terminated environment for execve for the queue named queue,
 * whose handler_env is spec (NULL or "" for none); free with
 * handler_env_free. */
char **handler_env_build(const char *queue, const char *spec);
void handler_env_free(char **env);

#endif
