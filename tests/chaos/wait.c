/* wait.c - `chaos_helper wait redis=PORT seconds=S stuck=T pgq=Q execq=Q
 * [upq=Q tbq=Q]`: the end of a chaos run's faults. Waits (bounded) until
 * every list and sorted set of the queues but `dead` is empty and has
 * stayed so for two seconds; exit 1 on timeout, or after `stuck` seconds
 * without any progress, naming what is left (chaos_leftovers, check.c).
 * With sentinels=P1,P2,P3 master=NAME Redis is the primary the sentinels
 * name. */
#include "chaos.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Sum of the counters of queue q's stats hash that move when work is done. */
static long long
progress(redisContext *c, const char *prefix, const char *q)
{
	redisReply *r = redisCommand(c, "HMGET %s:{%s}:stats done dead retried "
	    "recovered", prefix, q);
	long long sum = 0;
	for (size_t i = 0; r && r->type == REDIS_REPLY_ARRAY && i < r->elements; i++)
		if (r->element[i]->type == REDIS_REPLY_STRING)
			sum += atoll(r->element[i]->str);
	if (r)
		freeReplyObject(r);
	return sum;
}

/* Bounded: `seconds` in all, and `stuck` seconds without any progress (no
 * job done, dead, retried or recovered while some are left) ends it early. */
int
chaos_wait_main(int argc, char **argv)
{
	long long start = servers_now_ms();
	long long deadline = start + chaos_arg_ll(argc, argv, "seconds", 60) * 1000;
	long long stuck_ms = chaos_arg_ll(argc, argv, "stuck", 20) * 1000;
	const char *prefix = chaos_arg(argc, argv, "prefix", "ferry");
	/* upq= and tbq= (the upsert and two-table queues) when given */
	const char *q[4] = { chaos_arg(argc, argv, "pgq", "chaos_pg"),
		chaos_arg(argc, argv, "execq", "chaos_exec"),
		chaos_arg(argc, argv, "upq", NULL), chaos_arg(argc, argv, "tbq",
		    NULL) };
	int nq = q[2] == NULL ? 2 : q[3] == NULL ? 3 : 4;
	long long empty_since = -1, last_sig = -1, moved_at = start;
	for (;;) {
		long long now = servers_now_ms(), left = -1, sig = -1;
		redisContext *c = chaos_redis_arg(argc, argv, 2000);
		if (c != NULL) {
			left = 0;
			sig = 0;
			for (int i = 0; i < nq; i++) {
				long long a = chaos_leftovers(c, prefix, q[i], 0, NULL);
				left = a < 0 || left < 0 ? -1 : left + a;
				sig = sig * 7 + progress(c, prefix, q[i]);
			}
			sig += left * 1000003;
		}
		if (sig != last_sig) {
			last_sig = sig;
			moved_at = now;
		}
		if (left == 0 && empty_since < 0)
			empty_since = now;
		if (left != 0)
			empty_since = -1;
		if (empty_since >= 0 && now - empty_since >= 2000) {
			printf("chaos: drained in %lld s\n", (now - start) / 1000);
			redisFree(c);
			return 0;
		}
		if (now >= deadline || now - moved_at >= stuck_ms) {
			if (now >= deadline)
				printf("chaos: not drained after %lld s:\n",
				    (now - start) / 1000);
			else
				printf("chaos: not drained, and no progress for %lld s "
				    "(after %lld s):\n", stuck_ms / 1000,
				    (now - start) / 1000);
			if (c != NULL) {
				for (int i = 0; i < nq; i++)
					chaos_leftovers(c, prefix, q[i], 1, NULL);
				redisFree(c);
			}
			return 1;
		}
		if (c != NULL)
			redisFree(c);
		servers_sleep_ms(250);
	}
}
