/* fuzz_copy.c - copy_encode_job (src/format/copy.c) with a fixed column set. What
 * it writes is well-formed COPY text (one line per row, the columns
 * tab-separated, no raw tab, newline or carriage return inside a field (other
 * control bytes may stand as they are), a backslash only in an escape,
 * \N only as a whole field), a failure leaves the buffer as it was, and the
 * fields are what jansson reads in the document (the verdict too, unless
 * fuzz_text_unlike_jansson says the scanner and jansson may differ, or the document
 * nests deeper than the scanner goes). */
#include "fuzz.h"

#include "copy.h"
#include "json_scan.h"

#define SPEC "a, b, c, d=id, e=data"
static const char *const keys[] = { "a", "b", "c", "id", "data" };
#define NCOLS 5
#define PREFIX "x\ty\n"

/* One COPY field decoded: 0, 1 for \N, or -1 when it holds a raw
 * delimiter (tab, newline, CR) or a bad escape. */
static int
field_decode(const char *p, size_t n, char *out, size_t *outlen)
{
	size_t o = 0;

	if (n == 2 && p[0] == '\\' && p[1] == 'N')
		return 1;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)p[i];
		if (c == '\n' || c == '\r' || c == '\t')
			return -1;      /* COPY would read a delimiter */
		if (c != '\\') {
			out[o++] = (char)c;
			continue;
		}
		if (++i == n)
			return -1;
		switch (p[i]) {
		case '\\': out[o++] = '\\'; break;
		case 'b': out[o++] = '\b'; break;
		case 't': out[o++] = '\t'; break;
		case 'n': out[o++] = '\n'; break;
		case 'v': out[o++] = '\v'; break;
		case 'f': out[o++] = '\f'; break;
		case 'r': out[o++] = '\r'; break;
		default: return -1;
		}
	}
	*outlen = o;
	return 0;
}

/* A well-formed field; when known, the value jansson reads (want, NULL
 * for a missing key). */
static void
check_field(const char *p, size_t n, json_t *want, bool known)
{
	char *text = malloc(n + 1);
	size_t tn = 0;
	int r = field_decode(p, n, text, &tn);

	CHECK(r >= 0);
	if (!known)
		;
	else if (want == NULL || json_is_null(want)) {
		CHECK(r == 1);
	} else if (json_is_true(want) || json_is_false(want)) {
		CHECK(r == 0 && tn == 1 && text[0] == (json_is_true(want) ?
		    't' : 'f'));
	} else if (json_is_string(want)) {
		CHECK(r == 0 && tn == json_string_length(want) &&
		    memcmp(text, json_string_value(want), tn) == 0);
	} else if (json_is_number(want)) {
		text[tn] = '\0';
		CHECK(r == 0 && strtod(text, NULL) == json_number_value(want));
	} else {
		json_error_t err;
		json_t *v = json_loadb(text, tn, 0, &err);
		CHECK(r == 0 && v != NULL && json_equal(v, want));
		json_decref(v);
	}
	free(text);
}

/* The rows jansson finds in doc, or NULL when copy must refuse it. */
static json_t *
rows_of(json_t *doc)
{
	json_t *rows = doc, *data, *row;
	size_t i;

	if (json_is_object(doc) && (data = json_object_get(doc, "data")))
		rows = data;
	if (json_is_object(rows))
		return rows;
	if (!json_is_array(rows))
		return NULL;
	json_array_foreach(rows, i, row)
		if (!json_is_object(row))
			return NULL;
	return rows;
}

static int
depth_of(const char *p, size_t n)
{
	int d = 0, max = 0;
	bool in = false;

	for (size_t i = 0; i < n; i++) {
		if (in) {
			if (p[i] == '\\')
				i++;
			else if (p[i] == '"')
				in = false;
		} else if (p[i] == '"') {
			in = true;
		} else if (p[i] == '[' || p[i] == '{') {
			if (++d > max)
				max = d;
		} else if (p[i] == ']' || p[i] == '}') {
			d--;
		}
	}
	return max;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct copy_columns cols;
	struct copy_buf out = { 0 };
	const char *doc = (const char *)data;
	char err[256];
	json_error_t jerr;
	json_t *jdoc = NULL, *rows = NULL;
	int n, comparable;

	if (cols.n == 0)
		CHECK(copy_columns_parse(SPEC, &cols, err, sizeof(err)) == 0 &&
		    cols.n == NCOLS);
	out.data = malloc(out.cap = 16);
	memcpy(out.data, PREFIX, out.len = strlen(PREFIX));
	n = copy_encode_job(doc, size, &cols, &out, err, sizeof(err));
	CHECK(out.len >= strlen(PREFIX) &&
	    memcmp(out.data, PREFIX, strlen(PREFIX)) == 0);
	if (n < 0) {
		CHECK(n == -1 && out.len == strlen(PREFIX));
		CHECK(fuzz_utf8_ok(err, strlen(err)));
	}

	comparable = memchr(doc, '\0', size) == NULL &&
	    !fuzz_text_unlike_jansson(doc, size) &&
	    depth_of(doc, size) <= JSON_SCAN_MAX_DEPTH;
	if (comparable) {
		jdoc = json_loadb(doc, size, JSON_DECODE_ANY, &jerr);
		rows = jdoc != NULL ? rows_of(jdoc) : NULL;
		CHECK((rows != NULL) == (n >= 0));
		if (rows != NULL)
			CHECK((size_t)n == (json_is_object(rows) ? 1 :
			    json_array_size(rows)));
	}

	/* the rows: n lines of NCOLS fields */
	const char *p = out.data + strlen(PREFIX), *end = out.data + out.len;
	for (int r = 0; r < (n > 0 ? n : 0); r++) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		CHECK(nl != NULL);
		json_t *row = rows == NULL ? NULL : json_is_object(rows) ? rows :
		    json_array_get(rows, (size_t)r);
		for (int c = 0; c < NCOLS; c++) {
			const char *tab = c + 1 < NCOLS ?
			    memchr(p, '\t', (size_t)(nl - p)) : nl;
			CHECK(tab != NULL);
			if (c + 1 == NCOLS)
				CHECK(memchr(p, '\t', (size_t)(nl - p)) == NULL);
			check_field(p, (size_t)(tab - p), row == NULL ? NULL :
			    json_object_get(row, keys[c]), row != NULL);
			p = tab + 1;
		}
		CHECK(p == nl + 1);
	}
	CHECK(p == end || n <= 0);

	/* a document json_scan accepts encodes the same without the second
	 * validation (the sink's path for jobs job_check scanned) */
	struct json_scan_span d;
	struct json_scan_error je;
	if (json_scan_document(doc, size, &d, &je) == 0) {
		struct copy_buf again = { 0 };
		char err2[256];
		int n2 = copy_encode_scanned(doc, size, &cols, &again, err2,
		    sizeof(err2));
		CHECK(n2 == n);
		CHECK(n2 < 0 ? strcmp(err, err2) == 0 : again.len ==
		    out.len - strlen(PREFIX) && (again.len == 0 ||
		    memcmp(again.data, out.data + strlen(PREFIX), again.len) == 0));
		copy_buf_free(&again);
	}
	json_decref(jdoc);
	copy_buf_free(&out);
	return 0;
}
