/* produce_cache.c - `chaos_helper produce-cache ...`: the postgres queue's
 * jobs whose rows wait in cache keys, pushed by `ferryctl enqueue` as an
 * application pushes them (below). */
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

/* ------------------------------------------------------ produce-cache */

/* `chaos_helper produce-cache ferryctl=PATH config=INI queue=Q
 * keyprefix=P ledger=FILE seconds=S t0_ms=EPOCH_MS seed=N cache_rate=N
 * key_rate=N hold_ms=N ttl_ms=N kill_one_in=N resend_s=N
 * redis=PORT|sentinels=.. master=..`: the postgres queue's jobs whose rows
 * wait in Redis, through `ferryctl -c INI enqueue` as an application sends
 * them, a call a second of each kind (up to CP_BATCH jobs):
 *   pc-N: {"id":"pc-N","data":[ROWS]} with --cache (ferryctl writes the
 *         rows to a key ferry:{Q}:cache:<16 hex>.<n> of its own, no TTL);
 *   pk-N: {"id":"pk-N","cache_key":"<P>pk-N"}, a key written first with a
 *         TTL (ttl_ms): a JSON array of the rows (SET), or one row as a
 *         hash; the job follows 0..hold_ms later (seeded), so the churn's
 *         evictions take some keys first: ferryctl then exits 65 "does not
 *         exist: write the key before the job that names it", and the key
 *         is written again and the call retried, as an application must.
 * ROWS: 1-4 objects {"job_id":ID,"n":I,"pad":...}, I = 0..; every 40th
 * job (pb-c-N, pb-k-N) has a last row the table refuses ("n":"x"): dead,
 * its key kept while it is dead.
 * The queue keeps ids (idempotency_window), and every job has its own:
 * ferryctl sends a call whose reply was lost again by itself (for up to
 * 60 s, ctl_resend.c), and a job the queue holds already is answered
 * "already accepted" (a line "ID already accepted" on its standard
 * output, counted here). Outcome per ferryctl's exit status: 0 "a"; 3
 * (redis_wait_replicas short) "r"; 69 after sending (its own resends
 * gave up) or a ferryctl killed "u" (unknown). A job is kept until a call
 * of it exits 0, and its calls are made again, with the same ids, whatever
 * the last one said (75 FULL, 69 before connecting, 65 after 5 rewrites
 * too: nothing went in, no ledger line). One call in kill_one_in (seeded)
 * gets a SIGKILL after 0-130% of the time a call took so far, mid-call
 * for most: its jobs are of unknown outcome, and the call is made again
 * at once with the same ids.
 * Ledger lines "a|r|u ID ROWS": r and u once each, a once a call of the
 * job exited 0; a job's best line counts. After seconds=S the jobs held go
 * at once and the jobs kept are sent for resend_s more seconds at most:
 * then they are named on stderr and the exit status is 2 (the run fails).
 * At the end one line of KEY=VALUE counters on stdout. */

#define CP_BATCH 48             /* jobs a call: ~20 KB, a pipe takes them */

struct cjob {
	long long n, due;       /* job number; ms after t0 it may go */
	char kind;              /* 'c' --cache, 'k' an application key */
	char marked;            /* the last ledger letter written: 0, u, r */
	int rows, bad, hash, written, done, sends;
};

struct cproducer {
	int argc;
	char **argv;            /* for chaos_redis_arg */
	redisContext *c;
	const char *ferryctl, *config, *queue, *keyprefix;
	long long ttl_ms;
	FILE *ledger;
	struct cjob *pend;
	size_t npend, cap;
	struct chaos_rng krng;  /* which calls are killed, and when */
	long long kill_one_in;
	long long calls, jobs[2], rows, rewrites, gone, full, unknown, errors;
	long long resends, already, kills, kills_late, self_resends, short_wait;
	long long call_ms;      /* the time the calls not killed took */
};

static void
cjob_id(const struct cjob *j, char *out, size_t size)
{
	snprintf(out, size, "%s%c-%lld", j->bad ? "pb-" : "p", j->kind, j->n);
}

