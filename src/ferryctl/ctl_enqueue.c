/* ctl_enqueue.c - ferryctl enqueue: check every job the way a worker will
 * (job_parse), so that one bad line pushes nothing; split big "data"
 * arrays and move data into cache keys (chunk.c); then send each chunk of
 * ctl_push.c through src/redis/lua/enqueue.lua (the producers' one enqueue: the
 * same checks again, memory_refuse_percent, the cache keys SET with their
 * TTL and the LPUSH), and print ids. A chunk goes in whole or not at all.
 * --delay and --at (due_time.c) pass a due marker: enqueue.lua keeps jobs
 * not yet due in the scheduled set, by the Redis clock. --wait then waits
 * for the jobs' outcomes (ctl_wait.c). */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cache.h"
#include "chunk.h"
#include "ctl.h"
#include "due_time.h"
#include "job.h"
#include "lua_scripts.h"
#include "queue.h"
#include "util.h"
#include "wrapper.h"

#define MAX_REPORTED 10                 /* bad lines named before a summary */

struct line {
	size_t off, len;        /* the job's bytes in input.buf */
	size_t lineno;
};

struct input {
	char *buf;
	size_t len;
	struct line *lines;
	size_t n, cap;
	bool from_stdin;
	struct chunk_jobs jobs; /* what is pushed */
};

struct options {
	bool quiet;
	int chunk_rows;         /* 0: the queue's */
	bool cache;             /* --cache: data into cache keys */
	char due[32];           /* "delay=MS" or "at=MS" (enqueue.lua); "" */
	bool wait;              /* --wait: for the jobs' outcomes */
	long long wait_ms;      /* --wait's TIMEOUT; -1: no limit */
};

static void
input_free(struct input *in)
{
	if (in->from_stdin)
		free(in->buf);
	free(in->lines);
	chunk_jobs_free(&in->jobs);
}

static int
read_stdin(struct input *in)
{
	size_t cap = 1 << 16;
	ssize_t n;

	in->buf = xmalloc(cap);
	while ((n = read(STDIN_FILENO, in->buf + in->len, cap - in->len)) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			fprintf(stderr, "ferryctl: cannot read standard input: %s\n",
			    strerror(errno));
			return -1;
		}
		in->len += (size_t)n;
		if (in->len == cap)
			in->buf = xrealloc(in->buf, cap *= 2);
	}
	return 0;
}

static bool
blank(const char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != ' ' && p[i] != '\t')
			return false;
	return true;
}

static void
add_line(struct input *in, size_t off, size_t len, size_t lineno)
{
	if (len > 0 && in->buf[off + len - 1] == '\r')
		len--;
	if (blank(in->buf + off, len))
		return;
	if (in->n == in->cap) {
		in->cap = in->cap ? in->cap * 2 : 1024;
		in->lines = xrealloc(in->lines, in->cap * sizeof(*in->lines));
	}
	in->lines[in->n++] = (struct line){ off, len, lineno };
}

static void
split_lines(struct input *in)
{
	size_t off = 0, lineno = 1;

	while (off < in->len) {
		char *nl = memchr(in->buf + off, '\n', in->len - off);
		size_t len = nl != NULL ? (size_t)(nl - in->buf) - off :
		    in->len - off;
		add_line(in, off, len, lineno++);
		off += len + 1;
	}
}

static void
report(const struct input *in, const struct line *l, const char *id,
    const char *why)
{
	if (in->from_stdin && id != NULL)
		fprintf(stderr, "ferryctl: stdin line %zu: job %s: %s\n",
		    l->lineno, id, why);
	else if (in->from_stdin)
		fprintf(stderr, "ferryctl: stdin line %zu: %s\n", l->lineno, why);
	else
		fprintf(stderr, "ferryctl: the job is not valid: %s\n", why);
}

/* The size of a cache value as the worker hands it on: a JSON string (the
 * value is JSON text, so only '"' and '\\' need escaping). */
static size_t
cache_json_len(const struct chunk_job *cj)
{
	size_t n = cj->cache_len + 2;

	for (size_t i = 0; i < cj->cache_len; i++)
		n += cj->cache[i] == '"' || cj->cache[i] == '\\';
	return n;
}

