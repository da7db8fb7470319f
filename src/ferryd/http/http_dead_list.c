/* http_dead_list.c - GET /api/dead: a page of a queue's dead-letter list,
 * newest first, each entry's header decoded (dead_entry.c), and with a
 * selection (reason, group, id, before, after: dead_filter.h, as
 * /api/dead/summary and retry-matching take it) only the entries it
 * selects: exactly those a "retry/purge all matching" acts on.
 *
 * The list is read through dead_page.lua (http_dead.h), which hands the
 * master a prefix of each entry (DEAD_LIST_PREFIX: the header) and a page
 * bounded by those prefixes' total and by the bytes Redis reads; one read
 * at a time per master. The selection is matched here, in C, on each
 * prefix. An entry a prefix cannot decide (its header longer than the
 * prefix, or an id pattern and an id only its whole document gives) is
 * read again whole, alone. A filtered page may take several reads: it
 * ends at `limit` entries selected, at the list's end, or after
 * SCAN_READS reads, and says where to go on: `next`, the index to read
 * from (offset=next), or null at the end. `scanned` is how many entries
 * it read. Without a selection a page is one read, as it always was. */
#include <hiredis/hiredis.h>
#include <jansson.h>
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "dead_entry.h"
#include "dead_filter.h"
#include "http.h"
#include "http_dead.h"
#include "master_control.h"
#include "queue.h"
#include "util.h"

#define DEAD_PAGE_MAX 100
#define DEAD_LIST_PREFIX 8192           /* the header: a list shows no job */
#define DEAD_LIST_BUDGET (512 * 1024)   /* prefixes per page, in all */
#define SCAN_READ 200                   /* entries a filtered read asks */
#define SCAN_READS 50                   /* reads of a filtered page */
#define WHOLE_PREFIX (1L << 30)         /* an entry read whole */

struct list_op {
	struct http_req *r;
	char queue[CONFIG_QUEUE_NAME_MAX + 1];
	struct queue_keys k;
	struct dead_filter f;
	struct http_dead_filter_text ft;
	bool filtered;
	long offset, limit;
	long pos;               /* the index read next */
	bool whole;             /* the entry at pos, read whole */
	int reads;
	long long llen, scanned;
	size_t kept_bytes;
	json_t *entries;
};

static void on_page(struct master *m, redisReply *rep, void *priv);

static void
op_free(struct list_op *op)
{
	http_dead_read_end();
	json_decref(op->entries);
	free(op);
}

static void
op_fail(struct list_op *op, unsigned status, const char *what)
{
	http_req_error(op->r, status, "%s", what);
	op_free(op);
}

static void
read_next(struct master *m, struct list_op *op)
{
	long n = op->whole ? 1 : op->filtered ? SCAN_READ :
	    op->limit - (long)json_array_size(op->entries);

	op->reads++;
	if (http_dead_page(m, op->queue, op->k.dead, op->pos, n, op->whole ?
	    WHOLE_PREFIX : DEAD_LIST_PREFIX, op->whole ? WHOLE_PREFIX :
	    DEAD_LIST_BUDGET, on_page, op) == -1)
		op_fail(op, MHD_HTTP_SERVICE_UNAVAILABLE, "redis is not connected "
		    "now (the master reconnects; try again)");
}

/* The page, with next: the index to go on from, or -1 at the end. */
static void
answer(struct list_op *op, long next)
{
	json_t *o = json_pack("{s:s, s:I, s:i, s:I, s:b, s:o, s:I, s:b}",
	    "queue", op->queue, "offset", (json_int_t)op->offset, "limit",
	    (int)op->limit, "total", (json_int_t)op->llen, "more", next >= 0,
	    "next", next >= 0 ? json_integer(next) : json_null(), "scanned",
	    (json_int_t)op->scanned, "filtered", op->filtered);

	json_object_set(o, "entries", op->entries);
	http_req_json(op->r, MHD_HTTP_OK, o);
	op_free(op);
}

