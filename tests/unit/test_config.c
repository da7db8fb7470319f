/* test_config.c - ferryd.ini loading: defaults, every value type, and the
 * exact text of every error message (the temporary path is shown as "F"). */
#include "config.h"
#include "config_int.h"
#include "config_pg.h"
#include "config_secret.h"
#include "copy.h"
#include "log.h"
#include "util.h"

#include <criterion/criterion.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef TEST_SRCDIR
#define TEST_SRCDIR "."
#endif

static char *
write_tmp(const char *text)
{
	char *path = xstrdup("/tmp/ferry-test-config-XXXXXX");
	size_t n = strlen(text);
	int fd = mkstemp(path);

	cr_assert(fd >= 0, "mkstemp");
	cr_assert_eq(write(fd, text, n), (ssize_t)n);
	close(fd);
	return path;
}

/* Replace the content of `path` with `text`. */
static void
h_rewrite(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	cr_assert_not_null(f, "%s", path);
	cr_assert_eq(fputs(text, f) >= 0, true);
	fclose(f);
}

/* Load `text`: its errors, one a line, path replaced by "F"; "" if none. */
static char *
errors_of(const char *text)
{
	struct ferry_config cfg;
	struct config_errors errs = { 0 };
	char *path = write_tmp(text), *out = xstrdup(""), *tmp;
	size_t plen = strlen(path);
	int i, rc;

	rc = config_load(path, &cfg, &errs);
	for (i = 0; i < errs.n; i++) {
		cr_assert(strncmp(errs.msgs[i], path, plen) == 0, "%s",
		    errs.msgs[i]);
		tmp = xasprintf("%sF%s\n", out, errs.msgs[i] + plen);
		free(out);
		out = tmp;
	}
	cr_assert_eq(rc, errs.n > 0 ? -1 : 0);
	if (rc == 0)
		config_free(&cfg);
	config_errors_free(&errs);
	unlink(path);
	free(path);
	return out;
}

#define expect_errors(text, expected) do {				\
	char *got_ = errors_of(text);					\
	cr_expect_str_eq(got_, expected);				\
	free(got_);							\
} while (0)

/* A file with one valid queue (line 1) followed by `text`. */
#define Q1 "[queue q]\n"

static void
load_ok(const char *text, struct ferry_config *cfg)
{
	struct config_errors errs = { 0 };
	char *path = write_tmp(text);
	int rc = config_load(path, cfg, &errs);

	cr_assert_eq(rc, 0, "%d errors, first: %s", errs.n,
	    errs.n ? errs.msgs[0] : "");
	cr_assert_eq(errs.n, 0);
	unlink(path);
	free(path);
}

/* --- loading --- */

Test(config, defaults)
{
	struct ferry_config c;
	const struct queue_config *q;

	load_ok(Q1, &c);
	cr_expect_str_eq(c.pidfile, "/run/ferryd.pid");
	cr_expect_str_eq(c.user, "");
	cr_expect_str_eq(c.group, "");
	cr_expect_str_eq(c.control_socket, "/run/ferryd.sock");
	cr_expect_str_eq(c.log, "stderr");
	cr_expect_eq(c.log_level, LOG_LEVEL_INFO);
	cr_expect_str_eq(c.redis_host, "127.0.0.1");
	cr_expect_eq(c.redis_port, 6379);
	cr_expect_str_eq(c.redis_socket, "");
	cr_expect_str_eq(c.redis_user, "");
	cr_expect_str_eq(c.redis_password, "");
	cr_expect_eq(c.redis_db, 0);
	cr_expect_str_eq(c.redis_prefix, "ferry");
	cr_expect_str_eq(c.pg_host, "");
	cr_expect_str_eq(c.pg_port, "5432");
	cr_expect_str_eq(c.pg_database, "");
	cr_expect_str_eq(c.pg_user, "");
	cr_expect_str_eq(c.pg_password, "");
	cr_expect_str_eq(c.pg_options, "");
	cr_expect_eq(c.shutdown_timeout_ms, 30000);
	cr_expect_eq(c.kill_grace_ms, 5000);
	cr_expect_eq(c.heartbeat_ttl_ms, 10000);
	cr_expect_eq(c.reaper_interval_ms, 1000);
	cr_expect_eq(c.restart_backoff_min_ms, 100);
	cr_expect_eq(c.restart_backoff_max_ms, 30000);
	cr_expect_eq(c.restart_backoff_reset_ms, 10000);
	cr_expect_eq(c.pg_statement_timeout_ms, 60000);
	cr_expect_eq(c.done_retention_ms, 7L * 24 * 3600 * 1000);
	cr_assert_eq(c.nqueues, 1);
	q = &c.queues[0];
	cr_expect_str_eq(q->name, "q");
	cr_expect_eq(q->line, 1);
	cr_expect_eq(q->workers, 1);
	cr_expect_eq(q->batch_size, 100);
	cr_expect_eq(q->handler, CONFIG_HANDLER_NOOP);
	cr_expect_str_eq(q->command, "");
	cr_expect_eq(q->max_attempts, 5);
	cr_expect_eq(q->max_recoveries, 3);
	cr_expect_eq(q->backoff_base_ms, 1000);
	cr_expect_eq(q->backoff_max_ms, 300000);
	cr_expect_eq(q->job_timeout_ms, 300000);
	cr_expect_eq(q->handler_timeout_ms, 60000);
	cr_expect_eq(q->max_jobs_per_worker, 0);
	cr_expect_eq(q->max_worker_rss_mb, 0);
	cr_expect_eq(q->max_job_bytes, 1048576);
	cr_expect_str_eq(q->table, "");
	cr_expect_str_eq(q->columns, "");
	cr_expect_str_eq(q->pg_host, "");
	cr_expect_str_eq(q->pg_port, "");
	cr_expect_str_eq(q->pg_database, "");
	cr_expect_str_eq(q->pg_user, "");
	cr_expect_str_eq(q->pg_password, "");
	cr_expect_str_eq(q->pg_options, "");
	cr_expect(strncmp(c.path, "/tmp/ferry-test-config-", 23) == 0);
	config_free(&c);
}

Test(config, every_key_set)
{
	struct ferry_config c;
	const struct queue_config *q;

	load_ok("[ferryd]\npidfile = /tmp/p.pid\nuser = nobody\n"
	    "group = nogroup\ncontrol_socket = /tmp/c.sock\nlog = syslog\n"
	    "log_level = debug\nredis_host = redis.example\nredis_port = 7000\n"
	    "redis_socket = /tmp/r.sock\nredis_user = ferry-app_1\n"
	    "redis_password = s3cret\n"
	    "redis_db = 3\nredis_prefix = my-app.v2_x\npg_host = db\n"
	    "pg_port = 6432\npg_database = d\npg_user = u\npg_password = p\n"
	    "pg_options = sslmode=require application_name=x\n"
	    "shutdown_timeout = 1m\nkill_grace = 250ms\nheartbeat_ttl = 1h\n"
	    "reaper_interval = 2\nrestart_backoff_min = 10ms\n"
	    "restart_backoff_max = 1h\nrestart_backoff_reset = 1d\n"
	    "pg_statement_timeout = 1d\ndone_retention = 365d\n"
	    "[queue events]\nhandler = postgres\ntable = s_1.Events_2\n"
	    "columns = id, kind=type\npg_host = /run/pg\npg_port = 5433\n"
	    "pg_database = ev\npg_user = w\npg_password = pw\n"
	    "pg_options = sslmode=disable\n"
	    "[queue orders]\nworkers = 256\nbatch_size = 100000\n"
	    "handler = exec\ncommand = /usr/bin/handler --fast\n"
	    "max_attempts = 1000\nmax_recoveries = 0\nbackoff_base_ms = 250\n"
	    "backoff_max_ms = 2s\njob_timeout = 20\nhandler_timeout = 100ms\n"
	    "max_jobs_per_worker = 1000000000\nmax_worker_rss_mb = 512\n"
	    "max_job_bytes = 16\n", &c);
	cr_expect_str_eq(c.pidfile, "/tmp/p.pid");
	cr_expect_str_eq(c.user, "nobody");
	cr_expect_str_eq(c.group, "nogroup");
	cr_expect_str_eq(c.control_socket, "/tmp/c.sock");
	cr_expect_str_eq(c.log, "syslog");
	cr_expect_eq(c.log_level, LOG_LEVEL_DEBUG);
	cr_expect_str_eq(c.redis_host, "redis.example");
	cr_expect_eq(c.redis_port, 7000);
	cr_expect_str_eq(c.redis_socket, "/tmp/r.sock");
	cr_expect_str_eq(c.redis_user, "ferry-app_1");
	cr_expect_str_eq(c.redis_password, "s3cret");
	cr_expect_eq(c.redis_db, 3);
	cr_expect_str_eq(c.redis_prefix, "my-app.v2_x");
	cr_expect_str_eq(c.pg_host, "db");
	cr_expect_str_eq(c.pg_port, "6432");
	cr_expect_str_eq(c.pg_database, "d");
	cr_expect_str_eq(c.pg_user, "u");
	cr_expect_str_eq(c.pg_password, "p");
	cr_expect_str_eq(c.pg_options, "sslmode=require application_name=x");
	cr_expect_eq(c.shutdown_timeout_ms, 60000);
	cr_expect_eq(c.kill_grace_ms, 250);
	cr_expect_eq(c.heartbeat_ttl_ms, 3600000);
	cr_expect_eq(c.reaper_interval_ms, 2000);
	cr_expect_eq(c.restart_backoff_min_ms, 10);
	cr_expect_eq(c.restart_backoff_max_ms, 3600000);
	cr_expect_eq(c.restart_backoff_reset_ms, 86400000);
	cr_expect_eq(c.pg_statement_timeout_ms, 86400000);
	cr_expect_eq(c.done_retention_ms, 365L * 86400000);
	q = config_find_queue(&c, "events");
	cr_assert_not_null(q);
	cr_expect_eq(q->handler, CONFIG_HANDLER_POSTGRES);
	cr_expect_str_eq(q->table, "s_1.Events_2");
	cr_expect_str_eq(q->columns, "id, kind=type");
	cr_expect_str_eq(q->pg_host, "/run/pg");
	cr_expect_str_eq(q->pg_port, "5433");
	cr_expect_str_eq(q->pg_database, "ev");
	cr_expect_str_eq(q->pg_user, "w");
	cr_expect_str_eq(q->pg_password, "pw");
	cr_expect_str_eq(q->pg_options, "sslmode=disable");
	q = config_find_queue(&c, "orders");
	cr_assert_not_null(q);
	cr_expect_eq(q->workers, 256);
	cr_expect_eq(q->batch_size, 100000);
	cr_expect_eq(q->handler, CONFIG_HANDLER_EXEC);
	cr_expect_str_eq(q->command, "/usr/bin/handler --fast");
	cr_expect_eq(q->max_attempts, 1000);
	cr_expect_eq(q->max_recoveries, 0);
	cr_expect_eq(q->backoff_base_ms, 250);
	cr_expect_eq(q->backoff_max_ms, 2000);
	cr_expect_eq(q->job_timeout_ms, 20000);
	cr_expect_eq(q->handler_timeout_ms, 100);
	cr_expect_eq(q->max_jobs_per_worker, 1000000000);
	cr_expect_eq(q->max_worker_rss_mb, 512);
	cr_expect_eq(q->max_job_bytes, 16);
	config_free(&c);
}

Test(config, example_file_loads)
{
	struct ferry_config c;
	struct config_errors errs = { 0 };
	int rc = config_load(TEST_SRCDIR "/etc/ferryd.ini", &c, &errs);

	cr_assert_eq(rc, 0, "%s", errs.n ? errs.msgs[0] : "");
	cr_assert_eq(errs.n, 0);
	cr_expect_str_eq(c.pidfile, "/run/ferryd.pid");
	cr_expect_str_eq(c.log, "stderr");
	cr_expect_str_eq(c.pg_host, "127.0.0.1");
	cr_expect_str_eq(c.pg_database, "ferry");
	cr_expect_str_eq(c.pg_user, "ferry");
	cr_expect_str_eq(c.control_socket, "/run/ferryd.sock");
	cr_assert_eq(c.nqueues, 2);
	cr_expect_str_eq(c.queues[0].name, "orders");
	cr_expect_eq(c.queues[0].workers, 2);
	cr_expect_str_eq(c.queues[1].name, "emails");
	cr_expect_eq(c.queues[1].workers, 1);
	cr_expect_eq(c.queues[1].handler, CONFIG_HANDLER_NOOP);
	config_free(&c);
}

Test(config, empty_queue_sections_count)
{
	struct ferry_config c;

	load_ok("[queue a]\n[queue b]\nworkers = 3\n\n[queue c]\n", &c);
	cr_assert_eq(c.nqueues, 3);
	cr_expect_str_eq(c.queues[0].name, "a");
	cr_expect_eq(c.queues[0].line, 1);
	cr_expect_eq(c.queues[0].workers, 1);
	cr_expect_eq(c.queues[1].workers, 3);
	cr_expect_str_eq(c.queues[2].name, "c");
	cr_expect_eq(c.queues[2].line, 5);
	cr_expect_eq(c.queues[2].batch_size, 100);
	config_free(&c);
}

