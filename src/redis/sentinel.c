/* sentinel.c - asking Redis Sentinel where the primary is: the sentinels of
 * redis_sentinels in turn, starting with the one that answered last, each
 * with a short timeout, so a dead sentinel costs one timeout and never an
 * error. The answer is only a hint: the caller checks ROLE on the address
 * (queue.c), and distrusts this sentinel when it named a replica. */
#include "sentinel.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "redis_ask.h"

static int first;           /* the sentinel asked first: answered last */

int
sentinel_count(const struct ferry_config *cfg)
{
	return config_pg_list_count(cfg->redis_sentinels);
}

int
sentinel_address(const struct ferry_config *cfg, int i, char *host,
    size_t hostsize, int *port)
{
	return config_list_hostport(cfg->redis_sentinels, i, host, hostsize,
	    port);
}

/* Ask sentinel i; 0 with the address, or -1 with why not in err. */
static int
ask_one(const struct ferry_config *cfg, int i, long timeout_ms, char *host,
    size_t hostsize, int *port, char *err, size_t errsize)
{
	char shost[CONFIG_HOST_MAX];
	int sport, rc = -1;
	redisContext *c;
	redisReply *r = NULL;

	if (sentinel_address(cfg, i, shost, sizeof(shost), &sport) == -1) {
		snprintf(err, errsize, "sentinel %d of redis_sentinels is not "
		    "HOST:PORT", i + 1);
		return -1;
	}
	c = redis_ask_connect("sentinel", shost, sport, timeout_ms, err,
	    errsize);
	if (c == NULL)
		return -1;
	if (*cfg->redis_sentinel_password != '\0') {
		r = redisCommand(c, "AUTH %s", cfg->redis_sentinel_password);
		if (r == NULL || r->type == REDIS_REPLY_ERROR) {
			snprintf(err, errsize, "sentinel %s:%d refused AUTH (%s): check "
			    "[ferryd] redis_sentinel_password against its "
			    "requirepass", shost, sport, r != NULL ? r->str :
			    c->errstr);
			goto out;
		}
		freeReplyObject(r);
	}
	r = redisCommand(c, "SENTINEL get-master-addr-by-name %s",
	    cfg->redis_sentinel_master);
	if (r == NULL)
		snprintf(err, errsize, "sentinel %s:%d: %s", shost, sport,
		    c->errstr);
	else if (r->type == REDIS_REPLY_ERROR)
		snprintf(err, errsize, "sentinel %s:%d: %s", shost, sport, r->str);
	else if (r->type == REDIS_REPLY_NIL)
		snprintf(err, errsize, "sentinel %s:%d monitors no master named %s "
		    "(check [ferryd] redis_sentinel_master against its \"sentinel "
		    "monitor\" lines)", shost, sport, cfg->redis_sentinel_master);
	else if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
	    r->element[0]->type != REDIS_REPLY_STRING ||
	    r->element[1]->type != REDIS_REPLY_STRING ||
	    r->element[0]->len >= hostsize ||
	    (*port = atoi(r->element[1]->str)) < 1 || *port > 65535)
		snprintf(err, errsize, "sentinel %s:%d gave no address for %s",
		    shost, sport, cfg->redis_sentinel_master);
	else {
		snprintf(host, hostsize, "%s", r->element[0]->str);
		rc = 0;
	}
out:
	return redis_ask_end(c, r, rc);
}

int
sentinel_find_primary(const struct ferry_config *cfg, long timeout_ms,
    char *host, size_t hostsize, int *port, char *err, size_t errsize)
{
	int n = sentinel_count(cfg), failed = 0;
	char why[512], firstwhy[512] = "";

	for (int k = 0; k < n; k++) {
		int i = (first + k) % n;
		if (ask_one(cfg, i, timeout_ms, host, hostsize, port, why,
		    sizeof(why)) == 0) {
			first = i;
			return 0;
		}
		if (failed++ == 0)
			snprintf(firstwhy, sizeof(firstwhy), "%s", why);
	}
	if (n == 1)
		snprintf(err, errsize, "the only sentinel gave no primary for %s: "
		    "%s", cfg->redis_sentinel_master, firstwhy);
	else
		snprintf(err, errsize, "none of %d sentinels gave a primary for %s "
		    "(the first asked: %s)", n, cfg->redis_sentinel_master,
		    firstwhy);
	return -1;
}

void
sentinel_distrust(const struct ferry_config *cfg)
{
	int n = sentinel_count(cfg);

	if (n > 0)
		first = (first + 1) % n;
}

int
sentinel_current(void)
{
	return first;
}
