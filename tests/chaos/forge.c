/* forge.c - the hostile producer of a chaos run: forged jobs pushed past
 * the enqueue script (a plain LPUSH, or an RPUSH to the head of the queue)
 * by a producer that can read the queue, and what the checker requires of
 * them.
 *
 * What the enqueue script gives an honest job is that job's alone
 * (doc/design.md, 3.8 and 3.9, R24, R25): its id moves only for the job
 * accepted under it, and a key of ferry's own is read or released only for
 * the job its mark names. The forged jobs try both, at the moment they
 * are made (the plan's "forge" events: plan.c):
 *   - carrying the id of an honest job that is live (ZREVRANGEBYSCORE of
 *     the queue's ids set: waiting, running or retried), pushed behind it
 *     (LPUSH), so that most settle after it with another outcome: id-row
 *     (a row the table takes: written; the id of a job whose row the table
 *     refuses, pb-N, when one is live), id-badrow (a row it refuses, 22P02:
 *     dead), id-badkey (a cache_key outside the cache space: dead at once),
 *     exec's id-ok (handled) and id-fail (the handler fails it). Under a
 *     rule that let any job carrying an id mark it, an honest job written
 *     would end with its id held dead, or an honest job dead with its id
 *     held done;
 *   - naming an honest job's key of ferry's own: key-dead and
 *     key-dead-data (with a row of its own), a key of an honest job that
 *     is dead (its rows refused: its dead entry names the key, which stays
 *     while it is dead), read from the dead list; key-waiting, the key a
 *     waiting honest job's document names (LRANGE of ready) or, when none
 *     waits, a running one's (its processing list, which bkeys names),
 *     pushed to the head of the queue so that it runs next (with no live
 *     job naming a key: key-dead). Each must end dead, "a key of ferry's
 *     own written for another job"; a key-waiting job may find the key
 *     gone already with its job ("cache key expired or evicted").
 *     Under a rule that let any job read the key, it would write the
 *     honest job's rows, or its own, and release the key: the honest job
 *     then dead for a missing key, or rows written twice.
 * Each forged document carries the marker "forged":"f-K" after its "id"
 * (K counts the forged jobs of the run), by which the checker tells it
 * from every honest job: its rows have job_id f-K, its dead entry and its
 * handling (handle.c) are counted as f-K's, never as the id it carries. */
#include "chaos.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum source { S_ID, S_KEY_DEAD, S_KEY_WAITING };
enum body { B_ROW, B_BADROW, B_FOREIGN, B_KEY, B_KEY_ROW, B_EXEC, B_EXEC_FAIL };
enum expect {
	X_ROW,          /* written once, or dead with a reason */
	X_HANDLED,      /* handled, or dead with a reason */
	X_DEAD,         /* dead for `want`, never written */
	X_OWN,          /* dead: a key of ferry's own written for another job */
	X_OWN_OR_GONE,  /* that, or its key was gone by then */
};

static const struct kind {
	const char *name, *queue;
	enum source src;
	enum body body;
	enum expect expect;
	const char *want;       /* X_DEAD: in its dead reason or last error */
	const char *prefer;     /* S_ID: a live id of this prefix, when any */
} kinds[] = {
	{ "id-row", "pg", S_ID, B_ROW, X_ROW, NULL, "pb-" },
	{ "id-badrow", "pg", S_ID, B_BADROW, X_DEAD, "22P02", NULL },
	{ "id-badkey", "pg", S_ID, B_FOREIGN, X_DEAD,
	  "is outside the queue's cache space", NULL },
	{ "key-dead", "pg", S_KEY_DEAD, B_KEY, X_OWN, NULL, NULL },
	{ "key-dead-data", "pg", S_KEY_DEAD, B_KEY_ROW, X_OWN, NULL, NULL },
	{ "key-waiting", "pg", S_KEY_WAITING, B_KEY, X_OWN_OR_GONE, NULL, NULL },
	{ "id-ok", "exec", S_ID, B_EXEC, X_HANDLED, NULL, NULL },
	{ "id-fail", "exec", S_ID, B_EXEC_FAIL, X_DEAD, "asked to fail", NULL },
};
#define NKINDS ((int)(sizeof(kinds) / sizeof(kinds[0])))

static const char OWN_REASON[] = "a key of ferry's own written for another job",
    GONE_REASON[] = "cache key expired or evicted",
    DIED_REASON[] = "worker died while processing",
    MARKER[] = "\"forged\":\"f-";

