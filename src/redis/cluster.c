/* cluster.c - where a queue lives in a Redis Cluster: the hash slot of its
 * tag {QUEUE}, and the primary that serves that slot according to CLUSTER
 * SLOTS, asked of the seed nodes (redis_cluster) in turn. Asked again at
 * every (re)connection: a MOVED, ASK, TRYAGAIN or CLUSTERDOWN reply, or a
 * lost node, make the caller reconnect (queue_role_changed), so a slot
 * migration or a failover is followed without a slot map to keep. */
#include "cluster.h"

#include <hiredis/hiredis.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "redis_ask.h"
#include "redis_auth.h"

static int first;           /* the seed asked first: answered last */

static uint16_t
crc16(const char *buf, size_t len)
{
	uint16_t crc = 0;

	for (size_t i = 0; i < len; i++) {
		crc ^= (uint16_t)((unsigned char)buf[i] << 8);
		for (int k = 0; k < 8; k++)
			crc = crc & 0x8000 ? (uint16_t)((crc << 1) ^ 0x1021) :
			    (uint16_t)(crc << 1);
	}
	return crc;
}

int
cluster_slot_of_key(const char *key, size_t len)
{
	const char *open = memchr(key, '{', len), *close;

	if (open != NULL) {
		size_t rest = len - (size_t)(open - key) - 1;
		close = memchr(open + 1, '}', rest);
		if (close != NULL && close > open + 1)
			return crc16(open + 1, (size_t)(close - open - 1)) &
			    (CLUSTER_SLOTS - 1);
	}
	return crc16(key, len) & (CLUSTER_SLOTS - 1);
}

int
cluster_slot_of_queue(const char *queue)
{
	return crc16(queue, strlen(queue)) & (CLUSTER_SLOTS - 1);
}

/* Seed i of redis_cluster; -1 when there is none. */
static int
seed_address(const struct ferry_config *cfg, int i, char *host,
    size_t hostsize, int *port)
{
	return config_list_hostport(cfg->redis_cluster, i, host, hostsize,
	    port);
}

/* The primary of `slot` in a CLUSTER SLOTS reply; an empty IP means the
 * node we asked (seed). */
static int
slot_owner(const redisReply *r, int slot, const char *seed, char *host,
    size_t hostsize, int *port)
{
	if (r->type != REDIS_REPLY_ARRAY)
		return -1;
	for (size_t i = 0; i < r->elements; i++) {
		const redisReply *range = r->element[i];
		if (range->type != REDIS_REPLY_ARRAY || range->elements < 3 ||
		    range->element[0]->integer > slot ||
		    range->element[1]->integer < slot)
			continue;
		const redisReply *node = range->element[2];
		if (node->type != REDIS_REPLY_ARRAY || node->elements < 2 ||
		    node->element[0]->type != REDIS_REPLY_STRING ||
		    node->element[1]->type != REDIS_REPLY_INTEGER)
			return -1;
		snprintf(host, hostsize, "%s", node->element[0]->len > 0 &&
		    strcmp(node->element[0]->str, "?") != 0 ?
		    node->element[0]->str : seed);
		*port = (int)node->element[1]->integer;
		return 0;
	}
	return -1;
}

/* Ask seed i; 0 with the owner of slot, or -1 with why not in err. */
static int
ask_seed(const struct ferry_config *cfg, int i, int slot, long timeout_ms,
    char *host, size_t hostsize, int *port, char *err, size_t errsize)
{
	char shost[CONFIG_HOST_MAX];
	const char *auth[3];
	int sport, nauth = redis_auth_argv(cfg, auth), rc = -1;
	redisContext *c;
	redisReply *r = NULL;

	if (seed_address(cfg, i, shost, sizeof(shost), &sport) == -1) {
		snprintf(err, errsize, "node %d of redis_cluster is not HOST:PORT",
		    i + 1);
		return -1;
	}
	c = redis_ask_connect("cluster node", shost, sport, timeout_ms, err,
	    errsize);
	if (c == NULL)
		return -1;
	if (nauth > 0) {
		r = redisCommandArgv(c, nauth, auth, NULL);
		if (r == NULL || r->type == REDIS_REPLY_ERROR) {
			snprintf(err, errsize, "cluster node %s:%d refused AUTH (%s)",
			    shost, sport, r != NULL ? r->str : c->errstr);
			goto out;
		}
		freeReplyObject(r);
	}
	r = redisCommand(c, "CLUSTER SLOTS");
	if (r == NULL)
		snprintf(err, errsize, "cluster node %s:%d: %s", shost, sport,
		    c->errstr);
	else if (r->type == REDIS_REPLY_ERROR)
		snprintf(err, errsize, "cluster node %s:%d: CLUSTER SLOTS: %s%s",
		    shost, sport, r->str, strstr(r->str, "disabled") != NULL ?
		    " (redis_cluster names a server that is not in a cluster: use "
		    "redis_host/redis_port for it)" : "");
	else if (slot_owner(r, slot, shost, host, hostsize, port) == -1)
		snprintf(err, errsize, "cluster node %s:%d: no node serves slot %d "
		    "(the cluster is down or being set up)", shost, sport, slot);
	else
		rc = 0;
out:
	return redis_ask_end(c, r, rc);
}

int
cluster_find_node(const struct ferry_config *cfg, const char *queue,
    long timeout_ms, char *host, size_t hostsize, int *port, char *err,
    size_t errsize)
{
	int n = config_pg_list_count(cfg->redis_cluster);
	char why[512], firstwhy[512] = "";
	int slot;

	if (queue == NULL || *queue == '\0')
		queue = cfg->nqueues > 0 ? cfg->queues[0].name : "";
	slot = cluster_slot_of_queue(queue);
	for (int k = 0; k < n; k++) {
		int i = (first + k) % n;
		if (ask_seed(cfg, i, slot, timeout_ms, host, hostsize, port, why,
		    sizeof(why)) == 0) {
			first = i;
			return 0;
		}
		if (k == 0)
			snprintf(firstwhy, sizeof(firstwhy), "%s", why);
	}
	snprintf(err, errsize, "no node of redis_cluster says who serves queue "
	    "%s (slot %d; the first asked: %s)", queue, slot, firstwhy);
	return -1;
}
