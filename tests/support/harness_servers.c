/* harness_servers.c - asserts over the Redis servers of servers*.c
 * (harness_servers.h). */
#include "harness_servers.h"

#include <criterion/criterion.h>

#include "servers.h"
#include "servers_ha.h"

const char *
h_cmd(int port, const char *c)
{
	static char buf[65536];

	cr_assert_gt(test_redis_command(port, c, buf, sizeof(buf)), 0,
	    "no reply from 127.0.0.1:%d to %s", port, c);
	return buf;
}

void
h_assert_role(int port, const char *want)
{
	char role[64];

	cr_assert_eq(test_redis_role(port, role, sizeof(role)), 0,
	    "ROLE on 127.0.0.1:%d: no answer", port);
	cr_assert_str_eq(role, want, "ROLE on 127.0.0.1:%d", port);
}
