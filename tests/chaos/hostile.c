/* hostile.c - the hostile elements of a chaos run (the plan's "hostile"
 * events: plan.c): what a broken producer pushes onto ready past the
 * enqueue script, the test of the workers' hostile input. Built here,
 * pushed by the producer (produce.c): invalid UTF-8, not JSON, forged
 * ferry wrappers with batch stamps in flight or to come around a copy of
 * a real job, broken wrappers, documents nested too deep or larger than
 * max_job_bytes, cache_keys naming another application's keys or ferry's
 * own lists, odd ids. The forged jobs that carry honest jobs' ids or keys
 * are forge.c's. */
#include "chaos.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A batch key of queue q delta after one in flight (a worker's next ones,
 * or one just committed), or one of nobody's. */
static void
batch_key(struct chaos_hostile *h, int q, long long delta, char *out,
    size_t size)
{
	snprintf(out, size, "nobody:1:deadbeef:%lld", 5 + delta);
	if (h->c == NULL)
		return;
	char key[200];
	snprintf(key, sizeof(key), "%s:{%s}:bkeys", h->prefix, q ? h->execq : h->pgq);
	redisReply *r = redisCommand(h->c, "HVALS %s", key);
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

void
chaos_hostile_element(struct chaos_hostile *h, int q, const char *kind,
    long long idx, struct chaos_buf *b)
{
	char hid[40], key[200];
	const char *good = h->good != NULL ? h->good : "{\"id\":\"h-none\"}";
	snprintf(hid, sizeof(hid), "h-%lld", ++h->n);
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
		batch_key(h, q, future ? 1 + idx % 3 : -(idx % 2), key, sizeof(key));
		chaos_buf_printf(b, "{\"ferry\":1,\"recoveries\":%lld,\"attempts\":0,"
		    "\"batch\":\"%s\",\"job\":%s}", 1 + idx % 2, key, good);
	} else if (strcmp(kind, "wrap-noattempts") == 0) {
		chaos_buf_printf(b, "{\"ferry\":1,\"recoveries\":1,\"job\":%s}", good);
	} else if (strcmp(kind, "wrap-nojob") == 0) {
		batch_key(h, q, 0, key, sizeof(key));
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
		long long n = h->max_job_bytes * (1 + idx % 4) + 1000;
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
		const char *other = (idx / 6) % 2 ? h->execq : h->pgq;
		chaos_buf_printf(b, "{\"id\":\"%s\",\"cache_key\":\"%s:{%s}:%s\"}",
		    hid, h->prefix, other, which[idx % 6]);
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
