/* http_dead.c - the dashboard's dead entries one at a time: GET
 * /api/dead/one (one entry with its document); POST /api/dead/replay and
 * /api/dead/purge (one entry, named by its index and checked by its sha1,
 * dead_entry_ref: when the list moved meanwhile, 409 and nothing done).
 * The reads (these and the list's, http_dead_list.c) go through
 * dead_page.lua, which hands the master at most a
 * prefix of each entry (DEAD_ONE_PREFIX here) and a page
 * bounded by those prefixes' total and by the bytes Redis reads (a page
 * of big entries holds fewer), one read at a time per master (others
 * 503): an entry of many megabytes costs the master a few kilobytes, and
 * Redis' script a bounded time. Every question
 * goes to Redis over the master's asynchronous connection
 * (master_redis_commandv); the HTTP request waits, the loop does not.
 * A replay is dead_retry.lua on the entry's exact bytes, as `ferryctl
 * dead retry` does; a purge is dead_purge.lua: LREM of those bytes and
 * the release of the job's cache key when cache_key_allowed (as
 * `ferryctl dead purge`). With http_token set, the reads need the token as
 * the actions do (http_server.c asks for it first). */
#include <hiredis/hiredis.h>
#include <jansson.h>
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache.h"
#include "config.h"
#include "dead_entry.h"
#include "http.h"
#include "http_dead.h"
#include "lua_scripts.h"
#include "master_control.h"
#include "master_redis.h"
#include "queue.h"
#include "script_args.h"
#include "util.h"

#define DEAD_ONE_PREFIX (1024 * 1024)   /* /api/dead/one's document */

/* GET /api/dead or /api/dead/one waiting for Redis (one at a time) */
static int dead_reading;

enum dead_what { DEAD_ONE, DEAD_REPLAY, DEAD_PURGE };

/* One request's work, from its first question to its answer. */
struct dead_op {
	struct http_req *r;
	enum dead_what what;
	const struct queue_config *q;   /* checked on every reply: reload */
	char queue[CONFIG_QUEUE_NAME_MAX + 1];
	struct queue_keys k;
	long index;
	int step;                       /* 0: LINDEX asked, 1: acting */
	bool reading;                   /* counted in dead_reading */
	char id[JOB_ID_MAX + 1];        /* replay, purge: the entry's id */
	char sha1[41];                  /* replay, purge: its dead_entry_ref */
	char *cache_key;                /* purge: released with the LREM */
};

static void on_reply(struct master *m, redisReply *rep, void *priv);

int
http_dead_eval(struct master *m, const char *queue, enum lua_script script,
    int nkeys, int argc, const char *const *argv, const size_t *lens,
    master_redis_fn *fn, void *priv)
{
	const char **args = xmalloc(sizeof(*args) * (size_t)(argc + 3));
	size_t *arglens = xmalloc(sizeof(*arglens) * (size_t)(argc + 3));
	char nk[16];
	int rc;

	snprintf(nk, sizeof(nk), "%d", nkeys);
	args[0] = "EVAL";
	args[1] = lua_script_source[script];
	args[2] = nk;
	for (int i = 0; i < 3; i++)
		arglens[i] = strlen(args[i]);
	for (int i = 0; i < argc; i++) {
		args[i + 3] = argv[i];
		arglens[i + 3] = lens[i];
	}
	rc = master_redis_commandv(m, queue, fn, priv, argc + 3, args, arglens);
	free(args);
	free(arglens);
	return rc;
}

int
http_dead_act(struct master *m, const char *queue, bool replay,
    int count, const char *el, size_t len, const char *cache_key,
    master_redis_fn *fn, void *priv)
{
	const char *prefix = master_control_config(m)->redis_prefix;
	struct sargs a;

	if (replay)
		sargs_dead_retry(&a, prefix, queue, el, len);
	else
		sargs_dead_purge(&a, prefix, queue, count, el, len, cache_key);
	return http_dead_eval(m, queue, a.script, a.nkeys, a.argc, a.argv,
	    a.lens, fn, priv);
}

char *
http_dead_cache_key(struct master *m, const struct queue_config *q,
    const struct dead_entry *e)
{
	char *key = dead_entry_cache_key(e);

	if (key != NULL && !cache_key_allowed(key,
	    master_control_config(m)->redis_prefix, q)) {
		free(key);
		key = NULL;
	}
	return key;
}