static void
cjob_rows(const struct cjob *j, struct chaos_buf *b)
{
	char id[40];
	cjob_id(j, id, sizeof(id));
	chaos_buf_add(b, "[", 1);
	for (int i = 0; i < j->rows; i++)
		chaos_buf_printf(b, "%s{\"job_id\":\"%s\",\"n\":%s%d%s,\"pad\":"
		    "\"cached row %d of %s\"}", i ? "," : "", id, j->bad &&
		    i == j->rows - 1 ? "\"x" : "", i, j->bad && i == j->rows - 1 ?
		    "\"" : "", i, id);
	chaos_buf_add(b, "]", 1);
}

/* The producer's own connection (its keys), opened again when lost. */
static redisContext *
cp_redis(struct cproducer *p)
{
	if (p->c != NULL && p->c->err == 0)
		return p->c;
	if (p->c != NULL)
		redisFree(p->c);
	return p->c = chaos_redis_arg(p->argc, p->argv, 2000);
}

/* Write job j's application key with its TTL (MULTI: never one without
 * it); 0 when Redis took it. */
static int
cjob_write_key(struct cproducer *p, const struct cjob *j)
{
	char id[40];
	struct chaos_buf v = { 0 };
	cjob_id(j, id, sizeof(id));
	if (cp_redis(p) == NULL)
		return -1;
	redisAppendCommand(p->c, "MULTI");
	if (j->hash) {
		redisAppendCommand(p->c, "HSET %s%s job_id %s n %s pad %s",
		    p->keyprefix, id, id, j->bad ? "x" : "0", "cached row 0");
	} else {
		cjob_rows(j, &v);
		redisAppendCommand(p->c, "SET %s%s %b", p->keyprefix, id, v.p, v.len);
	}
	redisAppendCommand(p->c, "PEXPIRE %s%s %lld", p->keyprefix, id, p->ttl_ms);
	redisAppendCommand(p->c, "EXEC");
	chaos_buf_free(&v);
	int ok = 1;
	for (int i = 0; i < 4; i++) {
		redisReply *r;
		if (redisGetReply(p->c, (void **)&r) != REDIS_OK)
			return -1;
		ok &= r->type != REDIS_REPLY_ERROR && (i < 3 ||
		    (r->type == REDIS_REPLY_ARRAY && r->elements == 2));
		freeReplyObject(r);
	}
	if (!ok && p->c->err == 0)
		p->c->err = REDIS_ERR_OTHER;  /* READONLY, LOADING: again */
	return ok ? 0 : -1;
}

static int
key_exists(struct cproducer *p, const struct cjob *j)
{
	char id[40];
	cjob_id(j, id, sizeof(id));
	redisReply *r = cp_redis(p) != NULL ? redisCommand(p->c, "EXISTS %s%s",
	    p->keyprefix, id) : NULL;
	int yes = r == NULL || (r->type == REDIS_REPLY_INTEGER && r->integer);
	if (r != NULL)
		freeReplyObject(r);
	return yes;
}

/* ferryctl enqueue [--cache] with the documents on its standard input;
 * its exit status (-1: killed, by kill_ms or after 20 s), its standard
 * output and error in out and err; kill_ms >= 0: a SIGKILL that many ms
 * after the start (*killed: it came while ferryctl ran). */