/* The jobs of one valid line (chunks, cache values), each checked again
 * as a worker will see it; 0, or -1 after a message. */
static int
expand(struct input *in, const struct line *l, const char *id,
    const struct ctl *c, const struct queue_config *q,
    const char *cache_prefix, int chunk_rows, bool say)
{
	size_t first = in->jobs.n;
	char err[256], why[256];
	struct job j;

	if (chunk_document(in->buf + l->off, l->len, id, chunk_rows,
	    cache_prefix, &in->jobs, err, sizeof(err)) == -1) {
		if (say)
			report(in, l, NULL, err);
		return -1;
	}
	for (size_t i = first; i < in->jobs.n; i++) {
		struct chunk_job *cj = &in->jobs.v[i];
		job_parse(&j, cj->el, cj->el_len, q->max_job_bytes);
		/* a job without an id of its own is named by its digest */
		cj->has_id = strcmp(j.id, j.digest) != 0;
		/* what binds a key of ferry's own, or a held id, to this job */
		if (cj->key != NULL || (cj->has_id &&
		    q->idempotency_window_ms > 0))
			memcpy(cj->sha, job_digest(&j), sizeof(cj->sha));
		if (cj->key == NULL && j.cache_key != NULL)
			cj->named_key = xstrdup(j.cache_key);
		snprintf(why, sizeof(why), "%s", j.invalid ? j.invalid : "");
		/* the worker dead-letters a job naming any other key */
		if (j.invalid == NULL && j.cache_key != NULL &&
		    !cache_key_allowed(j.cache_key, c->cfg->redis_prefix, q))
			cache_key_refusal(why, sizeof(why), j.cache_key,
			    c->cfg->redis_prefix, q->name);
		else if (j.invalid == NULL && cj->cache != NULL &&
		    cache_json_len(cj) > (size_t)q->max_job_bytes)
			snprintf(why, sizeof(why), "its data is %zu bytes as a JSON "
			    "string, over max_job_bytes %ld", cache_json_len(cj),
			    q->max_job_bytes);
		job_free(&j);
		if (why[0] != '\0') {
			if (say)
				report(in, l, cj->id, why);
			return -1;
		}
	}
	return 0;
}

/* ferry's own wrapper starts {"ferry":1, and lives only in ferry's lists:
 * a producer's document that starts so is still a document to ferry (it
 * is never trusted as metadata), but one pushed by hand is almost surely
 * a wrapper copied out of ferry, so it is refused. */
#define WRAPPER_REFUSED "it starts with {\"ferry\":1, the prefix of " \
	"ferry's own wrapper format (doc/formats.md), which producers may not " \
	"use: push the job's document itself"

/* Every job as a worker will see it; returns the number of bad lines. */
static size_t
validate(struct input *in, const struct ctl *c, const struct queue_config *q,
    const char *cache_prefix, int chunk_rows)
{
	size_t bad = 0;
	struct job j;

	for (size_t i = 0; i < in->n; i++) {
		struct line *l = &in->lines[i];
		if (wrapper_looks_like(in->buf + l->off, l->len)) {
			if (++bad <= MAX_REPORTED)
				report(in, l, NULL, WRAPPER_REFUSED);
			continue;
		}
		job_parse(&j, in->buf + l->off, l->len, q->max_job_bytes);
		if (j.invalid != NULL && ++bad <= MAX_REPORTED)
			report(in, l, NULL, j.invalid);
		if (j.invalid == NULL && expand(in, l, j.id, c, q, cache_prefix,
		    chunk_rows, bad < MAX_REPORTED) == -1)
			bad++;
		job_free(&j);
	}
	if (bad > MAX_REPORTED)
		fprintf(stderr, "ferryctl: ... and %zu more invalid lines\n",
		    bad - MAX_REPORTED);
	return bad;
}

/* What enqueue.lua said about one chunk: 0, or the exit code after a
 * message. The checks it makes again were made here already, so INVALID
 * means the two disagree (a bug: say what it refused). Redis refused the
 * script at maxmemory (OOM, before it could look): memory.lua says how
 * full, naming the queue's bytes, as the script would have. */
