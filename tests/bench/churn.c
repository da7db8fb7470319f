/* churn.c - benchmark helper of scripts/bench (cache): an application
 * cache that churns, SETting values with a TTL under random keys as fast
 * as Redis takes them, pipelined.
 *
 *   churn HOST PORT PREFIX VALUE_BYTES TTL_MS PIPELINE KEYSPACE
 *
 * Sends, in rounds of PIPELINE commands, SET PREFIX<n> <VALUE_BYTES bytes>
 * PX TTL_MS with n random in [0, KEYSPACE), until it is killed (the SETs
 * served and refused are Redis' INFO commandstats, cmdstat_set). Prints
 * the first SET Redis refused (e.g. OOM: nothing left to evict) on stderr,
 * once. Exit 2: usage, or the connection failed.
 * (redis-benchmark 7.0 does not fill __data__ in a command of its own, so
 * it cannot send SET ... PX with a value of a given size.)
 * Built by scripts/bench: gcc -O2 churn.c $(pkg-config --cflags --libs hiredis) */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <hiredis.h>

static uint64_t
next_rand(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

int
main(int argc, char **argv)
{
	if (argc != 8) {
		fprintf(stderr, "usage: churn HOST PORT PREFIX VALUE_BYTES TTL_MS "
		    "PIPELINE KEYSPACE\n");
		return 2;
	}
	const char *prefix = argv[3];
	long vbytes = atol(argv[4]), pipeline = atol(argv[6]);
	unsigned long long keyspace = strtoull(argv[7], NULL, 10);
	if (vbytes < 1 || pipeline < 1 || keyspace < 1 || atol(argv[5]) < 1) {
		fprintf(stderr, "churn: VALUE_BYTES, TTL_MS, PIPELINE and KEYSPACE "
		    "must be positive\n");
		return 2;
	}
	struct timeval tv = { 5, 0 };
	redisContext *rc = redisConnectWithTimeout(argv[1], atoi(argv[2]), tv);
	if (rc == NULL || rc->err) {
		fprintf(stderr, "churn: redis: %s\n", rc ? rc->errstr : "out of memory");
		return 2;
	}
	char *value = malloc((size_t)vbytes);
	char key[256];
	bool said = false;
	uint64_t seed = (uint64_t)time(NULL) * 2654435761u ^ (uint64_t)getpid();

	if (value == NULL)
		return 2;
	memset(value, 'x', (size_t)vbytes);
	if (seed == 0)
		seed = 1;
	for (;;) {
		for (long i = 0; i < pipeline; i++) {
			int n = snprintf(key, sizeof(key), "%s%llu", prefix,
			    (unsigned long long)(next_rand(&seed) % keyspace));
			const char *av[] = { "SET", key, value, "PX", argv[5] };
			size_t al[] = { 3, (size_t)n, (size_t)vbytes, 2,
			    strlen(argv[5]) };
			redisAppendCommandArgv(rc, 5, av, al);
		}
		for (long i = 0; i < pipeline; i++) {
			redisReply *r;
			if (redisGetReply(rc, (void **)&r) != REDIS_OK) {
				fprintf(stderr, "churn: redis: %s\n", rc->errstr);
				return 2;
			}
			if (r->type == REDIS_REPLY_ERROR && !said) {
				fprintf(stderr, "churn: SET refused: %s\n", r->str);
				said = true;
			}
			freeReplyObject(r);
		}
	}
}