Test(config, syntax_variants)
{
	struct ferry_config c;

	/* BOM, CRLF, comments, inline comment, ':' separator, blanks around
	 * the section name, a first key indented under its section. */
	load_ok("\xEF\xBB\xBF; top\r\n# hash\r\n[ queue  q ] ; the queue\r\n"
	    "  workers = 4 ; four\r\nbatch_size: 7\r\n[ferryd]\r\n"
	    "redis_password = a;b#c\r\n", &c);
	cr_expect_eq(c.queues[0].workers, 4);
	cr_expect_eq(c.queues[0].batch_size, 7);
	cr_expect_str_eq(c.redis_password, "a;b#c");
	config_free(&c);
}

Test(config, duration_units)
{
	struct ferry_config c;

	/* A bare number is seconds, or milliseconds for keys named *_ms. */
	load_ok("[ferryd]\nshutdown_timeout = 2m\nkill_grace = 1500ms\n"
	    "heartbeat_ttl = 45\nreaper_interval = 1h\n"
	    "restart_backoff_reset = 1d\n" "[queue q]\nbackoff_base_ms = 5\n"
	    "backoff_max_ms = 1d\njob_timeout = 2h\nhandler_timeout = 3s\n",
	    &c);
	cr_expect_eq(c.shutdown_timeout_ms, 120000);
	cr_expect_eq(c.kill_grace_ms, 1500);
	cr_expect_eq(c.heartbeat_ttl_ms, 45000);
	cr_expect_eq(c.reaper_interval_ms, 3600000);
	cr_expect_eq(c.restart_backoff_reset_ms, 86400000);
	cr_expect_eq(c.queues[0].backoff_base_ms, 5);
	cr_expect_eq(c.queues[0].backoff_max_ms, 86400000);
	cr_expect_eq(c.queues[0].job_timeout_ms, 7200000);
	cr_expect_eq(c.queues[0].handler_timeout_ms, 3000);
	config_free(&c);
}

Test(config, longest_names_and_lines)
{
	struct ferry_config c;
	char text[1024], name[CONFIG_QUEUE_NAME_MAX + 1], opts[200];

	/* inih keeps only 49 characters of a section name: ours are whole. */
	memset(name, 'n', CONFIG_QUEUE_NAME_MAX);
	name[CONFIG_QUEUE_NAME_MAX] = '\0';
	/* "pg_options = " is 13 characters: 186 more make 199. */
	memset(opts, 'o', 186);
	opts[186] = '\0';
	snprintf(text, sizeof(text), "[ferryd]\npg_options = %s\n[queue %s]\n",
	    opts, name);
	load_ok(text, &c);
	cr_expect_str_eq(c.pg_options, opts);
	cr_assert_eq(c.nqueues, 1);
	cr_expect_str_eq(c.queues[0].name, name);
	cr_expect_not_null(config_find_queue(&c, name));
	config_free(&c);
}

/* --- errors: file --- */

Test(config_errors, cannot_open)
{
	struct ferry_config c;
	struct config_errors errs = { 0 };

	cr_assert_eq(config_load("/nonexistent/ferryd.ini", &c, &errs), -1);
	cr_assert_eq(errs.n, 1);
	cr_expect_str_eq(errs.msgs[0], "/nonexistent/ferryd.ini: cannot open: "
	    "No such file or directory");
	config_errors_free(&errs);
	cr_assert_eq(config_load("/tmp", &c, &errs), -1);
	cr_assert_eq(errs.n, 1);
	cr_expect_str_eq(errs.msgs[0], "/tmp: cannot open: Is a directory");
	config_errors_free(&errs);
	config_free(&c);
}

Test(config_errors, file_too_large)
{
	size_t n = (1 << 20) + 10;
	char *text = xmalloc(n + 1);

	memset(text, '\n', n);
	text[n] = '\0';
	expect_errors(text, "F: cannot open: File too large\n");
	free(text);
}

Test(config_errors, no_queue)
{
	expect_errors("", "F: no [queue NAME] section: ferryd has nothing to "
	    "do\n");
	expect_errors("[ferryd]\nlog = syslog\n", "F: no [queue NAME] section: "
	    "ferryd has nothing to do\n");
}

/* --- errors: syntax --- */

Test(config_errors, syntax_all_reported)
{
	expect_errors(Q1 "workers\n[ferryd\nbatch_size = 3\nx ;= 3\n",
	    "F:2: syntax error: expected \"key = value\" or \"[section]\"\n"
	    "F:3: syntax error: expected \"key = value\" or \"[section]\"\n"
	    "F:5: syntax error: expected \"key = value\" or \"[section]\"\n");
}

Test(config_errors, long_line)
{
	char text[1024], opts[201];

	memset(opts, 'o', 187);		/* 13 + 187 = 200 characters */
	opts[187] = '\0';
	snprintf(text, sizeof(text), "[ferryd]\npg_options = %s\ncolour = x\n"
	    Q1 "batch_size = 0\n", opts);
	/* The lines after it keep their numbers. */
	expect_errors(text,
	    "F:2: line is longer than 199 characters; split the value "
	    "(e.g. pg_options) or shorten it\n"
	    "F:3: [ferryd] colour: unknown key\n"
	    "F:5: [queue q] batch_size: \"0\" out of range 1..100000\n");
}

/* Found by tests/fuzz/fuzz_config: inih ends a line at a NUL byte, so
 * "command = /bin/cat<NUL> -u" ran /bin/cat, and the file was accepted. */
Test(config_errors, nul_byte)
{
	static const char text[] = Q1 "handler = exec\ncommand = /bin/cat\0 -u\n";
	char *path = xstrdup("/tmp/ferry-test-config-XXXXXX");
	struct config_errors errs = { 0 };
	struct ferry_config cfg;
	int fd = mkstemp(path);

	cr_assert(fd >= 0, "mkstemp");
	cr_assert_eq(write(fd, text, sizeof(text) - 1), (ssize_t)sizeof(text) - 1);
	close(fd);
	cr_assert_eq(config_load(path, &cfg, &errs), -1);
	cr_assert_eq(errs.n, 1);
	cr_assert(strstr(errs.msgs[0], ":3: line holds a NUL byte") != NULL,
	    "%s", errs.msgs[0]);
	config_errors_free(&errs);
	unlink(path);
	free(path);
}

Test(config_errors, continuation_line)
{
	expect_errors(Q1 "workers = 2\n  batch_size = 5\n\tmore\n",
	    "F:3: [queue q] workers: indented line \"batch_size = 5\" would "
	    "continue this key's value; remove the indentation\n"
	    "F:4: [queue q] workers: indented line \"more\" would continue this "
	    "key's value; remove the indentation\n");
}

Test(config_errors, text_after_section)
{
	expect_errors("[queue q] workers = 2\n", "F:1: [queue q]: unexpected "
	    "text after \"]\" (put each key on its own line)\n");
}

Test(config_errors, key_before_section)
{
	expect_errors("workers = 2\n" Q1, "F:1: workers: key before the first "
	    "section (put it under [ferryd] or [queue NAME])\n");
}

/* --- errors: sections --- */

Test(config_errors, unknown_section)
{
	/* Its keys are not reported one by one. */
	expect_errors("[server]\nport = 1\n" Q1, "F:1: [server]: unknown "
	    "section (allowed: [ferryd], [queue NAME], [table QUEUE TABLE])\n");
}

Test(config_errors, ferryd_twice)
{
	expect_errors("[ferryd]\nredis_db = 1\n[ferryd]\nredis_db = 2\n" Q1,
	    "F:3: [ferryd]: defined twice (first at line 1)\n");
}

Test(config_errors, queue_twice)
{
	expect_errors("[queue orders]\n\n\n\n[queue orders]\nworkers = 2\n",
	    "F:5: [queue orders]: defined twice (first at line 1)\n");
}

Test(config_errors, queue_name)
{
	char text[256], name[CONFIG_QUEUE_NAME_MAX + 2];

	expect_errors("[queue]\n" Q1, "F:1: [queue]: missing queue name "
	    "(expected [queue NAME])\n");
	expect_errors("[queue a/b]\nworkers = x\n" Q1, "F:1: [queue a/b]: bad "
	    "queue name (allowed: 1..48 characters of A-Z a-z 0-9 _ . -)\n");
	expect_errors("[queue a b]\n" Q1, "F:1: [queue a b]: bad queue name "
	    "(allowed: 1..48 characters of A-Z a-z 0-9 _ . -)\n");
	memset(name, 'n', sizeof(name) - 1);
	name[sizeof(name) - 1] = '\0';
	snprintf(text, sizeof(text), "[queue %s]\n" Q1, name);
	{
		char *want = xasprintf("F:1: [queue %s]: bad queue name "
		    "(allowed: 1..48 characters of A-Z a-z 0-9 _ . -)\n", name);
		expect_errors(text, want);
		free(want);
	}
	/* Only bad queue sections: no "nothing to do" on top. */
	expect_errors("[queue -?]\n", "F:1: [queue -?]: bad queue name "
	    "(allowed: 1..48 characters of A-Z a-z 0-9 _ . -)\n");
}

Test(config_errors, too_many_queues)
{
	char *text = xstrdup(""), *tmp;
	int i;

	for (i = 0; i <= CONFIG_MAX_QUEUES; i++) {
		tmp = xasprintf("%s[queue q%d]\n", text, i);
		free(text);
		text = tmp;
	}
	expect_errors(text, "F:65: [queue q64]: too many queues (max 64)\n");
	free(text);
}

/* --- errors: keys --- */

Test(config_errors, unknown_key)
{
	expect_errors("\n\n[ferryd]\ncolour = red\n" Q1 "colour = blue\n",
	    "F:4: [ferryd] colour: unknown key\n"
	    "F:6: [queue q] colour: unknown key\n");
	expect_errors("[ferryd]\nworkers = 2\n" Q1 "redis_port = 1\n",
	    "F:2: [ferryd] workers: unknown key (it belongs in a [queue NAME] "
	    "section)\n"
	    "F:4: [queue q] redis_port: unknown key (it belongs in the [ferryd] "
	    "section)\n");
}

Test(config_errors, set_twice)
{
	expect_errors("[ferryd]\n\n\n\nredis_port = 1\n\nredis_port = 2\n" Q1
	    "workers = 1\nworkers = 1\n",
	    "F:7: [ferryd] redis_port: set twice (first at line 5)\n"
	    "F:10: [queue q] workers: set twice (first at line 9)\n");
}

Test(config_errors, integers)
{
	expect_errors(Q1 "workers = 12abc\nbatch_size =\nmax_attempts = 0x10\n"
	    "max_recoveries = 1.5\n",
	    "F:2: [queue q] workers: \"12abc\" is not an integer\n"
	    "F:3: [queue q] batch_size: \"\" is not an integer\n"
	    "F:4: [queue q] max_attempts: \"0x10\" is not an integer\n"
	    "F:5: [queue q] max_recoveries: \"1.5\" is not an integer\n");
	expect_errors(Q1 "max_job_bytes = 99999999999999999999999\n",
	    "F:2: [queue q] max_job_bytes: \"99999999999999999999999\" out of "
	    "range 16..536870912\n");
}

Test(config_errors, durations)
{
	expect_errors("[ferryd]\nkill_grace = abc\nheartbeat_ttl = 1.5s\n"
	    "reaper_interval = 5x\nshutdown_timeout = -5s\n"
	    "restart_backoff_reset = 99999999999999999999999d\n"
	    "restart_backoff_min = 1 s\n" Q1 "backoff_base_ms = s\n",
	    "F:2: [ferryd] kill_grace: \"abc\" is not a duration (allowed: a "
	    "number with suffix ms, s, m, h or d; no suffix = seconds)\n"
	    "F:3: [ferryd] heartbeat_ttl: \"1.5s\" is not a duration (allowed: "
	    "a number with suffix ms, s, m, h or d; no suffix = seconds)\n"
	    "F:4: [ferryd] reaper_interval: \"5x\" is not a duration (allowed: "
	    "a number with suffix ms, s, m, h or d; no suffix = seconds)\n"
	    "F:5: [ferryd] shutdown_timeout: \"-5s\" out of range 1s..1d\n"
	    "F:6: [ferryd] restart_backoff_reset: \"99999999999999999999999d\" "
	    "out of range 1s..1d\n"
	    "F:7: [ferryd] restart_backoff_min: \"1 s\" is not a duration "
	    "(allowed: a number with suffix ms, s, m, h or d; no suffix = "
	    "seconds)\n"
	    "F:9: [queue q] backoff_base_ms: \"s\" is not a duration (allowed: "
	    "a number with suffix ms, s, m, h or d; no suffix = "
	    "milliseconds)\n");
	/* 2^63 ms overflows only after the unit is applied. */
	expect_errors(Q1 "job_timeout = 9223372036854775807s\n",
	    "F:2: [queue q] job_timeout: \"9223372036854775807s\" out of range "
	    "1s..1d\n");
}

/* Every number and duration key, just below its minimum and just above its
 * maximum. */
