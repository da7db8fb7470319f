/* redis_auth.c - the AUTH command of ferry's Redis connections. */
#include "redis_auth.h"

int
redis_auth_argv(const struct ferry_config *cfg, const char *argv[3])
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
