/* test_identity.c - each master's identity in Redis is its own: a random
 * part per start keeps apart replicas that share a hostname and run
 * ferryd as pid 1 (each in its own PID namespace here), and a master whose
 * id is held by a live heartbeat of another start refuses to run, at start
 * or when a later beat finds its entry taken; an entry whose deadline
 * passed holds the id no more. */
#include <criterion/criterion.h>
#include <regex.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

static struct ferryd d, d2;
static pid_t ns[2];

static void
teardown(void)
{
	for (int i = 0; i < 2; i++) {
		if (ns[i] > 0)
			h_stop_in_pid_namespace(ns[i]);
		ns[i] = 0;
	}
	h_teardown(&d2);
	h_teardown(&d);
}

TestSuite(identity, .fini = teardown, .timeout = 300);

/* The heartbeat entries in d's Redis: their count, the ids in ids[]. */
static int
master_ids(char ids[][128], int max)
{
	redisReply *r = h_redis(&d, "HKEYS ferry:{q}:masters");
	int n = 0;

	for (size_t i = 0; i < r->elements && n < max; i++)
		snprintf(ids[n++], 128, "%s", r->element[i]->str);
	freeReplyObject(r);
	return n;
}

/* The token in master id's entry ("TOKEN DEADLINE"), into out. */
static void
entry_token(const char *id, char *out, size_t size)
{
	redisReply *v = h_redis(&d, "HGET ferry:{q}:masters %s", id);

	cr_assert_eq(v->type, REDIS_REPLY_STRING, "no entry for %s", id);
	snprintf(out, size, "%.*s", (int)strcspn(v->str, " "), v->str);
	cr_assert(strchr(v->str, ' ') != NULL, "entry %s", v->str);
	freeReplyObject(v);
}

static bool
matches(const char *s, const char *pattern)
{
	regex_t re;
	bool ok;

	cr_assert_eq(regcomp(&re, pattern, REG_EXTENDED | REG_NOSUB), 0);
	ok = regexec(&re, s, 0, NULL, 0) == 0;
	regfree(&re);
	return ok;
}

/* Two replicas on one host name, both pid 1: host:1 alone would be one id
 * (shared processing lists); with the random part they are two. */
Test(identity, pid_1_replicas_get_different_ids)
{
	char ids[4][128], host[64] = "", pattern[200];

	h_setup(&d, NULL, "[queue q]\nworkers = 1\n");
	h_setup_peer(&d2, &d, NULL, "[queue q]\nworkers = 1\n");
	ns[0] = h_start_in_pid_namespace(&d);
	ns[1] = h_start_in_pid_namespace(&d2);
	h_wait_redis_int(&d, 2, "HLEN ferry:{q}:masters");
	h_wait_redis_int(&d, 2, "HLEN ferry:{q}:owners");
	cr_assert_eq(master_ids(ids, 4), 2);
	gethostname(host, sizeof(host) - 1);
	snprintf(pattern, sizeof(pattern), "^%s:1:[0-9a-f]{8}$", host);
	cr_assert(matches(ids[0], pattern), "id %s", ids[0]);
	cr_assert(matches(ids[1], pattern), "id %s", ids[1]);
	cr_assert_str_neq(ids[0], ids[1]);
	/* each worker is owned by its own master */
	redisReply *r = h_redis(&d, "HVALS ferry:{q}:owners");
	cr_assert_eq(r->elements, 2);
	cr_assert_str_neq(r->element[0]->str, r->element[1]->str);
	freeReplyObject(r);
	/* both stop cleanly, each removing only its own heartbeat */
	for (int i = 0; i < 2; i++) {
		int status = h_stop_in_pid_namespace(ns[i]);
		cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		    "status %d", status);
		ns[i] = 0;
		cr_assert_eq(master_ids(ids, 4), 1 - i);
	}
	h_stop(&d2);
	h_stop(&d);
}

/* Two starts of one ferryd in turn get different ids (random part). */
Test(identity, two_starts_get_different_ids)
{
	char first[4][128], second[4][128];

	h_setup(&d, NULL, "[queue q]\nworkers = 1\n");
	h_start(&d, 1);
	cr_assert_eq(master_ids(first, 4), 1);
	h_stop(&d);
	h_teardown(&d);
	h_setup(&d, NULL, "[queue q]\nworkers = 1\n");
	h_start(&d, 1);
	cr_assert_eq(master_ids(second, 4), 1);
	char *a = strrchr(first[0], ':'), *b = strrchr(second[0], ':');
	cr_assert(a != NULL && b != NULL && strlen(a) == 9);
	cr_assert_str_neq(a, b, "same random part %s", a);
	h_stop(&d);
}

/* Forced to one id: the second master refuses to start (exit 1) and
 * leaves the first one's heartbeat and workers alone. */