static int
chunk_result(struct ctl *c, const char *queue, redisReply *r, bool *lost,
    bool *already, size_t n)
{
	int pct, limit, at = 0;

	if (r == NULL) {
		*lost = true;
		return ctl_redis_fail(c, "LPUSH of the jobs", NULL);
	}
	if (r->type == REDIS_REPLY_ARRAY && r->elements >= 2 &&
	    r->element[1]->type == REDIS_REPLY_STRING) {
		if (r->element[1]->len > 0)
			ctl_memory_unchecked(c, r->element[1]->str);
		/* the jobs already accepted (from 1): not pushed again */
		for (size_t i = 0; r->elements >= 3 && r->element[2]->type ==
		    REDIS_REPLY_ARRAY && i < r->element[2]->elements; i++) {
			long long at = r->element[2]->element[i]->integer;
			if (at >= 1 && (size_t)at <= n)
				already[at - 1] = true;
		}
		freeReplyObject(r);
		return 0;
	}
	if (r->type == REDIS_REPLY_ERROR &&
	    sscanf(r->str, "FULL %d %d %n", &pct, &limit, &at) == 2 && at > 0) {
		int rc = ctl_memory_full(c, r->str + at);
		freeReplyObject(r);
		return rc;
	}
	bool oom = r->type == REDIS_REPLY_ERROR && strncmp(r->str, "OOM", 3) == 0;
	if (oom && ctl_memory_allows(c, queue) != 0) {
		freeReplyObject(r);
		return CTL_EX_TEMPFAIL;
	}
	bool invalid = r->type == REDIS_REPLY_ERROR &&
	    strncmp(r->str, "INVALID", 7) == 0;
	/* a key the application wrote, gone (evicted, expired) before its
	 * job came: only Redis can tell, so ferryctl could not check it */
	bool gone = invalid && strstr(r->str, " does not exist: write the key "
	    "before the job") != NULL;
	/* a document the queue holds in other chunks: only Redis knows */
	gone = gone || (invalid && strstr(r->str, "sent before in other "
	    "chunks") != NULL);
	fprintf(stderr, "ferryctl: redis at %s: LPUSH of the jobs failed: %s%s\n",
	    c->addr, r->type == REDIS_REPLY_ERROR ? r->str : "unexpected reply "
	    "from enqueue.lua", oom ? " (redis is full: drain the queue or raise "
	    "maxmemory)" : invalid && !gone ? " (enqueue.lua refused a job "
	    "ferryctl accepted: please report it)" : "");
	freeReplyObject(r);
	return oom ? CTL_EX_TEMPFAIL : invalid ? CTL_EX_DATAERR :
	    CTL_EX_UNAVAILABLE;
}

struct script_args {
	const char **v;
	size_t *len;
	size_t n;
};

static void
arg(struct script_args *a, const char *p, size_t len)
{
	a->v[a->n] = p;
	a->len[a->n++] = len;
}

/* Jobs [from, to) through enqueue.lua, in one atomic step (the same checks
 * again, the memory check, the cache keys written or protected, the
 * LPUSH). KEYS: ready, [scheduled,] [protected, the cache keys];
 * ARGV: max_job_bytes, memory_refuse_percent, the options ("checked", the
 * due marker, a "prefix=P" per cache_key_prefixes item, "ids" when the
 * queue keeps ids), then per job: element, K (the index of the key it
 * writes, -K of the key it names, 0), value, binding (its SHA-1 and
 * layout, where the script needs them)[, id]. On a queue that keeps
 * ids, a call whose reply was lost is sent again (ctl_script_resent): the
 * jobs it had pushed come back as already accepted (already[i - from]). */
