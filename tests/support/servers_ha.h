/* servers_ha.h - Redis replication and Redis Sentinel for integration tests:
 * a replica of a test_redis primary, role checks, freezing a server
 * (SIGSTOP/SIGCONT), and a set of real sentinels watching the primary, so a
 * test can kill a primary and see a replica promoted.
 *
 * Built on servers.h and in the same style: plain C11 + POSIX, no hiredis,
 * no Criterion; every function that can fail returns -1 and writes what
 * failed (with the tail of the server's log) to stderr. Servers are children
 * of the calling thread with PR_SET_PDEATHSIG. All addresses are 127.0.0.1.
 *
 * Sentinels run as `redis-server DIR/sentinel.conf --sentinel` ($REDIS_SERVER,
 * the same binary as redis-sentinel), each in its own temp dir with its own
 * writable config (sentinel rewrites it), on its own free port. After start
 * each one gets `SENTINEL DEBUG info-period 1000 publish-period 500` (Redis
 * 7.0+): INFO to the watched servers every 1 s instead of 10 s and hello
 * messages every 0.5 s instead of 2 s, so sentinels find each other and the
 * replicas quickly, and a former primary that comes back is turned into a
 * replica ~2 s (4 publish periods) after the sentinel sees it instead of 8.
 *
 * Timings for tests (what test_servers_ha.c uses): down-after 1000 ms,
 * failover-timeout 5000 ms, quorum 2 of 3. A kill -9 of the primary is then
 * noticed after 1 s (SDOWN), agreed on at once (ODOWN), and the failover
 * starts after a random 0-1 s desync; measured 2.6-3.2 s from the kill
 * until every sentinel names the promoted replica and it answers ROLE
 * master. A forced SENTINEL FAILOVER promotes the replica in 0.4-1.2 s, and
 * the old primary is a replica of the new one (link up) after ~2.7 s. If
 * the leader election splits, the next try comes failover-timeout * 2
 * (10 s) later, so allow ~20 s when waiting for a promotion. */
#ifndef FERRY_TEST_SERVERS_HA_H
#define FERRY_TEST_SERVERS_HA_H

#include <stddef.h>
#include <sys/types.h>

#include "servers.h"

/* Start a redis-server on a free port (like test_redis_start) with
 *   --replicaof 127.0.0.1 <primary port>
 * followed by extra_args (NULL-terminated, may be NULL), e.g.
 * {"--repl-diskless-sync", "yes", "--repl-diskless-sync-delay", "0", NULL}.
 * Waits (up to 30 s) until its INFO replication says master_link_status:up
 * AND its slave_repl_offset reaches the primary's master_repl_offset of a
 * moment later (after a PUBLISH __ferry_test__:replica-sync on the primary).
 * Link up alone is not enough: after a diskless sync the primary starts the
 * stream only on the replica's first REPLCONF ACK, up to 1 s later, and a
 * write made in that second reaches the replica only then (a failover in
 * between loses it). On return, writes reach the replica at once (still
 * asynchronously: use "SET ...\r\nWAIT 1 1000" on one connection, see
 * test_redis_command, to know a write is there).
 * Stop it with test_redis_stop. On failure nothing is left running. */
int test_redis_replica_start(struct test_redis *replica,
    const struct test_redis *primary, const char *const *extra_args);

/* The first element of ROLE on 127.0.0.1:port ("master", "slave",
 * "sentinel") into role (NUL-terminated); 0, or -1 (quietly) when the server
 * is unreachable or the reply is not a ROLE reply. */
int test_redis_role(int port, char *role, size_t size);

/* Poll ROLE every 50 ms until it is `role`; 0, or -1 after timeout_ms with a
 * message naming the port, the role wanted and the last role seen. */
int test_redis_wait_role(int port, const char *role, int timeout_ms);

/* SIGSTOP the server and wait until it is stopped: it keeps its sockets open
 * but answers nothing (a frozen host). 0, or -1 if it is not running. */
