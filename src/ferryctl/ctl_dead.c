/* ctl_dead.c - ferryctl dead: list, show, replay and purge the dead-letter
 * entries of a queue, naming jobs by id. Entries are read by the grammar
 * of doc/formats.md (src/format/wrapper.c), never with a JSON parser: the job in
 * an entry is the producer's bytes, which may be anything. Every entry can
 * be listed, shown and purged; one that does not match the grammar is
 * named by the SHA-1 of its bytes and cannot be replayed. Entries are
 * matched and removed by their exact bytes; a purge releases the cache keys
 * of the purged jobs too (protected while the jobs lived: dead_purge.lua).
 * list and show take a selection (dead_filter.h); retry and purge by a
 * selection go to ctl_dead_redrive.c, summary to ctl_dead_summary.c. */
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cache.h"
#include "ctl.h"
#include "ctl_dead.h"
#include "dead_entry.h"
#include "job.h"
#include "script_args.h"
#include "util.h"
#include "wrapper.h"

#define LAST_ERROR_SHOWN 60     /* bytes of last_error in `dead list` */

/* One entry as LRANGE gave it (pointers into the reply). */
struct entry {
	struct dead_entry d;
	long index;             /* LINDEX */
	char id[JOB_ID_MAX + 1];
};

struct match {
	char *el;               /* the entry, exact bytes (NULL: --all) */
	size_t el_len;
	bool ok;
	char *cache_key;        /* of the queue's cache space, or NULL */
	char id[JOB_ID_MAX + 1]; /* its job's */
	char sha[41];           /* the SHA-1 of its job's document, or "" */
};

struct dead_cmd {
	struct ctl *c;
	const struct queue_config *q;
	struct queue_keys k;
	const char *sub;        /* list, show, retry, purge */
	const char *id;         /* NULL with --all */
	const struct ctl_dead_opts *o;  /* list, show: the selection */
	size_t found;
	struct match *matches;
	size_t nmatches, cap;
	long long refused;      /* malformed entries retry left in place */
};

typedef int (*entry_fn)(struct dead_cmd *, const struct entry *);

static void
entry_read(const struct dead_cmd *d, struct entry *e, const redisReply *el,
    long index)
{
	dead_entry_read(&e->d, el->str, el->len);
	e->index = index;
	dead_entry_id(e->d.ok ? &e->d.w : NULL, el->str, el->len,
	    d->q->max_job_bytes, e->id);
}

static bool
entry_matches(const struct dead_cmd *d, const struct entry *e)
{
	if (d->id != NULL)
		return strcmp(e->id, d->id) == 0;
	return d->o == NULL || dead_filter_match(&d->o->f, &e->d, e->id);
}

/* list and show: --limit reached (scan stops: SCAN_STOP). */
#define SCAN_STOP (-1)

static bool
limit_reached(const struct dead_cmd *d)
{
	return d->o != NULL && d->o->limit >= 0 &&
	    (long long)d->found >= d->o->limit;
}

/* Call fn for every entry, newest first, LRANGE by LRANGE. */
static int
scan(struct dead_cmd *d, entry_fn fn)
{
	size_t n = CTL_CHUNK;
	int rc = 0;

	for (long start = 0; rc == 0 && n == CTL_CHUNK; start += CTL_CHUNK) {
		redisReply *r = redisCommand(d->c->rc, "LRANGE %s %ld %ld",
		    d->k.dead, start, start + CTL_CHUNK - 1);
		if (!ctl_reply_ok(r) || r->type != REDIS_REPLY_ARRAY)
			return ctl_redis_fail(d->c, "LRANGE of the dead list", r);
		for (size_t i = 0; i < r->elements && rc == 0; i++) {
			struct entry e;
			entry_read(d, &e, r->element[i], start + (long)i);
			rc = fn(d, &e);
			dead_entry_free(&e.d);
		}
		n = r->elements;
		freeReplyObject(r);
	}
	return rc == SCAN_STOP ? 0 : rc;
}

/* s on one line (control characters as blanks), cut after max bytes at a
 * character boundary. */
void
ctl_dead_print_text(const char *s, size_t max)
{
	size_t n = strlen(s), cut = n > max ? max : n;

	while (cut < n && cut > 0 && ((unsigned char)s[cut] & 0xc0) == 0x80)
		cut--;
	for (size_t i = 0; i < cut; i++)
		putchar((unsigned char)s[i] < 0x20 || s[i] == 0x7f ? ' ' : s[i]);
	if (cut < n)
		fputs("...", stdout);
}

