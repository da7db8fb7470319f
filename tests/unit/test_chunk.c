/* test_chunk.c - what ferryctl enqueue pushes for a document: as it is,
 * split into chunks of rows, or with its data moved into a cache key. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "chunk.h"
#include "util.h"

#define PREFIX "ferry:{q}:cache:"

static struct chunk_jobs out;

static void
fini(void)
{
	chunk_jobs_free(&out);
}

TestSuite(chunk, .fini = fini);

static int
run(const char *doc, const char *id, int rows, const char *prefix,
    char *err)
{
	return chunk_document(doc, strlen(doc), id, rows, prefix, &out, err,
	    256);
}

static void
expect_el(size_t i, const char *id, const char *el)
{
	cr_assert_lt(i, out.n);
	cr_assert_str_eq(out.v[i].id, id);
	cr_assert_eq(out.v[i].el_len, strlen(el), "%.*s", (int)out.v[i].el_len,
	    out.v[i].el);
	cr_assert_eq(memcmp(out.v[i].el, el, strlen(el)), 0, "%.*s",
	    (int)out.v[i].el_len, out.v[i].el);
}

Test(chunk, small_documents_pass_untouched)
{
	const char *doc = "{\"id\":\"a\",\"data\":[1,2]}";
	char err[256];

	cr_assert_eq(run(doc, "a", 2, NULL, err), 0);
	cr_assert_eq(out.n, 1);
	cr_assert_eq(out.v[0].el, doc, "referenced, not copied");
	cr_assert(!out.v[0].owned);
	cr_assert_null(out.v[0].key);
	cr_assert_eq(run("{\"x\":1}", "sha", 1, NULL, err), 0);
	cr_assert_eq(out.n, 2);
}

Test(chunk, rows_split_with_the_other_members)
{
	char err[256];

	cr_assert_eq(run("{\"kind\":\"o\", \"data\" : [{\"r\":1},2.50,\"x\"],"
	    "\"id\":7,\"n\":{\"a\":[1]}}", "7", 2, NULL, err), 0);
	cr_assert_eq(out.n, 2);
	expect_el(0, "7", "{\"id\":\"7\",\"kind\":\"o\",\"n\":{\"a\":[1]},"
	    "\"data\":[{\"r\":1},2.50]}");
	expect_el(1, "7:2", "{\"id\":\"7:2\",\"kind\":\"o\",\"n\":{\"a\":[1]},"
	    "\"data\":[\"x\"]}");
	cr_assert(out.v[0].owned);
	cr_assert_str_eq(out.v[0].layout, " 0+2");
	cr_assert_str_eq(out.v[1].layout, " 2+1");
}

/* A chunk's id names its rows: the first chunk goes by the document's id,
 * each other by its first row, and its layout (first row + count) tells
 * the enqueue which rows the id holds, so that the same document sent
 * again in other chunks is refused (src/redis/lua/enqueue.lua), not
 * written twice. A document left whole has the layout of all its rows. */
Test(chunk, a_chunks_id_and_layout_name_its_rows)
{
	char err[256];
	const char *doc = "{\"id\":\"d\",\"data\":[0,1,2,3,4,5,6,7,8,9]}";

	cr_assert_eq(run(doc, "d", 5, NULL, err), 0);
	cr_assert_eq(run(doc, "d", 3, NULL, err), 0);
	cr_assert_eq(run(doc, "d", 10, NULL, err), 0);
	cr_assert_eq(run("{\"id\":\"e\",\"data\":{\"x\":1}}", "e", 3, NULL,
	    err), 0);
	const char *want[][2] = {
		{ "d", " 0+5" }, { "d:5", " 5+5" },
		{ "d", " 0+3" }, { "d:3", " 3+3" }, { "d:6", " 6+3" },
		{ "d:9", " 9+1" },
		{ "d", " 0+10" }, { "e", "" },
	};
	cr_assert_eq(out.n, FERRY_ARRAY_LEN(want));
	for (size_t i = 0; i < out.n; i++) {
		cr_assert_str_eq(out.v[i].id, want[i][0], "job %zu", i);
		cr_assert_str_eq(out.v[i].layout, want[i][1], "job %zu", i);
	}
}

Test(chunk, exact_multiple_and_escaped_keys)
{
	char err[256];

	cr_assert_eq(run("{\"d\\u0061ta\":[1,2,3,4],\"i\\u0064\":\"q\\\"x\"}",
	    "q\"x", 2, NULL, err), 0);
	cr_assert_eq(out.n, 2);
	expect_el(0, "q\"x", "{\"id\":\"q\\\"x\",\"data\":[1,2]}");
	expect_el(1, "q\"x:2", "{\"id\":\"q\\\"x:2\",\"data\":[3,4]}");
}

