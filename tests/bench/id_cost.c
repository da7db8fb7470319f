/* id_cost.c - what holding one id costs Redis, whatever structure holds it:
 * the floor under any idempotency check that remembers ids one by one.
 * Used by `scripts/bench idem cost` (scripts/bench.d/idem.sh).
 *
 *   id_cost PORT REPS CALLS
 *
 * Against the redis-server on 127.0.0.1:PORT (flushed first), for 100,000
 * and then 1,000,000 ids held: CALLS calls of one EVALSHA with 1,000 new
 * ids (10-byte-ish, like ferry's), each call followed by an untimed EVAL
 * that removes exactly those ids again, so the structure keeps its size.
 * Redis' own time is read from INFO commandstats (evalsha usec after
 * CONFIG RESETSTAT), REPS runs per structure taking turns; the median is
 * printed, in microseconds per id, as markdown rows:
 *
 *   plain    the script with no id work (an HINCRBY, as enqueue.lua's
 *            call counter): what every variant pays
 *   zset     ZADD NX of every id with one score, ZMSCORE only when fewer
 *            were added (what enqueue.lua does)
 *   hash     HMGET of the ids, then HSET of the new ones
 *   set      SADD (holds no state: cannot serve --wait)
 *   lpush    LPUSH of 1,000 100-byte documents: the push itself
 *
 * and the bytes per id each structure holds (used_memory before and after
 * it was filled). */
#define _POSIX_C_SOURCE 200809L
#include <hiredis/hiredis.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BATCH 1000
#define REPS_MAX 15

struct variant {
	const char *name, *what, *key, *script, *cleanup;
	char sha[41];
	double us[REPS_MAX];
};

#define PRELUDE "redis.call('HINCRBY', KEYS[1], 'calls', 1) " \
	"local n = #ARGV - 1 "

static struct variant variants[] = {
	{ "plain", "the script, no id work", "none",
	  PRELUDE "return n", NULL, "", { 0 } },
	{ "zset", "`ZADD NX`, `ZMSCORE` if some were held (ferry's)", "ids_z",
	  PRELUDE "local t = {} for i = 1, n do t[2 * i - 1] = ARGV[1] "
	  "t[2 * i] = ARGV[i + 1] end "
	  "local added = redis.call('ZADD', KEYS[2], 'NX', unpack(t)) "
	  "if added < n then redis.call('ZMSCORE', KEYS[2], unpack(ARGV, 2)) "
	  "end return added",
	  "return redis.call('ZREM', KEYS[1], unpack(ARGV, 2))", "", { 0 } },
	{ "hash", "`HMGET`, then `HSET` of the new ones", "ids_h",
	  PRELUDE "local held = redis.call('HMGET', KEYS[2], unpack(ARGV, 2)) "
	  "local t = {} for i = 1, n do if not held[i] then "
	  "t[#t + 1] = ARGV[i + 1] t[#t + 1] = ARGV[1] end end "
	  "if #t > 0 then redis.call('HSET', KEYS[2], unpack(t)) end "
	  "return #t / 2",
	  "return redis.call('HDEL', KEYS[1], unpack(ARGV, 2))", "", { 0 } },
	{ "set", "`SADD` (no state: cannot serve --wait)", "ids_s",
	  PRELUDE "return redis.call('SADD', KEYS[2], unpack(ARGV, 2))",
	  "return redis.call('SREM', KEYS[1], unpack(ARGV, 2))", "", { 0 } },
	{ "lpush", "`LPUSH` of 1,000 100-byte documents (the push)", "jobs",
	  PRELUDE "return redis.call('LPUSH', KEYS[2], unpack(ARGV, 2))",
	  "return redis.call('DEL', KEYS[1])", "", { 0 } },
};
#define NVARIANTS (int)(sizeof(variants) / sizeof(variants[0]))

static redisContext *rc;
static char ids[BATCH][32], docs[BATCH][101], score[32];
static const char *argv_[BATCH + 8];
static size_t lens[BATCH + 8];

static redisReply *
ask(int argc, const char **argv, const size_t *len)
{
	redisReply *r = redisCommandArgv(rc, argc, argv, len);

	if (r == NULL || r->type == REDIS_REPLY_ERROR) {
		fprintf(stderr, "id_cost: %s: %s\n", argv[0],
		    r != NULL ? r->str : rc->errstr);
		exit(1);
	}
	return r;
}

static redisReply *
cmd(const char *text)
{
	const char *argv[8];
	size_t len[8];
	char buf[256], *save = NULL;
	int n = 0;

	snprintf(buf, sizeof(buf), "%s", text);
	for (char *w = strtok_r(buf, " ", &save); w != NULL && n < 8;
	    w = strtok_r(NULL, " ", &save)) {
		argv[n] = w;
		len[n++] = strlen(w);
	}
	return ask(n, argv, len);
}

static long long
info_number(const char *section, const char *field)
{
	char q[64];
	redisReply *r;
	long long v = 0;

	snprintf(q, sizeof(q), "INFO %s", section);
	r = cmd(q);
	const char *p = strstr(r->str, field);
	if (p != NULL)
		sscanf(p + strlen(field), "%lld", &v);
	freeReplyObject(r);
	return v;
}

/* Ids unlike the held ones: fresh per call. */
static void
next_batch(void)
{
	static long long seq = 900000000LL, call;

	for (int i = 0; i < BATCH; i++, seq++)
		snprintf(ids[i], sizeof(ids[i]), "j%09lld", seq);
	snprintf(score, sizeof(score), "%.17g", (double)++call * 0x1p-52);
}

/* VERB SCRIPT NKEYS [cfg] KEY score items...: the items are this call's
 * ids, or 100-byte documents (lpush). The cleanup scripts take KEY only. */