static void
print_token(struct wrapper_str s, size_t max)
{
	char *text = wrapper_str_text(s);

	ctl_dead_print_text(text != NULL ? text : "-", max);
	free(text);
}

static void
print_time(long long ms)
{
	char buf[40];

	fputs(ctl_time_text(ms, buf, sizeof(buf)), stdout);
}

void
ctl_dead_print_line(const struct dead_entry *e, const char *id)
{
	ctl_dead_print_text(id[0] != '\0' ? id : "-", JOB_ID_MAX);
	putchar('\t');
	if (!e->ok) {
		printf("-\t-\t-\t" DEAD_ENTRY_MALFORMED "\t-\n");
		return;
	}
	print_time(e->w.time);
	printf("\t%lld\t%lld\t", e->w.attempts, e->w.recoveries);
	print_token(e->w.reason, 500);
	putchar('\t');
	print_token(e->w.last_error, LAST_ERROR_SHOWN);
	putchar('\n');
}

static int
list_one(struct dead_cmd *d, const struct entry *e)
{
	if (limit_reached(d))
		return SCAN_STOP;
	if (!entry_matches(d, e))
		return 0;
	ctl_dead_print_line(&e->d, e->id);
	d->found++;
	return 0;
}

/* What `show` prints of an element that does not match the grammar. */
static json_t *
show_raw(const struct entry *e)
{
	json_t *o = json_object();

	if (o == NULL || json_object_set_new(o, "id", json_string(e->id)) != 0 ||
	    json_object_set_new(o, "reason",
	    json_string(DEAD_ENTRY_MALFORMED)) != 0 ||
	    dead_entry_raw(o, e->d.el, e->d.len) != 0) {
		json_decref(o);
		return NULL;
	}
	return o;
}

/* The header and the job of an entry that matches the grammar; NULL when
 * jansson failed (the caller shows the raw bytes). */
static json_t *
show_entry(const struct entry *e)
{
	json_t *o = json_object();

	if (o != NULL && dead_entry_decode(o, &e->d) == 0)
		return o;
	json_decref(o);
	fprintf(stderr, "ferryctl: the dead entry of job %s could not be "
	    "decoded; shown as its raw bytes\n", e->id);
	return NULL;
}

/* The document is valid JSON: it is printed as it is, as "document" after
 * the other members (no re-encoding: its bytes as the producer sent them). */
static bool
valid_json(const char *p, size_t n)
{
	json_t *v = json_loadb(p, n, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);

	json_decref(v);
	return v != NULL;
}

static int
show_one(struct dead_cmd *d, const struct entry *e)
{
	json_t *o = NULL;
	bool decoded;
	char *text = NULL;
	size_t n;

	if (limit_reached(d))
		return SCAN_STOP;
	if (!entry_matches(d, e))
		return 0;
	decoded = e->d.ok && (o = show_entry(e)) != NULL;
	if (!decoded)
		o = show_raw(e);
	if (o != NULL)
		text = json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	json_decref(o);
	if (text == NULL) {
		fprintf(stderr, "ferryctl: out of memory showing the dead entry of "
		    "job %s\n", e->id);
		return CTL_EX_IOERR;
	}
	n = strlen(text);
	if (decoded && n >= 2 && valid_json(e->d.w.doc, e->d.w.doc_len)) {
		fwrite(text, 1, n - 2, stdout);        /* without "\n}" */
		fputs(",\n  \"document\": ", stdout);
		fwrite(e->d.w.doc, 1, e->d.w.doc_len, stdout);
		fputs("\n}\n", stdout);
	} else {
		fwrite(text, 1, n, stdout);
		putchar('\n');
	}
	free(text);
	d->found++;
	return 0;
}

/* The cache key the job of an entry names, if it lies in the queue's cache
 * space or cache_key_prefixes (cache_key_allowed: never one of ferry's own
 * keys, nor another application's). */
char *
ctl_dead_cache_key(const struct ctl *c, const struct queue_config *q,
    const struct dead_entry *e)
{
	char *key = dead_entry_cache_key(e);

	if (key != NULL && !cache_key_allowed(key, c->cfg->redis_prefix, q)) {
		free(key);
		key = NULL;
	}
	return key;
}

