/* produce.c - `chaos_helper produce ...`: the producers of a chaos run
 * (and produce_cache.c, `produce-cache ...`).
 * Every 100 ms one LPUSH of good jobs onto each queue's ready list, and at
 * the plan's times a hostile element between them. Good jobs:
 *   pg:   {"id":"p-N","data":{"job_id":"p-N","n":N,"pad":"..."}}, and every
 *         50th a row the table refuses ("pb-N", n is not an integer): it
 *         must end dead;
 *   exec: {"id":"e-N","data":{"n":N}}, every 25th "ef-N" which the handler
 *         retries on its first attempt.
 * The ledger gets a line per job: "a ID" once Redis acknowledged its LPUSH
 * (appendfsync always: it is on disk), "u ID" when the reply was lost (the
 * job may or may not be in Redis), and "h KIND QUEUE a|u" per hostile one.
 * Only acknowledged jobs may be missed by the checker.
 *
 * With sentinels=P1,P2,P3 master=NAME replicas=N (scripts/chaos --failover)
 * it pushes to the primary the sentinels name and, on the same connection
 * (WAIT only counts that connection's writes), sends WAIT N wait_ms after
 * every LPUSH: "a ID" only once N replicas have the job, "r ID" when Redis
 * acknowledged the LPUSH but fewer replicas did in time (a failover may
 * lose it: "may be lost").
 *
 * Arguments: redis=PORT plan=FILE ledger=FILE seconds=S t0_ms=EPOCH_MS
 * pg_rate=N exec_rate=N (jobs/s) pgq=NAME execq=NAME prefix=P
 * max_job_bytes=N; with mledger=FILE up_rate=N tb_rate=N seed=N keys=N
 * upq=NAME tbq=NAME also the upsert and two-table queues' jobs (modes.c),
 * their ledger lines in mledger.
 *
 * produce-cache: the postgres queue's jobs whose rows wait in cache keys,
 * pushed by `ferryctl enqueue` as an application pushes them (below). */
#include "chaos.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

struct producer {
	redisContext *c;
	int port;
	FILE *ledger;
	const char *prefix, *pgq, *execq;
	long long max_job_bytes;
	const char *sentinels, *master;
	long long replicas, wait_ms;
	char ready[4][160];            /* [0] pg, [1] exec, [2] up, [3] tb */
	struct chaos_buf last_good[2]; /* the last good document pushed */
	long long next_id;
	long long hostile_n;
	struct chaos_modes modes;      /* the jobs of [2] and [3] */
	FILE *mledger;                 /* their ledger */
};

static void
reconnect(struct producer *p)
{
	if (p->c != NULL && p->c->err == 0)
		return;
	if (p->c != NULL)
		redisFree(p->c);
	p->c = p->sentinels != NULL ?
	    chaos_redis_primary(p->sentinels, p->master, 2000, NULL) :
	    chaos_redis(p->port, 2000);
}

/* WAIT for the replicas on the connection of the push: 1 if enough of
 * them acknowledged, 0 if not. */
static int
wait_replicas(struct producer *p)
{
	redisReply *r = redisCommand(p->c, "WAIT %lld %lld", p->replicas,
	    p->wait_ms);
	int ok = r != NULL && r->type == REDIS_REPLY_INTEGER &&
	    r->integer >= p->replicas;
	if (r == NULL && p->c->err == 0)
		p->c->err = REDIS_ERR_IO;
	if (r != NULL)
		freeReplyObject(r);
	return ok;
}

/* LPUSH n elements; 1 acknowledged, 0 unknown (sent, no reply), -1 not
 * sent (no connection, LOADING), 2 acknowledged by Redis but not by the
 * replicas (with sentinels=). */