static int
run_ferryctl(struct cproducer *p, int cache, const struct chaos_buf *docs,
    long long kill_ms, struct chaos_buf *out, struct chaos_buf *err,
    int *killed)
{
	int in[2], o[2], e[2], status = 0;
	if (pipe2(in, O_CLOEXEC) != 0 || pipe2(o, O_CLOEXEC) != 0 ||
	    pipe2(e, O_CLOEXEC) != 0)
		chaos_die("produce-cache: pipe: %s", strerror(errno));
	long long start = servers_now_ms();
	pid_t pid = fork();
	if (pid == 0) {
		dup2(in[0], 0);
		dup2(o[1], 1);
		dup2(e[1], 2);
		const char *av[] = { p->ferryctl, "-c", p->config, "enqueue",
			p->queue, "-", NULL, NULL };
		if (cache) {   /* enqueue --cache QUEUE - */
			av[4] = "--cache";
			av[5] = p->queue;
			av[6] = "-";
		}
		execv(p->ferryctl, (char *const *)av);
		_exit(127);
	}
	close(in[0]);
	close(o[1]);
	close(e[1]);
	if (pid < 0)
		chaos_die("produce-cache: fork: %s", strerror(errno));
	/* a few KB: the pipe takes them whole */
	if (write(in[1], docs->p, docs->len) != (ssize_t)docs->len)
		fprintf(stderr, "chaos produce-cache: ferryctl's input cut short\n");
	close(in[1]);
	long long deadline = start + 20000, kill_at = kill_ms >= 0 ?
	    start + kill_ms : -1;
	struct pollfd pf[2] = { { o[0], POLLIN, 0 }, { e[0], POLLIN, 0 } };
	struct chaos_buf *to[2] = { out, err };
	int sent_kill = 0;
	char buf[4096];
	while (pf[0].fd >= 0 || pf[1].fd >= 0) {
		long long t = servers_now_ms();
		if (kill_at >= 0 && t >= kill_at) {
			kill(pid, SIGKILL);
			sent_kill = 1;
			kill_at = -1;
		}
		if (t >= deadline) {
			kill(pid, SIGKILL);
			status = -1;
			break;
		}
		long long wait = (kill_at >= 0 ? kill_at : deadline) - t;
		if (poll(pf, 2, (int)wait) <= 0)
			continue;
		for (int i = 0; i < 2; i++) {
			if (pf[i].fd < 0 || pf[i].revents == 0)
				continue;
			ssize_t n = read(pf[i].fd, buf, sizeof(buf));
			if (n > 0)
				chaos_buf_add(to[i], buf, (size_t)n);
			else if (n == 0 || errno != EINTR) {
				close(pf[i].fd);
				pf[i].fd = -1;
			}
		}
	}
	for (int i = 0; i < 2; i++)
		if (pf[i].fd >= 0)
			close(pf[i].fd);
	int ws;
	waitpid(pid, &ws, 0);
	*killed = sent_kill && WIFSIGNALED(ws) && WTERMSIG(ws) == SIGKILL;
	if (*killed)
		p->kills++;
	else if (sent_kill)
		p->kills_late++;
	if (*killed)
		status = -1;
	else if (status == 0) {
		status = WIFEXITED(ws) ? WEXITSTATUS(ws) : -1;
		p->call_ms += servers_now_ms() - start;
	}
	p->calls++;
	return status;
}

/* Occurrences of needle in b. */
static long long
count_in(const struct chaos_buf *b, const char *needle)
{
	long long n = 0;
	for (const char *s = b->p; s != NULL && (s = strstr(s, needle)) != NULL;
	    s += strlen(needle))
		n++;
	return n;
}

/* Write the ledger line st for job j (r and u once each, u first only). */
static void
cjob_record(struct cproducer *p, struct cjob *j, char st)
{
	char id[40];
	if ((st == 'u' && j->marked != 0) || (st == 'r' && j->marked == 'r'))
		return;
	cjob_id(j, id, sizeof(id));
	fprintf(p->ledger, "%c %s %d\n", st, id, j->rows);
	if (st != 'a')
		j->marked = st;
}

/* One call with up to CP_BATCH due jobs of `kind`; 0 when none were due or
 * Redis was not there to write their keys. */
