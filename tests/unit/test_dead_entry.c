/* test_dead_entry.c - a dead-letter entry made readable (src/format/dead_entry.c):
 * the header decoded member by member, the job as a JSON string or as
 * base64 whatever its bytes, the id an operator names it by; and base64
 * both ways, strict on decoding; an element read and decoded in one call,
 * and the job read back from what was shown. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base64.h"
#include "dead_entry.h"
#include "job.h"
#include "wrapper.h"

#define HEAD "{\"reason\":\"failed by the handler\",\"attempts\":3," \
	"\"recoveries\":1,\"time\":1700000000000,\"worker\":\"h:1:w0\""

static void
roundtrip(const char *bytes, size_t n, const char *text)
{
	size_t len, back_len;
	char *enc = base64_encode(bytes, n, &len), *back;

	cr_assert_str_eq(enc, text);
	cr_assert_eq(len, strlen(text));
	cr_assert_eq(base64_decode(enc, len, &back, &back_len), 0);
	cr_assert_eq(back_len, n);
	cr_assert_eq(memcmp(back, bytes, n), 0);
	free(enc);
	free(back);
}

Test(base64, rfc4648_vectors)
{
	roundtrip("", 0, "");
	roundtrip("f", 1, "Zg==");
	roundtrip("fo", 2, "Zm8=");
	roundtrip("foo", 3, "Zm9v");
	roundtrip("foob", 4, "Zm9vYg==");
	roundtrip("fooba", 5, "Zm9vYmE=");
	roundtrip("foobar", 6, "Zm9vYmFy");
	roundtrip("\xff\x00\xfe\x80", 4, "/wD+gA==");
}

Test(base64, refuses_what_is_not_base64)
{
	const char *bad[] = { "Zg", "Zg=", "Z===", "Zh==", "Zm9=", "Zm9v\n",
	    "Zm=v", "Z!==", "====", NULL };
	char *out = NULL;
	size_t n;

	for (const char **b = bad; *b != NULL; b++)
		cr_assert_eq(base64_decode(*b, strlen(*b), &out, &n), -1, "%s", *b);
	cr_assert_null(out);
}

static json_t *
header_of(const char *el, size_t len, struct wrapper *w)
{
	json_t *o = json_object();

	cr_assert_eq(wrapper_parse(el, len, WRAPPER_DEAD, w), 0, "%s", el);
	cr_assert_eq(dead_entry_header(o, w), 0);
	cr_assert_eq(dead_entry_job(o, w->doc, w->doc_len), 0);
	return o;
}

static char *
dump(json_t *o)
{
	char *s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
	cr_assert_not_null(s);
	return s;
}

Test(dead_entry, every_member_decoded_in_order)
{
	static const char el[] = HEAD ",\"id\":\"j\\u0001\\\"1\","
	    "\"stamps\":[\"k1\",\"k\\/2\"],\"first_error\":\"\\u001f no\","
	    "\"last_error\":\"caf\xc3\xa9\\n\",\"job\":{\"id\":\"x\"}}";
	struct wrapper w;
	json_t *o = header_of(el, sizeof(el) - 1, &w);
	char *s = dump(o);

	cr_assert_str_eq(s, "{\"reason\":\"failed by the handler\","
	    "\"attempts\":3,\"recoveries\":1,\"time\":1700000000000,"
	    "\"worker\":\"h:1:w0\",\"id\":\"j\\u0001\\\"1\",\"stamps\":[\"k1\","
	    "\"k/2\"],\"first_error\":\"\\u001F no\",\"last_error\":"
	    "\"caf\xc3\xa9\\n\",\"job\":\"{\\\"id\\\":\\\"x\\\"}\"}");
	free(s);
	json_decref(o);
	wrapper_free(&w);
}

Test(dead_entry, job_as_string_or_base64)
{
	static const char nul[] = HEAD ",\"job\":{\"s\":\"a\0b\"}}";
	static const char bad[] = HEAD ",\"job\":{\"s\":\"\xff\xfe\"}}";
	struct wrapper w;
	json_t *o = header_of(nul, sizeof(nul) - 1, &w);

	cr_assert_eq(json_string_length(json_object_get(o, "job")), 11);
	cr_assert_eq(memcmp(json_string_value(json_object_get(o, "job")),
	    "{\"s\":\"a\0b\"}", 11), 0);
	cr_assert_null(json_object_get(o, "job_base64"));
	json_decref(o);
	wrapper_free(&w);

	o = header_of(bad, sizeof(bad) - 1, &w);
	cr_assert_null(json_object_get(o, "job"));
	cr_assert_str_eq(json_string_value(json_object_get(o, "job_base64")),
	    "eyJzIjoi//4ifQ==");
	cr_assert_eq(json_object_size(o), 6);
	json_decref(o);
	wrapper_free(&w);
}

Test(dead_entry, raw_bytes_of_a_malformed_entry)
{
	json_t *o = json_object();

	cr_assert_eq(dead_entry_raw(o, "{\"job\":1}", 9), 0);
	cr_assert_str_eq(json_string_value(json_object_get(o, "raw")),
	    "{\"job\":1}");
	cr_assert_str_eq(json_string_value(json_object_get(o, "raw_base64")),
	    "eyJqb2IiOjF9");
	json_decref(o);
	o = json_object();
	cr_assert_eq(dead_entry_raw(o, "\xc0\x80", 2), 0);
	cr_assert_null(json_object_get(o, "raw"));
	cr_assert_str_eq(json_string_value(json_object_get(o, "raw_base64")),
	    "wIA=");
	json_decref(o);
}

Test(dead_entry, id_from_entry_document_or_bytes)
{
	static const char with_id[] = HEAD ",\"id\":\"e1\",\"job\":{\"id\":\"d\"}}";
	static const char doc_id[] = HEAD ",\"job\":{\"id\":\"d\"}}";
	static const char no_id[] = HEAD ",\"job\":\xff}";
	char id[JOB_ID_MAX + 1], sha[41];
	struct wrapper w;

	cr_assert_eq(wrapper_parse(with_id, sizeof(with_id) - 1, WRAPPER_DEAD,
	    &w), 0);
	dead_entry_id(&w, with_id, sizeof(with_id) - 1, 0, id);
	cr_assert_str_eq(id, "e1");
	wrapper_free(&w);
	cr_assert_eq(wrapper_parse(doc_id, sizeof(doc_id) - 1, WRAPPER_DEAD,
	    &w), 0);
	dead_entry_id(&w, doc_id, sizeof(doc_id) - 1, 0, id);
	cr_assert_str_eq(id, "d");
	wrapper_free(&w);
	cr_assert_eq(wrapper_parse(no_id, sizeof(no_id) - 1, WRAPPER_DEAD,
	    &w), 0);
	dead_entry_id(&w, no_id, sizeof(no_id) - 1, 0, id);
	job_sha1_hex("\xff", 1, sha);
	cr_assert_str_eq(id, sha);
	wrapper_free(&w);
	dead_entry_id(NULL, "garbage", 7, 0, id);
	job_sha1_hex("garbage", 7, sha);
	cr_assert_str_eq(id, sha);
}

/* Found by tests/fuzz/fuzz_dead_entry: an "id" over JOB_ID_MAX bytes was
 * cut inside its last character, and the name was not valid UTF-8. */
