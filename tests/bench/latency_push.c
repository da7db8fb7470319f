/* latency_push.c - benchmark helper of scripts/bench latency: a producer
 * that LPUSHes jobs at a fixed rate, each carrying the wall-clock time at
 * which it was pushed, so that the time to its row's commit can be read
 * from the table afterwards.
 *
 *   latency_push HOST PORT LIST RATE SECONDS FIRST_SEQ
 *
 * Every millisecond (absolute ticks of CLOCK_MONOTONIC, so that a late tick
 * does not slow the rate down) it pushes the jobs due by then, RATE a
 * second, in one LPUSH; each job is
 *
 *   {"seq":N,"enq_us":T,"payload":"xxx...x"}
 *
 * (100 bytes with seq and T of 6 and 16 digits) with seq counting from
 * FIRST_SEQ and T = CLOCK_REALTIME in microseconds, read just before the
 * LPUSH is sent. Runs SECONDS seconds.
 *
 * Prints: jobs first_enq_us last_enq_us achieved_rate max_behind_us
 * (max_behind_us: the largest lag of a push behind its due time, the
 * producer's own stalls). Exit status 0 done, 1 a Redis error, 2 usage.
 * Built by scripts/bench: gcc -O2 latency_push.c $(pkg-config --cflags --libs hiredis) */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <hiredis.h>

#define TICK_NS 1000000L
#define MAX_PUSH 2000           /* jobs in one LPUSH at most */
#define DOC_MAX 160

static long long
clock_us(clockid_t id)
{
	struct timespec ts;
	clock_gettime(id, &ts);
	return (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int
main(int argc, char **argv)
{
	if (argc != 7 || atol(argv[4]) < 1 || atof(argv[5]) <= 0) {
		fprintf(stderr, "usage: latency_push HOST PORT LIST RATE SECONDS "
		    "FIRST_SEQ\n");
		return 2;
	}
	long rate = atol(argv[4]);
	double secs = atof(argv[5]);
	long long seq = atoll(argv[6]);
	long long total = (long long)(rate * secs);

	redisContext *c = redisConnect(argv[1], atoi(argv[2]));
	if (c == NULL || c->err) {
		fprintf(stderr, "latency_push: connect to %s:%s: %s\n", argv[1],
		    argv[2], c != NULL ? c->errstr : "out of memory");
		return 1;
	}

	static char docs[MAX_PUSH][DOC_MAX];
	static const char *av[MAX_PUSH + 2];
	static size_t avlen[MAX_PUSH + 2];
	av[0] = "LPUSH";
	avlen[0] = 5;
	av[1] = argv[3];
	avlen[1] = strlen(argv[3]);

	struct timespec next;
	clock_gettime(CLOCK_MONOTONIC, &next);
	long long t0 = clock_us(CLOCK_MONOTONIC);
	long long sent = 0, first_enq = 0, last_enq = 0, behind_max = 0;
	while (sent < total) {
		long long now = clock_us(CLOCK_MONOTONIC);
		long long due = (long long)((double)(now - t0) * rate / 1e6) + 1;
		if (due > total)
			due = total;
		while (sent < due) {
			int n = due - sent > MAX_PUSH ? MAX_PUSH : (int)(due - sent);
			/* how late the oldest of these is */
			long long late = now - (t0 + (long long)((double)sent * 1e6 /
			    rate));
			if (late > behind_max)
				behind_max = late;
			long long enq = clock_us(CLOCK_REALTIME);
			for (int i = 0; i < n; i++) {
				int len = snprintf(docs[i], DOC_MAX,
				    "{\"seq\":%lld,\"enq_us\":%lld,\"payload\":\"%.*s\"}",
				    seq + sent + i, enq, 52,
				    "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx");
				av[2 + i] = docs[i];
				avlen[2 + i] = (size_t)len;
			}
			redisReply *r = redisCommandArgv(c, n + 2, av, avlen);
			if (r == NULL || r->type == REDIS_REPLY_ERROR) {
				fprintf(stderr, "latency_push: LPUSH %s: %s\n",
				    argv[3], r != NULL ? r->str : c->errstr);
				return 1;
			}
			freeReplyObject(r);
			if (first_enq == 0)
				first_enq = enq;
			last_enq = enq;
			sent += n;
		}
		next.tv_nsec += TICK_NS;
		if (next.tv_nsec >= 1000000000L) {
			next.tv_nsec -= 1000000000L;
			next.tv_sec++;
		}
		clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL);
	}
	double took = (clock_us(CLOCK_MONOTONIC) - t0) / 1e6;
	printf("%lld %lld %lld %.0f %lld\n", sent, first_enq, last_enq,
	    took > 0 ? sent / took : 0, behind_max);
	redisFree(c);
	return 0;
}