static int
push_due(struct cproducer *p, char kind, long long now)
{
	struct cjob *b[CP_BATCH];
	int n = 0, rc = 0;
	for (size_t i = 0; i < p->npend && n < CP_BATCH; i++)
		if (!p->pend[i].done && p->pend[i].kind == kind &&
		    p->pend[i].due <= now)
			b[n++] = &p->pend[i];
	for (int i = 0; i < n; i++) {
		if (kind != 'k' || b[i]->written)
			continue;
		if (cjob_write_key(p, b[i]) != 0)
			return 0;       /* Redis is not there: later */
		b[i]->written = 1;
	}
	if (n == 0)
		return 0;
	struct chaos_buf docs = { 0 }, out = { 0 }, err = { 0 };
	for (int i = 0; i < n; i++) {
		char id[40];
		cjob_id(b[i], id, sizeof(id));
		chaos_buf_printf(&docs, "{\"id\":\"%s\",", id);
		if (kind == 'c') {
			chaos_buf_printf(&docs, "\"data\":");
			cjob_rows(b[i], &docs);
		} else {
			chaos_buf_printf(&docs, "\"cache_key\":\"%s%s\"", p->keyprefix, id);
		}
		chaos_buf_printf(&docs, "}\n");
	}
	/* a call in kill_one_in is killed after 0-130% of the time a call
	 * took so far (40 ms before any): most of them mid-call, some in
	 * the script's call or after it */
	long long timed = p->calls - p->kills, took = timed > 0 ?
	    p->call_ms / timed : 40, kill_ms = -1;
	if (p->kill_one_in > 0 && chaos_rng_range(&p->krng, 1,
	    p->kill_one_in) == 1)
		kill_ms = took * chaos_rng_range(&p->krng, 0, 130) / 100;
	int killed = 0, again = 0;
	for (int i = 0; i < n; i++)
		again |= b[i]->sends++ > 0;
	p->resends += again;
	for (int attempt = 0; attempt < 6; attempt++) {
		out.len = err.len = 0;
		rc = run_ferryctl(p, kind == 'c', &docs, attempt ? -1 : kill_ms,
		    &out, &err, &killed);
		p->self_resends += count_in(&err, "safe to send again");
		p->already += count_in(&out, " already accepted");
		if (killed) {
			/* killed mid-call: its outcome is unknown; the same
			 * call again at once, with the same ids */
			p->unknown++;
			p->resends++;
			for (int i = 0; i < n; i++)
				cjob_record(p, b[i], 'u');
			fflush(p->ledger);
			continue;
		}
		if (rc != 65 || err.p == NULL || strstr(err.p, " does not exist: "
		    "write the key before the job") == NULL)
			break;
		/* evicted before its job came (or, a job sent before and done
		 * since, deleted with it): write it again, try again */
		p->gone++;
		for (int i = 0; i < n; i++)
			if (!key_exists(p, b[i]) && cjob_write_key(p, b[i]) == 0)
				p->rewrites++;
	}
	const char *e = err.p ? err.p : "";
	/* nothing went in: FULL, keys still missing, not connected */
	int gone = rc == 65 && strstr(e, " does not exist: ") != NULL;
	int unsent = rc == 69 && strstr(e, "is redis-server running");
	p->full += rc == 75;
	p->unknown += (rc == -1 && !killed) || (rc == 69 && !unsent);
	p->short_wait += rc == 3;
	if (rc != 0 && rc != 3 && rc != 69 && rc != 75 && rc != -1 && !gone) {
		p->errors++;
		fprintf(stderr, "chaos produce-cache: ferryctl exit %d for %d jobs "
		    "(sent again): %.500s\n", rc, n, e);
	}
	for (int i = 0; i < n; i++) {
		struct cjob *j = b[i];
		if (rc == 0) {
			cjob_record(p, j, 'a');
			j->done = 1;
			p->jobs[kind == 'k']++;
			p->rows += j->rows;
			continue;
		}
		if (rc == 3)
			cjob_record(p, j, 'r');
		else if (rc == -1 || (rc == 69 && !unsent))
			cjob_record(p, j, 'u');
		j->due = now + 200;
	}
	fflush(p->ledger);
	chaos_buf_free(&docs);
	chaos_buf_free(&out);
	chaos_buf_free(&err);
	return 1;
}

static void
cjob_add(struct cproducer *p, struct chaos_rng *r, char kind, long long n,
    long long now, long long hold)
{
	if (p->npend == p->cap) {
		p->cap = p->cap ? p->cap * 2 : 256;
		if ((p->pend = realloc(p->pend, p->cap * sizeof(*p->pend))) == NULL)
			chaos_die("out of memory");
	}
	struct cjob *j = &p->pend[p->npend++];
	memset(j, 0, sizeof(*j));
	j->n = n;
	j->kind = kind;
	j->bad = n % 40 == 0;
	j->rows = (int)chaos_rng_range(r, 1, 4);
	j->hash = kind == 'k' && j->rows == 1 && chaos_rng_range(r, 0, 1);
	j->due = now + (kind == 'k' ? chaos_rng_range(r, 0, hold) : 0);
	if (kind == 'k')
		j->written = cjob_write_key(p, j) == 0;
}

