/* test_master.c - the supervisor, driven for real: ferryd in the foreground
 * on a temp config; workers killed, signals sent, configs broken. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

#define ONE_QUEUE "[queue orders]\nworkers = %d\n"

static struct ferryd d;

static void
teardown(void)
{
	h_teardown(&d);
}

static void
start_with(const char *ferryd_extra, int workers)
{
	char queues[128];

	snprintf(queues, sizeof(queues), ONE_QUEUE, workers);
	h_setup(&d, ferryd_extra, queues);
	h_start(&d, workers);
}

/* Wait until none of the pids is alive. */
static void
wait_gone(const pid_t *pids, int n)
{
	long long end = h_now_ms() + H_DEADLINE_MS;
	for (int i = 0; i < n; i++) {
		while (h_pid_alive(pids[i]) && h_now_ms() < end)
			h_sleep_ms(20);
		cr_assert(!h_pid_alive(pids[i]), "process %d still alive",
		    (int)pids[i]);
	}
}

/* Send sig to the master of `workers` workers and reap it: its wait
 * status, within timeout_ms; then its workers are gone too. */
static int
signal_master(int sig, int workers, int timeout_ms)
{
	pid_t pids[H_MAX_PIDS];

	cr_assert_eq(h_children(d.pid, pids, H_MAX_PIDS), workers);
	kill(d.pid, sig);
	int status = h_wait_exit(d.pid, timeout_ms);
	cr_assert_neq(status, -1, "ferryd did not exit within %d ms after "
	    "signal %d", timeout_ms, sig);
	d.pid = 0;
	wait_gone(pids, workers);
	return status;
}

TestSuite(master, .fini = teardown, .timeout = 120);

Test(master, killed_worker_is_replaced)
{
	pid_t before[H_MAX_PIDS], after[H_MAX_PIDS];

	start_with(NULL, 2);
	cr_assert_eq(h_children(d.pid, before, H_MAX_PIDS), 2);
	kill(before[0], SIGKILL);
	h_wait_log(&d, "was killed by signal 9 (SIGKILL)", 1);
	h_wait_children(&d, 2);
	cr_assert_eq(h_children(d.pid, after, H_MAX_PIDS), 2);
	cr_assert(after[0] != before[0] && after[1] != before[0],
	    "the killed pid %d is still listed", (int)before[0]);
	cr_assert(after[0] == before[1] || after[1] == before[1],
	    "the other worker %d was disturbed", (int)before[1]);
	cr_assert_eq(h_count_in_file(d.log, "restart 1 in 0 ms"), 1);
	h_stop(&d);
}

/* A slot that keeps dying waits 0, 100, 200, 400, 800, 800 ms before its
 * restarts: the log states each delay, and the next pid never appears
 * sooner than that delay after the kill. */
Test(master, crash_loop_backs_off)
{
	const long expect[] = { 0, 100, 200, 400, 800, 800 };
	pid_t pids[H_MAX_PIDS];
	char line[64];

	start_with("restart_backoff_min = 100ms\nrestart_backoff_max = 800ms\n"
	    "restart_backoff_reset = 1h\n", 1);
	for (int i = 0; i < 6; i++) {
		cr_assert_eq(h_children(d.pid, pids, H_MAX_PIDS), 1);
		pid_t victim = pids[0];
		long long killed_at = h_now_ms();
		kill(victim, SIGKILL);
		snprintf(line, sizeof(line), "restart %d in %ld ms", i + 1,
		    expect[i]);
		h_wait_log(&d, line, 1);
		long long end = killed_at + H_DEADLINE_MS;
		while (h_now_ms() < end &&
		    (h_children(d.pid, pids, H_MAX_PIDS) != 1 || pids[0] == victim))
			h_sleep_ms(5);
		cr_assert_neq(pids[0], victim);
		cr_assert_geq(h_now_ms() - killed_at, expect[i],
		    "restart %d came before its %ld ms delay", i + 1, expect[i]);
	}
	cr_assert_eq(h_count_in_file(d.log, "in 1600 ms"), 0, "cap exceeded");
	h_stop(&d);
}

