/* test_job.c - decoding list elements into jobs, the handler line, and the
 * SHA-1 behind ids. Expected digests come from `printf '%s' DOC | sha1sum`. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "job.h"
#include "sha1.h"

#define MAX 1048576L
#define SHA1_EMPTY "da39a3ee5e6b4b0d3255bfef95601890afd80709"

/* Parse a string literal, embedded NULs included. */
#define PARSE(j, lit) job_parse((j), (lit), sizeof(lit) - 1, MAX)
/* an element of a batch taken from requeue: ferry's wrapper */
#define WPARSE(j, lit) wparse((j), (lit), sizeof(lit) - 1, MAX)

static void
wparse(struct job *j, const char *el, size_t len, long max)
{
	job_parse_held(j, el, len, max, true);
	job_id(j);
}

static void
expect_valid(const char *el, const char *id)
{
	struct job j;

	job_parse(&j, el, strlen(el), MAX);
	cr_assert_null(j.invalid, "%s: %s", el, j.invalid);
	cr_assert_str_eq(j.id, id, "%s", el);
	job_free(&j);
}

static void
expect_invalid(const char *el, const char *why, const char *id)
{
	struct job j;

	job_parse(&j, el, strlen(el), MAX);
	cr_assert_not_null(j.invalid, "%s", el);
	cr_assert_str_eq(j.invalid, why, "%s: %s", el, j.invalid);
	cr_assert_str_eq(j.id, id, "%s: %s", el, j.id);
	job_free(&j);
}

static void
expect_line(const struct job *j, const char *want)
{
	size_t len;
	char *line = job_handler_line(j, &len);
	int same = len == strlen(want) && memcmp(line, want, len) == 0 &&
	    line[len] == '\0';

	cr_expect(same, "got %zu bytes [%s], want [%s]", len, line, want);
	free(line);
}

/* doc is a valid job of that id, handed to the handler byte for byte (at
 * attempt 0). */
static void
expect_passed_as_is(const char *doc, const char *id)
{
	struct job j;
	char want[512];

	job_parse(&j, doc, strlen(doc), MAX);
	cr_assert_null(j.invalid, "%s: %s", doc, j.invalid);
	cr_assert_str_eq(j.id, id);
	snprintf(want, sizeof(want), "{\"id\":\"%s\",\"attempts\":0,"
	    "\"recoveries\":0,\"job\":%s}\n", id, doc);
	expect_line(&j, want);
	job_free(&j);
}

/* --- SHA-1 --- */

Test(sha1, known_vectors)
{
	char hex[41];

	job_sha1_hex("", 0, hex);
	cr_assert_str_eq(hex, SHA1_EMPTY);
	job_sha1_hex("abc", 3, hex);
	cr_assert_str_eq(hex, "a9993e364706816aba3e25717850c26c9cd0d89d");
	job_sha1_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", 56,
	    hex);
	cr_assert_str_eq(hex, "84983e441c3bd26ebaae4aa1f95129e5e54670f1");
}

Test(sha1, million_a_in_odd_pieces)
{
	static const char want[] = "34aa973cd4c4daa4f61eeb2bdbad27316534016f";
	static char a[1000000];
	unsigned char d[SHA1_DIGEST_LEN];
	struct sha1_ctx c;
	char hex[41];
	size_t done = 0, step = 1;

	memset(a, 'a', sizeof(a));
	job_sha1_hex(a, sizeof(a), hex);
	cr_assert_str_eq(hex, want);
	sha1_init(&c);
	for (; done < sizeof(a); done += step, step = step % 997 + 13) {
		if (step > sizeof(a) - done)
			step = sizeof(a) - done;
		sha1_update(&c, a + done, step);
	}
	sha1_final(&c, d);
	for (int i = 0; i < SHA1_DIGEST_LEN; i++)
		snprintf(hex + 2 * i, 3, "%02x", d[i]);
	cr_assert_str_eq(hex, want);
}

