/* pg_target.c - the table a queue writes, described from the database:
 * its name and columns quoted with libpq's escaping, the columns checked
 * against the table, the COPY statement built from them; ferry_batches,
 * its CREATE and its statements; the start checks of ferryd and
 * `ferryctl init-db`. */
#include "pg_target.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "util.h"

static char *
quote_table(PGconn *conn, const char *table)
{
	const char *dot = strchr(table, '.');
	char *a, *b, *out;

	if (dot == NULL) {
		a = PQescapeIdentifier(conn, table, strlen(table));
		out = xstrdup(a);
		PQfreemem(a);
		return out;
	}
	a = PQescapeIdentifier(conn, table, (size_t)(dot - table));
	b = PQescapeIdentifier(conn, dot + 1, strlen(dot + 1));
	out = xasprintf("%s.%s", a, b);
	PQfreemem(a);
	PQfreemem(b);
	return out;
}

/* The table's columns, in order (name, and "t" when NOT NULL); NULL when
 * the table does not exist, or when the query failed (*failed, why in
 * f). */
static PGresult *
table_columns(PGconn *conn, const char *quoted, struct pg_failure *f,
    bool *failed)
{
	PGresult *r = NULL;

	*failed = false;
	if (!pg_conn_exec(conn, "SELECT attname, attnotnull FROM pg_attribute WHERE "
	    "attrelid = to_regclass($1) AND attnum > 0 AND NOT attisdropped "
	    "ORDER BY attnum", 1, quoted, NULL, f, &r)) {
		*failed = true;         /* the query, not the table */
		return NULL;
	}
	if (PQntuples(r) == 0) {
		PQclear(r);
		return NULL;
	}
	return r;
}

static bool
has_column(PGresult *r, const char *name)
{
	for (int i = 0; i < PQntuples(r); i++)
		if (strcmp(PQgetvalue(r, i, 0), name) == 0)
			return true;
	return false;
}

/* A query that failed (the connection died, a statement timeout) says
 * nothing about the table: wait and try again, never stop. */
static enum pg_status
describe_failed(const char *table, const struct pg_failure *f, char *err,
    size_t errsize)
{
	snprintf(err, errsize, "postgres: describing table %s: %s", table,
	    f->msg);
	return f->cls == PG_ERR_DATA ? PG_FATAL : PG_UNAVAILABLE;
}

void
pg_target_init(struct pg_target *t, const struct queue_config *q, int i)
{
	memset(t, 0, sizeof(*t));
	t->q = q;
	if (i == 0)
		snprintf(t->stage, sizeof(t->stage), "ferry_stage");
	else
		snprintf(t->stage, sizeof(t->stage), "ferry_stage_%d", i);
	t->mode = q->mode == CONFIG_MODE_UPSERT ? PG_TARGET_UPSERT :
	    q->mode == CONFIG_MODE_UPDATE ? PG_TARGET_UPDATE : PG_TARGET_INSERT;
}

void
pg_target_free_sql(struct pg_target *t)
{
	free(t->copy_sql);
	free(t->stage_sql);
	free(t->delete_sql);
	free(t->apply_sql);
	free(t->missing_sql);
	free(t->guard_sql);
	free(t->recheck_sql);
	free(t->clear_sql);
	t->clear_sql = NULL;
	t->copy_sql = t->stage_sql = t->delete_sql = t->apply_sql = NULL;
	t->missing_sql = t->guard_sql = t->recheck_sql = NULL;
}

void
pg_target_free(struct pg_target *t)
{
	copy_columns_free(&t->cols);
	free(t->quoted);
	pg_target_free_sql(t);
	memset(t, 0, sizeof(*t));
}

/* The configured columns, or else the table's own (cols), checked. */
static enum pg_status
resolve_columns(struct pg_target *t, PGresult *cols, char *err,
    size_t errsize)
{
	const struct queue_config *q = t->q;

	copy_columns_free(&t->cols);
	if (q->columns != NULL && *q->columns != '\0') {
		if (copy_columns_parse(q->columns, &t->cols, err, errsize) == -1)
			return PG_FATAL;
	} else {
		char **names = xmalloc(sizeof(*names) * (size_t)PQntuples(cols));
		for (int i = 0; i < PQntuples(cols); i++)
			names[i] = PQgetvalue(cols, i, 0);
		copy_columns_same(&t->cols, names, PQntuples(cols));
		free(names);
	}
	for (int i = 0; i < t->cols.n; i++)
		if (!has_column(cols, t->cols.columns[i])) {
			snprintf(err, errsize, "[queue %s] columns: table \"%s\" has "
			    "no column \"%s\"", q->name, q->table, t->cols.columns[i]);
			return PG_FATAL;
		}
	return PG_OK;
}

