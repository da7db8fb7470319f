/* master_id.c - the master's identity in Redis. hostname:pid alone is the
 * same for replicas that share a hostname and run ferryd as pid 1
 * (containers, PID namespaces): two hosts would then share processing
 * lists, and one's reaper or kill would hand back the other's live
 * batches. A random part per start keeps ids apart, and the heartbeat entry
 * holds a token of this start, so that a clash (a forced or astronomically
 * unlucky id) is refused instead of shared. */
#include "master_id.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "log.h"

#define CLAIM_TIMEOUT_MS 5000

static int
random_hex(char *out, size_t bytes, char *err, size_t errsize)
{
	unsigned char r[16];

	if (bytes > sizeof(r) || getrandom(r, bytes, 0) != (ssize_t)bytes) {
		snprintf(err, errsize, "cannot read random bytes for the master "
		    "id (getrandom: %s)", strerror(errno));
		return -1;
	}
	for (size_t i = 0; i < bytes; i++)
		sprintf(out + 2 * i, "%02x", r[i]);
	return 0;
}

int
master_ident_init(struct master_ident *mi, char *err, size_t errsize)
{
	const char *forced = getenv(MASTER_ID_TEST_ENV);
	char host[64] = "localhost", rnd[17], tok[33];
	size_t n;

	if (random_hex(rnd, 4, err, errsize) == -1 ||
	    random_hex(tok, 8, err, errsize) == -1)
		return -1;
	snprintf(mi->token, sizeof(mi->token), "%d:%s", (int)getpid(), tok);
	if (forced != NULL) {
		n = strlen(forced);
		if (n == 0 || n >= 100 || strcspn(forced, " \t\r\n{}") != n) {
			snprintf(err, errsize, "%s: \"%.100s\" is not a master id "
			    "(1..99 characters, no blanks or braces)",
			    MASTER_ID_TEST_ENV, forced);
			return -1;
		}
		snprintf(mi->id, sizeof(mi->id), "%s", forced);
		return 0;
	}
	if (gethostname(host, sizeof(host) - 1) == -1)
		snprintf(host, sizeof(host), "localhost");
	host[sizeof(host) - 1] = '\0';
	snprintf(mi->id, sizeof(mi->id), "%s:%d:%s", host, (int)getpid(), rnd);
	return 0;
}

void
master_beat_init(struct master_beat *b, const struct ferry_config *cfg,
    const char *queue, const char *id, const char *token, long ttl_ms)
{
	struct queue_keys k;

	queue_keys_init(&k, cfg->redis_prefix, queue);
	snprintf(b->masters, sizeof(b->masters), "%s", k.masters);
	snprintf(b->clock, sizeof(b->clock), "%s", k.clock);
	snprintf(b->ttl, sizeof(b->ttl), "%ld", ttl_ms);
	b->args[0] = b->masters;
	b->args[1] = b->clock;
	b->args[2] = id;
	b->args[3] = token;
	b->args[4] = b->ttl;
}

static int claim_queue(const struct ferry_config *cfg,
    const struct master_ident *mi, const char *queue);

int
master_ident_claim(const struct ferry_config *cfg,
    const struct master_ident *mi)
{
	int rc = 0;

	/* one heartbeat per queue: a clash matters where lists are shared */
	for (int i = 0; i < cfg->nqueues && rc == 0; i++)
		rc = claim_queue(cfg, mi, cfg->queues[i].name);
	return rc;
}

static int
claim_queue(const struct ferry_config *cfg, const struct master_ident *mi,
    const char *queue)
{
	struct master_beat b;
	char err[512], addr[300], msg[1024];
	redisContext *c = queue_connect_for(cfg, queue, CLAIM_TIMEOUT_MS, NULL,
	    err, sizeof(err));
	redisReply *r;
	int rc = 0;

	if (c == NULL)
		return 0;       /* the first asynchronous beat checks */
	master_beat_init(&b, cfg, queue, mi->id, mi->token,
	    cfg->heartbeat_ttl_ms);
	r = queue_script(c, LUA_HEARTBEAT, MASTER_BEAT_KEYS, MASTER_BEAT_ARGS,
	    b.args, NULL);
	if (r != NULL && r->type == REDIS_REPLY_ERROR &&
	    strncmp(r->str, MASTER_ID_TAKEN, strlen(MASTER_ID_TAKEN)) == 0) {
		snprintf(msg, sizeof(msg), "master id %s is in use by another "
		    "running ferryd (%s): two masters under one id would share "
		    "processing lists; not started (stop the other one, or wait "
		    "until its heartbeat's deadline passes)", mi->id,
		    r->str + strlen(MASTER_ID_TAKEN));
		if (log_fd() != STDERR_FILENO)
			fprintf(stderr, "ferryd: %s\n", msg);
		log_error("%s", msg);
		rc = -1;
	} else if (r != NULL && r->type == REDIS_REPLY_ERROR) {
		log_warn("redis at %s: first heartbeat failed: %s (the master "
		    "retries)", queue_address(cfg, addr, sizeof(addr)), r->str);
	}
	freeReplyObject(r);
	redisFree(c);
	return rc;
}
