/* servers_cluster.c - a real Redis Cluster for integration tests. See
 * servers_cluster.h for the contract. Plain C11 + POSIX; processes, files
 * and RESP parsing come from servers.c and servers_ha.c (the internals at
 * the end of servers.h and servers_ha.h). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include "servers_cluster.h"
#include "servers_ha.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CL_START_TIMEOUT_MS 30000
#define CL_AGREE_TIMEOUT_MS 10000
#define CL_POLL_MS 50
#define CL_NODE_TIMEOUT "1000"
#define CL_BUS_ATTEMPTS 4
#define CL_MIGRATE_IDLE_MS 10000     /* MIGRATE's own timeout argument */
#define CL_MIGRATE_REPLY_MS 60000    /* how long we wait for its reply */
#define CL_GETKEYS_BATCH 100
#define CL_LINE_MAX 3800             /* test_redis_command takes 4095 */
#define CL_BUF (256 * 1024)

/* ------------------------------------------------------------------ */
/* small helpers */

/* Another poll before deadline: 1 after a poll interval's sleep, 0 once
 * the deadline has passed. */
static int
poll_again(long long deadline)
{
	if (servers_now_ms() >= deadline)
		return 0;
	servers_sleep_ms(CL_POLL_MS);
	return 1;
}

static int
node_index(const struct test_cluster *cl, int port)
{
	for (int i = 0; cl != NULL && i < cl->n && i < TEST_CLUSTER_MAX_NODES;
	    i++)
		if (cl->node[i].port == port && port > 0)
			return i;
	return -1;
}

static void
node_log(const struct test_cluster *cl, int i)
{
	char path[320];
	fprintf(stderr, "  node 127.0.0.1:%d (dir %s) log:\n", cl->node[i].port,
	    cl->node[i].dir);
	snprintf(path, sizeof(path), "%s/redis.log", cl->node[i].dir);
	servers_print_tail(path);
}

/* The first line of a reply, for messages. */
static const char *
first_line(const char *reply, char *out, size_t outsz)
{
	size_t n = strcspn(reply, "\r\n");
	if (n >= outsz)
		n = outsz - 1;
	memcpy(out, reply, n);
	out[n] = '\0';
	return out;
}

/* Run cmd on port and expect a reply starting with want ("+OK"). 0, or -1
 * with a message (what, the command, the reply) and the node's log. */
static int
expect(const struct test_cluster *cl, int port, const char *cmd,
    const char *want, const char *what)
{
	char buf[4096], line[512];
	if (test_redis_command(port, cmd, buf, sizeof(buf)) > 0 &&
	    strncmp(buf, want, strlen(want)) == 0)
		return 0;
	fprintf(stderr, "%s: '%s' on 127.0.0.1:%d answered '%s' (want %s)\n",
	    what, cmd, port, buf[0] ? first_line(buf, line, sizeof(line)) :
	    "(no answer)", want);
	int i = node_index(cl, port);
	if (i >= 0)
		node_log(cl, i);
	return -1;
}

/* An integer reply (":N") to cmd on port, or -1. */
static long
integer_reply(int port, const char *cmd)
{
	char buf[1024];
	if (test_redis_command(port, cmd, buf, sizeof(buf)) <= 0 ||
	    buf[0] != ':')
		return -1;
	return strtol(buf + 1, NULL, 10);
}

/* "field" of CLUSTER INFO on port into out ("" if no answer). */
static void
cluster_info(int port, const char *field, char *out, size_t outsz)
{
	char buf[8192];
	out[0] = '\0';
	if (test_redis_command(port, "CLUSTER INFO", buf, sizeof(buf)) <= 0)
		return;
	/* a bulk string; INFO-style lines after "$N\r\n" */
	const char *body = strstr(buf, "\r\n");
	if (body != NULL)
		servers_info_field(body, field, out, outsz);
}

/* The slot map as one node sees it (CLUSTER SLOTS). */
struct slotmap {
	int owner[TEST_CLUSTER_SLOTS];           /* primary port, -1 none */
	unsigned char nrepl[TEST_CLUSTER_SLOTS];  /* replicas listed */
};

/* CLUSTER SLOTS of port into m. 0, or -1 (quietly) if no (valid) answer.
 * Each range: [start, end, [ip, port, id, {meta}], replica entries...]. */