/* The honest producers' ids (produce.c, produce_cache.c) of a queue. */
static int
honest_id(const char *queue, const char *id)
{
	static const char *const pg[] = { "p-", "pb-", "pc-", "pk-", NULL },
	    *const exec[] = { "e-", "ef-", NULL };
	for (const char *const *p = strcmp(queue, "exec") == 0 ? exec : pg;
	    *p != NULL; p++)
		if (strncmp(id, *p, strlen(*p)) == 0)
			return 1;
	return 0;
}

int
chaos_forged_nkinds(void)
{
	return NKINDS;
}

const char *
chaos_forged_name(int k, const char **queue)
{
	*queue = kinds[k].queue;
	return kinds[k].name;
}

long long
chaos_forged_of(const char *el, size_t len)
{
	const char *m = memmem(el, len, MARKER, sizeof(MARKER) - 1);
	if (m == NULL)
		return 0;
	m += sizeof(MARKER) - 1;
	long long k = 0;
	while (m < el + len && *m >= '0' && *m <= '9' && k < 1000000000)
		k = k * 10 + (*m++ - '0');
	return k;
}

/* ------------------------------------------------------ the producer */

/* Is key one of ferry's own in queue q's cache space: its
 * "<prefix>:{q}:cache:<16 hex>.<n>" (src/redis/lua/common.lua, own_group)? */
static int
own_key(const char *key, const char *prefix, const char *q)
{
	char space[200];
	size_t n = (size_t)snprintf(space, sizeof(space), "%s:{%s}:cache:",
	    prefix, q);
	if (strncmp(key, space, n) != 0 || strspn(key + n,
	    "0123456789abcdefABCDEF") != 16 || key[n + 16] != '.')
		return 0;
	size_t d = strspn(key + n + 17, "0123456789");
	return d > 0 && key[n + 17 + d] == '\0';
}

/* The cache_key of an honest document (not forged) if it is a key of
 * ferry's own, into out; 0 when it is not. */
static int
honest_own_key(const char *doc, size_t len, const char *prefix,
    const char *q, char *out, size_t size)
{
	json_error_t err;
	if (chaos_forged_of(doc, len) != 0)
		return 0;
	json_t *j = json_loadb(doc, len, JSON_DECODE_ANY, &err);
	const char *k = json_string_value(json_object_get(j, "cache_key"));
	const char *id = json_string_value(json_object_get(j, "id"));
	int ok = k != NULL && id != NULL && honest_id("pg", id) &&
	    own_key(k, prefix, q) && strlen(k) < size;
	if (ok)
		snprintf(out, size, "%s", k);
	json_decref(j);
	return ok;
}

/* The dead entries of queue q that came since the last call (the list
 * grows at its head): the keys of ferry's own that honest dead jobs name,
 * but those dead for a key gone (none should be: the checker fails them),
 * remembered; they stay while their jobs are dead. */
static void
read_dead(struct chaos_forger *f, redisContext *c, const char *prefix,
    const char *q)
{
	static const char job[] = ",\"job\":";
	redisReply *r = redisCommand(c, "LLEN %s:{%s}:dead", prefix, q);
	long long len = r != NULL && r->type == REDIS_REPLY_INTEGER ?
	    r->integer : -1, fresh = len - f->dead_seen;
	if (r != NULL)
		freeReplyObject(r);
	if (len < 0)
		return;
	f->dead_seen = len;     /* fewer after a failover: from there on */
	if (fresh <= 0)
		return;
	r = redisCommand(c, "LRANGE %s:{%s}:dead 0 %lld", prefix, q,
	    (fresh < 200 ? fresh : 200) - 1);
	for (size_t i = 0; r != NULL && r->type == REDIS_REPLY_ARRAY &&
	    i < r->elements; i++) {
		const char *el = r->element[i]->str;
		size_t n = r->element[i]->len;
		const char *doc = memmem(el, n, job, sizeof(job) - 1);
		char key[200];
		if (doc == NULL || memmem(el, n, GONE_REASON,
		    sizeof(GONE_REASON) - 1) != NULL)
			continue;
		doc += sizeof(job) - 1;
		if (honest_own_key(doc, (size_t)(el + n - doc) - 1, prefix, q, key,
		    sizeof(key)) && !chaos_keys_has(&f->keys, key))
			chaos_keys_add(&f->keys, key);
	}
	if (r != NULL)
		freeReplyObject(r);
}

/* What a forged job can take: up to CANDIDATES of what was read, one of
 * them chosen by the plan's index. */
#define CANDIDATES 64
struct candidates {
	char s[CANDIDATES][200];
	int n;
};