Test(sha1, padding_boundaries)
{
	static const struct { size_t n; const char *hex; } v[] = {
		{ 55, "cef734ba81a024479e09eb5a75b6ddae62e6abf1" },
		{ 56, "901305367c259952f4e7af8323f480d59f81335b" },
		{ 63, "0ddc4e0cccd9a12850deb5abb0853a4425559fec" },
		{ 64, "bb2fa3ee7afb9f54c6dfb5d021f14b1ffe40c163" },
		{ 65, "78c741ddc482e4cdf8c474a0876347a0905b6233" },
		{ 119, "4300320394f7ee239bcdce7d3b8bcee173a0cd5c" },
		{ 120, "ceb2821639c4b6dcb10bce0e522ca2e608ce056d" },
		{ 128, "150fa3fbdc899bd0b8f95a9fb6027f564d953762" },
	};
	char x[128], hex[41];

	memset(x, 'x', sizeof(x));
	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		job_sha1_hex(x, v[i].n, hex);
		cr_assert_str_eq(hex, v[i].hex, "%zu x's", v[i].n);
	}
}

/* --- ids --- */

Test(job, bare_payload_is_named_by_its_sha1)
{
	struct job j;

	PARSE(&j, "{\"user_id\":7,\"sku\":\"A-1\"}");
	cr_assert_null(j.invalid);
	cr_assert_str_eq(j.id, "1105cc40777e7c22150ad992ebe0c698c939d5a1");
	cr_assert_eq(j.raw, j.el);
	cr_assert_eq(j.raw_len, j.el_len);
	cr_assert_eq(j.attempts, 0);
	cr_assert_eq(j.recoveries, 0);
	cr_assert_eq(j.nstamps, 0);
	job_free(&j);
}

Test(job, string_and_integer_ids)
{
	expect_valid("{\"id\":\"order-7\",\"data\":{\"x\":1}}", "order-7");
	expect_valid("{\"data\":{\"id\":\"inner\"},\"id\":42}", "42");
	expect_valid("{\"id\":-9223372036854775808}", "-9223372036854775808");
	expect_valid("{\"id\":9223372036854775807}", "9223372036854775807");
	expect_valid("{\"id\":0}", "0");
	expect_valid("{\"id\":\"caf\xc3\xa9-\xe2\x82\xac\"}", "caf\xc3\xa9-\xe2\x82\xac");
	expect_valid("{\"id\":\"caf\\u00e9\"}", "caf\xc3\xa9");
	expect_valid("{\"id\":\"a\\\"b\\\\c\"}", "a\"b\\c");
}

Test(job, empty_string_id_is_named_by_sha1)
{
	expect_valid("{\"id\":\"\"}", "a6847802842e7c15d61b44aae555380a7e2f891e");
}

Test(job, id_of_another_type_is_invalid)
{
	const char *why = "job id is not a string or integer";

	expect_invalid("{\"id\":1.5}", why,
	    "3ce689859fc2c855a8bdc07632b4698d623b53bd");
	expect_invalid("{\"id\":true}", why,
	    "aa54653192d3362f58dd396ceabab242b43532f0");
	expect_invalid("{\"id\":null}", why,
	    "c879790a4416ec956f34707eaf98b887a1593c69");
	expect_invalid("{\"id\":[1]}", why,
	    "43759c6859f150d62e37b1f0e05dd89968defbe1");
	expect_invalid("{\"id\":{}}", why,
	    "c26675d191f1809459ca7013f71d82e890c43e07");
}

Test(job, id_length_limit)
{
	char doc[200], id[JOB_ID_MAX + 2];

	memset(id, 'x', sizeof(id) - 1);
	id[JOB_ID_MAX] = '\0';
	snprintf(doc, sizeof(doc), "{\"id\":\"%s\"}", id);
	expect_valid(doc, id);
	id[JOB_ID_MAX] = 'x';
	id[JOB_ID_MAX + 1] = '\0';
	snprintf(doc, sizeof(doc), "{\"id\":\"%s\"}", id);
	expect_invalid(doc, "job id is longer than 128 bytes",
	    "f489dff17e7d20f8c420bcdc7898a296652a34b7");
}

