/* test_formats.c - the two readers of doc/formats.md must agree: the same
 * bytes go through src/format/wrapper.c (C) and through parse_wrapper /
 * parse_dead of src/redis/lua/common.lua inside a real redis-server, and every
 * verdict and every field must match. The inputs are hand-made edge cases
 * plus a seeded mutation loop over them (the seed is printed; set
 * FERRY_FORMATS_SEED to replay one). */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cache.h"
#include "harness.h"
#include "lua_scripts.h"
#include "util.h"
#include "wrapper.h"

#define ROUNDS 40               /* EVALs of CHUNK inputs each, per kind */
#define CHUNK 400
#define INPUT_MAX 6000

static struct ferryd d;

static void
teardown(void)
{
	h_teardown(&d);
}

TestSuite(formats, .fini = teardown, .timeout = 300);

/* What the Lua side returns for each input, and what C must match. */
static const char lua_body[] =
	"\nlocal out = {}\n"
	"for i = 2, #ARGV do\n"
	"  local m\n"
	"  if ARGV[1] == 'job' then m = parse_wrapper(ARGV[i]) else m = parse_dead(ARGV[i]) end\n"
	"  if not m then out[#out + 1] = { 0 } else\n"
	"    out[#out + 1] = { 1, m.recoveries, m.attempts, m.seq or -1, m.time or -1,\n"
	"      m.reason or '', m.worker or '', m.id or '', m.first_error or '',\n"
	"      m.last_error or '', table.concat(m.stamps, ','), m.doc }\n"
	"  end\n"
	"end\n"
	"return out\n";

static const char *const job_seeds[] = {
	"{\"ferry\":1,\"recoveries\":0,\"attempts\":0,\"job\":{\"id\":1}}",
	"{\"ferry\":1,\"recoveries\":2,\"attempts\":3,\"stamps\":[\"h:1.2:ab:1\","
	    "\"h:1.3:cd:\\/2\"],\"first_error\":\"a \\\"b\\\" \\u001f\\t\","
	    "\"last_error\":\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\",\"seq\":"
	    "123456789012345,\"job\":{\"x\":\"\xff\"}}",
	"{\"ferry\":1,\"recoveries\":1,\"attempts\":0,\"stamps\":[],\"job\":}",
	"{\"ferry\":1,\"recoveries\":0,\"attempts\":0,\"last_error\":\"\\u007f"
	    "\\u0001\\b\\f\\n\\r\\\\\",\"job\":[[[[[[[[]]]]]]]]}",
	"{\"ferry\":1,\"recoveries\":999999999,\"attempts\":0,\"job\":{}}",
	"{\"ferry\":1,\"recoveries\":0,\"attempts\":\"x\",\"job\":{}}",
	"{\"ferry\":1,\"recoveries\":0,\"job\":{}}",
	"{\"ferry\":1,\"recoveries\":0,\"attempts\":0,\"batch\":\"k\",\"job\":{}}",
	"{\"ferry\":1,\"recoveries\":0,\"attempts\":0,\"first_error\":\"\xed\xa0\x80\","
	    "\"job\":{}}",
	"{\"ferry\":1,\"recoveries\":0,\"attempts\":0,\"first_error\":\"\xf4\x90\x80\x80\","
	    "\"job\":{}}",
	"{\"ferry\":1,\"recoveries\":0,\"attempts\":0,\"first_error\":\"\xe0\x9f\xbf\","
	    "\"job\":{}}",
	"{\"ferry\":1,\"recoveries\":0,\"attempts\":0,\"first_error\":\"\\u0000\","
	    "\"job\":{}}",
};

static const char *const dead_seeds[] = {
	"{\"reason\":\"failed by the handler\",\"attempts\":1,\"recoveries\":0,"
	    "\"time\":1796156109869,\"worker\":\"vm:1:ab.2\",\"id\":\"j\\\"0\","
	    "\"stamps\":[\"K1\",\"K2\"],\"first_error\":\"boom\",\"last_error\":"
	    "\"bang\",\"job\":{\"id\":\"j\\\"0\"}}",
	"{\"reason\":\"malformed ferry wrapper\",\"attempts\":0,\"recoveries\":0,"
	    "\"time\":0,\"worker\":\"w\",\"job\":\xc3\x28\x00zz}",
	"{\"reason\":\"x\",\"attempts\":0,\"recoveries\":0,\"time\":1,\"worker\":"
	    "\"w\",\"job\":}",
	"{\"reason\":\"x\",\"attempts\":0,\"recoveries\":0,\"worker\":\"w\","
	    "\"job\":{}}",
	"{\"reason\":5,\"attempts\":0,\"recoveries\":0,\"time\":1,\"worker\":\"w\","
	    "\"job\":{}}",
};

static uint64_t rng;

static uint32_t
next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint32_t)(rng >> 16);
}