/* Remember a matching entry: its bytes (to remove exactly it) unless the
 * whole list goes (--all), and its cache key. */
static int
collect_one(struct dead_cmd *d, const struct entry *e)
{
	struct match *m;

	if (!entry_matches(d, e))
		return 0;
	if (d->nmatches == d->cap) {
		d->cap = d->cap ? d->cap * 2 : 16;
		d->matches = xrealloc(d->matches, d->cap * sizeof(*d->matches));
	}
	m = &d->matches[d->nmatches++];
	memset(m, 0, sizeof(*m));
	if (d->id != NULL) {
		m->el = xmalloc(e->d.len + 1);
		memcpy(m->el, e->d.el, e->d.len);
		m->el_len = e->d.len;
	}
	m->ok = e->d.ok;
	snprintf(m->id, sizeof(m->id), "%s", e->id);
	if (e->d.ok)
		job_sha1_hex(e->d.w.doc, e->d.w.doc_len, m->sha);
	m->cache_key = ctl_dead_cache_key(d->c, d->q, &e->d);
	d->found++;
	return 0;
}

static void
say_malformed(const struct dead_cmd *d, const char *id)
{
	fprintf(stderr, "ferryctl: the dead entry %s of queue %s is malformed "
	    "(it is not a dead entry of doc/formats.md): it cannot be replayed, "
	    "only shown and purged (`ferryctl dead purge %s %s`)\n", id,
	    d->q->name, d->q->name, id);
}

/* dead_retry.lua on one entry: *replayed + 1, or + 0 when it is gone or
 * refused (d->refused + 1). */
static int
retry_one(struct dead_cmd *d, const char *el, size_t len, const char *id,
    long long *replayed)
{
	struct sargs a;

	sargs_dead_retry(&a, d->c->cfg->redis_prefix, d->q->name, el, len);
	redisReply *r = queue_script(d->c->rc, a.script, a.nkeys, a.argc, a.argv,
	    a.lens);

	if (r != NULL && r->type == REDIS_REPLY_ERROR &&
	    strncmp(r->str, "BADENTRY ", 9) == 0) {
		say_malformed(d, id);
		d->refused++;
		freeReplyObject(r);
		return 0;
	}
	if (!ctl_reply_ok(r) || r->type != REDIS_REPLY_INTEGER)
		return ctl_redis_fail(d->c, "replaying a dead entry", r);
	*replayed += r->integer;
	freeReplyObject(r);
	return 0;
}

/* The entry at the right end of this LRANGE reply is the oldest. A
 * malformed entry stays where it is (*skipped + 1). */
static int
retry_chunk(struct dead_cmd *d, redisReply *r, long *skipped,
    long long *replayed)
{
	int rc = 0;

	for (size_t i = r->elements; i-- > 0 && rc == 0; ) {
		struct entry e;
		long long refused = d->refused;
		entry_read(d, &e, r->element[i], -1 - *skipped);
		if (!e.d.ok) {
			say_malformed(d, e.id);
			d->refused++;
		} else {
			rc = retry_one(d, e.d.el, e.d.len, e.id, replayed);
		}
		*skipped += d->refused - refused;
		dead_entry_free(&e.d);
	}
	return rc;
}

/* Oldest first, and only the entries there were at the start: a job that
 * dies again while this runs is not replayed twice. */
static int
retry_all(struct dead_cmd *d, long long *replayed)
{
	bool progress = ctl_progress_wanted(true);
	long long total, done = 0;
	long skipped = 0, n;
	redisReply *r = redisCommand(d->c->rc, "LLEN %s", d->k.dead);
	int rc = 0;

	if (!ctl_reply_ok(r) || r->type != REDIS_REPLY_INTEGER)
		return ctl_redis_fail(d->c, "LLEN of the dead list", r);
	total = r->integer;
	freeReplyObject(r);
	for (; done < total && rc == 0; done += n) {
		n = total - done < CTL_CHUNK ? (long)(total - done) : CTL_CHUNK;
		r = redisCommand(d->c->rc, "LRANGE %s %ld %ld", d->k.dead,
		    -skipped - n, -skipped - 1);
		if (!ctl_reply_ok(r) || r->type != REDIS_REPLY_ARRAY)
			return ctl_redis_fail(d->c, "LRANGE of the dead list", r);
		if (r->elements == 0)
			total = done;
		rc = retry_chunk(d, r, &skipped, replayed);
		freeReplyObject(r);
		if (progress)
			fprintf(stderr, "\rferryctl: replayed %lld of %lld", *replayed,
			    total);
	}
	if (progress && total > 0)
		fputc('\n', stderr);
	return rc;
}

