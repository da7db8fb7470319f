/* pg_target_upsert.c - the SQL of mode = upsert and update:
 * the key, update_columns and version checked against the columns written
 * and the table's unique indexes; a temporary staging table LIKE the
 * target, once per connection, that a batch is COPYed into, each row with
 * its job's op and index; the statements that apply it. Of the rows of one
 * key in the batch the last wins (with version: the greatest version, the
 * first of equal ones), as if the rows had been applied one by one in
 * queue order: DELETE ... USING the staged deletes, then INSERT ... SELECT
 * DISTINCT ON (key) ... ON CONFLICT (key) DO UPDATE (upsert) or UPDATE ...
 * FROM the same (update) for keys whose winner is not a delete; for update
 * with missing = dead, the staged updates whose key has no row (with
 * version asked again in a snapshot of their own: a row made newer while
 * the update waited is stale, not missing). A delete older than a write of
 * its key before it in the batch is stale. */
#include "pg_target.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "util.h"

#define POSITION "ferry_position"
#define DELETE_COL "ferry_delete"   /* the row's job deletes */
#define JOB_COL "ferry_job"         /* the job's index in the batch */
#define WINNERS "ferry_w"

/* Column names, split from a checked "a, b" list (config_check.c). */
struct name_list {
	int n;
	char **names;
};

static void
names_free(struct name_list *l)
{
	for (int i = 0; i < l->n; i++)
		free(l->names[i]);
	free(l->names);
	memset(l, 0, sizeof(*l));
}

static void
names_add(struct name_list *l, const char *s, size_t len)
{
	l->names = xrealloc(l->names, sizeof(*l->names) * (size_t)(l->n + 1));
	l->names[l->n] = xmalloc(len + 1);
	memcpy(l->names[l->n], s, len);
	l->names[l->n++][len] = '\0';
}

static void
names_parse(struct name_list *l, const char *spec)
{
	const char *cur = spec, *item;
	size_t len;

	memset(l, 0, sizeof(*l));
	while (config_list_next(&cur, &item, &len))
		names_add(l, item, len);
}

static bool
names_has(const struct name_list *l, const char *name)
{
	for (int i = 0; i < l->n; i++)
		if (strcmp(l->names[i], name) == 0)
			return true;
	return false;
}

static bool
written(const struct pg_target *t, const char *name)
{
	for (int i = 0; i < t->cols.n; i++)
		if (strcmp(t->cols.columns[i], name) == 0)
			return true;
	return false;
}

/* Every name of l is a column written (a key column must be: its value
 * comes from the job), and none of them is in `not` (NULL: no such rule). */
static enum pg_status
check_written(const struct pg_target *t, const char *key,
    const struct name_list *l, const struct name_list *not, char *err,
    size_t errsize)
{
	for (int i = 0; i < l->n; i++) {
		if (!written(t, l->names[i])) {
			snprintf(err, errsize, "[queue %s] %s: column \"%s\" is not "
			    "one that the queue writes (allowed: columns of table \"%s\" "
			    "listed in columns, or all of its columns when columns is "
			    "not set)", t->q->name, key, l->names[i], t->q->table);
			return PG_FATAL;
		}
		if (not != NULL && names_has(not, l->names[i])) {
			snprintf(err, errsize, "[queue %s] %s: column \"%s\" is in key "
			    "(allowed: columns that are not part of the key)",
			    t->q->name, key, l->names[i]);
			return PG_FATAL;
		}
	}
	return PG_OK;
}

/* The names, each quoted, separated by ", "; prefix before each. */
static void
put_names(struct buf *b, PGconn *conn, const struct name_list *l,
    const char *prefix)
{
	for (int i = 0; i < l->n; i++) {
		char *c = PQescapeIdentifier(conn, l->names[i], strlen(l->names[i]));
		buf_printf(b, "%s%s%s", i ? ", " : "", prefix, c);
		PQfreemem(c);
	}
}

/* "{a,b}": the names are checked identifiers, nothing to escape. */
static char *
names_array(const struct name_list *l)
{
	struct buf b = BUF_INIT;

	buf_append(&b, "{", 1);
	for (int i = 0; i < l->n; i++)
		buf_printf(&b, "%s%s", i ? "," : "", l->names[i]);
	buf_append(&b, "}", 1);
	return buf_take(&b);
}

