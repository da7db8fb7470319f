/* redis_auth.h - the AUTH command ferry's Redis connections send, from the
 * configuration alone, for every module that opens one (queue, cluster,
 * the master's links). */
#ifndef FERRY_REDIS_AUTH_H
#define FERRY_REDIS_AUTH_H

#include "config.h"

/* The AUTH command for cfg in argv: "AUTH user password" for a Redis 6+
 * ACL user (redis_user), "AUTH password" for the default user; returns
 * argc, 0 when no password is configured. */
int redis_auth_argv(const struct ferry_config *cfg, const char *argv[3]);

#endif
