/* drain_kill.c - benchmark helper of scripts/bench drain: watch a queue
 * drain, SIGKILL a worker K times on the way (each while it holds a batch),
 * and time the drain.
 *
 *   drain_kill HOST PORT QUEUE FERRYD_PID N KILLS [TIMEOUT_S]
 *
 * Polls every 1 ms (one pipelined round trip): HMGET ferry:{QUEUE}:stats
 * done dead, LLEN ready, LLEN requeue. The queue is drained when done + dead
 * reaches N. Kill i (1..KILLS) is due once done + dead >= i * N / (KILLS + 1),
 * so the kills are spread evenly over the jobs; it goes to a worker whose
 * processing list ferry:{QUEUE}:proc:<master id>.<pid> is not empty (a
 * batch in flight), whose parent is FERRYD_PID and which has a child
 * process (its exec handler is running); the helper then waits
 * until that list is gone (the master reclaimed it) before it polls on.
 * Prints one line, wall clock times in microseconds since the epoch
 * (CLOCK_REALTIME, the clock of bash's $EPOCHREALTIME):
 *
 *   first_ack last_kill empty drained kills done dead
 *
 * first_ack: done + dead first above 0; last_kill: when the last SIGKILL
 * was sent (0 without kills); empty: the first poll after the last kill (or
 * after the start, without kills) that found ready and requeue both empty;
 * drained: done + dead >= N.
 * Exit status: 0 drained, 1 timeout (default 900 s), 2 usage or error.
 * Built by scripts/bench: gcc -O2 drain_kill.c $(pkg-config --cflags --libs hiredis) */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>

#include <hiredis.h>

static redisContext *rc;

static long long
now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void
fail(const char *what, redisReply *r)
{
	fprintf(stderr, "drain_kill: %s: %s\n", what,
	    r == NULL ? rc->errstr : r->type == REDIS_REPLY_ERROR ? r->str :
	    "unexpected reply");
	exit(2);
}

static long long
int_of(redisReply *r)
{
	if (r->type == REDIS_REPLY_INTEGER)
		return r->integer;
	if (r->type == REDIS_REPLY_STRING)
		return atoll(r->str);
	return 0;
}

/* Parent pid of pid from /proc, or -1. */
static long
ppid_of(long pid)
{
	char path[64], buf[512], *p;
	FILE *f;
	long pp = -1;

	snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
	if ((f = fopen(path, "r")) == NULL)
		return -1;
	if (fgets(buf, sizeof(buf), f) != NULL && (p = strrchr(buf, ')')) != NULL)
		sscanf(p + 1, " %*c %ld", &pp);
	fclose(f);
	return pp;
}

/* Whether pid has a child process (a worker's: its exec handler). */
static int
has_child(long pid)
{
	char path[64];
	FILE *f;
	int c = EOF;

	snprintf(path, sizeof(path), "/proc/%ld/task/%ld/children", pid, pid);
	if ((f = fopen(path, "r")) == NULL)
		return 0;
	c = fgetc(f);
	fclose(f);
	return c != EOF;
}

/* Kill one worker of ferryd that holds a batch: the time of the SIGKILL
 * (its list is reclaimed when this returns), or 0: no such worker now. */