static int
push_chunk(struct ctl *c, const struct queue_config *q,
    const struct queue_keys *k, const struct input *in, size_t from,
    size_t to, const char *due, bool *lost, bool *already)
{
	size_t n = to - from, nkeys, nopts;
	bool ids = q->idempotency_window_ms > 0;
	size_t cap = 6 * n + 9 + CONFIG_CACHE_PREFIXES;
	struct script_args a = { xmalloc(cap * sizeof(*a.v)),
	    xmalloc(cap * sizeof(*a.len)), 0 };
	char (*num)[24] = xmalloc((n + 3) * sizeof(*num));
	char (*bind)[sizeof(in->jobs.v[0].sha) + sizeof(in->jobs.v[0].layout)] =
	    xmalloc((n > 0 ? n : 1) * sizeof(*bind));
	char (*opt)[CONFIG_CACHE_PREFIX_MAX + 8] =
	    xmalloc(CONFIG_CACHE_PREFIXES * sizeof(*opt));
	const char *cur = q->cache_key_prefixes, *item;
	size_t len;
	redisReply *r;

	arg(&a, k->ready, strlen(k->ready));
	if (*due != '\0')
		arg(&a, k->scheduled, strlen(k->scheduled));
	size_t first_cache = a.n + 2;    /* 1-based, after protected */
	for (size_t i = from; i < to; i++) {
		const struct chunk_job *j = &in->jobs.v[i];
		if (j->key != NULL || j->named_key != NULL) {
			arg(&a, k->protected, strlen(k->protected));
			break;
		}
	}
	for (size_t i = from; i < to; i++) {
		const struct chunk_job *j = &in->jobs.v[i];
		const char *key = j->key != NULL ? j->key : j->named_key;
		if (key != NULL)
			arg(&a, key, strlen(key));
	}
	nkeys = a.n;
	snprintf(num[0], sizeof(num[0]), "%ld", q->max_job_bytes);
	snprintf(num[1], sizeof(num[1]), "%d", c->cfg->memory_refuse_percent);
	arg(&a, num[0], strlen(num[0]));
	arg(&a, num[1], strlen(num[1]));
	size_t nopts_at = a.n;
	arg(&a, "", 0);                 /* the count, below */
	/* every job was parsed here as a worker will (validate): the script
	 * need not decode it again (6 us a job of Redis' time) */
	arg(&a, "checked", 7);
	if (*due != '\0')
		arg(&a, due, strlen(due));
	if (ids)
		arg(&a, "ids", 3);
	for (nopts = 0; cur != NULL && config_list_next(&cur, &item, &len) &&
	    nopts < CONFIG_CACHE_PREFIXES; nopts++) {
		snprintf(opt[nopts], sizeof(opt[nopts]), "prefix=%.*s", (int)len,
		    item);
		arg(&a, opt[nopts], strlen(opt[nopts]));
	}
	snprintf(num[2], sizeof(num[2]), "%zu", a.n - nopts_at - 1);
	a.v[nopts_at] = num[2];
	a.len[nopts_at] = strlen(num[2]);
	/* the cache keys follow protected in KEYS */
	for (size_t i = from, key = first_cache - 1; i < to; i++) {
		const struct chunk_job *j = &in->jobs.v[i];
		char *index = num[3 + i - from];
		if (j->key != NULL)
			snprintf(index, sizeof(num[0]), "%zu", ++key);
		else if (j->named_key != NULL)
			snprintf(index, sizeof(num[0]), "-%zu", ++key);
		else
			snprintf(index, sizeof(num[0]), "0");
		arg(&a, j->el, j->el_len);
		arg(&a, index, strlen(index));
		arg(&a, j->cache != NULL ? j->cache : "", j->cache_len);
		char *b = bind[i - from];
		snprintf(b, sizeof(bind[0]), "%s%s", j->sha,
		    j->sha[0] != '\0' ? j->layout : "");
		arg(&a, b, strlen(b));
		if (ids)        /* only a job's own id makes it the same job */
			arg(&a, j->has_id ? j->id : "", j->has_id ?
			    strlen(j->id) : 0);
	}
	/* no counter here: fetch.lua counts `enqueued` for every producer */
	r = ctl_script_resent(c, q->name, ids, LUA_ENQUEUE, (int)nkeys,
	    (int)a.n, a.v, a.len, "the push of the jobs");
	free(a.v);
	free(a.len);
	free(num);
	free(bind);
	free(opt);
	return chunk_result(c, q->name, r, lost, already, n);
}

/* With redis_wait_replicas: WAIT until that many replicas have the jobs.
 * Fewer within redis_wait_timeout: the jobs are in the queue, but a
 * failover now would lose them. Not pushed again (if they did arrive,
 * that would enqueue them twice): said, with exit CTL_EX_UNREPLICATED. */