/* --- invalid documents --- */

Test(job, empty_element)
{
	struct job j;

	job_parse(&j, "", 0, MAX);
	cr_assert_str_eq(j.invalid, "empty job");
	cr_assert_str_eq(j.id, SHA1_EMPTY);
	job_free(&j);
}

Test(job, over_max_job_bytes_is_not_parsed)
{
	const char *big = "{{{{{{{{{{{{{{{{{{{{";   /* 20 bytes, not JSON */
	struct job j;

	job_parse(&j, big, 20, 16);
	cr_assert_str_eq(j.invalid, "job is 20 bytes, over max_job_bytes 16");
	cr_assert_str_eq(j.id, "14d170661ce273344a6311e3f2f2a5abf3317b75",
	    "%s", j.id);
	job_free(&j);
	job_parse(&j, "{\"a\":\"456789012\"}", 17, 16);
	cr_assert_str_eq(j.invalid, "job is 17 bytes, over max_job_bytes 16");
	job_parse(&j, "{\"a\":\"45678901\"}", 16, 16);
	cr_assert_null(j.invalid);
	job_parse(&j, "{\"a\":\"456789012\"}", 17, 0);
	cr_assert_null(j.invalid, "max_job_bytes 0 is no limit");
}

Test(job, malformed_json)
{
	expect_invalid("{\"a\":1,}",
	    "malformed JSON: string or '}' expected near '}' at line 1 column 8",
	    "c2e26192861574fdb23b4f2ac1cd6b09a14f896b");
	expect_invalid("{\"a\":1,\n\"b\":}",
	    "malformed JSON: unexpected token near '}' at line 2 column 5",
	    "e1a13690cfb34a2c68bf8d59926c740ad869a69e");
	expect_invalid("{\"a\":1}x",
	    "malformed JSON: end of file expected near 'x' at line 1 column 8",
	    "63da4b706dfeb023792800bff55a9e72ae98ddf9");
	expect_invalid("{\"a\":1e400}",
	    "malformed JSON: real number overflow near '1e400' at line 1 "
	    "column 10", "0e63505082469f98b49c789a27a3d2f6b40b201b");
	expect_invalid("{\"a\":\"\\u0000\"}",
	    "malformed JSON: \\u0000 is not allowed without JSON_ALLOW_NUL "
	    "near '\"\\u0000\"' at line 1 column 13",
	    "0b7646d47e162ae01714171520e07239eb03ae22");
}

Test(job, malformed_json_reason_is_printable_utf8)
{
	expect_invalid("{\"a\":\"\xff\"}",
	    "malformed JSON: unable to decode byte 0xff near '\"' at line 1 "
	    "column 6", "2a067db2f1d21df994c56da66cce06e8bd96faa5");
	/* jansson would quote the control byte itself */
	expect_invalid("{\"a\":1}\x01",
	    "malformed JSON: end of file expected near '?' at line 1 column 8",
	    "2b771ec4d8f9f1889e50a650fe88d45643ff4bcc");
}

Test(job, nul_byte_is_refused)
{
	struct job j;

	PARSE(&j, "{\"a\":1}\0x");
	cr_assert_str_eq(j.invalid, "malformed JSON: NUL byte at line 1 column 8");
	cr_assert_str_eq(j.id, "f0d7efd3deaabd67773cdebdbe1dd05780dabc1d");
	PARSE(&j, "{\"\xc3\xa9\":\n\"x\0\"}");
	cr_assert_str_eq(j.invalid, "malformed JSON: NUL byte at line 2 column 3");
}

Test(job, not_an_object)
{
	const char *why = "job is not a JSON object";

	expect_invalid("[1,2]", why, "b874a9cb236fc88a636fad656a401e23b64300da");
	expect_invalid("5", why, "ac3478d69a3c81fa62e60f5c3696165a4e5e6ac4");
	expect_invalid("\"x\"", why, "a81fa20d625fc8e5a04721cdf61f056fc2e22496");
	expect_invalid("null", why, "2be88ca4242c76e8253ac62474851065032d6833");
}

