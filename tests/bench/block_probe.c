/* block_probe.c - benchmark helper of scripts/bench deadletter: how long
 * Redis stops answering, seen by a client, and which commands took long.
 *
 *   block_probe HOST PORT [MIN_US]
 *
 * Sends PING every 1 ms and times each round trip (CLOCK_MONOTONIC) until
 * SIGTERM or SIGINT; then prints
 *
 *   probe PINGS MAX_MS SLOW_PINGS
 *
 * (SLOW_PINGS: round trips over 10 ms), then one line per SLOWLOG entry of at
 * least MIN_US microseconds (default 1000), oldest first:
 *
 *   slow DURATION_US COMMAND ARG1 ARG2 ARG3
 *
 * (the first three arguments, as SLOWLOG keeps them: cut at 128 bytes).
 * Run Redis with slowlog-log-slower-than 0 (or below MIN_US) and a
 * slowlog-max-len that holds the run. Exit status: 0, or 2 on an error.
 * Built by scripts/bench: gcc -O2 block_probe.c $(pkg-config --cflags --libs hiredis) */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <hiredis.h>

static volatile sig_atomic_t stop;

static void
on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static double
now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void
print_arg(redisReply *a)
{
	putchar(' ');
	if (a->type != REDIS_REPLY_STRING) {
		putchar('?');
		return;
	}
	for (size_t i = 0; i < a->len; i++)
		putchar(a->str[i] > ' ' && a->str[i] < 127 ? a->str[i] : '_');
}

int
main(int argc, char **argv)
{
	if (argc < 3 || argc > 4) {
		fprintf(stderr, "usage: block_probe HOST PORT [MIN_US]\n");
		return 2;
	}
	long long min_us = argc > 3 ? atoll(argv[3]) : 1000;
	struct timeval tv = { 600, 0 };
	redisContext *rc = redisConnectWithTimeout(argv[1], atoi(argv[2]), tv);
	struct timespec pause = { 0, 1000000 };
	struct sigaction sa;
	long long pings = 0, slow = 0;
	double max = 0;

	if (rc == NULL || rc->err) {
		fprintf(stderr, "block_probe: redis: %s\n", rc ? rc->errstr : "out of memory");
		return 2;
	}
	redisSetTimeout(rc, tv);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	while (!stop) {
		double t0 = now_ms();
		redisReply *r = redisCommand(rc, "PING");
		double dt = now_ms() - t0;
		if (r == NULL) {
			fprintf(stderr, "block_probe: PING: %s\n", rc->errstr);
			return 2;
		}
		freeReplyObject(r);
		pings++;
		if (dt > max)
			max = dt;
		if (dt > 10)
			slow++;
		nanosleep(&pause, NULL);
	}
	printf("probe %lld %.3f %lld\n", pings, max, slow);

	redisReply *s = redisCommand(rc, "SLOWLOG GET -1");
	if (s == NULL || s->type != REDIS_REPLY_ARRAY) {
		/* Redis < 7 does not take -1 */
		if (s)
			freeReplyObject(s);
		s = redisCommand(rc, "SLOWLOG GET 1000000");
	}
	if (s == NULL || s->type != REDIS_REPLY_ARRAY) {
		fprintf(stderr, "block_probe: SLOWLOG GET failed\n");
		return 2;
	}
	for (size_t i = s->elements; i-- > 0;) {
		redisReply *e = s->element[i];
		if (e->type != REDIS_REPLY_ARRAY || e->elements < 4 ||
		    e->element[2]->type != REDIS_REPLY_INTEGER ||
		    e->element[3]->type != REDIS_REPLY_ARRAY)
			continue;
		if (e->element[2]->integer < min_us)
			continue;
		redisReply *args = e->element[3];
		printf("slow %lld", e->element[2]->integer);
		for (size_t k = 0; k < args->elements && k < 4; k++)
			print_arg(args->element[k]);
		putchar('\n');
	}
	freeReplyObject(s);
	return 0;
}