static int
script_args(const char *verb, const char *script, bool cleanup,
    const char *key, bool docs_not_ids)
{
	int n = 0;

	argv_[n++] = verb;
	argv_[n++] = script;
	argv_[n++] = cleanup ? "1" : "2";
	if (!cleanup)
		argv_[n++] = "cfg";
	argv_[n++] = key;
	argv_[n++] = score;
	for (int i = 0; i < BATCH; i++)
		argv_[n++] = docs_not_ids ? docs[i] : ids[i];
	for (int i = 0; i < n; i++)
		lens[i] = strlen(argv_[i]);
	return n;
}

/* The ids 1..n held by key (ZADD / HSET / SADD), added from `from` on. */
static void
fill(const struct variant *v, long from, long to)
{
	static const char *const verbs[] = { "ZADD", "HSET", "SADD" };
	int which = strcmp(v->name, "zset") == 0 ? 0 :
	    strcmp(v->name, "hash") == 0 ? 1 : 2;
	static char buf[BATCH][32];
	const char *argv[2 * BATCH + 2];
	size_t len[2 * BATCH + 2];

	for (long f = from; f < to; f += BATCH) {
		int n = 0;
		argv[n++] = verbs[which];
		argv[n++] = v->key;
		for (long i = f; i < f + BATCH && i < to; i++) {
			char *id = buf[i - f];
			snprintf(id, sizeof(buf[0]), "j%09ld", i + 1);
			if (which != 2)
				argv[n++] = which == 0 ? "1700000000000" : id;
			argv[n++] = which == 0 ? id : which == 1 ? "0.5" : id;
		}
		for (int i = 0; i < n; i++)
			len[i] = strlen(argv[i]);
		freeReplyObject(ask(n, argv, len));
	}
}

static int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static double
median(const double *v, int n)
{
	double s[REPS_MAX];

	memcpy(s, v, sizeof(*v) * (size_t)n);
	qsort(s, (size_t)n, sizeof(*s), cmp_double);
	return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

/* CALLS calls of variant v; Redis' microseconds per id. */
static double
run(struct variant *v, int calls)
{
	static const char stat[] = "cmdstat_evalsha:calls=";
	bool push = strcmp(v->name, "lpush") == 0;
	long long counted = 0, usec = 0;

	freeReplyObject(cmd("CONFIG RESETSTAT"));
	for (int k = 0; k < calls; k++) {
		next_batch();
		int n = script_args("EVALSHA", v->sha, false, v->key, push);
		freeReplyObject(ask(n, argv_, lens));
		if (v->cleanup != NULL) {
			n = script_args("EVAL", v->cleanup, true, v->key, push);
			freeReplyObject(ask(n, argv_, lens));
		}
	}
	redisReply *r = cmd("INFO commandstats");
	const char *p = strstr(r->str, stat);
	if (p != NULL)
		sscanf(p + strlen(stat), "%lld,usec=%lld", &counted, &usec);
	freeReplyObject(r);
	if (counted != calls) {
		fprintf(stderr, "id_cost: %lld EVALSHA counted, %d sent\n",
		    counted, calls);
		exit(1);
	}
	return (double)usec / calls / BATCH;
}

int
main(int argc, char **argv)
{
	static const long sizes[] = { 100000, 1000000 };
	double bytes[NVARIANTS] = { 0 };
	long held = 0;

	if (argc != 4) {
		fprintf(stderr, "usage: id_cost PORT REPS CALLS\n");
		return 64;
	}
	int reps = atoi(argv[2]), calls = atoi(argv[3]);
	if (reps < 1 || reps > REPS_MAX || calls < 1) {
		fprintf(stderr, "id_cost: REPS 1..%d, CALLS > 0\n", REPS_MAX);
		return 64;
	}
	rc = redisConnect("127.0.0.1", atoi(argv[1]));
	if (rc == NULL || rc->err) {
		fprintf(stderr, "id_cost: cannot connect to 127.0.0.1:%s\n",
		    argv[1]);
		return 1;
	}
	for (int i = 0; i < BATCH; i++) {
		memset(docs[i], 'x', 100);
		docs[i][100] = '\0';
	}
	freeReplyObject(cmd("FLUSHALL"));
	for (int v = 0; v < NVARIANTS; v++) {
		const char *load[] = { "SCRIPT", "LOAD", variants[v].script };
		size_t len[] = { 6, 4, strlen(variants[v].script) };
		redisReply *r = ask(3, load, len);
		snprintf(variants[v].sha, sizeof(variants[v].sha), "%s", r->str);
		freeReplyObject(r);
	}
	for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		for (int v = 1; v <= 3; v++) {
			long long before = info_number("memory", "used_memory:");
			fill(&variants[v], held, sizes[s]);
			bytes[v] = (double)(info_number("memory", "used_memory:") -
			    before) / (double)(sizes[s] - held);
		}
		held = sizes[s];
		for (int v = 0; v < NVARIANTS; v++)
			for (int w = 0; w < 10; w++)
				run(&variants[v], 2);       /* warm up */
		for (int rep = 0; rep < reps; rep++)
			for (int k = 0; k < NVARIANTS; k++) {
				struct variant *v = &variants[(k + rep) % NVARIANTS];
				v->us[rep] = run(v, calls);
			}
		double plain = median(variants[0].us, reps);
		for (int v = 0; v < NVARIANTS; v++) {
			double m = median(variants[v].us, reps);
			printf("| %ld | %s | %s | %.3f | %.3f | ", held,
			    variants[v].name, variants[v].what, m, m - plain);
			if (v >= 1 && v <= 3)
				printf("%.1f |\n", bytes[v]);
			else
				printf("– |\n");
		}
	}
	redisFree(rc);
	return 0;
}
