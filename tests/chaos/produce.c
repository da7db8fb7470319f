/* produce.c - `chaos_helper produce ...`: the producer of good jobs and of
 * the plan's hostile elements in a chaos run (produce_cache.c,
 * `produce-cache ...`, sends the cached jobs through ferryctl).
 *
 * Good jobs go in the way a producer of ferry sends them: through ferry's
 * enqueue script (the build's gen/lua/enqueue.lua, enqueue_lua=FILE, by
 * EVALSHA as clients/python and clients/node call it), with the option
 * "ids" and each job's own id (ARGV: max_job_bytes, memory_refuse_percent
 * 90, 1, "ids", then per job the document, 0, "", "", the id), onto queues
 * that keep ids (idempotency_window): every 100 ms one call a queue, up to
 * 64 jobs. The script in this process, not `ferryctl enqueue` as a
 * subprocess: this producer makes some 40 calls a second (four queues,
 * and the backlog after an outage) and a ferryctl costs about 20 ms of CPU
 * a call on the shared 2-core machine the suite runs on; here each answer
 * is seen whole (which jobs were already accepted, a reply lost), and the
 * resend is this producer's own, bounded by the run's deadline. ferryctl's
 * own resend, and a ferryctl killed mid-call, are produce-cache's part.
 * Good jobs:
 *   pg:   {"id":"p-N","data":{"job_id":"p-N","n":N,"pad":"..."}}, and every
 *         50th a row the table refuses ("pb-N", n is not an integer): it
 *         must end dead;
 *   exec: {"id":"e-N","data":{"n":N}}, every 25th "ef-N" which the handler
 *         retries on its first attempt;
 *   upsert and two-table queues (with mledger=): modes.c.
 *
 * A call whose outcome is unknown (no reply: Redis killed, host a's link
 * to Redis reset, or stalled past the producer's 1 s timeout, after which
 * Redis may still run it; with sentinels also an answer that fewer
 * replicas than asked acknowledged in time) is kept and sent again, whole,
 * with the same ids, until Redis acknowledges it: the jobs it had pushed
 * come back "already accepted", the others are pushed. So is a call that
 * could not be sent or that Redis refused (an error reply: LOADING, OOM,
 * READONLY; NOSCRIPT, after which the script is loaded again: nothing ran).
 * The calls kept go first, oldest first; after one that was not
 * acknowledged the producer pauses (100 ms, doubling up to 2 s) and makes
 * no new jobs until every call kept was acknowledged (then the backlog
 * goes in at up to 64 jobs a call, keeping to the rate over the run).
 * After seconds=S it makes no new jobs and sends the calls kept for
 * resend_s=N more seconds at most: then it names their jobs on stderr and
 * exits 2 (the run fails).
 * A call goes only to a queue that keeps ids (its config hash's
 * idempotency_window, published by ferryd's master): asked before the
 * first call (waiting up to 30 s for ferryd) and again on each new
 * connection; where a queue does not (a failover lost the hash before
 * ferryd published it again) its calls wait.
 *
 * The ledger (mledger for the upsert and two-table queues) gets per job:
 * "a ID" once a call with it was acknowledged (pushed, or already
 * accepted; appendfsync always: it is on disk), "u ID" the first time a
 * call with it got no reply, and, with sentinels, "r ID" when Redis
 * answered but fewer replicas than asked did (a failover may lose it: "may
 * be lost" until a later call of it is acknowledged by the replicas too).
 * A job's best line counts: a, then r, then u. With no fault left every
 * job ends with an "a".
 *
 * Hostile elements (hostile.c builds them): LPUSHed raw, past the script,
 * as a broken producer would (the test of the workers' hostile input;
 * never sent again): ledger line "h KIND QUEUE a|u|r|n" (n: not sent).
 *
 * Forged jobs (the plan's "forge" events): the hostile producer, pushing
 * past the script jobs that carry the ids of live honest jobs or name
 * honest jobs' keys of ferry's own, read from the queue then (forge.c);
 * never sent again: ledger line "f KIND QUEUE f-K TARGET a|u|r", or
 * "f KIND QUEUE - - n" when there was nothing to forge it from.
 *
 * With sentinels=P1,P2,P3 master=NAME replicas=N (scripts/chaos
 * --failover) it calls the primary the sentinels name and, on the same
 * connection (WAIT only counts that connection's writes), sends WAIT N
 * wait_ms after every call; a call whose every job was already accepted
 * wrote nothing, so one small write (SET chaos:producer:fence) comes
 * first: the WAIT then covers the jobs accepted earlier.
 *
 * Arguments: redis=PORT plan=FILE ledger=FILE enqueue_lua=FILE seconds=S
 * t0_ms=EPOCH_MS pg_rate=N exec_rate=N (jobs/s) pgq=NAME execq=NAME
 * prefix=P max_job_bytes=N (of pgq and execq) resend_s=N; with
 * mledger=FILE up_rate=N tb_rate=N seed=N keys=N upq=NAME tbq=NAME also
 * the upsert and two-table queues' jobs (modes.c). At the end one line of
 * KEY=VALUE counters on stdout. */
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

