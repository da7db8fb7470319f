/* test_acl.c - ferry under Redis 6+ ACLs: a Redis whose default user is off,
 * ferry's own user with exactly the ACL line of doc/security.md, the
 * producers' user with its producer lines (ready, cache keys, scheduled); refused
 * credentials at start and while running. */
#include <criterion/criterion.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "util.h"

static struct ferryd d;

static void
teardown(void)
{
	h_teardown(&d);
}

TestSuite(acl, .fini = teardown, .timeout = 600);

#define FERRY_PW "ferry-pw"
#define QUEUE "[queue q]\nworkers = 2\nbatch_size = 50\n"

/* Run every line of doc/security.md starting with `start`, SECRET replaced
 * by pw, split at blanks as redis-cli would; returns how many. */
static int
doc_acl(const char *start, const char *pw)
{
	char *text = h_read_file(TEST_SRCDIR "/doc/security.md"), *line, *save;
	int n = 0;

	for (line = strtok_r(text, "\n", &save); line != NULL;
	    line = strtok_r(NULL, "\n", &save)) {
		line += strspn(line, " ");
		if (strncmp(line, start, strlen(start)) != 0)
			continue;
		const char *argv[128];
		char words[4096], *w;
		int argc = 0;
		snprintf(words, sizeof(words), "%s", line);
		for (w = words; *w != '\0' && argc < 127;) {
			char *end;
			if (*w == '"') {        /* "(a selector)" as redis-cli */
				end = strchr(++w, '"');
				cr_assert_not_null(end, "%s", line);
			} else {
				end = w + strcspn(w, " ");
			}
			bool last = *end == '\0';
			*end = '\0';
			argv[argc++] = strcmp(w, ">SECRET") == 0 ? pw : w;
			w = last ? end : end + 1;
			w += strspn(w, " ");
		}
		redisReply *r = redisCommandArgv(d.rc, argc, argv, NULL);
		cr_assert(r != NULL && r->type == REDIS_REPLY_STATUS, "%s: %s",
		    line, r != NULL ? r->str : d.rc->errstr);
		freeReplyObject(r);
		n++;
	}
	free(text);
	return n;
}

/* Redis with ferry's and the producers' users from doc/security.md, an admin
 * user for the test itself, and the default user off. */
static void
setup(const char *ferryd_extra)
{
	h_setup(&d, ferryd_extra, QUEUE);
	cr_assert_eq(doc_acl("ACL SETUSER ferry ", ">" FERRY_PW), 1);
	cr_assert_eq(doc_acl("ACL SETUSER producer ", ">producer-pw"), 4);
	freeReplyObject(h_redis(&d, "ACL SETUSER admin on >admin-pw ~* &* "
	    "+@all"));
	freeReplyObject(h_redis(&d, "AUTH admin admin-pw"));
	freeReplyObject(h_redis(&d, "ACL SETUSER default off"));
	freeReplyObject(h_redis(&d, "CLIENT KILL USER default"));
}

/* What the ACL refused ferry so far (ACL LOG entries). */
static long
acl_denials(void)
{
	redisReply *r = h_redis(&d, "ACL LOG");
	long n = (long)r->elements;

	for (size_t i = 0; i < r->elements; i++)
		for (size_t j = 0; j + 1 < r->element[i]->elements; j += 2)
			if (r->element[i]->element[j + 1]->type == REDIS_REPLY_STRING)
				fprintf(stderr, "ACL LOG %s=%s\n",
				    r->element[i]->element[j]->str,
				    r->element[i]->element[j + 1]->str);
	freeReplyObject(r);
	return n;
}

Test(acl, ferry_user_end_to_end)
{
	struct h_run run;
	char *lines = malloc(1000 * 24 + 1), *p = lines;

	setup("redis_user = ferry\nredis_password = " FERRY_PW "\n");
	h_start(&d, 2);
	for (int i = 0; i < 1000; i++)
		p += sprintf(p, "{\"id\":\"j%d\",\"n\":%d}\n", i, i);
	cr_assert_eq(h_ctl(&run, d.config, lines, "enqueue", "-q", "q", "-",
	    NULL), 0, "enqueue: %s", run.err);
	h_run_free(&run);
	free(lines);
	h_wait_redis_int(&d, 1000, "HGET ferry:{q}:stats done");
	cr_assert_eq(h_ctl(&run, d.config, NULL, "stats", "--json", "q", NULL),
	    0, "stats: %s", run.err);
	cr_assert(strstr(run.out, "\"done\": 1000") != NULL ||
	    strstr(run.out, "\"done\":1000") != NULL, "%s", run.out);
	h_run_free(&run);
	h_assert_queue_empty(&d, "q");
	cr_assert_eq(acl_denials(), 0, "the ACL refused ferry something");
	h_stop(&d);
	cr_assert_eq(acl_denials(), 0, "the ACL refused ferry something");
}