static int
replicated(struct ctl *c, const struct queue_config *q, size_t total)
{
	int want = c->cfg->redis_wait_replicas;
	redisReply *r;
	long long got;

	if (want == 0 || total == 0)
		return 0;
	r = redisCommand(c->rc, "WAIT %d %ld", want,
	    c->cfg->redis_wait_timeout_ms);
	if (r == NULL || r->type != REDIS_REPLY_INTEGER)
		return ctl_redis_fail(c, "WAIT for the replicas", r);
	got = r->integer;
	freeReplyObject(r);
	if (got >= want)
		return 0;
	fprintf(stderr, "ferryctl: %zu job%s %s in queue %s, but reached %lld of "
	    "%d replicas within redis_wait_timeout (%ld ms): a failover now "
	    "would lose %s. Not pushed again (that could enqueue %s twice): "
	    "check the replicas (INFO replication on %s)\n", total,
	    total == 1 ? "" : "s", total == 1 ? "is" : "are", q->name, got, want,
	    c->cfg->redis_wait_timeout_ms, total == 1 ? "it" : "them",
	    total == 1 ? "it" : "them", c->addr);
	return CTL_EX_UNREPLICATED;
}

/* What the chunks of push_all send: the jobs from `from` on. */
struct enqueue_chunk {
	struct ctl *c;
	const struct queue_config *q;
	const struct queue_keys *k;
	const struct input *in;
	const struct options *o;
	size_t from;
	bool lost;              /* the connection failed: the last one maybe */
	size_t already;         /* jobs the queue had accepted already */
};

/* ctl_push_send_fn: the next n jobs in one transaction, then their ids. */
static int
send_chunk(void *arg, size_t n, long long *went)
{
	struct enqueue_chunk *s = arg;
	size_t from = s->from, to = from + n;
	bool *already = xcalloc(n + 1, sizeof(*already));
	int rc = push_chunk(s->c, s->q, s->k, s->in, from, to, s->o->due,
	    &s->lost, already);

	if (rc != 0) {
		free(already);
		return rc;
	}
	*went = (long long)n;
	s->from = to;
	for (size_t i = from; i < to; i++) {
		s->already += already[i - from];
		if (!s->o->quiet && !s->o->wait)
			printf("%s%s\n", s->in->jobs.v[i].id, already[i - from] ?
			    " already accepted" : "");
	}
	free(already);
	return 0;
}

/* The queue keeps ids (idempotency_window) from its first job on, also
 * before any ferryd has published the setting (ids.lua, which owns it;
 * an ACL that refuses the write leaves that to ferryd). */
static void
publish_window(struct ctl *c, const struct queue_keys *k,
    const struct queue_config *q)
{
	redisReply *r = redisCommand(c->rc, "HSETNX %s idempotency_window %ld",
	    k->config, q->idempotency_window_ms);

	if (r != NULL)
		freeReplyObject(r);
}

static int
push_all(struct ctl *c, const struct queue_config *q, const struct input *in,
    const struct options *o)
{
	size_t total = in->jobs.n;
	struct queue_keys k;
	struct enqueue_chunk s = { c, q, &k, in, o, 0, false, 0 };
	struct ctl_push p = { .c = c, .queue = q->name, .script_checks = true,
	    .verb = "pushed", .total = (long long)total,
	    .progress = total > CTL_CHUNK && ctl_progress_wanted(o->quiet) };
	int rc = 0;

	queue_keys_init(&k, c->cfg->redis_prefix, q->name);
	if (q->idempotency_window_ms > 0 && c->rc != NULL)
		publish_window(c, &k, q);
	for (size_t i = 0; i < total && rc == 0; i++) {
		size_t bytes = in->jobs.v[i].el_len + in->jobs.v[i].cache_len;
		if (ctl_push_full(&p, bytes))
			rc = ctl_push_flush(&p, send_chunk, &s);
		ctl_push_add(&p, bytes);
	}
	if (rc == 0)
		rc = ctl_push_flush(&p, send_chunk, &s);
	ctl_push_end(&p);
	if (s.already > 0)
		fprintf(stderr, "ferryctl: %zu of %zu jobs were accepted by queue %s "
		    "already (idempotency_window: their ids are held while they "
		    "live and for %ld ms after): not pushed again\n", s.already,
		    total, q->name, q->idempotency_window_ms);
	if (rc == 0)
		return replicated(c, q, total);
	for (size_t i = 0; o->wait && !o->quiet && i < s.from; i++)
		printf("%s\n", in->jobs.v[i].id);
	if (p.done == 0 && !s.lost)
		fprintf(stderr, "ferryctl: nothing was pushed to queue %s\n",
		    q->name);
	else
		fprintf(stderr, "ferryctl: %lld of %zu jobs were pushed to queue %s "
		    "in %ld whole transaction%s (their ids are on stdout)%s; the "
		    "others were not\n", p.done, total, q->name, p.chunks,
		    p.chunks == 1 ? "" : "s", s.lost ? ", the next one maybe" : "");
	return rc;
}