static long long
kill_one(const char *q, long ferryd)
{
	redisReply *keys = redisCommand(rc, "KEYS ferry:{%s}:proc:*", q);
	long long done = 0;

	if (keys == NULL || keys->type != REDIS_REPLY_ARRAY)
		fail("KEYS", keys);
	for (size_t i = 0; i < keys->elements && !done; i++) {
		const char *key = keys->element[i]->str, *dot = strrchr(key, '.');
		long pid = dot ? atol(dot + 1) : 0;
		redisReply *r;

		if (pid <= 1 || ppid_of(pid) != ferryd || !has_child(pid))
			continue;
		if ((r = redisCommand(rc, "LLEN %s", key)) == NULL)
			fail("LLEN", r);
		long long len = int_of(r);
		freeReplyObject(r);
		if (len == 0)
			continue;
		long long tk = now_us();
		if (kill((pid_t)pid, SIGKILL) == -1) {
			if (errno == ESRCH)
				continue;
			fprintf(stderr, "drain_kill: kill %ld: %s\n", pid, strerror(errno));
			exit(2);
		}
		done = tk;
		/* the master reclaims the list: wait until it is gone */
		long long until = now_us() + 10000000;
		for (;;) {
			if ((r = redisCommand(rc, "EXISTS %s", key)) == NULL)
				fail("EXISTS", r);
			long long e = int_of(r);
			freeReplyObject(r);
			if (e == 0)
				break;
			if (now_us() > until) {
				fprintf(stderr, "drain_kill: %s not reclaimed after 10 s\n", key);
				exit(2);
			}
			struct timespec p = { 0, 200000 };
			nanosleep(&p, NULL);
		}
	}
	freeReplyObject(keys);
	return done;
}

int
main(int argc, char **argv)
{
	if (argc < 7 || argc > 8) {
		fprintf(stderr, "usage: drain_kill HOST PORT QUEUE FERRYD_PID N KILLS [TIMEOUT_S]\n");
		return 2;
	}
	const char *q = argv[3];
	long ferryd = atol(argv[4]);
	long long n = atoll(argv[5]), kills = atoll(argv[6]), killed = 0;
	long long deadline = now_us() + (argc > 7 ? atoll(argv[7]) : 900) * 1000000;
	long long first = 0, last_kill = 0, empty = 0;
	struct timeval tv = { 30, 0 };
	struct timespec pause = { 0, 1000000 };   /* 1 ms */

	if (n <= 0 || kills < 0 || ferryd <= 1) {
		fprintf(stderr, "drain_kill: bad N, KILLS or FERRYD_PID\n");
		return 2;
	}
	rc = redisConnectWithTimeout(argv[1], atoi(argv[2]), tv);
	if (rc == NULL || rc->err) {
		fprintf(stderr, "drain_kill: redis: %s\n", rc ? rc->errstr : "out of memory");
		return 2;
	}
	for (;;) {
		redisReply *r[3];
		redisAppendCommand(rc, "HMGET ferry:{%s}:stats done dead", q);
		redisAppendCommand(rc, "LLEN ferry:{%s}:ready", q);
		redisAppendCommand(rc, "LLEN ferry:{%s}:requeue", q);
		for (int i = 0; i < 3; i++)
			if (redisGetReply(rc, (void **)&r[i]) != REDIS_OK)
				fail("poll", NULL);
		if (r[0]->type != REDIS_REPLY_ARRAY || r[0]->elements != 2)
			fail("HMGET", r[0]);
		long long t = now_us();
		long long d = int_of(r[0]->element[0]), dd = int_of(r[0]->element[1]);
		long long waiting = int_of(r[1]) + int_of(r[2]);
		for (int i = 0; i < 3; i++)
			freeReplyObject(r[i]);
		if (d + dd > 0 && first == 0)
			first = t;
		if (waiting == 0 && empty == 0 && killed == kills && first != 0)
			empty = t;
		if (d + dd >= n) {
			if (empty == 0)
				empty = t;
			printf("%lld %lld %lld %lld %lld %lld %lld\n", first, last_kill,
			    empty, t, killed, d, dd);
			return 0;
		}
		if (t > deadline) {
			fprintf(stderr, "drain_kill: done %lld + dead %lld of %lld, %lld kills: timeout\n",
			    d, dd, n, killed);
			return 1;
		}
		if (killed < kills && d + dd >= (killed + 1) * n / (kills + 1)) {
			long long tk = kill_one(q, ferryd);
			if (tk != 0) {
				killed++;
				last_kill = tk;
				continue;
			}
		}
		nanosleep(&pause, NULL);
	}
}
