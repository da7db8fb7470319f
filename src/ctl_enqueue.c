/* ctl_enqueue.c - ferryctl enqueue: check every job the way a worker will
 * (job_parse), so that one bad line pushes nothing; then LPUSH the jobs in
 * pipelined MULTI chunks, counting them in the stats hash, and print ids. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ctl.h"
#include "job.h"
#include "util.h"

#define MAX_REPORTED 10                 /* bad lines named before a summary */
#define CHUNK_BYTES (16 * 1024 * 1024)  /* cap of one LPUSH */

struct line {
	size_t off, len;        /* the job's bytes in input.buf */
	size_t lineno;
	size_t id_off;          /* its id in input.ids */
};

struct input {
	char *buf;
	size_t len;
	struct line *lines;
	size_t n, cap;
	char *ids;              /* NUL-terminated ids, one after another */
	size_t ids_len, ids_cap;
	bool from_stdin;
};

static void
input_free(struct input *in)
{
	if (in->from_stdin)
		free(in->buf);
	free(in->lines);
	free(in->ids);
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
	in->lines[in->n++] = (struct line){ off, len, lineno, 0 };
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
keep_id(struct input *in, struct line *l, const char *id)
{
	size_t n = strlen(id) + 1;

	while (in->ids_len + n > in->ids_cap) {
		in->ids_cap = in->ids_cap ? in->ids_cap * 2 : 1 << 16;
		in->ids = xrealloc(in->ids, in->ids_cap);
	}
	l->id_off = in->ids_len;
	memcpy(in->ids + in->ids_len, id, n);
	in->ids_len += n;
}

/* Every job as a worker will see it; returns the number of bad ones. */
static size_t
validate(struct input *in, const struct queue_config *q)
{
	size_t bad = 0;
	struct job j;

	for (size_t i = 0; i < in->n; i++) {
		struct line *l = &in->lines[i];
		job_parse(&j, in->buf + l->off, l->len, q->max_job_bytes);
		if (j.invalid != NULL && ++bad <= MAX_REPORTED) {
			if (in->from_stdin)
				fprintf(stderr, "ferryctl: stdin line %zu: %s\n",
				    l->lineno, j.invalid);
			else
				fprintf(stderr, "ferryctl: the job is not valid: %s\n",
				    j.invalid);
		}
		if (j.invalid == NULL)
			keep_id(in, l, j.id);
		job_free(&j);
	}
	if (bad > MAX_REPORTED)
		fprintf(stderr, "ferryctl: ... and %zu more invalid lines\n",
		    bad - MAX_REPORTED);
	return bad;
}

/* The first error among a chunk's replies (MULTI, LPUSH, HINCRBY, EXEC and
 * the results inside EXEC), or NULL. */
static const char *
chunk_error(redisReply **r)
{
	for (int i = 0; i < 4; i++) {
		if (r[i]->type == REDIS_REPLY_ERROR)
			return r[i]->str;
		if (i == 3 && r[i]->type != REDIS_REPLY_ARRAY)
			return "transaction aborted";
		for (size_t e = 0; i == 3 && e < r[i]->elements; e++)
			if (r[i]->element[e]->type == REDIS_REPLY_ERROR)
				return r[i]->element[e]->str;
	}
	return NULL;
}

/* Read the replies of one chunk; *lost is set when the connection failed,
 * so whether the chunk went in is unknown. */
static int
chunk_replies(struct ctl *c, bool *lost)
{
	redisReply *r[4] = { NULL };
	const char *err;
	int n = 0, rc = 0;

	while (n < 4 && redisGetReply(c->rc, (void **)&r[n]) == REDIS_OK)
		n++;
	if (n < 4) {
		*lost = true;
		rc = ctl_redis_fail(c, "LPUSH of the jobs", NULL);
	} else if ((err = chunk_error(r)) != NULL) {
		fprintf(stderr, "ferryctl: redis at %s: LPUSH of the jobs failed: "
		    "%s\n", c->addr, err);
		rc = CTL_EX_UNAVAILABLE;
	}
	for (int i = 0; i < n; i++)
		freeReplyObject(r[i]);
	return rc;
}

static int
push_chunk(struct ctl *c, const struct queue_keys *k, const struct input *in,
    size_t from, size_t to, bool *lost)
{
	size_t n = to - from;
	const char **argv = xmalloc((n + 2) * sizeof(*argv));
	size_t *lens = xmalloc((n + 2) * sizeof(*lens));
	char count[24];

	argv[0] = "LPUSH";
	argv[1] = k->ready;
	lens[0] = 5;
	lens[1] = strlen(k->ready);
	for (size_t i = 0; i < n; i++) {
		argv[i + 2] = in->buf + in->lines[from + i].off;
		lens[i + 2] = in->lines[from + i].len;
	}
	snprintf(count, sizeof(count), "%zu", n);
	redisAppendCommand(c->rc, "MULTI");
	redisAppendCommandArgv(c->rc, (int)n + 2, argv, lens);
	redisAppendCommand(c->rc, "HINCRBY %s enqueued %s", k->stats, count);
	redisAppendCommand(c->rc, "EXEC");
	free(argv);
	free(lens);
	return chunk_replies(c, lost);
}

/* Up to CTL_CHUNK jobs and CHUNK_BYTES bytes (at least one job). */
static size_t
chunk_end(const struct input *in, size_t from)
{
	size_t to = from, bytes = 0;

	while (to < in->n && to - from < CTL_CHUNK &&
	    (to == from || bytes + in->lines[to].len <= CHUNK_BYTES))
		bytes += in->lines[to++].len;
	return to;
}

static int
push_all(struct ctl *c, const struct queue_config *q, const struct input *in,
    bool quiet)
{
	bool progress = in->n > CTL_CHUNK && ctl_progress_wanted(quiet);
	bool lost = false;
	struct queue_keys k;
	size_t from = 0, to;
	int rc = 0;

	queue_keys_init(&k, c->cfg->redis_prefix, q->name);
	for (; from < in->n && rc == 0; from = to) {
		to = chunk_end(in, from);
		if ((rc = push_chunk(c, &k, in, from, to, &lost)) != 0)
			break;
		for (size_t i = from; i < to && !quiet; i++)
			printf("%s\n", in->ids + in->lines[i].id_off);
		if (progress)
			fprintf(stderr, "\rferryctl: pushed %zu of %zu jobs", to,
			    in->n);
	}
	if (progress)
		fprintf(stderr, "\n");
	if (rc != 0 && in->n > 1)
		fprintf(stderr, "ferryctl: %zu of %zu jobs were pushed to queue %s "
		    "(their ids are on stdout)%s; the others were not\n", from,
		    in->n, q->name, lost ? ", the next chunk maybe" : "");
	return rc;
}

static int
parse_args(int argc, char **argv, bool *quiet)
{
	static const struct option longopts[] = {
		{ "quiet", no_argument, NULL, 'q' },
		{ NULL, 0, NULL, 0 },
	};
	int ch;

	optind = 0;
	while ((ch = getopt_long(argc, argv, "q", longopts, NULL)) != -1) {
		if (ch != 'q')
			return -1;
		*quiet = true;
	}
	return argc - optind == 2 ? optind : -1;
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

/* ferryctl enqueue [-q] QUEUE JSON|- */
int
ctl_enqueue(struct ctl *c, int argc, char **argv)
{
	const struct queue_config *q;
	struct input in = { 0 };
	bool quiet = false;
	int first = parse_args(argc, argv, &quiet), rc;
	size_t bad;

	if (first < 0) {
		fprintf(stderr, "usage: ferryctl enqueue [-q] QUEUE JSON|-\n");
		return CTL_EX_USAGE;
	}
	if ((q = ctl_queue(c, argv[first])) == NULL)
		return CTL_EX_USAGE;
	if ((rc = load_input(&in, argv[first + 1])) != 0) {
		input_free(&in);
		return rc;
	}
	if ((bad = validate(&in, q)) > 0) {
		fprintf(stderr, "ferryctl: %zu invalid job%s; nothing was pushed "
		    "to queue %s\n", bad, bad == 1 ? "" : "s", q->name);
		rc = CTL_EX_DATAERR;
	} else if (ctl_redis(c) == NULL) {
		rc = CTL_EX_UNAVAILABLE;
	} else {
		rc = push_all(c, q, &in, quiet);
	}
	input_free(&in);
	return rc;
}
