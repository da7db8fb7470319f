/* ctl_dead.c - ferryctl dead: list, show, replay and purge the dead-letter
 * entries of a queue (their format: dead_entry in src/lua/common.lua),
 * naming jobs by id. Entries are matched and removed by their exact bytes;
 * a purge deletes the cache keys of the purged jobs too (they were made
 * persistent when the jobs died). */
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cache.h"
#include "ctl.h"
#include "job.h"
#include "util.h"

#define LAST_ERROR_SHOWN 60     /* bytes of last_error in `dead list` */

struct match {
	char *el;               /* the entry, exact bytes */
	size_t el_len;
	char *job;              /* its "job" string, or NULL */
	size_t job_len;
};

struct dead_cmd {
	struct ctl *c;
	const struct queue_config *q;
	struct queue_keys k;
	const char *sub;        /* list, show, retry, purge */
	const char *id;         /* NULL with --all */
	size_t found;
	struct match *matches;
	size_t nmatches, cap;
};

typedef int (*entry_fn)(struct dead_cmd *, const redisReply *, json_t *);

/* An entry as a JSON object, or NULL after a warning. */
static json_t *
entry_load(struct dead_cmd *d, const char *el, size_t len, long index)
{
	json_error_t err;
	json_t *doc = json_loadb(el, len, JSON_ALLOW_NUL, &err);

	if (json_is_object(doc))
		return doc;
	json_decref(doc);
	fprintf(stderr, "ferryctl: the dead entry of queue %s at LINDEX %ld is "
	    "not a JSON object (%s): it has no id, skipped; `dead purge %s "
	    "--all` removes it\n", d->q->name, index,
	    doc == NULL ? err.text : "another JSON value", d->q->name);
	return NULL;
}

/* The job's id: the entry's "id", else the one a worker gives its "job". */
static void
entry_id(const struct dead_cmd *d, json_t *doc, char out[JOB_ID_MAX + 1])
{
	json_t *id = json_object_get(doc, "id"), *raw = json_object_get(doc, "job");
	struct job j;

	out[0] = '\0';
	if (json_is_string(id) && json_string_length(id) > 0) {
		snprintf(out, JOB_ID_MAX + 1, "%s", json_string_value(id));
	} else if (json_is_integer(id)) {
		snprintf(out, JOB_ID_MAX + 1, "%lld",
		    (long long)json_integer_value(id));
	} else if (json_is_string(raw)) {
		job_parse(&j, json_string_value(raw), json_string_length(raw),
		    d->q->max_job_bytes);
		memcpy(out, j.id, sizeof(j.id));
		job_free(&j);
	}
}

static bool
entry_matches(const struct dead_cmd *d, json_t *doc)
{
	char id[JOB_ID_MAX + 1];

	if (d->id == NULL)
		return true;
	entry_id(d, doc, id);
	return strcmp(id, d->id) == 0;
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
			const redisReply *el = r->element[i];
			json_t *doc = entry_load(d, el->str, el->len,
			    start + (long)i);
			if (doc != NULL)
				rc = fn(d, el, doc);
			json_decref(doc);
		}
		n = r->elements;
		freeReplyObject(r);
	}
	return rc;
}

/* s on one line (control characters as blanks), cut after max bytes at a
 * character boundary. */
static void
print_text(const char *s, size_t max)
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
print_time(json_t *t)
{
	long long ms = json_integer_value(t);
	time_t sec = (time_t)(ms / 1000);
	struct tm tm;
	char buf[32];

	if (!json_is_integer(t) || gmtime_r(&sec, &tm) == NULL ||
	    strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm) == 0) {
		fputs("-", stdout);
		return;
	}
	printf("%s.%03dZ", buf, (int)(ms % 1000));
}

static int
list_one(struct dead_cmd *d, const redisReply *el, json_t *doc)
{
	const char *reason = json_string_value(json_object_get(doc, "reason"));
	const char *last = json_string_value(json_object_get(doc,
	    "last_error"));
	char id[JOB_ID_MAX + 1];

	(void)el;
	entry_id(d, doc, id);
	print_text(id[0] != '\0' ? id : "-", JOB_ID_MAX);
	putchar('\t');
	print_time(json_object_get(doc, "time"));
	printf("\t%lld\t%lld\t",
	    (long long)json_integer_value(json_object_get(doc, "attempts")),
	    (long long)json_integer_value(json_object_get(doc, "recoveries")));
	print_text(reason != NULL ? reason : "-", 500);
	putchar('\t');
	print_text(last != NULL ? last : "-", LAST_ERROR_SHOWN);
	putchar('\n');
	d->found++;
	return 0;
}

