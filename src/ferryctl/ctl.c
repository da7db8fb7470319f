/* ctl.c - ferryctl's command line: options, config and the Redis
 * connection shared by every command. */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "control_commands.h"
#include "ctl.h"
#include "util.h"

#ifndef FERRY_CONFIG_PATH
#define FERRY_CONFIG_PATH "/etc/ferry/ferryd.ini"
#endif

/* Every command, option and exit code (tests/ctl_docs.sh reads this text:
 * commands are the lines of the "commands" sections, two spaces in). */
void
ctl_usage(FILE *out)
{
	fprintf(out,
	    "usage: ferryctl [-c FILE] COMMAND [ARGS]\n"
	    "options (before the command):\n"
	    "  -c, --config FILE   configuration (default %s)\n"
	    "  -V, --version       print the version\n"
	    "  -h, --help          this text\n"
	    "commands on Redis (they work whether or not ferryd runs):\n"
	    "  enqueue [-q] QUEUE JSON    push one job, print its id (-q, --quiet:"
	    " don't)\n"
	    "  enqueue [-q] QUEUE -       push one job per stdin line; "
	    "a bad line pushes nothing\n"
	    "    --cache                  its \"data\" in a cache key of its own, "
	    "kept until it is done\n"
	    "    --chunk-rows N           \"data\" arrays split into jobs of N "
	    "rows (default chunk_rows)\n"
	    "    --delay D | --at TIME    run no earlier than D from now (30s, "
	    "1500ms, 2h) or TIME\n"
	    "                             (2026-12-02T10:00:00Z), by the Redis "
	    "clock\n"
	    "    --wait [TIMEOUT]         then wait until each job is done or "
	    "dead (at most TIMEOUT:\n"
	    "                             30s, 5m); a line per job: ID done|"
	    "dead REASON|pending|unknown\n"
	    "  stats [--json] [QUEUE]     lengths, workers and counters "
	    "(all queues without QUEUE)\n"
	    "  dead list QUEUE [SEL]      id, time, attempts, recoveries, reason, "
	    "last error\n"
	    "  dead show QUEUE ID|SEL     the dead-letter entries of job ID as JSON\n"
	    "  dead summary QUEUE [SEL]   count, oldest, newest per reason group\n"
	    "  dead retry QUEUE ID|--all|SEL  push the original jobs back to the "
	    "queue\n"
	    "    --rate N/s               at most N entries a second\n"
	    "    --to QUEUE               onto another queue (not with "
	    "redis_cluster)\n"
	    "  dead purge QUEUE ID|--all|SEL  delete dead-letter entries\n"
	    "    --dry-run                (retry, purge) print what would move, "
	    "change nothing\n"
	    "    SEL: --reason TEXT|SQLSTATE  --group GROUP  --id PATTERN  "
	    "--limit N\n"
	    "         --before|--after TIME (2026-12-02T10:00:00Z, 2026-12-02, "
	    "2h ago as 2h)\n"
	    "  dead restore QUEUE FILE    push the jobs archived in FILE (dead_max)\n"
	    "                             back to the queue, with their cache keys\n"
	    "commands on PostgreSQL (they work whether or not ferryd runs):\n"
	    "  init-db                    create ferry_batches, check the tables "
	    "of postgres queues\n"
	    "commands to the running ferryd (its control_socket: they need "
	    "ferryd):\n", FERRY_CONFIG_PATH);
	for (int i = 0; i < CONTROL_NCOMMANDS; i++)
		if (control_command_for_ctl(&control_commands[i]))
			fprintf(out, "  %-26s %s\n", control_commands[i].usage,
			    control_commands[i].help);
	fputs("  (with a broken file they still ask the running ferryd, which "
	    "keeps its old\n   configuration; reload is refused)\n"
	    "exit status:\n"
	    "  0   done\n"
	    "  1   no such dead job (dead show, retry, purge), or ferryd refused "
	    "the command\n"
	    "  3   enqueued, but fewer replicas than redis_wait_replicas "
	    "acknowledged it\n"
	    "  4   enqueue --wait: every job settled, some of them dead\n"
	    "  5   enqueue --wait: the time was up with jobs pending (or unknown "
	    "to the queue)\n"
	    "  64  bad command line, or a queue the file does not have\n"
	    "  65  invalid job or archive line (nothing pushed), malformed dead "
	    "entry,\n      or a postgres queue's table or columns missing "
	    "(init-db)\n"
	    "  69  redis, postgres or ferryd unavailable (ferryd not running)\n"
	    "  74  standard input or output, or the archive file, failed\n"
	    "  75  redis too full to enqueue (memory_refuse_percent): try later\n"
	    "  76  the control socket is not ferryd's, or ferryd did not answer\n"
	    "  77  permission denied on the control socket\n"
	    "  78  bad configuration file (every error is printed)\n", out);
}

