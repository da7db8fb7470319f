/* test_servers_ha.c - servers_ha.c gives real Redis replicas and real
 * sentinels: a killed primary's replica is promoted, a forced failover swaps
 * the roles (the old primary follows the new one), a frozen replica catches
 * up. Every test stops what it started (.fini), even when an assert fails. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include "harness_servers.h"
#include "servers.h"
#include "servers_ha.h"

#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* what the tests use, see servers_ha.h */
#define DOWN_AFTER_MS 1000
#define FAILOVER_TIMEOUT_MS 5000
#define QUORUM 2
#define NAME "ferry-test"

static const char *const quick_sync[] = { "--repl-diskless-sync", "yes",
	"--repl-diskless-sync-delay", "0", NULL };

static struct test_redis primary, replica;
static struct test_sentinels sentinels;

static void
teardown(void)
{
	test_sentinels_stop(&sentinels);
	test_redis_stop(&replica);
	test_redis_stop(&primary);
}

TestSuite(servers_ha, .fini = teardown, .timeout = 60);

/* "field:value" from INFO replication on port ("" if absent). */
static void
repl_field(int port, const char *field, char *out, size_t outsz)
{
	servers_info_field(h_cmd(port, "INFO replication"), field, out, outsz);
}

/* The primary, one replica of it and 3 sentinels (quorum 2) that see both
 * and each other. */
static void
start_all(void)
{
	cr_assert_eq(test_redis_start(&primary, quick_sync), 0);
	cr_assert_eq(test_redis_replica_start(&replica, &primary, quick_sync), 0);
	h_assert_role(primary.port, "master");
	h_assert_role(replica.port, "slave");
	long long t0 = servers_now_ms();
	cr_assert_eq(test_sentinels_start(&sentinels, 3, NAME, primary.port,
	    QUORUM, DOWN_AFTER_MS, FAILOVER_TIMEOUT_MS, 1), 0);
	fprintf(stderr, "servers_ha: 3 sentinels ready in %lld ms\n",
	    servers_now_ms() - t0);
	cr_assert_eq(sentinels.n, 3);
	for (int i = 0; i < 3; i++) {
		cr_assert_gt(sentinels.s[i].pid, 0);
		h_assert_role(sentinels.s[i].port, "sentinel");
	}
	cr_assert_eq(test_sentinels_master_port(&sentinels), primary.port);
	cr_assert_eq(test_sentinels_wait_master(&sentinels, primary.port, 1000),
	    0);
}

Test(servers_ha, kill9_primary_promotes_replica)
{
	start_all();
	/* one connection: WAIT counts the replicas that have its writes */
	cr_assert_str_eq(h_cmd(primary.port, "SET before-kill 1\r\nWAIT 1 "
	    "1000"), "+OK\r\n:1\r\n");

	long long t0 = servers_now_ms();
	test_redis_kill9(&primary);
	cr_assert_eq(primary.pid, 0);
	cr_assert_eq(test_sentinels_wait_master(&sentinels, replica.port,
	    20000), 0);
	fprintf(stderr, "servers_ha: kill -9 of the primary: the sentinels "
	    "promoted the replica in %lld ms (down-after %d ms)\n",
	    servers_now_ms() - t0, DOWN_AFTER_MS);

	h_assert_role(replica.port, "master");
	cr_assert_eq(test_sentinels_master_port(&sentinels), replica.port);
	/* the promoted replica has the data and takes writes */
	cr_assert_str_eq(h_cmd(replica.port, "GET before-kill"), "$1\r\n1\r\n");
	cr_assert_str_eq(h_cmd(replica.port, "SET after-kill 2"), "+OK\r\n");
}

