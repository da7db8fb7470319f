/* modes.c - the chaos suite's upsert queue (chaos_up) and two-table queue
 * (chaos_tb): their jobs, seeded, and `chaos_helper check-modes ...`, the
 * checker of their final tables.
 *
 * chaos_up (mode = upsert, key = k, version = v, op_member = op): job u-N
 * is {"id":"u-N","op":"delete"|"upsert","data":{"k":K,"v":V,"val":"kK vV"}}
 * for a key K drawn at random from `keys` and V its next version (a per-key
 * counter from 1: versions strictly increase in the producer's order and
 * are unique per key); about one op in three deletes. Ledger line
 * "a|u|r u-N K V w|d" (a line per call outcome of the job: its best
 * line, a then r then u, counts).
 *
 * chaos_tb (tables = orders, lines; lines.order_id references orders.o):
 * job t-N is one order (o = N) and 1 + N % 3 lines, the lines' array first
 * in the document. Ledger line "a|u|r t-N NLINES".
 *
 * What check-modes asserts, from doc/postgresql.md, "Upsert, update and deletes": a
 * write of version w applies when the key has no row or a row older than
 * w; a delete of version d removes a row older than d; a deleted row keeps
 * no version, so a write older than the delete that commits after it
 * inserts the row again. For a key, with W the highest acknowledged write,
 * D the highest acknowledged delete and Dx the highest delete acknowledged
 * or of unknown outcome ("u", "r": it may have arrived or not; `check`
 * fails a job left at "u", so that is "r" under --failover), the final
 * state is acceptable when it is
 *   - a row equal (v and val) to an enqueued write w with w >= W and w > D
 *     (w the newest write that arrived, newer than every delete), or
 *   - a row equal to any enqueued write w < Dx with W < Dx (the newest op
 *     arrived is a delete; an older write committed after it), or
 *   - no row, when there is no acknowledged write or W < Dx.
 * So a key whose newest acknowledged op is a write, with nothing newer of
 * unknown outcome, must end as exactly that write. An AFTER INSERT OR
 * UPDATE trigger logs every applied write (chaos_up_log): each (k, v) at
 * most once (a replayed batch would apply its writes again).
 * chaos_tb: every acknowledged job's order once and its lines once each
 * (1 + N % 3 of them, line numbers 1..n); a job of unknown outcome all or
 * nothing; no order or line of an id nobody sent, no orphan line.
 * Both: nothing dead (no hostile element goes to them), nothing left. */
#include "chaos.h"

#include <jansson.h>
#include <libpq-fe.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void
chaos_modes_init(struct chaos_modes *m, uint64_t seed, long long keys)
{
	memset(m, 0, sizeof(*m));
	m->rng.s = seed ^ 0x6d6f646573ULL;  /* not the plan's sequence */
	m->keys = keys > 0 ? keys : 500;
	m->ver = calloc((size_t)m->keys, sizeof(*m->ver));
	if (m->ver == NULL)
		chaos_die("out of memory");
}

void
chaos_modes_free(struct chaos_modes *m)
{
	free(m->ver);
	m->ver = NULL;
}

void
chaos_modes_job(struct chaos_modes *m, int w, char *id, size_t idn,
    struct chaos_buf *doc, char *tail, size_t tailn)
{
	long long n = ++m->next[w];
	if (w == 0) {
		long long k = chaos_rng_range(&m->rng, 0, m->keys - 1);
		long long v = ++m->ver[k];
		int del = chaos_rng_range(&m->rng, 0, 2) == 0;
		snprintf(id, idn, "u-%lld", n);
		chaos_buf_printf(doc, "{\"id\":\"%s\",\"op\":\"%s\",\"data\":"
		    "{\"k\":%lld,\"v\":%lld,\"val\":\"k%lld v%lld\"}}", id,
		    del ? "delete" : "upsert", k, v, k, v);
		snprintf(tail, tailn, "%lld %lld %c", k, v, del ? 'd' : 'w');
		return;
	}
	int nl = 1 + (int)(n % 3);
	snprintf(id, idn, "t-%lld", n);
	chaos_buf_printf(doc, "{\"id\":\"%s\",\"data\":{\"lines\":[", id);
	for (int i = 1; i <= nl; i++)
		chaos_buf_printf(doc, "%s{\"order_id\":%lld,\"line\":%d,\"item\":"
		    "\"item %lld.%d\"}", i > 1 ? "," : "", n, i, n, i);
	chaos_buf_printf(doc, "],\"orders\":[{\"o\":%lld,\"job_id\":\"%s\"}]}}",
	    n, id);
	snprintf(tail, tailn, "%d", nl);
}

