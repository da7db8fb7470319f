/* config_tables.c - the tables of a queue that writes several (tables =
 * a, b): [table QUEUE TABLE] sections, each holding the keys of one table
 * (columns, mode, key, update_columns, version, missing), any key it does
 * not set taken from [queue QUEUE]; once the whole file is read, every
 * table of the list gets its entry in cfg->tables (the queue's keys when
 * it has no section) and the rules of its mode are checked. */
#include "config_int.h"
#include "util.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The keys a [table] section may set, in the order of config_table.set. */
static const char *const table_keys[] = {
	"columns", "mode", "key", "update_columns", "version", "missing",
};
enum { K_COLUMNS, K_MODE, K_KEY, K_UPDATE_COLUMNS, K_VERSION, K_MISSING };

static int
table_key_index(const char *name)
{
	for (size_t i = 0; i < FERRY_ARRAY_LEN(table_keys); i++)
		if (strcmp(table_keys[i], name) == 0)
			return (int)i;
	return -1;
}

/* Item `name` in the list `list`. */
static bool
list_has(const char *list, const char *name)
{
	const char *cur = list, *item;
	size_t len;

	while (config_list_next(&cur, &item, &len))
		if (len == strlen(name) && strncmp(item, name, len) == 0)
			return true;
	return false;
}

/* A new entry for table `table` of queue q, with every default. */
static int
add_table(struct ferry_config *cfg, const struct queue_config *q,
    const char *table, int line)
{
	struct config_table *t;
	char *why;

	cfg->tables = xrealloc(cfg->tables,
	    sizeof(*t) * (size_t)(cfg->ntables + 1));
	t = &cfg->tables[cfg->ntables];
	memset(t, 0, sizeof(*t));
	t->line = line;
	snprintf(t->c.name, sizeof(t->c.name), "%s", q->name);
	config_keys_default(S_QUEUE, &t->c);
	t->c.handler = q->handler;
	why = config_key_set(config_key_find(S_QUEUE, "table"), &t->c, table);
	free(why);              /* checked by the caller */
	return cfg->ntables++;
}

void
config_enter_table(struct loader *st, const char *rest)
{
	const struct queue_config *q;
	char queue[CONFIG_QUEUE_NAME_MAX + 2], table[2 * CONFIG_IDENT_MAX + 2];
	char extra[2];

	snprintf(st->label, sizeof(st->label), "[table %s]", rest);
	st->sect = S_IGNORE;
	if (sscanf(rest, "%49s %127s %1s", queue, table, extra) != 2) {
		config_error(st, st->lineno, "%s: expected [table QUEUE TABLE] "
		    "(a queue defined above and one of its tables)", st->label);
		return;
	}
	if ((q = config_find_queue(st->cfg, queue)) == NULL) {
		config_error(st, st->lineno, "%s: queue \"%s\" is not defined "
		    "above (allowed: a [queue NAME] section before it)", st->label,
		    queue);
		return;
	}
	if (*table == '\0' || config_check_table(table, NULL, 0) != NULL) {
		config_error(st, st->lineno, "%s: \"%s\" %s", st->label, table,
		    config_check_table(table, NULL, 0));
		return;
	}
	for (int i = 0; i < st->cfg->ntables; i++)
		if (strcmp(st->cfg->tables[i].c.name, queue) == 0 &&
		    strcmp(st->cfg->tables[i].c.table, table) == 0) {
			config_error(st, st->lineno, "%s: defined twice (first at "
			    "line %d)", st->label, st->cfg->tables[i].line);
			return;
		}
	st->table = add_table(st->cfg, q, table, st->lineno);
	st->sect = S_TABLE;
}

void
config_table_key(struct loader *st, const char *name, const char *value)
{
	struct config_table *t = &st->cfg->tables[st->table];
	int k = table_key_index(name);
	char *why;

	if (k < 0) {
		config_error(st, st->lineno, "%s %s: not a key of a table "
		    "(allowed: columns, mode, key, update_columns, version, "
		    "missing; the others go in [queue %s])", st->label, name,
		    t->c.name);
		return;
	}
	if (t->set[k] != 0) {
		config_error(st, st->lineno, "%s %s: set twice (first at line %d)",
		    st->label, name, abs(t->set[k]));
		return;
	}
	t->set[k] = st->lineno;
	why = config_key_set(config_key_find(S_QUEUE, name), &t->c, value);
	if (why != NULL) {
		config_error(st, st->lineno, "%s %s: \"%s\" %s", st->label, name,
		    value, why);
		free(why);
		t->set[k] = -st->lineno;
	}
}

static void
inherit_str(char **dst, const char *src)
{
	free(*dst);
	*dst = xstrdup(src);
}