#define CALL_MAX 64             /* jobs a call */
#define PAUSE_FIRST_MS 100
#define PAUSE_MAX_MS 2000
/* connect and reply timeout: a producer's own, shorter than the faults
 * (a stalled link holds a call 1-6 s, then Redis may still run it) */
#define TIMEOUT_MS 1000
#define MODE_MAX_JOB_BYTES 1048576      /* the queues' default */

/* One call of the enqueue script, kept until it is acknowledged. */
struct call {
	int q, n;
	char marked;            /* the last ledger letter written: 0, u, r */
	int sends;
	struct chaos_buf docs[CALL_MAX];
	char ids[CALL_MAX][32];
	char tails[CALL_MAX][64];
};

struct producer {
	redisContext *c;
	int port;
	FILE *ledger;
	const char *prefix, *pgq, *execq;
	long long max_job_bytes;
	const char *sentinels, *master;
	long long replicas, wait_ms;
	const char *qname[4];
	char ready[4][160];            /* [0] pg, [1] exec, [2] up, [3] tb */
	struct chaos_buf last_good[2]; /* the last good document made */
	long long next_id;
	struct chaos_hostile hostile;  /* the hostile elements */
	struct chaos_forger forger;    /* the forged jobs */
	struct chaos_modes modes;      /* the jobs of [2] and [3] */
	FILE *mledger;                 /* their ledger */
	struct chaos_buf script;       /* enqueue.lua */
	char sha[48];                  /* "" until SCRIPT LOAD answered */
	unsigned ids_ok;               /* queues seen keeping ids (bit q) on
	                                * this connection */
	struct call **pend;            /* calls not acknowledged yet */
	size_t npend, cap;
	long long calls, jobs, resends, already, already_calls, no_reply,
	    short_wait, refused, fences;
};

static void
reconnect(struct producer *p)
{
	if (p->c != NULL && p->c->err == 0)
		return;
	if (p->c != NULL)
		redisFree(p->c);
	p->ids_ok = 0;
	p->c = p->sentinels != NULL ?
	    chaos_redis_primary(p->sentinels, p->master, TIMEOUT_MS, NULL) :
	    chaos_redis(p->port, TIMEOUT_MS);
}

/* A reply that did not come: the connection is no good any more. */
static void
lost(struct producer *p, redisReply *r)
{
	if (r == NULL && p->c->err == 0)
		p->c->err = REDIS_ERR_IO;
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
	lost(p, r);
	if (r != NULL)
		freeReplyObject(r);
	return ok;
}

/* LPUSH n elements, past the script (the hostile elements and forged
 * jobs; head: RPUSH, taken next); 1 acknowledged, 0 unknown (sent, no
 * reply), -1 not sent (no connection, LOADING), 2 acknowledged by Redis
 * but not by the replicas (with sentinels=). */