bool
http_dead_read_begin(struct http_req *r)
{
	if (dead_reading > 0) {         /* 503: Retry-After (http_server.c) */
		http_req_error(r, MHD_HTTP_SERVICE_UNAVAILABLE, "another read of "
		    "the dead-letter list is under way (one at a time: retry in a "
		    "second)");
		return false;
	}
	dead_reading++;
	return true;
}

void
http_dead_read_end(void)
{
	dead_reading--;
}

int
http_dead_page(struct master *m, const char *queue, const char *dead,
    long offset, long limit, long prefix, long budget, master_redis_fn *fn,
    void *priv)
{
	char a[6][24];

	snprintf(a[0], sizeof(a[0]), "%ld", offset);
	snprintf(a[1], sizeof(a[1]), "%ld", limit);
	snprintf(a[2], sizeof(a[2]), "%ld", prefix);
	snprintf(a[3], sizeof(a[3]), "%d", DEAD_ENTRY_REF_BYTES);
	snprintf(a[4], sizeof(a[4]), "%ld", budget);
	snprintf(a[5], sizeof(a[5]), "%ld", HTTP_DEAD_READ_BUDGET);
	const char *argv[] = { "EVAL", lua_script_source[LUA_DEAD_PAGE], "1",
	    dead, a[0], a[1], a[2], a[3], a[4], a[5] };
	return master_redis_commandv(m, queue, fn, priv,
	    (int)FERRY_ARRAY_LEN(argv), argv, NULL);
}

bool
http_dead_page_reply_ok(const redisReply *rep)
{
	if (rep->type != REDIS_REPLY_ARRAY || rep->elements < 1 ||
	    rep->element[0]->type != REDIS_REPLY_INTEGER ||
	    (rep->elements - 1) % 3 != 0)
		return false;
	for (size_t i = 1; i < rep->elements; i += 3)
		if (rep->element[i]->type != REDIS_REPLY_INTEGER ||
		    rep->element[i + 1]->type != REDIS_REPLY_STRING ||
		    rep->element[i + 2]->type != REDIS_REPLY_STRING)
			return false;
	return true;
}

const struct queue_config *
http_dead_reply_queue(struct master *m, const redisReply *rep,
    const char *queue, unsigned *status, const char **what)
{
	const struct queue_config *q;

	if (rep == NULL) {
		*status = MHD_HTTP_SERVICE_UNAVAILABLE;
		*what = "the connection to redis was lost (the master "
		    "reconnects; try again)";
		return NULL;
	}
	if ((q = config_find_queue(master_control_config(m), queue)) == NULL) {
		*status = MHD_HTTP_NOT_FOUND;
		*what = "the queue is gone (reload)";
		return NULL;
	}
	if (rep->type == REDIS_REPLY_ERROR) {
		*status = MHD_HTTP_BAD_GATEWAY;
		*what = rep->str;
		return NULL;
	}
	return q;
}

static void
op_done(struct dead_op *op)
{
	if (op->reading)
		http_dead_read_end();
	free(op->cache_key);
	free(op);
}

static void
op_fail(struct dead_op *op, unsigned status, const char *what)
{
	http_req_error(op->r, status, "%s", what);
	op_done(op);
}

static int
ask(struct master *m, struct dead_op *op, int argc, const char **argv,
    const size_t *lens)
{
	if (master_redis_commandv(m, op->queue, on_reply, op, argc, argv,
	    lens) == -1) {
		op_fail(op, MHD_HTTP_SERVICE_UNAVAILABLE, "redis is not connected "
		    "now (the master reconnects; try again)");
		return -1;
	}
	return 0;
}