static int
show_one(struct dead_cmd *d, const redisReply *el, json_t *doc)
{
	(void)el;
	if (!entry_matches(d, doc))
		return 0;
	json_dumpf(doc, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	putchar('\n');
	d->found++;
	return 0;
}

static int
collect_one(struct dead_cmd *d, const redisReply *el, json_t *doc)
{
	json_t *raw = json_object_get(doc, "job");
	struct match *m;

	if (!entry_matches(d, doc))
		return 0;
	if (d->nmatches == d->cap) {
		d->cap = d->cap ? d->cap * 2 : 16;
		d->matches = xrealloc(d->matches, d->cap * sizeof(*d->matches));
	}
	m = &d->matches[d->nmatches++];
	m->el = xmalloc(el->len);
	memcpy(m->el, el->str, el->len);
	m->el_len = el->len;
	m->job = NULL;
	if (json_is_string(raw)) {
		m->job_len = json_string_length(raw);
		m->job = xmalloc(m->job_len + 1);
		memcpy(m->job, json_string_value(raw), m->job_len);
	}
	d->found++;
	return 0;
}

/* dead_retry.lua on one entry: *replayed + 1, or + 0 when it is gone. */
static int
retry_one(struct dead_cmd *d, const char *el, size_t len, const char *job,
    size_t job_len, long long *replayed)
{
	const char *argv[5] = { d->k.dead, d->k.ready, d->k.stats, el, job };
	size_t lens[5] = { strlen(d->k.dead), strlen(d->k.ready),
	    strlen(d->k.stats), len, job_len };
	redisReply *r = queue_script(d->c->rc, LUA_DEAD_RETRY, 3, 5, argv, lens);

	if (!ctl_reply_ok(r) || r->type != REDIS_REPLY_INTEGER)
		return ctl_redis_fail(d->c, "replaying a dead entry", r);
	*replayed += r->integer;
	freeReplyObject(r);
	return 0;
}

/* The entry at the right end of this LRANGE reply is the oldest. */
static int
retry_chunk(struct dead_cmd *d, redisReply *r, long *skipped,
    long long *replayed)
{
	int rc = 0;

	for (size_t i = r->elements; i-- > 0 && rc == 0; ) {
		const redisReply *el = r->element[i];
		json_t *doc = entry_load(d, el->str, el->len, -1 - *skipped);
		json_t *raw = json_object_get(doc, "job");
		if (json_is_string(raw))
			rc = retry_one(d, el->str, el->len, json_string_value(raw),
			    json_string_length(raw), replayed);
		else
			(*skipped)++;   /* stays where it is */
		if (doc != NULL && !json_is_string(raw))
			fprintf(stderr, "ferryctl: the dead entry of queue %s at "
			    "LINDEX %ld has no \"job\" string: skipped\n",
			    d->q->name, -*skipped);
		json_decref(doc);
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
		if (m->job == NULL)
			fprintf(stderr, "ferryctl: a dead entry of job %s has no "
			    "\"job\" string; it cannot be replayed, only purged\n",
			    d->id);
		else
			rc = retry_one(d, m->el, m->el_len, m->job, m->job_len,
			    replayed);
	}
	return rc;
}

/* DEL the cache key that the job of match m names, if any and if it is
 * in the queue's cache space (cache_key_allowed): never another key. */
static int
purge_cache_key(struct dead_cmd *d, const struct match *m)
{
	redisReply *r = NULL;
	struct job j;

	if (m->job == NULL)
		return 0;
	job_parse(&j, m->job, m->job_len, 0);
	if (j.cache_key != NULL && cache_key_allowed(j.cache_key,
	    d->c->cfg->redis_prefix, d->q))
		r = redisCommand(d->c->rc, "DEL %s", j.cache_key);
	job_free(&j);
	if (r != NULL && !ctl_reply_ok(r))
		return ctl_redis_fail(d->c, "DEL of a cache key", r);
	freeReplyObject(r);
	return 0;
}

static int
purge_matches(struct dead_cmd *d, long long *purged)
{
	int rc = 0;

	for (size_t i = 0; i < d->nmatches && rc == 0; i++) {
		struct match *m = &d->matches[i];
		redisReply *r = redisCommand(d->c->rc, "LREM %s 1 %b", d->k.dead,
		    m->el, m->el_len);
		if (!ctl_reply_ok(r) || r->type != REDIS_REPLY_INTEGER)
			return ctl_redis_fail(d->c, "LREM of a dead entry", r);
		*purged += r->integer;
		if (r->integer > 0)
			rc = purge_cache_key(d, m);
		freeReplyObject(r);
	}
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
		rc = purge_cache_key(d, &d->matches[i]);
	return rc;
}

static int
not_found(const struct dead_cmd *d)
{
	fprintf(stderr, "ferryctl: no dead job with id \"%s\" in queue %s (see "
	    "`ferryctl dead list %s`)\n", d->id, d->q->name, d->q->name);
	return CTL_EX_NOTFOUND;
}

static int
run_retry(struct dead_cmd *d)
{
	long long replayed = 0;
	int rc;

	if (d->id == NULL)
		rc = retry_all(d, &replayed);
	else if ((rc = scan(d, collect_one)) == 0 && d->found == 0)
		return not_found(d);
	else if (rc == 0)
		rc = retry_matches(d, &replayed);
	if (rc != 0)
		return rc;
	printf("replayed %lld job%s to queue %s\n", replayed,
	    replayed == 1 ? "" : "s", d->q->name);
	if (d->id != NULL && replayed == 0)
		fprintf(stderr, "ferryctl: the dead entries of job %s were gone "
		    "before they could be replayed (another ferryctl?)\n", d->id);
	return d->id != NULL && replayed == 0 ? CTL_EX_NOTFOUND : 0;
}

static int
run_purge(struct dead_cmd *d)
{
	long long purged = 0;
	int rc;

	if (d->id == NULL)
		rc = purge_all(d, &purged);
	else if ((rc = scan(d, collect_one)) == 0 && d->found == 0)
		return not_found(d);
	else if (rc == 0)
		rc = purge_matches(d, &purged);
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
		return rc == 0 && d->found == 0 ? not_found(d) : rc;
	}
	return strcmp(d->sub, "retry") == 0 ? run_retry(d) : run_purge(d);
}

