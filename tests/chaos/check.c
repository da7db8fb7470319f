/* check.c - the end of a chaos run (the wait before it: wait.c).
 *
 * `chaos_helper check redis=PORT pg=CONNINFO ledger=FILE handled=FILE
 * table=T pgq=Q execq=Q prefix=P [upq=Q tbq=Q mledger=FILE stats=FILE]`
 * asserts:
 *   - every job the producers sent was acknowledged: a ledger has a line
 *     per job and call outcome (u: no reply, r: fewer replicas than asked,
 *     a: acknowledged, pushed or already accepted), a job's best line
 *     counts, and a job whose best is "u" is of unknown outcome: a
 *     failure, its id printed (the ledger, cache_ledger and, with mledger=,
 *     the upsert and two-table queues' jobs, whose rows check-modes
 *     checks);
 *   - every good postgres job is in the table exactly once and not dead,
 *     or dead (with a reason) and not in the table; a refused row ("pb-")
 *     is dead and not in the table;
 *   - every exec job was handled at least once, or is dead;
 *   - no row of an unknown id; nothing left in ready, proc, delayed,
 *     requeue or any other list of a queue but dead; the foreign keys
 *     untouched; no id held as live (a score in [0, 1)) by pgq, execq, upq or tbq
 *     (every queue keeps ids);
 *   - with cache_ledger=FILE (produce-cache's jobs, "a|u|r ID ROWS"): each
 *     such job's ROWS rows written exactly once (all or none, no row
 *     twice), and the cache as chaos_cache_check wants it (keyprefix=,
 *     cache_stats=FILE, churn=FILE: the reports it prints).
 * Prints the producers' summary (calls, jobs, resends, already accepted,
 * unknown left, from the reports stats=FILE of produce and cache_stats=
 * and the ledgers), the rest (rows, duplicates, lost, dead by reason) and
 * the ids of every failure; exit 1 on any. Jobs Redis acknowledged but
 * fewer replicas did, and no later call of theirs was acknowledged by
 * them ("r", --failover: a failover may legitimately lose them), may be
 * missing, but never doubled; they are counted apart. With
 * sentinels=P1,P2,P3 master=NAME (wait and check) Redis is the primary the
 * sentinels name, not redis=PORT. */
#include "chaos.h"

#include <jansson.h>
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ------------------------------------------------- a tiny string map */

struct entry {
	char *key;
	int acked, uncertain, unreplicated, rows, dead, handled, stuck;
	int mode;            /* a job of the upsert or two-table queue
	                      * (check-modes checks it; counted here) */
	int want, distinct;  /* rows a written job has (1, or its cached
	                      * rows); rows with distinct n */
	int forged;          /* a forged job's (forge.c): its kind + 1 */
	char *target;        /* its honest id or key */
	char *reason, *error;  /* of its first dead entry: reason, last error */
	int id_held;         /* its id in its queue's ids set, with id_score */
	double id_score;
	struct entry *next;
};

#define NBUCKETS 65536
static struct entry *buckets[NBUCKETS];

static struct entry *
get(const char *key, int create)
{
	uint64_t h = 1469598103934665603ULL;
	for (const unsigned char *p = (const unsigned char *)key; *p; p++)
		h = (h ^ *p) * 1099511628211ULL;
	struct entry **b = &buckets[h % NBUCKETS];
	for (struct entry *e = *b; e != NULL; e = e->next)
		if (strcmp(e->key, key) == 0)
			return e;
	if (!create)
		return NULL;
	struct entry *e = calloc(1, sizeof(*e));
	if (e == NULL || (e->key = strdup(key)) == NULL)
		chaos_die("out of memory");
	e->next = *b;
	*b = e;
	return e;
}

/* The id of a list element: the producer's "id" of the document, inside
 * ferry's wrapper when there is one; by a plain text search when the bytes
 * are not JSON (invalid UTF-8 survives in elements and dead entries). A
 * forged job's (forge.c) is its marker's f-K, not the id it carries. */