/* Bytes that matter to the grammar, and some that do not. */
static const unsigned char interesting[] = "\"\\,:[]{}0129ufnx/\xc3\xa9\x80"
    "\xbf\xe2\xed\xf0\xf4\xff\x01\x1f\x7f ";

/* Edit the n bytes at buf in place; the result stays within max bytes. */
static size_t
mutate(unsigned char *buf, size_t n, size_t max)
{
	int edits = 1 + (int)(next() % 4);

	for (int e = 0; e < edits; e++) {
		size_t at = n ? next() % n : 0;
		unsigned char b = interesting[next() % (sizeof(interesting) - 1)];
		switch (next() % 7) {
		case 0:         /* replace */
			if (n)
				buf[at] = b;
			break;
		case 1:         /* insert */
			if (n < max) {
				memmove(buf + at + 1, buf + at, n - at);
				buf[at] = b;
				n++;
			}
			break;
		case 2:         /* delete */
			if (n) {
				memmove(buf + at, buf + at + 1, n - at - 1);
				n--;
			}
			break;
		case 3:         /* cut */
			n = at;
			break;
		case 4: {       /* repeat a slice */
			size_t len = 1 + next() % 40;
			if (at + len <= n && n + len <= max) {
				memmove(buf + at + len, buf + at, n - at);
				n += len;
			}
			break;
		}
		case 5:         /* a random byte */
			if (n)
				buf[at] = (unsigned char)next();
			break;
		default:        /* a long string token */
			if (n + 4200 <= max) {
				memmove(buf + at + 4100, buf + at, n - at);
				memset(buf + at, 'a', 4100);
				n += 4100;
			}
			break;
		}
	}
	return n;
}

static const char *
tok(struct wrapper_str s, size_t *len)
{
	*len = s.p ? s.n : 0;
	return s.p ? s.p : "";
}

static void
expect_str(const redisReply *r, const char *p, size_t n, const char *what,
    const char *in, size_t inlen)
{
	cr_assert_eq(r->type, REDIS_REPLY_STRING, "%s: not a string", what);
	cr_assert(r->len == n && memcmp(r->str, p, n) == 0,
	    "%s differs (C %zu bytes, Lua %zu bytes) for input of %zu bytes: "
	    "%.*s", what, n, r->len, inlen, (int)(inlen > 300 ? 300 : inlen), in);
}

/* One input: C's verdict and fields against Lua's reply r. */
static void
compare(const char *in, size_t n, enum wrapper_kind kind, const redisReply *r)
{
	struct wrapper w;
	int ok = wrapper_parse(in, n, kind, &w) == 0;
	size_t len;
	const char *p;

	cr_assert_eq(r->type, REDIS_REPLY_ARRAY);
	cr_assert_eq(r->element[0]->integer, ok, "C says %s, Lua %s for: %.*s",
	    ok ? "valid" : "malformed", ok ? "malformed" : "valid",
	    (int)(n > 300 ? 300 : n), in);
	if (!ok)
		return;
	cr_assert_eq(r->elements, 12);
	cr_assert_eq(r->element[1]->integer, w.recoveries);
	cr_assert_eq(r->element[2]->integer, w.attempts);
	cr_assert_eq(r->element[3]->integer, w.seq);
	cr_assert_eq(r->element[4]->integer, w.time);
	struct wrapper_str strs[] = { w.reason, w.worker, w.id, w.first_error,
		w.last_error };
	for (int i = 0; i < 5; i++) {
		p = tok(strs[i], &len);
		expect_str(r->element[5 + i], p, len, "a string member", in, n);
	}
	char *stamps = xmalloc(n + 1);
	size_t o = 0;
	for (int i = 0; i < w.nstamps; i++) {
		if (i > 0)
			stamps[o++] = ',';
		memcpy(stamps + o, w.stamps[i].p, w.stamps[i].n);
		o += w.stamps[i].n;
	}
	expect_str(r->element[10], stamps, o, "stamps", in, n);
	free(stamps);
	expect_str(r->element[11], w.doc, w.doc_len, "doc", in, n);
	/* every token decodes to valid UTF-8 (the grammar guarantees it) */
	for (int i = 0; i < 5; i++) {
		char *t = wrapper_str_text(strs[i]);
		if (t != NULL) {
			json_t *j = json_string(t);
			cr_assert_not_null(j, "token is not UTF-8: %s", t);
			json_decref(j);
			free(t);
		}
	}
	wrapper_free(&w);
}