/* A positive number (--chunk-rows, --cache-ttl) within max, or -1. */
static long
positive(const char *s, long max)
{
	char *end;
	long v = strtol(s, &end, 10);

	return *s != '\0' && *end == '\0' && v >= 1 && v <= max ? v : -1;
}

static int
parse_args(int argc, char **argv, struct options *o)
{
	static const struct option longopts[] = {
		{ "quiet", no_argument, NULL, 'q' },
		{ "cache", no_argument, NULL, 'C' },
		{ "cache-ttl", required_argument, NULL, 't' },
		{ "chunk-rows", required_argument, NULL, 'r' },
		{ "delay", required_argument, NULL, 'd' },
		{ "at", required_argument, NULL, 'a' },
		{ "wait", optional_argument, NULL, 'w' },
		{ NULL, 0, NULL, 0 },
	};
	char err[256];
	long long ms;
	long v;
	int ch;

	optind = 0;
	while ((ch = getopt_long(argc, argv, "q", longopts, NULL)) != -1) {
		if (ch == 'q')
			o->quiet = true;
		else if (ch == 'C')
			o->cache = true;
		else if (ch == 't' && positive(optarg, 365L * 86400) > 0) {
			/* a key has no TTL while its job lives: the TTL is
			 * the orphan sweep's (cache_ttl), not a call's */
			fprintf(stderr, "ferryctl: --cache-ttl is obsolete: cache "
			    "keys carry no TTL while their job lives (a key left "
			    "without a job is removed after cache_ttl); taken as "
			    "--cache\n");
			o->cache = true;
		}
		else if (ch == 'r' && (v = positive(optarg, 1000000)) > 0)
			o->chunk_rows = (int)v;
		else if ((ch == 'd' || ch == 'a') && o->due[0] != '\0') {
			fprintf(stderr, "ferryctl: give one of --delay and --at, "
			    "once\n");
			return -1;
		} else if ((ch == 'd' || ch == 'a') && (ch == 'd' ?
		    due_time_parse_delay(optarg, &ms, err, sizeof(err)) :
		    due_time_parse_at(optarg, &ms, err, sizeof(err))) == -1) {
			fprintf(stderr, "ferryctl: %s\n", err);
			return -1;
		} else if (ch == 'd' || ch == 'a')
			snprintf(o->due, sizeof(o->due), "%s=%lld",
			    ch == 'd' ? "delay" : "at", ms);
		else if (ch == 'w' && optarg != NULL &&
		    due_time_parse_delay(optarg, &o->wait_ms, err,
		    sizeof(err)) == -1) {
			fprintf(stderr, "ferryctl: --wait: %s\n", err);
			return -1;
		} else if (ch == 'w')
			o->wait = true;
		else
			return -1;
	}
	return argc - optind == 2 ? optind : -1;
}

/* `--wait TIMEOUT` as `--wait=TIMEOUT` when TIMEOUT reads as a duration
 * (getopt takes an optional argument only after '='); argv is changed in
 * place, the joined text kept in `joined`. */
static void
join_wait_timeout(int *argc, char **argv, char *joined, size_t size)
{
	long long ms;
	char err[128];

	for (int i = 1; i + 1 < *argc; i++) {
		if (strcmp(argv[i], "--wait") != 0 || due_time_parse_delay(
		    argv[i + 1], &ms, err, sizeof(err)) == -1)
			continue;
		snprintf(joined, size, "--wait=%s", argv[i + 1]);
		argv[i] = joined;
		memmove(&argv[i + 1], &argv[i + 2], (size_t)(*argc - i - 2) *
		    sizeof(*argv));
		(*argc)--;
		return;
	}
}