static int
read_slots(int port, struct slotmap *m)
{
	char *buf = malloc(CL_BUF);
	char val[128];
	int rc = -1;
	if (buf == NULL)
		return -1;
	for (int s = 0; s < TEST_CLUSTER_SLOTS; s++) {
		m->owner[s] = -1;
		m->nrepl[s] = 0;
	}
	int len = test_redis_command(port, "CLUSTER SLOTS", buf, CL_BUF);
	if (len <= 0)
		goto out;
	const char *p = buf, *end = buf + len;
	long n = servers_resp_array(&p);
	if (n < 0)
		goto out;
	for (long r = 0; r < n; r++) {
		long elems = servers_resp_array(&p);
		if (elems < 3 || servers_resp_scalar(&p, val, sizeof(val)) != 0)
			goto out;
		long lo = atol(val);
		if (servers_resp_scalar(&p, val, sizeof(val)) != 0)
			goto out;
		long hi = atol(val);
		long fields = servers_resp_array(&p);
		if (fields < 2 || servers_resp_scalar(&p, val, sizeof(val)) != 0 ||
		    servers_resp_scalar(&p, val, sizeof(val)) != 0)
			goto out;
		int owner = atoi(val);
		for (long f = 2; f < fields && p != NULL; f++)
			p = servers_resp_end(p, end);
		for (long e = 3; e < elems && p != NULL; e++)
			p = servers_resp_end(p, end);
		if (p == NULL || lo < 0 || hi >= TEST_CLUSTER_SLOTS || lo > hi)
			goto out;
		for (long s = lo; s <= hi; s++) {
			m->owner[s] = owner;
			m->nrepl[s] = (unsigned char)(elems - 3);
		}
	}
	rc = 0;
out:
	free(buf);
	return rc;
}

/* Quote key for the inline protocol: "..." with \xHH for anything but
 * plain printable characters. 0, or -1 if it does not fit. */
static int
quote_key(const char *key, char *out, size_t outsz)
{
	size_t o = 0;
	if (outsz < 3)
		return -1;
	out[o++] = '"';
	for (const unsigned char *k = (const unsigned char *)key; *k; k++) {
		if (o + 5 >= outsz)
			return -1;
		if (*k > 0x20 && *k < 0x7f && *k != '"' && *k != '\\' &&
		    *k != '\'')
			out[o++] = (char)*k;
		else
			o += (size_t)snprintf(out + o, outsz - o, "\\x%02x", *k);
	}
	out[o++] = '"';
	out[o] = '\0';
	return 0;
}

static int
slot_ok(int slot, const char *what)
{
	if (slot >= 0 && slot < TEST_CLUSTER_SLOTS)
		return 1;
	fprintf(stderr, "%s: slot %d is not in 0..16383\n", what, slot);
	return 0;
}

/* ------------------------------------------------------------------ */
/* start and stop */

static int
start_node(struct test_cluster *cl, int i, const char *const *extra)
{
	char bus[16], buf[1024];
	size_t nextra = 0;
	while (extra != NULL && extra[nextra] != NULL)
		nextra++;
	const char *fixed[] = {
		"--cluster-enabled", "yes",
		"--cluster-config-file", "nodes.conf",
		"--cluster-port", bus,
		"--cluster-node-timeout", CL_NODE_TIMEOUT,
		"--cluster-allow-replica-migration", "no",
		"--repl-diskless-sync", "yes",
		"--repl-diskless-sync-delay", "0",
	};
	size_t nfixed = sizeof(fixed) / sizeof(fixed[0]);
	const char **args = calloc(nfixed + nextra + 1, sizeof(*args));
	if (args == NULL) {
		fprintf(stderr, "test_cluster_start: out of memory\n");
		return -1;
	}
	memcpy(args, fixed, sizeof(fixed));
	for (size_t k = 0; k < nextra; k++)
		args[nfixed + k] = extra[k];
	int rc = -1;
	/* the bus port is chosen here, the client port by test_redis_start;
	 * if the bus port was taken meanwhile, the start fails: try again */
	for (int attempt = 1; attempt <= CL_BUS_ATTEMPTS && rc != 0; attempt++) {
		int b = test_free_port();
		if (b < 0)
			break;
		snprintf(bus, sizeof(bus), "%d", b);
		if (test_redis_start(&cl->node[i], args) == 0) {
			cl->bus_port[i] = b;
			rc = 0;
		}
	}
	free(args);
	if (rc != 0) {
		fprintf(stderr, "test_cluster_start: node %d (cluster-enabled) did "
		    "not start\n", i);
		return -1;
	}
	const char *p = buf;
	if (test_redis_command(cl->node[i].port, "CLUSTER MYID", buf,
	    sizeof(buf)) <= 0 || buf[0] != '$' ||
	    servers_resp_scalar(&p, cl->id[i], sizeof(cl->id[i])) != 0 ||
	    strlen(cl->id[i]) != 40) {
		fprintf(stderr, "test_cluster_start: CLUSTER MYID on 127.0.0.1:%d "
		    "answered '%.100s'\n", cl->node[i].port, buf);
		node_log(cl, i);
		return -1;
	}
	return 0;
}