/* dead SUB QUEUE [ID|--all]; which subcommands take what. */
static int
parse_args(struct dead_cmd *d, int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "all", no_argument, NULL, 'a' },
		{ NULL, 0, NULL, 0 },
	};
	int ch, all = 0, n;
	bool id_cmd;

	optind = 0;
	while ((ch = getopt_long(argc, argv, "", longopts, NULL)) != -1)
		if (ch != 'a')
			return -1;
		else
			all = 1;
	if ((n = argc - optind) < 2)
		return -1;
	d->sub = argv[optind];
	id_cmd = strcmp(d->sub, "retry") == 0 || strcmp(d->sub, "purge") == 0;
	if (strcmp(d->sub, "list") == 0 && n == 2 && !all)
		return optind + 1;
	if ((strcmp(d->sub, "show") == 0 || strcmp(d->sub, "restore") == 0) &&
	    n == 3 && !all)
		d->id = argv[optind + 2];     /* restore: the archive file */
	else if (id_cmd && n == 3 && !all)
		d->id = argv[optind + 2];
	else if (!(id_cmd && n == 2 && all))
		return -1;
	return optind + 1;
}

/* ferryctl dead list|show|retry|purge QUEUE [ID|--all], restore QUEUE FILE */
int
ctl_dead(struct ctl *c, int argc, char **argv)
{
	struct dead_cmd d = { .c = c };
	int at = parse_args(&d, argc, argv), rc;

	if (at < 0) {
		fprintf(stderr, "usage: ferryctl dead list QUEUE\n"
		    "       ferryctl dead show QUEUE ID\n"
		    "       ferryctl dead retry|purge QUEUE ID|--all\n"
		    "       ferryctl dead restore QUEUE ARCHIVE_FILE\n");
		return CTL_EX_USAGE;
	}
	if ((d.q = ctl_queue(c, argv[at])) == NULL)
		return CTL_EX_USAGE;
	if (strcmp(d.sub, "restore") == 0)
		return ctl_dead_restore(c, d.q, d.id);
	if (ctl_redis(c) == NULL)
		return CTL_EX_UNAVAILABLE;
	queue_keys_init(&d.k, c->cfg->redis_prefix, d.q->name);
	rc = run(&d);
	for (size_t i = 0; i < d.nmatches; i++) {
		free(d.matches[i].el);
		free(d.matches[i].job);
	}
	free(d.matches);
	return rc;
}