static int
element_id(const char *el, size_t len, char *out, size_t size)
{
	static const char wrap[] = "{\"ferry\":1,", mark[] = ",\"job\":";
	const char *doc = el, *end = el + len;
	json_error_t err;
	long long forged = chaos_forged_of(el, len);
	out[0] = '\0';
	if (forged > 0)
		return snprintf(out, size, "f-%lld", forged) > 0;
	if (len > sizeof(wrap) && memcmp(el, wrap, sizeof(wrap) - 1) == 0) {
		const char *m = memmem(el, len, mark, sizeof(mark) - 1);
		if (m != NULL) {
			doc = m + sizeof(mark) - 1;
			end = el + len - 1;
		}
	}
	if (end < doc)
		end = doc;
	json_t *j = json_loadb(doc, (size_t)(end - doc), JSON_DECODE_ANY, &err);
	const char *id = json_string_value(json_object_get(j, "id"));
	if (id != NULL)
		snprintf(out, size, "%s", id);
	json_decref(j);
	if (out[0] == '\0') {
		const char *p = memmem(doc, (size_t)(end - doc), "\"id\":\"", 6);
		if (p != NULL) {
			p += 6;
			size_t n = 0;
			while (p + n < end && p[n] != '"' && n + 1 < size)
				n++;
			memcpy(out, p, n);
			out[n] = '\0';
		}
	}
	return out[0] != '\0';
}

static void mark_stuck(const char *id);

/* A job of produce-cache: pc-N, pk-N, pb-c-N, pb-k-N. */
static int
cached_id(const char *id)
{
	return (id[0] == 'p' && (id[1] == 'c' || id[1] == 'k') && id[2] == '-') ||
	    (strncmp(id, "pb-", 3) == 0 && (id[3] == 'c' || id[3] == 'k'));
}

/* ------------------------------------------------------------- redis */

/* Print (when `say`) and count the non-empty lists and sorted sets of
 * queue q other than dead; dead entries are handed to `dead_cb`. */
long long
chaos_leftovers(redisContext *c, const char *prefix, const char *q, int say,
    void (*dead_cb)(const char *, size_t, const char *))
{
	char pat[200];
	long long left = 0;
	/* what is left, by kind of key: ready, proc:*, delayed, requeue... */
	struct { char kind[32]; long long keys, n; } kinds[16];
	int nkinds = 0;
	snprintf(pat, sizeof(pat), "%s:{%s}:*", prefix, q);
	char cursor[32] = "0";
	do {
		redisReply *r = redisCommand(c, "SCAN %s MATCH %s COUNT 1000",
		    cursor, pat);
		if (r == NULL || r->type != REDIS_REPLY_ARRAY || r->elements != 2) {
			if (r)
				freeReplyObject(r);
			return -1;
		}
		snprintf(cursor, sizeof(cursor), "%s", r->element[0]->str);
		redisReply *keys = r->element[1];
		for (size_t i = 0; i < keys->elements; i++) {
			const char *k = keys->element[i]->str;
			redisReply *t = redisCommand(c, "TYPE %s", k);
			if (t == NULL)
				continue;
			int list = strcmp(t->str, "list") == 0;
			int zset = strcmp(t->str, "zset") == 0;
			freeReplyObject(t);
			size_t kl = strlen(k);
			int dead = kl > 5 && strcmp(k + kl - 5, ":dead") == 0;
			/* the ids an idempotent queue holds are not jobs */
			int ids = kl > 4 && strcmp(k + kl - 4, ":ids") == 0;
			if (dead && list && dead_cb != NULL) {
				redisReply *d = redisCommand(c, "LRANGE %s 0 -1", k);
				for (size_t j = 0; d && j < d->elements; j++)
					dead_cb(d->element[j]->str, d->element[j]->len, q);
				if (d)
					freeReplyObject(d);
			}
			if (dead || ids || (!list && !zset))
				continue;
			redisReply *n = redisCommand(c, list ? "LLEN %s" : "ZCARD %s", k);
			if (n != NULL && n->integer > 0) {
				const char *kind = strstr(k, "}:");
				char kb[32];
				kind = kind ? kind + 2 : k;
				snprintf(kb, sizeof(kb), "%.*s", (int)strcspn(kind, ":"), kind);
				int i = 0;
				while (i < nkinds && strcmp(kinds[i].kind, kb) != 0)
					i++;
				if (i == nkinds && nkinds < 16) {
					snprintf(kinds[i].kind, sizeof(kinds[i].kind), "%s", kb);
					kinds[i].keys = kinds[i].n = 0;
					nkinds++;
				}
				if (i < nkinds) {
					kinds[i].keys++;
					kinds[i].n += n->integer;
				}
				left += n->integer;
			}
			if (n)
				freeReplyObject(n);
			redisReply *els = say ? redisCommand(c, list ?
			    "LRANGE %s 0 -1" : "ZRANGE %s 0 -1", k) : NULL;
			for (size_t j = 0; els && j < els->elements; j++) {
				char id[200];
				if (element_id(els->element[j]->str,
				    els->element[j]->len, id, sizeof(id)))
					mark_stuck(id);
			}
			if (els)
				freeReplyObject(els);
		}
		freeReplyObject(r);
	} while (strcmp(cursor, "0") != 0);
	for (int i = 0; say && i < nkinds; i++)
		printf("  left in %s:{%s}:%s%s: %lld jobs in %lld keys\n", prefix, q,
		    kinds[i].kind, strcmp(kinds[i].kind, "proc") == 0 ? ":*" : "",
		    kinds[i].n, kinds[i].keys);
	return left;
}