static int
lpush(struct producer *p, int q, int n, const char **els, const size_t *lens)
{
	const char **argv = malloc(((size_t)n + 2) * sizeof(*argv));
	size_t *argl = malloc(((size_t)n + 2) * sizeof(*argl));
	int ok = 0;
	if (argv == NULL || argl == NULL)
		chaos_die("out of memory");
	argv[0] = "LPUSH";
	argl[0] = 5;
	argv[1] = p->ready[q];
	argl[1] = strlen(p->ready[q]);
	for (int i = 0; i < n; i++) {
		argv[i + 2] = els[i];
		argl[i + 2] = lens[i];
	}
	reconnect(p);
	if (p->c == NULL)
		ok = -1;
	else {
		redisReply *r = redisCommandArgv(p->c, n + 2, argv, argl);
		ok = r != NULL && r->type == REDIS_REPLY_INTEGER;
		if (r == NULL && p->c->err == 0)
			p->c->err = REDIS_ERR_IO;
		if (r != NULL && !ok) {
			/* an error reply (OOM): nothing went in, but count it
			 * as unknown rather than assume; LOADING (Redis reads
			 * its AOF: the churn's data make that seconds) runs
			 * nothing: the same jobs again */
			if (strncmp(r->str, "LOADING", 7) == 0)
				ok = -1;
			else
				fprintf(stderr, "chaos produce: LPUSH: %.200s\n", r->str);
		}
		if (r != NULL)
			freeReplyObject(r);
		if (ok && p->sentinels != NULL && !wait_replicas(p))
			ok = 2;
		/* --failover: an error reply (READONLY of a demoted primary)
		 * or a WAIT short of replicas: ask the sentinels again */
		if (p->sentinels != NULL && ok != 1 && p->c->err == 0)
			p->c->err = REDIS_ERR_OTHER;
	}
	free(argv);
	free(argl);
	return ok;
}

/* Push n good jobs onto queue q; returns how many were sent. */
static int
good_jobs(struct producer *p, int q, int n)
{
	struct chaos_buf docs[64];
	const char *els[64];
	size_t lens[64];
	char ids[64][32], tails[64][64];
	if (n > 64)
		n = 64;
	for (int i = 0; i < n; i++) {
		long long id = q < 2 ? ++p->next_id : 0;
		memset(&docs[i], 0, sizeof(docs[i]));
		if (q >= 2) {
			chaos_modes_job(&p->modes, q - 2, ids[i], sizeof(ids[i]),
			    &docs[i], tails[i], sizeof(tails[i]));
		} else if (q == 0) {
			int bad = id % 50 == 0;
			snprintf(ids[i], sizeof(ids[i]), "%s-%lld", bad ? "pb" : "p", id);
			chaos_buf_printf(&docs[i], "{\"id\":\"%s\",\"data\":{\"job_id\":"
			    "\"%s\",\"n\":%s%lld%s,\"pad\":\"caf\xc3\xa9 \xe2\x82\xac "
			    "\xf0\x9d\x84\x9e %0*lld\"}}", ids[i], ids[i],
			    bad ? "\"x" : "", id, bad ? "\"" : "", (int)(id % 40), id);
		} else {
			int flaky = id % 25 == 0;
			snprintf(ids[i], sizeof(ids[i]), "%s-%lld", flaky ? "ef" : "e", id);
			chaos_buf_printf(&docs[i], "{\"id\":\"%s\",\"data\":{\"n\":%lld}}",
			    ids[i], id);
		}
		els[i] = docs[i].p;
		lens[i] = docs[i].len;
	}
	if (n == 0)
		return 0;
	int ok = lpush(p, q, n, els, lens);
	for (int i = 0; i < n; i++) {
		if (ok < 0) {
			chaos_buf_free(&docs[i]);
			continue;
		}
		if (q >= 2) {
			fprintf(p->mledger, "%c %s %s\n", ok == 1 ? 'a' : ok == 2 ?
			    'r' : 'u', ids[i], tails[i]);
			chaos_buf_free(&docs[i]);
			continue;
		}
		fprintf(p->ledger, "%c %s\n", ok == 1 ? 'a' : ok == 2 ? 'r' : 'u',
		    ids[i]);
		if (i == n - 1 && (q == 1 || strncmp(ids[i], "p-", 2) == 0)) {
			p->last_good[q].len = 0;
			chaos_buf_add(&p->last_good[q], docs[i].p, docs[i].len);
		}
		chaos_buf_free(&docs[i]);
	}
	fflush(p->ledger);
	if (p->mledger != NULL)
		fflush(p->mledger);
	return ok < 0 ? 0 : n;
}

/* A batch key a worker of queue q holds now (from bkeys), or a made-up
 * one; `delta` is added to its sequence number (its last digits). */