int
chaos_produce_cache_main(int argc, char **argv)
{
	struct cproducer p = { .argc = argc, .argv = argv };
	p.ferryctl = chaos_arg(argc, argv, "ferryctl", NULL);
	p.config = chaos_arg(argc, argv, "config", NULL);
	p.queue = chaos_arg(argc, argv, "queue", "chaos_pg");
	p.keyprefix = chaos_arg(argc, argv, "keyprefix", "chaos:rows:");
	p.ttl_ms = chaos_arg_ll(argc, argv, "ttl_ms", 60000);
	const char *ledger = chaos_arg(argc, argv, "ledger", NULL);
	long long seconds = chaos_arg_ll(argc, argv, "seconds", 60);
	long long t0 = chaos_arg_ll(argc, argv, "t0_ms", chaos_epoch_ms());
	long long rate[2] = { chaos_arg_ll(argc, argv, "cache_rate", 10),
		chaos_arg_ll(argc, argv, "key_rate", 5) };
	long long hold = chaos_arg_ll(argc, argv, "hold_ms", 12000), made[2] = {
		0, 0 }, next = 0;
	struct chaos_rng rng = { (uint64_t)chaos_arg_ll(argc, argv, "seed", 1) ^
	    0x6361636865ULL };
	long long resend_s = chaos_arg_ll(argc, argv, "resend_s", 90);
	int rc = 0;
	p.kill_one_in = chaos_arg_ll(argc, argv, "kill_one_in", 8);
	p.krng.s = (uint64_t)chaos_arg_ll(argc, argv, "seed", 1) ^ 0x6b696c6cULL;
	if (p.ferryctl == NULL || p.config == NULL || ledger == NULL ||
	    (p.ledger = fopen(ledger, "a")) == NULL)
		chaos_die("produce-cache: needs ferryctl=PATH config=INI "
		    "ledger=FILE (writable)");
	signal(SIGPIPE, SIG_IGN);
	for (;;) {
		long long now = chaos_epoch_ms() - t0, tick = chaos_epoch_ms();
		int ending = now >= seconds * 1000;
		if (ending && now >= (seconds + resend_s) * 1000) {
			rc = 2;
			break;
		}
		for (int k = 0; k < 2 && !ending; k++)
			while (made[k] < rate[k] * now / 1000) {
				cjob_add(&p, &rng, k ? 'k' : 'c', ++next, now, hold);
				made[k]++;
			}
		size_t left = 0;
		for (size_t i = 0; i < p.npend; i++) {
			if (ending)
				p.pend[i].due = 0;   /* no more holding */
			if (!p.pend[i].done)
				p.pend[left++] = p.pend[i];
		}
		p.npend = left;
		if (ending && left == 0)
			break;
		push_due(&p, 'c', now);
		push_due(&p, 'k', now);
		/* a call a second of each kind (a ferryctl costs ~20 ms of CPU),
		 * faster once the jobs held go at once */
		long long spent = chaos_epoch_ms() - tick, step = ending ? 250 : 1000;
		if (spent < step)
			servers_sleep_ms((long)(step - spent));
	}
	long long unknown = 0, unrepl = 0;
	for (size_t i = 0; i < p.npend; i++) {
		char id[40];
		unknown += p.pend[i].marked == 'u';
		unrepl += p.pend[i].marked == 'r';
		cjob_id(&p.pend[i], id, sizeof(id));
		if (i < 40)
			fprintf(stderr, "%s%s", i ? " " : "chaos produce-cache: jobs "
			    "not acknowledged within resend_s after the end: ", id);
	}
	if (p.npend > 0)
		fprintf(stderr, "%s\n", p.npend > 40 ? " ..." : "");
	long long timed = p.calls - p.kills;
	printf("calls=%lld cache_jobs=%lld key_jobs=%lld rows=%lld rewrites=%lld "
	    "gone=%lld full=%lld unknown=%lld resends=%lld already=%lld "
	    "kills=%lld kills_late=%lld self_resends=%lld short_wait=%lld "
	    "call_ms=%lld unpushed=%zu unknown_left=%lld unreplicated_left=%lld "
	    "errors=%lld\n", p.calls, p.jobs[0], p.jobs[1], p.rows, p.rewrites,
	    p.gone, p.full, p.unknown, p.resends, p.already, p.kills,
	    p.kills_late, p.self_resends, p.short_wait, timed > 0 ? p.call_ms /
	    timed : 0, p.npend, unknown, unrepl, p.errors);
	fclose(p.ledger);
	if (p.c != NULL)
		redisFree(p.c);
	free(p.pend);
	return rc;
}