Test(dead_entry, long_id_cut_at_a_character_boundary)
{
	char el[512], id[JOB_ID_MAX + 1], want[JOB_ID_MAX + 1];
	struct wrapper w;
	int n;

	memset(want, 'a', JOB_ID_MAX - 1);
	want[JOB_ID_MAX - 1] = '\0';
	n = snprintf(el, sizeof(el), HEAD ",\"id\":\"%s\xc3\xa9\",\"job\":{}}",
	    want);
	cr_assert_eq(wrapper_parse(el, (size_t)n, WRAPPER_DEAD, &w), 0);
	dead_entry_id(&w, el, (size_t)n, 0, id);
	cr_assert_str_eq(id, want);
	wrapper_free(&w);
}

/* dead_entry_read + dead_entry_decode give what the header and the job
 * give; a malformed element is refused, named by nothing. */
Test(dead_entry, read_and_decode_an_element)
{
	static const char el[] = HEAD ",\"job\":{\"id\":\"x\","
	    "\"cache_key\":\"ferry:{q}:cache:x\"}}";
	struct dead_entry d;
	struct wrapper w;
	json_t *o = json_object(), *ref = header_of(el, sizeof(el) - 1, &w);
	char *key;

	dead_entry_read(&d, el, sizeof(el) - 1);
	cr_assert(d.ok);
	cr_assert_eq(d.el, el);
	cr_assert_eq(d.len, sizeof(el) - 1);
	cr_assert_eq(dead_entry_decode(o, &d), 0);
	cr_assert(json_equal(o, ref));
	key = dead_entry_cache_key(&d);
	cr_assert_str_eq(key, "ferry:{q}:cache:x");
	free(key);
	dead_entry_free(&d);
	json_decref(o);
	json_decref(ref);
	wrapper_free(&w);

	dead_entry_read(&d, "{\"job\":1}", 9);
	cr_assert_not(d.ok);
	o = json_object();
	cr_assert_eq(dead_entry_decode(o, &d), -1);
	cr_assert_null(dead_entry_cache_key(&d));
	dead_entry_free(&d);
	json_decref(o);
}