static void
run_kind(enum wrapper_kind kind, const char *const *seeds, size_t nseeds)
{
	char *script = xasprintf("%s%s", lua_common_source, lua_body);
	unsigned char (*in)[INPUT_MAX + 1] = xmalloc(sizeof(*in) * CHUNK);
	size_t *lens = xmalloc(sizeof(*lens) * (CHUNK + 3));
	const char **argv = xmalloc(sizeof(*argv) * (CHUNK + 3));
	long compared = 0, valid = 0;

	for (int round = 0; round < ROUNDS; round++) {
		for (int i = 0; i < CHUNK; i++) {
			const char *s = seeds[next() % nseeds];
			size_t n = strlen(s);
			/* seeds with a NUL inside are cut there: that is fine */
			memcpy(in[i], s, n);
			if (round > 0 || i >= (int)nseeds) {
				/* a quarter mutate only the document, which the
				 * grammar does not read: mostly valid inputs */
				const char *mark = next() % 4 == 0 ?
				    memmem(in[i], n, ",\"job\":", 7) : NULL;
				size_t at = mark ? (size_t)(mark - (char *)in[i]) + 7 : 0;
				n = at + mutate(in[i] + at, n - at, INPUT_MAX - at);
			}
			else
				memcpy(in[i], seeds[i], n = strlen(seeds[i]));
			lens[i + 3] = n;
			argv[i + 3] = (const char *)in[i];
		}
		argv[0] = "EVAL";
		argv[1] = script;
		argv[2] = "0";
		lens[0] = 4;
		lens[1] = strlen(script);
		lens[2] = 1;
		/* ARGV[1] is the kind: shift the inputs by one */
		const char **args = xmalloc(sizeof(*args) * (CHUNK + 4));
		size_t *alens = xmalloc(sizeof(*alens) * (CHUNK + 4));
		memcpy(args, argv, 3 * sizeof(*args));
		memcpy(alens, lens, 3 * sizeof(*alens));
		args[3] = kind == WRAPPER_JOB ? "job" : "dead";
		alens[3] = strlen(args[3]);
		memcpy(args + 4, argv + 3, CHUNK * sizeof(*args));
		memcpy(alens + 4, lens + 3, CHUNK * sizeof(*alens));
		redisReply *r = redisCommandArgv(d.rc, CHUNK + 4, args, alens);
		cr_assert_not_null(r, "EVAL: %s", d.rc->errstr);
		cr_assert_eq(r->type, REDIS_REPLY_ARRAY, "the Lua side raised: %s",
		    r->type == REDIS_REPLY_ERROR ? r->str : "?");
		cr_assert_eq(r->elements, CHUNK);
		for (int i = 0; i < CHUNK; i++) {
			compare((const char *)in[i], lens[i + 3], kind,
			    r->element[i]);
			valid += r->element[i]->element[0]->integer;
			compared++;
		}
		freeReplyObject(r);
		free(args);
		free(alens);
	}
	cr_log_info("%s: %ld inputs compared, %ld valid", kind == WRAPPER_JOB ?
	    "wrapper" : "dead entry", compared, valid);
	cr_assert_gt(valid, compared / 20, "the mutations left too few valid "
	    "inputs to compare fields");
	free(script);
	free(in);
	free(lens);
	free(argv);
}

static void
seed_rng(void)
{
	const char *s = getenv("FERRY_FORMATS_SEED");

	rng = s != NULL ? strtoull(s, NULL, 10) : (uint64_t)time(NULL) ^
	    ((uint64_t)getpid() << 20);
	if (rng == 0)
		rng = 1;
	fprintf(stderr, "test_formats: seed %llu (FERRY_FORMATS_SEED=%llu to "
	    "replay)\n", (unsigned long long)rng, (unsigned long long)rng);
}

Test(formats, c_and_lua_read_wrappers_alike)
{
	h_setup(&d, NULL, "[queue q]\n");
	seed_rng();
	run_kind(WRAPPER_JOB, job_seeds, sizeof(job_seeds) / sizeof(job_seeds[0]));
	h_stop(&d);
}

Test(formats, c_and_lua_read_dead_entries_alike)
{
	h_setup(&d, NULL, "[queue q]\n");
	seed_rng();
	run_kind(WRAPPER_DEAD, dead_seeds,
	    sizeof(dead_seeds) / sizeof(dead_seeds[0]));
	h_stop(&d);
}