/* --- numbers and bytes pass through --- */

Test(job, big_numbers_pass_through_byte_for_byte)
{
	const char *doc = "{\"n\":12345678901234567890,"
	    "\"f\":0.1000000000000000055511151231257827,\"t\":1e-400,"
	    "\"m\":-98765432109876543210987654321}";

	expect_passed_as_is(doc, "d65b1ddcfcd7844fcd03273aa4895c42a0c5f62d");
}

Test(job, ids_beside_big_numbers)
{
	expect_valid("{\"id\":7,\"n\":12345678901234567890}", "7");
	expect_valid("{\"id\":\"s\",\"n\":12345678901234567890}", "s");
	expect_invalid("{\"id\":12345678901234567890}",
	    "job id is not a string or integer",
	    "0fbbb140b01be8ab198f09c30b80d1d157527058");
	expect_invalid("{\"id\":0.5,\"n\":12345678901234567890}",
	    "job id is not a string or integer",
	    "d582143a88892ef9e6bc74414d483a9998f35d40");
}

Test(job, utf8_document)
{
	const char *doc = "{\"name\":\"J\xc3\xbcrgen \xe2\x82\xac \xf0\x9f\x9a\xa2\"}";

	expect_passed_as_is(doc, "23d15271169105888b1f28159dcad4480e559f21");
}

/* Found by fuzzing: an integer beyond 64 bits elsewhere made jansson read
 * every number as a real, and a real id was then accepted. */
Test(job, a_real_id_is_refused_whatever_else_the_document_holds)
{
	expect_invalid("{\"id\":1.0}", "job id is not a string or integer",
	    "6b912d0afbf26a97b3aa88c6ff22a4ef4c4a1710");
	struct job j;
	PARSE(&j, "{\"id\":1.0,\"x\":123456789012345678901234}");
	cr_assert_str_eq(j.invalid, "job id is not a string or integer");
	job_free(&j);
	PARSE(&j, "{\"id\":1e2,\"x\":123456789012345678901234}");
	cr_assert_str_eq(j.invalid, "job id is not a string or integer");
	job_free(&j);
	PARSE(&j, "{\"id\":7,\"x\":123456789012345678901234}");
	cr_assert_null(j.invalid, "%s", j.invalid);
	cr_assert_str_eq(j.id, "7");
	job_free(&j);
}

/* --- the wrapper (doc/formats.md) --- */

Test(job, wrapped_without_stamps)
{
	static const char el[] = "{\"ferry\":1,\"recoveries\":2,\"attempts\":3,"
	    "\"job\":{\"id\":\"a\",\"x\":1}}";
	struct job j;

	WPARSE(&j, el);
	cr_assert_null(j.invalid);
	cr_assert_eq(j.attempts, 3);
	cr_assert_eq(j.recoveries, 2);
	cr_assert_eq(j.nstamps, 0);
	cr_assert_str_eq(j.id, "a");
	cr_assert_eq(j.raw, el + strlen("{\"ferry\":1,\"recoveries\":2,"
	    "\"attempts\":3,\"job\":"));
	cr_assert_eq(j.raw_len, strlen("{\"id\":\"a\",\"x\":1}"));
	expect_line(&j, "{\"id\":\"a\",\"attempts\":3,\"recoveries\":2,"
	    "\"job\":{\"id\":\"a\",\"x\":1}}\n");
	job_free(&j);
}

Test(job, wrapped_with_stamps_errors_and_seq)
{
	struct job j;

	WPARSE(&j, "{\"ferry\":1,\"recoveries\":1,\"attempts\":0,"
	    "\"stamps\":[\"h:1.2:ab:17\",\"h:1.3:cd:\\/2\"],"
	    "\"first_error\":\"boom\",\"last_error\":\"bang \\\"x\\\"\","
	    "\"seq\":9,\"job\":{\"x\":1}}");
	cr_assert_null(j.invalid, "%s", j.invalid);
	cr_assert_eq(j.recoveries, 1);
	cr_assert_eq(j.attempts, 0);
	cr_assert_eq(j.nstamps, 2);
	cr_assert_str_eq(j.stamps[0], "h:1.2:ab:17");
	cr_assert_str_eq(j.stamps[1], "h:1.3:cd:/2");
	cr_assert_str_eq(j.id, "8724fc2165f042facbd9194627e4748bb7571b27");
	job_free(&j);
	cr_assert_null(j.stamps);
	job_free(&j);
}

