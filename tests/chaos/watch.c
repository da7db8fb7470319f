/* watch.c - `chaos_helper watch sentinels=... master=NAME t0_ms=EPOCH_MS
 * seconds=S pgq=Q execq=Q` (scripts/chaos --failover): polls every 50 ms
 * which primary the sentinels name and the sum of both queues' done
 * counters there; prints "MS primary PORT" when the primary changes and
 * "MS done PORT" at the first job done on a primary after it changed (MS
 * since t0). */
#include "chaos.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static long long
done_sum(redisContext *c, const char *prefix, const char *const *q)
{
	long long sum = 0;
	for (int i = 0; i < 2; i++) {
		redisReply *r = redisCommand(c, "HGET %s:{%s}:stats done", prefix,
		    q[i]);
		if (r == NULL)
			return -1;
		if (r->type == REDIS_REPLY_STRING)
			sum += atoll(r->str);
		freeReplyObject(r);
	}
	return sum;
}

int
chaos_watch_main(int argc, char **argv)
{
	const char *sentinels = chaos_arg(argc, argv, "sentinels", NULL);
	const char *master = chaos_arg(argc, argv, "master", "ferry");
	const char *prefix = chaos_arg(argc, argv, "prefix", "ferry");
	const char *q[2] = { chaos_arg(argc, argv, "pgq", "chaos_pg"),
		chaos_arg(argc, argv, "execq", "chaos_exec") };
	long long t0 = chaos_arg_ll(argc, argv, "t0_ms", chaos_epoch_ms());
	long long end = servers_now_ms() + chaos_arg_ll(argc, argv, "seconds",
	    600) * 1000;
	if (sentinels == NULL)
		chaos_die("watch: needs sentinels=");
	int cur = -1, waiting = 0;
	long long base = -1;
	redisContext *c = NULL;
	while (servers_now_ms() < end) {
		int port = -1;
		if (c == NULL || c->err) {
			if (c != NULL)
				redisFree(c);
			c = chaos_redis_primary(sentinels, master, 500, &port);
			if (c == NULL) {
				servers_sleep_ms(50);
				continue;
			}
			if (port != cur) {
				if (cur > 0) {
					printf("%lld primary %d\n", chaos_epoch_ms() - t0, port);
					waiting = 1;
					base = -1;
				}
				cur = port;
			}
		}
		long long d = done_sum(c, prefix, q);
		if (d >= 0 && base < 0)
			base = d;
		else if (d > base && waiting) {
			printf("%lld done %d\n", chaos_epoch_ms() - t0, cur);
			waiting = 0;
		}
		/* asked again every time: a demoted primary answers reads */
		redisReply *r = redisCommand(c, "ROLE");
		int master_now = r != NULL && r->type == REDIS_REPLY_ARRAY &&
		    r->elements > 0 && strcmp(r->element[0]->str, "master") == 0;
		if (r != NULL)
			freeReplyObject(r);
		if (!master_now && c->err == 0)
			c->err = REDIS_ERR_OTHER;  /* find the primary again */
		servers_sleep_ms(50);
	}
	if (c != NULL)
		redisFree(c);
	return 0;
}