static int
retry_matches(struct dead_cmd *d, long long *replayed)
{
	int rc = 0;

	for (size_t i = 0; i < d->nmatches && rc == 0; i++) {
		struct match *m = &d->matches[i];
		if (!m->ok) {
			say_malformed(d, d->id);
			d->refused++;
		} else {
			rc = retry_one(d, m->el, m->el_len, d->id, replayed);
		}
	}
	return rc;
}

/* dead_purge.lua: the entry and the release of its job's cache key in
 * one step; with el NULL, only the release (after `--all` deleted the
 * list). The count of entries removed goes to *purged. */
static int
purge_one(struct dead_cmd *d, const struct match *m, long long *purged)
{
	struct sargs a;
	redisReply *r;

	if (m->el == NULL && m->cache_key == NULL)
		return 0;
	sargs_dead_purge(&a, d->c->cfg->redis_prefix, d->q->name, 1,
	    m->el != NULL ? m->el : "", m->el != NULL ? m->el_len : 0,
	    m->cache_key);
	r = queue_script(d->c->rc, a.script, a.nkeys, a.argc, a.argv, a.lens);
	if (!ctl_reply_ok(r) || r->type != REDIS_REPLY_INTEGER)
		return ctl_redis_fail(d->c, "purge of a dead entry", r);
	if (m->el != NULL)
		*purged += r->integer;
	freeReplyObject(r);
	return 0;
}

/* After `--all` deleted the list: an entry's cache key released and its
 * id forgotten (dead_purge.lua with the entry gone). */
static int
purged_one(struct dead_cmd *d, const struct match *m)
{
	struct sargs a;
	redisReply *r;

	if (m->cache_key == NULL && d->q->idempotency_window_ms == 0)
		return 0;
	sargs_dead_purged(&a, d->c->cfg->redis_prefix, d->q->name, m->id,
	    m->sha, m->cache_key);
	r = queue_script(d->c->rc, a.script, a.nkeys, a.argc, a.argv, a.lens);
	if (!ctl_reply_ok(r) || r->type != REDIS_REPLY_INTEGER)
		return ctl_redis_fail(d->c, "release of a purged entry's key", r);
	freeReplyObject(r);
	return 0;
}

static int
purge_matches(struct dead_cmd *d, long long *purged)
{
	int rc = 0;

	for (size_t i = 0; i < d->nmatches && rc == 0; i++)
		rc = purge_one(d, &d->matches[i], purged);
	return rc;
}

/* LLEN and DEL in one transaction: the count is what was deleted. The
 * cache keys are those of the entries scanned just before (an entry that
 * dies in between keeps its key). */
static int
purge_all(struct dead_cmd *d, long long *purged)
{
	redisReply *r;
	int rc = scan(d, collect_one);

	if (rc != 0)
		return rc;
	r = redisCommand(d->c->rc, "MULTI");
	if (!ctl_reply_ok(r))
		return ctl_redis_fail(d->c, "MULTI", r);
	freeReplyObject(r);
	redisAppendCommand(d->c->rc, "LLEN %s", d->k.dead);
	redisAppendCommand(d->c->rc, "DEL %s", d->k.dead);
	redisAppendCommand(d->c->rc, "EXEC");
	for (int i = 0; i < 3 && rc == 0; i++) {
		if (redisGetReply(d->c->rc, (void **)&r) != REDIS_OK)
			return ctl_redis_fail(d->c, "DEL of the dead list", NULL);
		if (!ctl_reply_ok(r) || (i == 2 && (r->type != REDIS_REPLY_ARRAY ||
		    r->elements != 2 || r->element[0]->type != REDIS_REPLY_INTEGER)))
			return ctl_redis_fail(d->c, "DEL of the dead list", r);
		if (i == 2)
			*purged = r->element[0]->integer;
		freeReplyObject(r);
	}
	for (size_t i = 0; i < d->nmatches && rc == 0; i++)
		rc = purged_one(d, &d->matches[i]);
	return rc;
}

static int
not_found(const struct dead_cmd *d)
{
	fprintf(stderr, "ferryctl: no dead job with id \"%s\" in queue %s (see "
	    "`ferryctl dead list %s`)\n", d->id, d->q->name, d->q->name);
	return CTL_EX_NOTFOUND;
}