static void
candidate(struct candidates *c, const char *s)
{
	if (c->n < CANDIDATES && strlen(s) < sizeof(c->s[0]))
		snprintf(c->s[c->n++], sizeof(c->s[0]), "%s", s);
}

static int
choose(const struct candidates *c, long long idx, char *out, size_t size)
{
	if (c->n == 0)
		return 0;
	snprintf(out, size, "%s", c->s[idx % c->n]);
	return 1;
}

/* The honest documents of list `list` of q (ready, a processing list),
 * the first 200, whose keys of ferry's own go to keys; a wrapper's
 * document is read inside it (a batch from requeue). */
static void
list_keys(redisContext *c, const char *prefix, const char *q,
    const char *list, struct candidates *keys)
{
	static const char wrap[] = "{\"ferry\":1,", job[] = ",\"job\":";
	redisReply *r = redisCommand(c, "LRANGE %s:{%s}:%s 0 199", prefix, q,
	    list);
	for (size_t i = 0; r != NULL && r->type == REDIS_REPLY_ARRAY &&
	    i < r->elements; i++) {
		const char *doc = r->element[i]->str, *in;
		size_t len = r->element[i]->len;
		char key[200];
		if (strncmp(doc, wrap, sizeof(wrap) - 1) == 0 && (in = memmem(doc,
		    len, job, sizeof(job) - 1)) != NULL) {
			in += sizeof(job) - 1;
			len = (size_t)(doc + len - in) - 1;
			doc = in;
		}
		if (honest_own_key(doc, len, prefix, q, key, sizeof(key)))
			candidate(keys, key);
	}
	if (r != NULL)
		freeReplyObject(r);
}

/* A key of ferry's own that a waiting honest job of q names (its document
 * in ready), or else a running one (in a processing list, named in
 * bkeys), into out; 0 when no live job names one. */
static int
waiting_key(redisContext *c, const char *prefix, const char *q,
    long long idx, char *out, size_t size)
{
	struct candidates *keys = calloc(1, sizeof(*keys));
	if (keys == NULL)
		chaos_die("out of memory");
	list_keys(c, prefix, q, "ready", keys);
	redisReply *r = keys->n > 0 ? NULL : redisCommand(c, "HKEYS "
	    "%s:{%s}:bkeys", prefix, q);
	for (size_t i = 0; r != NULL && r->type == REDIS_REPLY_ARRAY &&
	    i < r->elements && i < 16; i++) {
		char list[200];
		snprintf(list, sizeof(list), "proc:%s", r->element[i]->str);
		list_keys(c, prefix, q, list, keys);
	}
	if (r != NULL)
		freeReplyObject(r);
	int found = choose(keys, idx, out, size);
	free(keys);
	return found;
}

/* The id of a live honest job of q (ZREVRANGEBYSCORE of its ids: the
 * newest calls' first), one of prefix `prefer` when any is live, into
 * out; 0 when none is live. */
static int
live_id(redisContext *c, const char *prefix, const char *q,
    const char *queue, const char *prefer, long long idx, char *out,
    size_t size)
{
	redisReply *r = redisCommand(c, "ZREVRANGEBYSCORE %s:{%s}:ids (1 (0 "
	    "LIMIT 0 64", prefix, q);
	struct candidates *ids = calloc(2, sizeof(*ids));  /* [1]: preferred */
	if (ids == NULL)
		chaos_die("out of memory");
	for (size_t i = 0; r != NULL && r->type == REDIS_REPLY_ARRAY &&
	    i < r->elements; i++) {
		const char *id = r->element[i]->str;
		if (honest_id(queue, id))
			candidate(&ids[prefer != NULL && strncmp(id, prefer,
			    strlen(prefer)) == 0], id);
	}
	if (r != NULL)
		freeReplyObject(r);
	int found = choose(&ids[1], idx, out, size) ||
	    choose(&ids[0], idx, out, size);
	free(ids);
	return found;
}

static void
row(struct chaos_buf *b, const char *fid, long long n, int bad,
    const char *carrying)
{
	chaos_buf_printf(b, ",\"data\":{\"job_id\":\"%s\",\"n\":%s%lld%s,"
	    "\"pad\":\"forged, carrying %s\"}", fid, bad ? "\"x" : "", n,
	    bad ? "\"" : "", carrying);
}

