/* pg_target_upsert.c - the SQL of mode = upsert (issue 17): the key,
 * update_columns and version checked against the columns written and the
 * table's unique indexes; a temporary staging table LIKE the target, once
 * per connection, that a batch is COPYed into; the one statement that
 * applies it, INSERT ... SELECT DISTINCT ON (key) ... ON CONFLICT (key)
 * DO UPDATE, where the last row of a key in the batch wins (with version:
 * the greatest version, the first of equal ones), exactly as if the rows
 * had been applied one by one in queue order. */
#include "pg_target.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "util.h"

#define STAGE "pg_temp.ferry_stage"
#define POSITION "ferry_position"

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

/* The staging table: the target's columns with their defaults and CHECK
 * constraints (so that a row a later one of its key replaces is still
 * checked, when COPYed), key and version NOT NULL (a NULL key would match
 * no row, a NULL version order nowhere: such a row is refused), columns
 * not written nullable (the table fills them itself: an identity column,
 * which LIKE copies without its default, would refuse every row), and the
 * position of each row in the batch. Rows go at each commit. */
static char *
stage_sql(const struct pg_target *t, PGconn *conn, PGresult *table_cols,
    const struct name_list *notnull)
{
	struct buf b = BUF_INIT;

	buf_printf(&b, "CREATE TEMP TABLE ferry_stage (LIKE %s INCLUDING "
	    "DEFAULTS INCLUDING CONSTRAINTS) ON COMMIT DELETE ROWS;ALTER TABLE "
	    STAGE " ADD COLUMN " POSITION " bigint GENERATED ALWAYS AS "
	    "IDENTITY", t->quoted);
	for (int i = 0; i < notnull->n; i++)
		put_alter(&b, conn, notnull->names[i], "SET NOT NULL");
	for (int i = 0; i < PQntuples(table_cols); i++)
		if (!written(t, PQgetvalue(table_cols, i, 0)))
			put_alter(&b, conn, PQgetvalue(table_cols, i, 0),
			    "DROP NOT NULL");
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

/* INSERT INTO t AS ferry_t (cols) SELECT DISTINCT ON (key) cols FROM stage
 * ORDER BY key, [version DESC,] position ON CONFLICT (key) DO UPDATE SET
 * u = excluded.u [WHERE ferry_t.version < excluded.version]. */
static char *
apply_sql(const struct pg_target *t, PGconn *conn,
    const struct name_list *key, const struct name_list *update,
    const char *version)
{
	struct name_list all = written_names(t);
	struct buf b = BUF_INIT;
	char *v = version != NULL ?
	    PQescapeIdentifier(conn, version, strlen(version)) : NULL;

	buf_printf(&b, "INSERT INTO %s AS ferry_t (", t->quoted);
	put_names(&b, conn, &all, "");
	buf_printf(&b, ") SELECT DISTINCT ON (");
	put_names(&b, conn, key, "");
	buf_printf(&b, ") ");
	put_names(&b, conn, &all, "");
	buf_printf(&b, " FROM " STAGE " ORDER BY ");
	put_names(&b, conn, key, "");
	/* the last row of a key; with version the greatest, and of equal
	 * versions the first (a later equal one is not newer) */
	if (v != NULL)
		buf_printf(&b, ", %s DESC, " POSITION, v);
	else
		buf_printf(&b, ", " POSITION " DESC");
	buf_printf(&b, " ON CONFLICT (");
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
	PQfreemem(v);
	names_free(&all);
	return buf_take(&b);
}

/* COPY pg_temp.ferry_stage (cols) FROM STDIN */
static char *
stage_copy_sql(const struct pg_target *t, PGconn *conn)
{
	struct name_list all = written_names(t);
	struct buf b = BUF_INIT;

	buf_printf(&b, "COPY " STAGE " (");
	put_names(&b, conn, &all, "");
	buf_printf(&b, ") FROM STDIN");
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

enum pg_status
pg_target_upsert_describe(struct pg_target *t, PGconn *conn,
    PGresult *table_cols, char *err, size_t errsize)
{
	struct name_list key, update, version, notnull;
	enum pg_status st;

	names_parse(&key, t->q->key);
	names_parse(&version, t->q->version);
	update_names(t, &key, &update);
	st = check_names(t, &key, &update, &version, err, errsize);
	if (st == PG_OK)
		st = check_unique(t, conn, &key, err, errsize);
	if (st == PG_OK) {
		names_parse(&notnull, t->q->key);
		if (version.n == 1)
			names_add(&notnull, version.names[0],
			    strlen(version.names[0]));
		free(t->stage_sql);
		free(t->apply_sql);
		free(t->copy_sql);
		t->stage_sql = stage_sql(t, conn, table_cols, &notnull);
		t->apply_sql = apply_sql(t, conn, &key, &update,
		    version.n == 1 ? version.names[0] : NULL);
		t->copy_sql = stage_copy_sql(t, conn);
		names_free(&notnull);
	}
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
	    "%s] (a temporary table LIKE %s: the role needs the TEMP privilege "
	    "on the database): %s", t->q->name, t->q->table, f.msg);
	return f.cls == PG_ERR_DATA || strncmp(f.msg, "42501", 5) == 0 ?
	    PG_FATAL : PG_UNAVAILABLE;
}
