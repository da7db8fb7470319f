/* test_servers_cluster.c - servers_cluster.c gives a real Redis Cluster:
 * 3 primaries with a replica each come up with cluster_state ok and our
 * slot function agrees with CLUSTER KEYSLOT; a slot moves with its keys
 * (a 1000-element list included) to another primary; moved in pieces, the
 * source answers ASK and TRYAGAIN meanwhile; a killed primary's replica
 * takes over with the data WAITed for. Every test stops what it started
 * (.fini), even when an assert fails. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include "harness_servers.h"
#include "servers.h"
#include "servers_ha.h"
#include "servers_cluster.h"

#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct test_cluster cl;

static void
teardown(void)
{
	test_cluster_stop(&cl);
}

TestSuite(servers_cluster, .fini = teardown, .timeout = 60);

static const char *
cmdf(int port, const char *fmt, const char *arg)
{
	char c[1024];
	snprintf(c, sizeof(c), fmt, arg);
	return h_cmd(port, c);
}

/* 3 primaries, 1 replica each, as every test here uses. */
static void
start_cluster(void)
{
	long long t0 = servers_now_ms();
	cr_assert_eq(test_cluster_start(&cl, 3, 1, NULL), 0,
	    "the cluster did not start (see stderr)");
	fprintf(stderr, "servers_cluster: 3 primaries + 3 replicas ready in "
	    "%lld ms\n", servers_now_ms() - t0);
	cr_assert_eq(cl.n, 6);
	cr_assert_eq(cl.primaries, 3);
	cr_assert_eq(cl.replicas, 1);
}

/* Another current primary than port. */
static int
other_primary(int port)
{
	int ports[TEST_CLUSTER_MAX_NODES];
	int n = test_cluster_primary_ports(&cl, ports, TEST_CLUSTER_MAX_NODES);
	for (int i = 0; i < n; i++)
		if (ports[i] != port)
			return ports[i];
	cr_assert_fail("no primary other than %d", port);
	return -1;
}

static void
expect_reply(int port, const char *c, const char *fmt, int a, int b)
{
	char want[256];
	snprintf(want, sizeof(want), fmt, a, b);
	cr_assert_str_eq(h_cmd(port, c), want, "reply of 127.0.0.1:%d to %s",
	    port, c);
}

#define PUSH_1000 "EVAL \"for i=1,1000 do redis.call('rpush',KEYS[1],'e'..i) " \
	"end return redis.call('llen',KEYS[1])\" 1 "