/* COPY "table" ("a", "b") FROM STDIN */
static char *
copy_sql(PGconn *conn, const char *quoted, const struct copy_columns *cols)
{
	size_t len = strlen(quoted) + 64, off;
	char *sql;

	for (int i = 0; i < cols->n; i++)
		len += strlen(cols->columns[i]) * 2 + 4;
	sql = xmalloc(len);
	off = (size_t)snprintf(sql, len, "COPY %s (", quoted);
	for (int i = 0; i < cols->n; i++) {
		char *c = PQescapeIdentifier(conn, cols->columns[i],
		    strlen(cols->columns[i]));
		off += (size_t)snprintf(sql + off, len - off, "%s%s",
		    i ? ", " : "", c);
		PQfreemem(c);
	}
	snprintf(sql + off, len - off, ") FROM STDIN");
	return sql;
}

enum pg_status
pg_target_describe(struct pg_target *t, PGconn *conn, char *err,
    size_t errsize)
{
	struct pg_failure f;
	bool failed;
	enum pg_status st;

	free(t->quoted);
	t->quoted = quote_table(conn, t->q->table);
	PGresult *cols = table_columns(conn, t->quoted, &f, &failed);
	if (failed)
		return describe_failed(t->q->table, &f, err, errsize);
	if (cols == NULL) {
		snprintf(err, errsize, "[queue %s] table: \"%s\" does not exist in "
		    "the database: create it", t->q->name, t->q->table);
		return PG_FATAL;
	}
	if ((st = resolve_columns(t, cols, err, errsize)) == PG_OK) {
		free(t->copy_sql);
		t->copy_sql = copy_sql(conn, t->quoted, &t->cols);
		if (PG_TARGET_BY_KEY(t))
			st = pg_target_upsert_describe(t, conn, cols, err,
			    errsize);
	}
	PQclear(cols);
	return st;
}

int
pg_target_count(const struct queue_config *q)
{
	return *q->tables == '\0' ? 1 : config_pg_list_count(q->tables);
}

const struct queue_config *
pg_target_config(const struct ferry_config *cfg, const struct queue_config *q,
    int i)
{
	const char *cur = q->tables, *item;
	char name[2 * CONFIG_IDENT_MAX + 2];
	size_t len;

	if (*q->tables == '\0')
		return q;
	while (config_list_next(&cur, &item, &len))
		if (i-- == 0) {
			snprintf(name, sizeof(name), "%.*s", (int)len, item);
			return config_find_table(cfg, q->name, name);
		}
	return NULL;
}

static void
put_stmt(struct buf *b, const char *sql)
{
	if (sql != NULL)
		buf_printf(b, "%s;", sql);
}

void
pg_target_statements(const struct pg_target *t, int nt, bool deletes,
    bool guards, struct pg_target_stmt_fn *fn)
{
	/* the staged rows, then the deletes children first, then the
	 * writes parents first (the order of tables) */
	for (int i = 0; i < nt; i++)
		if (PG_TARGET_BY_KEY(&t[i]))
			fn->copy(fn, i);
	for (int i = nt - 1; deletes && i >= 0; i--)
		if (t[i].delete_sql != NULL)
			fn->sql(fn, i, t[i].delete_sql);
	for (int i = 0; i < nt; i++) {
		if (!PG_TARGET_BY_KEY(&t[i])) {
			fn->copy(fn, i);
			continue;
		}
		/* NULL with missing_sql: the update runs inside the missing
		 * check (one snapshot), in the guard or after the part */
		if (t[i].apply_sql != NULL)
			fn->sql(fn, i, t[i].apply_sql);
		if (guards && t[i].guard_sql != NULL)
			fn->sql(fn, i, t[i].guard_sql);
	}
}

struct fast_fn {
	struct pg_target_stmt_fn fn;
	const struct pg_target *t;
	struct buf b;
	int *copies, ncopies;
};

