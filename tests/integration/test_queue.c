/* test_queue.c - jobs through real ferryd workers and a real redis-server:
 * nothing lost when workers, masters or Redis are killed, poison jobs
 * isolated, retries with backoff, malformed input dead-lettered with its
 * reason. Exec handlers are small awk/sh scripts written per test. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

static struct ferryd d, d2;

static void
teardown(void)
{
	h_teardown(&d2);
	h_teardown(&d);
}

TestSuite(queue, .fini = teardown, .timeout = 900);

/* Queue q of d with one worker running the exec handler `path` and the
 * [queue q] lines `extra`; jobs {"n":first} .. {"n":first+n-1} pushed and
 * ferryd started; returns once `done` of them are done and one is dead. */
static void
run_exec(const char *path, const char *extra, int first, int n, int done)
{
	char queues[800];

	snprintf(queues, sizeof(queues), "[queue q]\nworkers = 1\n"
	    "handler = exec\ncommand = %s\n%s", path, extra);
	h_config(&d, NULL, queues);
	h_push_jobs(&d, "q", first, n);
	h_start(&d, 1);
	h_wait_redis_int(&d, done, "HGET ferry:{q}:stats done");
	h_wait_redis_int(&d, 1, "LLEN ferry:{q}:dead");
}

Test(queue, noop_drains_the_queue)
{
	h_setup(&d, NULL, "[queue q]\nworkers = 2\nbatch_size = 50\n");
	h_push_jobs(&d, "q", 0, 1000);
	h_start(&d, 2);
	h_wait_redis_int(&d, 1000, "HGET ferry:{q}:stats done");
	h_assert_queue_empty(&d, "q");
	cr_assert_eq(h_redis_int(&d, "LLEN ferry:{q}:dead"), 0);
	/* completed jobs leave nothing behind but the counters */
	cr_assert_eq(h_redis_int(&d, "HLEN ferry:{q}:bkeys"), 0);
	h_stop(&d);
}

/* 20,000 jobs while a worker is killed with SIGKILL every 300 ms: every job
 * is handled at least once, and every list ends empty. */
Test(queue, nothing_lost_when_workers_are_killed)
{
	char cmd[400], queues[800];
	pid_t pids[H_MAX_PIDS];
	int kills = 0;

	h_setup(&d, NULL, "");
	h_write_recorder(&d, cmd, sizeof(cmd));
	snprintf(queues, sizeof(queues), "[queue q]\nworkers = 2\n"
	    "batch_size = 20\nhandler = exec\ncommand = %s\n"
	    "max_recoveries = 1000\n", cmd);
	h_config(&d, "restart_backoff_min = 10ms\nrestart_backoff_max = 100ms\n",
	    queues);
	h_push_jobs(&d, "q", 0, 20000);
	h_start(&d, 2);
	/* kill for 10 s at most: on a loaded machine the workers may spend
	 * all their short lives starting. Then let them finish: every job a
	 * kill handed back is run alone, and under ASan each run of the
	 * handler (fork + exec) is slow, so allow minutes, not seconds. */
	long long end = h_now_ms() + 10000;
	while (h_redis_int(&d, "HGET ferry:{q}:stats done") < 20000 &&
	    h_now_ms() < end) {
		h_sleep_ms(300);
		int n = h_children(d.pid, pids, H_MAX_PIDS);
		if (n > 0) {
			kill(pids[kills % n], SIGKILL);
			kills++;
		}
	}
	end = h_now_ms() + 400000;
	while (h_redis_int(&d, "HGET ferry:{q}:stats done") < 20000 &&
	    h_now_ms() < end)
		h_sleep_ms(200);
	h_wait_redis_int(&d, 20000, "HGET ferry:{q}:stats done");
	cr_assert_gt(kills, 3, "the workers were killed only %d times", kills);
	cr_assert_eq(h_distinct_done(&d, 20000), 20000);
	h_assert_queue_empty(&d, "q");
	cr_assert_eq(h_redis_int(&d, "LLEN ferry:{q}:dead"), 0);
	cr_assert_gt(h_redis_int(&d, "HGET ferry:{q}:stats recovered"), 0);
	h_stop(&d);
}

/* A handler that dies on one job: the job is dead with the reason, every
 * other job is done, no other job is dead. */
Test(queue, poison_job_is_isolated)
{
	char path[400];

	h_setup(&d, NULL, "");
	h_write_script(&d, "poison.sh", path, sizeof(path),
	    H_SH_EACH_JOB
	    "  case \"$line\" in *'\"n\":13}'*) kill -SEGV $$;; esac\n"
	    "  echo \"ok $id\"\n"
	    "done\n");
	run_exec(path, "batch_size = 50\nmax_attempts = 3\n"
	    "backoff_base_ms = 50\nbackoff_max_ms = 100\n", 0, 200, 199);
	json_t *dead = h_dead_entries(&d, "q");
	json_t *e = json_array_get(dead, 0);
	cr_assert_str_eq(h_jstr(e, "job"),
	    "{\"n\":13}");
	cr_assert_eq(json_integer_value(json_object_get(e, "attempts")), 3);
	cr_assert(strstr(h_jstr(e, "last_error"),
	    "signal 11") != NULL, "last_error: %s",
	    h_jstr(e, "last_error"));
	json_decref(dead);
	h_assert_queue_empty(&d, "q");
	cr_assert_eq(h_redis_int(&d, "HGET ferry:{q}:stats done"), 199);
	h_stop(&d);
}