/* The ids queue q holds as live (a score in [0, 1): src/redis/lua/common.lua,
 * idempotency)
 * once nothing waits or runs: every job is done (a time) or dead (-1). The
 * ids held as dead and as done are printed. -1 when Redis failed. */
static long long
ids_still_live(redisContext *c, const char *prefix, const char *q)
{
	long long n[3] = { -1, -1, -1 };
	const char *range[3][2] = { { "0", "(1" }, { "-1", "-1" }, { "1", "+inf" } };

	for (int i = 0; i < 3; i++) {
		redisReply *r = redisCommand(c, "ZCOUNT %s:{%s}:ids %s %s", prefix,
		    q, range[i][0], range[i][1]);
		if (r != NULL && r->type == REDIS_REPLY_INTEGER)
			n[i] = r->integer;
		if (r != NULL)
			freeReplyObject(r);
	}
	printf("chaos: %s: ids held %lld done, %lld dead, %lld live\n", q, n[2],
	    n[1], n[0]);
	return n[0];
}

/* ---------------------------------------------------------- checking */

struct reason_count {
	char reason[100];
	long long n;
};
static struct reason_count reasons[2][64];
static long long dead_total[2], dead_hostile[2], dead_unknown[2],
    dead_forged[2];
static const char *queue_names[2];

static void
count_reason(int q, const char *reason)
{
	char r[100];
	/* the first 90 bytes */
	snprintf(r, sizeof(r), "%.90s", reason);
	for (int i = 0; i < 64; i++) {
		if (reasons[q][i].n == 0)
			snprintf(reasons[q][i].reason, sizeof(r), "%s", r);
		if (strcmp(reasons[q][i].reason, r) == 0) {
			reasons[q][i].n++;
			return;
		}
	}
}