/* The keys the section did not set, from its queue. */
static void
inherit(struct config_table *t, const struct queue_config *q)
{
	if (t->set[K_COLUMNS] == 0)
		inherit_str(&t->c.columns, q->columns);
	if (t->set[K_MODE] == 0)
		t->c.mode = q->mode;
	if (t->set[K_KEY] == 0)
		inherit_str(&t->c.key, q->key);
	if (t->set[K_UPDATE_COLUMNS] == 0)
		inherit_str(&t->c.update_columns, q->update_columns);
	if (t->set[K_VERSION] == 0)
		inherit_str(&t->c.version, q->version);
	if (t->set[K_MISSING] == 0)
		t->c.missing = q->missing;
	inherit_str(&t->c.op_member, q->op_member);
}

/* The rules of the table's mode, as [queue] has them (config_rules.c);
 * line: where to point when the section did not set the key (its
 * header, or the queue's tables line for a table without a section). */
static void
check_table_mode(struct loader *st, const struct config_table *t, int line)
{
	const struct queue_config *c = &t->c;
	const char *values[] = { c->key, c->update_columns, c->version };
	const int keys[] = { K_KEY, K_UPDATE_COLUMNS, K_VERSION };
	bool by_key = c->mode == CONFIG_MODE_UPSERT ||
	    c->mode == CONFIG_MODE_UPDATE;

	if (by_key && *c->key == '\0' && t->set[K_KEY] >= 0)
		config_error(st, line, "[table %s %s] key: required when mode = %s "
		    "(allowed: the columns of a primary key or unique index of the "
		    "table, such as key = id)", c->name, c->table,
		    config_mode_name(c->mode));
	for (size_t k = 0; k < FERRY_ARRAY_LEN(keys); k++)
		if (!by_key && *values[k] != '\0' && t->set[keys[k]] > 0)
			config_error(st, t->set[keys[k]], "[table %s %s] %s: \"%s\" is "
			    "set but mode = %s (only used with mode = upsert or "
			    "update)", c->name, c->table, table_keys[keys[k]],
			    values[k], config_mode_name(c->mode));
	if (c->mode != CONFIG_MODE_UPDATE && t->set[K_MISSING] > 0)
		config_error(st, t->set[K_MISSING], "[table %s %s] missing: is set "
		    "but mode = %s (only used with mode = update)", c->name,
		    c->table, config_mode_name(c->mode));
}

/* The line that set [queue] key `name`, or the queue's header. */
static int
queue_line(struct loader *st, int i, const char *name)
{
	int line = abs(config_seen_row(st, i)[config_key_find(S_QUEUE, name)]);

	return line != 0 ? line : st->cfg->queues[i].line;
}

static void
check_queue_tables(struct loader *st, int i)
{
	struct ferry_config *cfg = st->cfg;
	const struct queue_config *q = &cfg->queues[i];
	const char *cur = q->tables, *item;
	char name[2 * CONFIG_IDENT_MAX + 2];
	size_t len;

	if (*q->tables != '\0' && *q->table != '\0')
		config_error(st, queue_line(st, i, "tables"), "[queue %s] tables: "
		    "set together with table (allowed: one of the two: table for "
		    "one table, tables for several)", q->name);
	if (*q->tables != '\0' && q->handler != CONFIG_HANDLER_POSTGRES)
		config_error(st, queue_line(st, i, "tables"), "[queue %s] tables: "
		    "\"%s\" is set but handler = %s (only used with handler = "
		    "postgres)", q->name, q->tables,
		    config_handler_name(q->handler));
	if (*q->table_member != '\0' && *q->tables == '\0')
		config_error(st, queue_line(st, i, "table_member"), "[queue %s] "
		    "table_member: \"%s\" is set but tables is not (only used with "
		    "tables)", q->name, q->table_member);
	while (config_list_next(&cur, &item, &len)) {
		snprintf(name, sizeof(name), "%.*s", (int)len, item);
		if (config_find_table(cfg, q->name, name) == NULL)
			add_table(cfg, q, name, 0);
	}
}

void
config_check_tables(struct loader *st)
{
	struct ferry_config *cfg = st->cfg;
	int n = cfg->ntables;

	/* the sections first: the entries added for the rest copy the
	 * queue whole */
	for (int k = 0; k < n; k++) {
		struct config_table *t = &cfg->tables[k];
		const struct queue_config *q = config_find_queue(cfg, t->c.name);
		if (!list_has(q->tables, t->c.table)) {
			config_error(st, t->line, "[table %s %s]: \"%s\" is not one "
			    "of [queue %s] tables (allowed: %s)", t->c.name,
			    t->c.table, t->c.table, q->name, *q->tables != '\0' ?
			    q->tables : "none: set tables in the queue first");
			continue;
		}
		inherit(t, q);
		check_table_mode(st, t, t->line);
	}
	for (int i = 0; i < cfg->nqueues; i++) {
		int from = cfg->ntables;
		check_queue_tables(st, i);
		for (int k = from; k < cfg->ntables; k++) {
			inherit(&cfg->tables[k], &cfg->queues[i]);
			check_table_mode(st, &cfg->tables[k],
			    queue_line(st, i, "tables"));
		}
	}
}