Test(acl, wrong_password_refuses_to_start)
{
	struct h_run run;
	char *out;

	setup("redis_user = ferry\nredis_password = wrong\n");
	h_expect_log(&d, "refused AUTH as user ferry");
	h_expect_log(&d, "requires a password (NOAUTH");
	int st = h_run_ferryd((const char *const[]){ "-f", "-c", d.config,
	    NULL }, &out);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 1, "status %d: %s", st,
	    out);
	cr_assert(strstr(out, "refused AUTH as user ferry (WRONGPASS") != NULL,
	    "%s", out);
	cr_assert(strstr(out, "check [ferryd] redis_user and redis_password "
	    "against the server's ACL (ACL GETUSER ferry); not started") != NULL,
	    "%s", out);
	free(out);
	cr_assert_eq(access(d.pidfile, F_OK), -1, "a pidfile was written");
	cr_assert_neq(h_ctl(&run, d.config, NULL, "stats", "q", NULL), 0);
	cr_assert(strstr(run.err, "refused AUTH as user ferry") != NULL, "%s",
	    run.err);
	h_run_free(&run);

	/* no credentials at all, default user off: NOAUTH, not started */
	h_config(&d, NULL, QUEUE);
	st = h_run_ferryd((const char *const[]){ "-f", "-c", d.config, NULL },
	    &out);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 1, "status %d: %s", st,
	    out);
	cr_assert(strstr(out, "requires a password (NOAUTH") != NULL, "%s", out);
	free(out);
	h_stop(&d);
}

/* Every command of cmds is refused on c (NOPERM). */
static void
assert_refused(redisContext *c, const char *const *cmds, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		redisReply *r = redisCommand(c, cmds[i]);
		cr_assert(r != NULL && r->type == REDIS_REPLY_ERROR &&
		    strncmp(r->str, "NOPERM", 6) == 0, "%s: %s", cmds[i],
		    r == NULL ? c->errstr : r->type == REDIS_REPLY_ERROR ? r->str :
		    "allowed");
		freeReplyObject(r);
	}
}

Test(acl, producer_pushes_onto_ready_only)
{
	struct timeval tv = { 5, 0 };
	redisContext *c;
	redisReply *r;

	setup(NULL);
	c = redisConnectWithTimeout("127.0.0.1", d.redis.port, tv);
	cr_assert(c != NULL && c->err == 0);
	r = redisCommand(c, "AUTH producer producer-pw");
	cr_assert(r != NULL && r->type == REDIS_REPLY_STATUS);
	freeReplyObject(r);
	r = redisCommand(c, "LPUSH ferry:{q}:ready {\"n\":1}");
	cr_assert(r != NULL && r->type == REDIS_REPLY_INTEGER, "%s",
	    r != NULL ? r->str : c->errstr);
	freeReplyObject(r);
	/* delayed jobs by hand: the producers' scheduled set, nothing else */
	r = redisCommand(c, "ZADD ferry:{q}:scheduled 0 {\"n\":2}");
	cr_assert(r != NULL && r->type == REDIS_REPLY_INTEGER, "%s",
	    r != NULL ? r->str : c->errstr);
	freeReplyObject(r);
	r = redisCommand(c, "SET ferry:{q}:cache:1 x");
	cr_assert(r != NULL && r->type == REDIS_REPLY_STATUS, "%s",
	    r != NULL ? r->str : c->errstr);
	freeReplyObject(r);
	const char *refused[] = {
		"LPUSH ferry:{q}:requeue x", "DEL ferry:{q}:ready",
		"LRANGE ferry:{q}:ready 0 -1", "HSET ferry:{q}:owners w x",
		"LPUSH ferry:{q}:dead x", "RPUSH ferry:{q}:requeue x",
		"SET ferry:{q}:ready x", "LPUSH other:list x",
		"EXPIRE ferry:{q}:ready 1", "LPUSH ferry:{q}:cache:2 x",
		"GET ferry:{q}:cache:1", "EVAL return 1 0",
		"ZADD ferry:{q}:delayed 0 x", "LPUSH ferry:{q}:scheduled x",
		"ZADD ferry:{q}:ready 0 x", "ZREM ferry:{q}:scheduled x",
	};
	assert_refused(c, refused, FERRY_ARRAY_LEN(refused));
	redisFree(c);
	cr_assert_eq(h_redis_int(&d, "LLEN ferry:{q}:ready"), 1);
	cr_assert_eq(h_redis_int(&d, "EXISTS ferry:{q}:requeue"), 0);
	h_stop(&d);
}

/* The password changes under a running ferryd: each process says so once
 * (not once a retry), nothing crashes, and it carries on when the ACL is
 * right again. */
