/* config_secret.c - passwords kept out of ferryd.ini: redis_password_file
 * and pg_password_file name a file whose first line is the password, read
 * at every load (start and reload); and the check that a file which does
 * hold a password is not readable by every user. */
#include "config_secret.h"
#include "config_int.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SECRET_MAX 1024         /* bytes of a password, at most */
#define F(field) offsetof(struct ferry_config, field)
#define Q(field) offsetof(struct queue_config, field)

/* A *_file key and the key it fills; queue rows have queue set. */
static const struct secret_key {
	bool queue;
	const char *file_key, *value_key;
	size_t file_off, value_off;
	/* the value's check, as its key's row has (NULL: none) */
	const char *(*check)(const char *, char *buf, size_t size);
} secret_keys[] = {
	{ false, "redis_password_file", "redis_password",
	    F(redis_password_file), F(redis_password), NULL },
	{ false, "pg_password_file", "pg_password", F(pg_password_file),
	    F(pg_password), NULL },
	{ false, "http_token_file", "http_token", F(http_token_file),
	    F(http_token), config_check_http_token },
	{ true, "pg_password_file", "pg_password", Q(pg_password_file),
	    Q(pg_password), NULL },
};

#define FIELD(base, off) (*(char **)((char *)(base) + (off)))

char *
config_secret_read(const char *path, char **value)
{
	char buf[SECRET_MAX + 2];
	size_t len = 0;
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);

	*value = NULL;
	if (fd == -1)
		return xasprintf("cannot read %s: %s (it is read at start and "
		    "on every reload, then as [ferryd] user: make it readable "
		    "by that user's group, e.g. mode 0640)", path,
		    strerror(errno));
	while (len < sizeof(buf) - 1 &&
	    (n = read(fd, buf + len, sizeof(buf) - 1 - len)) != 0) {
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1) {
			int saved = errno;
			close(fd);
			return xasprintf("cannot read %s: %s", path,
			    strerror(saved));
		}
		len += (size_t)n;
		if (memchr(buf, '\n', len) != NULL)
			break;
	}
	close(fd);
	buf[len] = '\0';
	char *nl = memchr(buf, '\n', len);
	size_t first = nl != NULL ? (size_t)(nl - buf) : len;
	if (first > 0 && buf[first - 1] == '\r')
		first--;
	if (first > SECRET_MAX)
		return xasprintf("%s: the first line is longer than %d bytes "
		    "(it must hold the password alone)", path, SECRET_MAX);
	if (memchr(buf, '\0', first) != NULL)
		return xasprintf("%s: the first line holds a NUL byte", path);
	if (first == 0)
		return xasprintf("%s is empty (write the password on its first "
		    "line)", path);
	buf[first] = '\0';
	*value = xstrdup(buf);
	return NULL;
}

/* One row of secret_keys for the struct at base (queue index or -1). */
static void
fill_one(const struct secret_key *k, void *base, int queue,
    config_secret_error_fn error, void *ctx)
{
	const char *file = FIELD(base, k->file_off);
	char *value, *why;

	if (file == NULL || *file == '\0')
		return;
	if (*FIELD(base, k->value_off) != '\0') {
		why = xasprintf("set together with %s (allowed: one of the two; "
		    "remove %s)", k->value_key, k->value_key);
	} else if ((why = config_secret_read(file, &value)) == NULL) {
		char buf[160];
		const char *bad = k->check != NULL ? k->check(value, buf,
		    sizeof(buf)) : NULL;
		if (bad != NULL) {
			why = xasprintf("the first line of %s %s", file, bad);
			free(value);
			error(ctx, queue, k->file_key, why);
			free(why);
			return;
		}
		free(FIELD(base, k->value_off));
		FIELD(base, k->value_off) = value;
		return;
	}
	error(ctx, queue, k->file_key, why);
	free(why);
}

void
config_secret_fill(struct ferry_config *cfg, config_secret_error_fn error,
    void *ctx)
{
	for (size_t i = 0; i < FERRY_ARRAY_LEN(secret_keys); i++) {
		const struct secret_key *k = &secret_keys[i];
		if (!k->queue)
			fill_one(k, cfg, -1, error, ctx);
		for (int q = 0; k->queue && q < cfg->nqueues; q++)
			fill_one(k, &cfg->queues[q], q, error, ctx);
	}
}

/* The password key `base` sets in the file itself (not through its _file
 * key), or NULL. */
static const char *
inline_secret(const void *base, bool queue)
{
	for (size_t i = 0; i < FERRY_ARRAY_LEN(secret_keys); i++) {
		const struct secret_key *k = &secret_keys[i];
		const char *file = FIELD(base, k->file_off);
		if (k->queue == queue && *FIELD(base, k->value_off) != '\0' &&
		    (file == NULL || *file == '\0'))
			return k->value_key;
	}
	return NULL;
}

/* Whether every user may read `path`; its mode in *mode. */
static bool
readable_by_all(const char *path, mode_t *mode)
{
	struct stat st;

	if (stat(path, &st) == -1 || (st.st_mode & S_IROTH) == 0)
		return false;
	*mode = st.st_mode & 07777;
	return true;
}

/* The first _file key of `base` naming a file every user may read. */
static const char *
exposed_file(const void *base, bool queue, const char **file, mode_t *mode)
{
	for (size_t i = 0; i < FERRY_ARRAY_LEN(secret_keys); i++) {
		const struct secret_key *k = &secret_keys[i];
		const char *f = FIELD(base, k->file_off);
		if (k->queue == queue && f != NULL && *f != '\0' &&
		    readable_by_all(f, mode)) {
			*file = f;
			return k->file_key;
		}
	}
	return NULL;
}

const char *
config_secret_exposed(const struct ferry_config *cfg, const char **file,
    mode_t *mode)
{
	const char *key = inline_secret(cfg, false);

	if (key == NULL && *cfg->redis_sentinel_password != '\0')
		key = "redis_sentinel_password";
	for (int q = 0; key == NULL && q < cfg->nqueues; q++)
		key = inline_secret(&cfg->queues[q], true);
	*file = cfg->path;
	if (key != NULL && readable_by_all(cfg->path, mode))
		return key;
	key = exposed_file(cfg, false, file, mode);
	for (int q = 0; key == NULL && q < cfg->nqueues; q++)
		key = exposed_file(&cfg->queues[q], true, file, mode);
	return key;
}