Test(job, wrapping_does_not_rename_a_job)
{
	struct job bare, wrapped;

	PARSE(&bare, "{\"user_id\":7}");
	WPARSE(&wrapped, "{\"ferry\":1,\"recoveries\":1,\"attempts\":2,"
	    "\"job\":{\"user_id\":7}}");
	cr_assert_str_eq(bare.id, "8962ca5027ba6413efd552b8f9aab7c47bd254db");
	cr_assert_str_eq(wrapped.id, bare.id);
	job_free(&bare);
	job_free(&wrapped);
}

Test(job, job_mark_inside_the_document_and_the_stamps)
{
	/* the first ,"job": is the wrapper's: its strings escape quotes */
	static const char el[] = "{\"ferry\":1,\"recoveries\":0,\"attempts\":1,"
	    "\"stamps\":[\"b,\\\"job\\\":c\"],\"job\":{\"id\":\"x\",\"job\":{\"k\":1},"
	    "\"s\":\",\\\"job\\\":\"}}";
	struct job j;

	WPARSE(&j, el);
	cr_assert_null(j.invalid, "%s", j.invalid);
	cr_assert_str_eq(j.stamps[0], "b,\"job\":c");
	cr_assert_str_eq(j.id, "x");
	cr_assert_eq(j.raw_len, strlen("{\"id\":\"x\",\"job\":{\"k\":1},"
	    "\"s\":\",\\\"job\\\":\"}"));
	cr_assert_eq(memcmp(j.raw, "{\"id\":\"x\",\"job\"", 15), 0);
	job_free(&j);
	/* unwrapped documents may have a "job" member of their own */
	expect_valid("{\"id\":1,\"job\":{\"ferry\":1}}", "1");
}

Test(job, wrapped_document_rules_apply_to_the_document)
{
	struct job j;

	WPARSE(&j, "{\"ferry\":1,\"recoveries\":0,\"attempts\":1,\"job\":{\"a\":}}");
	cr_assert_str_eq(j.invalid,
	    "malformed JSON: unexpected token near '}' at line 1 column 6");
	cr_assert_str_eq(j.id, "57ca32c28e99d62af8715e89257a12b0bd3318b4");
	cr_assert_eq(j.attempts, 1, "counters survive an invalid document");
	job_free(&j);
	WPARSE(&j, "{\"ferry\":1,\"recoveries\":0,\"attempts\":0,\"job\":}");
	cr_assert_str_eq(j.invalid, "empty job");
	cr_assert_str_eq(j.id, SHA1_EMPTY);
	job_free(&j);
	/* a truncated element still ends in "}": its document is "{" */
	WPARSE(&j, "{\"ferry\":1,\"recoveries\":0,\"attempts\":2,\"job\":{}");
	cr_assert_str_eq(j.invalid, "malformed JSON: string or '}' expected "
	    "near end of file at line 1 column 1");
	cr_assert_eq(j.attempts, 2);
	job_free(&j);
	/* max_job_bytes counts the document, not the wrapper */
	wparse(&j, "{\"ferry\":1,\"recoveries\":0,\"attempts\":0,\"job\":{\"x\":1}}",
	    53, 16);
	cr_assert_null(j.invalid);
	cr_assert_str_eq(j.id, "8724fc2165f042facbd9194627e4748bb7571b27");
	job_free(&j);
}