static void
on_dead(const char *el, size_t len, const char *qname)
{
	int q = strcmp(qname, queue_names[1]) == 0;
	json_error_t err;
	json_t *e = json_loadb(el, len, JSON_DECODE_ANY | JSON_ALLOW_NUL, &err);
	const char *reason = json_string_value(json_object_get(e, "reason"));
	const char *id = json_string_value(json_object_get(e, "id"));
	const char *le = json_string_value(json_object_get(e, "last_error"));
	char idbuf[200];
	dead_total[q]++;
	if (chaos_forged_of(el, len) > 0 && element_id(el, len, idbuf,
	    sizeof(idbuf)))
		id = idbuf;     /* not the honest id it carries */
	if (e == NULL) {
		/* not valid JSON (invalid UTF-8 of the job copied as is): still
		 * find which job it is */
		dead_unknown[q]++;
		const char *r = memmem(el, len, "\"reason\":\"", 10);
		static char rb[80];
		if (r != NULL) {
			size_t n = 0;
			r += 10;
			while (r + n < el + len && r[n] != '"' && n + 1 < sizeof(rb))
				n++;
			memcpy(rb, r, n);
			rb[n] = '\0';
			reason = rb;
		}
		const char *j = memmem(el, len, ",\"job\":", 7);
		if (j != NULL && element_id(j, (size_t)(el + len - j), idbuf,
		    sizeof(idbuf)))
			id = idbuf;
	} else if (id == NULL) {
		const char *raw = json_string_value(json_object_get(e, "job"));
		if (raw != NULL && element_id(raw, strlen(raw), idbuf, sizeof(idbuf)))
			id = idbuf;
	}
	struct entry *x = id ? get(id, 0) : NULL;
	if (x != NULL) {
		if (x->dead++ == 0) {
			x->reason = strdup(reason ? reason : "");
			x->error = strdup(le ? le : "");
		}
		if (x->forged) {
			dead_forged[q]++;
			json_decref(e);
			return;
		}
		/* "failed by the handler" says little: add the start of the
		 * last error, up to its first colon (the SQLSTATE's message) */
		char rr[200];
		snprintf(rr, sizeof(rr), "%s%s%.*s", reason && *reason ? reason :
		    "(no reason)", le && strcmp(le, reason ? reason : "") ? ": " : "",
		    le && strcmp(le, reason ? reason : "") ?
		    (int)strcspn(le, ":") : 0, le ? le : "");
		count_reason(q, rr);
	} else {
		dead_hostile[q]++;
	}
	json_decref(e);
}

static void
mark_stuck(const char *id)
{
	struct entry *e = get(id, 0);
	if (e != NULL)
		e->stuck++;
}

struct failures {
	const char *what;
	long long n;
	struct chaos_buf ids;
};

static void
fail(struct failures *f, const char *id)
{
	if (f->n++ < 40)
		chaos_buf_printf(&f->ids, " %s", id);
}

static void
print_fail(const struct failures *f)
{
	if (f->n > 0)
		printf("chaos: FAIL %lld %s:%s%s\n", f->n, f->what,
		    f->ids.p ? f->ids.p : "", f->n > 40 ? " ..." : "");
}

/* A forged job's ledger line, "f KIND QUEUE f-K TARGET a|u|r" ("- - n":
 * not made, nothing to forge it from; "n" at the end: not pushed). */
static void
load_forged(const char *line)
{
	char kind[32], q[16], fid[32], target[256], st = 0;
	int k = sscanf(line, "f %31s %15s %31s %255s %c", kind, q, fid, target,
	    &st) == 5 ? chaos_forged_kind(kind) : -1;
	if (k < 0)
		return;
	if (st == 'n') {
		chaos_forged_unmade(k);
		return;
	}
	struct entry *e = get(fid, 1);
	e->forged = k + 1;
	e->target = strdup(target);
	e->want = 1;
	e->acked |= st == 'a';
	e->unreplicated |= st == 'r';
	e->uncertain |= st == 'u';
}

/* A ledger: "a|r|u ID" per line ("a|r|u ID ROWS" for cached jobs, "a|r|u
 * ID TAIL" for the upsert and two-table queues' jobs, `mode`), the same
 * job on several lines as its calls went (u: no reply, r: fewer replicas
 * than asked, a: acknowledged): its best line counts. counts[0|1]: jobs
 * (not lines) of pg or exec. Hostile elements ("h ...") are counted in
 * *hostile, forged jobs ("f ...") go to load_forged. */
static int
load_ledger(const char *path, long long *counts, long long *hostile, int mode)
{
	FILE *f = fopen(path, "r");
	char line[512];
	if (f == NULL)
		return -1;
	while (fgets(line, sizeof(line), f) != NULL) {
		line[strcspn(line, "\n")] = '\0';
		if (line[0] == 'h') {
			(*hostile)++;
			continue;
		}
		if (line[0] == 'f') {
			load_forged(line);
			continue;
		}
		if (strlen(line) < 3)
			continue;
		/* "a ID" or, cached jobs, "a ID ROWS" */
		char *rows = strchr(line + 2, ' ');
		if (rows != NULL)
			*rows++ = '\0';
		struct entry *e = get(line + 2, 1);
		if (e->want == 0)
			counts[line[2] == 'e']++;
		e->mode = mode;
		e->want = rows != NULL && !mode ? atoi(rows) : 1;
		if (line[0] == 'a')
			e->acked = 1;
		else if (line[0] == 'r')
			e->unreplicated = 1;
		else
			e->uncertain = 1;
	}
	fclose(f);
	return 0;
}