/* Found by tests/fuzz/fuzz_chunk: keys escaped in full ("data" as 24
 * bytes, "cache_key" as 54) were not recognised, so the rows were not split
 * and --cache stored the whole document as the data; job.c reads them. */
Test(chunk, keys_escaped_in_full)
{
	char err[256];

	cr_assert_eq(run("{\"\\u0064\\u0061\\u0074\\u0061\":[1,2,3]}", "f", 2,
	    NULL, err), 0);
	cr_assert_eq(out.n, 2);
	expect_el(0, "f", "{\"id\":\"f\",\"data\":[1,2]}");
	expect_el(1, "f:2", "{\"id\":\"f:2\",\"data\":[3]}");
	cr_assert_eq(run("{\"\\u0063\\u0061\\u0063\\u0068\\u0065\\u005f"
	    "\\u006b\\u0065\\u0079\":\"k\"}", "g", 2, PREFIX, err), -1);
	cr_assert(strstr(err, "cache_key") != NULL, "%s", err);
}

/* The length of a key of ferry's own past the prefix, "<16 hex>.<n>",
 * checked; its index in *index. */
static size_t
own_part(const char *key, unsigned *index)
{
	size_t plen = strlen(PREFIX), k = plen;

	cr_assert_eq(strncmp(key, PREFIX, plen), 0, "%s", key);
	for (; k < plen + 16; k++)
		cr_assert(key[k] != '\0' && strchr("0123456789abcdef", key[k]) !=
		    NULL, "%s", key);
	cr_assert_eq(key[k], '.', "%s", key);
	char *end;
	*index = (unsigned)strtoul(key + k + 1, &end, 10);
	cr_assert(end > key + k + 1 && *end == '\0', "%s", key);
	return strlen(key) - plen;
}

/* The element with its cache key's own part cut out, checked:
 * "...:cache:<16 hex>.<n>" reads "...:cache:*". */
static void
expect_keyed(size_t i, const char *id, const char *el)
{
	char got[512];
	const char *key = out.v[i].key;
	unsigned index;
	size_t own = own_part(key, &index), klen = strlen(key),
	    n = out.v[i].el_len;
	const char *at = strstr(out.v[i].el, key);

	cr_assert_not_null(at, "%.*s names %s", (int)n, out.v[i].el, key);
	snprintf(got, sizeof(got), "%.*s*%.*s", (int)(at - out.v[i].el + klen -
	    own), out.v[i].el, (int)(n - (size_t)(at - out.v[i].el) - klen),
	    at + klen);
	cr_assert_str_eq(got, el);
	cr_assert_str_eq(out.v[i].id, id);
}

Test(chunk, cache_moves_the_data)
{
	char err[256];

	cr_assert_eq(run("{\"id\":\"a\",\"v\":1,\"data\":{\"x\":[1, 2]}}", "a",
	    1000, PREFIX, err), 0);
	cr_assert_eq(out.n, 1);
	expect_keyed(0, "a", "{\"id\":\"a\",\"v\":1,\"cache_key\":"
	    "\"ferry:{q}:cache:*\"}");
	cr_assert_str_eq(out.v[0].cache, "{\"x\":[1, 2]}");
	cr_assert_eq(out.v[0].cache_len, 12);
}

/* The members a sink reads of the job (op, a table member) stay in the
 * pushed job; a job without "data" is refused, its members being its row
 * and the job's at once. */
Test(chunk, cache_keeps_the_job_members)
{
	char err[256];

	cr_assert_eq(run("{\"op\":\"delete\",\"table\":\"lines\",\"id\":42,"
	    "\"data\":[{\"id\":42}]}", "42", 1000, PREFIX, err), 0);
	expect_keyed(0, "42", "{\"id\":\"42\",\"op\":\"delete\",\"table\":"
	    "\"lines\",\"cache_key\":\"ferry:{q}:cache:*\"}");
	cr_assert_eq(run("{\"op\":\"delete\",\"id\":42}", "42", 1000, PREFIX,
	    err), -1);
	cr_assert_str_eq(err, CHUNK_BARE_REFUSAL);
	cr_assert_eq(out.n, 1, "nothing appended");
}

/* Two jobs of one id, or byte-identical, never share a key: a later one
 * cannot overwrite the data of an earlier one still waiting. */
