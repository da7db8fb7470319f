/* churn.c - `chaos_helper churn ...`: the application cache that shares
 * Redis with ferry in a chaos run (below). */
#include "chaos.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ------------------------------------------------------- cache churn */

/* An application's cache in the same Redis (doc/redis.md, "One Redis for the
 * cache and the queue"): SETs of app:cache:N, values of size_min..size_max
 * bytes (seeded), each with a TTL of ttl_ms, bytes_per_s a second, until
 * SIGTERM (or `seconds`). Until Redis first reports maxmemory reached it
 * writes as fast as it can (the suite's Redis is full from the start),
 * straight to fill_redis=PORT when given (a proxy in between slows that
 * down about tenfold).
 * Every fault reaches it as it reaches ferry: a lost or refused connection
 * (a restart, a cut link, a failover) is opened again and the churn goes
 * on. It uses the foreign keys (TOUCH, twice a second): app:session:1 has
 * a TTL, and a session in use is not what volatile-lru evicts.
 * evicted_keys and expired_keys are summed over every redis-server process
 * it saw (a restart starts them from 0). At the end one line of KEY=VALUE
 * into `report`. */

#define CHURN_PIPELINE 32
#define CHURN_RUNS 32           /* redis-server processes told apart */

static volatile sig_atomic_t churn_stop;

static void
churn_on_term(int sig)
{
	(void)sig;
	churn_stop = 1;
}

struct churn_run {
	char id[48];                 /* INFO run_id */
	long long evicted, expired;  /* the highest seen */
};

/* One INFO sample: the counters of this process, and *full when
 * used_memory reached maxmemory. -1 when Redis does not answer. */
static int
churn_sample(redisContext *c, struct churn_run *runs, int *nruns, int *full)
{
	redisReply *r = redisCommand(c, "INFO server memory stats");
	if (r == NULL || r->type != REDIS_REPLY_STRING) {
		if (r != NULL)
			freeReplyObject(r);
		return -1;
	}
	const char *id = strstr(r->str, "run_id:"), *v;
	long long f[4] = { 0, 0, 0, 0 };   /* evicted, expired, used, max */
	static const char *const names[] = { "\nevicted_keys:",
		"\nexpired_keys:", "\nused_memory:", "\nmaxmemory:" };
	for (int i = 0; i < 4; i++)
		if ((v = strstr(r->str, names[i])) != NULL)
			f[i] = atoll(v + strlen(names[i]));
	if (f[3] == 0 || f[2] >= f[3] - f[3] / 50 || f[0] > 0)
		*full = 1;      /* (no maxmemory: never full, so pace at once) */
	int i = 0;
	while (id != NULL && i < *nruns && strncmp(runs[i].id, id + 7, 40) != 0)
		i++;
	if (id != NULL && i == *nruns && *nruns < CHURN_RUNS) {
		memset(&runs[i], 0, sizeof(runs[i]));
		snprintf(runs[(*nruns)++].id, sizeof(runs[0].id), "%.40s", id + 7);
	}
	if (id != NULL && i < *nruns) {
		runs[i].evicted = f[0] > runs[i].evicted ? f[0] : runs[i].evicted;
		runs[i].expired = f[1] > runs[i].expired ? f[1] : runs[i].expired;
	}
	freeReplyObject(r);
	return 0;
}