int test_redis_sigstop(struct test_redis *r);
/* SIGCONT and wait until it runs again. 0, or -1 if it is not running. A
 * stopped server can also be stopped (test_redis_stop sends SIGCONT after
 * SIGTERM) or killed with the servers.h calls. */
int test_redis_sigcont(struct test_redis *r);

struct test_sentinel {
	pid_t pid;      /* 0 when not running */
	int port;
	char dir[256];  /* sentinel.conf (rewritten by sentinel), sentinel.log */
};

struct test_sentinels {
	int n;
	struct test_sentinel s[5];
	char name[64];  /* the monitored master's name */
};

/* Start n (1..5) sentinels watching 127.0.0.1:primary_port as `name`. Each
 * config holds port, bind 127.0.0.1, protected-mode no, dir, logfile,
 * sentinel resolve-hostnames no, and
 *   sentinel monitor NAME 127.0.0.1 PORT QUORUM
 *   sentinel down-after-milliseconds NAME down_after_ms
 *   sentinel failover-timeout NAME failover_timeout_ms
 *   sentinel parallel-syncs NAME 1
 * Waits (up to 30 s) until every sentinel sees the master up, n-1 other
 * sentinels and at least expect_replicas replicas that are up with their
 * link to the master ok, so a failover can start at once: start the
 * replicas first. On failure every sentinel started is stopped and *ss is
 * zeroed. */
int test_sentinels_start(struct test_sentinels *ss, int n, const char *name,
    int primary_port, int quorum, int down_after_ms, int failover_timeout_ms,
    int expect_replicas);

/* SIGTERM (SIGKILL after 10 s) every sentinel, remove their dirs, zero *ss.
 * Accepts zeroed or already-stopped sets. */
void test_sentinels_stop(struct test_sentinels *ss);

/* SIGKILL one sentinel and wait; keeps its dir and config. */
void test_sentinel_kill9(struct test_sentinel *s);

/* Start a killed sentinel again on the same port with the same dir and
 * (rewritten) config, so it keeps its id and what it knew; waits until it
 * answers PING and applies the SENTINEL DEBUG periods again. */
int test_sentinel_restart(struct test_sentinel *s);

/* The port `SENTINEL get-master-addr-by-name NAME` gives, from the first
 * running sentinel that answers; -1 (quietly) if none does. */
int test_sentinels_master_port(const struct test_sentinels *ss);

/* Poll (every 50 ms) until every running sentinel names 127.0.0.1:port as
 * the master AND the redis on that port answers ROLE master. 0, or -1 after
 * timeout_ms with what each sentinel said, the role seen and the tail of
 * each sentinel's log. */
int test_sentinels_wait_master(const struct test_sentinels *ss, int port,
    int timeout_ms);

/* SENTINEL FAILOVER NAME on the first running sentinel (a forced failover,
 * no agreement needed); retried every 250 ms for up to 10 s while it answers
 * -INPROG or -NOGOODSLAVE (replicas still being discovered). 0 once it says
 * +OK (the failover has started; wait with test_sentinels_wait_master), -1
 * with the last reply otherwise. */
int test_sentinels_failover(const struct test_sentinels *ss);

/* The value of "field:value" in an INFO reply into out ("" if absent). */
void servers_info_field(const char *info, const char *field, char *out,
    size_t outsz);

/* Internals shared with servers_cluster.c; not for tests. Same behaviour as
 * the static RESP helpers in servers_ha.c they wrap. */
/* one scalar reply at *pp (bulk, simple string, integer, error, nil: "")
 * into out, advances; 0, or -1 if malformed or an array */
int servers_resp_scalar(const char **pp, char *out, size_t outsz);
/* the array header "*N" at *pp: N (-1 nil), advances; -2 if not an array */
long servers_resp_array(const char **pp);

#endif
