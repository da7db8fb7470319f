/* reclaim_wait.c - benchmark helper of scripts/bench: SIGKILL one worker and
 * time how long its processing list takes to disappear from Redis (the
 * master's reclaim.lua hands the jobs back (to requeue) and deletes the list in
 * one atomic step, so "key gone" means "jobs back in the queue").
 *
 *   reclaim_wait HOST PORT PID KEY [TIMEOUT_MS]
 *
 * Connects first, then takes CLOCK_MONOTONIC, sends SIGKILL to PID, polls
 * EXISTS KEY every 0.2 ms and prints the elapsed milliseconds (3 decimals).
 * Exit status: 0 measured, 1 timeout, 2 usage or error.
 * Built by scripts/bench: gcc -O2 reclaim_wait.c $(pkg-config --cflags --libs hiredis) */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>

#include <hiredis.h>

static double
now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

int
main(int argc, char **argv)
{
	if (argc < 5 || argc > 6) {
		fprintf(stderr, "usage: reclaim_wait HOST PORT PID KEY [TIMEOUT_MS]\n");
		return 2;
	}
	pid_t pid = (pid_t)atol(argv[3]);
	const char *key = argv[4];
	double timeout = argc == 6 ? atof(argv[5]) : 10000.;
	struct timeval tv = { 5, 0 };
	redisContext *rc = redisConnectWithTimeout(argv[1], atoi(argv[2]), tv);
	struct timespec pause = { 0, 200000 };   /* 0.2 ms */

	if (rc == NULL || rc->err) {
		fprintf(stderr, "reclaim_wait: redis: %s\n",
		    rc ? rc->errstr : "out of memory");
		return 2;
	}
	if (pid <= 1) {
		fprintf(stderr, "reclaim_wait: bad pid %s\n", argv[3]);
		return 2;
	}
	double start = now_ms();
	if (kill(pid, SIGKILL) == -1) {
		fprintf(stderr, "reclaim_wait: kill %d: %s\n", (int)pid,
		    strerror(errno));
		return 2;
	}
	for (;;) {
		redisReply *r = redisCommand(rc, "EXISTS %s", key);
		double t = now_ms() - start;
		if (r == NULL || r->type != REDIS_REPLY_INTEGER) {
			fprintf(stderr, "reclaim_wait: EXISTS: %s\n",
			    r == NULL ? rc->errstr : r->type == REDIS_REPLY_ERROR ?
			    r->str : "unexpected reply");
			return 2;
		}
		long long exists = r->integer;
		freeReplyObject(r);
		if (exists == 0) {
			printf("%.3f\n", t);
			return 0;
		}
		if (t > timeout) {
			fprintf(stderr, "reclaim_wait: %s still exists after %.0f ms\n",
			    key, t);
			printf("timeout\n");
			return 1;
		}
		nanosleep(&pause, NULL);
	}
}