const struct queue_config *
ctl_queue(const struct ctl *c, const char *name)
{
	const struct queue_config *q = config_find_queue(c->cfg, name);

	if (q != NULL)
		return q;
	fprintf(stderr, "ferryctl: unknown queue \"%s\": %s has", name,
	    c->config_path);
	for (int i = 0; i < c->cfg->nqueues; i++)
		fprintf(stderr, "%s%s", i == 0 ? " [queue " : ", ",
		    c->cfg->queues[i].name);
	fprintf(stderr, "%s; check the name or pass the right file with -c\n",
	    c->cfg->nqueues > 0 ? "]" : " no queues");
	return NULL;
}

redisContext *
ctl_redis(struct ctl *c)
{
	return ctl_redis_for(c, NULL);
}

redisContext *
ctl_redis_for(struct ctl *c, const char *queue)
{
	char err[1024];
	bool refused;

	/* in a cluster, each queue is on the node of its slot */
	if (c->rc != NULL && *c->cfg->redis_cluster != '\0' && queue != NULL &&
	    strcmp(queue, c->queue) != 0) {
		redisFree(c->rc);
		c->rc = NULL;
	}
	if (c->rc != NULL)
		return c->rc;
	snprintf(c->queue, sizeof(c->queue), "%s", queue != NULL ? queue : "");
	c->rc = queue_connect_for(c->cfg, queue, CTL_CONNECT_TIMEOUT_MS,
	    &refused, err, sizeof(err));
	if (c->rc == NULL && refused)
		fprintf(stderr, "ferryctl: %s in %s\n", err, c->config_path);
	else if (c->rc == NULL)
		fprintf(stderr, "ferryctl: %s (is redis-server running there? "
		    "check %s in %s)\n", err, *c->cfg->redis_sentinels != '\0' ?
		    "redis_sentinels and redis_sentinel_master" :
		    *c->cfg->redis_cluster != '\0' ? "redis_cluster" :
		    "redis_host, redis_port or redis_socket", c->config_path);
	if (c->rc != NULL)       /* with Sentinel, the primary it named */
		queue_address(c->cfg, c->addr, sizeof(c->addr));
	return c->rc;
}

bool
ctl_reply_ok(const redisReply *r)
{
	return r != NULL && r->type != REDIS_REPLY_ERROR;
}

int
ctl_redis_fail(struct ctl *c, const char *what, redisReply *r)
{
	fprintf(stderr, "ferryctl: redis at %s: %s failed: %s\n", c->addr, what,
	    r != NULL && r->type == REDIS_REPLY_ERROR ? r->str :
	    r != NULL ? "unexpected reply" : c->rc->errstr);
	if (r != NULL)
		freeReplyObject(r);
	return CTL_EX_UNAVAILABLE;
}

bool
ctl_progress_wanted(bool quiet)
{
	return isatty(STDERR_FILENO) && (quiet || !isatty(STDOUT_FILENO));
}

uint64_t
ctl_random64(void)
{
	uint64_t r;

	if (getrandom(&r, sizeof(r), 0) == (ssize_t)sizeof(r))
		return r;
	return (uint64_t)util_realtime_ms() * 1000003u ^ (uint64_t)getpid() ^
	    (uint64_t)util_monotonic_ms() << 32;
}

