/* cache_check.c - what the checker of a chaos run requires of the jobs
 * whose rows waited in cache keys (below). */
#include "chaos.h"

#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ------------------------------------------------ the cache, checked */

/* (chaos.h) */
long long
chaos_report_value(const char *path, const char *key)
{
	char line[1024] = " ", pat[64];   /* " KEY=" matches the first too */
	FILE *f = path != NULL ? fopen(path, "r") : NULL;
	if (f == NULL)
		return -1;
	int got = fgets(line + 1, sizeof(line) - 1, f) != NULL;
	fclose(f);
	snprintf(pat, sizeof(pat), " %s=", key);
	const char *v = got ? strstr(line, pat) : NULL;
	return v != NULL ? atoll(v + strlen(pat)) : -1;
}

/* How many keys of `named` lie in group g ("<g>.<n>": a group of ferry's
 * own keys, src/redis/lua/common.lua). */
static long long
keys_in_group(const struct chaos_keys *s, const char *g)
{
	size_t len = strlen(g);
	long long n = 0;

	for (size_t i = 0; i < s->n; i++)
		if (strncmp(s->k[i], g, len) == 0 && s->k[i][len] == '.')
			n++;
	return n;
}

/* Is entry (field f, value v) of a protected hash named by the dead jobs:
 * a group's ("JOBS N BYTES LOST") counts as many of their keys as it has
 * jobs, an entry of its own names one of them. */
static int
entry_named(const struct chaos_keys *named, const char *f, const char *v)
{
	long long jobs, n, bytes, lost;
	char end;

	if (sscanf(v, "%lld %lld %lld %lld%c", &jobs, &n, &bytes, &lost,
	    &end) == 4)
		return keys_in_group(named, f) == jobs;
	return chaos_keys_has(named, f);
}

/* The cache keys queue q's dead jobs name, into `named`; the number of its
 * dead entries of the reason "cache key expired or evicted". A forged job
 * (forge.c) names an honest job's key: it keeps no key, and may find the
 * key gone with its job (counted in *forged_missing, not returned). */
static long long
dead_cache_keys(redisContext *c, const char *prefix, const char *q,
    struct chaos_keys *named, long long *forged_missing)
{
	static const char gone[] = "\"reason\":\"cache key expired or evicted\"",
	    mark[] = ",\"job\":";
	long long missing = 0;
	redisReply *d = redisCommand(c, "LRANGE %s:{%s}:dead 0 -1", prefix, q);
	for (size_t i = 0; d != NULL && i < d->elements; i++) {
		const char *el = d->element[i]->str;
		size_t len = d->element[i]->len;
		int gone_key = memmem(el, len, gone, sizeof(gone) - 1) != NULL;
		if (chaos_forged_of(el, len) > 0) {
			*forged_missing += gone_key;
			continue;
		}
		missing += gone_key;
		const char *doc = memmem(el, len, mark, sizeof(mark) - 1);
		if (doc == NULL)
			continue;
		doc += sizeof(mark) - 1;
		json_error_t err;
		json_t *j = json_loadb(doc, (size_t)(el + len - doc) - 1,
		    JSON_DECODE_ANY, &err);
		const char *k = json_string_value(json_object_get(j, "cache_key"));
		if (k != NULL)
			chaos_keys_add(named, k);
		json_decref(j);
	}
	if (d != NULL)
		freeReplyObject(d);
	return missing;
}

/* Keys matching `pat` (SCAN) that no dead job names; with `persistent`,
 * only those without a TTL. Each of the first few is printed. */
static long long
stray_keys(redisContext *c, const char *pat, int persistent,
    const struct chaos_keys *named, long long *all)
{
	char cursor[32] = "0";
	long long stray = 0;
	do {
		redisReply *r = redisCommand(c, "SCAN %s MATCH %s COUNT 1000",
		    cursor, pat);
		if (r == NULL || r->type != REDIS_REPLY_ARRAY || r->elements != 2) {
			if (r != NULL)
				freeReplyObject(r);
			return stray + 1;
		}
		snprintf(cursor, sizeof(cursor), "%s", r->element[0]->str);
		for (size_t i = 0; i < r->element[1]->elements; i++) {
			const char *k = r->element[1]->element[i]->str;
			if (persistent) {
				redisReply *t = redisCommand(c, "PTTL %s", k);
				int keep = t != NULL && t->integer == -1;
				if (t != NULL)
					freeReplyObject(t);
				if (!keep)
					continue;
			}
			(*all)++;
			if (!chaos_keys_has(named, k) && stray++ < 10)
				printf("  left in Redis, named by no dead job: %.120s\n", k);
		}
		freeReplyObject(r);
	} while (strcmp(cursor, "0") != 0);
	return stray;
}

