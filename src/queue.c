/* queue.c - key names of the Redis layout (DESIGN.md), connecting with
 * timeouts, and calling the embedded Lua scripts by SHA-1. */
#include "queue.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include "job.h"
#include "util.h"

void
queue_keys_init(struct queue_keys *k, const char *prefix, const char *queue)
{
	snprintf(k->ready, sizeof(k->ready), "%s:{%s}:ready", prefix, queue);
	snprintf(k->requeue, sizeof(k->requeue), "%s:{%s}:requeue", prefix, queue);
	snprintf(k->delayed, sizeof(k->delayed), "%s:{%s}:delayed", prefix, queue);
	snprintf(k->dead, sizeof(k->dead), "%s:{%s}:dead", prefix, queue);
	snprintf(k->stats, sizeof(k->stats), "%s:{%s}:stats", prefix, queue);
	snprintf(k->owners, sizeof(k->owners), "%s:{%s}:owners", prefix, queue);
	snprintf(k->bkeys, sizeof(k->bkeys), "%s:{%s}:bkeys", prefix, queue);
	snprintf(k->proc_prefix, sizeof(k->proc_prefix), "%s:{%s}:proc:", prefix,
	    queue);
}

int
queue_error_is(const redisReply *r, const char *code)
{
	size_t n = strlen(code);

	return r != NULL && r->type == REDIS_REPLY_ERROR && r->str != NULL &&
	    strncmp(r->str, code, n) == 0 && (r->str[n] == ' ' ||
	    r->str[n] == '\0');
}

void
queue_proc_key(const struct queue_keys *k, const char *worker_id, char *out,
    size_t size)
{
	snprintf(out, size, "%s%s", k->proc_prefix, worker_id);
}

void
queue_heartbeat_key(const char *prefix, const char *master_id, char *out,
    size_t size)
{
	snprintf(out, size, "%s:master:%s", prefix, master_id);
}

const char *
queue_address(const struct ferry_config *cfg, char *buf, size_t size)
{
	if (*cfg->redis_socket != '\0')
		snprintf(buf, size, "%s", cfg->redis_socket);
	else
		snprintf(buf, size, "%s:%d", cfg->redis_host, cfg->redis_port);
	return buf;
}

static int
command_ok(redisContext *c, char *err, size_t errsize, const char *what,
    redisReply *r)
{
	int ok = r != NULL && r->type != REDIS_REPLY_ERROR;

	if (!ok)
		snprintf(err, errsize, "%s failed: %s", what,
		    r != NULL ? r->str : c->errstr);
	if (r != NULL)
		freeReplyObject(r);
	return ok;
}

int
queue_auth_argv(const struct ferry_config *cfg, const char *argv[3])
{
	int n = 0;

	if (*cfg->redis_password == '\0')
		return 0;       /* config_load refuses redis_user alone */
	argv[n++] = "AUTH";
	if (*cfg->redis_user != '\0')
		argv[n++] = cfg->redis_user;
	argv[n++] = cfg->redis_password;
	return n;
}

bool
queue_auth_refused(const redisReply *r)
{
	return queue_error_is(r, "WRONGPASS") || queue_error_is(r, "NOPERM") ||
	    queue_error_is(r, "NOAUTH") || (r != NULL &&
	    r->type == REDIS_REPLY_ERROR && r->str != NULL &&
	    strncmp(r->str, "ERR AUTH", 8) == 0);
}

void
queue_auth_error(const struct ferry_config *cfg, const char *reply, char *err,
    size_t errsize)
{
	char addr[300], who[300];

	queue_address(cfg, addr, sizeof(addr));
	if (*cfg->redis_user != '\0')
		snprintf(who, sizeof(who), "user %s", cfg->redis_user);
	else
		snprintf(who, sizeof(who), "the default user");
	if (strncmp(reply, "NOAUTH", 6) == 0 && *cfg->redis_password == '\0')
		snprintf(err, errsize, "redis at %s requires a password (%s): "
		    "set [ferryd] redis_password, and redis_user for an ACL user",
		    addr, reply);
	else if (strncmp(reply, "NOPERM", 6) == 0)
		snprintf(err, errsize, "redis at %s: %s may not do what ferry "
		    "needs (%s): give it the ACL in ferry's README (\"The trust "
		    "boundary\"); ACL LOG says what was refused", addr, who, reply);
	else
		snprintf(err, errsize, "redis at %s refused AUTH as %s (%s): "
		    "check [ferryd] redis_user and redis_password against the "
		    "server's ACL (ACL GETUSER %s)", addr, who, reply,
		    *cfg->redis_user != '\0' ? cfg->redis_user : "default");
}