static int
range_lo(int i, int primaries)
{
	return (int)((long)i * TEST_CLUSTER_SLOTS / primaries);
}

/* A key of the slots of primary i, for the replica sync write. */
static void
sync_key(int i, int primaries, char *out, size_t outsz)
{
	int lo = range_lo(i, primaries), hi = range_lo(i + 1, primaries);
	for (int k = 0;; k++) {
		snprintf(out, outsz, "__ferry_test__:replica-sync:%d", k);
		int s = test_cluster_slot_of(out);
		if (s >= lo && s < hi)
			return;
	}
}

/* Is node j ready: state ok, all nodes known, the map as built with every
 * primary's replicas? Says why not in why. */
static int
node_ready(const struct test_cluster *cl, int j, struct slotmap *m,
    int with_replicas, char *why, size_t whysz)
{
	char state[32], known[32];
	int port = cl->node[j].port;
	cluster_info(port, "cluster_state", state, sizeof(state));
	cluster_info(port, "cluster_known_nodes", known, sizeof(known));
	if (strcmp(state, "ok") != 0 || atoi(known) != cl->n) {
		snprintf(why, whysz, "cluster_state '%s', cluster_known_nodes "
		    "'%s' (want ok, %d)", state, known, cl->n);
		return 0;
	}
	if (read_slots(port, m) != 0) {
		snprintf(why, whysz, "no valid CLUSTER SLOTS reply");
		return 0;
	}
	for (int i = 0; i < cl->primaries; i++) {
		int lo = range_lo(i, cl->primaries);
		int hi = range_lo(i + 1, cl->primaries);
		for (int s = lo; s < hi; s++)
			if (m->owner[s] != cl->node[i].port ||
			    (with_replicas && m->nrepl[s] != cl->replicas)) {
				snprintf(why, whysz, "CLUSTER SLOTS: slot %d served by "
				    "port %d with %d replicas (want %d with %d)", s,
				    m->owner[s], m->nrepl[s], cl->node[i].port,
				    cl->replicas);
				return 0;
			}
	}
	return 1;
}

/* Replica j: link up? */
static int
replica_link_up(const struct test_cluster *cl, int j, char *why,
    size_t whysz)
{
	char buf[8192], link[32] = "";
	if (test_redis_command(cl->node[j].port, "INFO replication", buf,
	    sizeof(buf)) > 0)
		servers_info_field(buf, "master_link_status", link, sizeof(link));
	if (strcmp(link, "up") == 0)
		return 1;
	snprintf(why, whysz, "master_link_status '%s' (want up)", link);
	return 0;
}

/* Primary i: a write (SET + DEL) that WAIT says all its replicas have. */
static int
primary_synced(const struct test_cluster *cl, int i, char *why, size_t whysz)
{
	char key[64], cmd[256], buf[1024];
	sync_key(i, cl->primaries, key, sizeof(key));
	snprintf(cmd, sizeof(cmd), "SET %s 1\r\nDEL %s\r\nWAIT %d 1000", key,
	    key, cl->replicas);
	if (test_redis_command(cl->node[i].port, cmd, buf, sizeof(buf)) <= 0) {
		snprintf(why, whysz, "no answer to SET/DEL/WAIT");
		return 0;
	}
	const char *end = buf + strlen(buf);
	const char *p = servers_resp_end(buf, end);
	if (p != NULL)
		p = servers_resp_end(p, end);
	if (p != NULL && p[0] == ':' && atoi(p + 1) == cl->replicas)
		return 1;
	snprintf(why, whysz, "SET/DEL/WAIT %d answered '%.200s'", cl->replicas,
	    buf);
	return 0;
}

/* Build the cluster on the started nodes (see servers_cluster.h). The
 * replica counts of CLUSTER SLOTS are checked last: Redis 7.0 lists a replica
 * there only once its replication offset is not 0, i.e. after the first
 * write (the sync write) or the primary's first replication PING, which
 * comes only every repl-ping-replica-period (10 s). */