/* ---------------------------------------------------------- checking */

/* One op of chaos_up as the ledger has it. */
struct up_op {
	long long v;
	char st;   /* 'a' acknowledged, 'u'/'r' unknown outcome */
	char op;   /* 'w' or 'd' */
};

struct up_key {
	struct up_op *ops;
	size_t n, cap;
	long long row_v;      /* -1: no row */
	char *row_val;
};

struct tb_job {
	char st;          /* 0: never enqueued */
	int nlines, orders, lines, badline;
};

static long long dead_n[2];
static const char *mq[2];
static char *tb_dead;            /* by job number: dead */
static long long tb_dead_cap;

/* A dead entry of chaos_up or chaos_tb: every one is a failure (no hostile
 * element goes there); the first five printed with their first error. */
static void
on_mode_dead(const char *el, size_t len, const char *q)
{
	int w = strcmp(q, mq[1]) == 0;
	json_error_t err;
	json_t *e = json_loadb(el, len, JSON_DECODE_ANY, &err);
	const char *id = json_string_value(json_object_get(e, "id"));
	const char *why = json_string_value(json_object_get(e, "first_error"));
	long long n = id != NULL && w && strncmp(id, "t-", 2) == 0 ?
	    atoll(id + 2) : 0;
	if (n > 0 && n < tb_dead_cap)
		tb_dead[n] = 1;
	if (dead_n[w]++ < 5)
		printf("chaos: FAIL %s: dead: %s: %.200s\n", q, id ? id : "?",
		    why ? why : json_string_value(json_object_get(e, "reason")) ?
		    json_string_value(json_object_get(e, "reason")) : "?");
	json_decref(e);
}

static PGresult *
query(PGconn *pg, const char *sql)
{
	PGresult *r = PQexec(pg, sql);
	if (PQresultStatus(r) != PGRES_TUPLES_OK) {
		fprintf(stderr, "chaos check-modes: %s: %s", sql,
		    PQerrorMessage(pg));
		PQclear(r);
		return NULL;
	}
	return r;
}