/* ON CONFLICT (key) needs a unique index on exactly those columns, in any
 * order, that is valid, immediate (not deferrable), without a WHERE and
 * without expressions; a primary key is one. */
static const char unique_sql[] =
    "SELECT EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = "
    "to_regclass($1) AND i.indisunique AND i.indimmediate AND i.indisvalid "
    "AND i.indpred IS NULL AND i.indexprs IS NULL AND ARRAY(SELECT "
    "a.attname::text FROM unnest((i.indkey::int2[])[0:i.indnkeyatts - 1]) "
    "k JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k "
    "ORDER BY 1) = ARRAY(SELECT unnest($2::text[]) ORDER BY 1))";

static enum pg_status
check_unique(const struct pg_target *t, PGconn *conn,
    const struct name_list *key, char *err, size_t errsize)
{
	char *array = names_array(key);
	struct pg_failure f;
	PGresult *r = NULL;
	bool ok = pg_conn_exec(conn, unique_sql, 2, t->quoted, array, &f, &r);

	free(array);
	if (!ok) {
		snprintf(err, errsize, "postgres: reading the indexes of table %s: "
		    "%s", t->q->table, f.msg);
		return f.cls == PG_ERR_DATA ? PG_FATAL : PG_UNAVAILABLE;
	}
	ok = PQntuples(r) == 1 && strcmp(PQgetvalue(r, 0, 0), "t") == 0;
	PQclear(r);
	if (!ok) {
		snprintf(err, errsize, "[queue %s] key: \"%s\" is not the primary "
		    "key or a unique index of table \"%s\" (allowed: the columns of "
		    "a primary key or of a unique index that is not partial, not "
		    "on expressions, not deferrable; create one, e.g. CREATE "
		    "UNIQUE INDEX ON %s (%s))", t->q->name, t->q->key, t->q->table,
		    t->q->table, t->q->key);
		return PG_FATAL;
	}
	return PG_OK;
}

/* ", ALTER COLUMN c what" */
static void
put_alter(struct buf *b, PGconn *conn, const char *column, const char *what)
{
	char *c = PQescapeIdentifier(conn, column, strlen(column));

	buf_printf(b, ", ALTER COLUMN %s %s", c, what);
	PQfreemem(c);
}

/* ", ADD CONSTRAINT "c NOT NULL" CHECK (ferry_delete OR c IS NOT NULL)":
 * a delete needs only its key (and version). */
static void
put_notnull_unless_delete(struct buf *b, PGconn *conn, const char *column)
{
	char name[80];
	char *c = PQescapeIdentifier(conn, column, strlen(column)), *n;

	snprintf(name, sizeof(name), "%s NOT NULL", column);
	n = PQescapeIdentifier(conn, name, strlen(name));
	buf_printf(b, ", ALTER COLUMN %s DROP NOT NULL, ADD CONSTRAINT %s "
	    "CHECK (" DELETE_COL " OR %s IS NOT NULL)", c, n, c);
	PQfreemem(c);
	PQfreemem(n);
}

/* The staging table: the target's columns with their defaults and CHECK
 * constraints (so that a row a later one of its key replaces is still
 * checked, when COPYed), key and version NOT NULL (a NULL key would match
 * no row, a NULL version order nowhere: such a row is refused), the other
 * NOT NULL columns NOT NULL unless the row deletes, columns not written
 * nullable (the table fills them itself: an identity column, which LIKE
 * copies without its default, would refuse every row); the position of
 * each row in the batch, its job's op and index. Rows go at each commit. */
static char *
stage_sql(const struct pg_target *t, PGconn *conn, PGresult *table_cols,
    const struct name_list *notnull)
{
	struct buf b = BUF_INIT;

	buf_printf(&b, "CREATE TEMP TABLE %s (LIKE %s INCLUDING "
	    "DEFAULTS INCLUDING CONSTRAINTS) ON COMMIT DELETE ROWS;ALTER TABLE "
	    "pg_temp.%s ADD COLUMN " POSITION " bigint GENERATED ALWAYS AS "
	    "IDENTITY, ADD COLUMN " DELETE_COL " boolean NOT NULL, ADD COLUMN "
	    JOB_COL " integer NOT NULL", t->stage, t->quoted, t->stage);
	for (int i = 0; i < notnull->n; i++)
		put_alter(&b, conn, notnull->names[i], "SET NOT NULL");
	for (int i = 0; i < PQntuples(table_cols); i++) {
		const char *col = PQgetvalue(table_cols, i, 0);
		if (!written(t, col))
			put_alter(&b, conn, col, "DROP NOT NULL");
		else if (!names_has(notnull, col) &&
		    strcmp(PQgetvalue(table_cols, i, 1), "t") == 0)
			put_notnull_unless_delete(&b, conn, col);
	}
	return buf_take(&b);
}