static int
build(struct test_cluster *cl)
{
	char cmd[256], why[512] = "";
	const char *what = "test_cluster_start";
	int P = cl->primaries;
	for (int i = 0; i < cl->n; i++) {
		int port = cl->node[i].port;
		if (i < P) {
			snprintf(cmd, sizeof(cmd), "CLUSTER ADDSLOTSRANGE %d %d",
			    range_lo(i, P), range_lo(i + 1, P) - 1);
			if (expect(cl, port, cmd, "+OK", what) != 0)
				return -1;
		}
		snprintf(cmd, sizeof(cmd), "CLUSTER SET-CONFIG-EPOCH %d", i + 1);
		if (expect(cl, port, cmd, "+OK", what) != 0)
			return -1;
	}
	for (int i = 1; i < cl->n; i++) {
		snprintf(cmd, sizeof(cmd), "CLUSTER MEET 127.0.0.1 %d %d",
		    cl->node[0].port, cl->bus_port[0]);
		if (expect(cl, cl->node[i].port, cmd, "+OK", what) != 0)
			return -1;
	}
	/* every node must know every other before REPLICATE names one */
	long long deadline = servers_now_ms() + CL_START_TIMEOUT_MS;
	for (int j = 0; j < cl->n; j++) {
		char known[32];
		for (;;) {
			cluster_info(cl->node[j].port, "cluster_known_nodes", known,
			    sizeof(known));
			if (atoi(known) == cl->n)
				break;
			if (servers_now_ms() >= deadline) {
				fprintf(stderr, "%s: after %d s 127.0.0.1:%d knows '%s' "
				    "nodes (want %d)\n", what, CL_START_TIMEOUT_MS / 1000,
				    cl->node[j].port, known, cl->n);
				node_log(cl, j);
				return -1;
			}
			servers_sleep_ms(CL_POLL_MS);
		}
	}
	for (int j = P; j < cl->n; j++) {
		int i = (j - P) / cl->replicas;
		snprintf(cmd, sizeof(cmd), "CLUSTER REPLICATE %s", cl->id[i]);
		if (expect(cl, cl->node[j].port, cmd, "+OK", what) != 0)
			return -1;
	}

	struct slotmap *m = malloc(sizeof(*m));
	if (m == NULL) {
		fprintf(stderr, "%s: out of memory\n", what);
		return -1;
	}
	int bad = 0;
	for (;;) {
		int ready = 1;
		for (int j = 0; j < cl->n && ready; j++)
			if (!(ready = node_ready(cl, j, m, 0, why, sizeof(why))))
				bad = j;
		for (int j = P; j < cl->n && ready; j++)
			if (!(ready = replica_link_up(cl, j, why, sizeof(why))))
				bad = j;
		for (int j = 0; j < P && cl->replicas > 0 && ready; j++)
			if (!(ready = primary_synced(cl, j, why, sizeof(why))))
				bad = j;
		for (int j = 0; j < cl->n && ready; j++)
			if (!(ready = node_ready(cl, j, m, 1, why, sizeof(why))))
				bad = j;
		if (ready) {
			free(m);
			return 0;
		}
		if (!poll_again(deadline))
			break;
	}
	free(m);
	fprintf(stderr, "%s: the cluster of %d primaries with %d replicas each "
	    "is not ready after %d s: 127.0.0.1:%d: %s\n", what, P, cl->replicas,
	    CL_START_TIMEOUT_MS / 1000, cl->node[bad].port, why);
	node_log(cl, bad);
	return -1;
}

int
test_cluster_start(struct test_cluster *cl, int primaries,
    int replicas_per_primary, const char *const *extra_args)
{
	memset(cl, 0, sizeof(*cl));
	if (primaries < 1 || replicas_per_primary < 0 ||
	    primaries * (1 + replicas_per_primary) > TEST_CLUSTER_MAX_NODES) {
		fprintf(stderr, "test_cluster_start: bad arguments: %d primaries "
		    "with %d replicas each (at most %d nodes)\n", primaries,
		    replicas_per_primary, TEST_CLUSTER_MAX_NODES);
		return -1;
	}
	cl->primaries = primaries;
	cl->replicas = replicas_per_primary;
	int n = primaries * (1 + replicas_per_primary);
	for (int i = 0; i < n; i++) {
		cl->n = i + 1;
		if (start_node(cl, i, extra_args) != 0) {
			test_cluster_stop(cl);
			return -1;
		}
	}
	if (build(cl) != 0) {
		test_cluster_stop(cl);
		return -1;
	}
	return 0;
}