static int
load_input(struct input *in, char *arg)
{
	if (strcmp(arg, "-") != 0) {
		in->buf = arg;
		in->len = strlen(arg);
		add_line(in, 0, in->len, 1);
		if (in->n == 0)
			fprintf(stderr, "ferryctl: the job is empty; pass a JSON "
			    "object, or - to read jobs from stdin\n");
		return in->n == 0 ? CTL_EX_DATAERR : 0;
	}
	in->from_stdin = true;
	if (read_stdin(in) == -1)
		return CTL_EX_IOERR;
	split_lines(in);
	return 0;
}

/* --wait reads each job's outcome by its id, which the queue keeps only
 * with an idempotency_window, and only for jobs with an id of their own. */
static int
waitable(const struct input *in, const struct queue_config *q)
{
	if (q->idempotency_window_ms == 0) {
		fprintf(stderr, "ferryctl: --wait: queue %s keeps no ids, so the "
		    "jobs' outcomes cannot be read: set idempotency_window in "
		    "[queue %s] (for example 10m) and reload ferryd\n", q->name,
		    q->name);
		return -1;
	}
	for (size_t i = 0; i < in->jobs.n; i++)
		if (!in->jobs.v[i].has_id) {
			fprintf(stderr, "ferryctl: --wait: a job has no \"id\" "
			    "(%.60s...): each job needs an id of its own to be "
			    "waited for; nothing was pushed to queue %s\n",
			    in->jobs.v[i].el, q->name);
			return -1;
		}
	return 0;
}

static int
check_and_push(struct ctl *c, const struct queue_config *q,
    struct input *in, const struct options *o)
{
	char prefix[QUEUE_KEY_MAX];
	size_t bad;

	snprintf(prefix, sizeof(prefix), "%s:{%s}:cache:", c->cfg->redis_prefix,
	    q->name);
	in->jobs.key_seed = ctl_random64();
	if ((bad = validate(in, c, q, o->cache ? prefix : NULL,
	    o->chunk_rows > 0 ? o->chunk_rows : q->chunk_rows)) > 0) {
		fprintf(stderr, "ferryctl: %zu invalid job%s; nothing was pushed "
		    "to queue %s\n", bad, bad == 1 ? "" : "s", q->name);
		return CTL_EX_DATAERR;
	}
	if (o->wait && waitable(in, q) == -1)
		return CTL_EX_USAGE;
	if (ctl_redis_for(c, q->name) == NULL)
		return CTL_EX_UNAVAILABLE;
	int rc = push_all(c, q, in, o);
	/* all pushed, maybe fewer replicas than wanted have them: the wait
	 * tells whether they landed all the same */
	if ((rc != 0 && rc != CTL_EX_UNREPLICATED) || !o->wait)
		return rc;
	const char **ids = xmalloc((in->jobs.n + 1) * sizeof(*ids));
	for (size_t i = 0; i < in->jobs.n; i++)
		ids[i] = in->jobs.v[i].id;
	rc = ctl_wait(c, q, ids, in->jobs.n, o->wait_ms, o->quiet);
	free(ids);
	return rc;
}

/* ferryctl enqueue [-q] [--cache | --cache-ttl S] [--chunk-rows N]
 * [--delay DURATION | --at TIME] [--wait [TIMEOUT]] QUEUE JSON|- */
int
ctl_enqueue(struct ctl *c, int argc, char **argv)
{
	const struct queue_config *q;
	struct input in = { 0 };
	struct options o = { .wait_ms = -1 };
	char joined[64];
	int first, rc;

	join_wait_timeout(&argc, argv, joined, sizeof(joined));
	if ((first = parse_args(argc, argv, &o)) < 0) {
		fprintf(stderr, "usage: ferryctl enqueue [-q] [--cache | "
		    "--cache-ttl SECONDS] [--chunk-rows N] [--delay DURATION | "
		    "--at TIME] [--wait [TIMEOUT]] QUEUE JSON|-\n");
		return CTL_EX_USAGE;
	}
	if ((q = ctl_queue(c, argv[first])) == NULL)
		return CTL_EX_USAGE;
	if ((rc = load_input(&in, argv[first + 1])) == 0)
		rc = check_and_push(c, q, &in, &o);
	input_free(&in);
	return rc;
}