static void
fast_copy(struct pg_target_stmt_fn *fn, int i)
{
	struct fast_fn *ff = (struct fast_fn *)fn;

	put_stmt(&ff->b, ff->t[i].copy_sql);
	ff->copies[ff->ncopies++] = i;
}

static void
fast_sql(struct pg_target_stmt_fn *fn, int i, const char *sql)
{
	(void)i;
	put_stmt(&((struct fast_fn *)fn)->b, sql);
}

/* The batch key is ferry's own text (worker id, random part, sequence);
 * nothing from a job goes into SQL. */
char *
pg_target_fast_sql(const struct pg_target *t, int nt,
    const struct pg_batches *b, PGconn *conn, const char *key, bool deletes,
    int *copies, int *ncopies)
{
	char *k = PQescapeLiteral(conn, key, strlen(key));
	struct fast_fn ff = { { fast_copy, fast_sql }, t, BUF_INIT, copies, 0 };

	if (k == NULL)
		return NULL;
	buf_printf(&ff.b, "BEGIN;INSERT INTO %s (key, state) VALUES (%s, "
	    "'committed');", b->name, k);
	PQfreemem(k);
	pg_target_statements(t, nt, deletes, true, &ff.fn);
	buf_printf(&ff.b, "COMMIT");
	*ncopies = ff.ncopies;
	return buf_take(&ff.b);
}

void
pg_target_batches_init(struct pg_batches *b, const struct ferry_config *cfg)
{
	/* a checked identifier (config_check_schema): quoting is enough */
	snprintf(b->name, sizeof(b->name), "\"%s\".ferry_batches",
	    cfg->pg_batches_schema != NULL && *cfg->pg_batches_schema != '\0' ?
	    cfg->pg_batches_schema : "public");
	snprintf(b->insert_sql, sizeof(b->insert_sql), "INSERT INTO %s (key, "
	    "state) VALUES ($1, 'committed')", b->name);
	snprintf(b->fence_sql, sizeof(b->fence_sql), "INSERT INTO %s (key, "
	    "state) VALUES ($1, 'fenced') ON CONFLICT (key) DO NOTHING", b->name);
	snprintf(b->state_sql, sizeof(b->state_sql), "SELECT state, failed "
	    "FROM %s WHERE key = $1", b->name);
	snprintf(b->set_failed_sql, sizeof(b->set_failed_sql), "UPDATE %s SET "
	    "failed = $2 WHERE key = $1", b->name);
}

enum pg_status
pg_target_batches_check(PGconn *conn, const struct pg_batches *b, char *err,
    size_t errsize)
{
	struct pg_failure f;
	bool failed;
	PGresult *r = table_columns(conn, b->name, &f, &failed);

	if (failed)
		return describe_failed(b->name, &f, err, errsize);
	if (r == NULL) {
		snprintf(err, errsize, "table %s does not exist: run ferryctl "
		    "init-db (or set [ferryd] pg_batches_schema to the schema "
		    "that has ferry_batches)", b->name);
		return PG_FATAL;
	}
	PQclear(r);
	return PG_OK;
}

/* A batch row's record of failed jobs (column 1 of r). A record that does
 * not parse must not read as "none failed" (its failed jobs would be acked
 * unwritten), nor make the jobs retry (the batch may have committed them):
 * the batch is kept and tried again under its key, as in an outage. */
static bool
load_record(PGresult *r, const char *key, json_t **out,
    struct pg_failure *f)
{
	json_error_t err;

	*out = json_loads(PQgetvalue(r, 0, 1), 0, &err);
	if (json_is_object(*out))
		return true;
	json_decref(*out);
	*out = NULL;
	snprintf(f->msg, sizeof(f->msg), "XX000: ferry_batches row %.100s: "
	    "its record of failed jobs (column failed) does not parse (%.60s); "
	    "its jobs wait until it is a JSON object again", key, err.text);
	util_utf8_fix(f->msg);
	f->cls = PG_ERR_UNAVAILABLE;
	pg_failure_set_state(f, "XX000");
	return false;
}

bool
pg_target_batches_read(PGconn *conn, const struct pg_batches *b,
    const char *key, char *state, size_t statesize, json_t **failed,
    struct pg_failure *f)
{
	PGresult *r = NULL;
	bool ok = true;

