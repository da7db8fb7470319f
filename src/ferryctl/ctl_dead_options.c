/* ctl_dead_options.c - the command line of `ferryctl dead`: which
 * subcommand takes an ID, --all, a selection (--reason, --group, --before,
 * --after, --id, --limit) and the redrive's options (--dry-run, --rate,
 * --to); and the selection's times read against the Redis clock. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl_dead.h"
#include "util.h"

#define RATE_MAX 1000000.0      /* entries a second */

static bool
is(const struct ctl_dead_opts *o, const char *sub)
{
	return strcmp(o->sub, sub) == 0;
}

static int
bad(const char *fmt, const char *what)
{
	fprintf(stderr, "ferryctl: dead: ");
	fprintf(stderr, fmt, what);
	fputc('\n', stderr);
	return -1;
}

/* --rate N or N/s */
static int
read_rate(struct ctl_dead_opts *o, const char *s)
{
	char *end;
	double v = strtod(s, &end);

	if (end == s || (*end != '\0' && strcmp(end, "/s") != 0) ||
	    !(v >= 0.1 && v <= RATE_MAX))
		return bad("--rate '%s': give entries a second, from 0.1 to "
		    "1000000, as N or N/s (e.g. 5000/s)", s);
	o->rate = v;
	return 0;
}

static int
read_limit(struct ctl_dead_opts *o, const char *s)
{
	char *end;
	long long v = strtoll(s, &end, 10);

	if (end == s || *end != '\0' || v < 1)
		return bad("--limit '%s': give a whole number of entries, 1 or "
		    "more", s);
	o->limit = v;
	return 0;
}

/* An ID named with selection options: a pattern that matches it alone. */
static const char *
id_pattern(const char *id)
{
	static char buf[2 * JOB_ID_MAX + 2];
	size_t n = 0;

	for (const char *p = id; *p != '\0' && n + 2 < sizeof(buf); p++) {
		if (strchr("*?[]\\", *p) != NULL)
			buf[n++] = '\\';
		buf[n++] = *p;
	}
	buf[n] = '\0';
	return buf;
}

static bool
filtered(const struct ctl_dead_opts *o)
{
	return dead_filter_active(&o->f) || o->before != NULL ||
	    o->after != NULL;
}

bool
ctl_dead_selects(const struct ctl_dead_opts *o)
{
	return (is(o, "retry") || is(o, "purge")) && (filtered(o) ||
	    o->limit >= 0 || o->dry_run || o->rate > 0 || o->to != NULL);
}

/* What each subcommand takes, once the options are read. */
static int
check_shape(struct ctl_dead_opts *o, int npos)
{
	bool moves = is(o, "retry") || is(o, "purge");
	bool redrive = o->dry_run || o->rate > 0 || o->to != NULL;

	if (is(o, "restore"))
		return npos == 3 && !o->all && !filtered(o) && o->limit < 0 &&
		    !redrive ? 0 : -1;
	if (!moves && redrive)
		return bad("%s: --dry-run, --rate and --to are for retry and "
		    "purge", o->sub);
	if (is(o, "purge") && (o->rate > 0 || o->to != NULL))
		return bad("%s: --rate and --to are for retry (a purge moves "
		    "nothing into a queue)", o->sub);
	if (o->all && (filtered(o) || o->limit >= 0 || npos == 3))
		return bad("%s: --all selects every entry; leave it out to "
		    "select by ID, --reason, --group, --before, --after, --id or "
		    "--limit", o->sub);
	if (is(o, "list") || is(o, "summary"))
		return npos == 2 && !o->all && (o->limit < 0 || is(o, "list")) ?
		    0 : -1;
	if (is(o, "show"))
		return !o->all && ((npos == 3 && !filtered(o) && o->limit < 0) ||
		    (npos == 2 && filtered(o))) ? 0 : -1;
	if (!moves)
		return -1;
	if (npos == 3 && filtered(o))
		return bad("%s: name entries by ID or by a selection, not both "
		    "(an ID is --id with its exact text)", o->sub);
	if (npos == 3 && ctl_dead_selects(o))
		o->f.id_glob = id_pattern(o->id);
	if (npos == 2 && !o->all && !filtered(o) && o->limit < 0)
		return bad("%s: name what to act on: an ID, --all, or a "
		    "selection (--reason, --group, --before, --after, --id, "
		    "--limit)", o->sub);
	return npos == 2 || npos == 3 ? 0 : -1;
}