static struct name_list
written_names(const struct pg_target *t)
{
	struct name_list all = { 0, NULL };

	for (int i = 0; i < t->cols.n; i++)
		names_add(&all, t->cols.columns[i], strlen(t->cols.columns[i]));
	return all;
}

/* "ferry_t.k = alias.k AND ..." */
static void
put_key_match(struct buf *b, PGconn *conn, const struct name_list *key,
    const char *alias)
{
	for (int i = 0; i < key->n; i++) {
		char *c = PQescapeIdentifier(conn, key->names[i],
		    strlen(key->names[i]));
		buf_printf(b, "%sferry_t.%s = %s.%s", i ? " AND " : "", c, alias,
		    c);
		PQfreemem(c);
	}
}

/* ORDER BY key, then the winner first: the last row of a key; with
 * version the greatest, and of equal versions the first write, else the
 * first delete. One by one, the first of the greatest version applies and
 * a later equal one is not newer, except after a delete: the row is gone,
 * so the next write of that version inserts it (with mode = update, finds
 * no row: missing). v: the quoted version column, or NULL. */
static void
put_winner_order(struct buf *b, PGconn *conn, const struct name_list *key,
    const char *v)
{
	buf_printf(b, " ORDER BY ");
	put_names(b, conn, key, "");
	if (v != NULL)
		buf_printf(b, ", %s DESC, " DELETE_COL ", " POSITION, v);
	else
		buf_printf(b, ", " POSITION " DESC");
}

/* (SELECT DISTINCT ON (key) * FROM stage ORDER BY key, winner) ferry_w:
 * one row a key, its winner, which may be a delete. */
static void
put_winners(struct buf *b, PGconn *conn, const struct pg_target *t,
    const struct name_list *key, const char *v)
{
	buf_printf(b, "(SELECT DISTINCT ON (");
	put_names(b, conn, key, "");
	buf_printf(b, ") * FROM pg_temp.%s", t->stage);
	put_winner_order(b, conn, key, v);
	buf_printf(b, ") " WINNERS);
}

/* INSERT INTO t AS ferry_t (cols) SELECT cols FROM winners WHERE NOT
 * ferry_delete ON CONFLICT (key) DO UPDATE SET u = excluded.u [WHERE
 * ferry_t.version < excluded.version]. */
static char *
upsert_sql(const struct pg_target *t, PGconn *conn,
    const struct name_list *key, const struct name_list *update,
    const char *v)
{
	struct name_list all = written_names(t);
	struct buf b = BUF_INIT;

	buf_printf(&b, "INSERT INTO %s AS ferry_t (", t->quoted);
	put_names(&b, conn, &all, "");
	buf_printf(&b, ") SELECT ");
	put_names(&b, conn, &all, "");
	buf_printf(&b, " FROM ");
	put_winners(&b, conn, t, key, v);
	buf_printf(&b, " WHERE NOT " DELETE_COL " ON CONFLICT (");
	put_names(&b, conn, key, "");
	buf_printf(&b, update->n == 0 ? ") DO NOTHING" : ") DO UPDATE SET ");
	for (int i = 0; i < update->n; i++) {
		char *c = PQescapeIdentifier(conn, update->names[i],
		    strlen(update->names[i]));
		buf_printf(&b, "%s%s = excluded.%s", i ? ", " : "", c, c);
		PQfreemem(c);
	}
	if (v != NULL)
		buf_printf(&b, " WHERE ferry_t.%s < excluded.%s", v, v);
	names_free(&all);
	return buf_take(&b);
}

/* UPDATE t AS ferry_t SET u = ferry_w.u FROM winners WHERE key matches
 * AND NOT ferry_w.ferry_delete [AND ferry_t.version < ferry_w.version] */