void
test_cluster_stop(struct test_cluster *cl)
{
	if (cl == NULL)
		return;
	for (int i = 0; i < TEST_CLUSTER_MAX_NODES; i++)
		test_redis_stop(&cl->node[i]);
	memset(cl, 0, sizeof(*cl));
}

/* ------------------------------------------------------------------ */
/* slots */

int
test_cluster_slot_of(const char *key)
{
	size_t len = strlen(key);
	const char *open = strchr(key, '{');
	if (open != NULL) {
		const char *close = strchr(open + 1, '}');
		if (close != NULL && close > open + 1) {
			key = open + 1;
			len = (size_t)(close - open - 1);
		}
	}
	uint16_t crc = 0;  /* CRC16-XMODEM: poly 0x1021, init 0, no reflect */
	for (size_t i = 0; i < len; i++) {
		crc ^= (uint16_t)((unsigned char)key[i] << 8);
		for (int b = 0; b < 8; b++)
			crc = (crc & 0x8000) ? (uint16_t)((crc << 1) ^ 0x1021) :
			    (uint16_t)(crc << 1);
	}
	return crc & (TEST_CLUSTER_SLOTS - 1);
}

/* CLUSTER SLOTS of the first running node that answers into m; its port,
 * or -1. */
static int
any_slots(const struct test_cluster *cl, struct slotmap *m)
{
	for (int i = 0; cl != NULL && i < cl->n; i++)
		if (cl->node[i].pid > 0 && read_slots(cl->node[i].port, m) == 0)
			return cl->node[i].port;
	return -1;
}

int
test_cluster_owner(const struct test_cluster *cl, int slot)
{
	if (slot < 0 || slot >= TEST_CLUSTER_SLOTS)
		return -1;
	struct slotmap *m = malloc(sizeof(*m));
	if (m == NULL)
		return -1;
	int owner = any_slots(cl, m) > 0 ? m->owner[slot] : -1;
	free(m);
	return owner;
}

int
test_cluster_primary_ports(const struct test_cluster *cl, int *ports, int max)
{
	char role[32];
	int k = 0;
	if (ports == NULL)
		return -1;
	for (int i = 0; cl != NULL && i < cl->n && k < max; i++)
		if (cl->node[i].pid > 0 &&
		    test_redis_role(cl->node[i].port, role, sizeof(role)) == 0 &&
		    strcmp(role, "master") == 0)
			ports[k++] = cl->node[i].port;
	return k;
}

int
test_cluster_queue_names(const struct test_cluster *cl, int count,
    char names[][32])
{
	int used[TEST_CLUSTER_MAX_NODES];
	int found = 0;
	if (count < 1 || count > TEST_CLUSTER_MAX_NODES || names == NULL) {
		fprintf(stderr, "test_cluster_queue_names: count %d is not in "
		    "1..%d\n", count, TEST_CLUSTER_MAX_NODES);
		return -1;
	}
	struct slotmap *m = malloc(sizeof(*m));
	if (m == NULL || any_slots(cl, m) < 0) {
		fprintf(stderr, "test_cluster_queue_names: no node gives CLUSTER "
		    "SLOTS\n");
		free(m);
		return -1;
	}
	for (int q = 0; q < 10000 && found < count; q++) {
		char name[32], tag[40];
		snprintf(name, sizeof(name), "q%d", q);
		snprintf(tag, sizeof(tag), "{%s}", name);
		int owner = m->owner[test_cluster_slot_of(tag)];
		int k;
		for (k = 0; k < found && used[k] != owner; k++)
			;
		if (owner <= 0 || k < found)
			continue;
		used[found] = owner;
		memcpy(names[found++], name, sizeof(name));
	}
	free(m);
	if (found == count)
		return 0;
	fprintf(stderr, "test_cluster_queue_names: q0..q9999 fall on %d "
	    "primaries only (want %d)\n", found, count);
	return -1;
}

/* ------------------------------------------------------------------ */
/* migration */

/* Source (owner) and target of a move of slot to to_port, with their
 * indices; -1 with a message if they are not two running primaries. */