static int
load_rows(const char *conninfo, const char *table, long long *rows,
    long long *foreign_rows)
{
	PGconn *pg = PQconnectdb(conninfo);
	if (PQstatus(pg) != CONNECTION_OK) {
		fprintf(stderr, "chaos check: postgres: %s", PQerrorMessage(pg));
		PQfinish(pg);
		return -1;
	}
	char sql[300];
	snprintf(sql, sizeof(sql), "SELECT job_id, count(*), count(DISTINCT n) "
	    "FROM %s GROUP BY job_id", table);
	PGresult *r = PQexec(pg, sql);
	if (PQresultStatus(r) != PGRES_TUPLES_OK) {
		fprintf(stderr, "chaos check: %s", PQerrorMessage(pg));
		PQclear(r);
		PQfinish(pg);
		return -1;
	}
	for (int i = 0; i < PQntuples(r); i++) {
		const char *id = PQgetvalue(r, i, 0);
		int n = atoi(PQgetvalue(r, i, 1));
		*rows += n;
		struct entry *e = get(id, 0);
		if (e == NULL) {
			/* a hostile document's own row ("h-..."), or unknown */
			if (strncmp(id, "h-", 2) != 0)
				printf("  row of an id nobody enqueued: %.80s (x%d)\n",
				    id, n);
			(*foreign_rows)++;
			continue;
		}
		e->rows += n;
		e->distinct += atoi(PQgetvalue(r, i, 2));
	}
	PQclear(r);
	PQfinish(pg);
	return 0;
}

static void
load_handled(const char *path)
{
	FILE *f = fopen(path, "r");
	char line[512];
	if (f == NULL)
		return;
	while (fgets(line, sizeof(line), f) != NULL) {
		line[strcspn(line, "\n")] = '\0';
		struct entry *e = get(line, 0);
		if (e != NULL)
			e->handled++;
	}
	fclose(f);
}

/* The ids queue q holds (its ids set, with their scores) into the entries
 * of honest jobs; -1 when Redis failed. */
static int
load_ids(redisContext *c, const char *prefix, const char *q)
{
	redisReply *r = redisCommand(c, "ZRANGE %s:{%s}:ids 0 -1 WITHSCORES",
	    prefix, q);
	int ok = r != NULL && r->type == REDIS_REPLY_ARRAY;
	for (size_t i = 0; ok && i + 1 < r->elements; i += 2) {
		struct entry *e = get(r->element[i]->str, 0);
		if (e != NULL && !e->forged && !e->mode) {
			e->id_held = 1;
			e->id_score = strtod(r->element[i + 1]->str, NULL);
		}
	}
	if (r != NULL)
		freeReplyObject(r);
	return ok ? 0 : -1;
}

/* Is an honest job's id held as its own outcome (src/redis/lua/common.lua,
 * idempotency): written or handled, a time to forget it (or forgotten
 * already, a window after); dead, below 0. Only the job accepted under the
 * id moves it (R24): a forged job that carried it, settled after it with
 * another outcome, must not have. -1: the job never arrived. */
static int
id_as_outcome(const struct entry *e)
{
	if (e->dead)
		return e->id_held && e->id_score < 0;
	if (e->rows > 0 || e->handled > 0)
		return !e->id_held || e->id_score >= 1;
	return -1;
}

static void
print_reasons(int q)
{
	printf("chaos: %s: dead %lld (good jobs by reason:", queue_names[q],
	    dead_total[q]);
	int any = 0;
	for (int i = 0; i < 64 && reasons[q][i].n > 0; i++, any = 1)
		printf("%s %lld \"%s\"", i ? "," : "", reasons[q][i].n,
		    reasons[q][i].reason);
	printf("%s; hostile %lld; forged %lld", any ? "" : " none",
	    dead_hostile[q], dead_forged[q]);
	if (dead_unknown[q])
		printf("; %lld entries not valid JSON", dead_unknown[q]);
	printf(")\n");
}

