/* queue.c - key names of the Redis layout (doc/design.md, 2), connecting
 * with timeouts, and calling the embedded Lua scripts by SHA-1. */
#include "queue.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include "job.h"
#include "cluster.h"
#include "redis_auth.h"
#include "sentinel.h"
#include "util.h"

/* Each key is "PREFIX:{QUEUE}:" and a name: the hash tag keeps a queue's
 * keys in one cluster slot. Most names are their field's; the two prefixes
 * end in ':' for what follows them. */
#define KEY(field) { offsetof(struct queue_keys, field), #field }
static const struct {
	size_t offset;          /* of a char [QUEUE_KEY_MAX] in queue_keys */
	const char *name;
} key_names[] = {
	KEY(ready), KEY(requeue), KEY(delayed), KEY(scheduled), KEY(dead),
	KEY(stats), KEY(owners), KEY(bkeys), KEY(protected), KEY(config),
	KEY(ids), KEY(idsha), KEY(clock),
	/* the masters' heartbeats: in the queue's slot, so that reap.lua can
	 * read them in a cluster too */
	KEY(masters),
	{ offsetof(struct queue_keys, cache_prefix), "cache:" },
	{ offsetof(struct queue_keys, proc_prefix), "proc:" },
};
#undef KEY
_Static_assert(sizeof(struct queue_keys) ==
    FERRY_ARRAY_LEN(key_names) * QUEUE_KEY_MAX,
    "every field of queue_keys is a key named in key_names");

void
queue_keys_init(struct queue_keys *k, const char *prefix, const char *queue)
{
	for (size_t i = 0; i < FERRY_ARRAY_LEN(key_names); i++)
		snprintf((char *)k + key_names[i].offset, QUEUE_KEY_MAX,
		    "%s:{%s}:%s", prefix, queue, key_names[i].name);
}

int
queue_error_is(const redisReply *r, const char *code)
{
	size_t n = strlen(code);

	return r != NULL && r->type == REDIS_REPLY_ERROR && r->str != NULL &&
	    strncmp(r->str, code, n) == 0 && (r->str[n] == ' ' ||
	    r->str[n] == '\0');
}

bool
queue_role_changed(const redisReply *r)
{
	return queue_error_is(r, "READONLY") || queue_error_is(r, "UNBLOCKED") ||
	    queue_error_is(r, "MASTERDOWN") || queue_error_is(r, "MOVED") ||
	    queue_error_is(r, "ASK") || queue_error_is(r, "TRYAGAIN") ||
	    queue_error_is(r, "CLUSTERDOWN");
}

void
queue_proc_key(const struct queue_keys *k, const char *worker_id, char *out,
    size_t size)
{
	snprintf(out, size, "%s%s", k->proc_prefix, worker_id);
}

/* The address this process last connected to (the primary the sentinels
 * named, when they do): for messages, and to see a switch. */
static char current[CONFIG_HOST_MAX + 16];

const char *
queue_address(const struct ferry_config *cfg, char *buf, size_t size)
{
	if (*cfg->redis_cluster != '\0' && current[0] != '\0')
		snprintf(buf, size, "%s (cluster node)", current);
	else if (*cfg->redis_cluster != '\0')
		snprintf(buf, size, "the cluster (redis_cluster %s)",
		    cfg->redis_cluster);
	else if (*cfg->redis_sentinels != '\0' && current[0] != '\0')
		snprintf(buf, size, "%s (primary of %s)", current,
		    cfg->redis_sentinel_master);
	else if (*cfg->redis_sentinels != '\0')
		snprintf(buf, size, "the primary of %s (redis_sentinels %s)",
		    cfg->redis_sentinel_master, cfg->redis_sentinels);
	else if (*cfg->redis_socket != '\0')
		snprintf(buf, size, "%s", cfg->redis_socket);
	else
		snprintf(buf, size, "%s:%d", cfg->redis_host, cfg->redis_port);
	return buf;
}

const char *
queue_current_address(void)
{
	return current;
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
		    "needs (%s): give it the ACL of ferry's doc/security.md "
		    "(\"Redis ACLs\"); ACL LOG says what was refused", addr, who,
		    reply);
	else
		snprintf(err, errsize, "redis at %s refused AUTH as %s (%s): "
		    "check [ferryd] redis_user and redis_password against the "
		    "server's ACL (ACL GETUSER %s)", addr, who, reply,
		    *cfg->redis_user != '\0' ? cfg->redis_user : "default");
}