static char *
update_sql(const struct pg_target *t, PGconn *conn,
    const struct name_list *key, const struct name_list *update,
    const char *v)
{
	struct buf b = BUF_INIT;

	buf_printf(&b, "UPDATE %s AS ferry_t SET ", t->quoted);
	for (int i = 0; i < update->n; i++) {
		char *c = PQescapeIdentifier(conn, update->names[i],
		    strlen(update->names[i]));
		buf_printf(&b, "%s%s = " WINNERS ".%s", i ? ", " : "", c, c);
		PQfreemem(c);
	}
	buf_printf(&b, " FROM ");
	put_winners(&b, conn, t, key, v);
	buf_printf(&b, " WHERE ");
	put_key_match(&b, conn, key, WINNERS);
	buf_printf(&b, " AND NOT " WINNERS "." DELETE_COL);
	if (v != NULL)
		buf_printf(&b, " AND ferry_t.%s < " WINNERS ".%s", v, v);
	return buf_take(&b);
}

/* DELETE FROM t AS ferry_t USING (the greatest or last staged delete of
 * each key) ferry_d WHERE key matches [AND ferry_t.version <
 * ferry_d.version]. Every key with a delete in the batch loses its row
 * first; when its winner is a write, apply_sql writes it again after.
 * With version a delete is stale, as if applied one by one, also when a
 * write of its key before it in the batch has a version as great; such a
 * delete is left out, or with mode = update (which cannot write the row
 * again) it would take the newer row with it. NOT EXISTS, not max() OVER:
 * a version type needs only its comparison operators (uuid has no max). */
static char *
delete_sql(const struct pg_target *t, PGconn *conn,
    const struct name_list *key, const char *v)
{
	struct buf b = BUF_INIT;

	buf_printf(&b, "DELETE FROM %s AS ferry_t USING (SELECT DISTINCT ON (",
	    t->quoted);
	put_names(&b, conn, key, "");
	if (v == NULL) {
		buf_printf(&b, ") * FROM pg_temp.%s WHERE " DELETE_COL, t->stage);
	} else {
		buf_printf(&b, ") * FROM pg_temp.%s ferry_s WHERE " DELETE_COL
		    " AND NOT EXISTS (SELECT 1 FROM pg_temp.%s ferry_b WHERE ",
		    t->stage, t->stage);
		for (int i = 0; i < key->n; i++) {
			char *c = PQescapeIdentifier(conn, key->names[i],
			    strlen(key->names[i]));
			buf_printf(&b, "ferry_b.%s = ferry_s.%s AND ", c, c);
			PQfreemem(c);
		}
		buf_printf(&b, "NOT ferry_b." DELETE_COL " AND ferry_b." POSITION
		    " < ferry_s." POSITION " AND ferry_b.%s >= ferry_s.%s)", v, v);
	}
	put_winner_order(&b, conn, key, v);
	buf_printf(&b, ") ferry_d WHERE ");
	put_key_match(&b, conn, key, "ferry_d");
	if (v != NULL)
		buf_printf(&b, " AND ferry_t.%s < ferry_d.%s", v, v);
	return buf_take(&b);
}

/* SELECT s.ferry_job, 'update: no row with key (k)=(' || ... || ')' FROM
 * stage s JOIN winners USING (key) WHERE neither deletes: the staged
 * updates of missing_sql and recheck_sql, each row with its message. */
static void
put_missing_rows(struct buf *b, const struct pg_target *t, PGconn *conn,
    const struct name_list *key, const char *v)
{
	/* key names are checked identifiers: nothing to escape in the text */
	buf_printf(b, "SELECT s." JOB_COL ", 'update: no row with key (");
	for (int i = 0; i < key->n; i++)
		buf_printf(b, "%s%s", i ? ", " : "", key->names[i]);
	buf_printf(b, ")=(' || concat_ws(', ', ");
	put_names(b, conn, key, "s.");
	buf_printf(b, ") || ')' FROM pg_temp.%s s JOIN ", t->stage);
	put_winners(b, conn, t, key, v);
	buf_printf(b, " USING (");
	put_names(b, conn, key, "");
	buf_printf(b, ") WHERE NOT s." DELETE_COL " AND NOT " WINNERS "."
	    DELETE_COL);
}