/* Fails twice, then succeeds: attempts counted, backoff spacing kept;
 * another job that always fails ends dead with both errors. */
Test(queue, retries_back_off_then_dead_letter)
{
	char path[400];

	h_setup(&d, NULL, "");
	h_write_script(&d, "flaky.sh", path, sizeof(path),
	    H_SH_EACH_JOB
	    "  a=${line#*\\\"attempts\\\":}; a=${a%%%%,*}\n"
	    "  echo \"$(date +%%s%%3N) $a $line\" >> %s/attempts.txt\n"
	    "  case \"$line\" in\n"
	    "  *'\"n\":1}'*) if [ \"$a\" -lt 2 ]; then echo \"retry $id boom $a\";"
	    " else echo \"ok $id\"; fi;;\n"
	    "  *) echo \"retry $id always $a\";;\n"
	    "  esac\n"
	    "done\n", d.dir);
	/* n=1 flaky, n=2 always fails */
	run_exec(path, "max_attempts = 3\nbackoff_base_ms = 400\n"
	    "backoff_max_ms = 10000\n", 1, 2, 1);
	cr_assert_eq(h_redis_int(&d, "HGET ferry:{q}:stats retried"), 4);

	/* the flaky job's attempts 0, 1, 2 at t0, t1, t2: the waits are at
	 * least half the exponential delay (equal jitter): 200 ms, 400 ms */
	char apath[400];
	snprintf(apath, sizeof(apath), "%s/attempts.txt", d.dir);
	char *text = h_read_file(apath);
	long long t[3] = { 0, 0, 0 };
	int seen = 0;
	for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
		long long ts;
		int a;
		if (strstr(line, "\"n\":1}") && sscanf(line, "%lld %d", &ts, &a) == 2
		    && a >= 0 && a < 3) {
			t[a] = ts;
			seen++;
		}
	}
	free(text);
	cr_assert_eq(seen, 3, "the flaky job ran %d times, expected 3", seen);
	cr_assert_geq(t[1] - t[0], 200, "first retry after %lld ms", t[1] - t[0]);
	cr_assert_geq(t[2] - t[1], 400, "second retry after %lld ms", t[2] - t[1]);

	json_t *dead = h_dead_entries(&d, "q");
	json_t *e = json_array_get(dead, 0);
	cr_assert_str_eq(h_jstr(e, "job"),
	    "{\"n\":2}");
	cr_assert_eq(json_integer_value(json_object_get(e, "attempts")), 3);
	cr_assert_str_eq(h_jstr(e, "reason"),
	    "failed 3 attempts (max_attempts)");
	cr_assert_str_eq(h_jstr(e, "first_error"),
	    "always 0");
	cr_assert_str_eq(h_jstr(e, "last_error"),
	    "always 2");
	json_decref(dead);
	h_assert_queue_empty(&d, "q");
	h_stop(&d);
}

Test(queue, malformed_jobs_are_dead_at_once)
{
	h_setup(&d, NULL, "[queue q]\nworkers = 1\nmax_job_bytes = 64\n");
	const char *bad[] = { "not json", "{\"a\":", "", "[1,2]",
	    "{\"pad\":\"0123456789012345678901234567890123456789012345678901234\"}" };
	const char *reason[] = { "malformed JSON", "malformed JSON", "empty job",
	    "job is not a JSON object", "job is 65 bytes, over max_job_bytes 64" };
	for (int i = 0; i < 5; i++)
		freeReplyObject(h_redis(&d, "LPUSH ferry:{q}:ready %b", bad[i],
		    strlen(bad[i])));
	h_push_jobs(&d, "q", 0, 3);
	h_start(&d, 1);
	h_wait_redis_int(&d, 3, "HGET ferry:{q}:stats done");
	h_wait_redis_int(&d, 5, "LLEN ferry:{q}:dead");
	json_t *dead = h_dead_entries(&d, "q");
	for (int i = 0; i < 5; i++) {
		int found = 0;
		for (size_t k = 0; k < json_array_size(dead); k++) {
			json_t *e = json_array_get(dead, k);
			if (strcmp(h_jstr(e, "job"),
			    bad[i]) != 0)
				continue;
			found++;
			const char *r = h_jstr(e, "reason");
			cr_assert(strncmp(r, reason[i], strlen(reason[i])) == 0,
			    "job \"%s\": reason \"%s\", expected \"%s\"", bad[i], r,
			    reason[i]);
			cr_assert_eq(json_integer_value(json_object_get(e, "attempts")),
			    1);
		}
		cr_assert_eq(found, 1, "job \"%s\" is dead %d times", bad[i], found);
	}
	json_decref(dead);
	cr_assert_eq(h_redis_int(&d, "HGET ferry:{q}:stats done"), 3);
	h_stop(&d);
}