Test(job, malformed_wrapper)
{
	static const char *const v[] = {
		"{\"ferry\":1,\"recoveries\":\"1\",\"attempts\":0,\"job\":{}}",
		"{\"ferry\":1,\"recoveries\":0,\"attempts\":-1,\"job\":{}}",
		"{\"ferry\":1,\"recoveries\":0,\"attempts\":\"x\",\"job\":{}}",
		"{\"ferry\":1,\"recoveries\":0,\"attempts\":0,\"batch\":\"k\","
		    "\"job\":{}}",        /* an unknown member */
		"{\"ferry\":1,\"recoveries\":0,\"attempts\":0}",
		"{\"ferry\":1,\"recoveries\":0,\"attempts\":0,\"job\":",
		"{\"ferry\":1,\"recoveries\":0,\"attempts\":0,,\"job\":{}}",
		"{\"ferry\":1,\"recoveries\":2,\"job\":{}}",
		"{\"ferry\":1,\"job\":{\"id\":1}}",
		"{\"ferry\":1,\"recoveries\":01,\"attempts\":0,\"job\":{}}",
		"{\"ferry\":1,\"recoveries\":1000000000,\"attempts\":0,\"job\":{}}",
		"{\"ferry\":1,\"recoveries\":0,\"attempts\":0,\"stamps\":[1],"
		    "\"job\":{}}",
		"{\"ferry\":1,\"recoveries\":0,\"attempts\":0,\"stamps\":[\"a\",],"
		    "\"job\":{}}",
		"{\"ferry\":1,\"recoveries\":0,\"attempts\":0,\"last_error\":"
		    "\"\xc3\",\"job\":{}}",    /* invalid UTF-8 in a string */
		"{\"ferry\":1,\"recoveries\":0,\"attempts\":0,\"last_error\":"
		    "\"\\u0000\",\"job\":{}}",
		"{\"ferry\":1,\"recoveries\":0,\"attempts\":0,\"last_error\":"
		    "\"a\tb\",\"job\":{}}",    /* a raw control character */
		"{\"ferry\":1 ,\"recoveries\":0,\"attempts\":0,\"job\":{}}",
		"",
		"}",
	};

	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		struct job j;

		wparse(&j, v[i], strlen(v[i]), MAX);
		cr_assert_str_eq(j.invalid, "malformed ferry wrapper", "%s", v[i]);
		cr_assert_eq(j.raw, j.el);
		cr_assert_eq(j.raw_len, j.el_len);
		cr_assert_eq(j.attempts, 0);
		cr_assert_eq(j.nstamps, 0);
		job_free(&j);
	}
}

Test(job, a_document_that_looks_like_a_wrapper_is_a_document)
{
	/* from ready: the producer's document, whatever it looks like */
	struct job j;

	PARSE(&j, "{\"ferry\":1,\"recoveries\":1,\"attempts\":0,"
	    "\"stamps\":[\"k\"],\"job\":{\"id\":\"x\"}}");
	cr_assert_null(j.invalid);
	cr_assert_eq(j.recoveries, 0);
	cr_assert_eq(j.attempts, 0);
	cr_assert_eq(j.nstamps, 0);
	cr_assert_eq(j.raw, j.el);
	cr_assert_eq(j.raw_len, j.el_len);
	job_free(&j);
	expect_valid("{\"ferry\":2,\"job\":1}",
	    "2af592fdd533febeb591852ca72caefa31a2045a");
}

/* --- the handler line --- */

Test(job, handler_line_escapes_the_id)
{
	struct job j;
	json_t *back;
	size_t len;
	char *line;

	PARSE(&j, "{\"id\":\"a\\\"b\\\\c\\n\\u0001\xc3\xa9\"}");
	cr_assert_null(j.invalid);
	expect_line(&j, "{\"id\":\"a\\\"b\\\\c\\u000a\\u0001\xc3\xa9\","
	    "\"attempts\":0,\"recoveries\":0,"
	    "\"job\":{\"id\":\"a\\\"b\\\\c\\n\\u0001\xc3\xa9\"}}\n");
	line = job_handler_line(&j, &len);
	back = json_loadb(line, len, 0, NULL);
	cr_assert_not_null(back);
	cr_assert_str_eq(json_string_value(json_object_get(back, "id")), j.id);
	json_decref(back);
	free(line);
}