Test(servers_cluster, starts_and_slots_agree_with_keyslot)
{
	start_cluster();
	for (int i = 0; i < cl.n; i++) {
		const char *info = h_cmd(cl.node[i].port, "CLUSTER INFO");
		cr_assert_not_null(strstr(info, "cluster_state:ok\r\n"),
		    "127.0.0.1:%d: %s", cl.node[i].port, info);
		cr_assert_not_null(strstr(info, "cluster_known_nodes:6\r\n"));
		cr_assert_not_null(strstr(info, "cluster_size:3\r\n"));
		h_assert_role(cl.node[i].port, i < 3 ? "master" : "slave");
	}
	int ports[TEST_CLUSTER_MAX_NODES];
	cr_assert_eq(test_cluster_primary_ports(&cl, ports,
	    TEST_CLUSTER_MAX_NODES), 3);
	for (int i = 0; i < 3; i++)
		cr_assert_eq(ports[i], cl.node[i].port);
	/* the slots as built: 0-5460, 5461-10922, 10923-16383 */
	cr_assert_eq(test_cluster_owner(&cl, 0), cl.node[0].port);
	cr_assert_eq(test_cluster_owner(&cl, 5460), cl.node[0].port);
	cr_assert_eq(test_cluster_owner(&cl, 5461), cl.node[1].port);
	cr_assert_eq(test_cluster_owner(&cl, 16383), cl.node[2].port);
	cr_assert_eq(test_cluster_owner(&cl, 16384), -1);

	/* well-known values, then CLUSTER KEYSLOT for the hash-tag rules */
	cr_assert_eq(test_cluster_slot_of("123456789"), 12739);
	cr_assert_eq(test_cluster_slot_of("foo"), 12182);
	cr_assert_eq(test_cluster_slot_of("ferry:{q0}:ready"),
	    test_cluster_slot_of("{q0}"));
	const char *keys[] = { "foo", "bar", "ferry:{q0}:ready", "{q0}",
		"ferry:{q1}:inflight", "{user1000}.following", "foo{}{bar}",
		"foo{{bar}}zap", "foo{bar}{zap}", "{}x", "x{", "}{y}",
		"ferry:queue:no-tag", "a", "zzzzzzzzzzzzzzzzzzzzzzzz" };
	for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++) {
		char want[32];
		snprintf(want, sizeof(want), ":%d\r\n",
		    test_cluster_slot_of(keys[k]));
		cr_assert_str_eq(cmdf(cl.node[k % 6].port, "CLUSTER KEYSLOT %s",
		    keys[k]), want, "slot of '%s'", keys[k]);
	}

	/* one queue on each primary */
	char names[3][32];
	cr_assert_eq(test_cluster_queue_names(&cl, 3, names), 0);
	int seen[3];
	for (int q = 0; q < 3; q++) {
		char tag[40];
		snprintf(tag, sizeof(tag), "{%s}", names[q]);
		seen[q] = test_cluster_owner(&cl, test_cluster_slot_of(tag));
		cr_assert_gt(seen[q], 0);
		for (int r = 0; r < q; r++)
			cr_assert_neq(seen[q], seen[r], "%s and %s on one node",
			    names[q], names[r]);
		fprintf(stderr, "servers_cluster: queue %s: slot %d on "
		    "127.0.0.1:%d\n", names[q], test_cluster_slot_of(tag), seen[q]);
	}
	cr_assert_eq(test_cluster_queue_names(&cl, 4, names), -1);
}