Test(master, hup_changes_worker_count)
{
	start_with(NULL, 1);
	char queues[128];
	snprintf(queues, sizeof(queues), ONE_QUEUE "[queue emails]\n", 3);
	h_config(&d, NULL, queues);
	kill(d.pid, SIGHUP);
	h_wait_children(&d, 4);
	h_wait_log(&d, "reload: new queue emails with 1 workers", 1);
	snprintf(queues, sizeof(queues), ONE_QUEUE, 1);
	h_config(&d, NULL, queues);
	kill(d.pid, SIGHUP);
	h_wait_children(&d, 1);
	h_wait_log(&d, "reload: queue emails removed", 1);
	h_stop(&d);
}

Test(master, hup_with_broken_file_keeps_old_config)
{
	pid_t before[H_MAX_PIDS], after[H_MAX_PIDS];

	start_with(NULL, 2);
	h_expect_log(&d, "msg=\"reload: ");    /* the refused reload */
	cr_assert_eq(h_children(d.pid, before, H_MAX_PIDS), 2);
	h_write_file(d.config, "[ferryd]\ncolour = blue\n[queue orders]\n"
	    "workers = 5\nbatch_size = 0\n");
	kill(d.pid, SIGHUP);
	h_wait_log(&d, "still running the previous configuration", 1);
	h_wait_log(&d, "colour: unknown key", 1);
	h_wait_log(&d, "batch_size: \\\"0\\\" out of range", 1);
	h_sleep_ms(300);        /* the point: nothing changes meanwhile */
	cr_assert_eq(h_children(d.pid, after, H_MAX_PIDS), 2);
	cr_assert_arr_eq(before, after, 2 * sizeof(pid_t));
	cr_assert(h_pid_alive(d.pid));
	h_stop(&d);
}

Test(master, hup_with_changed_queue_replaces_workers)
{
	pid_t before[H_MAX_PIDS], after[H_MAX_PIDS];

	start_with(NULL, 2);
	cr_assert_eq(h_children(d.pid, before, H_MAX_PIDS), 2);
	h_config(&d, NULL, "[queue orders]\nworkers = 2\nbatch_size = 7\n");
	kill(d.pid, SIGHUP);
	h_wait_log(&d, "queue orders changed: replacing its 2 workers", 1);
	wait_gone(before, 2);
	h_wait_children(&d, 2);
	cr_assert_eq(h_children(d.pid, after, H_MAX_PIDS), 2);
	for (int i = 0; i < 2; i++)
		cr_assert(after[i] != before[0] && after[i] != before[1]);
	h_stop(&d);
}

Test(master, term_stops_everything_and_removes_pidfile)
{
	start_with("shutdown_timeout = 10s\n", 3);
	cr_assert_eq(access(d.pidfile, F_OK), 0, "no pidfile while running");
	/* within shutdown_timeout and a margin */
	int status = signal_master(SIGTERM, 3, 10000 + 5000);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	    "wait status %d", status);
	cr_assert_neq(access(d.pidfile, F_OK), 0, "pidfile left behind");
	cr_assert_eq(h_count_in_file(d.log, "graceful stop"), 1);
	h_stop(&d);
}

Test(master, quit_kills_workers_at_once)
{
	start_with(NULL, 2);
	int status = signal_master(SIGQUIT, 2, H_DEADLINE_MS);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	cr_assert_eq(h_count_in_file(d.log, "fast stop: killing 2 workers"), 1);
	h_stop(&d);
}

Test(master, ttin_and_ttou_change_every_queue)
{
	h_setup(&d, NULL, "[queue a]\nworkers = 1\n[queue b]\nworkers = 2\n");
	h_start(&d, 3);
	kill(d.pid, SIGTTIN);
	h_wait_children(&d, 5);
	kill(d.pid, SIGTTOU);
	h_wait_children(&d, 3);
	kill(d.pid, SIGTTOU);
	h_wait_children(&d, 1);
	kill(d.pid, SIGTTOU);      /* a at 0 stays at 0; b goes to 0 */
	h_wait_children(&d, 0);
	h_wait_log(&d, "queue b: workers 1 -> 0 (SIGTTOU)", 1);
	h_stop(&d);
}