static const struct range_case {
	const char *section, *key, *low, *high, *range;
} range_cases[] = {
	{ "ferryd", "redis_port", "0", "65536", "1..65535" },
	{ "ferryd", "redis_db", "-1", "1001", "0..1000" },
	{ "ferryd", "shutdown_timeout", "999ms", "86401s", "1s..1d" },
	{ "ferryd", "kill_grace", "99ms", "601s", "100ms..10m" },
	{ "ferryd", "heartbeat_ttl", "999ms", "3601", "1s..1h" },
	{ "ferryd", "reaper_interval", "99ms", "61m", "100ms..1h" },
	{ "ferryd", "restart_backoff_min", "9ms", "61s", "10ms..1m" },
	{ "ferryd", "restart_backoff_max", "99ms", "2h", "100ms..1h" },
	{ "ferryd", "restart_backoff_reset", "0", "2d", "1s..1d" },
	{ "ferryd", "pg_statement_timeout", "999ms", "1441m", "1s..1d" },
	{ "ferryd", "done_retention", "59s", "366d", "1m..365d" },
	{ "ferryd", "memory_check_interval", "99ms", "61m", "100ms..1h" },
	{ "ferryd", "memory_warn_percent", "0", "101", "1..100" },
	{ "ferryd", "memory_refuse_percent", "0", "101", "1..100" },
	{ "ferryd", "cache_ttl", "999ms", "366d", "1s..365d" },
	{ "queue q", "workers", "-1", "257", "0..256" },
	{ "queue q", "batch_size", "0", "100001", "1..100000" },
	{ "queue q", "max_attempts", "0", "1001", "1..1000" },
	{ "queue q", "max_recoveries", "-1", "1001", "0..1000" },
	{ "queue q", "backoff_base_ms", "0", "3600001", "1ms..1h" },
	{ "queue q", "backoff_max_ms", "0ms", "86400001", "1ms..1d" },
	{ "queue q", "job_timeout", "0", "25h", "1s..1d" },
	{ "queue q", "handler_timeout", "99ms", "86401", "100ms..1d" },
	{ "queue q", "max_jobs_per_worker", "-1", "1000000001",
	    "0..1000000000" },
	{ "queue q", "max_worker_rss_mb", "-1", "1048577", "0..1048576" },
	{ "queue q", "max_job_bytes", "15", "536870913", "16..536870912" },
	{ "queue q", "chunk_rows", "0", "1000001", "1..1000000" },
	{ "queue q", "dead_max", "-1", "1000000001", "0..1000000000" },
};

Test(config_errors, ranges)
{
	const struct range_case *r;
	char *text, *want;
	size_t i;

	for (i = 0; i < sizeof(range_cases) / sizeof(range_cases[0]); i++) {
		r = &range_cases[i];
		text = xasprintf("[%s]\n%s = %s\n%s = %s\n%s", r->section,
		    r->key, r->low, r->key, r->high,
		    strcmp(r->section, "ferryd") == 0 ? Q1 : "");
		want = xasprintf("F:2: [%s] %s: \"%s\" out of range %s\n"
		    "F:3: [%s] %s: set twice (first at line 2)\n", r->section,
		    r->key, r->low, r->range, r->section, r->key);
		expect_errors(text, want);
		free(text);
		free(want);
		text = xasprintf("[%s]\n%s = %s\n%s", r->section, r->key,
		    r->high, strcmp(r->section, "ferryd") == 0 ? Q1 : "");
		want = xasprintf("F:2: [%s] %s: \"%s\" out of range %s\n",
		    r->section, r->key, r->high, r->range);
		expect_errors(text, want);
		free(text);
		free(want);
	}
}

Test(config_errors, enums)
{
	expect_errors("[ferryd]\nlog_level = verbose\n" Q1 "handler = kafka\n",
	    "F:2: [ferryd] log_level: \"verbose\" is not one of debug, info, "
	    "notice, warn, error\n"
	    "F:4: [queue q] handler: \"kafka\" is not one of noop, exec, "
	    "postgres\n");
}

Test(config_errors, strings)
{
	expect_errors("[ferryd]\nlog = ferryd.log\nredis_socket = redis.sock\n"
	    "redis_prefix = a:b\n" Q1,
	    "F:2: [ferryd] log: \"ferryd.log\" is not valid (allowed: stderr, "
	    "syslog or an absolute file path)\n"
	    "F:3: [ferryd] redis_socket: \"redis.sock\" is not an absolute path "
	    "(allowed: empty or /path)\n"
	    "F:4: [ferryd] redis_prefix: \"a:b\" is not valid (allowed: 1..32 "
	    "characters of A-Z a-z 0-9 _ . -)\n");
	expect_errors("[ferryd]\npidfile = ferryd.pid\ncontrol_socket = c.sock\n"
	    Q1,
	    "F:2: [ferryd] pidfile: \"ferryd.pid\" is not an absolute path "
	    "(allowed: /path)\n"
	    "F:3: [ferryd] control_socket: \"c.sock\" is not an absolute path "
	    "(allowed: empty or /path)\n");
	const char *listens[] = { "9187", "localhost:9187", "127.0.0.1:",
		"127.0.0.1:0", "127.0.0.1:65536", "127.0.0.1:80x", "::1:9187",
		"1.2.3:80", "127.0.0.1: 80", "127.0.0.1:+80" };
	for (size_t i = 0; i < sizeof(listens) / sizeof(*listens); i++) {
		char text[128], want[256];
		snprintf(text, sizeof(text), "[ferryd]\nmetrics_listen = %s\n" Q1,
		    listens[i]);
		snprintf(want, sizeof(want), "F:2: [ferryd] metrics_listen: \"%s\" "
		    "is not valid (allowed: empty, or IPV4:PORT%s such as "
		    "127.0.0.1:9187)\n", listens[i], strchr(listens[i], ':') ?
		    " with a port in 1..65535," : "");
		expect_errors(text, want);
	}
	expect_errors("[ferryd]\npidfile =\n" Q1,
	    "F:2: [ferryd] pidfile: \"\" is not an absolute path (allowed: "
	    "/path)\n");
	struct ferry_config cfg;
	load_ok("[ferryd]\ncontrol_socket =\n" Q1, &cfg);
	cr_assert_str_eq(cfg.control_socket, "");
	cr_assert_str_eq(cfg.metrics_listen, "");
	config_free(&cfg);
	load_ok("[ferryd]\nmetrics_listen = 0.0.0.0:9187\n" Q1, &cfg);
	cr_assert_str_eq(cfg.metrics_listen, "0.0.0.0:9187");
	config_free(&cfg);
	/* http_listen is its name now, metrics_listen the old one: either,
	 * or both with one value; two values are an error */
	load_ok("[ferryd]\nhttp_listen = 127.0.0.1:9188\n" Q1, &cfg);
	cr_assert_str_eq(cfg.metrics_listen, "127.0.0.1:9188");
	config_free(&cfg);
	load_ok("[ferryd]\nmetrics_listen = 127.0.0.1:9188\nhttp_listen = "
	    "127.0.0.1:9188\n" Q1, &cfg);
	cr_assert_str_eq(cfg.metrics_listen, "127.0.0.1:9188");
	config_free(&cfg);
	expect_errors("[ferryd]\nhttp_listen = 127.0.0.1:9188\n"
	    "metrics_listen = 127.0.0.1:9187\n" Q1,
	    "F:3: [ferryd] metrics_listen: \"127.0.0.1:9187\" differs from "
	    "http_listen = \"127.0.0.1:9188\" (line 2): metrics_listen is the "
	    "old name of http_listen, one setting; set only one of them\n");
	expect_errors("[ferryd]\nmetrics_listen = 127.0.0.1:9187\n"
	    "http_listen =\n" Q1,
	    "F:3: [ferryd] http_listen: \"\" differs from metrics_listen = "
	    "\"127.0.0.1:9187\" (line 2): metrics_listen is the old name of "
	    "http_listen, one setting; set only one of them\n");
	expect_errors("[ferryd]\nhttp_listen = 9188\n" Q1,
	    "F:2: [ferryd] http_listen: \"9188\" is not valid (allowed: empty, "
	    "or IPV4:PORT such as 127.0.0.1:9187)\n");
	expect_errors("[ferryd]\nredis_prefix =\n" Q1,
	    "F:2: [ferryd] redis_prefix: \"\" is not valid (allowed: 1..32 "
	    "characters of A-Z a-z 0-9 _ . -)\n");
	expect_errors("[ferryd]\nredis_prefix = "
	    "abcdefghijklmnopqrstuvwxyz0123456\n" Q1,
	    "F:2: [ferryd] redis_prefix: \"abcdefghijklmnopqrstuvwxyz0123456\" "
	    "is not valid (allowed: 1..32 characters of A-Z a-z 0-9 _ . -)\n");
}

Test(config_errors, http_token)
{
	struct ferry_config cfg;

	load_ok("[ferryd]\nhttp_token = 0123456789abcdef-xyz\n" Q1, &cfg);
	cr_assert_str_eq(cfg.http_token, "0123456789abcdef-xyz");
	config_free(&cfg);
	load_ok(Q1, &cfg);
	cr_assert_str_eq(cfg.http_token, "");
	cr_assert_str_eq(cfg.http_token_file, "");
	config_free(&cfg);
	expect_errors("[ferryd]\nhttp_token = short\n" Q1,
	    "F:2: [ferryd] http_token: \"short\" is too short (at least 16 "
	    "characters; e.g. openssl rand -hex 24)\n");
	expect_errors("[ferryd]\nhttp_token = 0123456789abcdef\xc3\xa9\n" Q1,
	    "F:2: [ferryd] http_token: \"0123456789abcdef\xc3\xa9\" is not "
	    "valid (printable ASCII without blanks: it is sent as "
	    "\"Authorization: Bearer TOKEN\")\n");
	expect_errors("[ferryd]\nhttp_token_file = token.txt\n" Q1,
	    "F:2: [ferryd] http_token_file: \"token.txt\" is not an absolute "
	    "path (allowed: empty or /path)\n");
}

Test(config_errors, http_allowed_hosts)
{
	struct ferry_config cfg;

	load_ok("[ferryd]\nhttp_allowed_hosts = ferry.example.com, [fe80::1] "
	    "h-2\n" Q1, &cfg);
	cr_assert_str_eq(cfg.http_allowed_hosts, "ferry.example.com, [fe80::1] "
	    "h-2");
	config_free(&cfg);
	load_ok(Q1, &cfg);
	cr_assert_str_eq(cfg.http_allowed_hosts, "");
	config_free(&cfg);
	const char *bad[] = { "ferry.example.com:9187", "a/b", "[fe80::1",
		"[]", "h\xc3\xa9" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char ini[200], want[400];
		snprintf(ini, sizeof(ini), "[ferryd]\nhttp_allowed_hosts = ok %s\n"
		    Q1, bad[i]);
		snprintf(want, sizeof(want), "F:2: [ferryd] http_allowed_hosts: "
		    "\"ok %s\" is not valid (allowed: host names of A-Z a-z 0-9 . "
		    "- or [IPv6 address], without a port, separated by blanks or "
		    "commas)\n", bad[i]);
		expect_errors(ini, want);
	}
}

/* --- errors: cross checks --- */

Test(config_errors, command)
{
	/* Not set at all: point at the handler. */
	expect_errors("[queue mail]\nhandler = exec\n",
	    "F:2: [queue mail] command: required when handler = exec\n");
	expect_errors("[queue mail]\nhandler = exec\ncommand =\n",
	    "F:3: [queue mail] command: required when handler = exec\n");
	expect_errors("[queue mail]\ncommand = /bin/true\n",
	    "F:2: [queue mail] command: \"/bin/true\" is set but handler = noop "
	    "(set handler = exec or remove command)\n");
	expect_errors("[queue mail]\nhandler = postgres\ntable = t\n"
	    "command = /bin/true\n",
	    "F:4: [queue mail] command: \"/bin/true\" is set but handler = "
	    "postgres (set handler = exec or remove command)\n");
}

Test(config_errors, backoff_order)
{
	expect_errors(Q1 "backoff_base_ms = 5s\nbackoff_max_ms = 2s\n",
	    "F:3: [queue q] backoff_max_ms: \"2s\" must be >= backoff_base_ms "
	    "(5s)\n");
	/* Only the base was set: point at it. */
	expect_errors(Q1 "backoff_base_ms = 10m\n",
	    "F:2: [queue q] backoff_max_ms: \"5m\" must be >= backoff_base_ms "
	    "(10m)\n");
	expect_errors("[ferryd]\nrestart_backoff_min = 1m\n"
	    "restart_backoff_max = 1500ms\n" Q1,
	    "F:3: [ferryd] restart_backoff_max: \"1500ms\" must be >= "
	    "restart_backoff_min (1m)\n");
}

Test(config_errors, handler_timeout)
{
	expect_errors(Q1 "job_timeout = 60s\n",
	    "F:2: [queue q] handler_timeout: \"1m\" must be < job_timeout "
	    "(1m)\n");
	expect_errors(Q1 "handler_timeout = 301\n",
	    "F:2: [queue q] handler_timeout: \"301s\" must be < job_timeout "
	    "(5m)\n");
}