redisContext *
queue_connect_as(const struct ferry_config *cfg, long timeout_ms,
    bool *refused, char *err, size_t errsize)
{
	struct timeval tv = { timeout_ms / 1000, (timeout_ms % 1000) * 1000 };
	const char *auth[3];
	int nauth = queue_auth_argv(cfg, auth);
	char addr[300];
	redisContext *c;
	redisReply *r;

	if (refused != NULL)
		*refused = false;
	if (*cfg->redis_socket != '\0')
		c = redisConnectUnixWithTimeout(cfg->redis_socket, tv);
	else
		c = redisConnectWithTimeout(cfg->redis_host, cfg->redis_port, tv);
	if (c == NULL || c->err) {
		snprintf(err, errsize, "cannot connect to redis at %s: %s",
		    queue_address(cfg, addr, sizeof(addr)),
		    c != NULL ? c->errstr : "out of memory");
		redisFree(c);
		return NULL;
	}
	redisSetTimeout(c, tv);
	r = nauth > 0 ? redisCommandArgv(c, nauth, auth, NULL) : NULL;
	if (r != NULL && r->type == REDIS_REPLY_ERROR) {
		queue_auth_error(cfg, r->str, err, errsize);
		if (refused != NULL)
			*refused = true;
		freeReplyObject(r);
		redisFree(c);
		return NULL;
	}
	if ((nauth > 0 && !command_ok(c, err, errsize, "redis AUTH", r)) ||
	    (cfg->redis_db != 0 && !command_ok(c, err, errsize, "redis SELECT",
	    redisCommand(c, "SELECT %d", cfg->redis_db)))) {
		redisFree(c);
		return NULL;
	}
	return c;
}

redisContext *
queue_connect(const struct ferry_config *cfg, long timeout_ms, char *err,
    size_t errsize)
{
	return queue_connect_as(cfg, timeout_ms, NULL, err, errsize);
}

const char *
queue_script_sha(enum lua_script s)
{
	static char sha[LUA_SCRIPT_COUNT][41];

	if (sha[s][0] == '\0')
		job_sha1_hex(lua_script_source[s], strlen(lua_script_source[s]),
		    sha[s]);
	return sha[s];
}

redisReply *
queue_script(redisContext *c, enum lua_script s, int nkeys, int argc,
    const char **argv, const size_t *argvlen)
{
	const char **args = xmalloc(sizeof(*args) * ((size_t)argc + 3));
	size_t *lens = xmalloc(sizeof(*lens) * ((size_t)argc + 3));
	char numkeys[16];
	redisReply *r;

	snprintf(numkeys, sizeof(numkeys), "%d", nkeys);
	args[0] = "EVALSHA";
	args[1] = queue_script_sha(s);
	args[2] = numkeys;
	lens[0] = 7;
	lens[1] = 40;
	lens[2] = strlen(numkeys);
	for (int i = 0; i < argc; i++) {
		args[i + 3] = argv[i];
		lens[i + 3] = argvlen != NULL ? argvlen[i] : strlen(argv[i]);
	}
	r = redisCommandArgv(c, argc + 3, args, lens);
	if (r != NULL && r->type == REDIS_REPLY_ERROR &&
	    strncmp(r->str, "NOSCRIPT", 8) == 0) {
		freeReplyObject(r);
		args[0] = "EVAL";
		lens[0] = 4;
		args[1] = lua_script_source[s];
		lens[1] = strlen(lua_script_source[s]);
		r = redisCommandArgv(c, argc + 3, args, lens);
	}
	free(args);
	free(lens);
	return r;
}