Test(identity, second_master_with_the_same_id_refuses)
{
	char *out;

	setenv("FERRYD_TEST_MASTER_ID", "box:1", 1);
	h_setup(&d, NULL, "[queue q]\nworkers = 1\n");
	h_setup_peer(&d2, &d, NULL, "[queue q]\nworkers = 1\n");
	h_expect_log(&d2, "master id box:1 is in use by another running");
	h_start(&d, 1);
	char token[64], now[64];
	entry_token("box:1", token, sizeof(token));
	cr_assert_eq(atoi(token), d.pid, "token %s", token);

	const char *args[] = { "-f", "-c", d2.config, NULL };
	int status = h_run_ferryd(args, &out);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 1,
	    "status %d: %s", status, out);
	cr_assert(strstr(out, "ferryd: master id box:1 is in use by another "
	    "running ferryd (ferry:{q}:masters entry box:1 holds ") != NULL, "%s",
	    out);
	cr_assert(strstr(out, "not started") != NULL, "%s", out);
	free(out);
	cr_assert_eq(h_count_in_file(d2.log, "master id box:1 is in use"), 1);
	entry_token("box:1", now, sizeof(now));
	cr_assert_str_eq(now, token, "the first master's heartbeat changed");
	cr_assert_eq(h_live_owners(&d, "q"), 1);
	cr_assert(h_pid_alive(d.pid));
	cr_assert_eq(h_count_in_file(d.log, "in use"), 0);
	h_stop(&d2);
	h_stop(&d);
}

/* A later beat that finds the entry taken (another start got the id
 * while ours had passed its deadline) stops the master: exit 1, the entry
 * left to the other. */
Test(identity, master_whose_id_is_taken_later_stops)
{
	setenv("FERRYD_TEST_MASTER_ID", "box:2", 1);
	h_setup(&d, "heartbeat_ttl = 1s\n", "[queue q]\nworkers = 1\n");
	h_expect_log(&d, "master id box:2 is in use by another running");
	h_start(&d, 1);
	h_wait_redis_int(&d, 1, "HEXISTS ferry:{q}:masters box:2");
	freeReplyObject(h_redis(&d, "EVAL %s 1 ferry:{q}:masters", "local t = "
	    "redis.call('TIME') return redis.call('HSET', KEYS[1], 'box:2', "
	    "'1:other ' .. string.format('%d', t[1] * 1000 + 60000))"));
	int status = h_wait_exit(d.pid, H_DEADLINE_MS);
	d.pid = 0;
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 1, "status %d",
	    status);
	cr_assert_eq(h_count_in_file(d.log, "master id box:2 is in use by "
	    "another running ferryd (ferry:{q}:masters entry box:2 holds 1:other, "
	    "not "), 1);
	char token[64];
	entry_token("box:2", token, sizeof(token));
	cr_assert_str_eq(token, "1:other");
	cr_assert_eq(h_live_owners(&d, "q"), 0);
	h_stop(&d);
}

/* A master killed with SIGKILL leaves its entry behind: a new start under
 * the same id is refused while the entry's deadline is ahead (its master
 * may be alive but slow), and takes the id once the deadline has passed,
 * as it did once the key's TTL had. */
Test(identity, restart_under_the_same_id_waits_for_the_deadline)
{
	const char *args[] = { "-f", "-c", d.config, NULL };
	char token[64], *out;

	setenv("FERRYD_TEST_MASTER_ID", "box:3", 1);
	h_setup(&d, "heartbeat_ttl = 2s\n", "[queue q]\nworkers = 1\n");
	h_expect_log(&d, "master id box:3 is in use by another running");
	h_start(&d, 1);
	entry_token("box:3", token, sizeof(token));
	kill(d.pid, SIGKILL);
	waitpid(d.pid, NULL, 0);
	d.pid = 0;
	redisReply *v = h_redis(&d, "HGET ferry:{q}:masters box:3");
	long long deadline = atoll(strchr(v->str, ' ') + 1);
	freeReplyObject(v);
	int status = h_run_ferryd(args, &out);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 1,
	    "status %d: %s", status, out);
	cr_assert(strstr(out, "(ferry:{q}:masters entry box:3 holds ") != NULL,
	    "%s", out);
	free(out);
	/* Redis' clock past the deadline */
	h_wait_redis_int(&d, 1, "EVAL %s 0 %lld", "local t = redis.call('TIME') "
	    "return t[1] * 1000 + math.floor(t[2] / 1000) > tonumber(ARGV[1]) "
	    "and 1 or 0", deadline);
	h_start(&d, 1);
	char now[64];
	entry_token("box:3", now, sizeof(now));
	cr_assert_eq(atoi(now), d.pid, "token %s", now);
	cr_assert_str_neq(now, token);
	h_stop(&d);
}