Test(config_errors, all_collected)
{
	expect_errors("[ferryd]\ncolour = red\n[queue orders]\n"
	    "batch_size = 0\nhandler = kafka\n",
	    "F:2: [ferryd] colour: unknown key\n"
	    "F:4: [queue orders] batch_size: \"0\" out of range 1..100000\n"
	    "F:5: [queue orders] handler: \"kafka\" is not one of noop, exec, "
	    "postgres\n");
}

Test(config_errors, appended_to_existing)
{
	struct ferry_config c;
	struct config_errors errs = { 0 };
	char *path = write_tmp("[ferryd]\ncolour = red\n");

	cr_assert_eq(config_load(path, &c, &errs), -1);
	cr_assert_eq(errs.n, 2);
	cr_assert_eq(config_load(path, &c, &errs), -1);
	cr_assert_eq(errs.n, 4);
	cr_expect_str_eq(errs.msgs[0], errs.msgs[2]);
	config_errors_free(&errs);
	unlink(path);
	free(path);
}

/* --- errors: handler = postgres --- */

#define PG "[queue ev]\nhandler = postgres\n"

Test(config_errors, table_required)
{
	expect_errors(PG, "F:2: [queue ev] table: required when handler = "
	    "postgres\n");
	expect_errors(PG "table =\n", "F:3: [queue ev] table: required when "
	    "handler = postgres\n");
}

Test(config_errors, table_without_postgres)
{
	expect_errors("[queue ev]\ntable = events\n", "F:2: [queue ev] table: "
	    "\"events\" is set but handler = noop (only used with handler = "
	    "postgres)\n");
	expect_errors("[queue ev]\nhandler = exec\ncommand = x\n"
	    "table = s.events\ncolumns = a\n",
	    "F:4: [queue ev] table: \"s.events\" is set but handler = exec "
	    "(only used with handler = postgres)\n"
	    "F:5: [queue ev] columns: \"a\" is set but handler = exec (only "
	    "used with handler = postgres)\n");
	/* Empty is not set. */
	expect_errors("[queue ev]\ntable =\ncolumns =\n", "");
}

Test(config, table_names)
{
	static const char *const good[] = {
		"t", "_", "T_1", "public.orders", "_s9._t", "Events.MixedCase",
	};
	struct ferry_config c;
	char *text, *v, name[CONFIG_IDENT_MAX + 1];
	size_t i;

	memset(name, 'x', CONFIG_IDENT_MAX);
	name[CONFIG_IDENT_MAX] = '\0';
	for (i = 0; i < FERRY_ARRAY_LEN(good) + 2; i++) {
		if (i < FERRY_ARRAY_LEN(good))
			v = xstrdup(good[i]);
		else	/* 63 bytes, alone and on both sides of the dot */
			v = xasprintf("%s%s%s", name, i % 2 ? "." : "",
			    i % 2 ? name : "");
		text = xasprintf(PG "table = %s\n", v);
		load_ok(text, &c);
		cr_expect_str_eq(c.queues[0].table, v);
		free(text);
		free(v);
		config_free(&c);
	}
}

Test(config_errors, bad_table_names)
{
	static const char *const bad[] = {
		"1t", "s.1t", "a.b.c", "a-b", "a b", ".t", "t.", ".", "a..b",
		"\"t\"", "caf\xc3\xa9", "s.t;drop", "a$",
	};
	char *text, *want, name[CONFIG_IDENT_MAX + 2];
	size_t i;

	memset(name, 'x', CONFIG_IDENT_MAX + 1);
	name[CONFIG_IDENT_MAX + 1] = '\0';
	for (i = 0; i < FERRY_ARRAY_LEN(bad) + 2; i++) {
		const char *t = i < FERRY_ARRAY_LEN(bad) ? bad[i] : NULL;
		char *v = t != NULL ? xstrdup(t) : i % 2 ? xasprintf("s.%s",
		    name) : xstrdup(name);	/* 64 bytes: too long */

		text = xasprintf(PG "table = %s\n", v);
		want = xasprintf("F:3: [queue ev] table: \"%s\" is not a valid "
		    "table name (allowed: name or schema.name, each part 1..63 "
		    "characters of A-Z a-z 0-9 _, not starting with a digit)\n",
		    v);
		expect_errors(text, want);
		free(text);
		free(want);
		free(v);
	}
}

#define PORT_ALLOWED "is not a port 1..65535 (allowed: one port, or one " \
	"per pg_host host separated by commas, such as 5432, 5433)\n"

Test(config_errors, pg_port_in_queue)
{
	expect_errors(PG "table = t\npg_port = x\n", "F:4: [queue ev] "
	    "pg_port: \"x\" item 1 (\"x\") " PORT_ALLOWED);
}

/* Every item of a port list is a port; 0, 65536, blanks inside, signs and
 * empty items are not. */
Test(config_errors, pg_port_lists)
{
	expect_errors("[ferryd]\npg_port = 0\n" Q1, "F:2: [ferryd] pg_port: "
	    "\"0\" item 1 (\"0\") " PORT_ALLOWED);
	expect_errors("[ferryd]\npg_host = a,b\npg_port = 5432, 65536\n" Q1,
	    "F:3: [ferryd] pg_port: \"5432, 65536\" item 2 (\"65536\") "
	    PORT_ALLOWED);
	expect_errors("[ferryd]\npg_host = a,b\npg_port = 5432,,5433\n" Q1,
	    "F:3: [ferryd] pg_port: \"5432,,5433\" item 2 (\"\") "
	    PORT_ALLOWED);
	expect_errors(PG "table = t\npg_port = +5, 6\n", "F:4: [queue ev] "
	    "pg_port: \"+5, 6\" item 1 (\"+5\") " PORT_ALLOWED);
	expect_errors(PG "table = t\npg_port = 54 32\n", "F:4: [queue ev] "
	    "pg_port: \"54 32\" item 1 (\"54 32\") " PORT_ALLOWED);
}

/* One port for all hosts, or one per host: the pair a queue uses, its own
 * keys or [ferryd]'s, pointing at the line that set one of them. */
Test(config_errors, pg_port_count_matches_hosts)
{
	struct ferry_config c;

	expect_errors("[ferryd]\npg_host = a, b\npg_port = 1,2,3\n" Q1,
	    "F:3: [ferryd] pg_port: \"1,2,3\" has 3 ports for 2 hosts in "
	    "pg_host (allowed: one port for all hosts, or one port per host)\n");
	expect_errors("[ferryd]\npg_port = 1,2\n" Q1, "F:2: [ferryd] pg_port: "
	    "\"1,2\" has 2 ports for 0 hosts in pg_host (allowed: one port for "
	    "all hosts, or one port per host)\n");
	/* the queue's hosts against [ferryd]'s ports */
	expect_errors("[ferryd]\npg_host = a,b\npg_port = 1,2\n" PG
	    "table = t\npg_host = c,d,e\n", "F:7: [queue ev] pg_port: \"1,2\" "
	    "has 2 ports for 3 hosts in pg_host (allowed: one port for all "
	    "hosts, or one port per host)\n");
	expect_errors("[ferryd]\npg_host = a,,b\n" Q1, "F:2: [ferryd] pg_host: "
	    "\"a,,b\" has an empty host (allowed: hosts separated by commas, "
	    "such as db1, db2)\n");
	load_ok("[ferryd]\npg_host = a, b\npg_port = 1, 2\n" PG "table = t\n"
	    "pg_port = 7\n", &c);
	config_free(&c);
	load_ok("[ferryd]\npg_host = a\n" PG "table = t\npg_host = a,b,c\n"
	    "pg_port = 1,2,3\n", &c);
	config_free(&c);
}

Test(config_errors, pg_target_session_attrs)
{
	expect_errors("[ferryd]\npg_target_session_attrs = master\n" PG
	    "table = t\npg_target_session_attrs = Read-Write\n",
	    "F:2: [ferryd] pg_target_session_attrs: \"master\" is not valid "
	    "(allowed: empty, any, read-write, read-only, primary, standby, "
	    "prefer-standby)\n"
	    "F:6: [queue ev] pg_target_session_attrs: \"Read-Write\" is not "
	    "valid (allowed: empty, any, read-write, read-only, primary, "
	    "standby, prefer-standby)\n");
	expect_errors("[ferryd]\nrequire_sync_commit = maybe\n" Q1,
	    "F:2: [ferryd] require_sync_commit: \"maybe\" is not yes or no\n");
}

Test(config_errors, new_keys_in_wrong_section)
{
	expect_errors("[ferryd]\ntable = t\ncolumns = a\n" Q1
	    "done_retention = 1d\npg_statement_timeout = 1s\n",
	    "F:2: [ferryd] table: unknown key (it belongs in a [queue NAME] "
	    "section)\n"
	    "F:3: [ferryd] columns: unknown key (it belongs in a [queue NAME] "
	    "section)\n"
	    "F:5: [queue q] done_retention: unknown key (it belongs in the "
	    "[ferryd] section)\n"
	    "F:6: [queue q] pg_statement_timeout: unknown key (it belongs in the "
	    "[ferryd] section)\n");
}

Test(config, done_retention)
{
	struct ferry_config c;

	load_ok("[ferryd]\ndone_retention = 1m\npg_statement_timeout = 1s\n"
	    Q1, &c);
	cr_expect_eq(c.done_retention_ms, 60000);
	cr_expect_eq(c.pg_statement_timeout_ms, 1000);
	config_free(&c);
	load_ok("[ferryd]\ndone_retention = 36h\n" Q1, &c);
	cr_expect_eq(c.done_retention_ms, 36L * 3600 * 1000);
	config_free(&c);
	expect_errors("[ferryd]\ndone_retention = 7\n" Q1, "F:2: [ferryd] "
	    "done_retention: \"7\" out of range 1m..365d\n");
	expect_errors("[ferryd]\ndone_retention = 7days\n" Q1, "F:2: [ferryd] "
	    "done_retention: \"7days\" is not a duration (allowed: a number "
	    "with suffix ms, s, m, h or d; no suffix = seconds)\n");
}

Test(config, memory_keys)
{
	struct ferry_config c;
	const struct queue_config *q;

	load_ok(Q1, &c);
	cr_expect_eq(c.allow_unsafe_eviction, false);
	cr_expect_eq(c.require_persistence, false);
	cr_expect_eq(c.memory_check_interval_ms, 10000);
	cr_expect_eq(c.memory_warn_percent, 80);
	cr_expect_eq(c.memory_refuse_percent, 90);
	cr_expect_eq(c.cache_ttl_ms, 24L * 3600 * 1000);
	cr_expect_eq(c.queues[0].chunk_rows, 1000);
	cr_expect_eq(c.queues[0].dead_max, 100000);
	cr_expect_str_eq(c.queues[0].dead_archive, "");
	config_free(&c);
	load_ok("[ferryd]\nallow_unsafe_eviction = yes\n"
	    "require_persistence = true\nmemory_check_interval = 250ms\n"
	    "memory_warn_percent = 50\nmemory_refuse_percent = 50\n"
	    "cache_ttl = 90\n[queue q]\nchunk_rows = 1000000\ndead_max = 0\n"
	    "dead_archive = /var/lib/ferry/q.dead.jsonl\n", &c);
	cr_expect_eq(c.allow_unsafe_eviction, true);
	cr_expect_eq(c.require_persistence, true);
	cr_expect_eq(c.memory_check_interval_ms, 250);
	cr_expect_eq(c.memory_warn_percent, 50);
	cr_expect_eq(c.memory_refuse_percent, 50);
	cr_expect_eq(c.cache_ttl_ms, 90000);
	q = &c.queues[0];
	cr_expect_eq(q->chunk_rows, 1000000);
	cr_expect_eq(q->dead_max, 0);
	cr_expect_str_eq(q->dead_archive, "/var/lib/ferry/q.dead.jsonl");
	config_free(&c);
	load_ok("[ferryd]\nallow_unsafe_eviction = on\n"
	    "require_persistence = 0\n" Q1, &c);
	cr_expect_eq(c.allow_unsafe_eviction, true);
	cr_expect_eq(c.require_persistence, false);
	config_free(&c);
}

Test(config_errors, memory_keys)
{
	expect_errors("[ferryd]\nallow_unsafe_eviction = maybe\n"
	    "require_persistence =\n" Q1 "dead_archive = dead.jsonl\n",
	    "F:2: [ferryd] allow_unsafe_eviction: \"maybe\" is not yes or no\n"
	    "F:3: [ferryd] require_persistence: \"\" is not yes or no\n"
	    "F:5: [queue q] dead_archive: \"dead.jsonl\" is not an absolute path "
	    "(allowed: empty or /path)\n");
	expect_errors("[ferryd]\nmemory_warn_percent = 95\n" Q1,
	    "F:2: [ferryd] memory_refuse_percent: \"90\" must be >= "
	    "memory_warn_percent (95)\n");
	expect_errors("[ferryd]\nmemory_warn_percent = 70\n"
	    "memory_refuse_percent = 60\n" Q1,
	    "F:3: [ferryd] memory_refuse_percent: \"60\" must be >= "
	    "memory_warn_percent (70)\n");
	expect_errors("[ferryd]\nchunk_rows = 5\n" Q1 "cache_ttl = 1h\n",
	    "F:2: [ferryd] chunk_rows: unknown key (it belongs in a [queue NAME] "
	    "section)\n"
	    "F:4: [queue q] cache_ttl: unknown key (it belongs in the [ferryd] "
	    "section)\n");
}