Test(servers_cluster, migrate_slot_keeps_the_data)
{
	start_cluster();
	int slot = test_cluster_slot_of("{q0}");
	int src = test_cluster_owner(&cl, slot);
	cr_assert_gt(src, 0);
	int dst = other_primary(src);

	cr_assert_str_eq(h_cmd(src, PUSH_1000 "ferry:{q0}:ready"), ":1000\r\n");
	cr_assert_str_eq(h_cmd(src, "SET ferry:{q0}:meta hello"), "+OK\r\n");
	cr_assert_str_eq(h_cmd(src, "HSET ferry:{q0}:h a 1 b 2"), ":2\r\n");
	cr_assert_str_eq(h_cmd(src, "ZADD ferry:{q0}:z 1.5 x"), ":1\r\n");
	/* a name that needs quoting, a big list (~2.5 MB to MIGRATE), and 300
	 * long names (several GETKEYSINSLOT batches and MIGRATE lines) */
	cr_assert_str_eq(h_cmd(src, "SET \"ferry:{q0}:sp ace\\\"q'\" x"),
	    "+OK\r\n");
	cr_assert_str_eq(h_cmd(src, "EVAL \"for i=1,200000 do "
	    "redis.call('rpush',KEYS[1],'element-'..i) end return "
	    "redis.call('llen',KEYS[1])\" 1 ferry:{q0}:big"), ":200000\r\n");
	cr_assert_str_eq(h_cmd(src, "EVAL \"for i=1,300 do redis.call('set',"
	    "'ferry:{q0}:job:'..string.rep('0',30)..i,i) end return 300\" 0"),
	    ":300\r\n");
	expect_reply(src, "CLUSTER COUNTKEYSINSLOT 0", ":%d\r\n", 0, 0);
	char c[128];
	snprintf(c, sizeof(c), "CLUSTER COUNTKEYSINSLOT %d", slot);
	expect_reply(src, c, ":306\r\n", 0, 0);

	long long t0 = servers_now_ms();
	cr_assert_eq(test_cluster_migrate_slot(&cl, slot, dst), 0);
	fprintf(stderr, "servers_cluster: slot %d (306 keys, lists of 1000 and "
	    "200000 elements) moved from 127.0.0.1:%d to 127.0.0.1:%d in %lld "
	    "ms\n", slot, src, dst, servers_now_ms() - t0);

	cr_assert_eq(test_cluster_owner(&cl, slot), dst);
	for (int i = 0; i < cl.n; i++) {
		struct test_cluster one = cl;
		one.n = 1;
		one.node[0] = cl.node[i];
		cr_assert_eq(test_cluster_owner(&one, slot), dst,
		    "127.0.0.1:%d", cl.node[i].port);
	}
	expect_reply(dst, c, ":306\r\n", 0, 0);
	expect_reply(src, c, ":0\r\n", 0, 0);
	cr_assert_str_eq(h_cmd(dst, "LLEN ferry:{q0}:big"), ":200000\r\n");
	cr_assert_str_eq(h_cmd(dst, "LINDEX ferry:{q0}:big -1"),
	    "$14\r\nelement-200000\r\n");
	cr_assert_str_eq(h_cmd(dst, "GET \"ferry:{q0}:sp ace\\\"q'\""),
	    "$1\r\nx\r\n");
	cr_assert_str_eq(h_cmd(dst, "GET ferry:{q0}:job:"
	    "000000000000000000000000000000300"), "$3\r\n300\r\n");
	cr_assert_str_eq(h_cmd(dst, "LLEN ferry:{q0}:ready"), ":1000\r\n");
	cr_assert_str_eq(h_cmd(dst, "LINDEX ferry:{q0}:ready 0"),
	    "$2\r\ne1\r\n");
	cr_assert_str_eq(h_cmd(dst, "LINDEX ferry:{q0}:ready -1"),
	    "$5\r\ne1000\r\n");
	cr_assert_str_eq(h_cmd(dst, "GET ferry:{q0}:meta"), "$5\r\nhello\r\n");
	cr_assert_str_eq(h_cmd(dst, "HGET ferry:{q0}:h b"), "$1\r\n2\r\n");
	cr_assert_str_eq(h_cmd(dst, "ZSCORE ferry:{q0}:z x"), "$3\r\n1.5\r\n");
	/* the old owner redirects for good */
	expect_reply(src, "LLEN ferry:{q0}:ready", "-MOVED %d 127.0.0.1:%d\r\n",
	    slot, dst);
	/* and the third primary knows too */
	int third = -1, ports[TEST_CLUSTER_MAX_NODES];
	int np = test_cluster_primary_ports(&cl, ports, TEST_CLUSTER_MAX_NODES);
	cr_assert_eq(np, 3);
	for (int i = 0; i < np; i++)
		if (ports[i] != src && ports[i] != dst)
			third = ports[i];
	expect_reply(third, "GET ferry:{q0}:meta", "-MOVED %d 127.0.0.1:%d\r\n",
	    slot, dst);
	/* a move to the owner itself or of a bad slot is refused */
	cr_assert_eq(test_cluster_migrate_slot(&cl, slot, dst), -1);
	cr_assert_eq(test_cluster_migrate_begin(&cl, 16384, src), -1);
}