/* Is the server c talks to a primary? -1 with why not (a replica, or a
 * server that refuses ROLE) in err. */
static int
check_role(redisContext *c, const char *addr, const char *master, char *err,
    size_t errsize)
{
	redisReply *r = redisCommand(c, "ROLE");
	int rc = -1;

	if (r == NULL)
		snprintf(err, errsize, "redis at %s: ROLE: %s", addr, c->errstr);
	else if (r->type == REDIS_REPLY_ERROR)
		snprintf(err, errsize, "redis at %s refused ROLE (%s): ferry checks "
		    "that the server the sentinels name is the primary; allow "
		    "+role in ferry's ACL", addr, r->str);
	else if (r->type != REDIS_REPLY_ARRAY || r->elements < 1 ||
	    r->element[0]->type != REDIS_REPLY_STRING)
		snprintf(err, errsize, "redis at %s gave no ROLE", addr);
	else if (strcmp(r->element[0]->str, "master") != 0)
		snprintf(err, errsize, "redis at %s, named primary of %s by a "
		    "sentinel, is a %s: a failover is under way (retrying)", addr,
		    master, r->element[0]->str);
	else
		rc = 0;
	freeReplyObject(r);
	return rc;
}

/* Connect to one address (socket when host is NULL), AUTH and SELECT. */
static redisContext *
connect_to(const struct ferry_config *cfg, const char *host, int port,
    long timeout_ms, bool *refused, char *err, size_t errsize)
{
	struct timeval tv = { timeout_ms / 1000, (timeout_ms % 1000) * 1000 };
	const char *auth[3];
	int nauth = redis_auth_argv(cfg, auth);
	char addr[CONFIG_HOST_MAX + 16];
	redisContext *c;
	redisReply *r;

	if (host == NULL) {
		snprintf(addr, sizeof(addr), "%s", cfg->redis_socket);
		c = redisConnectUnixWithTimeout(cfg->redis_socket, tv);
	} else {
		snprintf(addr, sizeof(addr), "%s:%d", host, port);
		c = redisConnectWithTimeout(host, port, tv);
	}
	if (c == NULL || c->err) {
		snprintf(err, errsize, "cannot connect to redis at %s: %s", addr,
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
	    (*cfg->redis_sentinels != '\0' && check_role(c, addr,
	    cfg->redis_sentinel_master, err, errsize) == -1) ||
	    (cfg->redis_db != 0 && !command_ok(c, err, errsize, "redis SELECT",
	    redisCommand(c, "SELECT %d", cfg->redis_db)))) {
		redisFree(c);
		return NULL;
	}
	snprintf(current, sizeof(current), "%s", addr);
	return c;
}

redisContext *
queue_connect_as(const struct ferry_config *cfg, long timeout_ms,
    bool *refused, char *err, size_t errsize)
{
	return queue_connect_for(cfg, NULL, timeout_ms, refused, err, errsize);
}

redisContext *
queue_connect_for(const struct ferry_config *cfg, const char *queue,
    long timeout_ms, bool *refused, char *err, size_t errsize)
{
	long ask_ms = timeout_ms < QUEUE_SENTINEL_TIMEOUT_MS ? timeout_ms :
	    QUEUE_SENTINEL_TIMEOUT_MS;
	int n = sentinel_count(cfg);
	char host[CONFIG_HOST_MAX];
	int port;

	if (refused != NULL)
		*refused = false;
	if (*cfg->redis_cluster != '\0')
		return cluster_find_node(cfg, queue, ask_ms, host, sizeof(host),
		    &port, err, errsize) == -1 ? NULL : connect_to(cfg, host, port,
		    timeout_ms, refused, err, errsize);
	if (n == 0)
		return connect_to(cfg, *cfg->redis_socket != '\0' ? NULL :
		    cfg->redis_host, cfg->redis_port, timeout_ms, refused, err,
		    errsize);
	/* a sentinel may name a replica (it has not seen the failover yet):
	 * then ask the next one */
	for (int k = 0; k < n; k++) {
		if (sentinel_find_primary(cfg, ask_ms, host, sizeof(host), &port,
		    err, errsize) == -1)
			return NULL;
		redisContext *c = connect_to(cfg, host, port, timeout_ms, refused,
		    err, errsize);
		if (c != NULL || (refused != NULL && *refused))
			return c;
		sentinel_distrust(cfg);
	}
	return NULL;
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