int
chaos_churn_main(int argc, char **argv)
{
	long long rate = chaos_arg_ll(argc, argv, "bytes_per_s", 3000000);
	long long smin = chaos_arg_ll(argc, argv, "size_min", 4096);
	long long smax = chaos_arg_ll(argc, argv, "size_max", 8192);
	long long ttl = chaos_arg_ll(argc, argv, "ttl_ms", 60000);
	long long end = servers_now_ms() + chaos_arg_ll(argc, argv, "seconds",
	    3600) * 1000;
	const char *prefix = chaos_arg(argc, argv, "prefix", "app:cache:");
	const char *report = chaos_arg(argc, argv, "report", NULL);
	int fill_port = (int)chaos_arg_ll(argc, argv, "fill_redis", 0);
	struct chaos_rng rng = { (uint64_t)chaos_arg_ll(argc, argv, "seed", 1) ^
	    0x636875726eULL };
	struct churn_run runs[CHURN_RUNS];
	struct sigaction sa = { .sa_handler = churn_on_term };
	long long keys = 0, bytes = 0, refused = 0, reconnects = 0, next = 0;
	long long start = servers_now_ms(), sent = 0, sampled = 0;
	int nruns = 0, full = 0;
	char *value = malloc((size_t)smax);
	if (report == NULL || value == NULL || smin < 1 || smax < smin ||
	    rate <= 0)
		chaos_die("churn: needs report=FILE, 1 <= size_min <= size_max, "
		    "bytes_per_s > 0");
	memset(value, 'c', (size_t)smax);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	redisContext *c = NULL;
	int direct = 0;
	while (!churn_stop && servers_now_ms() < end) {
		if (c != NULL && direct && full) {
			redisFree(c);   /* full: on through the link */
			c = NULL;
		}
		if (c == NULL || c->err) {
			if (c != NULL) {
				redisFree(c);
				reconnects++;
				servers_sleep_ms(100);
			}
			direct = !full && fill_port > 0;
			if ((c = direct ? chaos_redis(fill_port, 2000) :
			    chaos_redis_arg(argc, argv, 2000)) == NULL) {
				servers_sleep_ms(200);
				continue;
			}
		}
		long long now = servers_now_ms();
		long long due = rate * (now - start) / 1000;
		if (now - sampled >= 500) {
			const char *touch[8] = { "TOUCH" };
			int nt = 1;
			while (nt < 8 && chaos_foreign_keys[nt - 1] != NULL)
				nt++;
			for (int i = 1; i < nt; i++)
				touch[i] = chaos_foreign_keys[i - 1];
			redisReply *t = redisCommandArgv(c, nt, touch, NULL);
			if (t != NULL)
				freeReplyObject(t);
			if (churn_sample(c, runs, &nruns, &full) != 0 && c->err == 0)
				c->err = REDIS_ERR_OTHER;  /* ask again */
			sampled = now;
		}
		if (!full || due - sent > rate)
			sent = due - (full ? rate : 0);  /* at most 1 s behind */
		if (full && sent >= due) {
			servers_sleep_ms(5);
			continue;
		}
		long long size[CHURN_PIPELINE];
		for (int i = 0; i < CHURN_PIPELINE; i++) {
			size[i] = chaos_rng_range(&rng, smin, smax);
			redisAppendCommand(c, "SET %s%lld %b PX %lld", prefix,
			    next++, value, (size_t)size[i], ttl);
		}
		for (int i = 0; i < CHURN_PIPELINE; i++) {
			redisReply *r;
			if (redisGetReply(c, (void **)&r) != REDIS_OK)
				break;
			if (r->type == REDIS_REPLY_ERROR) {
				if (refused++ % 1000 == 0)
					fprintf(stderr, "chaos churn: SET refused: %.200s\n",
					    r->str);
				/* a demoted primary (READONLY): find the new one */
				if (strncmp(r->str, "READONLY", 8) == 0)
					c->err = REDIS_ERR_OTHER;
			} else {
				keys++;
				bytes += size[i];
				sent += size[i];
			}
			freeReplyObject(r);
		}
	}
	if (c != NULL && c->err == 0)
		churn_sample(c, runs, &nruns, &full);
	long long evicted = 0, expired = 0;
	for (int i = 0; i < nruns; i++) {
		evicted += runs[i].evicted;
		expired += runs[i].expired;
	}
	FILE *f = fopen(report, "w");
	if (f == NULL || fprintf(f, "keys=%lld bytes=%lld refused=%lld "
	    "reconnects=%lld evicted=%lld expired=%lld runs=%d seconds=%lld "
	    "size_min=%lld size_max=%lld ttl_ms=%lld\n", keys, bytes, refused,
	    reconnects, evicted, expired, nruns,
	    (servers_now_ms() - start) / 1000, smin, smax, ttl) < 0 || fclose(f) != 0)
		chaos_die("churn: cannot write %s", report);
	if (c != NULL)
		redisFree(c);
	free(value);
	return 0;
}