static void failf(long long *n, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Count a failure; print the first 40. */
static void
failf(long long *n, const char *fmt, ...)
{
	va_list ap;
	if ((*n)++ >= 40)
		return;
	printf("chaos: FAIL ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
}

/* Is write version w of key K enqueued (acknowledged or not)? */
static int
has_write(const struct up_key *u, long long w)
{
	for (size_t i = 0; i < u->n; i++)
		if (u->ops[i].v == w && u->ops[i].op == 'w')
			return 1;
	return 0;
}

/* A job's ledger letter by how much it says: a (acknowledged), then r
 * (acknowledged, fewer replicas than asked), then u (no reply); a job is
 * on a line per call of it that was not acknowledged, then on an "a". */
static int
rank(char st)
{
	return st == 'a' ? 3 : st == 'r' ? 2 : st == 'u' ? 1 : 0;
}

/* One chaos_up job of the ledger, by job number. */
struct up_job {
	long long k, v;
	char st, op;
};

static long long
check_up(PGconn *pg, long long keys, const char *ledger, long long *jobs)
{
	struct up_key *u = calloc((size_t)keys, sizeof(*u));
	struct up_job *byn = NULL;
	long long bad = 0, maxn = 0, capn = 0;
	char line[256];
	FILE *f = fopen(ledger, "r");
	if (u == NULL || f == NULL)
		chaos_die("check-modes: no ledger %s", ledger);
	while (fgets(line, sizeof(line), f) != NULL) {
		char st, op;
		long long n, k, v;
		if (sscanf(line, "%c u-%lld %lld %lld %c", &st, &n, &k, &v,
		    &op) != 5 || n <= 0 || k < 0 || k >= keys)
			continue;
		if (n >= capn) {
			long long c = capn ? capn : 4096;
			while (c <= n)
				c *= 2;
			if ((byn = realloc(byn, (size_t)c * sizeof(*byn))) == NULL)
				chaos_die("out of memory");
			memset(byn + capn, 0, (size_t)(c - capn) * sizeof(*byn));
			capn = c;
		}
		if (byn[n].st == 0)
			jobs[0]++;
		if (rank(st) > rank(byn[n].st))
			byn[n] = (struct up_job){ k, v, st, op };
		maxn = n > maxn ? n : maxn;
	}
	fclose(f);
	for (long long n = 1; n <= maxn; n++) {
		if (byn[n].st == 0)
			continue;
		struct up_key *x = &u[byn[n].k];
		if (x->n == x->cap) {
			x->cap = x->cap ? x->cap * 2 : 8;
			x->ops = realloc(x->ops, x->cap * sizeof(*x->ops));
			if (x->ops == NULL)
				chaos_die("out of memory");
		}
		x->ops[x->n++] = (struct up_op){ byn[n].v, byn[n].st, byn[n].op };
	}
	free(byn);
	for (long long k = 0; k < keys; k++)
		u[k].row_v = -1;
	PGresult *r = query(pg, "SELECT k, v, val FROM chaos_up");
	if (r == NULL)
		return -1;
	for (int i = 0; i < PQntuples(r); i++) {
		long long k = atoll(PQgetvalue(r, i, 0));
		if (k < 0 || k >= keys) {
			failf(&bad, "chaos_up: row of a key nobody sent: %lld", k);
			continue;
		}
		u[k].row_v = atoll(PQgetvalue(r, i, 1));
		u[k].row_val = strdup(PQgetvalue(r, i, 2));
	}
	PQclear(r);
	long long rows = 0, deleted = 0, newest_delete = 0, reinserted = 0;
	long long unknown_keys = 0;
	for (long long k = 0; k < keys; k++) {
		struct up_key *x = &u[k];
		long long W = 0, D = 0, Dx = 0;   /* versions start at 1 */
		for (size_t i = 0; i < x->n; i++) {
			const struct up_op *o = &x->ops[i];
			if (o->st == 'a' && o->op == 'w' && o->v > W)
				W = o->v;
			if (o->st == 'a' && o->op == 'd' && o->v > D)
				D = o->v;
			if (o->op == 'd' && o->v > Dx)
				Dx = o->v;
		}
		int unsure = 0;
		for (size_t i = 0; i < x->n; i++)
			unsure |= x->ops[i].st != 'a' && x->ops[i].v > (W > D ? W : D);
		unknown_keys += unsure;
		if (Dx > W)
			newest_delete++;
		if (x->row_v < 0) {
			deleted++;
			if (W > 0 && Dx < W)
				failf(&bad, "chaos_up: key %lld has no row, but its "
				    "write v%lld is newer than every delete (lost)", k, W);
			continue;
		}
		rows++;
		long long w = x->row_v;
		char want[64];
		snprintf(want, sizeof(want), "k%lld v%lld", k, w);
		if (!has_write(x, w) || strcmp(x->row_val, want) != 0) {
			failf(&bad, "chaos_up: key %lld has a row of version %lld "
			    "that no write sent (or the wrong value: %.60s)", k, w,
			    x->row_val);
			continue;
		}
		if (w >= W && w > D)
			continue;           /* the newest write arrived */
		if (Dx > W && Dx > w) {
			reinserted++;
			continue;           /* an older write after the delete */
		}
		failf(&bad, "chaos_up: key %lld ends at version %lld, older than "
		    "its acknowledged newest write v%lld or delete v%lld (a stale "
		    "op won)", k, w, W, D);
	}
	/* none applied twice */
	r = query(pg, "SELECT k, v, count(*) FROM chaos_up_log GROUP BY k, v "
	    "HAVING count(*) > 1");
	if (r == NULL)
		return -1;
	for (int i = 0; i < PQntuples(r); i++)
		failf(&bad, "chaos_up: write of key %lld version %lld applied "
		    "more than once", atoll(PQgetvalue(r, i, 0)),
		    atoll(PQgetvalue(r, i, 1)));
	long long twice = PQntuples(r);
	PQclear(r);
	r = query(pg, "SELECT count(*) FROM chaos_up_log");
	long long applied = r ? atoll(PQgetvalue(r, 0, 0)) : -1;
	if (r)
		PQclear(r);
	printf("chaos: chaos_up: %lld jobs on %lld keys; rows %lld, no row %lld "
	    "(%lld keys with a delete newest, %lld rows re-inserted by an older "
	    "write, %lld keys with newest ops of unknown outcome); writes "
	    "applied %lld, twice %lld\n", jobs[0], keys, rows, deleted,
	    newest_delete, reinserted, unknown_keys, applied, twice);
	for (long long k = 0; k < keys; k++) {
		free(u[k].ops);
		free(u[k].row_val);
	}
	free(u);
	return bad;
}

static long long
check_tb(PGconn *pg, const char *ledger, long long *jobs)
{
	long long cap = 1 << 20, bad = 0, maxn = 0;
	struct tb_job *t = calloc((size_t)cap, sizeof(*t));
	char line[256];
	FILE *f = fopen(ledger, "r");
	if (t == NULL || f == NULL)
		chaos_die("check-modes: no ledger %s", ledger);
	while (fgets(line, sizeof(line), f) != NULL) {
		char st;
		long long n;
		int nl;
		if (sscanf(line, "%c t-%lld %d", &st, &n, &nl) != 3 || n <= 0)
			continue;
		if (n >= cap)
			chaos_die("check-modes: more than %lld chaos_tb jobs", cap);
		jobs[1] += t[n].st == 0;
		if (rank(st) > rank(t[n].st))
			t[n].st = st;
		t[n].nlines = nl;
		maxn = n > maxn ? n : maxn;
	}
	fclose(f);
	PGresult *r = query(pg, "SELECT o, job_id FROM orders");
	if (r == NULL)
		return -1;
	long long orders = PQntuples(r), lines = 0;
	for (int i = 0; i < PQntuples(r); i++) {
		long long o = atoll(PQgetvalue(r, i, 0));
		char want[32];
		snprintf(want, sizeof(want), "t-%lld", o);
		if (o <= 0 || o > maxn || !t[o].st ||
		    strcmp(PQgetvalue(r, i, 1), want) != 0)
			failf(&bad, "chaos_tb: order %lld nobody sent (job_id %.40s)",
			    o, PQgetvalue(r, i, 1));
		else
			t[o].orders++;
	}
	PQclear(r);
	r = query(pg, "SELECT order_id, line FROM lines");
	if (r == NULL)
		return -1;
	lines = PQntuples(r);
	for (int i = 0; i < PQntuples(r); i++) {
		long long o = atoll(PQgetvalue(r, i, 0));
		int l = atoi(PQgetvalue(r, i, 1));
		if (o <= 0 || o > maxn || !t[o].st || l < 1 || l > t[o].nlines) {
			failf(&bad, "chaos_tb: line %d of order %lld nobody sent", l,
			    o);
			continue;
		}
		t[o].lines++;
	}
	PQclear(r);
	r = query(pg, "SELECT count(*) FROM lines l WHERE NOT EXISTS (SELECT 1 "
	    "FROM orders o WHERE o.o = l.order_id)");
	long long orphans = r ? atoll(PQgetvalue(r, 0, 0)) : -1;
	if (r)
		PQclear(r);
	r = query(pg, "SELECT order_id, line FROM lines GROUP BY order_id, line "
	    "HAVING count(*) > 1");
	long long dup_lines = r ? PQntuples(r) : -1;
	for (int i = 0; r && i < PQntuples(r) && i < 40; i++)
		failf(&bad, "chaos_tb: order %lld line %lld written more than once",
		    atoll(PQgetvalue(r, i, 0)), atoll(PQgetvalue(r, i, 1)));
	if (r)
		PQclear(r);
	if (orphans != 0)
		failf(&bad, "chaos_tb: %lld orphan lines (no order)", orphans);
	long long absent = 0, lost = 0;
	for (long long n = 1; n <= maxn; n++) {
		if (!t[n].st)
			continue;
		int none = t[n].orders == 0 && t[n].lines == 0;
		int whole = t[n].orders == 1 && t[n].lines == t[n].nlines;
		if (whole)
			continue;
		if (none && t[n].st != 'a') {
			absent++;
			continue;
		}
		if (none && n < tb_dead_cap && tb_dead[n])
			continue;           /* counted as dead */
		lost += none;
		failf(&bad, "chaos_tb: job t-%lld (%c) has %d orders and %d lines "
		    "(want 1 and %d, each once)", n, t[n].st, t[n].orders,
		    t[n].lines, t[n].nlines);
	}
	printf("chaos: chaos_tb: %lld jobs; orders %lld, lines %lld, orphan lines "
	    "%lld, duplicated lines %lld, lost jobs %lld, %lld of unknown outcome "
	    "never arrived\n", jobs[1], orders, lines, orphans, dup_lines, lost,
	    absent);
	free(t);
	return bad;
}

/* chaos_helper check-modes redis=PORT pg=CONNINFO ledger=FILE keys=N
 * upq=Q tbq=Q prefix=P */
int
chaos_modes_check_main(int argc, char **argv)
{
	const char *prefix = chaos_arg(argc, argv, "prefix", "ferry");
	const char *ledger = chaos_arg(argc, argv, "ledger", "");
	long long keys = chaos_arg_ll(argc, argv, "keys", 500), jobs[2] = { 0, 0 };
	mq[0] = chaos_arg(argc, argv, "upq", "chaos_up");
	mq[1] = chaos_arg(argc, argv, "tbq", "chaos_tb");
	tb_dead_cap = 1 << 20;
	tb_dead = calloc((size_t)tb_dead_cap, 1);
	redisContext *c = chaos_redis_arg(argc, argv, 10000);
	if (c == NULL || tb_dead == NULL)
		chaos_die("check-modes: cannot connect to redis (the primary)");
	long long left = 0;
	for (int w = 0; w < 2; w++) {
		long long l = chaos_leftovers(c, prefix, mq[w], 1, on_mode_dead);
		left += l < 0 ? 1 : l;
	}
	redisFree(c);
	PGconn *pg = PQconnectdb(chaos_arg(argc, argv, "pg", ""));
	if (PQstatus(pg) != CONNECTION_OK) {
		fprintf(stderr, "chaos check-modes: postgres: %s",
		    PQerrorMessage(pg));
		return 2;
	}
	long long bad_up = check_up(pg, keys, ledger, jobs);
	long long bad_tb = check_tb(pg, ledger, jobs);
	PQfinish(pg);
	free(tb_dead);
	if (bad_up < 0 || bad_tb < 0)
		return 2;
	printf("chaos: %s, %s: dead %lld, %lld (want 0: no hostile element goes "
	    "there), %lld jobs left outside dead\n", mq[0], mq[1], dead_n[0],
	    dead_n[1], left);
	if (dead_n[0] || dead_n[1])
		printf("chaos: FAIL %lld good jobs of %s, %lld of %s dead\n",
		    dead_n[0], mq[0], dead_n[1], mq[1]);
	if (left)
		printf("chaos: FAIL %lld jobs of %s, %s left in ready/proc/delayed/"
		    "requeue lists\n", left, mq[0], mq[1]);
	return bad_up || bad_tb || dead_n[0] || dead_n[1] || left ? 1 : 0;
}