Test(config_api, queue_changed_memory_keys)
{
	struct ferry_config a, b;

	load_ok(Q1, &a);
	load_ok(Q1 "dead_max = 5\n", &b);
	cr_expect(config_queue_changed(&a.queues[0], &b.queues[0]));
	config_free(&b);
	load_ok(Q1 "dead_archive = /tmp/x\n", &b);
	cr_expect(config_queue_changed(&a.queues[0], &b.queues[0]));
	config_free(&b);
	config_free(&a);
}

/* rate_limit: N/s or plain N jobs per second, 0 or empty for none; a
 * change is a changed queue (its workers are replaced on reload). */
Test(config, rate_limit)
{
	static const struct { const char *v; long want; } ok[] = {
		{ "", 0 }, { "0", 0 }, { "0/s", 0 }, { "500/s", 500 },
		{ "500", 500 }, { "1", 1 }, { "1000000/s", 1000000 },
	};
	struct ferry_config a, b;
	char text[128];

	load_ok(Q1, &a);
	cr_expect_eq(a.queues[0].rate_limit, 0);
	for (size_t i = 0; i < FERRY_ARRAY_LEN(ok); i++) {
		snprintf(text, sizeof(text), Q1 "rate_limit = %s\n", ok[i].v);
		load_ok(text, &b);
		cr_expect_eq(b.queues[0].rate_limit, ok[i].want, "%s: %ld",
		    ok[i].v, b.queues[0].rate_limit);
		if (ok[i].want > 0)
			cr_expect(config_queue_changed(&a.queues[0], &b.queues[0]),
			    "%s", ok[i].v);
		else
			cr_expect_not(config_queue_changed(&a.queues[0],
			    &b.queues[0]), "%s", ok[i].v);
		config_free(&b);
	}
	config_free(&a);
}

Test(config_errors, rate_limit)
{
#define NOT_A_RATE "is not a rate (allowed: N/s or N, jobs per second, " \
	"0..1000000; 0 or empty: no limit)\n"
	expect_errors(Q1 "rate_limit = 30/m\n",
	    "F:2: [queue q] rate_limit: \"30/m\" " NOT_A_RATE);
	expect_errors(Q1 "rate_limit = 1000001/s\n",
	    "F:2: [queue q] rate_limit: \"1000001/s\" " NOT_A_RATE);
	expect_errors(Q1 "rate_limit = 99999999999999999999999\n",
	    "F:2: [queue q] rate_limit: \"99999999999999999999999\" "
	    NOT_A_RATE);
	expect_errors(Q1 "rate_limit = -5\n",
	    "F:2: [queue q] rate_limit: \"-5\" " NOT_A_RATE);
	expect_errors(Q1 "rate_limit = 1.5/s\n",
	    "F:2: [queue q] rate_limit: \"1.5/s\" " NOT_A_RATE);
	expect_errors(Q1 "rate_limit = 5/\n",
	    "F:2: [queue q] rate_limit: \"5/\" " NOT_A_RATE);
	expect_errors(Q1 "rate_limit = /s\n",
	    "F:2: [queue q] rate_limit: \"/s\" " NOT_A_RATE);
	expect_errors("[ferryd]\nrate_limit = 5\n" Q1,
	    "F:2: [ferryd] rate_limit: unknown key (it belongs in a [queue "
	    "NAME] section)\n");
#undef NOT_A_RATE
}

/* --- the rest of the interface --- */

Test(config_api, free_is_safe)
{
	struct ferry_config c;
	struct config_errors errs = { 0 };

	memset(&c, 0, sizeof(c));
	config_free(&c);
	cr_assert_eq(config_load("/nonexistent", &c, &errs), -1);
	config_free(&c);
	config_free(&c);
	config_errors_free(&errs);
	config_errors_free(&errs);
}

Test(config_api, errors_print)
{
	struct config_errors errs = { 0 };
	struct ferry_config c;
	char *buf = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&buf, &len);

	config_load("/nonexistent", &c, &errs);
	config_errors_print(&errs, out);
	fclose(out);
	cr_expect_str_eq(buf, "/nonexistent: cannot open: No such file or "
	    "directory\n");
	free(buf);
	config_errors_free(&errs);
}

Test(config_api, find_queue)
{
	struct ferry_config c;

	load_ok("[queue a]\n[queue b]\n", &c);
	cr_expect_eq(config_find_queue(&c, "b"), &c.queues[1]);
	cr_expect_null(config_find_queue(&c, "c"));
	config_free(&c);
}

Test(config_api, queue_changed)
{
	struct ferry_config c;
	const struct queue_config *a, *b;

	load_ok("[queue a]\nworkers = 1\n[queue b]\nworkers = 9\n"
	    "[queue c]\nbatch_size = 99\n[queue d]\nhandler = exec\n"
	    "command = x\n[queue e]\nhandler = exec\ncommand = y\n"
	    "[queue f]\nmax_job_bytes = 17\n[queue g]\njob_timeout = 301\n",
	    &c);
	a = config_find_queue(&c, "a");
	b = config_find_queue(&c, "b");
	/* Different names, lines and workers; the names are compared too. */
	cr_expect(config_queue_changed(a, b));
	c.queues[1].name[0] = 'a';
	cr_expect_not(config_queue_changed(a, b));
	c.queues[2].name[0] = 'a';
	cr_expect(config_queue_changed(a, &c.queues[2]));
	c.queues[4].name[0] = 'd';
	cr_expect(config_queue_changed(&c.queues[3], &c.queues[4]));
	c.queues[5].name[0] = 'a';
	cr_expect(config_queue_changed(a, &c.queues[5]));
	c.queues[6].name[0] = 'a';
	cr_expect(config_queue_changed(a, &c.queues[6]));
	cr_expect_not(config_queue_changed(&c.queues[6], &c.queues[6]));
	config_free(&c);
}

static int warned;
static char warned_keys[128];

static void
warn_static(const char *key, const char *old_value, const char *new_value)
{
	warned++;
	strcat(warned_keys, key);
	strcat(warned_keys, strcmp(old_value, new_value) != 0 ? " " : "= ");
}

Test(config_api, keep_static)
{
	struct ferry_config old, fresh;

	load_ok("[ferryd]\nuser = a\n" Q1, &old);
	load_ok("[ferryd]\nuser = b\npidfile = /x.pid\ngroup =\n"
	    "redis_port = 7\npg_batches_schema = other\n" Q1, &fresh);
	config_keep_static(&old, &fresh, warn_static);
	cr_expect_eq(warned, 3);
	cr_expect_str_eq(warned_keys, "pidfile user pg_batches_schema ");
	cr_expect_str_eq(fresh.pg_batches_schema, "public");
	cr_expect_str_eq(fresh.pidfile, "/run/ferryd.pid");
	cr_expect_str_eq(fresh.user, "a");
	cr_expect_str_eq(fresh.group, "");
	cr_expect_str_eq(fresh.control_socket, "/run/ferryd.sock");
	cr_expect_eq(fresh.redis_port, 7);
	config_keep_static(&old, &fresh, NULL);
	cr_expect_eq(warned, 3);
	config_free(&old);
	config_free(&fresh);
}

Test(config_api, names)
{
	cr_expect_str_eq(config_handler_name(CONFIG_HANDLER_NOOP), "noop");
	cr_expect_str_eq(config_handler_name(CONFIG_HANDLER_EXEC), "exec");
	cr_expect_str_eq(config_handler_name(CONFIG_HANDLER_POSTGRES),
	    "postgres");
	cr_expect_str_eq(config_handler_name(3), "unknown");
	cr_expect_str_eq(log_level_name(LOG_LEVEL_DEBUG), "debug");
	cr_expect_str_eq(log_level_name(LOG_LEVEL_INFO), "info");
	cr_expect_str_eq(log_level_name(LOG_LEVEL_NOTICE), "notice");
	cr_expect_str_eq(log_level_name(LOG_LEVEL_WARN), "warn");
	cr_expect_str_eq(log_level_name(LOG_LEVEL_ERROR), "error");
	cr_expect_str_eq(log_level_name(-1), "unknown");
}

/* --- handler = postgres: columns, conninfo, copies --- */

Test(config, columns)
{
	struct ferry_config c;

	load_ok(PG "table = t\ncolumns = a, b=json_b ,c\n", &c);
	cr_expect_str_eq(c.queues[0].columns, "a, b=json_b ,c");
	config_free(&c);
}

/* The message is copy_columns_parse's own (the sink parses the same way). */
Test(config_errors, bad_columns)
{
	static const char *const bad[] = {
		"a,,b", "1a", "a=b=c", "a, a", "a-b", "b=", "=b", ",",
		"a, b=c d",
		"x234567890123456789012345678901234567890123456789012345678901234",
	};
	struct copy_columns cols;
	char err[256], *text, *want;
	size_t i;

	for (i = 0; i < FERRY_ARRAY_LEN(bad); i++) {
		err[0] = '\0';
		cr_assert_eq(copy_columns_parse(bad[i], &cols, err,
		    sizeof(err)), -1, "%s", bad[i]);
		cr_assert(err[0] != '\0');
		text = xasprintf(PG "table = t\ncolumns = %s\n", bad[i]);
		want = xasprintf("F:4: [queue ev] columns: \"%s\" %s\n", bad[i],
		    err);
		expect_errors(text, want);
		free(text);
		free(want);
	}
	expect_errors(PG "table = t\ncolumns = a,,b\n", "F:4: [queue ev] "
	    "columns: \"a,,b\" item 2 of columns is empty\n");
}

static char *
conninfo_of(const char *text, const char *queue)
{
	struct ferry_config c;
	char *s;

	load_ok(text, &c);
	s = config_pg_conninfo(&c, queue != NULL ? config_find_queue(&c,
	    queue) : NULL);
	config_free(&c);
	return s;
}

#define expect_conninfo(text, queue, expected) do {			\
	char *got_ = conninfo_of(text, queue);				\
	cr_expect_str_eq(got_, expected);				\
	free(got_);							\
} while (0)

#define PG_FERRYD "[ferryd]\npg_host = db\npg_database = d\npg_user = u\n" \
	"pg_password = p\npg_options = sslmode=require\n"

Test(config_api, conninfo_defaults)
{
	expect_conninfo(Q1, NULL, "port='5432' connect_timeout=5 "
	    "application_name=ferryd");
	expect_conninfo(Q1, "q", "port='5432' connect_timeout=5 "
	    "application_name=ferryd");
}

Test(config_api, conninfo_inherited)
{
	/* Unset or empty in the queue: [ferryd]'s. */
	expect_conninfo(PG_FERRYD PG "table = t\npg_host =\npg_port =\n", "ev",
	    "host='db' port='5432' dbname='d' user='u' password='p' "
	    "sslmode=require connect_timeout=5 application_name=ferryd");
	expect_conninfo(PG_FERRYD PG "table = t\n", NULL,
	    "host='db' port='5432' dbname='d' user='u' password='p' "
	    "sslmode=require connect_timeout=5 application_name=ferryd");
}

Test(config_api, conninfo_overrides)
{
	expect_conninfo(PG_FERRYD PG "table = t\npg_host = /run/pg\n"
	    "pg_port = 6432\npg_database = ev\npg_user = w\npg_password = q\n"
	    "pg_options = sslmode=disable\n", "ev",
	    "host='/run/pg' port='6432' dbname='ev' user='w' password='q' "
	    "sslmode=disable connect_timeout=5 application_name=ferryd");
	/* Some overridden, some not; other queues keep [ferryd]'s. */
	expect_conninfo(PG_FERRYD PG "table = t\npg_user = w\n" Q1, "ev",
	    "host='db' port='5432' dbname='d' user='w' password='p' "
	    "sslmode=require connect_timeout=5 application_name=ferryd");
	expect_conninfo(PG_FERRYD PG "table = t\npg_user = w\n" Q1, "q",
	    "host='db' port='5432' dbname='d' user='u' password='p' "
	    "sslmode=require connect_timeout=5 application_name=ferryd");
}

Test(config_api, conninfo_quoting)
{
	/* ' and \ escaped, blanks kept inside the quotes. */
	expect_conninfo("[ferryd]\npg_password = it's a \\sec ret\\\n"
	    "pg_user = o'neil\n" Q1, NULL, "port='5432' user='o\\'neil' "
	    "password='it\\'s a \\\\sec ret\\\\' connect_timeout=5 "
	    "application_name=ferryd");
	expect_conninfo(PG "table = t\npg_password = '' \\' x\n", "ev",
	    "port='5432' password='\\'\\' \\\\\\' x' connect_timeout=5 "
	    "application_name=ferryd");
}