Test(servers_ha, forced_failover_swaps_roles)
{
	start_all();
	cr_assert_str_eq(h_cmd(primary.port, "SET before-failover 1\r\n"
	    "WAIT 1 1000"), "+OK\r\n:1\r\n");
	cr_assert_str_eq(h_cmd(replica.port, "GET before-failover"),
	    "$1\r\n1\r\n");

	long long t0 = servers_now_ms();
	cr_assert_eq(test_sentinels_failover(&sentinels), 0);
	cr_assert_eq(test_sentinels_wait_master(&sentinels, replica.port,
	    15000), 0);
	long long promoted = servers_now_ms() - t0;
	/* the sentinels turn the old primary into a replica of the new one */
	cr_assert_eq(test_redis_wait_role(primary.port, "slave", 15000), 0);
	long long demoted = servers_now_ms() - t0;

	char v[64];
	long long deadline = servers_now_ms() + 10000;
	do {
		repl_field(primary.port, "master_link_status", v, sizeof(v));
		if (strcmp(v, "up") == 0)
			break;
		usleep(50 * 1000);
	} while (servers_now_ms() < deadline);
	cr_assert_str_eq(v, "up", "old primary's master_link_status");
	long long linked = servers_now_ms() - t0;
	fprintf(stderr, "servers_ha: SENTINEL FAILOVER: replica promoted after "
	    "%lld ms, old primary a replica after %lld ms, its link up after "
	    "%lld ms\n", promoted, demoted, linked);

	repl_field(primary.port, "master_port", v, sizeof(v));
	cr_assert_eq(atoi(v), replica.port, "old primary replicates from %s", v);
	repl_field(primary.port, "master_host", v, sizeof(v));
	cr_assert_str_eq(v, "127.0.0.1");
	h_assert_role(replica.port, "master");
	h_assert_role(primary.port, "slave");
	cr_assert_eq(test_sentinels_master_port(&sentinels), replica.port);

	/* writes now go to the new primary and reach the old one */
	cr_assert_str_eq(h_cmd(replica.port, "SET after-failover 2\r\n"
	    "WAIT 1 1000"), "+OK\r\n:1\r\n");
	cr_assert_str_eq(h_cmd(primary.port, "GET after-failover"),
	    "$1\r\n2\r\n");
	cr_assert_str_eq(h_cmd(primary.port, "GET before-failover"),
	    "$1\r\n1\r\n");
	cr_assert_eq(strncmp(h_cmd(primary.port, "SET x 1"), "-READONLY", 9),
	    0);
}

Test(servers_ha, sigstopped_replica_catches_up)
{
	char v[64], off[64];
	cr_assert_eq(test_redis_start(&primary, quick_sync), 0);
	cr_assert_eq(test_redis_replica_start(&replica, &primary, quick_sync), 0);
	cr_assert_str_eq(h_cmd(primary.port, "SET k0 0\r\nWAIT 1 1000"),
	    "+OK\r\n:1\r\n");

	cr_assert_eq(test_redis_sigstop(&replica), 0);
	cr_assert_gt(replica.pid, 0);
	long long t0 = servers_now_ms();
	/* frozen: the socket accepts (kernel backlog) but nothing answers */
	cr_assert_eq(test_redis_ping(&replica), -1);
	for (int i = 1; i < 100; i++) {
		char c[64];
		snprintf(c, sizeof(c), "SET k%d %d", i, i);
		cr_assert_str_eq(h_cmd(primary.port, c), "+OK\r\n");
	}
	/* the frozen replica acknowledges nothing */
	cr_assert_str_eq(h_cmd(primary.port, "SET k100 100\r\nWAIT 1 100"),
	    "+OK\r\n:0\r\n");
	long long left = 2000 - (servers_now_ms() - t0);
	if (left > 0)
		usleep((useconds_t)left * 1000);
	cr_assert_eq(test_redis_sigcont(&replica), 0);

	/* the replica catches up: link up, same offset, the data */
	cr_assert_str_eq(h_cmd(primary.port, "SET k101 101\r\nWAIT 1 1500"),
	    "+OK\r\n:1\r\n");
	repl_field(replica.port, "master_link_status", v, sizeof(v));
	cr_assert_str_eq(v, "up");
	/* >=: the primary's periodic PING to its replicas moves the offset */
	repl_field(primary.port, "master_repl_offset", off, sizeof(off));
	long long deadline = servers_now_ms() + 10000;
	do {
		repl_field(replica.port, "slave_repl_offset", v, sizeof(v));
		if (atoll(v) >= atoll(off))
			break;
		usleep(20 * 1000);
	} while (servers_now_ms() < deadline);
	cr_assert_geq(atoll(v), atoll(off), "replica offset %s, primary's %s",
	    v, off);
	cr_assert_str_eq(h_cmd(replica.port, "GET k100"), "$3\r\n100\r\n");
	cr_assert_str_eq(h_cmd(replica.port, "DBSIZE"), ":102\r\n");
	h_assert_role(replica.port, "slave");
}