static int
move_ends(const struct test_cluster *cl, int slot, int to_port,
    const char *what, int *si, int *ti)
{
	if (!slot_ok(slot, what))
		return -1;
	*ti = node_index(cl, to_port);
	if (*ti < 0 || cl->node[*ti].pid <= 0) {
		fprintf(stderr, "%s: port %d is not a running node of the "
		    "cluster\n", what, to_port);
		return -1;
	}
	int src = test_cluster_owner(cl, slot);
	*si = node_index(cl, src);
	if (*si < 0 || cl->node[*si].pid <= 0) {
		fprintf(stderr, "%s: slot %d is served by port %d, not a running "
		    "node of the cluster\n", what, slot, src);
		return -1;
	}
	if (src == to_port) {
		fprintf(stderr, "%s: slot %d is already served by 127.0.0.1:%d\n",
		    what, slot, to_port);
		return -1;
	}
	return 0;
}

int
test_cluster_migrate_begin(const struct test_cluster *cl, int slot,
    int to_port)
{
	const char *what = "test_cluster_migrate_begin";
	char cmd[256];
	int si, ti;
	if (move_ends(cl, slot, to_port, what, &si, &ti) != 0)
		return -1;
	snprintf(cmd, sizeof(cmd), "CLUSTER SETSLOT %d IMPORTING %s", slot,
	    cl->id[si]);
	if (expect(cl, to_port, cmd, "+OK", what) != 0)
		return -1;
	snprintf(cmd, sizeof(cmd), "CLUSTER SETSLOT %d MIGRATING %s", slot,
	    cl->id[ti]);
	return expect(cl, cl->node[si].port, cmd, "+OK", what);
}

/* MIGRATE the keys in cmd (already "MIGRATE ... KEYS k1 k2") from src. */
static int
migrate_keys(const struct test_cluster *cl, int src, const char *cmd)
{
	char buf[4096], line[512];
	if (servers_redis_command_ms(src, cmd, buf, sizeof(buf),
	    CL_MIGRATE_REPLY_MS) > 0 && (strncmp(buf, "+OK", 3) == 0 ||
	    strncmp(buf, "+NOKEY", 6) == 0))
		return 0;
	fprintf(stderr, "test_cluster_migrate_step: '%.300s...' on "
	    "127.0.0.1:%d answered '%s'\n", cmd, src,
	    buf[0] ? first_line(buf, line, sizeof(line)) : "(no answer)");
	int i = node_index(cl, src);
	if (i >= 0)
		node_log(cl, i);
	return -1;
}

int
test_cluster_migrate_step(const struct test_cluster *cl, int slot,
    int to_port, int max_keys)
{
	const char *what = "test_cluster_migrate_step";
	char cmd[4096], head[128], q[1024], key[1024];
	int si, ti;
	if (max_keys < 1) {
		fprintf(stderr, "%s: max_keys %d < 1\n", what, max_keys);
		return -1;
	}
	if (move_ends(cl, slot, to_port, what, &si, &ti) != 0)
		return -1;
	int src = cl->node[si].port;
	char *buf = malloc(CL_BUF);
	if (buf == NULL)
		return -1;
	snprintf(head, sizeof(head), "MIGRATE 127.0.0.1 %d \"\" 0 %d REPLACE "
	    "KEYS", to_port, CL_MIGRATE_IDLE_MS);
	int moved = 0, rc = 0;
	while (moved < max_keys && rc == 0) {
		int batch = max_keys - moved < CL_GETKEYS_BATCH ?
		    max_keys - moved : CL_GETKEYS_BATCH;
		snprintf(cmd, sizeof(cmd), "CLUSTER GETKEYSINSLOT %d %d", slot,
		    batch);
		const char *p = buf;
		long nkeys;
		if (test_redis_command(src, cmd, buf, CL_BUF) <= 0 ||
		    (nkeys = servers_resp_array(&p)) < 0) {
			fprintf(stderr, "%s: '%s' on 127.0.0.1:%d answered '%s'\n",
			    what, cmd, src, first_line(buf, q, sizeof(q)));
			node_log(cl, si);
			rc = -1;
			break;
		}
		if (nkeys == 0)
			break;
		size_t len = (size_t)snprintf(cmd, sizeof(cmd), "%s", head);
		int in_cmd = 0;
		for (long k = 0; k < nkeys && rc == 0; k++) {
			if (servers_resp_scalar(&p, key, sizeof(key)) != 0 ||
			    quote_key(key, q, sizeof(q)) != 0) {
				fprintf(stderr, "%s: a key of slot %d on 127.0.0.1:%d is "
				    "too long or unreadable\n", what, slot, src);
				rc = -1;
				break;
			}
			if (len + 1 + strlen(q) > CL_LINE_MAX) {
				rc = migrate_keys(cl, src, cmd);
				len = (size_t)snprintf(cmd, sizeof(cmd), "%s", head);
				in_cmd = 0;
			}
			len += (size_t)snprintf(cmd + len, sizeof(cmd) - len, " %s", q);
			in_cmd++;
		}
		if (rc == 0 && in_cmd > 0)
			rc = migrate_keys(cl, src, cmd);
		moved += (int)nkeys;
		if (nkeys < batch)
			break;
	}
	free(buf);
	if (rc != 0)
		return -1;
	snprintf(cmd, sizeof(cmd), "CLUSTER COUNTKEYSINSLOT %d", slot);
	long left = integer_reply(src, cmd);
	if (left < 0) {
		fprintf(stderr, "%s: '%s' on 127.0.0.1:%d failed\n", what, cmd, src);
		node_log(cl, si);
		return -1;
	}
	return (int)left;
}