static void
batch_key(struct producer *p, int q, long long delta, char *out, size_t size)
{
	snprintf(out, size, "nobody:1:deadbeef:%lld", 5 + delta);
	reconnect(p);
	if (p->c == NULL)
		return;
	char key[200];
	snprintf(key, sizeof(key), "%s:{%s}:bkeys", p->prefix, q ? p->execq : p->pgq);
	redisReply *r = redisCommand(p->c, "HVALS %s", key);
	if (r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements > 0) {
		const char *k = r->element[0]->str;
		size_t len = strlen(k), d = len;
		while (d > 0 && k[d - 1] >= '0' && k[d - 1] <= '9')
			d--;
		long long seq = atoll(k + d) + delta;
		snprintf(out, size, "%.*s%lld", (int)d, k, seq < 0 ? 0 : seq);
	}
	if (r != NULL)
		freeReplyObject(r);
}

static void
nest(struct chaos_buf *b, int depth, const char *open, const char *close,
    const char *inner)
{
	for (int i = 0; i < depth; i++)
		chaos_buf_add(b, open, strlen(open));
	chaos_buf_add(b, inner, strlen(inner));
	for (int i = 0; i < depth; i++)
		chaos_buf_add(b, close, strlen(close));
}

/* Build the hostile element KIND (variant idx) for queue q into b. */
static void
hostile(struct producer *p, int q, const char *kind, long long idx,
    struct chaos_buf *b)
{
	char hid[40], key[200];
	const char *good = p->last_good[q].len ? p->last_good[q].p :
	    "{\"id\":\"h-none\"}";
	snprintf(hid, sizeof(hid), "h-%lld", ++p->hostile_n);
	if (strcmp(kind, "utf8-doc") == 0) {
		chaos_buf_printf(b, "{\"id\":\"%s\",\"data\":{\"job_id\":\"%s\","
		    "\"n\":1,\"pad\":\"\xff\xfe bad \xc3(\xed\xa0\x80\"}}", hid, hid);
	} else if (strcmp(kind, "utf8-raw") == 0) {
		chaos_buf_add(b, "\xc3\x28\xa0\xa1 not json \xff\x00\x01", 17);
	} else if (strcmp(kind, "notjson") == 0) {
		static const char *const v[] = { "", "hello", "{\"id\":\"h-cut\",",
			"null", "[1,2,3]", "{\"id\":\"h-dup\",\"id\":\"h-dup2\"}", "42",
			"{\"data\":{\"job_id\":null}}", };
		const char *s = v[idx % (long long)(sizeof(v) / sizeof(v[0]))];
		chaos_buf_add(b, s, strlen(s));
	} else if (strcmp(kind, "wrap-stamp") == 0 ||
	    strcmp(kind, "wrap-future") == 0) {
		/* the stamp names a batch in flight or just committed, or
		 * (future) the next ones of the same worker; the document is a
		 * copy of a real job: trusting it could ack that job unwritten
		 * or write it twice */
		int future = kind[5] == 'f';
		batch_key(p, q, future ? 1 + idx % 3 : -(idx % 2), key, sizeof(key));
		chaos_buf_printf(b, "{\"ferry\":1,\"recoveries\":%lld,\"attempts\":0,"
		    "\"batch\":\"%s\",\"job\":%s}", 1 + idx % 2, key, good);
	} else if (strcmp(kind, "wrap-noattempts") == 0) {
		chaos_buf_printf(b, "{\"ferry\":1,\"recoveries\":1,\"job\":%s}", good);
	} else if (strcmp(kind, "wrap-nojob") == 0) {
		batch_key(p, q, 0, key, sizeof(key));
		chaos_buf_printf(b, "{\"ferry\":1,\"recoveries\":1,\"attempts\":0,"
		    "\"batch\":\"%s\"}", key);
	} else if (strcmp(kind, "wrap-badattempts") == 0) {
		chaos_buf_printf(b, "{\"ferry\":1,\"recoveries\":1,\"attempts\":\"x\","
		    "\"job\":%s}", good);
	} else if (strcmp(kind, "wrap-deep") == 0) {
		chaos_buf_printf(b, "{\"ferry\":1,\"recoveries\":1,\"attempts\":0,"
		    "\"x\":");
		nest(b, 1001 + (int)(idx % 1500), "[", "]", "1");
		chaos_buf_printf(b, ",\"job\":%s}", good);
	} else if (strcmp(kind, "wrap-recovered") == 0) {
		chaos_buf_printf(b, "{\"ferry\":1,\"recoveries\":%lld,\"attempts\":%lld,"
		    "\"job\":%s}", 1 + idx % 5, idx % 3, good);
	} else if (strcmp(kind, "deep-doc") == 0 || strcmp(kind, "deep-doc2") == 0) {
		int depth = kind[8] == '2' ? 3000 + (int)idx : 1001 + (int)idx;
		chaos_buf_printf(b, "{\"id\":\"%s\",\"data\":{\"job_id\":\"%s\","
		    "\"n\":1,\"pad\":", hid, hid);
		nest(b, depth, "{\"a\":", "}", "1");
		chaos_buf_add(b, "}}", 2);
	} else if (strcmp(kind, "huge") == 0) {
		long long n = p->max_job_bytes * (1 + idx % 4) + 1000;
		chaos_buf_printf(b, "{\"id\":\"%s\",\"data\":{\"job_id\":\"%s\","
		    "\"n\":1,\"pad\":\"", hid, hid);
		char chunk[4096];
		memset(chunk, 'x', sizeof(chunk));
		for (long long i = 0; i < n; i += (long long)sizeof(chunk))
			chaos_buf_add(b, chunk, sizeof(chunk));
		chaos_buf_add(b, "\"}}", 3);
	} else if (strcmp(kind, "cache-foreign") == 0) {
		int nk = 0;
		while (chaos_foreign_keys[nk] != NULL)
			nk++;
		chaos_buf_printf(b, "{\"id\":\"%s\",\"cache_key\":\"%s\"}", hid,
		    chaos_foreign_keys[idx % nk]);
	} else if (strcmp(kind, "cache-ferry") == 0) {
		/* ferry's own lists: deleting one after "success" loses jobs */
		static const char *const which[] = { "ready", "dead", "stats",
			"owners", "delayed", "bkeys" };
		const char *other = (idx / 6) % 2 ? p->execq : p->pgq;
		chaos_buf_printf(b, "{\"id\":\"%s\",\"cache_key\":\"%s:{%s}:%s\"}",
		    hid, p->prefix, other, which[idx % 6]);
	} else { /* id-weird */
		static const char *const v[] = {
			"{\"id\":123,\"data\":{\"job_id\":\"h-num\",\"n\":1}}",
			"{\"id\":{\"a\":1},\"data\":{\"job_id\":\"h-obj\",\"n\":1}}",
			"{\"id\":\"h-nl\\nok e-1\",\"data\":{\"job_id\":\"h-nl\",\"n\":1}}",
			"{\"id\":\"h-\xff\xfe\",\"data\":{\"job_id\":\"h-bad\",\"n\":1}}",
			"{\"id\":\"\",\"data\":{\"job_id\":\"h-empty\",\"n\":1}}",
			"{\"id\":\"h-q\\\" \\\\ \\u0000\",\"data\":{\"job_id\":\"h-q\",\"n\":1}}",
		};
		if (idx % 7 == 6) {
			chaos_buf_printf(b, "{\"id\":\"h-long-");
			for (int i = 0; i < 5000; i++)
				chaos_buf_add(b, "\xc3\xa9", 2);
			chaos_buf_printf(b, "\",\"data\":{\"job_id\":\"h-long\",\"n\":1}}");
		} else {
			chaos_buf_add(b, v[idx % 7], strlen(v[idx % 7]));
		}
	}
}