int
chaos_check_main(int argc, char **argv)
{
	const char *prefix = chaos_arg(argc, argv, "prefix", "ferry");
	queue_names[0] = chaos_arg(argc, argv, "pgq", "chaos_pg");
	queue_names[1] = chaos_arg(argc, argv, "execq", "chaos_exec");
	long long jobs[2] = { 0, 0 }, hostile = 0, rows = 0, foreign_rows = 0;
	long long cjobs[2] = { 0, 0 }, chostile = 0;
	long long mjobs[2] = { 0, 0 }, mhostile = 0;
	const char *cledger = chaos_arg(argc, argv, "cache_ledger", NULL);
	const char *mledger = chaos_arg(argc, argv, "mledger", NULL);
	if (load_ledger(chaos_arg(argc, argv, "ledger", ""), jobs, &hostile,
	    0) != 0 || (cledger != NULL && load_ledger(cledger, cjobs, &chostile,
	    0) != 0) || (mledger != NULL && load_ledger(mledger, mjobs, &mhostile,
	    1) != 0))
		chaos_die("check: no ledger");
	if (load_rows(chaos_arg(argc, argv, "pg", ""),
	    chaos_arg(argc, argv, "table", "chaos_rows"), &rows, &foreign_rows))
		return 2;
	load_handled(chaos_arg(argc, argv, "handled", ""));
	redisContext *c = chaos_redis_arg(argc, argv, 10000);
	if (c == NULL)
		chaos_die("check: cannot connect to redis (the primary)");
	long long left = 0;
	for (int q = 0; q < 2; q++) {
		left += chaos_leftovers(c, prefix, queue_names[q], 1, on_dead);
		if (load_ids(c, prefix, queue_names[q]) != 0)
			chaos_die("check: cannot read the ids of %s", queue_names[q]);
	}
	int foreign = chaos_foreign_check(c);

	struct failures dup = { "duplicate rows (written more than once)", 0, { 0 } },
	    lost = { "lost (acknowledged by Redis, neither written nor dead)", 0,
		{ 0 } },
	    deadw = { "dead-lettered although written (a replay writes them "
		"twice)", 0, { 0 } },
	    badw = { "refused rows written", 0, { 0 } },
	    noreason = { "dead without a reason", 0, { 0 } },
	    stuck = { "stuck (still in a ready, processing or retry list)", 0,
		{ 0 } },
	    part = { "written in part, or a row of them twice (cached jobs)", 0,
		{ 0 } },
	    unknown = { "of unknown outcome: no call of theirs was acknowledged "
		"(sent, no reply), so nothing says whether they are in Redis", 0,
		{ 0 } },
	    moved = { "honest jobs whose id is held as another outcome than "
		"their own (written or handled: done, dead: dead): a job pushed "
		"past the script with their id (a forged one) moved it", 0, { 0 } },
	    ownkey = { "honest jobs dead for \"a key of ferry's own written for "
		"another job\"", 0, { 0 } };
	long long ids_own = 0, ids_forgotten = 0, forged_bad = 0;
	long long cached_rows = 0, cached_written = 0;
	long long handled_twice = 0, handled = 0, uncertain = 0, unpushed = 0;
	long long unrepl = 0, unrepl_lost = 0, mode_unrepl = 0;
	long long had_u = 0, had_r = 0;     /* jobs with a "u", an "r" line */
	/* the absent "may be lost" ones, as runs of consecutive ids (the
	 * producer numbers both queues from one counter, in time order) */
	static char absent[1 << 20];
	long long max_id = 0;
	for (size_t b = 0; b < NBUCKETS; b++)
		for (struct entry *e = buckets[b]; e != NULL; e = e->next) {
			if (e->forged) {
				/* never an honest job's: forge.c judges it */
				forged_bad += chaos_forged_verdict(e->forged - 1, e->key,
				    e->target, e->acked ? 'a' : e->unreplicated ? 'r' :
				    'u', e->rows, e->dead, e->reason, e->error, e->handled);
				if (e->stuck)
					fail(&stuck, e->key);
				continue;
			}
			int exec = e->key[0] == 'e';
			int unsure = e->uncertain && !e->acked && !e->unreplicated;
			uncertain += unsure;
			unrepl += e->unreplicated && !e->acked;
			had_u += e->uncertain;
			had_r += e->unreplicated;
			if (unsure)
				fail(&unknown, e->key);
			if (e->mode) {
				/* their rows: check-modes */
				mode_unrepl += e->unreplicated && !e->acked;
				continue;
			}
			if (e->dead && e->reason != NULL && e->reason[0] == '\0')
				fail(&noreason, e->key);
			if (e->dead && (strstr(e->reason, "a key of ferry's own "
			    "written for another job") != NULL || strstr(e->error,
			    "a key of ferry's own written for another job") != NULL))
				fail(&ownkey, e->key);
			int own = id_as_outcome(e);
			if (own == 0) {
				char what[200];
				snprintf(what, sizeof(what), "%s (%s, its id %s)", e->key,
				    e->dead ? "dead" : "done", !e->id_held ? "gone" :
				    e->id_score < 0 ? "dead" : e->id_score < 1 ? "live" :
				    "done");
				fail(&moved, what);
			}
			ids_own += own == 1;
			ids_forgotten += own == 1 && !e->id_held;
			if (e->stuck)
				fail(&stuck, e->key);
			if (exec) {
				handled += e->handled > 0;
				handled_twice += e->handled > 1;
				if (!e->handled && !e->dead && !e->stuck) {
					if (e->acked)
						fail(&lost, e->key);
					else if (e->unreplicated) {
						unrepl_lost++;
						long long n = atoll(strchr(e->key, '-') + 1);
						if (n > 0 && n < (long long)sizeof(absent)) {
							absent[n] = 1;
							max_id = n > max_id ? n : max_id;
						}
					} else
						unpushed++;
				}
				continue;
			}
			int bad = strncmp(e->key, "pb-", 3) == 0;
			if (cached_id(e->key)) {
				cached_rows += e->rows;
				cached_written += e->rows > 0;
			}
			if (e->rows > e->want)
				fail(&dup, e->key);
			else if (e->rows > 0 && (e->rows < e->want ||
			    e->distinct != e->rows))
				fail(&part, e->key);
			if (e->rows > 0 && bad)
				fail(&badw, e->key);
			else if (e->rows > 0 && e->dead)
				fail(&deadw, e->key);
			if (e->rows == 0 && !e->dead && !e->stuck) {
				if (e->acked)
					fail(&lost, e->key);
				else if (e->unreplicated) {
					unrepl_lost++;
					/* the range: of p-N and pb-N, not of cached ids */
					long long n = cached_id(e->key) ? 0 :
					    atoll(strchr(e->key, '-') + 1);
					if (n > 0 && n < (long long)sizeof(absent)) {
						absent[n] = 1;
						max_id = n > max_id ? n : max_id;
					}
				} else
					unpushed++;
			}
		}

	/* the producers' reports (produce, produce-cache): KEY=VALUE */
	const char *ps = chaos_arg(argc, argv, "stats", NULL);
	const char *cs = chaos_arg(argc, argv, "cache_stats", NULL);
#define BOTH(k) (chaos_report_value(ps, k) + chaos_report_value(cs, k))
	printf("chaos: producers: %lld calls, %lld jobs, %lld resends, %lld "
	    "already accepted, %lld unknown left (must be 0)", BOTH("calls"),
	    jobs[0] + jobs[1] + cjobs[0] + cjobs[1] + mjobs[0] + mjobs[1],
	    BOTH("resends"), BOTH("already"), uncertain);
#undef BOTH
	if (unrepl > 0 || chaos_arg(argc, argv, "sentinels", NULL) != NULL)
		printf(", %lld acknowledged without enough replicas left", unrepl);
	printf("; %lld jobs had a call of unknown outcome", had_u);
	if (had_r > 0 || chaos_arg(argc, argv, "sentinels", NULL) != NULL)
		printf(", %lld one acknowledged without enough replicas", had_r);
	printf("\n");
	printf("chaos: enqueued: pg %lld jobs, exec %lld jobs (%lld with an "
	    "unknown outcome, %lld of them never arrived), %lld hostile elements\n",
	    jobs[0], jobs[1], uncertain, unpushed, hostile);
	if (unrepl > 0 || chaos_arg(argc, argv, "sentinels", NULL) != NULL)
		printf("chaos: may be lost: %lld jobs Redis acknowledged but fewer "
		    "replicas than asked (WAIT) did, and no call of theirs sent "
		    "again was acknowledged by them (%lld of chaos_up, chaos_tb); "
		    "%lld of the others never arrived (not counted as lost; a "
		    "duplicate still fails)\n", unrepl, mode_unrepl, unrepl_lost);
	if (unrepl_lost > 0) {
		/* runs of absent ids, allowing gaps of a few present ones */
		printf("chaos: may be lost and absent, by id range:");
		int shown = 0;
		for (long long i = 1; i <= max_id && shown < 30; i++) {
			if (!absent[i])
				continue;
			long long j = i, n = 0;
			for (long long k = i; k <= max_id && k - j <= 8; k++)
				if (absent[k]) {
					j = k;
					n++;
				}
			printf(" %lld-%lld (%lld)", i, j, n);
			shown++;
			i = j;
		}
		printf("\n");
	}
	printf("chaos: %s: rows %lld (%lld of hostile documents), duplicates "
	    "%lld, lost %lld\n", queue_names[0], rows, foreign_rows, dup.n,
	    lost.n);
	if (cledger != NULL)
		printf("chaos: %s: of them %lld jobs whose rows waited in cache keys "
		    "(%lld written: %lld rows), written in part %lld\n",
		    queue_names[0], cjobs[0], cached_written, cached_rows, part.n);
	print_reasons(0);
	printf("chaos: %s: handled %lld (more than once %lld)\n", queue_names[1],
	    handled, handled_twice);
	print_reasons(1);
	printf("chaos: redis: %lld jobs left outside dead, %d foreign keys "
	    "changed\n", left, foreign);
	/* every queue keeps ids */
	const char *idq[4] = { queue_names[0], queue_names[1],
		chaos_arg(argc, argv, "upq", NULL), chaos_arg(argc, argv, "tbq",
		    NULL) };
	long long live_ids = 0;
	struct chaos_buf live_qs = { 0 };
	for (int q = 0; q < 4; q++) {
		if (idq[q] == NULL)
			continue;
		long long n = ids_still_live(c, prefix, idq[q]);
		live_ids += n < 0 ? 1 : n;
		if (n != 0)
			chaos_buf_printf(&live_qs, " %s (%lld)", idq[q], n);
	}
	printf("chaos: %s, %s: ids of honest jobs held as their own outcome "
	    "%lld (%lld of them forgotten a window after), as another %lld\n",
	    queue_names[0], queue_names[1], ids_own, ids_forgotten, moved.n);
	chaos_forged_report();
	int cache_fails = cledger == NULL ? 0 : chaos_cache_check(c, prefix,
	    queue_names, 2, chaos_arg(argc, argv, "keyprefix", NULL),
	    chaos_arg(argc, argv, "cache_stats", NULL), chaos_arg(argc, argv,
	    "churn", NULL));
	redisFree(c);
	print_fail(&dup);
	print_fail(&lost);
	print_fail(&deadw);
	print_fail(&badw);
	print_fail(&noreason);
	print_fail(&stuck);
	print_fail(&part);
	if (left > 0)
		printf("chaos: FAIL %lld jobs left in ready/proc/delayed/requeue "
		    "lists\n", left);
	if (foreign > 0)
		printf("chaos: FAIL %d foreign keys changed\n", foreign);
	print_fail(&unknown);
	print_fail(&moved);
	print_fail(&ownkey);
	chaos_forged_failures();
	if (live_ids != 0)
		printf("chaos: FAIL ids still held as live (a score in [0, 1)) after the "
		    "drain (-1: unreadable):%s: a job done or dead that settle, the "
		    "reaper or a dead-letter tool did not mark\n", live_qs.p);
	chaos_buf_free(&live_qs);
	int failed = dup.n || lost.n || deadw.n || badw.n || noreason.n || stuck.n ||
	    part.n || unknown.n || left != 0 || foreign || cache_fails ||
	    live_ids != 0 || moved.n || ownkey.n || forged_bad;
	struct failures *all[] = { &dup, &lost, &deadw, &badw, &noreason, &stuck,
		&part, &unknown, &moved, &ownkey };
	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
		chaos_buf_free(&all[i]->ids);
	return failed ? 1 : 0;
}

