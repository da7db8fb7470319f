/* config_secret.h - passwords kept out of ferryd.ini: the files that
 * redis_password_file and pg_password_file name, read at every load, and
 * the check that no password is readable by every user. */
#ifndef FERRY_CONFIG_SECRET_H
#define FERRY_CONFIG_SECRET_H

#include <sys/types.h>

#include "config.h"

/* Called by config_load: each redis_password_file / pg_password_file set
 * ([ferryd] or a queue's) fills its key with the file's first line
 * (trailing newline dropped); refused, through `error` (queue index or -1,
 * the _file key, what is wrong), when the key is set inline too or the
 * file cannot be read or is empty. */
typedef void (*config_secret_error_fn)(void *ctx, int queue, const char *key,
    const char *why);
void config_secret_fill(struct ferry_config *cfg, config_secret_error_fn error,
    void *ctx);
/* The first line of file `path` into *value (malloc'd): NULL, or what is
 * wrong (malloc'd) with *value NULL. */
char *config_secret_read(const char *path, char **value);
/* A password every user may read: when cfg's file (cfg->path) sets one
 * itself (redis_password, redis_sentinel_password, pg_password, not
 * through a _file key) and its mode has 004, that key; else the first
 * redis_password_file / pg_password_file naming such a file, that key.
 * The file in *file, its mode in *mode. NULL when there is none. */
const char *config_secret_exposed(const struct ferry_config *cfg,
    const char **file, mode_t *mode);

#endif