/* AND NOT EXISTS (a row of the key with a version as great). */
static void
put_not_newer(struct buf *b, const struct pg_target *t, PGconn *conn,
    const struct name_list *key, const char *v)
{
	buf_printf(b, " AND NOT EXISTS (SELECT 1 FROM %s ferry_t WHERE ",
	    t->quoted);
	put_key_match(b, conn, key, "s");
	buf_printf(b, " AND ferry_t.%s >= " WINNERS ".%s)", v, v);
}

/* WITH ferry_u AS (the update RETURNING its keys) SELECT s.ferry_job,
 * 'update: no row with key (k)=(' || concat_ws(', ', s.k) || ')' FROM
 * stage s JOIN winners USING (key) WHERE neither deletes AND the update
 * did not write the key [AND no row of the key has a version as great]:
 * the update and its check in one statement, so one snapshot. As two
 * statements (READ COMMITTED: a snapshot each), a row another
 * transaction commits between them was not updated yet seen by the check,
 * and its job was done unapplied. A stale update (the row's version as
 * great) is not missing: done, as if applied before the newer write. */
static char *
missing_sql(const struct pg_target *t, PGconn *conn,
    const struct name_list *key, const char *v, const char *update)
{
	struct buf b = BUF_INIT;

	buf_printf(&b, "WITH ferry_u AS (%s RETURNING ", update);
	put_names(&b, conn, key, "ferry_t.");
	buf_printf(&b, ") ");
	put_missing_rows(&b, t, conn, key, v);
	buf_printf(&b, " AND NOT EXISTS (SELECT 1 FROM ferry_u ferry_t WHERE ");
	put_key_match(&b, conn, key, "s");
	buf_printf(&b, ")");
	if (v != NULL)
		put_not_newer(&b, t, conn, key, v);
	return buf_take(&b);
}

/* With version, missing_sql's check reads the rows of its own snapshot:
 * a newer version committed while the UPDATE waited for the row's lock
 * made that update stale (the UPDATE rechecked the newer row and left
 * it), yet the check sees the older one and calls the job missing. So its
 * jobs are asked again in a statement of their own (READ COMMITTED: a new
 * snapshot, this transaction's own updates in it): of the staged rows of
 * the jobs $1 ('{i,j}'), those whose key still has no row as new as its
 * winner, each with its message. Row by row: another row of the same job,
 * updated or stale, says nothing of this one. */
static char *
recheck_sql(const struct pg_target *t, PGconn *conn,
    const struct name_list *key, const char *v)
{
	struct buf b = BUF_INIT;

	put_missing_rows(&b, t, conn, key, v);
	buf_printf(&b, " AND s." JOB_COL " = ANY ($1::integer[])");
	put_not_newer(&b, t, conn, key, v);
	return buf_take(&b);
}

/* A DO block (PL/pgSQL, in every database since 9.0) that runs it (the
 * update): the one-query path cannot read rows before its COMMIT, so it
 * stops when there are some. EXECUTE: a data-modifying WITH must be a
 * statement's top level, and a SELECT in PL/pgSQL needs an INTO. */
static char *
guard_sql(const char *missing)
{
	return xasprintf("DO $ferry$DECLARE n bigint; BEGIN EXECUTE $q$%s$q$; "
	    "GET DIAGNOSTICS n = ROW_COUNT; IF n > 0 THEN RAISE EXCEPTION "
	    "'ferry: an update found no row: the batch is redone statement by "
	    "statement' USING ERRCODE = 'data_exception'; END IF; END$ferry$",
	    missing);
}

/* COPY pg_temp.ferry_stage (cols, ferry_delete, ferry_job) FROM STDIN */
static char *
stage_copy_sql(const struct pg_target *t, PGconn *conn)
{
	struct name_list all = written_names(t);
	struct buf b = BUF_INIT;

	buf_printf(&b, "COPY pg_temp.%s (", t->stage);
	put_names(&b, conn, &all, "");
	buf_printf(&b, ", " DELETE_COL ", " JOB_COL ") FROM STDIN");
	names_free(&all);
	return buf_take(&b);
}

/* update_columns, or every written column not in key; with version, the
 * version column is updated too. */
static void
update_names(const struct pg_target *t, const struct name_list *key,
    struct name_list *update)
{
	const char *v = t->q->version;

	names_parse(update, t->q->update_columns);
	if (update->n == 0)
		for (int i = 0; i < t->cols.n; i++)
			if (!names_has(key, t->cols.columns[i]))
				names_add(update, t->cols.columns[i],
				    strlen(t->cols.columns[i]));
	if (*v != '\0' && !names_has(update, v))
		names_add(update, v, strlen(v));
}

