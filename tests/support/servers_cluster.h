/* servers_cluster.h - a real Redis Cluster for integration tests: N primaries
 * with R replicas each, every node a redis-server on its own free port in its
 * own temp dir; hash slots of keys and queues, who serves a slot, moving a
 * slot with its keys (all at once, or step by step so a test can act while
 * the source answers ASK and TRYAGAIN), and killing a primary so that its
 * replica takes over.
 *
 * Built on servers.h and servers_ha.h and in the same style: plain C11 +
 * POSIX, no hiredis, no Criterion; every function that can fail returns -1
 * and writes what failed (with the tail of the node's log) to stderr.
 * Servers are children of the calling thread with PR_SET_PDEATHSIG. All
 * addresses are 127.0.0.1.
 *
 * Every node runs (after the servers.h defaults, so appendonly no, save ""):
 *   --cluster-enabled yes --cluster-config-file nodes.conf (in its dir)
 *   --cluster-port <another free port>   (the bus port; port+10000 may be
 *                                          out of range or taken)
 *   --cluster-node-timeout 1000
 *   --cluster-allow-replica-migration no  (the topology stays as built)
 *   --repl-diskless-sync yes --repl-diskless-sync-delay 0
 *   then extra_args, which therefore override any of these.
 * Node timeout 1000 ms: a dead primary is flagged PFAIL after 1 s, FAIL as
 * soon as a majority of primaries gossip it, and its replica is elected after
 * a 0.5-1 s delay (cluster-replica-validity-factor 10 is far away), so a
 * failover takes ~2-3 s instead of ~16 s with the default 15000 ms
 * (measured: 2.4-2.8 s from the kill -9 until the replica serves the slots
 * and every live node says cluster_state:ok). Lower
 * would risk a node being flagged failing when it only stalls for a moment
 * (a fork, a busy CI machine); tests that hold a node busy for long (a
 * huge MIGRATE) should pass a bigger --cluster-node-timeout in extra_args.
 *
 * The cluster is built by hand, deterministically: primary i (node[i],
 * i < primaries) gets the slots [i*16384/primaries, (i+1)*16384/primaries),
 * CLUSTER SET-CONFIG-EPOCH i+1, every node is MEET with node[0], and
 * node[primaries + i*replicas + j] is CLUSTER REPLICATE of primary i.
 *
 * Key names passed between these functions and redis (MIGRATE) go through
 * the inline protocol quoted with \xHH escapes; they must not contain NUL. */
#ifndef FERRY_TEST_SERVERS_CLUSTER_H
#define FERRY_TEST_SERVERS_CLUSTER_H

#include "servers.h"

#define TEST_CLUSTER_SLOTS 16384
#define TEST_CLUSTER_MAX_NODES 12

struct test_cluster {
	int n;         /* nodes started (primaries * (1 + replicas)) */
	struct test_redis node[TEST_CLUSTER_MAX_NODES];
	int replicas;  /* replicas per primary at start */
	int primaries; /* primaries at start: node[0 .. primaries-1] */
	int bus_port[TEST_CLUSTER_MAX_NODES];  /* --cluster-port of node[i] */
	char id[TEST_CLUSTER_MAX_NODES][41];   /* CLUSTER MYID of node[i] */
	/* what test_cluster_kill_primary saw of node[i] just before the kill,
	 * for test_cluster_wait_failover: its slots (bitmap) and the ports of
	 * its replicas */
	unsigned char killed_slots[TEST_CLUSTER_MAX_NODES][TEST_CLUSTER_SLOTS / 8];
	int killed_replicas[TEST_CLUSTER_MAX_NODES][TEST_CLUSTER_MAX_NODES];
	int killed_nreplicas[TEST_CLUSTER_MAX_NODES];
};

/* Start primaries (1..12) primaries with replicas_per_primary (0..11)
 * replicas each (at most 12 nodes in all), with the arguments above plus
 * extra_args (NULL-terminated, may be NULL), and build the cluster. Waits (up
 * to 30 s) until every node says cluster_state:ok, knows all n nodes and
 * gives (CLUSTER SLOTS) the slot map as built; every replica has
 * master_link_status:up and has acknowledged a write made on its primary
 * after that (SET + DEL of a key "__ferry_test__:replica-sync:N" of the
 * primary's slots, then WAIT; PUBLISH does not replicate in cluster mode), so
 * writes reach the replicas at once from then on; and every node lists
 * every primary's replicas in CLUSTER SLOTS (Redis 7.0 hides a replica there
 * while its replication offset is 0, so without that write for up to 10 s).
 * Measured: ~2.5 s for 3 primaries + 3 replicas, most of it the 2 s a
 * primary waits after startup before it says cluster_state:ok. On failure
 * every node is stopped and *cl zeroed. */
int test_cluster_start(struct test_cluster *cl, int primaries,
    int replicas_per_primary, const char *const *extra_args);