static void
push_hostile(struct producer *p, const char *line)
{
	char qn[16], kind[32];
	long long ms, idx;
	if (sscanf(line, "%lld hostile %15s %31s %lld", &ms, qn, kind, &idx) != 4)
		return;
	int q = strcmp(qn, "exec") == 0;
	struct chaos_buf b = { 0 };
	hostile(p, q, kind, idx, &b);
	const char *el = b.p ? b.p : "";
	int ok = lpush(p, q, 1, &el, &b.len);
	fprintf(p->ledger, "h %s %s %c\n", kind, qn, ok == 1 ? 'a' : ok == 2 ?
	    'r' : ok ? 'n' : 'u');
	fflush(p->ledger);
	chaos_buf_free(&b);
}

int
chaos_produce_main(int argc, char **argv)
{
	struct producer p = { 0 };
	p.port = (int)chaos_arg_ll(argc, argv, "redis", 0);
	p.prefix = chaos_arg(argc, argv, "prefix", "ferry");
	p.pgq = chaos_arg(argc, argv, "pgq", "chaos_pg");
	p.execq = chaos_arg(argc, argv, "execq", "chaos_exec");
	p.max_job_bytes = chaos_arg_ll(argc, argv, "max_job_bytes", 65536);
	p.sentinels = chaos_arg(argc, argv, "sentinels", NULL);
	p.master = chaos_arg(argc, argv, "master", "ferry");
	p.replicas = chaos_arg_ll(argc, argv, "replicas", 2);
	p.wait_ms = chaos_arg_ll(argc, argv, "wait_ms", 500);
	long long seconds = chaos_arg_ll(argc, argv, "seconds", 60);
	long long t0 = chaos_arg_ll(argc, argv, "t0_ms", chaos_epoch_ms());
	long long rate[4] = { chaos_arg_ll(argc, argv, "pg_rate", 100),
		chaos_arg_ll(argc, argv, "exec_rate", 50),
		chaos_arg_ll(argc, argv, "up_rate", 0),
		chaos_arg_ll(argc, argv, "tb_rate", 0) };
	const char *mledger = chaos_arg(argc, argv, "mledger", NULL);
	int nq = mledger != NULL && (rate[2] > 0 || rate[3] > 0) ? 4 : 2;
	const char *plan = chaos_arg(argc, argv, "plan", NULL);
	const char *ledger = chaos_arg(argc, argv, "ledger", NULL);
	if (plan == NULL || ledger == NULL || (p.port <= 0 && p.sentinels == NULL))
		chaos_die("produce: needs redis=PORT plan=FILE ledger=FILE");
	FILE *pf = fopen(plan, "r");
	p.ledger = fopen(ledger, "a");
	if (pf == NULL || p.ledger == NULL)
		chaos_die("produce: cannot open %s or %s", plan, ledger);
	snprintf(p.ready[0], sizeof(p.ready[0]), "%s:{%s}:ready", p.prefix, p.pgq);
	snprintf(p.ready[1], sizeof(p.ready[1]), "%s:{%s}:ready", p.prefix, p.execq);
	if (nq == 4) {
		p.mledger = fopen(mledger, "a");
		if (p.mledger == NULL)
			chaos_die("produce: cannot open %s", mledger);
		snprintf(p.ready[2], sizeof(p.ready[2]), "%s:{%s}:ready", p.prefix,
		    chaos_arg(argc, argv, "upq", "chaos_up"));
		snprintf(p.ready[3], sizeof(p.ready[3]), "%s:{%s}:ready", p.prefix,
		    chaos_arg(argc, argv, "tbq", "chaos_tb"));
		chaos_modes_init(&p.modes, (uint64_t)chaos_arg_ll(argc, argv,
		    "seed", 1), chaos_arg_ll(argc, argv, "keys", 500));
	}

	char line[256] = "";
	int have_line = fgets(line, sizeof(line), pf) != NULL;
	long long pushed[4] = { 0, 0, 0, 0 };
	for (;;) {
		long long now = chaos_epoch_ms() - t0;
		if (now >= seconds * 1000)
			break;
		while (have_line && atoll(line) <= now) {
			if (strstr(line, " hostile ") != NULL)
				push_hostile(&p, line);
			have_line = fgets(line, sizeof(line), pf) != NULL;
		}
		/* keep to the rate over the whole run: after an outage the
		 * backlog goes in at up to 64 jobs a push */
		for (int q = 0; q < nq; q++) {
			long long n = rate[q] * now / 1000 - pushed[q];
			pushed[q] += good_jobs(&p, q, n > 64 ? 64 : (int)n);
		}
		long long spent = chaos_epoch_ms() - t0 - now;
		chaos_sleep_ms(spent >= 90 ? 10 : (long)(100 - spent));
	}
	fclose(pf);
	fclose(p.ledger);
	if (p.mledger != NULL)
		fclose(p.mledger);
	chaos_modes_free(&p.modes);
	if (p.c != NULL)
		redisFree(p.c);
	chaos_buf_free(&p.last_good[0]);
	chaos_buf_free(&p.last_good[1]);
	return 0;
}