const char *
ctl_time_text(long long ms, char *buf, size_t size)
{
	time_t sec = (time_t)(ms / 1000);
	struct tm tm;
	char day[32];

	if (ms < 0 || gmtime_r(&sec, &tm) == NULL ||
	    strftime(day, sizeof(day), "%Y-%m-%dT%H:%M:%S", &tm) == 0)
		snprintf(buf, size, "-");
	else
		snprintf(buf, size, "%s.%03dZ", day, (int)(ms % 1000));
	return buf;
}

/* 0, or the number of errors (printed). For a command that needs the
 * file's Redis and queues, say that nothing can be done without them. */
static int
load_config(struct ctl *c, const char *command)
{
	struct config_errors errs = { 0, NULL };
	int n;

	c->cfg = xcalloc(1, sizeof(*c->cfg));
	if (config_load(c->config_path, c->cfg, &errs) == 0) {
		queue_address(c->cfg, c->addr, sizeof(c->addr));
		return 0;
	}
	config_errors_print(&errs, stderr);
	if (!ctl_control_command(command))
		fprintf(stderr, "ferryctl: %s: %d error%s: %s needs the file's "
		    "Redis address and queues; fix the file or pass another "
		    "with -c (a running ferryd keeps its old configuration; "
		    "`ferryd -t` checks the file)\n", c->config_path, errs.n,
		    errs.n == 1 ? "" : "s", command);
	n = errs.n > 0 ? errs.n : 1;
	config_errors_free(&errs);
	free(c->cfg);
	c->cfg = NULL;
	return n;
}

typedef int ctl_command_fn(struct ctl *, int, char **);

static const struct {
	const char *name;
	ctl_command_fn *run;
} commands[] = {
	{ "stats", ctl_stats },
	{ "enqueue", ctl_enqueue },
	{ "dead", ctl_dead },
	{ "init-db", ctl_init_db },
};

/* The command called name: one of the table, or ctl_control for those of
 * ferryd's control socket (src/format/control_commands.c). NULL when none. */
static ctl_command_fn *
find_command(const char *name)
{
	for (size_t i = 0; i < FERRY_ARRAY_LEN(commands); i++)
		if (strcmp(commands[i].name, name) == 0)
			return commands[i].run;
	return ctl_control_command(name) ? ctl_control : NULL;
}

/* Results went to stdout: failing to write them is an error. */
static int
flush_stdout(int rc)
{
	if (fflush(stdout) == 0 && !ferror(stdout))
		return rc;
	fprintf(stderr, "ferryctl: cannot write to standard output: %s\n",
	    strerror(errno));
	return rc != 0 ? rc : CTL_EX_IOERR;
}

int
main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "version", no_argument, NULL, 'V' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct ctl c = { .config_path = FERRY_CONFIG_PATH };
	ctl_command_fn *run;
	int ch, rc;

	while ((ch = getopt_long(argc, argv, "+c:Vh", longopts, NULL)) != -1) {
		switch (ch) {
		case 'c': c.config_path = optarg; break;
		case 'V': printf("ferryctl %s\n", PACKAGE_VERSION); return 0;
		case 'h': ctl_usage(stdout); return 0;
		default: ctl_usage(stderr); return CTL_EX_USAGE;
		}
	}
	if (optind >= argc || (run = find_command(argv[optind])) == NULL) {
		if (optind < argc)
			fprintf(stderr, "ferryctl: unknown command \"%s\"\n",
			    argv[optind]);
		ctl_usage(stderr);
		return CTL_EX_USAGE;
	}
	signal(SIGPIPE, SIG_IGN);   /* a closed pipe is a write error */
	if ((rc = load_config(&c, argv[optind])) > 0 &&
	    ctl_control_command(argv[optind]))
		return flush_stdout(ctl_control_broken(c.config_path, rc,
		    argc - optind, argv + optind));
	if (rc > 0)
		return CTL_EX_CONFIG;
	rc = run(&c, argc - optind, argv + optind);
	if (c.rc != NULL)
		redisFree(c.rc);
	config_free(c.cfg);
	free(c.cfg);
	return flush_stdout(rc);
}