/* Does every running node say port serves slot? *bad: the first that does
 * not (index), what it says in *said. */
static int
all_say_owner(const struct test_cluster *cl, int slot, int port,
    struct slotmap *m, int *bad, int *said)
{
	for (int i = 0; i < cl->n; i++) {
		if (cl->node[i].pid <= 0)
			continue;
		*said = read_slots(cl->node[i].port, m) == 0 ? m->owner[slot] : -1;
		if (*said != port) {
			*bad = i;
			return 0;
		}
	}
	return 1;
}

int
test_cluster_migrate_end(const struct test_cluster *cl, int slot,
    int to_port)
{
	const char *what = "test_cluster_migrate_end";
	char cmd[256];
	int si, ti, ports[TEST_CLUSTER_MAX_NODES];
	if (move_ends(cl, slot, to_port, what, &si, &ti) != 0)
		return -1;
	int src = cl->node[si].port;
	snprintf(cmd, sizeof(cmd), "CLUSTER COUNTKEYSINSLOT %d", slot);
	long left = integer_reply(src, cmd);
	if (left != 0) {
		fprintf(stderr, "%s: 127.0.0.1:%d still has %ld keys of slot %d "
		    "(move them with test_cluster_migrate_step)\n", what, src, left,
		    slot);
		return -1;
	}
	snprintf(cmd, sizeof(cmd), "CLUSTER SETSLOT %d NODE %s", slot,
	    cl->id[ti]);
	if (expect(cl, to_port, cmd, "+OK", what) != 0 ||
	    expect(cl, src, cmd, "+OK", what) != 0)
		return -1;
	int np = test_cluster_primary_ports(cl, ports, TEST_CLUSTER_MAX_NODES);
	for (int k = 0; k < np; k++)
		if (ports[k] != to_port && ports[k] != src &&
		    expect(cl, ports[k], cmd, "+OK", what) != 0)
			return -1;

	struct slotmap *m = malloc(sizeof(*m));
	if (m == NULL)
		return -1;
	int bad = 0, said = -1;
	long long deadline = servers_now_ms() + CL_AGREE_TIMEOUT_MS;
	for (;;) {
		if (all_say_owner(cl, slot, to_port, m, &bad, &said)) {
			free(m);
			return 0;
		}
		if (!poll_again(deadline))
			break;
	}
	free(m);
	fprintf(stderr, "%s: after %d s 127.0.0.1:%d says slot %d is served by "
	    "port %d (want %d)\n", what, CL_AGREE_TIMEOUT_MS / 1000,
	    cl->node[bad].port, slot, said, to_port);
	node_log(cl, bad);
	return -1;
}

int
test_cluster_migrate_slot(const struct test_cluster *cl, int slot,
    int to_port)
{
	if (test_cluster_migrate_begin(cl, slot, to_port) != 0)
		return -1;
	for (;;) {
		int left = test_cluster_migrate_step(cl, slot, to_port, 1000);
		if (left < 0)
			return -1;
		if (left == 0)
			break;
	}
	return test_cluster_migrate_end(cl, slot, to_port);
}

/* ------------------------------------------------------------------ */
/* failover */

