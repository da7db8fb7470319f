/* fuzz_pg_row.c - src/pg/pg_target_row.c, what the postgres sink reads
 * of a job beside its rows, held to jansson: the op member (a delete only
 * when the document's top-level "op" is the string "delete"; a value other
 * than delete, upsert, update (mode = update) or null refused, with a
 * message in valid UTF-8), the table member's text, the members of "data"
 * one per table, and the staging suffix added to each COPY row. */
#include "fuzz.h"

#include "config.h"
#include "copy.h"
#include "json_scan.h"
#include "pg_target.h"

/* The string value of top-level member name in o: 1 and its text, 0 when
 * absent or null, -1 when another type. */
static int
member_text(json_t *o, const char *name, const char **text)
{
	json_t *v = json_object_get(o, name);

	if (v == NULL || json_is_null(v))
		return 0;
	if (!json_is_string(v))
		return -1;
	*text = json_string_value(v);
	return strlen(*text) == json_string_length(v) ? 1 : -1;
}

static void
check_op(const char *doc, size_t len, json_t *o, bool update)
{
	struct queue_config q = { .op_member = "op" };
	struct pg_target t = { .q = &q, .mode = update ? PG_TARGET_UPDATE :
	    PG_TARGET_UPSERT };
	char why[256] = "";
	const char *text = NULL;
	bool del = true;
	int rc = pg_target_job_op(&t, doc, len, &del, why, sizeof(why));
	int has = member_text(o, "op", &text);

	if (has == 0) {
		CHECK(rc == 0 && !del);
	} else if (has == 1 && strcmp(text, "delete") == 0) {
		CHECK(rc == 0 && del);
	} else if (has == 1 && (strcmp(text, "upsert") == 0 ||
	    (update && strcmp(text, "update") == 0))) {
		CHECK(rc == 0 && !del);
	} else {
		CHECK(rc == -1 && !del);
		CHECK(*why != '\0' && fuzz_utf8_ok(why, strlen(why)));
	}
}

static void
check_table_member(const char *doc, size_t len, json_t *o)
{
	char buf[64];
	const char *text = NULL;
	int rc = pg_target_member_text("table", doc, len, buf, sizeof(buf));
	int has = member_text(o, "table", &text);

	if (has == 0)
		CHECK(rc == 0);
	else if (has == 1 && strlen(text) < sizeof(buf))
		CHECK(rc == 1 && strcmp(buf, text) == 0);
	else
		CHECK(rc == -1);
}

struct members {
	json_t *seen;           /* the last value of each name, as jansson */
	bool all_named;         /* every name fit the reader's buffer */
};

static int
each_member(void *ctx, const char *name, const char *p, size_t n)
{
	struct members *m = ctx;
	json_t *v = json_loadb(p, n, JSON_DECODE_ANY, NULL);

	CHECK(v != NULL);       /* the value's bytes are one JSON value */
	json_object_set_new(m->seen, name, v);
	return 0;
}

static void
check_data_members(const char *doc, size_t len, json_t *o)
{
	json_t *data = json_object_get(o, "data");
	struct members m = { json_object(), true };
	int rc = pg_target_data_members(doc, len, each_member, &m);

	if (data == NULL)
		data = o;       /* a bare document: the tables themselves */
	if (!json_is_object(data)) {
		CHECK(rc == -1);
	} else {
		const char *k;
		json_t *v;
		/* a name of 128 bytes or more is shown cut: not comparable */
		json_object_foreach(data, k, v)
			m.all_named = m.all_named && strlen(k) < 128;
		CHECK(rc == 0);
		CHECK(!m.all_named || json_equal(m.seen, data));
	}
	json_decref(m.seen);
}

/* The suffix goes before each row's newline, the rows otherwise as they
 * were. */
static void
check_suffix(const uint8_t *data, size_t size)
{
	struct copy_buf rows = { 0 };
	size_t from = size > 0 ? data[0] % (size + 1) : 0;
	bool del = size > 1 && (data[1] & 1);

	rows.cap = size + 1;
	rows.data = malloc(rows.cap);
	CHECK(rows.data != NULL);
	memcpy(rows.data, data, size);
	rows.len = size;
	pg_target_row_suffix(&rows, from, del, 42);
	const char *suffix = del ? "\tt\t42" : "\tf\t42";
	size_t j = from;

	CHECK(memcmp(rows.data, data, from) == 0);
	for (size_t i = from; i < size; i++) {
		if (data[i] == '\n') {
			CHECK(rows.len - j >= 5 && memcmp(rows.data + j, suffix, 5) == 0);
			j += 5;
		}
		CHECK(j < rows.len && rows.data[j] == (char)data[i]);
		j++;
	}
	CHECK(j == rows.len);
	free(rows.data);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *doc = (const char *)data;
	struct json_scan_span d;
	struct json_scan_error e;

	check_suffix(data, size);
	/* held to jansson where both read the document the same way: an
	 * object both accept (the scanner's limits are copy's to check) */
	json_t *o = json_loadb(doc, size, JSON_DECODE_ANY, NULL);
	if (o != NULL && json_is_object(o) &&
	    json_scan_document(doc, size, &d, &e) != -1) {
		check_op(doc, size, o, false);
		check_op(doc, size, o, true);
		check_table_member(doc, size, o);
		check_data_members(doc, size, o);
	}
	json_decref(o);
	return 0;
}
