/* harness_servers.h - asserts over the Redis servers of servers*.c, for
 * the tests of those servers themselves. */
#ifndef FERRY_TEST_HARNESS_SERVERS_H
#define FERRY_TEST_HARNESS_SERVERS_H

/* One command to 127.0.0.1:port; its raw reply (static, overwritten by
 * the next call), asserted to have arrived. */
const char *h_cmd(int port, const char *c);
/* Assert that ROLE on 127.0.0.1:port answers want. */
void h_assert_role(int port, const char *want);

#endif