Test(servers_cluster, migration_in_pieces_answers_ask_and_tryagain)
{
	start_cluster();
	int slot = test_cluster_slot_of("{q1}");
	int src = test_cluster_owner(&cl, slot);
	cr_assert_gt(src, 0);
	int dst = other_primary(src);
	char c[512], want[128];
	for (int k = 0; k < 5; k++) {
		snprintf(c, sizeof(c), "SET ferry:{q1}:k%d v%d", k, k);
		cr_assert_str_eq(h_cmd(src, c), "+OK\r\n");
	}

	cr_assert_eq(test_cluster_migrate_begin(&cl, slot, dst), 0);
	/* nothing moved yet: the source serves what it has, ASKs for the rest */
	cr_assert_str_eq(h_cmd(src, "GET ferry:{q1}:k0"), "$2\r\nv0\r\n");
	expect_reply(src, "GET ferry:{q1}:absent", "-ASK %d 127.0.0.1:%d\r\n",
	    slot, dst);
	cr_assert_eq(test_cluster_owner(&cl, slot), src);

	cr_assert_eq(test_cluster_migrate_step(&cl, slot, dst, 2), 3);
	int moved[5], nmoved = 0, there[5], nthere = 0;
	for (int k = 0; k < 5; k++) {
		snprintf(c, sizeof(c), "EXISTS ferry:{q1}:k%d", k);
		/* a key the migrating source does not have: ASK */
		const char *r = h_cmd(src, c);
		snprintf(want, sizeof(want), "-ASK %d 127.0.0.1:%d\r\n", slot, dst);
		if (strcmp(r, want) == 0)
			moved[nmoved++] = k;
		else if (strcmp(r, ":1\r\n") == 0)
			there[nthere++] = k;
		else
			cr_assert_fail("EXISTS ferry:{q1}:k%d: %s", k, r);
	}
	cr_assert_eq(nmoved, 2);
	cr_assert_eq(nthere, 3);

	/* a moved key: ASK from the source, MOVED (back to the source) from
	 * the target unless ASKING comes first */
	snprintf(c, sizeof(c), "GET ferry:{q1}:k%d", moved[0]);
	expect_reply(src, c, "-ASK %d 127.0.0.1:%d\r\n", slot, dst);
	expect_reply(dst, c, "-MOVED %d 127.0.0.1:%d\r\n", slot, src);
	snprintf(c, sizeof(c), "ASKING\r\nGET ferry:{q1}:k%d", moved[0]);
	snprintf(want, sizeof(want), "+OK\r\n$2\r\nv%d\r\n", moved[0]);
	cr_assert_str_eq(h_cmd(dst, c), want);
	/* multi-key commands spanning moved and unmoved keys */
	const char *tryagain =
	    "-TRYAGAIN Multiple keys request during rehashing of slot\r\n";
	snprintf(c, sizeof(c), "MGET ferry:{q1}:k%d ferry:{q1}:k%d", moved[0],
	    there[0]);
	cr_assert_str_eq(h_cmd(src, c), tryagain);
	snprintf(c, sizeof(c), "EVAL \"return redis.call('get',KEYS[2])\" 2 "
	    "ferry:{q1}:k%d ferry:{q1}:k%d", moved[1], there[1]);
	cr_assert_str_eq(h_cmd(src, c), tryagain);
	/* only unmoved keys: served; only missing keys: ASK */
	snprintf(c, sizeof(c), "MGET ferry:{q1}:k%d ferry:{q1}:k%d", there[0],
	    there[1]);
	snprintf(want, sizeof(want), "*2\r\n$2\r\nv%d\r\n$2\r\nv%d\r\n",
	    there[0], there[1]);
	cr_assert_str_eq(h_cmd(src, c), want);
	snprintf(c, sizeof(c), "MGET ferry:{q1}:k%d ferry:{q1}:k%d", moved[0],
	    moved[1]);
	expect_reply(src, c, "-ASK %d 127.0.0.1:%d\r\n", slot, dst);
	/* the end refuses while keys are left */
	cr_assert_eq(test_cluster_migrate_end(&cl, slot, dst), -1);

	cr_assert_eq(test_cluster_migrate_step(&cl, slot, dst, 100), 0);
	cr_assert_eq(test_cluster_migrate_end(&cl, slot, dst), 0);
	cr_assert_eq(test_cluster_owner(&cl, slot), dst);
	for (int k = 0; k < 5; k++) {
		snprintf(c, sizeof(c), "GET ferry:{q1}:k%d", k);
		snprintf(want, sizeof(want), "$2\r\nv%d\r\n", k);
		cr_assert_str_eq(h_cmd(dst, c), want);
		expect_reply(src, c, "-MOVED %d 127.0.0.1:%d\r\n", slot, dst);
	}
	snprintf(c, sizeof(c), "MGET ferry:{q1}:k0 ferry:{q1}:k4");
	cr_assert_str_eq(h_cmd(dst, c), "*2\r\n$2\r\nv0\r\n$2\r\nv4\r\n");
}