/* What Lua writes, C reads: str_token makes any bytes a valid token. */
Test(formats, lua_tokens_always_parse)
{
	h_setup(&d, NULL, "[queue q]\n");
	char *script = xasprintf("%s%s", lua_common_source,
	    "\nlocal m = fresh(ARGV[2])\n"
	    "m.last_error = str_token(ARGV[1])\n"
	    "add_stamp(m, ARGV[1])\n"
	    "return { wrap(m), dead_entry(m, ARGV[1], ARGV[1], ARGV[1], 5) }\n");
	const char *msgs[] = { "plain", "\xc3", "a\x00" "b", "\xed\xa0\x80",
		"\"\\/\x01\x7f\n", "\xf0\x9f\x98" };
	size_t mlens[] = { 5, 1, 3, 3, 6, 3 };
	char big[5000];
	memset(big, '\x01', sizeof(big));
	for (size_t i = 0; i < 7; i++) {
		const char *m = i < 6 ? msgs[i] : big;
		size_t ml = i < 6 ? mlens[i] : sizeof(big);
		const char *argv[] = { "EVAL", script, "0", m, "{\"d\":1}" };
		size_t lens[] = { 4, strlen(script), 1, ml, 7 };
		redisReply *r = redisCommandArgv(d.rc, 5, argv, lens);
		cr_assert_eq(r->type, REDIS_REPLY_ARRAY, "%s",
		    r->type == REDIS_REPLY_ERROR ? r->str : "");
		struct wrapper w;
		cr_assert_eq(wrapper_parse(r->element[0]->str, r->element[0]->len,
		    WRAPPER_JOB, &w), 0, "message %zu: %s", i, r->element[0]->str);
		wrapper_free(&w);
		cr_assert_eq(wrapper_parse(r->element[1]->str, r->element[1]->len,
		    WRAPPER_DEAD, &w), 0, "message %zu: %s", i, r->element[1]->str);
		cr_assert_eq(w.doc_len, 7);
		wrapper_free(&w);
		freeReplyObject(r);
	}
	free(script);
	h_stop(&d);
}

/* Which keys are ferry's own ("PREFIX:{QUEUE}:cache:<16 hex>.<n>", n
 * below 1,000 without a leading zero): src/redis/cache.c (cache_own_key,
 * whose keys a worker reads only for the job their mark names) and
 * common.lua (own_group: the enqueue writes such a key only where none
 * is, a purge releases it only for its job) must agree on every name, or
 * a key one side protects the other reads for anyone. Hand cases and
 * seeded mutations of them. */
Test(formats, c_and_lua_agree_on_keys_of_ferrys_own)
{
	static const char *const seeds[] = {
		"ferry:{q}:cache:0123456789abcdef.0",
		"ferry:{q}:cache:0123456789ABCDEF.999",
		"ferry:{q}:cache:0123456789abcdef.1000",
		"ferry:{q}:cache:0123456789abcdef.01",
		"ferry:{q}:cache:0123456789abcdef.",
		"ferry:{q}:cache:0123456789abcde.7",
		"ferry:{q}:cache:0123456789abcdef0.7",
		"ferry:{q}:cache:0123456789abcdeg.7",
		"ferry:{q}:cache:0123456789abcdef.7x",
		"ferry:{q}:cache:0123456789abcdef",
		"ferry:{r}:cache:0123456789abcdef.7",
		"ferry:{q}:cachx:0123456789abcdef.7",
		"app:{q}:cache:0123456789abcdef.7",
		"ferry:{q}:cache:0123456789abcdef.-1",
		"ferry:{q}:cache:0123456789abcdef.+1",
	};
	char *script = xasprintf("%s%s", lua_common_source,
	    "\nlocal out = {}\n"
	    "for i, k in ipairs(ARGV) do\n"
	    "  out[i] = own_group('ferry:{q}:cache:', k) and 1 or 0\n"
	    "end\nreturn out\n");
	enum { N = 400 };
	char keys[N][64];
	const char *argv[N + 3] = { "EVAL", script, "0" };
	long own = 0;

	h_setup(&d, NULL, "[queue q]\n");
	seed_rng();
	for (int round = 0; round < 10; round++) {
		for (int i = 0; i < N; i++) {
			const char *s = seeds[(size_t)i % FERRY_ARRAY_LEN(seeds)];
			snprintf(keys[i], sizeof(keys[i]), "%s", s);
			size_t n = strlen(keys[i]);
			/* most mutate one byte of the last part */
			if (round > 0 && i >= (int)FERRY_ARRAY_LEN(seeds) && n > 20) {
				size_t at = n - 1 - next() % 20;
				keys[i][at] = (char)("0123456789abcdefABG.x-"
				    [next() % 22]);
			}
			argv[i + 3] = keys[i];
		}
		redisReply *r = redisCommandArgv(d.rc, N + 3, argv, NULL);
		cr_assert(r != NULL && r->type == REDIS_REPLY_ARRAY &&
		    r->elements == N, "%s", r != NULL && r->type ==
		    REDIS_REPLY_ERROR ? r->str : "no array");
		for (int i = 0; i < N; i++) {
			bool c = cache_own_key(keys[i], "ferry", "q");
			cr_assert_eq(c, r->element[i]->integer == 1,
			    "%s: C says %s, Lua %s", keys[i], c ? "own" : "not own",
			    r->element[i]->integer == 1 ? "own" : "not own");
			own += c;
		}
		freeReplyObject(r);
	}
	cr_assert_gt(own, 100, "the mutations left too few keys of ferry's own");
	free(script);
	h_stop(&d);
}
