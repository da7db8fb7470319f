/* copy.h - turning job documents into rows of PostgreSQL's COPY text
 * format. Pure code: no libpq, no I/O. Values are taken from the document's
 * own bytes (numbers are never re-printed), so what lands in a column is
 * exactly what the producer sent. */
#ifndef FERRY_COPY_H
#define FERRY_COPY_H

#include <stddef.h>

/* Where each column's value comes from. */
struct copy_columns {
	int n;
	char **columns;          /* table column names */
	char **keys;             /* JSON key feeding each column */
};

/* Parse a `columns` setting: "a, b=json_b, c" (column, or column=key;
 * names are [A-Za-z_][A-Za-z0-9_]*, at most 63 bytes, no duplicates).
 * Returns 0, or -1 with a message in err. */
int copy_columns_parse(const char *spec, struct copy_columns *out, char *err,
    size_t errsize);
/* Columns named like their keys, from a list of names (the table's). */
void copy_columns_same(struct copy_columns *out, char *const *names, int n);
void copy_columns_free(struct copy_columns *c);

struct copy_buf {
	char *data;
	size_t len, cap;
};
void copy_buf_free(struct copy_buf *b);

/* Append the rows of one job to out, one line per row, tab-separated,
 * COPY text escaping (\\ \t \n \r escaped, NULL as \N). The rows are the
 * document's "data" member when the document is an envelope (has "data"),
 * else the document itself; an object is one row, an array of objects
 * several. Column values: a missing key or JSON null -> \N; a string -> its
 * unescaped text; a number -> its exact text; true/false -> t/f; an object
 * or array -> its JSON text as written. Returns the number of rows, or -1
 * with a message in err ("row 3 is not an object", "malformed JSON...");
 * on -1 out is left as it was. */
int copy_encode_job(const char *doc, size_t len,
    const struct copy_columns *cols, struct copy_buf *out, char *err,
    size_t errsize);
/* The same for a document json_scan_document accepted already (job_check
 * did: j->scanned), without validating it again. */
int copy_encode_scanned(const char *doc, size_t len,
    const struct copy_columns *cols, struct copy_buf *out, char *err,
    size_t errsize);

#endif
