/* fuzz_dead_entry.c - a dead-letter entry made readable (src/format/dead_entry.c)
 * for every element: an entry the grammar accepts shows every member
 * (jansson never refuses a token the grammar accepted) and its job byte
 * for byte, as a string or as base64; a malformed one shows its raw bytes;
 * the whole shows as JSON that reads back the same; and every entry has a
 * name an operator can type and print (valid UTF-8, at most JOB_ID_MAX
 * bytes). */
#include "fuzz.h"

#include "base64.h"
#include "dead_entry.h"
#include "sha1.h"

static void
check_bytes(json_t *obj, const char *name, const char *b64name,
    const char *p, size_t len)
{
	json_t *s = json_object_get(obj, name), *b = json_object_get(obj, b64name);
	char *back;
	size_t n;

	if (s != NULL) {
		CHECK(json_is_string(s) && json_string_length(s) == len &&
		    memcmp(json_string_value(s), p, len) == 0);
	} else {
		CHECK(!fuzz_utf8_ok(p, len));
	}
	if (b != NULL) {
		CHECK(json_is_string(b));
		CHECK(base64_decode(json_string_value(b), json_string_length(b),
		    &back, &n) == 0);
		CHECK(n == len && memcmp(back, p, len) == 0);
		free(back);
	}
	CHECK(s != NULL || b != NULL);
}

static void
check_member(json_t *obj, const char *name, struct wrapper_str s)
{
	json_t *v = json_object_get(obj, name);
	char *text;

	if (s.p == NULL) {
		CHECK(v == NULL);
		return;
	}
	text = wrapper_str_text(s);
	CHECK(json_is_string(v) && strcmp(json_string_value(v), text) == 0);
	free(text);
}

static void
check_shown(json_t *obj)
{
	char *text = json_dumps(obj, JSON_COMPACT);
	json_error_t err;
	json_t *back;

	CHECK(text != NULL);
	back = json_loads(text, JSON_ALLOW_NUL, &err);
	CHECK(back != NULL && json_equal(back, obj));
	json_decref(back);
	free(text);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *el = (const char *)data;
	char id[JOB_ID_MAX + 1], sha[41];
	struct wrapper w;
	json_t *obj = json_object();
	int ok = wrapper_parse(el, size, WRAPPER_DEAD, &w) == 0;

	CHECK(obj != NULL);
	if (ok) {
		CHECK(dead_entry_header(obj, &w) == 0);
		CHECK(dead_entry_job(obj, w.doc, w.doc_len) == 0);
		check_member(obj, "reason", w.reason);
		check_member(obj, "worker", w.worker);
		check_member(obj, "id", w.id);
		check_member(obj, "first_error", w.first_error);
		check_member(obj, "last_error", w.last_error);
		CHECK(json_integer_value(json_object_get(obj, "attempts")) ==
		    w.attempts);
		CHECK(json_integer_value(json_object_get(obj, "recoveries")) ==
		    w.recoveries);
		CHECK(json_integer_value(json_object_get(obj, "time")) == w.time);
		json_t *st = json_object_get(obj, "stamps");
		CHECK((st != NULL) == (w.nstamps > 0));
		CHECK(st == NULL || (int)json_array_size(st) == w.nstamps);
		check_bytes(obj, "job", "job_base64", w.doc, w.doc_len);
		CHECK(json_object_get(obj, "job") == NULL ||
		    json_object_get(obj, "job_base64") == NULL);
	} else {
		CHECK(dead_entry_raw(obj, el, size) == 0);
		check_bytes(obj, "raw", "raw_base64", el, size);
		CHECK(json_object_get(obj, "raw_base64") != NULL);
	}
	check_shown(obj);
	json_decref(obj);

	dead_entry_id(ok ? &w : NULL, el, size, 0, id);
	CHECK(id[0] != '\0' && strlen(id) <= JOB_ID_MAX);
	CHECK(fuzz_utf8_ok(id, strlen(id)));
	if (!ok) {
		job_sha1_hex(el, size, sha);
		CHECK(strcmp(id, sha) == 0);
	}
	if (ok)
		wrapper_free(&w);
	return 0;
}