int
ctl_dead_options(struct ctl_dead_opts *o, int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "all", no_argument, NULL, 'a' },
		{ "reason", required_argument, NULL, 'r' },
		{ "group", required_argument, NULL, 'g' },
		{ "before", required_argument, NULL, 'b' },
		{ "after", required_argument, NULL, 'A' },
		{ "id", required_argument, NULL, 'i' },
		{ "limit", required_argument, NULL, 'l' },
		{ "dry-run", no_argument, NULL, 'n' },
		{ "rate", required_argument, NULL, 'R' },
		{ "to", required_argument, NULL, 't' },
		{ NULL, 0, NULL, 0 },
	};
	char err[300];
	int ch, npos;

	memset(o, 0, sizeof(*o));
	dead_filter_init(&o->f);
	o->limit = -1;
	optind = 0;
	while ((ch = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (ch) {
		case 'a': o->all = true; break;
		case 'r': o->f.reason = optarg; break;
		case 'g': o->f.group = optarg; break;
		case 'b': o->before = optarg; break;
		case 'A': o->after = optarg; break;
		case 'i': o->f.id_glob = optarg; break;
		case 'n': o->dry_run = true; break;
		case 't': o->to = optarg; break;
		case 'l':
			if (read_limit(o, optarg) != 0)
				return -1;
			break;
		case 'R':
			if (read_rate(o, optarg) != 0)
				return -1;
			break;
		default:
			return -1;
		}
	}
	if ((npos = argc - optind) < 2)
		return -1;
	o->sub = argv[optind];
	o->queue = argv[optind + 1];
	o->id = npos >= 3 ? argv[optind + 2] : NULL;
	if (dead_filter_check(&o->f, err, sizeof(err)) != 0)
		return bad("%s", err);
	return check_shape(o, npos);
}

int
ctl_dead_usage(void)
{
	fprintf(stderr, "usage: ferryctl dead list QUEUE [SELECTION] [--limit N]\n"
	    "       ferryctl dead show QUEUE ID|SELECTION [--limit N]\n"
	    "       ferryctl dead summary QUEUE [SELECTION]\n"
	    "       ferryctl dead retry QUEUE ID|--all|SELECTION [--limit N] "
	    "[--dry-run]\n"
	    "                                  [--rate N/s] [--to QUEUE]\n"
	    "       ferryctl dead purge QUEUE ID|--all|SELECTION [--limit N] "
	    "[--dry-run]\n"
	    "       ferryctl dead restore QUEUE ARCHIVE_FILE\n"
	    "SELECTION: --reason TEXT|SQLSTATE, --group GROUP, --before TIME, "
	    "--after TIME,\n"
	    "           --id PATTERN (TIME: 2026-12-02T10:00:00Z, 2026-12-02, "
	    "or 2h ago)\n");
	return CTL_EX_USAGE;
}

/* One of --before or --after. */
static int
read_time(const char *what, const char *s, long long now, long long *ms)
{
	char err[400];

	if (s == NULL)
		return 0;
	if (dead_filter_time(what, s, now, ms, err, sizeof(err)) == 0)
		return 0;
	fprintf(stderr, "ferryctl: dead: %s\n", err);
	return CTL_EX_USAGE;
}

int
ctl_dead_times(struct ctl *c, struct ctl_dead_opts *o)
{
	long long now = util_realtime_ms();
	char err[300];
	int rc;

	if (o->before == NULL && o->after == NULL)
		return 0;
	redisReply *r = redisCommand(c->rc, "TIME");
	if (!ctl_reply_ok(r) || r->type != REDIS_REPLY_ARRAY ||
	    r->elements != 2)
		return ctl_redis_fail(c, "TIME (the clock of the entries' times)",
		    r);
	now = atoll(r->element[0]->str) * 1000 + atoll(r->element[1]->str) / 1000;
	freeReplyObject(r);
	if ((rc = read_time("--before", o->before, now, &o->f.before_ms)) != 0 ||
	    (rc = read_time("--after", o->after, now, &o->f.after_ms)) != 0)
		return rc;
	if (dead_filter_check(&o->f, err, sizeof(err)) != 0) {
		fprintf(stderr, "ferryctl: dead: %s\n", err);
		return CTL_EX_USAGE;
	}
	return 0;
}