static int
lpush(struct producer *p, int q, int n, const char **els, const size_t *lens,
    int head)
{
	const char **argv = malloc(((size_t)n + 2) * sizeof(*argv));
	size_t *argl = malloc(((size_t)n + 2) * sizeof(*argl));
	int ok = 0;
	if (argv == NULL || argl == NULL)
		chaos_die("out of memory");
	argv[0] = head ? "RPUSH" : "LPUSH";
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
		lost(p, r);
		if (r != NULL && !ok) {
			/* an error reply (OOM): nothing went in, but count it
			 * as unknown rather than assume; LOADING runs nothing */
			if (strncmp(r->str, "LOADING", 7) == 0)
				ok = -1;
			else
				fprintf(stderr, "chaos produce: %s: %.200s\n", argv[0],
				    r->str);
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

/* ------------------------------------------------ the enqueue script */

/* Does queue q keep ids (idempotency_window in its config hash)? Asked
 * once a connection: 1 yes, 0 no, -1 not known (no reply, an error reply
 * such as LOADING). */
static int
keeps_ids(struct producer *p, int q)
{
	if (p->ids_ok & (1u << q))
		return 1;
	redisReply *r = redisCommand(p->c, "HGET %s:{%s}:config "
	    "idempotency_window", p->prefix, p->qname[q]);
	int ok = r == NULL || r->type == REDIS_REPLY_ERROR ? -1 :
	    r->type == REDIS_REPLY_STRING && atoll(r->str) > 0;
	lost(p, r);
	if (r != NULL)
		freeReplyObject(r);
	if (ok == 1)
		p->ids_ok |= 1u << q;
	return ok;
}

static int
load_script(struct producer *p)
{
	redisReply *r = redisCommand(p->c, "SCRIPT LOAD %b", p->script.p,
	    p->script.len);
	int ok = r != NULL && r->type == REDIS_REPLY_STRING && r->len < 48;
	lost(p, r);
	if (ok)
		snprintf(p->sha, sizeof(p->sha), "%s", r->str);
	else if (r != NULL && r->type == REDIS_REPLY_ERROR)
		fprintf(stderr, "chaos produce: SCRIPT LOAD: %.200s\n", r->str);
	if (r != NULL)
		freeReplyObject(r);
	return ok ? 0 : -1;
}

enum outcome {
	O_ACK,          /* acknowledged (and replicated, with sentinels) */
	O_SHORT,        /* acknowledged, fewer replicas than asked */
	O_UNKNOWN,      /* sent, no reply */
	O_REFUSED,      /* an error reply: the script did not run */
	O_UNSENT,       /* not sent: no connection, queue keeps no ids */
};

/* One script call of k; *already: how many jobs were already accepted. */
static enum outcome
send_call(struct producer *p, struct call *k, long long *already)
{
	const char *argv[8 + 5 * CALL_MAX];
	size_t argl[8 + 5 * CALL_MAX];
	char maxb[24];
	int n = 0;

	*already = 0;
	reconnect(p);
	if (p->c == NULL)
		return O_UNSENT;
	int keeps = keeps_ids(p, k->q);
	if (keeps != 1) {
		static int said;
		if (keeps == 0 && said++ < 20)
			fprintf(stderr, "chaos produce: queue %s keeps no ids "
			    "(idempotency_window): its calls wait\n", p->qname[k->q]);
		return O_UNSENT;
	}
	if (p->sha[0] == '\0' && load_script(p) != 0)
		return O_UNSENT;
	snprintf(maxb, sizeof(maxb), "%lld", k->q < 2 ? p->max_job_bytes :
	    (long long)MODE_MAX_JOB_BYTES);
#define ARG(s, l) (argv[n] = (s), argl[n++] = (l))
	ARG("EVALSHA", 7);
	ARG(p->sha, strlen(p->sha));
	ARG("1", 1);
	ARG(p->ready[k->q], strlen(p->ready[k->q]));
	ARG(maxb, strlen(maxb));
	ARG("90", 2);           /* memory_refuse_percent, ferryd's default */
	ARG("1", 1);
	ARG("ids", 3);
	for (int i = 0; i < k->n; i++) {
		ARG(k->docs[i].p, k->docs[i].len);
		ARG("0", 1);
		ARG("", 0);
		ARG("", 0);     /* its binding: the script computes it */
		ARG(k->ids[i], strlen(k->ids[i]));
	}
#undef ARG
	redisReply *r = redisCommandArgv(p->c, n, argv, argl);
	if (r != NULL && r->type == REDIS_REPLY_ERROR &&
	    strncmp(r->str, "NOSCRIPT", 8) == 0) {
		/* a restarted Redis has no scripts: nothing ran */
		freeReplyObject(r);
		if (load_script(p) != 0)
			return O_UNSENT;
		argv[1] = p->sha;
		r = redisCommandArgv(p->c, n, argv, argl);
	}
	p->calls++;
	p->resends += k->sends++ > 0;
	lost(p, r);
	if (r == NULL)
		return O_UNKNOWN;
	if (r->type != REDIS_REPLY_ARRAY || r->elements < 3 ||
	    r->element[0]->type != REDIS_REPLY_INTEGER ||
	    r->element[2]->type != REDIS_REPLY_ARRAY) {
		/* refused before it ran (LOADING, OOM, READONLY, MASTERDOWN)
		 * or by its checks (FULL, INVALID, BADARGS: all or nothing) */
		if (r->type != REDIS_REPLY_ERROR ||
		    strncmp(r->str, "LOADING", 7) != 0)
			fprintf(stderr, "chaos produce: enqueue.lua on %s: %.300s\n",
			    p->qname[k->q], r->type == REDIS_REPLY_ERROR ? r->str :
			    "an unexpected reply");
		freeReplyObject(r);
		/* --failover: READONLY of a demoted primary: ask the
		 * sentinels again */
		if (p->sentinels != NULL)
			p->c->err = REDIS_ERR_OTHER;
		return O_REFUSED;
	}
	long long pushed = r->element[0]->integer;
	*already = (long long)r->element[2]->elements;
	freeReplyObject(r);
	if (pushed + *already != k->n)
		fprintf(stderr, "chaos produce: enqueue.lua on %s: %lld pushed and "
		    "%lld already accepted of %d jobs\n", p->qname[k->q], pushed,
		    *already, k->n);
	if (p->sentinels == NULL)
		return O_ACK;
	if (pushed == 0) {
		/* the call wrote nothing: a write of this connection's, so
		 * that WAIT covers what the primary holds now */
		redisReply *f = redisCommand(p->c, "SET chaos:producer:fence %lld",
		    p->calls);
		lost(p, f);
		if (f != NULL)
			freeReplyObject(f);
		p->fences++;
	}
	if (p->c->err == 0 && wait_replicas(p))
		return O_ACK;
	if (p->c->err == 0)
		p->c->err = REDIS_ERR_OTHER;    /* ask the sentinels again */
	return O_SHORT;
}

/* The ledger lines of k's jobs: st 'a', 'r' or 'u' (each of r and u once,
 * u only before anything else). */
static void
record(struct producer *p, struct call *k, char st)
{
	if ((st == 'u' && k->marked != 0) || (st == 'r' && k->marked == 'r'))
		return;
	FILE *f = k->q >= 2 ? p->mledger : p->ledger;
	for (int i = 0; i < k->n; i++)
		fprintf(f, "%c %s%s%s\n", st, k->ids[i], k->q >= 2 ? " " : "",
		    k->q >= 2 ? k->tails[i] : "");
	fflush(f);
	if (st != 'a')
		k->marked = st;
}

static void
call_free(struct call *k)
{
	for (int i = 0; i < k->n; i++)
		chaos_buf_free(&k->docs[i]);
	free(k);
}

/* The last good job of a call that went (pg or exec, not a refused row):
 * what the hostile wrappers wrap, a job that may be in Redis already. */
static void
sent_copy(struct producer *p, const struct call *k)
{
	for (int i = k->n - 1; k->q < 2 && i >= 0; i--)
		if (k->q == 1 || strncmp(k->ids[i], "p-", 2) == 0) {
			p->last_good[k->q].len = 0;
			chaos_buf_add(&p->last_good[k->q], k->docs[i].p,
			    k->docs[i].len);
			return;
		}
}

/* Send the calls kept, oldest first, until one is not acknowledged;
 * 1 when every one was. */
static int
send_pending(struct producer *p)
{
	size_t i = 0;
	int ok = 1;
	for (; i < p->npend && ok; i++) {
		struct call *k = p->pend[i];
		long long already;
		enum outcome o = send_call(p, k, &already);
		if (o != O_UNSENT && o != O_REFUSED)
			sent_copy(p, k);
		if (o == O_ACK || o == O_SHORT) {
			p->already += already;
			p->already_calls += already > 0;
		}
		if (o == O_ACK) {
			record(p, k, 'a');
			call_free(k);
			p->pend[i] = NULL;
			continue;
		}
		ok = 0;
		if (o == O_SHORT) {
			p->short_wait++;
			record(p, k, 'r');
		} else if (o == O_UNKNOWN) {
			p->no_reply++;
			record(p, k, 'u');
		} else if (o == O_REFUSED)
			p->refused++;
	}
	size_t left = 0;
	for (size_t j = 0; j < p->npend; j++)
		if (p->pend[j] != NULL)
			p->pend[left++] = p->pend[j];
	p->npend = left;
	return ok;
}

/* A call of n new good jobs of queue q, kept until acknowledged. */
static void
new_call(struct producer *p, int q, int n)
{
	struct call *k = calloc(1, sizeof(*k));
	if (k == NULL)
		chaos_die("out of memory");
	k->q = q;
	k->n = n > CALL_MAX ? CALL_MAX : n;
	for (int i = 0; i < k->n; i++) {
		long long id = q < 2 ? ++p->next_id : 0;
		char *kid = k->ids[i];
		struct chaos_buf *doc = &k->docs[i];
		if (q >= 2) {
			chaos_modes_job(&p->modes, q - 2, kid, sizeof(k->ids[i]), doc,
			    k->tails[i], sizeof(k->tails[i]));
		} else if (q == 0) {
			int bad = id % 50 == 0;
			snprintf(kid, sizeof(k->ids[i]), "%s-%lld", bad ? "pb" : "p", id);
			chaos_buf_printf(doc, "{\"id\":\"%s\",\"data\":{\"job_id\":"
			    "\"%s\",\"n\":%s%lld%s,\"pad\":\"caf\xc3\xa9 \xe2\x82\xac "
			    "\xf0\x9d\x84\x9e %0*lld\"}}", kid, kid, bad ? "\"x" : "", id,
			    bad ? "\"" : "", (int)(id % 40), id);
		} else {
			int flaky = id % 25 == 0;
			snprintf(kid, sizeof(k->ids[i]), "%s-%lld", flaky ? "ef" : "e", id);
			chaos_buf_printf(doc, "{\"id\":\"%s\",\"data\":{\"n\":%lld}}",
			    kid, id);
		}
	}
	p->jobs += k->n;
	if (p->npend == p->cap) {
		p->cap = p->cap ? p->cap * 2 : 16;
		if ((p->pend = realloc(p->pend, p->cap * sizeof(*p->pend))) == NULL)
			chaos_die("out of memory");
	}
	p->pend[p->npend++] = k;
}

/* Wait (30 s at most) until every queue keeps ids: ferryd's master
 * publishes idempotency_window within a second of its start. */
static void
wait_for_ids(struct producer *p, int nq)
{
	long long until = servers_now_ms() + 30000;
	for (;;) {
		int q = 0;
		reconnect(p);
		while (p->c != NULL && q < nq && keeps_ids(p, q) == 1)
			q++;
		if (q == nq)
			return;
		if (servers_now_ms() >= until)
			chaos_die("produce: queue %s keeps no ids (no "
			    "idempotency_window in its config hash) 30 s after the "
			    "start", p->qname[q]);
		servers_sleep_ms(200);
	}
}

/* ----------------------------------------------------- hostile input */

/* The ledger letter of a push past the script (lpush's answer). */
static char
push_letter(int ok)
{
	return ok == 1 ? 'a' : ok == 2 ? 'r' : ok ? 'n' : 'u';
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
	reconnect(p);
	p->hostile.c = p->c;    /* the batch keys in flight */
	p->hostile.good = p->last_good[q].len ? p->last_good[q].p : NULL;
	chaos_hostile_element(&p->hostile, q, kind, idx, &b);
	const char *el = b.p ? b.p : "";
	int ok = lpush(p, q, 1, &el, &b.len, 0);
	fprintf(p->ledger, "h %s %s %c\n", kind, qn, push_letter(ok));
	fflush(p->ledger);
	chaos_buf_free(&b);
}

/* A forged job of the plan's line (forge.c), made from what Redis holds
 * now and pushed past the script. */
static void
push_forged(struct producer *p, const char *line)
{
	char qn[16], kind[32];
	long long ms, idx;
	struct chaos_forged f = { 0 };
	if (sscanf(line, "%lld forge %15s %31s %lld", &ms, qn, kind, &idx) != 4)
		return;
	int q = strcmp(qn, "exec") == 0;
	reconnect(p);
	if (p->c == NULL || chaos_forge(&p->forger, p->c, p->prefix,
	    p->qname[q], kind, idx, &f) != 0) {
		fprintf(p->ledger, "f %s %s - - n\n", f.kind ? f.kind : kind, qn);
	} else {
		const char *el = f.doc.p;
		int ok = lpush(p, q, 1, &el, &f.doc.len, f.head);
		fprintf(p->ledger, "f %s %s %s %s %c\n", f.kind, qn, f.fid,
		    f.target, push_letter(ok));
	}
	fflush(p->ledger);
	chaos_buf_free(&f.doc);
}


static void
read_script(struct producer *p, const char *path)
{
	FILE *f = path != NULL ? fopen(path, "rb") : NULL;
	char buf[8192];
	size_t n;
	if (f == NULL)
		chaos_die("produce: cannot read enqueue_lua=%s (the build's "
		    "gen/lua/enqueue.lua)", path ? path : "");
	while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
		chaos_buf_add(&p->script, buf, n);
	fclose(f);
	if (p->script.len == 0)
		chaos_die("produce: %s is empty", path);
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
	p.hostile = (struct chaos_hostile){ .prefix = p.prefix, .pgq = p.pgq,
		.execq = p.execq, .max_job_bytes = p.max_job_bytes };
	p.sentinels = chaos_arg(argc, argv, "sentinels", NULL);
	p.master = chaos_arg(argc, argv, "master", "ferry");
	p.replicas = chaos_arg_ll(argc, argv, "replicas", 2);
	p.wait_ms = chaos_arg_ll(argc, argv, "wait_ms", 500);
	long long seconds = chaos_arg_ll(argc, argv, "seconds", 60);
	long long resend_s = chaos_arg_ll(argc, argv, "resend_s", 90);
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
		chaos_die("produce: needs redis=PORT plan=FILE ledger=FILE "
		    "enqueue_lua=FILE");
	read_script(&p, chaos_arg(argc, argv, "enqueue_lua", NULL));
	FILE *pf = fopen(plan, "r");
	p.ledger = fopen(ledger, "a");
	if (pf == NULL || p.ledger == NULL)
		chaos_die("produce: cannot open %s or %s", plan, ledger);
	p.qname[0] = p.pgq;
	p.qname[1] = p.execq;
	p.qname[2] = chaos_arg(argc, argv, "upq", "chaos_up");
	p.qname[3] = chaos_arg(argc, argv, "tbq", "chaos_tb");
	for (int q = 0; q < 4; q++)
		snprintf(p.ready[q], sizeof(p.ready[q]), "%s:{%s}:ready", p.prefix,
		    p.qname[q]);
	if (nq == 4) {
		p.mledger = fopen(mledger, "a");
		if (p.mledger == NULL)
			chaos_die("produce: cannot open %s", mledger);
		chaos_modes_init(&p.modes, (uint64_t)chaos_arg_ll(argc, argv,
		    "seed", 1), chaos_arg_ll(argc, argv, "keys", 500));
	}
	wait_for_ids(&p, nq);

	char line[256] = "";
	int have_line = fgets(line, sizeof(line), pf) != NULL;
	long long made[4] = { 0, 0, 0, 0 }, resume = 0, pause = PAUSE_FIRST_MS;
	int rc = 0;
	for (;;) {
		long long now = chaos_epoch_ms() - t0;
		int ending = now >= seconds * 1000;
		if (ending && p.npend == 0)
			break;
		if (ending && now >= (seconds + resend_s) * 1000) {
			rc = 2;
			break;
		}
		/* forged jobs after this tick's calls, while their jobs
		 * wait: the ids they carry are live */
		char forge[4][sizeof(line)];
		int nforge = 0;
		while (!ending && have_line && atoll(line) <= now) {
			if (strstr(line, " hostile ") != NULL)
				push_hostile(&p, line);
			else if (strstr(line, " forge ") != NULL && nforge < 4)
				memcpy(forge[nforge++], line, sizeof(line));
			else if (strstr(line, " forge ") != NULL)
				push_forged(&p, line);
			have_line = fgets(line, sizeof(line), pf) != NULL;
		}
		if (servers_now_ms() >= resume) {
			/* the calls kept first; new jobs only once none is
			 * left: after an outage the backlog goes in at up to
			 * 64 jobs a call, keeping to the rate over the run */
			int ok = send_pending(&p);
			for (int q = 0; ok && !ending && q < nq; q++) {
				long long n = rate[q] * now / 1000 - made[q];
				if (n <= 0)
					continue;
				n = n > CALL_MAX ? CALL_MAX : n;
				new_call(&p, q, (int)n);
				made[q] += n;
				ok = send_pending(&p);
			}
			if (ok)
				pause = PAUSE_FIRST_MS;
			else {
				resume = servers_now_ms() + pause;
				pause = pause * 2 > PAUSE_MAX_MS ? PAUSE_MAX_MS : pause * 2;
			}
		}
		for (int i = 0; i < nforge; i++)
			push_forged(&p, forge[i]);
		long long spent = chaos_epoch_ms() - t0 - now;
		servers_sleep_ms(spent >= 90 ? 10 : (long)(100 - spent));
	}
	long long unknown = 0, unrepl = 0, shown = 0;
	for (size_t i = 0; i < p.npend; i++) {
		struct call *k = p.pend[i];
		unknown += k->marked == 'u' ? k->n : 0;
		unrepl += k->marked == 'r' ? k->n : 0;
		for (int j = 0; j < k->n; j++)
			if (shown++ < 40)
				fprintf(stderr, "%s%s", shown > 1 ? " " : "chaos produce: "
				    "jobs of calls not acknowledged within resend_s after "
				    "the end: ", k->ids[j]);
	}
	if (shown > 0)
		fprintf(stderr, "%s\n", shown > 40 ? " ..." : "");
	printf("calls=%lld jobs=%lld resends=%lld already=%lld already_calls=%lld "
	    "no_reply=%lld short_wait=%lld refused=%lld fences=%lld "
	    "pending_calls=%zu unknown_left=%lld unreplicated_left=%lld\n",
	    p.calls, p.jobs, p.resends, p.already, p.already_calls, p.no_reply,
	    p.short_wait, p.refused, p.fences, p.npend, unknown, unrepl);
	for (size_t i = 0; i < p.npend; i++)
		call_free(p.pend[i]);
	free(p.pend);
	fclose(pf);
	fclose(p.ledger);
	if (p.mledger != NULL)
		fclose(p.mledger);
	chaos_modes_free(&p.modes);
	if (p.c != NULL)
		redisFree(p.c);
	chaos_buf_free(&p.last_good[0]);
	chaos_buf_free(&p.last_good[1]);
	chaos_buf_free(&p.script);
	chaos_forger_free(&p.forger);
	return rc;
}