Test(master, second_instance_on_same_pidfile_refuses)
{
	char *out;

	start_with(NULL, 1);
	const char *args[] = { "-f", "-c", d.config, NULL };
	int status = h_run_ferryd(args, &out);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 1, "status %d",
	    status);
	char expect[64];
	snprintf(expect, sizeof(expect), "held by a running ferryd (pid %d)",
	    (int)d.pid);
	cr_assert(strstr(out, expect) != NULL, "output: %s", out);
	free(out);
	h_wait_children(&d, 1);
	h_stop(&d);
}

Test(master, workers_exit_when_master_dies)
{
	start_with(NULL, 3);
	signal_master(SIGKILL, 3, H_DEADLINE_MS);
	h_stop(&d);
}

Test(master, usr1_reopens_the_log)
{
	char moved[400];

	start_with(NULL, 1);
	snprintf(moved, sizeof(moved), "%s.1", d.log);
	cr_assert_eq(rename(d.log, moved), 0);
	kill(d.pid, SIGUSR1);
	h_wait_log(&d, "log reopened", 1);
	cr_assert_eq(h_count_in_file(moved, "log reopened"), 0);
	h_stop(&d);
}

Test(master, tstp_and_cont_quiet_and_resume)
{
	start_with(NULL, 1);
	kill(d.pid, SIGTSTP);
	h_wait_log(&d, "quiet: workers stop fetching", 1);
	cr_assert(h_pid_alive(d.pid), "the master stopped instead");
	kill(d.pid, SIGCONT);
	h_wait_log(&d, "resumed: workers fetch jobs again", 1);
	h_stop(&d);
}

Test(master, daemonizes_and_writes_pidfile)
{
	h_setup(&d, NULL, "[queue orders]\nworkers = 1\n");
	const char *args[] = { "-c", d.config, NULL };
	int status = h_run_ferryd(args, NULL);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	char *text = h_read_file(d.pidfile);
	pid_t pid = (pid_t)atoi(text);
	free(text);
	cr_assert_gt(pid, 0, "no pid in %s", d.pidfile);
	cr_assert(h_pid_alive(pid));
	kill(pid, SIGTERM);
	long long end = h_now_ms() + H_DEADLINE_MS;
	while (h_pid_alive(pid) && h_now_ms() < end)
		h_sleep_ms(20);
	cr_assert(!h_pid_alive(pid), "daemon did not stop");
	h_wait_log(&d, "ferryd stopped", 1);
	h_stop(&d);
}

Test(master, test_flag_checks_the_file)
{
	char *out;

	h_setup(&d, NULL, "[queue orders]\nworkers = 1\n");
	const char *good[] = { "-t", "-c", d.config, NULL };
	int status = h_run_ferryd(good, &out);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s", out);
	cr_assert(strstr(out, "test is successful") != NULL, "%s", out);
	free(out);

	h_write_file(d.config, "[ferryd]\nshutdown_timeout = soon\n"
	    "[queue orders]\nworkers = -1\n");
	int bad = h_run_ferryd(good, &out);
	cr_assert(WIFEXITED(bad) && WEXITSTATUS(bad) == 78, "status %d", bad);
	cr_assert(strstr(out, "ferryd.ini:2: [ferryd] shutdown_timeout") != NULL,
	    "%s", out);
	cr_assert(strstr(out, "ferryd.ini:4: [queue orders] workers") != NULL,
	    "%s", out);
	free(out);

	const char *missing[] = { "-t", "-c", "/nonexistent/ferryd.ini", NULL };
	bad = h_run_ferryd(missing, &out);
	cr_assert(WIFEXITED(bad) && WEXITSTATUS(bad) == 78);
	cr_assert(strstr(out, "/nonexistent/ferryd.ini: cannot open") != NULL,
	    "%s", out);
	free(out);
	h_stop(&d);
}