Test(config_api, conninfo_options_win)
{
	expect_conninfo("[ferryd]\npg_options = connect_timeout=10 "
	    "application_name = batch\n" Q1, NULL, "port='5432' "
	    "connect_timeout=10 application_name = batch");
	/* Only a keyword at the start of a word counts. */
	expect_conninfo("[ferryd]\npg_options = xconnect_timeout=1\n" Q1, NULL,
	    "port='5432' xconnect_timeout=1 connect_timeout=5 "
	    "application_name=ferryd");
	/* The queue's pg_options replace [ferryd]'s. */
	expect_conninfo("[ferryd]\npg_options = connect_timeout=10\n" PG
	    "table = t\npg_options = sslmode=require\n", "ev", "port='5432' "
	    "sslmode=require connect_timeout=5 application_name=ferryd");
}

/* Several hosts: libpq's lists without blanks, and target_session_attrs
 * read-write unless pg_target_session_attrs or pg_options say otherwise. */
Test(config_api, conninfo_multi_host)
{
	expect_conninfo("[ferryd]\npg_host = db1 , db2\npg_port = 5432, 5433\n"
	    Q1, NULL, "host='db1,db2' port='5432,5433' "
	    "target_session_attrs='read-write' connect_timeout=5 "
	    "application_name=ferryd");
	/* one port for both; the queue's hosts over [ferryd]'s one */
	expect_conninfo("[ferryd]\npg_host = db\n" PG "table = t\n"
	    "pg_host = a,b\n", "ev", "host='a,b' port='5432' "
	    "target_session_attrs='read-write' connect_timeout=5 "
	    "application_name=ferryd");
	expect_conninfo("[ferryd]\npg_host = a,b\npg_target_session_attrs = "
	    "primary\n" Q1, NULL, "host='a,b' port='5432' "
	    "target_session_attrs='primary' connect_timeout=5 "
	    "application_name=ferryd");
	expect_conninfo("[ferryd]\npg_host = a,b\n" PG "table = t\n"
	    "pg_target_session_attrs = any\n", "ev", "host='a,b' port='5432' "
	    "target_session_attrs='any' connect_timeout=5 "
	    "application_name=ferryd");
	expect_conninfo("[ferryd]\npg_host = a,b\npg_options = "
	    "target_session_attrs=standby\n" Q1, NULL, "host='a,b' port='5432' "
	    "target_session_attrs=standby connect_timeout=5 "
	    "application_name=ferryd");
	/* one host: libpq's default, unless set */
	expect_conninfo("[ferryd]\npg_host = a\n" Q1, NULL, "host='a' "
	    "port='5432' connect_timeout=5 application_name=ferryd");
	expect_conninfo("[ferryd]\npg_host = a\npg_target_session_attrs = "
	    "read-write\n" Q1, NULL, "host='a' port='5432' "
	    "target_session_attrs='read-write' connect_timeout=5 "
	    "application_name=ferryd");
}

Test(config_api, nhosts)
{
	struct ferry_config c;

	load_ok("[ferryd]\npg_host = a, b\n" PG "table = t\npg_host = x\n"
	    Q1, &c);
	cr_expect_eq(config_pg_nhosts(&c, NULL), 2);
	cr_expect_eq(config_pg_nhosts(&c, config_find_queue(&c, "ev")), 1);
	cr_expect_eq(config_pg_nhosts(&c, config_find_queue(&c, "q")), 2);
	config_free(&c);
	cr_expect_eq(config_pg_list_count(""), 0);
	cr_expect_eq(config_pg_list_count(" a ,b,"), 2);
}

/* What SHOW synchronous_commit / synchronous_standby_names mean for a
 * COMMIT in a failover. */
Test(config_api, commit_risk)
{
	cr_expect_null(config_pg_commit_risk("on", "*"));
	cr_expect_null(config_pg_commit_risk("remote_apply", "FIRST 1 (s1)"));
	cr_expect_null(config_pg_commit_risk("remote_write", "s1"));
	cr_expect_str_eq(config_pg_commit_risk("on", ""),
	    "synchronous_standby_names is empty");
	cr_expect_str_eq(config_pg_commit_risk("on", " "),
	    "synchronous_standby_names is empty");
	cr_expect_str_eq(config_pg_commit_risk("local", "*"),
	    "synchronous_commit is off or local");
	cr_expect_str_eq(config_pg_commit_risk("off", "*"),
	    "synchronous_commit is off or local");
	cr_expect_not_null(config_pg_commit_risk(NULL, NULL));
}

Test(config_api, queue_changed_postgres)
{
	static const char *const variants[] = {
		"table = u\n", "table = s.t\n", "columns = a\n",
		"pg_host = h\n", "pg_port = 5432\n", "pg_database = d\n",
		"pg_user = u\n", "pg_password = p\n", "pg_options = x=y\n",
		"pg_target_session_attrs = any\n",
	};
	struct ferry_config base, c;
	char *text;
	size_t i;

	load_ok(PG "table = t\nworkers = 3\n", &base);
	for (i = 0; i < FERRY_ARRAY_LEN(variants); i++) {
		text = xasprintf(PG "%s%s", strncmp(variants[i], "table", 5) ?
		    "table = t\n" : "", variants[i]);
		load_ok(text, &c);
		cr_expect(config_queue_changed(&base.queues[0], &c.queues[0]),
		    "%s", variants[i]);
		free(text);
		config_free(&c);
	}
	/* Empty is unset: no change. */
	load_ok(PG "table = t\npg_host =\npg_port =\ncolumns =\n", &c);
	cr_expect_not(config_queue_changed(&base.queues[0], &c.queues[0]));
	config_free(&c);
	config_free(&base);
}

/* Loads a and b differ in the first queue's sink only: the queue is the
 * same, its sink is not (and a's sink is the same as itself). */
static void
expect_only_sink_changed(struct ferry_config *a, struct ferry_config *b)
{
	cr_expect_not(config_queue_changed(&a->queues[0], &b->queues[0]));
	cr_expect(config_queue_sink_changed(a, &a->queues[0], b,
	    &b->queues[0]));
	cr_expect_not(config_queue_sink_changed(a, &a->queues[0], a,
	    &a->queues[0]));
}

Test(config_api, queue_sink_changed)
{
	struct ferry_config a, b, n1, n2;

	load_ok("[ferryd]\npg_host = a\n" PG "table = t\n", &a);
	load_ok("[ferryd]\npg_host = b\n" PG "table = t\n", &b);
	expect_only_sink_changed(&a, &b);
	config_free(&b);
	/* Overridden in the queue: [ferryd]'s value does not matter. */
	load_ok("[ferryd]\npg_host = b\n" PG "table = t\npg_host = a\n", &b);
	cr_expect(config_queue_changed(&a.queues[0], &b.queues[0]));
	cr_expect_not(config_queue_sink_changed(&a, &a.queues[0], &b,
	    &b.queues[0]));
	config_free(&b);
	load_ok("[ferryd]\npg_host = a\npg_statement_timeout = 5s\n" PG
	    "table = t\n", &b);
	cr_expect(config_queue_sink_changed(&a, &a.queues[0], &b,
	    &b.queues[0]));
	config_free(&b);
	/* [ferryd]'s multi-host keys reach the conninfo or the check */
	static const char *const ferryd_keys[] = {
		"require_sync_commit = yes\n", "pg_target_session_attrs = any\n",
		"pg_port = 5433\n",
	};
	for (size_t i = 0; i < FERRY_ARRAY_LEN(ferryd_keys); i++) {
		char *text = xasprintf("[ferryd]\npg_host = a\n%s" PG
		    "table = t\n", ferryd_keys[i]);
		load_ok(text, &b);
		cr_expect(config_queue_sink_changed(&a, &a.queues[0], &b,
		    &b.queues[0]), "%s", ferryd_keys[i]);
		config_free(&b);
		free(text);
	}
	/* Not a postgres queue: never. */
	load_ok("[ferryd]\npg_host = a\n" Q1, &n1);
	load_ok("[ferryd]\npg_host = b\npg_statement_timeout = 5s\n" Q1, &n2);
	cr_expect_not(config_queue_sink_changed(&n1, &n1.queues[0], &n2,
	    &n2.queues[0]));
	config_free(&n1);
	config_free(&n2);
	config_free(&a);
}

Test(config_api, queue_copy)
{
	struct ferry_config c;
	struct queue_config q;

	load_ok(PG "table = s.t\ncolumns = a\npg_password = p\npg_port = 7\n"
	    "[queue x]\nhandler = exec\ncommand = /bin/true\n", &c);
	memset(&q, 0, sizeof(q));
	config_queue_copy(&q, &c.queues[0]);
	cr_expect_neq(q.table, c.queues[0].table);
	cr_expect_str_eq(q.table, "s.t");
	cr_expect_str_eq(q.columns, "a");
	cr_expect_str_eq(q.pg_password, "p");
	cr_expect_str_eq(q.command, "");
	cr_expect_str_eq(q.pg_port, "7");
	cr_expect_not(config_queue_changed(&q, &c.queues[0]));
	config_queue_copy(&q, &c.queues[1]);	/* frees the old strings */
	cr_expect_str_eq(q.command, "/bin/true");
	cr_expect_str_eq(q.table, "");
	cr_expect_not(config_queue_changed(&q, &c.queues[1]));
	config_queue_copy(&q, &q);
	config_free(&c);
	/* Outlives the config it came from. */
	cr_expect_str_eq(q.command, "/bin/true");
	config_queue_free(&q);
	cr_expect_null(q.command);
	config_queue_free(&q);
}

/* The commented-out postgres queue of etc/ferryd.ini, uncommented, loads. */
Test(config, example_postgres_queue)
{
	struct ferry_config c;
	const struct queue_config *q;
	FILE *fp = fopen(TEST_SRCDIR "/etc/ferryd.ini", "r");
	char line[256], *text = xstrdup(""), *tmp, *conninfo;
	bool in = false;

	cr_assert_not_null(fp);
	while (fgets(line, sizeof(line), fp) != NULL) {
		in = in || strncmp(line, ";[queue events]", 15) == 0;
		tmp = xasprintf("%s%s", text, in && line[0] == ';' ? line + 1 :
		    line);
		free(text);
		text = tmp;
	}
	fclose(fp);
	cr_assert(in, "no ;[queue events] in etc/ferryd.ini");
	load_ok(text, &c);
	free(text);
	q = config_find_queue(&c, "events");
	cr_assert_not_null(q);
	cr_expect_eq(q->handler, CONFIG_HANDLER_POSTGRES);
	cr_expect_str_eq(q->table, "analytics.events");
	conninfo = config_pg_conninfo(&c, q);
	cr_expect_str_eq(conninfo, "host='127.0.0.1' port='5432' "
	    "dbname='ferry' user='events_writer' password='it\\'s a \\\\secret' "
	    "connect_timeout=5 application_name=ferryd");
	free(conninfo);
	q = config_find_queue(&c, "shop");
	cr_assert_not_null(q);
	cr_expect_str_eq(q->tables, "orders, order_lines");
	cr_expect_eq(config_find_table(&c, "shop", "orders")->mode,
	    CONFIG_MODE_UPSERT);
	cr_expect_eq(config_find_table(&c, "shop", "order_lines")->mode,
	    CONFIG_MODE_INSERT);
	config_free(&c);
}

/* A whole file, NUL-terminated (malloc'd). */
static char *
read_text(const char *path)
{
	FILE *f = fopen(path, "r");
	cr_assert_not_null(f, "cannot read %s", path);
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	rewind(f);
	char *s = malloc((size_t)n + 1);
	cr_assert_eq(fread(s, 1, (size_t)n, f), (size_t)n);
	s[n] = '\0';
	fclose(f);
	return s;
}

/* A line of text that starts with `prefix` followed by one of `ends`. */
static bool
has_line(const char *text, const char *prefix, const char *ends)
{
	size_t n = strlen(prefix);

	for (const char *p = text; p != NULL; p = strchr(p, '\n')) {
		p += *p == '\n';
		if (strncmp(p, prefix, n) == 0 && p[n] != '\0' &&
		    strchr(ends, p[n]) != NULL)
			return true;
	}
	return false;
}

/* Every key the loader knows is in etc/ferryd.ini (set or commented out,
 * with its comment) and in ferryd.ini(5). */
Test(config, every_key_is_documented)
{
	char *ini = read_text(TEST_SRCDIR "/etc/ferryd.ini");
	char *man = read_text(TEST_SRCDIR "/doc/ferryd.ini.5");

	for (int k = 0; k < (int)config_nkeys; k++) {
		int sect;
		const char *name = config_key_name(k, &sect);
		char plain[80], commented[80], man_b[80], man_br[80];
		snprintf(plain, sizeof(plain), "%s =", name);
		snprintf(commented, sizeof(commented), ";%s =", name);
		snprintf(man_b, sizeof(man_b), ".B %s", name);
		snprintf(man_br, sizeof(man_br), ".BR %s", name);
		cr_expect(has_line(ini, plain, " \n") ||
		    has_line(ini, commented, " \n"),
		    "key %s is not in etc/ferryd.ini", name);
		cr_expect(has_line(man, man_b, "\n") || has_line(man, man_br, " "),
		    "key %s is not in doc/ferryd.ini.5", name);
	}
	free(ini);
	free(man);
}