/* SIGTERM (SIGKILL after 10 s) every node, remove their dirs, zero *cl.
 * Accepts zeroed or already-stopped clusters and killed nodes. */
void test_cluster_stop(struct test_cluster *cl);

/* The hash slot of key, as Redis computes it: CRC16-XMODEM of the content of
 * the first {...} (if the first '{' has a '}' after it with at least one
 * character in between) or else of the whole key, mod 16384. A ferry queue Q
 * (keys "ferry:{Q}:...") has the slot test_cluster_slot_of("{Q}"). */
int test_cluster_slot_of(const char *key);

/* The port of the primary that serves slot now, according to CLUSTER SLOTS
 * of the first running node that answers (node order); -1 (quietly) if no
 * node answers or none serves the slot. */
int test_cluster_owner(const struct test_cluster *cl, int slot);

/* The ports of the running nodes that answer ROLE master, in node order,
 * into ports (at most max); how many, or -1 (quietly) if ports is NULL. */
int test_cluster_primary_ports(const struct test_cluster *cl, int *ports,
    int max);

/* Move slot, with its keys, from its owner to the primary on to_port, as
 * redis-cli --cluster reshard does: test_cluster_migrate_begin, then
 * test_cluster_migrate_step until no key is left, then
 * test_cluster_migrate_end. 0 once every running node says (CLUSTER SLOTS)
 * that to_port serves slot. Measured: ~10 ms for 4 small keys, ~190 ms for
 * 306 keys with a 200000-element list. */
int test_cluster_migrate_slot(const struct test_cluster *cl, int slot,
    int to_port);

/* CLUSTER SETSLOT slot IMPORTING <source id> on the primary on to_port, then
 * CLUSTER SETSLOT slot MIGRATING <target id> on the owner of slot (which must
 * be another primary). No key is moved yet. Until the end, Redis 7.0.15
 * answers (exactly, see test_servers_cluster.c):
 *   source, a key of the slot it does not have (any more), EXISTS included:
 *     -ASK <slot> 127.0.0.1:<to_port>
 *   source, a multi-key command (MGET, EVAL with KEYS) on the slot that
 *   finds some keys and misses others:
 *     -TRYAGAIN Multiple keys request during rehashing of slot
 *   source, keys all present: served; keys all missing: -ASK
 *   target, a moved key without ASKING first: -MOVED <slot> 127.0.0.1:<source>
 *   target, "ASKING\r\nGET key" on one connection: +OK, then the value.
 * After the end the source answers -MOVED <slot> 127.0.0.1:<to_port>.
 * 0, or -1 with the reply that failed. */
int test_cluster_migrate_begin(const struct test_cluster *cl, int slot,
    int to_port);

/* Move up to max_keys (>= 1) keys of slot from the source (the owner, which
 * has the slot MIGRATING) to to_port: CLUSTER GETKEYSINSLOT, then
 *   MIGRATE 127.0.0.1 <to_port> "" 0 10000 REPLACE KEYS k1 k2 ...
 * (10 s idle timeout towards the target, 60 s for the reply, so big lists
 * are fine). Returns how many keys of the slot are left on the source
 * (CLUSTER COUNTKEYSINSLOT), 0 when all are moved; -1 on failure. */
int test_cluster_migrate_step(const struct test_cluster *cl, int slot,
    int to_port, int max_keys);

/* Finish the move: fails (-1) if the source still has keys of slot; else
 * CLUSTER SETSLOT slot NODE <target id> on the target, then the source, then
 * every other running primary, and waits (up to 10 s) until every running
 * node (replicas too) says to_port serves slot. 0, or -1 with what each node
 * says. */
int test_cluster_migrate_end(const struct test_cluster *cl, int slot,
    int to_port);

/* kill -9 the primary on port (keeping its dir), after recording its slots
 * and replicas for test_cluster_wait_failover. -1 if port is not a running
 * node of cl or does not answer ROLE master. */
int test_cluster_kill_primary(struct test_cluster *cl, int port);

/* After test_cluster_kill_primary(cl, dead_port): poll (every 50 ms) until
 * one of the dead primary's replicas answers ROLE master and serves all the
 * slots the dead primary had, according to every running node, and every
 * running node says cluster_state:ok. The new primary's port, or -1 after
 * timeout_ms with what each node says (and the tails of the replicas'
 * logs). */
int test_cluster_wait_failover(const struct test_cluster *cl, int dead_port,
    int timeout_ms);

/* count queue names, tried in order "q0", "q1", ... (up to "q9999"), whose
 * slots (test_cluster_slot_of("{qN}")) are served by count different
 * primaries, the first name found for each, into names[0 .. count-1]
 * (ordered as found). 0, or -1 if count is more than the primaries serving
 * slots or the slot map cannot be read. */
int test_cluster_queue_names(const struct test_cluster *cl, int count,
    char names[][32]);

#endif