json_t *
http_dead_entry_json(const struct queue_config *q, const char *el,
    size_t len, size_t total, const char *ref, long index, bool job)
{
	struct dead_entry e;
	char id[JOB_ID_MAX + 1];
	json_t *o = json_object();

	dead_entry_read_cut(&e, el, len, total);
	/* a cut document may not give the job's own id: only the header's */
	if (!e.truncated || (e.ok && e.w.id.p != NULL && e.w.id.n > 2)) {
		dead_entry_id(e.ok ? &e.w : NULL, el, len,
		    q->max_job_bytes, id);
		json_object_set_new(o, "id", json_string(id));
	} else {
		json_object_set_new(o, "id", json_null());
	}
	json_object_set_new(o, "index", json_integer(index));
	json_object_set_new(o, "sha1", json_string(ref));
	json_object_set_new(o, "bytes", json_integer((json_int_t)total));
	if (e.truncated)
		json_object_set_new(o, "truncated", json_true());
	if (!e.ok || (job ? dead_entry_decode(o, &e) :
	    dead_entry_header(o, &e.w)) != 0) {
		json_object_set_new(o, "reason", json_string(e.ok ?
		    "undecodable dead entry" : e.truncated ? "dead entry with "
		    "a header longer than the part shown" :
		    DEAD_ENTRY_MALFORMED));
		if (job)
			dead_entry_raw(o, el, len);
	}
	if (job && e.truncated) {
		char *note = xasprintf("truncated: the first %zu of %zu bytes "
		    "(`ferryctl dead show %s ID` prints it whole)", len, total,
		    q->name);
		json_object_set_new(o, "note", json_string(note));
		free(note);
	}
	dead_entry_free(&e);
	return o;
}

/* dead_page.lua answered: { LLEN, (length, sha1, prefix)... }. 0, or -1
 * when the reply is not that (nothing answered). */
static int
page_done(struct dead_op *op, const redisReply *rep)
{
	if (!http_dead_page_reply_ok(rep))
		return -1;
	if (rep->elements == 1) {
		op_fail(op, MHD_HTTP_NOT_FOUND, "no dead entry at that index");
		return 0;
	}
	redisReply **t = rep->element + 1;
	http_req_json(op->r, MHD_HTTP_OK, http_dead_entry_json(op->q, t[2]->str,
	    t[2]->len, (size_t)t[0]->integer, t[1]->str, op->index, true));
	op_done(op);
	return 0;
}

/* LINDEX answered for replay or purge: the entry still is the one the
 * page showed (same id), then act on its exact bytes. */
static void
act_on(struct master *m, struct dead_op *op, const redisReply *el)
{
	struct dead_entry e;
	char ref[41];

	dead_entry_read(&e, el->str, el->len);
	dead_entry_id(e.ok ? &e.w : NULL, el->str, el->len,
	    op->q->max_job_bytes, op->id);
	/* the sha1 names the entry the page showed; an id may be shared by
	 * its neighbours (producers' ids, identical documents) */
	dead_entry_ref(el->str, el->len, el->len, ref);
	if (strcmp(ref, op->sha1) != 0) {
		dead_entry_free(&e);
		op_fail(op, MHD_HTTP_CONFLICT, "the dead-letter list changed: "
		    "that entry is no longer at that index (reload the list)");
		return;
	}
	if (op->what == DEAD_REPLAY && !e.ok) {
		dead_entry_free(&e);
		op_fail(op, MHD_HTTP_UNPROCESSABLE_CONTENT, "a malformed dead "
		    "entry cannot be replayed, only purged");
		return;
	}
	if (op->what == DEAD_PURGE)
		op->cache_key = http_dead_cache_key(m, op->q, &e);
	dead_entry_free(&e);
	if (http_dead_act(m, op->queue, op->what == DEAD_REPLAY, 1, el->str,
	    el->len, op->cache_key, on_reply, op) == -1)
		op_fail(op, MHD_HTTP_SERVICE_UNAVAILABLE, "redis is not connected "
		    "now (the master reconnects; try again)");
}

static void
acted(struct dead_op *op, const redisReply *rep)
{
	if (rep->type == REDIS_REPLY_ERROR) {
		op_fail(op, MHD_HTTP_BAD_GATEWAY, rep->str);
		return;
	}
	if (rep->type != REDIS_REPLY_INTEGER || rep->integer == 0) {
		op_fail(op, MHD_HTTP_CONFLICT, "the entry was gone before it could "
		    "be acted on (another ferryctl or page?)");
		return;
	}
	bool replay = op->what == DEAD_REPLAY;
	http_req_json(op->r, MHD_HTTP_OK, json_pack("{s:s, s:s, s:i}",
	    "queue", op->queue, "id", op->id, replay ? "replayed" : "purged", 1));
	op_done(op);
}