/* Sentinel: a list of HOST:PORT with a master name, never beside a fixed
 * address; WAIT within a third of heartbeat_ttl. */
Test(config, sentinels)
{
	struct ferry_config c;

	load_ok("[ferryd]\nredis_sentinels = 10.0.0.1:26379, s2.example:26380\n"
	    "redis_sentinel_master = my-master.1\nredis_sentinel_password = pw\n"
	    "redis_wait_replicas = 2\nredis_wait_timeout = 250ms\n" Q1, &c);
	cr_expect_str_eq(c.redis_sentinels, "10.0.0.1:26379, s2.example:26380");
	cr_expect_str_eq(c.redis_sentinel_master, "my-master.1");
	cr_expect_str_eq(c.redis_sentinel_password, "pw");
	cr_expect_eq(c.redis_wait_replicas, 2);
	cr_expect_eq(c.redis_wait_timeout_ms, 250);
	config_free(&c);
	load_ok(Q1, &c);
	cr_expect_str_eq(c.redis_sentinels, "");
	cr_expect_eq(c.redis_wait_replicas, 0);
	cr_expect_eq(c.redis_wait_timeout_ms, 1000);
	config_free(&c);
}

Test(config, cluster)
{
	struct ferry_config c;

	load_ok("[ferryd]\nredis_cluster = 10.0.0.1:7000, 10.0.0.2:7001\n"
	    "redis_db = 0\n" Q1, &c);
	cr_expect_str_eq(c.redis_cluster, "10.0.0.1:7000, 10.0.0.2:7001");
	config_free(&c);
}

Test(config_errors, cluster)
{
	expect_errors("[ferryd]\nredis_cluster = a:1\nredis_port = 7000\n"
	    "redis_db = 2\n" Q1,
	    "F:3: [ferryd] redis_port: set together with redis_cluster (allowed: "
	    "one of the two: the cluster nodes say who serves each queue, so "
	    "remove it, or remove redis_cluster)\n"
	    "F:4: [ferryd] redis_db: set together with redis_cluster (allowed: 0 "
	    "only: a cluster has database 0 alone)\n");
	expect_errors("[ferryd]\nredis_cluster = a:1\n"
	    "[queue q]\ncache_key_prefixes = app:\n",
	    "F:4: [queue q] cache_key_prefixes: not with redis_cluster (a cache "
	    "key outside the queue's slot cannot be read and deleted with its "
	    "jobs; use the queue's cache space ferry:{q}:cache:)\n");
	expect_errors("[ferryd]\nredis_cluster = a\n" Q1,
	    "F:2: [ferryd] redis_cluster: \"a\" has \"a\", which is not "
	    "HOST:PORT (allowed: cluster addresses separated by commas, such as "
	    "10.0.0.1:6379, 10.0.0.2:6379)\n");
}

Test(config_errors, sentinels)
{
	expect_errors("[ferryd]\nredis_host = r1\nredis_port = 7000\n"
	    "redis_sentinels = a:1\nredis_sentinel_master = m\n" Q1,
	    "F:2: [ferryd] redis_host: set together with redis_sentinels "
	    "(allowed: one of the two: the sentinels name the primary, so remove "
	    "redis_host, or remove redis_sentinels for a fixed address)\n"
	    "F:3: [ferryd] redis_port: set together with redis_sentinels "
	    "(allowed: one of the two: the sentinels name the primary, so remove "
	    "redis_port, or remove redis_sentinels for a fixed address)\n");
	expect_errors("[ferryd]\nredis_sentinels = a:1\n" Q1,
	    "F:2: [ferryd] redis_sentinel_master: required with redis_sentinels "
	    "(the NAME of \"sentinel monitor NAME ...\" in the sentinels' "
	    "configuration)\n");
	expect_errors("[ferryd]\nredis_sentinels = a:1, b\n"
	    "redis_sentinel_master = m\n" Q1,
	    "F:2: [ferryd] redis_sentinels: \"a:1, b\" has \"b\", which is not "
	    "HOST:PORT (allowed: sentinel addresses separated by commas, such as "
	    "10.0.0.1:26379, 10.0.0.2:26379)\n");
	expect_errors("[ferryd]\nredis_sentinels = a:0\n"
	    "redis_sentinel_master = m\n" Q1,
	    "F:2: [ferryd] redis_sentinels: \"a:0\" has \"a:0\", which is not "
	    "HOST:PORT (allowed: sentinel addresses separated by commas, such as "
	    "10.0.0.1:26379, 10.0.0.2:26379)\n");
	expect_errors("[ferryd]\nredis_sentinel_master = m\n" Q1,
	    "F:2: [ferryd] redis_sentinel_master: is set but redis_sentinels is "
	    "not (allowed: only with redis_sentinels)\n");
	expect_errors("[ferryd]\nredis_sentinels = a:1\n"
	    "redis_sentinel_master = m x\n" Q1,
	    "F:3: [ferryd] redis_sentinel_master: \"m x\" is not valid (allowed: "
	    "1..64 characters of A-Z a-z 0-9 _ . -, the name in the sentinels' "
	    "\"sentinel monitor NAME ...\")\n");
	expect_errors("[ferryd]\nredis_wait_replicas = 1\n"
	    "redis_wait_timeout = 5s\n" Q1,
	    "F:3: [ferryd] redis_wait_timeout: \"5s\" must be <= a third of "
	    "heartbeat_ttl (10s)\n");
}

Test(config, cache_key_prefixes)
{
	struct ferry_config c;

	load_ok(Q1 "cache_key_prefixes = app:cache:, other:\n[queue r]\n", &c);
	cr_expect_str_eq(c.queues[0].cache_key_prefixes, "app:cache:, other:");
	cr_expect_str_eq(c.queues[1].cache_key_prefixes, "");
	config_free(&c);
	/* a prefix that only starts like redis_prefix is not under it */
	load_ok(Q1 "cache_key_prefixes = ferry, ferryx:, app,\n", &c);
	config_free(&c);
}

Test(config_errors, cache_key_prefixes)
{
	const char *tail = " (allowed: empty, or up to 16 key prefixes "
	    "separated by commas, such as app:cache:, other: ; each 1..64 "
	    "printable ASCII characters without blanks)\n";
	char *want;

	want = xasprintf("F:2: [queue q] cache_key_prefixes: \"a:,,b:\" has an "
	    "empty prefix (item 2), which would let a job name any key%s", tail);
	expect_errors(Q1 "cache_key_prefixes = a:,,b:\n", want);
	free(want);
	want = xasprintf("F:2: [queue q] cache_key_prefixes: \", a:\" has an "
	    "empty prefix (item 1), which would let a job name any key%s", tail);
	expect_errors(Q1 "cache_key_prefixes = , a:\n", want);
	free(want);
	want = xasprintf("F:2: [queue q] cache_key_prefixes: \"a: b:, c\" "
	    "prefix \"a: b:\" is not valid%s", tail);
	expect_errors(Q1 "cache_key_prefixes = a: b:, c\n", want);
	free(want);
	want = xasprintf("F:2: [queue q] cache_key_prefixes: \"a,b,c,d,e,f,g,h,"
	    "i,j,k,l,m,n,o,p,q\" has more than 16 prefixes%s", tail);
	expect_errors(Q1 "cache_key_prefixes = a,b,c,d,e,f,g,h,i,j,k,l,m,n,o,p,"
	    "q\n", want);
	free(want);
	/* under redis_prefix: ferry's own keys, checked against the prefix
	 * in use */
	expect_errors(Q1 "cache_key_prefixes = app:, ferry:{q}:\n",
	    "F:2: [queue q] cache_key_prefixes: \"ferry:{q}:\" is under "
	    "redis_prefix ferry: (ferry's own keys, which a job must never "
	    "name); the queue's cache space ferry:{q}:cache: is always allowed, "
	    "list only prefixes outside ferry:\n");
	expect_errors("[ferryd]\nredis_prefix = f2\n" Q1
	    "cache_key_prefixes = ferry:, f2:x\n",
	    "F:4: [queue q] cache_key_prefixes: \"f2:x\" is under redis_prefix "
	    "f2: (ferry's own keys, which a job must never name); the queue's "
	    "cache space f2:{q}:cache: is always allowed, list only prefixes "
	    "outside f2:\n");
}

/* --- redis_user --- */

Test(config, redis_user_needs_password)
{
	expect_errors(Q1 "[ferryd]\nredis_user = ferry\n",
	    "F:3: [ferryd] redis_user: \"ferry\" is set but redis_password is "
	    "not (an ACL user authenticates with both: AUTH user password)\n");
}

Test(config, redis_user_refuses_blanks_and_control_characters)
{
	expect_errors(Q1 "[ferryd]\nredis_password = p\nredis_user = fer ry\n"
	    "redis_user = a\tb\n",
	    "F:4: [ferryd] redis_user: \"fer ry\" is not valid (a Redis ACL user "
	    "name: no blanks or control characters)\n"
	    "F:5: [ferryd] redis_user: set twice (first at line 4)\n");
	expect_errors(Q1 "[ferryd]\nredis_password = p\nredis_user = a\x01b\n",
	    "F:4: [ferryd] redis_user: \"a\x01b\" is not valid (a Redis ACL "
	    "user name: no blanks or control characters)\n");
}

Test(config, redis_user_with_password_loads)
{
	struct ferry_config c;

	load_ok(Q1 "[ferryd]\nredis_user = ferry\nredis_password = pw\n", &c);
	cr_expect_str_eq(c.redis_user, "ferry");
	cr_expect_str_eq(c.redis_password, "pw");
	config_free(&c);
}

/* --- password files (config_secret.c) --- */

/* A 0600 temp file holding `text`; its path (malloc'd). */
static char *
secret_file(const char *text)
{
	char *path = write_tmp(text);

	cr_assert_eq(chmod(path, 0600), 0);
	return path;
}

Test(config, password_files_fill_the_password_keys)
{
	struct ferry_config c;
	char *redis = secret_file("r-pw\nsecond line ignored\n");
	char *pg = secret_file("pg pw with blanks\r\n");
	char *qpg = secret_file("queue-pw");        /* no newline at all */
	char *text = xasprintf("[ferryd]\nredis_password_file = %s\n"
	    "pg_password_file = %s\n[queue q]\nhandler = postgres\ntable = t\n"
	    "pg_password_file = %s\n[queue r]\n", redis, pg, qpg);

	load_ok(text, &c);
	cr_expect_str_eq(c.redis_password, "r-pw");
	cr_expect_str_eq(c.redis_password_file, redis);
	cr_expect_str_eq(c.pg_password, "pg pw with blanks");
	cr_expect_str_eq(config_find_queue(&c, "q")->pg_password, "queue-pw");
	cr_expect_str_eq(config_find_queue(&c, "r")->pg_password, "");
	char *conninfo = config_pg_conninfo(&c, config_find_queue(&c, "q"));
	cr_expect_not_null(strstr(conninfo, "password='queue-pw'"), "%s",
	    conninfo);
	free(conninfo);
	config_free(&c);
	/* a reload reads the file again */
	h_rewrite(pg, "changed\n");
	load_ok(text, &c);
	cr_expect_str_eq(c.pg_password, "changed");
	config_free(&c);
	unlink(redis);
	unlink(pg);
	unlink(qpg);
	free(redis);
	free(pg);
	free(qpg);
	free(text);
}

Test(config, http_token_file)
{
	struct ferry_config c;
	char *good = secret_file("0123456789abcdef0123\n");
	char *weak = secret_file("abc\n");
	char *text = xasprintf("[ferryd]\nhttp_token_file = %s\n" Q1, good);

	load_ok(text, &c);
	cr_expect_str_eq(c.http_token, "0123456789abcdef0123");
	config_free(&c);
	free(text);
	text = xasprintf("[ferryd]\nhttp_token_file = %s\n" Q1, weak);
	char *want = xasprintf("F:2: [ferryd] http_token_file: the first line "
	    "of %s is too short (at least 16 characters; e.g. openssl rand -hex "
	    "24)\n", weak);
	expect_errors(text, want);
	free(want);
	free(text);
	text = xasprintf("[ferryd]\nhttp_token = 0123456789abcdef0123\n"
	    "http_token_file = %s\n" Q1, good);
	want = xasprintf("F:3: [ferryd] http_token_file: set together with "
	    "http_token (allowed: one of the two; remove http_token)\n");
	expect_errors(text, want);
	free(want);
	free(text);
	unlink(good);
	unlink(weak);
	free(good);
	free(weak);
}