static void
document(const struct kind *k, const char *id, const char *fid, long long n,
    const char *key, struct chaos_buf *b)
{
	chaos_buf_printf(b, "{\"id\":\"%s\",\"forged\":\"%s\"", id, fid);
	switch (k->body) {
	case B_ROW:
	case B_BADROW:
		row(b, fid, n, k->body == B_BADROW, id);
		break;
	case B_FOREIGN:
	case B_KEY:
		chaos_buf_printf(b, ",\"cache_key\":\"%s\"", key);
		break;
	case B_KEY_ROW:
		chaos_buf_printf(b, ",\"cache_key\":\"%s\"", key);
		row(b, fid, n, 0, key);
		break;
	case B_EXEC:
	case B_EXEC_FAIL:
		chaos_buf_printf(b, "%s,\"data\":{\"n\":%lld}", k->body ==
		    B_EXEC_FAIL ? ",\"fail\":true" : "", n);
		break;
	}
	chaos_buf_add(b, "}", 1);
}

int
chaos_forge(struct chaos_forger *f, redisContext *c, const char *prefix,
    const char *q, const char *kind, long long idx, struct chaos_forged *out)
{
	int k = chaos_forged_kind(kind);
	char key[200] = "";

	if (k < 0)
		return -1;
	if (strcmp(kinds[k].queue, "pg") == 0)
		read_dead(f, c, prefix, q);
	out->head = 0;
	out->target[0] = '\0';
	if (kinds[k].src == S_KEY_WAITING &&
	    waiting_key(c, prefix, q, idx, key, sizeof(key)))
		out->head = 1;  /* ahead of the job that names it */
	else if (kinds[k].src == S_KEY_WAITING)
		k = chaos_forged_kind("key-dead");      /* none waits now */
	if (kinds[k].src == S_KEY_DEAD && f->keys.n > 0)
		snprintf(key, sizeof(key), "%s", f->keys.k[idx % (long long)f->keys.n]);
	if (kinds[k].body == B_FOREIGN) {
		int nk = 0;
		while (chaos_foreign_keys[nk] != NULL)
			nk++;
		snprintf(key, sizeof(key), "%s", chaos_foreign_keys[idx % nk]);
	}
	out->kind = kinds[k].name;
	if (kinds[k].src == S_ID ? !live_id(c, prefix, q, kinds[k].queue,
	    kinds[k].prefer, idx, out->target, sizeof(out->target)) :
	    key[0] == '\0')
		return -1;
	if (kinds[k].src != S_ID)
		snprintf(out->target, sizeof(out->target), "%s", key);
	long long n = ++f->n;
	snprintf(out->fid, sizeof(out->fid), "f-%lld", n);
	out->doc.len = 0;
	document(&kinds[k], kinds[k].src == S_ID ? out->target : out->fid,
	    out->fid, n, key, &out->doc);
	return 0;
}

void
chaos_forger_free(struct chaos_forger *f)
{
	chaos_keys_free(&f->keys);
}

/* ------------------------------------------------------ the checker */

/* What became of the forged jobs of each kind. */
static struct tally {
	long long made, acked, unsure, unmade, written, handled, dead_want,
	    dead_gone, dead_other, absent, failed;
} tally[NKINDS];
static struct chaos_buf failures;
static long long nfailures;

int
chaos_forged_kind(const char *name)
{
	for (int k = 0; k < NKINDS; k++)
		if (strcmp(kinds[k].name, name) == 0)
			return k;
	return -1;
}

void
chaos_forged_unmade(int k)
{
	tally[k].unmade++;
}

/* Where its dead reason or its last error says `s`. */
static int
says(const char *reason, const char *error, const char *s)
{
	return (reason != NULL && strstr(reason, s) != NULL) ||
	    (error != NULL && strstr(error, s) != NULL);
}

/* Why forged job fid of kind k (its push's ledger letter st) broke a
 * promise, or NULL: written at most once; what must be dead is, for its
 * own reason, and never written; what must be written or handled is, or
 * dead with a reason; none lost once acknowledged. */