/* dead_entry_job_bytes reads back what dead_entry_job wrote, both ways,
 * and names what is wrong with anything else. */
Test(dead_entry, job_bytes_read_back)
{
	static const char *docs[] = { "{\"id\":\"x\"}", "{\"s\":\"\xff\xfe\"}" };
	const char *p, *why;
	char *buf;
	size_t n;

	for (int i = 0; i < 2; i++) {
		json_t *o = json_object();
		cr_assert_eq(dead_entry_job(o, docs[i], strlen(docs[i])), 0);
		cr_assert_eq(dead_entry_job_bytes(o, &p, &n, &buf, &why), 0);
		cr_assert_eq(n, strlen(docs[i]));
		cr_assert_eq(memcmp(p, docs[i], n), 0);
		cr_assert((buf != NULL) == (i == 1));
		free(buf);
		json_decref(o);
	}
	struct { const char *line, *why; } bad[] = {
		{ "{}", "no \"job\" string" },
		{ "{\"job\":1}", "no \"job\" string" },
		{ "{\"job_base64\":\"Zg\"}", "\"job_base64\" is not base64" },
		{ "{\"job\":\"a\",\"job_base64\":\"Zg==\"}",
		    "both \"job\" and \"job_base64\"" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		json_t *o = json_loads(bad[i].line, 0, NULL);
		cr_assert_eq(dead_entry_job_bytes(o, &p, &n, &buf, &why), -1);
		cr_assert_str_eq(why, bad[i].why);
		cr_assert_null(buf);
		json_decref(o);
	}
}

/* A cut entry (the dashboard's prefix of a big one): its header, and the
 * document's prefix cut back at a character boundary; flagged, while
 * dead_entry_read's contract is unchanged. */
Test(dead_entry, a_cut_entry_reads_its_header_and_a_prefix)
{
	const char *el = HEAD ",\"id\":\"j1\",\"job\":{\"v\":\"\xc3\xa9\xc3\xa9\"}}";
	size_t total = strlen(el);
	const char *mid = strstr(el, "\xc3\xa9") + 3;  /* inside the second */
	struct dead_entry e;

	dead_entry_read_cut(&e, el, (size_t)(mid - el), total);
	cr_assert(e.ok);
	cr_assert(e.truncated);
	cr_assert_eq(e.total, total);
	cr_assert_eq(e.w.doc_len, strlen("{\"v\":\"\xc3\xa9"));
	cr_assert_eq(memcmp(e.w.doc, "{\"v\":\"\xc3\xa9", e.w.doc_len), 0);
	dead_entry_free(&e);
	/* cut in the header: not ok, still flagged */
	dead_entry_read_cut(&e, el, 20, total);
	cr_assert(!e.ok);
	cr_assert(e.truncated);
	dead_entry_free(&e);
	/* whole: as dead_entry_read */
	dead_entry_read_cut(&e, el, total, total);
	cr_assert(e.ok);
	cr_assert(!e.truncated);
	cr_assert_eq(e.w.doc_len, strlen("{\"v\":\"\xc3\xa9\xc3\xa9\"}"));
	dead_entry_free(&e);
	/* dead_entry_read is unchanged on a cut: malformed */
	dead_entry_read(&e, el, (size_t)(mid - el));
	cr_assert(!e.ok);
	dead_entry_free(&e);
}

/* The name of an entry: SHA-1 of its first 4096 bytes and its length, the
 * same from the whole entry as from its prefix (dead_page.lua's). */
Test(dead_entry, the_ref_names_the_prefix_and_the_length)
{
	char *big = malloc(10000), a[41], b[41], c[41], want[41];

	cr_assert_not_null(big);
	memset(big, 'x', 10000);
	dead_entry_ref(big, 10000, 10000, a);
	dead_entry_ref(big, DEAD_ENTRY_REF_BYTES, 10000, b);
	cr_assert_str_eq(a, b);
	dead_entry_ref(big, 10000, 9999, c);
	cr_assert_str_neq(a, c);
	memcpy(big + DEAD_ENTRY_REF_BYTES, "10000", 5);
	job_sha1_hex(big, DEAD_ENTRY_REF_BYTES + 5, want);
	cr_assert_str_eq(a, want);
	dead_entry_ref("ab", 2, 2, a);
	job_sha1_hex("ab2", 3, want);
	cr_assert_str_eq(a, want);
	free(big);
}