Test(acl, refused_auth_while_running_is_an_outage)
{
	setup("redis_user = ferry\nredis_password = " FERRY_PW "\n");
	h_config(&d, "redis_user = ferry\nredis_password = " FERRY_PW "\n",
	    "[queue q]\nworkers = 1\n");
	h_expect_log(&d, "refused AUTH as user ferry");
	h_start(&d, 1);
	pid_t kids[4], worker;
	cr_assert_eq(h_children(d.pid, kids, 4), 1);
	worker = kids[0];
	h_push_jobs(&d, "q", 0, 10);
	h_wait_redis_int(&d, 10, "HGET ferry:{q}:stats done");
	freeReplyObject(h_redis(&d, "ACL SETUSER ferry resetpass >changed"));
	freeReplyObject(h_redis(&d, "CLIENT KILL USER ferry"));
	h_wait_log(&d, "refused AUTH as user ferry", 2);   /* master, worker */
	h_push_jobs(&d, "q", 10, 10);
	h_sleep_ms(4000);
	cr_assert_eq(h_count_in_file(d.log, "refused AUTH as user ferry"), 2,
	    "one line per process, not one per retry");
	cr_assert_eq(h_children(d.pid, kids, 4), 1);
	cr_assert_eq(kids[0], worker, "the worker was restarted");
	freeReplyObject(h_redis(&d, "ACL SETUSER ferry resetpass >" FERRY_PW));
	h_wait_redis_int(&d, 20, "HGET ferry:{q}:stats done");
	h_wait_log(&d, "redis reachable again", 2);
	cr_assert_eq(h_count_in_file(d.log, "refused AUTH as user ferry"), 2);
	h_stop(&d);
}

/* A producer with the enqueuer lines of doc/security.md: ferryctl enqueue
 * works through them on a queue that keeps ids (and says nothing of an
 * unchecked memory); by hand, that producer cannot write the config hash
 * (no counter to move back, no window to shorten), nor any key of
 * ferry's own state. */
Test(acl, enqueuer_enqueues_and_moves_no_counter)
{
	struct timeval tv = { 5, 0 };
	struct h_run run;
	char ctlconf[400];

	setup(NULL);
	cr_assert_eq(doc_acl("ACL SETUSER enqueuer ", ">enqueuer-pw"), 8);
	h_config(&d, NULL, "[queue q]\nworkers = 0\n"
	    "idempotency_window = 10m\n");
	snprintf(ctlconf, sizeof(ctlconf), "%s/enqueuer.ini", d.dir);
	char *text = h_read_file(d.config), *at = strstr(text, "[ferryd]\n");
	cr_assert_not_null(at);
	at += strlen("[ferryd]\n");
	h_write_file(ctlconf, "%.*sredis_user = enqueuer\n"
	    "redis_password = enqueuer-pw\n%s", (int)(at - text), text, at);
	free(text);
	const char *jobs = "{\"id\":\"a\",\"data\":[1,2,3]}\n"
	    "{\"id\":\"b\",\"data\":[4]}\n";
	cr_assert_eq(h_ctl(&run, ctlconf, jobs, "enqueue", "--cache",
	    "--chunk-rows", "2", "q", "-", NULL), 0, "%s", run.err);
	cr_assert_str_eq(run.out, "a\na:2\nb\n");
	cr_assert_null(strstr(run.err, "not checked"), "%s", run.err);
	h_run_free(&run);
	cr_assert_eq(h_ctl(&run, ctlconf, jobs, "enqueue", "--cache",
	    "--chunk-rows", "2", "q", "-", NULL), 0, "%s", run.err);
	cr_assert_str_eq(run.out, "a already accepted\na:2 already accepted\n"
	    "b already accepted\n");
	h_run_free(&run);
	cr_assert_eq(h_redis_int(&d, "LLEN ferry:{q}:ready"), 3);

	redisContext *c = redisConnectWithTimeout("127.0.0.1", d.redis.port, tv);
	cr_assert(c != NULL && c->err == 0);
	redisReply *r = redisCommand(c, "AUTH enqueuer enqueuer-pw");
	cr_assert(r != NULL && r->type == REDIS_REPLY_STATUS);
	freeReplyObject(r);
	const char *refused[] = {
		"HINCRBY ferry:{q}:config ids_calls -1",
		"HSET ferry:{q}:config idempotency_window 1",
		"HDEL ferry:{q}:config idempotency_window",
		"DEL ferry:{q}:config", "DEL ferry:{q}:ids",
		"ZREM ferry:{q}:ids a", "HDEL ferry:{q}:idsha a",
		"LPUSH ferry:{q}:requeue x", "HSET ferry:{q}:owners w m",
		"ZADD ferry:{q}:delayed 0 x", "LPUSH ferry:{q}:dead x",
		"HSET ferry:{q}:bkeys w x", "SET ferry:{q}:cache:x y",
	};
	assert_refused(c, refused, FERRY_ARRAY_LEN(refused));
	redisFree(c);
	cr_assert_eq(h_redis_int(&d, "HGET ferry:{q}:config idempotency_window"),
	    600000);
	h_stop(&d);
}