Test(job, handler_line_is_one_line)
{
	struct job j;

	PARSE(&j, "{\r\n  \"id\": \"p\",\n  \"s\": \"a\\nb\"\r\n}\n");
	cr_assert_null(j.invalid);
	expect_line(&j, "{\"id\":\"p\",\"attempts\":0,\"recoveries\":0,"
	    "\"job\":{    \"id\": \"p\",   \"s\": \"a\\nb\"  } }\n");
}

Test(job, handler_line_integer_id)
{
	struct job j;

	WPARSE(&j, "{\"ferry\":1,\"recoveries\":0,\"attempts\":4,"
	    "\"job\":{\"id\":-12,\"v\":0.1000000000000000055511151231257827}}");
	expect_line(&j, "{\"id\":\"-12\",\"attempts\":4,\"recoveries\":0,"
	    "\"job\":{\"id\":-12,\"v\":0.1000000000000000055511151231257827}}\n");
	job_free(&j);
}

/* j->scanned: only json_scan's own yes, which lets the postgres sink skip
 * validating the document again. */
Test(job, scanned_only_when_json_scan_accepted_it)
{
	struct job j;

	PARSE(&j, "{\"id\":1,\"a\":\"x\"}");
	cr_assert(j.invalid == NULL && j.scanned);
	job_free(&j);
	WPARSE(&j, "{\"ferry\":1,\"recoveries\":0,\"attempts\":1,"
	    "\"job\":{\"id\":7}}");
	cr_assert(j.invalid == NULL && j.scanned);
	job_free(&j);
	/* noted by json_scan: jansson decides, the sink validates again */
	PARSE(&j, "{\"id\":1,\"a\":\"\\u0000\"}");
	cr_assert(!j.scanned);
	job_free(&j);
	PARSE(&j, "{\"id\":1,\"a\":12345678901234567890}");
	cr_assert(j.invalid == NULL && !j.scanned);
	job_free(&j);
	/* digits in a string are nothing jansson reads otherwise */
	PARSE(&j, "{\"id\":1,\"a\":\"12345678901234567890e123\"}");
	cr_assert(j.invalid == NULL && j.scanned);
	job_free(&j);
	PARSE(&j, "{\"id\":1,");
	cr_assert(j.invalid != NULL && !j.scanned);
	job_free(&j);
	PARSE(&j, "[1]");
	cr_assert(j.invalid != NULL && !j.scanned);
	job_free(&j);
}

/* --- cache keys --- */

Test(job, cache_key_and_data)
{
	struct job j;

	PARSE(&j, "{\"id\":\"c\",\"cache_key\":\"ferry:{q}:cache:c\"}");
	cr_assert_null(j.invalid);
	cr_assert_str_eq(j.cache_key, "ferry:{q}:cache:c");
	cr_assert(!j.has_data);
	job_free(&j);
	cr_assert_null(j.cache_key);
	PARSE(&j, "{\"data\":[1],\"cache_key\":\"k\"}");
	cr_assert_str_eq(j.cache_key, "k");
	cr_assert(j.has_data);
	job_free(&j);
	WPARSE(&j, "{\"ferry\":1,\"recoveries\":0,\"attempts\":1,"
	    "\"job\":{\"id\":7,\"cache_key\":\"k7\"}}");
	cr_assert_str_eq(j.cache_key, "k7");
	cr_assert_str_eq(j.id, "7");
	job_free(&j);
	PARSE(&j, "{\"id\":1}");
	cr_assert_null(j.cache_key);
	job_free(&j);
}

Test(job, bad_cache_keys_keep_the_id)
{
	char el[700];

	expect_invalid("{\"id\":\"x\",\"cache_key\":5}",
	    "cache_key is not a non-empty string", "x");
	expect_invalid("{\"id\":\"x\",\"cache_key\":\"\"}",
	    "cache_key is not a non-empty string", "x");
	snprintf(el, sizeof(el), "{\"id\":\"x\",\"cache_key\":\"%0513d\"}", 0);
	expect_invalid(el, "cache_key is longer than 512 bytes", "x");
	snprintf(el, sizeof(el), "{\"id\":\"x\",\"cache_key\":\"%0512d\"}", 0);
	expect_valid(el, "x");
}