int
chaos_cache_check(redisContext *c, const char *prefix,
    const char *const *queues, int nq, const char *keyprefix,
    const char *cache_stats, const char *churn)
{
	struct chaos_keys named = { 0 };
	long long missing_dead = 0, missing_stat = 0, stray = 0, keys = 0;
	long long forged_missing = 0;
	long long prot = 0, prot_stray = 0;
	char pat[300];
	for (int q = 0; q < nq; q++) {
		missing_dead += dead_cache_keys(c, prefix, queues[q], &named,
		    &forged_missing);
		redisReply *r = redisCommand(c, "HGET %s:{%s}:stats cache_missing",
		    prefix, queues[q]);
		if (r != NULL && r->type == REDIS_REPLY_STRING)
			missing_stat += atoll(r->str);
		if (r != NULL)
			freeReplyObject(r);
	}
	for (int q = 0; q < nq; q++) {
		snprintf(pat, sizeof(pat), "%s:{%s}:cache:*", prefix, queues[q]);
		stray += stray_keys(c, pat, 0, &named, &keys);
		redisReply *r = redisCommand(c, "HGETALL %s:{%s}:protected",
		    prefix, queues[q]);
		for (size_t i = 0; r != NULL && r->type == REDIS_REPLY_ARRAY &&
		    i + 1 < r->elements; i += 2, prot++)
			if (!entry_named(&named, r->element[i]->str,
			    r->element[i + 1]->str) && prot_stray++ < 10)
				printf("  protected entry not of dead jobs: %.120s "
				    "%.40s\n", r->element[i]->str,
				    r->element[i + 1]->str);
		if (r != NULL)
			freeReplyObject(r);
	}
	if (keyprefix != NULL && *keyprefix != '\0') {
		snprintf(pat, sizeof(pat), "%s*", keyprefix);
		stray += stray_keys(c, pat, 1, &named, &keys);
	}
	chaos_keys_free(&named);

#define CS(key) chaos_report_value(cache_stats, key)
	long long cjobs = CS("cache_jobs"), kjobs = CS("key_jobs"),
	    errors = CS("errors"), full = CS("full"),
	    evicted = chaos_report_value(churn, "evicted");
	printf("chaos: cache: %lld jobs through --cache, %lld naming application "
	    "keys (%lld keys written again, gone before their job came: %lld "
	    "refusals \"does not exist\"), %lld FULL refusals, %lld "
	    "ferryctl calls (%lld killed mid-call and run again, %lld kills "
	    "that came after the end; %lld resends by ferryctl itself; %lld ms "
	    "a call); cache_missing %lld (%lld of forged jobs naming a key gone "
	    "with its job), honest jobs dead for a missing cache key %lld; "
	    "left %lld cache keys, %lld protected entries (of dead jobs: %lld, "
	    "%lld)\n", cjobs, kjobs, CS("rewrites"), CS("gone"), full,
	    CS("calls"), CS("kills"), CS("kills_late"), CS("self_resends"),
	    CS("call_ms"), missing_stat, forged_missing, missing_dead, keys, prot,
	    keys - stray, prot - prot_stray);
#undef CS
#define CR(key) chaos_report_value(churn, key)
	printf("chaos: churn: %lld keys written (%lld MB, %lld-%lld bytes, TTL "
	    "%lld s) in %lld s, %lld refused, %lld reconnections; Redis evicted "
	    "%lld keys and expired %lld (over %lld redis-server processes)\n",
	    CR("keys"), CR("bytes") >> 20, CR("size_min"), CR("size_max"),
	    CR("ttl_ms") / 1000, CR("seconds"), CR("refused"), CR("reconnects"),
	    evicted, CR("expired"), CR("runs"));
#undef CR
	int fails = 0;
	if (missing_stat != forged_missing || missing_dead != 0)
		fails += printf("chaos: FAIL jobs dead for a missing cache key: "
		    "cache_missing %lld (%lld of forged jobs), dead entries of "
		    "honest jobs %lld\n", missing_stat, forged_missing,
		    missing_dead) > 0;
	if (stray != 0 || prot_stray != 0)
		fails += printf("chaos: FAIL %lld cache keys and %lld protected "
		    "entries left that no dead job names\n", stray,
		    prot_stray) > 0;
	if (cjobs <= 0 || kjobs <= 0 || errors != 0)
		fails += printf("chaos: FAIL the cached producer: %lld --cache "
		    "jobs, %lld naming keys, %lld ferryctl failures it did not "
		    "expect (produce-cache.err)\n", cjobs, kjobs, errors) > 0;
	/* the queues need a small part of maxmemory, the rest is the churn's
	 * to be evicted: a refusal means evictable bytes counted as not */
	if (full != 0)
		fails += printf("chaos: FAIL %lld FULL refusals (exit 75) with a "
		    "backlog far below memory_refuse_percent of maxmemory\n",
		    full) > 0;
	if (evicted <= 0)
		fails += printf("chaos: FAIL Redis evicted no key (%lld): the churn "
		    "did not fill maxmemory, the run did not test the cache\n",
		    evicted) > 0;
	return fails;
}