static const char *
judge(int k, char st, int rows, int dead, const char *reason,
    const char *error, int handled, struct tally *t)
{
	const struct kind *x = &kinds[k];
	int own = says(reason, error, OWN_REASON), gone = says(reason, error,
	    GONE_REASON);

	if (rows > 1)
		return "written more than once";
	if (rows == 1 && (dead || x->expect != X_ROW))
		return dead ? "written and dead" : "written, but it was to be "
		    "refused";
	if (dead && (reason == NULL || reason[0] == '\0'))
		return "dead without a reason";
	if (dead && says(reason, error, DIED_REASON)) {
		t->dead_other++;        /* recovered too often, as any job may be */
		return NULL;
	}
	if (dead && x->expect == X_DEAD && !says(reason, error, x->want))
		return "dead for another reason than its own";
	if (dead && (x->expect == X_OWN || x->expect == X_OWN_OR_GONE) && !own &&
	    !(gone && x->expect == X_OWN_OR_GONE))
		return "dead for another reason than \"a key of ferry's own "
		    "written for another job\"";
	if (dead) {
		t->dead_want += x->expect >= X_DEAD && !gone;
		t->dead_gone += gone && x->expect == X_OWN_OR_GONE;
		t->dead_other += x->expect < X_DEAD;
		return NULL;
	}
	if (rows == 1 || (handled && x->expect == X_HANDLED)) {
		t->written += rows == 1;
		t->handled += rows == 0;
		return NULL;
	}
	if (st == 'a')
		return x->expect >= X_DEAD ? "not dead" : "lost (acknowledged, "
		    "neither written nor dead)";
	t->absent++;    /* its push of unknown outcome did not arrive */
	return NULL;
}

int
chaos_forged_verdict(int k, const char *fid, const char *target, char st,
    int rows, int dead, const char *reason, const char *error, int handled)
{
	struct tally *t = &tally[k];
	t->made++;
	t->acked += st == 'a';
	t->unsure += st != 'a';
	const char *bad = judge(k, st, rows, dead, reason, error, handled, t);
	if (bad == NULL)
		return 0;
	t->failed++;
	if (nfailures++ < 20)
		chaos_buf_printf(&failures, "%s %s (%s %s %s: %s; %d rows, %s%.120s)",
		    nfailures > 1 ? ";" : "", fid, kinds[k].name,
		    kinds[k].src == S_ID ? "carrying" : "naming", target, bad, rows,
		    dead ? "dead: " : "not dead", dead ? (error && *error ? error :
		    reason) : "");
	return 1;
}

/* One kind's figures into b: "pg id-row 12 (written 11, never arrived 1)". */
static void
kind_figures(int k, struct chaos_buf *b)
{
	static const char *const what[] = { "written", "handled",
		"dead as it must", "dead, its key gone already", "dead otherwise",
		"never arrived", "FAILED" };
	const struct tally *t = &tally[k];
	const long long v[] = { t->written, t->handled, t->dead_want,
		t->dead_gone, t->dead_other, t->absent, t->failed };
	int n = 0;

	chaos_buf_printf(b, "%s %s %s %lld", k ? "," : "", kinds[k].queue,
	    kinds[k].name, t->made);
	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++)
		if (v[i] > 0)
			chaos_buf_printf(b, "%s%s %lld", n++ ? ", " : " (", what[i],
			    v[i]);
	if (n > 0)
		chaos_buf_add(b, ")", 1);
	if (t->unmade > 0)
		chaos_buf_printf(b, " [%lld not pushed: nothing to forge from "
		    "then, or Redis not there]", t->unmade);
}

void
chaos_forged_report(void)
{
	struct tally sum = { 0 };
	long long keyed = 0;
	struct chaos_buf by = { 0 };

	for (int k = 0; k < NKINDS; k++) {
		const struct tally *t = &tally[k];
		sum.made += t->made;
		sum.acked += t->acked;
		sum.unsure += t->unsure;
		sum.unmade += t->unmade;
		if (kinds[k].src != S_ID) {
			keyed += t->made;
			sum.dead_want += t->dead_want;
			sum.dead_gone += t->dead_gone;
		}
		kind_figures(k, &by);
	}
	printf("chaos: forged jobs (the hostile producer, past the enqueue "
	    "script): %lld pushed (%lld acknowledged, %lld not: no reply, or "
	    "fewer replicas than asked), "
	    "%lld not made; by kind:%s\n", sum.made, sum.acked, sum.unsure,
	    sum.unmade, by.p);
	printf("chaos: forged jobs naming honest jobs' keys of ferry's own: %lld, "
	    "dead \"%s\" %lld, \"%s\" %lld (the key gone with its job already)\n",
	    keyed, OWN_REASON, sum.dead_want, GONE_REASON, sum.dead_gone);
	chaos_buf_free(&by);
}

void
chaos_forged_failures(void)
{
	if (nfailures > 0)
		printf("chaos: FAIL %lld forged jobs not handled as any job must be, "
		    "or not refused as they must be:%s%s\n", nfailures,
		    failures.p, nfailures > 20 ? "; ..." : "");
	chaos_buf_free(&failures);
}