/* Can the selection be decided on e, a prefix of an entry? */
static bool
decidable(const struct list_op *op, const struct dead_entry *e)
{
	if (!op->filtered || !e->truncated)
		return true;
	if (!e->ok)             /* a header cut, or malformed: read it whole */
		return false;
	return op->f.id_glob == NULL || (e->w.id.p != NULL && e->w.id.n > 2);
}

/* One entry at index at (its first len of total bytes): -1 when it must
 * be read whole first, 1 when the page is full, else 0. */
static int
take(struct list_op *op, const struct queue_config *q, long at,
    const char *el, size_t len, size_t total, const char *ref)
{
	struct dead_entry e;
	char id[JOB_ID_MAX + 1] = "";
	bool match = true;

	if (op->filtered) {
		dead_entry_read_cut(&e, el, len, total);
		if (!decidable(op, &e)) {
			dead_entry_free(&e);
			return -1;
		}
		if (op->f.id_glob != NULL)
			dead_entry_id(e.ok ? &e.w : NULL, el, len, q->max_job_bytes, id);
		match = dead_filter_match(&op->f, &e, id);
		dead_entry_free(&e);
	}
	if (!match)
		return 0;
	/* a list shows the header (and, of an entry read whole, its id) */
	json_array_append_new(op->entries, http_dead_entry_json(q, el, len,
	    total, ref, at, false));
	op->kept_bytes += len < DEAD_LIST_PREFIX ? len : DEAD_LIST_PREFIX;
	return (long)json_array_size(op->entries) >= op->limit ||
	    op->kept_bytes >= DEAD_LIST_BUDGET;
}

static void
on_page(struct master *m, redisReply *rep, void *priv)
{
	struct list_op *op = priv;
	const struct queue_config *q;
	const char *what;
	unsigned status;

	if ((q = http_dead_reply_queue(m, rep, op->queue, &status, &what)) ==
	    NULL) {
		op_fail(op, status, what);
		return;
	}
	if (!http_dead_page_reply_ok(rep)) {
		op_fail(op, MHD_HTTP_BAD_GATEWAY, "dead_page.lua: an answer not of "
		    "its form (is the script the same version?)");
		return;
	}
	op->llen = rep->element[0]->integer;
	size_t n = (rep->elements - 1) / 3;
	for (size_t i = 0; i < n; i++) {
		redisReply **t = rep->element + 1 + 3 * i;
		int rc = take(op, q, op->pos, t[2]->str, t[2]->len,
		    (size_t)t[0]->integer, t[1]->str);
		if (rc == -1) {         /* this one again, whole */
			op->whole = true;
			read_next(m, op);
			return;
		}
		op->pos++;
		op->scanned++;
		if (rc == 1) {
			answer(op, op->pos < op->llen ? op->pos : -1);
			return;
		}
	}
	op->whole = false;
	if (n == 0 || op->pos >= op->llen)
		answer(op, -1);
	else if (!op->filtered || op->reads >= SCAN_READS)
		answer(op, op->pos);
	else
		read_next(m, op);
}

void
http_dead_list(struct http_req *r)
{
	struct master *m = http_req_master(r);
	const struct queue_config *q = http_dead_queue(r);
	long offset, limit;

	if (q == NULL || http_dead_arg_long(r, "offset", 0, 0, 1L << 40,
	    &offset) == -1 || http_dead_arg_long(r, "limit", 20, 1,
	    DEAD_PAGE_MAX, &limit) == -1)
		return;
	struct list_op *op = xcalloc(1, sizeof(*op));
	if (http_dead_filter_args(r, false, &op->ft, &op->f) != 0 ||
	    !http_dead_read_begin(r)) {
		free(op);
		return;
	}
	op->r = r;
	op->filtered = dead_filter_active(&op->f);
	op->offset = op->pos = offset;
	op->limit = limit;
	op->entries = json_array();
	snprintf(op->queue, sizeof(op->queue), "%s", q->name);
	queue_keys_init(&op->k, master_control_config(m)->redis_prefix,
	    q->name);
	read_next(m, op);
}