Test(chunk, every_job_has_a_key_of_its_own)
{
	char err[256];

	out.key_seed = 42;
	for (int i = 0; i < 3; i++)
		cr_assert_eq(run("{\"id\":7,\"data\":[1]}", "7", 1000, PREFIX,
		    err), 0);
	cr_assert_eq(run("{\"id\":7,\"data\":[1,2,3]}", "7", 2, PREFIX, err),
	    0);
	cr_assert_eq(out.n, 5);
	for (size_t i = 0; i < out.n; i++)
		for (size_t j = i + 1; j < out.n; j++)
			cr_assert_str_neq(out.v[i].key, out.v[j].key);
}

/* Keys come in groups of CHUNK_KEY_GROUP, indexed from 0: the protected
 * hash counts a group in one entry (src/redis/lua/common.lua). */
Test(chunk, keys_come_in_groups)
{
	char err[256];
	unsigned index;

	for (int i = 0; i < CHUNK_KEY_GROUP + 2; i++)
		cr_assert_eq(run("{\"data\":[1]}", "x", 1000, PREFIX, err), 0);
	cr_assert_eq(out.n, CHUNK_KEY_GROUP + 2);
	for (size_t i = 0; i < out.n; i++) {
		own_part(out.v[i].key, &index);
		cr_assert_eq(index, i % CHUNK_KEY_GROUP, "%s", out.v[i].key);
		size_t first = i < CHUNK_KEY_GROUP ? 0 : CHUNK_KEY_GROUP;
		cr_assert_eq(strncmp(out.v[i].key, out.v[first].key,
		    strlen(PREFIX) + 16) == 0, true, "%s, %s", out.v[i].key,
		    out.v[first].key);
	}
	cr_assert_neq(strncmp(out.v[0].key, out.v[CHUNK_KEY_GROUP].key,
	    strlen(PREFIX) + 16), 0);
}

Test(chunk, cache_and_split)
{
	char err[256];

	cr_assert_eq(run("{\"id\":\"b\",\"data\":[1,2,3]}", "b", 2, PREFIX, err),
	    0);
	cr_assert_eq(out.n, 2);
	expect_keyed(1, "b:2", "{\"id\":\"b:2\",\"cache_key\":"
	    "\"ferry:{q}:cache:*\"}");
	cr_assert_str_eq(out.v[0].layout, " 0+2");
	cr_assert_str_eq(out.v[1].layout, " 2+1");
	cr_assert_str_eq(out.v[0].cache, "[1,2]");
	cr_assert_str_eq(out.v[1].cache, "[3]");
}

Test(chunk, refusals)
{
	char err[256], id[JOB_ID_MAX + 1];

	cr_assert_eq(run("{\"cache_key\":\"k\",\"data\":1}", "x", 5, PREFIX,
	    err), -1);
	cr_assert_str_eq(err, "the job names a cache_key already: it cannot be "
	    "cached again (--cache)");
	cr_assert_eq(run("{\"cache_key\":\"k\",\"data\":[1,2]}", "x", 1, NULL,
	    err), -1);
	cr_assert(strstr(err, "split into chunks"));
	cr_assert_eq(run("{\"cache_key\":\"k\",\"data\":[1,2]}", "x", 2, NULL,
	    err), 0);
	memset(id, 'i', JOB_ID_MAX - 1);
	id[JOB_ID_MAX - 1] = '\0';
	cr_assert_eq(run("{\"data\":[1,2,3]}", id, 2, NULL, err), -1);
	cr_assert(strstr(err, "too long to name its chunks"), "%s", err);
	cr_assert_eq(run("[1]", "x", 2, PREFIX, err), -1);
	cr_assert_str_eq(err, "the job is not a JSON object");
	cr_assert_eq(out.n, 1);
}

/* Deeper than the scanner goes, but a valid job: pushed as it is, unless
 * its data must move into a cache key. */
Test(chunk, deep_documents)
{
	char doc[400], err[256];
	int n = 0;

	n += sprintf(doc, "{\"data\":");
	for (int i = 0; i < 80; i++)
		doc[n++] = '[';
	for (int i = 0; i < 80; i++)
		doc[n++] = ']';
	strcpy(doc + n, "}");
	cr_assert_eq(run(doc, "d", 1, NULL, err), 0);
	cr_assert_eq(out.n, 1);
	cr_assert_eq(out.v[0].el, doc);
	cr_assert_eq(run(doc, "d", 1, PREFIX, err), -1);
	cr_assert(strstr(err, "cannot read the job's rows"), "%s", err);
}