	state[0] = '\0';
	*failed = NULL;
	if (!pg_conn_exec(conn, b->state_sql, 1, key, NULL, f, &r))
		return false;
	if (PQntuples(r) == 1) {
		snprintf(state, statesize, "%s", PQgetvalue(r, 0, 0));
		ok = PQgetisnull(r, 0, 1) || load_record(r, key, failed, f);
	} else {
		/* read right after its insert conflicted, or was fenced: only
		 * a DELETE in between (by hand, or a prune) takes it away. Not
		 * "committed, nothing failed": that would ack jobs unwritten */
		snprintf(f->msg, sizeof(f->msg), "XX000: the row of batch %.100s "
		    "in %s was deleted while this worker read it: asking again",
		    key, b->name);
		f->cls = PG_ERR_UNAVAILABLE;
		pg_failure_set_state(f, "XX000");
		ok = false;
	}
	PQclear(r);
	return ok;
}

/* %s: the schema-qualified name (struct pg_batches name), twice */
static const char create_fmt[] =
    "CREATE TABLE IF NOT EXISTS %s ("
    " key text PRIMARY KEY,"
    " state text NOT NULL CHECK (state IN ('committed', 'fenced')),"
    " failed text,"
    " created_at timestamptz NOT NULL DEFAULT now());"
    "CREATE INDEX IF NOT EXISTS ferry_batches_created_at"
    " ON %s (created_at)";

/* CREATE TABLE and INDEX in one string (PQexecParams takes only one). */
static bool
create_batches(PGconn *conn, const struct pg_batches *b)
{
	char *sql = xasprintf(create_fmt, b->name, b->name);
	PGresult *r = PQexec(conn, sql);
	bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
	PQclear(r);
	free(sql);
	return ok;
}

/* 1: ferry_batches exists, 0: not, -1: the query failed */
static int
batches_exist(PGconn *conn, const struct pg_batches *b)
{
	PGresult *r = NULL;
	int found = -1;

	if (pg_conn_exec(conn, "SELECT to_regclass($1) IS NOT NULL", 1, b->name,
	    NULL, NULL, &r)) {
		if (PQntuples(r) == 1)
			found = strcmp(PQgetvalue(r, 0, 0), "t") == 0;
		PQclear(r);
	}
	return found;
}

/* The tables first, then ferry_batches (a table's error is the
 * likelier). */
static enum pg_status
describe(PGconn *conn, const struct ferry_config *cfg,
    const struct queue_config *q, const struct pg_batches *b, char *err,
    size_t errsize)
{
	struct pg_target t;
	enum pg_status st = PG_OK;

	for (int i = 0; i < pg_target_count(q) && st == PG_OK; i++) {
		pg_target_init(&t, pg_target_config(cfg, q, i), i);
		st = pg_target_describe(&t, conn, err, errsize);
		if (st == PG_OK)
			st = pg_target_prepare(&t, conn, err, errsize);
		pg_target_free(&t);
	}
	return st != PG_OK ? st : pg_target_batches_check(conn, b, err, errsize);
}

enum pg_status
pg_target_check(const struct ferry_config *cfg, const struct queue_config *q,
    bool create, int *existed, char *err, size_t errsize)
{
	PGconn *conn = pg_conn_open(cfg, q, err, errsize);
	struct pg_batches b;
	enum pg_status st = PG_UNAVAILABLE;
	const char *risk = NULL;

	if (existed != NULL)
		*existed = -1;
	if (conn == NULL)
		return PG_UNAVAILABLE;
	pg_target_batches_init(&b, cfg);
	if (existed != NULL)
		*existed = batches_exist(conn, &b);
	if (!create &&
	    (st = pg_conn_commit_check(conn, cfg, q, &risk, err, errsize)) !=
	    PG_OK) {
		;       /* refused, or the SHOW failed */
	} else if (create && !create_batches(conn, &b)) {
		snprintf(err, errsize, "cannot create ferry_batches as %s: %s",
		    b.name, PQerrorMessage(conn));
		err[strcspn(err, "\n")] = '\0';
		st = PG_FATAL;
	} else {
		if (risk != NULL)
			pg_conn_commit_warn(conn, q, risk);
		st = describe(conn, cfg, q, &b, err, errsize);
	}
	pg_conn_close(conn);
	return st;
}