int
test_cluster_kill_primary(struct test_cluster *cl, int port)
{
	const char *what = "test_cluster_kill_primary";
	char role[32], buf[8192], field[32], val[256];
	int i = node_index(cl, port);
	if (i < 0 || cl->node[i].pid <= 0) {
		fprintf(stderr, "%s: port %d is not a running node of the "
		    "cluster\n", what, port);
		return -1;
	}
	if (test_redis_role(port, role, sizeof(role)) != 0 ||
	    strcmp(role, "master") != 0) {
		fprintf(stderr, "%s: 127.0.0.1:%d answers ROLE '%s', not master\n",
		    what, port, role);
		return -1;
	}
	struct slotmap *m = malloc(sizeof(*m));
	if (m == NULL || read_slots(port, m) != 0 ||
	    test_redis_command(port, "INFO replication", buf, sizeof(buf)) <= 0) {
		fprintf(stderr, "%s: no CLUSTER SLOTS or INFO replication from "
		    "127.0.0.1:%d\n", what, port);
		free(m);
		return -1;
	}
	memset(cl->killed_slots[i], 0, sizeof(cl->killed_slots[i]));
	for (int s = 0; s < TEST_CLUSTER_SLOTS; s++)
		if (m->owner[s] == port)
			cl->killed_slots[i][s / 8] |= (unsigned char)(1u << (s % 8));
	free(m);
	/* slaveK:ip=127.0.0.1,port=P,state=online,offset=...,lag=... */
	cl->killed_nreplicas[i] = 0;
	for (int k = 0; k < TEST_CLUSTER_MAX_NODES; k++) {
		snprintf(field, sizeof(field), "slave%d", k);
		servers_info_field(buf, field, val, sizeof(val));
		const char *p = strstr(val, "port=");
		if (p == NULL)
			break;
		cl->killed_replicas[i][cl->killed_nreplicas[i]++] = atoi(p + 5);
	}
	test_redis_kill9(&cl->node[i]);
	return 0;
}

int
test_cluster_wait_failover(const struct test_cluster *cl, int dead_port,
    int timeout_ms)
{
	const char *what = "test_cluster_wait_failover";
	char role[32] = "", state[32] = "", why[512] = "";
	int i = node_index(cl, dead_port);
	if (i < 0 || cl->node[i].pid > 0 || cl->killed_nreplicas[i] == 0) {
		fprintf(stderr, "%s: port %d is not a primary killed with "
		    "test_cluster_kill_primary that had replicas\n", what,
		    dead_port);
		return -1;
	}
	const unsigned char *bits = cl->killed_slots[i];
	struct slotmap *m = malloc(sizeof(*m));
	if (m == NULL)
		return -1;
	long long deadline = servers_now_ms() + timeout_ms;
	for (;;) {
		int cand = -1, ok = 1;
		for (int j = 0; j < cl->n && ok; j++) {
			if (cl->node[j].pid <= 0)
				continue;
			int port = cl->node[j].port;
			cluster_info(port, "cluster_state", state, sizeof(state));
			if (strcmp(state, "ok") != 0) {
				snprintf(why, sizeof(why), "127.0.0.1:%d says "
				    "cluster_state '%s'", port, state);
				ok = 0;
				break;
			}
			if (read_slots(port, m) != 0) {
				snprintf(why, sizeof(why), "no CLUSTER SLOTS from "
				    "127.0.0.1:%d", port);
				ok = 0;
				break;
			}
			for (int s = 0; s < TEST_CLUSTER_SLOTS && ok; s++) {
				if (!(bits[s / 8] & (1u << (s % 8))))
					continue;
				if (cand < 0)
					cand = m->owner[s];
				if (m->owner[s] != cand || cand == dead_port) {
					snprintf(why, sizeof(why), "127.0.0.1:%d says slot "
					    "%d is served by port %d", port, s, m->owner[s]);
					ok = 0;
				}
			}
		}
		if (ok) {
			int k;
			for (k = 0; k < cl->killed_nreplicas[i] &&
			    cl->killed_replicas[i][k] != cand; k++)
				;
			if (k == cl->killed_nreplicas[i]) {
				snprintf(why, sizeof(why), "the slots are served by port "
				    "%d, not a replica of %d", cand, dead_port);
				ok = 0;
			} else if (test_redis_role(cand, role, sizeof(role)) != 0 ||
			    strcmp(role, "master") != 0) {
				snprintf(why, sizeof(why), "127.0.0.1:%d answers ROLE "
				    "'%s'", cand, role);
				ok = 0;
			}
		}
		if (ok) {
			free(m);
			return cand;
		}
		if (!poll_again(deadline))
			break;
	}
	free(m);
	fprintf(stderr, "%s: no replica of 127.0.0.1:%d took over within %d ms: "
	    "%s\n", what, dead_port, timeout_ms, why);
	for (int k = 0; k < cl->killed_nreplicas[i]; k++) {
		int j = node_index(cl, cl->killed_replicas[i][k]);
		if (j >= 0)
			node_log(cl, j);
	}
	return -1;
}
