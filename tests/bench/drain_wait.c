/* drain_wait.c - benchmark helper of scripts/bench: poll a counter in a
 * Redis hash until it reaches a target.
 *
 *   drain_wait HOST PORT KEY FIELD TARGET [INTERVAL_MS [TIMEOUT_S]]
 *
 * Polls HGET KEY FIELD every INTERVAL_MS (default 10) and prints two wall
 * clock times (CLOCK_REALTIME, microseconds since the epoch, the clock of
 * bash's $EPOCHREALTIME): when the counter was first seen above 0 and when
 * it first reached TARGET. Exit status: 0 reached, 1 timeout (default 600 s),
 * 2 usage or error.
 * Built by scripts/bench: gcc -O2 drain_wait.c $(pkg-config --cflags --libs hiredis) */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <hiredis.h>

static long long
now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int
main(int argc, char **argv)
{
	if (argc < 6 || argc > 8) {
		fprintf(stderr, "usage: drain_wait HOST PORT KEY FIELD TARGET "
		    "[INTERVAL_MS [TIMEOUT_S]]\n");
		return 2;
	}
	long long target = atoll(argv[5]), first = 0;
	long interval = argc > 6 ? atol(argv[6]) : 10;
	long long deadline = now_us() + (argc > 7 ? atoll(argv[7]) : 600) * 1000000;
	struct timespec pause = { interval / 1000, (interval % 1000) * 1000000L };
	struct timeval tv = { 5, 0 };
	redisContext *rc = redisConnectWithTimeout(argv[1], atoi(argv[2]), tv);

	if (rc == NULL || rc->err) {
		fprintf(stderr, "drain_wait: redis: %s\n",
		    rc ? rc->errstr : "out of memory");
		return 2;
	}
	for (;;) {
		redisReply *r = redisCommand(rc, "HGET %s %s", argv[3], argv[4]);
		long long t = now_us(), v;
		if (r == NULL || r->type == REDIS_REPLY_ERROR) {
			fprintf(stderr, "drain_wait: HGET: %s\n",
			    r == NULL ? rc->errstr : r->str);
			return 2;
		}
		v = r->type == REDIS_REPLY_STRING ? atoll(r->str) : 0;
		freeReplyObject(r);
		if (v > 0 && first == 0)
			first = t;
		if (v >= target) {
			printf("%lld %lld\n", first, t);
			return 0;
		}
		if (t > deadline) {
			fprintf(stderr, "drain_wait: %s %s = %lld, want %lld: timeout\n",
			    argv[3], argv[4], v, target);
			return 1;
		}
		nanosleep(&pause, NULL);
	}
}