Test(job, handler_line_with_cache)
{
	struct job j;

	PARSE(&j, "{\"id\":\"c\",\"cache_key\":\"k\"}");
	j.cache = strdup("{\"f\":\"v\"}");
	j.cache_len = strlen(j.cache);
	expect_line(&j, "{\"id\":\"c\",\"attempts\":0,\"recoveries\":0,"
	    "\"job\":{\"id\":\"c\",\"cache_key\":\"k\"},\"cache\":{\"f\":\"v\"}}\n");
	job_free(&j);
	cr_assert_null(j.cache);
}

/* --- json_scan fast path reads documents as jansson does --- */

Test(job, escaped_and_repeated_keys)
{
	struct job j;

	PARSE(&j, "{\"i\\u0064\":\"x\",\"cache\\u005fkey\":\"k\",\"d\\u0061ta\":1}");
	cr_assert_null(j.invalid, "%s", j.invalid);
	cr_assert_str_eq(j.id, "x");
	cr_assert_str_eq(j.cache_key, "k");
	cr_assert(j.has_data);
	job_free(&j);
	expect_valid("{\"id\":\"a\",\"id\":\"b\"}", "b");
	expect_valid("{\"id\":[],\"id\":7}", "7");
	expect_invalid("{\"id\":1,\"id\":[]}", "job id is not a string or integer",
	    "24b94d8b96c6d7532bfde1d3c99e6035b1908036");
}

Test(job, integer_ids_as_jansson_reads_them)
{
	expect_valid("{\"id\":-0}", "0");
	expect_valid("{\"id\":123456789012345678}", "123456789012345678");
	/* a big integer elsewhere makes jansson read numbers as reals; the
	 * id must still be written as an integer */
	expect_valid("{\"id\":1,\"n\":123456789012345678901}", "1");
	expect_invalid("{\"id\":1.0,\"n\":123456789012345678901}",
	    "job id is not a string or integer", "7d97f275724acc71cca01333c2c2bb2d7224cee2");
	expect_invalid("{\"id\":1e2}", "job id is not a string or integer",
	    "9ac3d891f0c9c39412e8593746f7ba5b61342adf");
}

Test(job, escaped_id_and_cache_key_lengths)
{
	char doc[4096], id[JOB_ID_MAX + 2];
	size_t n;

	memset(id, 'a', sizeof(id) - 1);
	id[JOB_ID_MAX] = '\0';
	n = (size_t)sprintf(doc, "{\"id\":\"");
	for (int k = 0; k < JOB_ID_MAX; k++)
		n += (size_t)sprintf(doc + n, "\\u0061");
	sprintf(doc + n, "\"}");
	expect_valid(doc, id);
	sprintf(doc + n, "a\"}");
	expect_invalid(doc, "job id is longer than 128 bytes",
	    "88f0918f5baa2ed50b713fa0eab044ce718b46d8");
}

Test(job, nesting_beyond_json_scan_depth)
{
	char doc[256];
	size_t n = (size_t)sprintf(doc, "{\"id\":\"deep\",\"a\":");

	for (int k = 0; k < 70; k++)
		doc[n++] = '[';
	for (int k = 0; k < 70; k++)
		doc[n++] = ']';
	strcpy(doc + n, "}");
	expect_valid(doc, "deep");
}

Test(job, overflowing_reals_anywhere_are_refused)
{
	struct job j;

	PARSE(&j, "{\"id\":\"x\",\"a\":[1E+400]}");
	cr_assert_not_null(j.invalid);
	cr_assert(strncmp(j.invalid, "malformed JSON: real number overflow",
	    36) == 0, "%s", j.invalid);
	job_free(&j);
	expect_valid("{\"id\":\"x\",\"a\":1e99,\"b\":1e-99}", "x");
}