static void
on_reply(struct master *m, redisReply *rep, void *priv)
{
	struct dead_op *op = priv;
	const char *what;
	unsigned status;

	if ((op->q = http_dead_reply_queue(m, rep, op->queue, &status,
	    &what)) == NULL) {
		op_fail(op, status, what);
		return;
	}
	if (op->what == DEAD_ONE) {
		if (page_done(op, rep) == -1)
			op_fail(op, MHD_HTTP_BAD_GATEWAY, "dead_page.lua: an answer "
			    "not of its form (is the script the same version?)");
		return;
	}
	if (op->step++ == 0) {        /* the LINDEX */
		if (rep->type == REDIS_REPLY_NIL) {
			op_fail(op, MHD_HTTP_NOT_FOUND, "no dead entry at that index");
		} else if (rep->type != REDIS_REPLY_STRING) {
			op_fail(op, MHD_HTTP_BAD_GATEWAY, "LINDEX: not a string");
		} else {
			act_on(m, op, rep);
		}
		return;
	}
	acted(op, rep);
}

const struct queue_config *
http_dead_queue(struct http_req *r)
{
	const char *name = http_req_arg(r, "queue");
	const struct queue_config *q = name != NULL ? config_find_queue(
	    master_control_config(http_req_master(r)), name) : NULL;

	if (q == NULL)
		http_req_error(r, MHD_HTTP_NOT_FOUND, "no queue \"%s\" in the "
		    "configuration", name != NULL ? name : "");
	return q;
}

/* The queue argument and the op for it, or NULL after an answer. */
static struct dead_op *
op_new(struct http_req *r, enum dead_what what)
{
	struct master *m = http_req_master(r);
	const struct queue_config *q = http_dead_queue(r);

	if (q == NULL)
		return NULL;
	struct dead_op *op = xcalloc(1, sizeof(*op));
	op->r = r;
	op->what = what;
	op->q = q;
	snprintf(op->queue, sizeof(op->queue), "%s", q->name);
	queue_keys_init(&op->k, master_control_config(m)->redis_prefix,
	    q->name);
	return op;
}

/* The entry at ?index=: shown (a prefix of it, dead_page.lua), or LINDEX
 * for replay and purge (?sha1= required). */
static void
dead_indexed(struct http_req *r, enum dead_what what)
{
	struct dead_op *op = op_new(r, what);
	char at[24];

	if (op == NULL)
		return;
	if (http_dead_arg_long(r, "index", -1, 0, 1L << 40, &op->index) == -1 ||
	    op->index == -1) {
		if (op->index == -1)
			http_req_error(r, MHD_HTTP_BAD_REQUEST, "index: missing");
		op_done(op);
		return;
	}
	if (what == DEAD_ONE) {
		if (!http_dead_read_begin(r)) {
			op_done(op);
			return;
		}
		op->reading = true;
		if (http_dead_page(http_req_master(r), op->queue, op->k.dead,
		    op->index, 1, DEAD_ONE_PREFIX, DEAD_ONE_PREFIX, on_reply,
		    op) == -1)
			op_fail(op, MHD_HTTP_SERVICE_UNAVAILABLE, "redis is not "
			    "connected now (the master reconnects; try again)");
		return;
	}
	const char *sha = http_req_arg(r, "sha1");
	if (sha == NULL || strlen(sha) != 40 || strspn(sha,
	    "0123456789abcdef") != 40) {
		http_req_error(r, MHD_HTTP_BAD_REQUEST, "sha1: %s (40 lowercase "
		    "hex digits: the sha1 of the entry, as /api/dead lists it)",
		    sha == NULL ? "missing" : "invalid");
		op_done(op);
		return;
	}
	snprintf(op->sha1, sizeof(op->sha1), "%s", sha);
	snprintf(at, sizeof(at), "%ld", op->index);
	const char *argv[] = { "LINDEX", op->k.dead, at };
	ask(http_req_master(r), op, 3, argv, NULL);
}

bool
http_dead_get(struct http_req *r, const char *url)
{
	if (strcmp(url, "/api/dead") == 0)
		http_dead_list(r);
	else if (strcmp(url, "/api/dead/one") == 0)
		dead_indexed(r, DEAD_ONE);
	else
		return false;
	return true;
}

bool
http_dead_post(struct http_req *r, const char *url)
{
	if (strcmp(url, "/api/dead/replay") == 0)
		dead_indexed(r, DEAD_REPLAY);
	else if (strcmp(url, "/api/dead/purge") == 0)
		dead_indexed(r, DEAD_PURGE);
	else
		return false;
	return true;
}