Test(servers_ha, failover_with_one_sentinel_down_and_its_restart)
{
	start_all();
	struct test_sentinel *down = &sentinels.s[2];
	int port = down->port;
	char dir[256];
	snprintf(dir, sizeof(dir), "%s", down->dir);
	test_sentinel_kill9(down);
	cr_assert_eq(down->pid, 0);
	cr_assert_eq(test_redis_role(port, (char[16]){ 0 }, 16), -1,
	    "killed sentinel still answers on %d", port);

	/* quorum 2 and a majority (2 of 3) are still there */
	long long t0 = servers_now_ms();
	test_redis_kill9(&primary);
	cr_assert_eq(test_sentinels_wait_master(&sentinels, replica.port,
	    20000), 0);
	fprintf(stderr, "servers_ha: kill -9 of the primary with 2 of 3 "
	    "sentinels: promoted in %lld ms\n", servers_now_ms() - t0);

	/* back on its port with its dir; it learns the new master */
	cr_assert_eq(test_sentinel_restart(down), 0);
	cr_assert_gt(down->pid, 0);
	cr_assert_eq(down->port, port);
	cr_assert_str_eq(down->dir, dir);
	h_assert_role(port, "sentinel");
	t0 = servers_now_ms();
	cr_assert_eq(test_sentinels_wait_master(&sentinels, replica.port,
	    15000), 0);
	fprintf(stderr, "servers_ha: the restarted sentinel names the new "
	    "master after %lld ms\n", servers_now_ms() - t0);
	cr_assert_eq(test_sentinel_restart(down), -1, "restart while running");
}

Test(servers_ha, zeroed_stops_and_bad_starts)
{
	struct test_sentinels none;
	struct test_redis r;
	memset(&none, 0, sizeof(none));
	memset(&r, 0, sizeof(r));
	test_sentinels_stop(&none);
	test_sentinels_stop(NULL);
	test_sentinel_kill9(&none.s[0]);
	cr_assert_eq(test_sentinels_master_port(&none), -1);
	cr_assert_eq(test_sentinels_failover(&none), -1);
	cr_assert_eq(test_redis_sigstop(&r), -1);
	cr_assert_eq(test_redis_sigcont(&r), -1);
	cr_assert_eq(test_redis_replica_start(&replica, &r, NULL), -1);
	cr_assert_eq(test_sentinels_start(&sentinels, 6, NAME, 1, 2, 1000,
	    5000, 0), -1);
	cr_assert_eq(test_sentinels_start(&sentinels, 1, "bad name", 1, 2,
	    1000, 5000, 0), -1);
	cr_assert_eq(sentinels.n, 0);
	/* a sentinel that cannot start fails loudly, leaving nothing */
	cr_assert_eq(setenv("REDIS_SERVER", "/nonexistent/redis-server", 1), 0);
	cr_assert_eq(test_sentinels_start(&sentinels, 3, NAME, 1, 2, 1000, 5000,
	    0), -1);
	cr_assert_eq(sentinels.n, 0);
	cr_assert_eq(sentinels.s[0].pid, 0);
	cr_assert_eq(unsetenv("REDIS_SERVER"), 0);

	/* a frozen primary: ROLE fails, it comes back as it was */
	cr_assert_eq(test_redis_start(&primary, NULL), 0);
	h_assert_role(primary.port, "master");
	cr_assert_eq(test_redis_sigstop(&primary), 0);
	char role[16];
	cr_assert_eq(test_redis_role(primary.port, role, sizeof(role)), -1);
	cr_assert_eq(test_redis_sigcont(&primary), 0);
	h_assert_role(primary.port, "master");
	/* stop works on a stopped server (SIGCONT after SIGTERM), quickly */
	cr_assert_eq(test_redis_sigstop(&primary), 0);
	long long t0 = servers_now_ms();
	test_redis_stop(&primary);
	cr_assert_lt(servers_now_ms() - t0, 5000);
	cr_assert_eq(primary.pid, 0);
}