Test(servers_cluster, killed_primary_replica_takes_over)
{
	start_cluster();
	int slot = test_cluster_slot_of("{q2}");
	int dead = test_cluster_owner(&cl, slot);
	cr_assert_gt(dead, 0);
	int di;
	for (di = 0; di < 3 && cl.node[di].port != dead; di++)
		;
	cr_assert_lt(di, 3);
	int replica = cl.node[3 + di].port;  /* node[primaries + i*1 + 0] */

	/* one connection: WAIT counts the replicas that have its writes */
	cr_assert_str_eq(h_cmd(dead, PUSH_1000 "ferry:{q2}:ready\r\nWAIT 1 "
	    "1000"), ":1000\r\n:1\r\n");
	cr_assert_str_eq(h_cmd(dead, "SET ferry:{q2}:meta m\r\nWAIT 1 1000"),
	    "+OK\r\n:1\r\n");

	long long t0 = servers_now_ms();
	cr_assert_eq(test_cluster_kill_primary(&cl, dead), 0);
	cr_assert_eq(cl.node[di].pid, 0);
	int newp = test_cluster_wait_failover(&cl, dead, 20000);
	long long took = servers_now_ms() - t0;
	cr_assert_eq(newp, replica, "new primary %d, want the replica %d",
	    newp, replica);
	fprintf(stderr, "servers_cluster: kill -9 of primary 127.0.0.1:%d: "
	    "its replica 127.0.0.1:%d serves its slots, cluster_state ok "
	    "everywhere, after %lld ms\n", dead, newp, took);

	h_assert_role(newp, "master");
	cr_assert_eq(test_cluster_owner(&cl, slot), newp);
	cr_assert_str_eq(h_cmd(newp, "LLEN ferry:{q2}:ready"), ":1000\r\n");
	cr_assert_str_eq(h_cmd(newp, "LINDEX ferry:{q2}:ready -1"),
	    "$5\r\ne1000\r\n");
	cr_assert_str_eq(h_cmd(newp, "GET ferry:{q2}:meta"), "$1\r\nm\r\n");
	cr_assert_str_eq(h_cmd(newp, "RPUSH ferry:{q2}:ready after"),
	    ":1001\r\n");
	int ports[TEST_CLUSTER_MAX_NODES];
	int np = test_cluster_primary_ports(&cl, ports, TEST_CLUSTER_MAX_NODES);
	cr_assert_eq(np, 3);
	for (int i = 0; i < np; i++)
		cr_assert_neq(ports[i], dead);
	/* every slot is served again, by a live node */
	for (int s = 0; s < TEST_CLUSTER_SLOTS; s += 97)
		cr_assert_neq(test_cluster_owner(&cl, s), dead, "slot %d", s);
	/* the other queues still work through their primaries */
	char names[3][32];
	cr_assert_eq(test_cluster_queue_names(&cl, 3, names), 0);
	/* waiting again, or for a node never killed, is refused / immediate */
	cr_assert_eq(test_cluster_wait_failover(&cl, dead, 1000), newp);
	cr_assert_eq(test_cluster_wait_failover(&cl, newp, 100), -1);
	cr_assert_eq(test_cluster_kill_primary(&cl, dead), -1);
}

Test(servers_cluster, zeroed_stops_and_bad_starts)
{
	struct test_cluster z;
	memset(&z, 0, sizeof(z));
	test_cluster_stop(&z);
	test_cluster_stop(NULL);
	cr_assert_eq(test_cluster_start(&z, 0, 1, NULL), -1);
	cr_assert_eq(test_cluster_start(&z, 5, 2, NULL), -1);  /* 12 max */
	cr_assert_eq(z.n, 0);
	cr_assert_eq(test_cluster_owner(&z, 0), -1);
	int ports[4];
	cr_assert_eq(test_cluster_primary_ports(&z, ports, 4), 0);
	cr_assert_eq(test_cluster_slot_of(""), 0);
}