Test(config, password_file_errors)
{
	char *empty = secret_file(""), *blank = secret_file("\nsecond\n");
	char *text, *want;

	/* missing, empty, first line empty, relative; inline and file both */
	text = xasprintf(Q1 "[ferryd]\nredis_password_file = /nonexistent/pw\n"
	    "pg_password_file = %s\n[queue r]\npg_password_file = %s\n"
	    "[queue s]\npg_password_file = pw.txt\n", empty, blank);
	want = xasprintf("F:8: [queue s] pg_password_file: \"pw.txt\" is not "
	    "an absolute path (allowed: empty or /path)\n"
	    "F:3: [ferryd] redis_password_file: cannot read /nonexistent/pw: No "
	    "such file or directory (it is read at start and on every reload, "
	    "then as [ferryd] user: make it readable by that user's group, e.g. "
	    "mode 0640)\n"
	    "F:4: [ferryd] pg_password_file: %s is empty (write the password on "
	    "its first line)\n"
	    "F:6: [queue r] pg_password_file: %s is empty (write the password "
	    "on its first line)\n", empty, blank);
	expect_errors(text, want);
	free(text);
	free(want);
	char *pw = secret_file("p\n");
	text = xasprintf(Q1 "[ferryd]\npg_password = inline\n"
	    "pg_password_file = %s\n[queue r]\npg_password = x\n"
	    "pg_password_file = %s\n", pw, pw);
	expect_errors(text, "F:4: [ferryd] pg_password_file: set together with "
	    "pg_password (allowed: one of the two; remove pg_password)\n"
	    "F:7: [queue r] pg_password_file: set together with pg_password "
	    "(allowed: one of the two; remove pg_password)\n");
	free(text);
	/* a password from a file satisfies redis_user */
	text = xasprintf(Q1 "[ferryd]\nredis_user = ferry\n"
	    "redis_password_file = %s\n", pw);
	expect_errors(text, "");
	free(text);
	unlink(pw);
	unlink(empty);
	unlink(blank);
	free(pw);
	free(empty);
	free(blank);
}

Test(config, password_file_first_line_at_most_1024_bytes)
{
	char line[1100], *value = NULL;

	memset(line, 'x', 1025);
	line[1025] = '\0';
	char *path = secret_file(line);
	char *why = config_secret_read(path, &value);
	char *want = xasprintf("%s: the first line is longer than 1024 bytes "
	    "(it must hold the password alone)", path);
	cr_expect_str_eq(why, want);
	cr_expect_null(value);
	free(why);
	free(want);
	line[1024] = '\n';
	h_rewrite(path, line);
	cr_expect_null(config_secret_read(path, &value));
	cr_expect_eq(strlen(value), 1024);
	free(value);
	unlink(path);
	free(path);
}

/* Which file holds a password that every user may read. */
static const char *
exposed(const char *text, mode_t mode, mode_t *got)
{
	static char key[64];
	struct ferry_config c;
	char *path = write_tmp(text);
	struct config_errors errs = { 0 };

	cr_assert_eq(chmod(path, mode), 0);
	cr_assert_eq(config_load(path, &c, &errs), 0, "%s",
	    errs.n ? errs.msgs[0] : "");
	const char *file = NULL;
	const char *k = config_secret_exposed(&c, &file, got);
	snprintf(key, sizeof(key), "%s", k != NULL ? k : "(none)");
	if (k != NULL && strcmp(k + strlen(k) - 5, "_file") != 0)
		cr_expect_str_eq(file, path);
	config_free(&c);
	unlink(path);
	free(path);
	return key;
}

Test(config, password_readable_by_all_is_exposed)
{
	mode_t mode = 0;
	char *pw = secret_file("p\n");
	char *from_file = xasprintf(Q1 "[ferryd]\npg_password_file = %s\n", pw);

	cr_expect_str_eq(exposed(Q1 "[ferryd]\nredis_password = p\n", 0644,
	    &mode), "redis_password");
	cr_expect_eq(mode, 0644);
	cr_expect_str_eq(exposed(Q1 "[ferryd]\nredis_sentinels = a:1\n"
	    "redis_sentinel_master = m\nredis_sentinel_password = p\n", 0604,
	    &mode), "redis_sentinel_password");
	cr_expect_eq(mode, 0604);
	cr_expect_str_eq(exposed("[queue q]\npg_password = p\n", 0666, &mode),
	    "pg_password");
	cr_expect_str_eq(exposed(Q1 "[ferryd]\npg_password = p\n", 0640,
	    &mode), "(none)");
	cr_expect_str_eq(exposed(Q1 "[ferryd]\npg_password = p\n", 0600,
	    &mode), "(none)");
	cr_expect_str_eq(exposed(Q1 "[ferryd]\npg_user = u\n", 0644, &mode),
	    "(none)");
	cr_expect_str_eq(exposed(from_file, 0644, &mode), "(none)");
	/* the password file itself, readable by all */
	cr_assert_eq(chmod(pw, 0644), 0);
	cr_expect_str_eq(exposed(from_file, 0640, &mode), "pg_password_file");
	cr_expect_eq(mode, 0644);
	unlink(pw);
	free(pw);
	free(from_file);
}

/* --- mode = update, deletes --- */

Test(config, update_and_delete_keys)
{
	struct ferry_config c;

	load_ok(PG "table = t\nmode = upsert\nkey = id\n", &c);
	cr_expect_eq(c.queues[0].mode, CONFIG_MODE_UPSERT);
	cr_expect_str_eq(c.queues[0].op_member, "op");
	cr_expect_eq(c.queues[0].missing, CONFIG_MISSING_DEAD);
	config_free(&c);
	load_ok(PG "table = t\nmode = update\nkey = id\nmissing = ignore\n"
	    "op_member = action\nversion = v\n", &c);
	cr_expect_eq(c.queues[0].mode, CONFIG_MODE_UPDATE);
	cr_expect_eq(c.queues[0].missing, CONFIG_MISSING_IGNORE);
	cr_expect_str_eq(c.queues[0].op_member, "action");
	cr_expect_str_eq(config_mode_name(c.queues[0].mode), "update");
	config_free(&c);
	load_ok(PG "table = t\nmode = update\nkey = id\nmissing = dead\n"
	    "op_member =\n", &c);
	cr_expect_eq(c.queues[0].missing, CONFIG_MISSING_DEAD);
	cr_expect_str_eq(c.queues[0].op_member, "");
	config_free(&c);
}

Test(config_errors, update_and_delete_keys)
{
	expect_errors(PG "table = t\nmode = update\n", "F:4: [queue ev] key: "
	    "required when mode = update (allowed: the columns of a primary "
	    "key or unique index of the table, such as key = id)\n");
	expect_errors(PG "table = t\nmode = update\nkey = id\nmissing = skip\n",
	    "F:6: [queue ev] missing: \"skip\" is not one of ignore, dead\n");
	expect_errors(PG "table = t\nmode = upsert\nkey = id\n"
	    "missing = ignore\n", "F:6: [queue ev] missing: is set but mode = "
	    "upsert (only used with mode = update)\n");
	expect_errors(PG "table = t\nmissing = dead\n", "F:4: [queue ev] "
	    "missing: is set but mode = insert (only used with mode = "
	    "update)\n");
	expect_errors(PG "table = t\nop_member = op\n", "F:4: [queue ev] "
	    "op_member: \"op\" is set but mode = insert (deletes are only read "
	    "with mode = upsert or update; mode = insert writes every job as "
	    "a row)\n");
	expect_errors(PG "table = t\nmode = upsert\nkey = id\n"
	    "op_member = a-b\n", "F:6: [queue ev] op_member: \"a-b\" is not a "
	    "valid member name (allowed: 1..63 characters of A-Z a-z 0-9 _, "
	    "not starting with a digit, or empty for no deletes)\n");
	expect_errors(PG "table = t\nmode = delete\n", "F:4: [queue ev] mode: "
	    "\"delete\" is not one of insert, upsert, update\n");
}

/* --- several tables --- */

#define TABLES PG "tables = orders, shop.lines\n"

Test(config, tables)
{
	struct ferry_config c;
	const struct queue_config *o, *l;

	load_ok(TABLES "table_member = table\nmode = upsert\nkey = id\n"
	    "[table ev shop.lines]\nmode = insert\nkey =\ncolumns = order_id, "
	    "item\n", &c);
	cr_assert_eq(c.ntables, 2);
	o = config_find_table(&c, "ev", "orders");
	l = config_find_table(&c, "ev", "shop.lines");
	cr_assert_not_null(o);
	cr_assert_not_null(l);
	cr_expect_str_eq(c.queues[0].table_member, "table");
	/* orders has no section: the queue's keys */
	cr_expect_eq(o->mode, CONFIG_MODE_UPSERT);
	cr_expect_str_eq(o->key, "id");
	cr_expect_str_eq(o->columns, "");
	cr_expect_str_eq(o->name, "ev");
	cr_expect_eq(l->mode, CONFIG_MODE_INSERT);
	cr_expect_str_eq(l->key, "");
	cr_expect_str_eq(l->columns, "order_id, item");
	cr_expect_str_eq(l->op_member, "op");
	cr_expect_null(config_find_table(&c, "ev", "other"));
	config_free(&c);
}

Test(config_errors, tables)
{
	expect_errors(PG "tables = a, 1b\n", "F:3: [queue ev] tables: \"a, "
	    "1b\" \"1b\" is not a valid table name (allowed: names or "
	    "schema.names separated by commas, each part 1..63 characters of "
	    "A-Z a-z 0-9 _, not starting with a digit)\n");
	expect_errors(PG "tables = a, b, a\n", "F:3: [queue ev] tables: \"a, "
	    "b, a\" table \"a\" is named twice (allowed: each table once)\n");
	expect_errors(PG "table = t\ntables = a, b\n", "F:4: [queue ev] "
	    "tables: set together with table (allowed: one of the two: table "
	    "for one table, tables for several)\n");
	expect_errors(PG "table = t\ntable_member = table\n", "F:4: [queue ev] "
	    "table_member: \"table\" is set but tables is not (only used with "
	    "tables)\n");
	expect_errors(PG "tables = a, b\ntable_member = t-x\n", "F:4: [queue "
	    "ev] table_member: \"t-x\" is not a valid member name (allowed: "
	    "1..63 characters of A-Z a-z 0-9 _, not starting with a digit, or "
	    "empty: \"data\" holds one array per table)\n");
	expect_errors("[queue ev]\ntables = a, b\n", "F:2: [queue ev] tables: "
	    "\"a, b\" is set but handler = noop (only used with handler = "
	    "postgres)\n");
	expect_errors(PG "tables = a, b\n[table ev c]\ncolumns = x\n", "F:4: "
	    "[table ev c]: \"c\" is not one of [queue ev] tables (allowed: a, "
	    "b)\n");
	expect_errors(PG "tables = a, b\n[table ev a]\nworkers = 2\n", "F:5: "
	    "[table ev a] workers: not a key of a table (allowed: columns, "
	    "mode, key, update_columns, version, missing; the others go in "
	    "[queue ev])\n");
	expect_errors(PG "tables = a, b\n[table ev a]\nmode = merge\n", "F:5: "
	    "[table ev a] mode: \"merge\" is not one of insert, upsert, "
	    "update\n");
	expect_errors(PG "tables = a, b\n[table ev a]\nmode = upsert\n", "F:4: "
	    "[table ev a] key: required when mode = upsert (allowed: the "
	    "columns of a primary key or unique index of the table, such as "
	    "key = id)\n");
	expect_errors(PG "tables = a, b\n[table ev b]\nversion = v\n", "F:5: "
	    "[table ev b] version: \"v\" is set but mode = insert (only used "
	    "with mode = upsert or update)\n");
	expect_errors(PG "tables = a, b\n[table ev a]\nmode = upsert\n"
	    "key = id\nkey = id\n", "F:7: [table ev a] key: set twice (first "
	    "at line 6)\n");
	expect_errors(PG "tables = a, b\n[table ev a]\n[table ev a]\n", "F:5: "
	    "[table ev a]: defined twice (first at line 4)\n");
	expect_errors("[table ev a]\nkey = id\n" PG "tables = a\n", "F:1: "
	    "[table ev a]: queue \"ev\" is not defined above (allowed: a [queue "
	    "NAME] section before it)\n");
	expect_errors(PG "tables = a\n[table ev]\n", "F:4: [table ev]: "
	    "expected [table QUEUE TABLE] (a queue defined above and one of its "
	    "tables)\n");
	expect_errors(PG, "F:2: [queue ev] table: required when handler = "
	    "postgres\n");
	/* the queue's keys are the tables' defaults: checked per table */
	expect_errors(PG "tables = a, b\nmode = upsert\n[table ev a]\n"
	    "key = id\n", "F:3: [table ev b] key: required when mode = upsert "
	    "(allowed: the columns of a primary key or unique index of the "
	    "table, such as key = id)\n");
	expect_errors(PG "tables = a, b\nkey = id\nop_member = action\n"
	    "missing = ignore\n[table ev a]\nmode = update\n", "");
}

/* A [table] section changed on reload: the queue's workers must go. */
Test(config_api, table_section_changed)
{
	struct ferry_config a, b;

	load_ok(TABLES "[table ev orders]\ncolumns = id\n", &a);
	load_ok(TABLES "[table ev orders]\ncolumns = id, total\n", &b);
	expect_only_sink_changed(&a, &b);
	config_free(&b);
	/* the same keys, set in the queue instead: the tables are the same */
	load_ok(TABLES "columns = id\n[table ev shop.lines]\ncolumns =\n", &b);
	cr_expect(config_queue_changed(&a.queues[0], &b.queues[0]));
	cr_expect_not(config_queue_sink_changed(&a, &a.queues[0], &b,
	    &b.queues[0]));
	config_free(&b);
	config_free(&a);
}