static enum pg_status
check_names(const struct pg_target *t, const struct name_list *key,
    const struct name_list *update, const struct name_list *version,
    char *err, size_t errsize)
{
	enum pg_status st = check_written(t, "key", key, NULL, err, errsize);

	if (st == PG_OK)
		st = check_written(t, "version", version, key, err, errsize);
	if (st == PG_OK)
		st = check_written(t, "update_columns", update, key, err,
		    errsize);
	return st;
}

static void
generate(struct pg_target *t, PGconn *conn, PGresult *table_cols,
    const struct name_list *key, const struct name_list *update,
    const struct name_list *version)
{
	struct name_list notnull;
	char *v = version->n == 1 ? PQescapeIdentifier(conn, version->names[0],
	    strlen(version->names[0])) : NULL;

	names_parse(&notnull, t->q->key);
	if (version->n == 1)
		names_add(&notnull, version->names[0], strlen(version->names[0]));
	pg_target_free_sql(t);
	t->stage_sql = stage_sql(t, conn, table_cols, &notnull);
	t->delete_sql = *t->q->op_member != '\0' ?
	    delete_sql(t, conn, key, v) : NULL;
	t->apply_sql = t->mode == PG_TARGET_UPDATE ?
	    update_sql(t, conn, key, update, v) :
	    upsert_sql(t, conn, key, update, v);
	if (t->mode == PG_TARGET_UPDATE &&
	    t->q->missing == CONFIG_MISSING_DEAD) {
		/* the update runs inside the check (one snapshot) */
		t->missing_sql = missing_sql(t, conn, key, v, t->apply_sql);
		t->guard_sql = guard_sql(t->missing_sql);
		t->recheck_sql = v != NULL ? recheck_sql(t, conn, key, v) : NULL;
		free(t->apply_sql);
		t->apply_sql = NULL;
	}
	t->copy_sql = stage_copy_sql(t, conn);
	t->clear_sql = xasprintf("DELETE FROM pg_temp.%s", t->stage);
	PQfreemem(v);
	names_free(&notnull);
}

enum pg_status
pg_target_upsert_describe(struct pg_target *t, PGconn *conn,
    PGresult *table_cols, char *err, size_t errsize)
{
	struct name_list key, update, version;
	enum pg_status st;

	names_parse(&key, t->q->key);
	names_parse(&version, t->q->version);
	update_names(t, &key, &update);
	st = check_names(t, &key, &update, &version, err, errsize);
	if (st == PG_OK)
		st = check_unique(t, conn, &key, err, errsize);
	if (st == PG_OK && t->mode == PG_TARGET_UPDATE && update.n == 0) {
		snprintf(err, errsize, "[queue %s] mode: update has no column to "
		    "update: every column written is in key (allowed: write "
		    "columns besides the key, or use mode = upsert)", t->q->name);
		st = PG_FATAL;
	}
	if (st == PG_OK)
		generate(t, conn, table_cols, &key, &update, &version);
	names_free(&key);
	names_free(&update);
	names_free(&version);
	return st;
}

enum pg_status
pg_target_prepare(const struct pg_target *t, PGconn *conn, char *err,
    size_t errsize)
{
	struct pg_failure f;

	if (t->stage_sql == NULL)
		return PG_OK;
	PGresult *r = PQexec(conn, t->stage_sql);
	if (PQresultStatus(r) == PGRES_COMMAND_OK) {
		PQclear(r);
		return PG_OK;
	}
	pg_conn_failure(conn, r, &f);
	PQclear(r);
	snprintf(err, errsize, "postgres: creating the staging table of [queue "
	    "%s] (a temporary table LIKE %s%s): %s", t->q->name, t->q->table,
	    strcmp(f.sqlstate, "42501") == 0 ? ": the role needs the TEMP "
	    "privilege on the database" : strcmp(f.sqlstate, "55P03") == 0 ?
	    ": another session holds a lock on it, pg_blocking_pids() names "
	    "it" : "", f.msg);
	return f.cls == PG_ERR_DATA || strcmp(f.sqlstate, "42501") == 0 ?
	    PG_FATAL : PG_UNAVAILABLE;
}