typedef int dead_act_fn(struct dead_cmd *, long long *);

/* With --all, all(d, n); with an id, its entries collected, then
 * matches(d, n), or CTL_EX_NOTFOUND after a message when it has none. */
static int
act(struct dead_cmd *d, dead_act_fn *all, dead_act_fn *matches,
    long long *n)
{
	int rc;

	if (d->id == NULL)
		return all(d, n);
	if ((rc = scan(d, collect_one)) != 0)
		return rc;
	return d->found == 0 ? not_found(d) : matches(d, n);
}

/* Exit status: 0; with an id, 1 when its entries were gone meanwhile and
 * 65 when they were all malformed. --all leaves malformed entries in
 * place, says so, and exits 0. */
static int
run_retry(struct dead_cmd *d)
{
	long long replayed = 0;
	int rc = act(d, retry_all, retry_matches, &replayed);

	if (rc != 0)
		return rc;
	printf("replayed %lld job%s to queue %s\n", replayed,
	    replayed == 1 ? "" : "s", d->q->name);
	if (d->id == NULL && d->refused > 0)
		fprintf(stderr, "ferryctl: %lld malformed dead entr%s left in "
		    "queue %s (see `ferryctl dead list %s`)\n", d->refused,
		    d->refused == 1 ? "y" : "ies", d->q->name, d->q->name);
	if (d->id == NULL || replayed > 0)
		return 0;
	if (d->refused > 0)
		return CTL_EX_DATAERR;
	fprintf(stderr, "ferryctl: the dead entries of job %s were gone "
	    "before they could be replayed (another ferryctl?)\n", d->id);
	return CTL_EX_NOTFOUND;
}

static int
run_purge(struct dead_cmd *d)
{
	long long purged = 0;
	int rc = act(d, purge_all, purge_matches, &purged);

	if (rc == 0)
		printf("purged %lld dead entr%s from queue %s\n", purged,
		    purged == 1 ? "y" : "ies", d->q->name);
	return rc;
}

static int
run(struct dead_cmd *d)
{
	int rc;

	if (strcmp(d->sub, "list") == 0) {
		if (isatty(STDOUT_FILENO))
			printf("ID\tTIME\tATTEMPTS\tRECOVERIES\tREASON\tLAST_ERROR\n");
		return scan(d, list_one);
	}
	if (strcmp(d->sub, "show") == 0) {
		rc = scan(d, show_one);
		if (rc == 0 && d->found == 0 && d->id == NULL) {
			fprintf(stderr, "ferryctl: no dead entry of queue %s matches "
			    "the selection (see `ferryctl dead summary %s`)\n",
			    d->q->name, d->q->name);
			return CTL_EX_NOTFOUND;
		}
		return rc == 0 && d->found == 0 ? not_found(d) : rc;
	}
	return strcmp(d->sub, "retry") == 0 ? run_retry(d) : run_purge(d);
}

/* ferryctl dead list|show|summary|retry|purge QUEUE ..., restore QUEUE FILE */
int
ctl_dead(struct ctl *c, int argc, char **argv)
{
	struct ctl_dead_opts o;
	struct dead_cmd d = { .c = c };
	int rc;

	if (ctl_dead_options(&o, argc, argv) != 0)
		return ctl_dead_usage();
	if ((d.q = ctl_queue(c, o.queue)) == NULL)
		return CTL_EX_USAGE;
	if (strcmp(o.sub, "restore") == 0)
		return ctl_dead_restore(c, d.q, o.id);
	if (ctl_redis_for(c, d.q->name) == NULL)
		return CTL_EX_UNAVAILABLE;
	if ((rc = ctl_dead_times(c, &o)) != 0)
		return rc;
	if (strcmp(o.sub, "summary") == 0)
		return ctl_dead_summary(c, d.q, &o);
	if (ctl_dead_selects(&o))
		return ctl_dead_redrive(c, d.q, &o);
	d.sub = o.sub;
	d.id = o.all ? NULL : o.id;
	d.o = &o;
	queue_keys_init(&d.k, c->cfg->redis_prefix, d.q->name);
	rc = run(&d);
	for (size_t i = 0; i < d.nmatches; i++) {
		free(d.matches[i].el);
		free(d.matches[i].cache_key);
	}
	free(d.matches);
	return rc;
}
