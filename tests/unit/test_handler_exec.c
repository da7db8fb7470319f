/* test_handler_exec.c - handler = exec against small shell scripts written
 * to a temp dir: results, exit statuses, timeouts, exec failures, pipe
 * deadlocks, argv quoting, quoted ids, unknown lines described, and no
 * leaked fds or zombies. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "handler.h"
#include "util.h"

#define MAXJ 16

/* reads each job line and sets $id; the body goes before "done" */
#define READ_IDS "while IFS= read -r line; do\n" \
	"\tid=${line#'{\"id\":\"'}; id=${id%%'\"'*}\n"

static char dir[64];
static struct job J[MAXJ];
static struct handler_result R[MAXJ];
static char err[1024];

static int
rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st, (void)flag, (void)ftw;
	return remove(path);
}

static void
setup(void)
{
	signal(SIGPIPE, SIG_IGN);       /* as the worker does */
	strcpy(dir, "/tmp/ferry-exec-XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
}

static void
teardown(void)
{
	nftw(dir, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
}

TestSuite(exec, .init = setup, .fini = teardown, .timeout = 60);

static void
make_job(struct job *j, const char *id, const char *raw)
{
	memset(j, 0, sizeof(*j));
	j->el = j->raw = raw;
	j->el_len = j->raw_len = strlen(raw);
	snprintf(j->id, sizeof(j->id), "%s", id);
}

/* J[0..n-1] with the given ids; R all pending */
static int
jobs(int n, ...)
{
	va_list ap;

	va_start(ap, n);
	for (int i = 0; i < n; i++)
		make_job(&J[i], va_arg(ap, const char *), "{\"k\":1}");
	va_end(ap);
	memset(R, 0, sizeof(R));
	return n;
}

static const char *
script(const char *name, const char *body)
{
	static char cmd[300];
	char path[200];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	cr_assert_not_null(f = fopen(path, "w"));
	fputs(body, f);
	fclose(f);
	snprintf(cmd, sizeof(cmd), "/bin/sh %s", path);
	return cmd;
}

static int
run_jobs(const char *command, long timeout_ms, struct job *js,
    struct handler_result *rs, int n)
{
	struct queue_config q = { .handler = CONFIG_HANDLER_EXEC,
	    .handler_timeout_ms = timeout_ms };

	q.command = (char *)command;
	return handler_exec_run(&q, js, rs, n, err, sizeof(err));
}

#define run(command, timeout_ms, n) run_jobs((command), (timeout_ms), J, R, (n))

#define EXPECT(i, o, m) do { \
	cr_assert_eq(R[i].outcome, (o), "job %d: outcome %d", (i), \
	    R[i].outcome); \
	cr_assert_str_eq(R[i].message, (m), "job %d: \"%s\"", (i), R[i].message); \
} while (0)

static const char *ok_all = READ_IDS "\techo \"ok $id\"\ndone\n";

Test(exec, all_ok)
{
	int n = jobs(5, "a", "b", "42", "d", "e");

	cr_assert_eq(run(script("h.sh", ok_all), 5000, n), 0);
	for (int i = 0; i < n; i++)
		EXPECT(i, HANDLER_OK, "");
	cr_assert_str_eq(err, "");
}

Test(exec, mixed_results_and_unknown_lines)
{
	int n = jobs(6, "a", "b", "c", "d", "e", "f");
	const char *cmd = script("h.sh", "cat >/dev/null\n"
	    "printf 'ok a\\r\\n'\n"
	    "printf 'retry b database is down\\n'\n"
	    "printf 'fail c bad data: \"x\"  \\r\\n'\n"
	    "printf 'fail d\\n'\n"
	    "printf 'ok e with trailing words\\n'\n"
	    "printf 'retry\\n\\nhello world\\nok zzz\\nOK f\\n'\n"
	    "printf '\\tretry  f \\t spaced out\\n'\n");

	cr_assert_eq(run(cmd, 5000, n), 0);
	EXPECT(0, HANDLER_OK, "");
	EXPECT(1, HANDLER_RETRY, "database is down");
	EXPECT(2, HANDLER_FAIL, "bad data: \"x\"  ");
	EXPECT(3, HANDLER_FAIL, "");
	EXPECT(4, HANDLER_OK, "");
	EXPECT(5, HANDLER_RETRY, "spaced out");
	cr_assert_str_eq(err, "handler printed 5 unknown lines: "
	    "\"retry\" (no id); \"\" (empty line); \"hello world\" "
	    "(does not start with ok, retry or fail); ...");
}

Test(exec, some_answered_then_exit_0)
{
	int n = jobs(4, "a", "b", "c", "d");
	const char *cmd = script("h.sh", "cat >/dev/null\necho 'ok b'\n"
	    "echo 'fail d nope'\n");

	cr_assert_eq(run(cmd, 5000, n), 0);
	EXPECT(0, HANDLER_RETRY, "handler exited without a result for this job");
	EXPECT(1, HANDLER_OK, "");
	EXPECT(2, HANDLER_RETRY, "handler exited without a result for this job");
	EXPECT(3, HANDLER_FAIL, "nope");
}

Test(exec, exit_3_without_output_or_reading)
{
	static struct job js[2000];
	static struct handler_result rs[2000];

	for (int i = 0; i < 2000; i++)
		make_job(&js[i], "x", "{\"padding\":\"................"
		    "................................................\"}");
	/* it never reads: the writer meets EPIPE and stops */
	cr_assert_eq(run_jobs(script("h.sh", "exit 3\n"), 5000, js, rs, 2000),
	    HANDLER_EXEC_CRASHED);
	for (int i = 0; i < 2000; i++)
		cr_assert(rs[i].outcome == HANDLER_RETRY && strcmp(rs[i].message,
		    "handler exited with status 3 without a result for this job")
		    == 0, "job %d: %d %s", i, rs[i].outcome, rs[i].message);
}

Test(exec, killed_by_signal)
{
	int n = jobs(2, "a", "b");
	const char *cmd = script("h.sh", "cat >/dev/null\necho 'ok a'\n"
	    "kill -TERM $$\nsleep 5\n");

	cr_assert_eq(run(cmd, 5000, n), HANDLER_EXEC_CRASHED);
	EXPECT(0, HANDLER_OK, "");
	cr_assert(!R[0].unanswered && R[1].unanswered);
	EXPECT(1, HANDLER_RETRY, "handler killed by signal 15 (SIGTERM) "
	    "without a result for this job");
}

static bool
alive(pid_t pid)
{
	char path[64], state = 'X';
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if ((f = fopen(path, "r")) == NULL)
		return false;
	if (fscanf(f, "%*d %*s %c", &state) != 1)
		state = 'X';
	fclose(f);
	return state != 'Z' && state != 'X';
}

Test(exec, timeout_kills_the_whole_group)
{
	int n = jobs(2, "a", "b");
	char path[128];
	const char *cmd = script("h.sh", "sleep 30 &\necho $! > \"$0.pid\"\n"
	    "echo 'ok a'\nwait\n");
	int64_t t0 = util_monotonic_ms();
	long bg = 0;
	FILE *f;

	snprintf(path, sizeof(path), "%s/h.sh.pid", dir);
	cr_assert_eq(run(cmd, 300, n), 0);
	cr_assert_lt(util_monotonic_ms() - t0, 3000);
	EXPECT(0, HANDLER_OK, "");
	EXPECT(1, HANDLER_RETRY,
	    "handler killed after handler_timeout (0.3 s) without a result");
	cr_assert_not_null(f = fopen(path, "r"));
	cr_assert_eq(fscanf(f, "%ld", &bg), 1);
	fclose(f);
	for (int i = 0; i < 100 && alive((pid_t)bg); i++)
		usleep(10000);
	cr_assert(!alive((pid_t)bg), "background sleep %ld survived", bg);
}

Test(exec, timeout_after_closing_stdout)
{
	int n = jobs(1, "a");
	int64_t t0 = util_monotonic_ms();

	/* stdout ends at once, but the process lives on: waitpid must not
	 * block past the deadline */
	cr_assert_eq(run(script("h.sh", "exec >&-\nsleep 30\n"), 700, n), 0);
	cr_assert_lt(util_monotonic_ms() - t0, 3000);
	EXPECT(0, HANDLER_RETRY,
	    "handler killed after handler_timeout (0.7 s) without a result");
}

Test(exec, command_not_found)
{
	int n = jobs(3, "a", "bad", "c");
	const char *msg = "cannot run handler command "
	    "\"/nonexistent/ferry-handler --x\": No such file or directory";

	J[1].invalid = "empty job";
	R[1] = (struct handler_result){ HANDLER_FAIL, "preset", false };
	cr_assert_eq(run("/nonexistent/ferry-handler --x", 5000, n), -1);
	cr_assert_str_eq(err, msg);
	EXPECT(0, HANDLER_RETRY, msg);
	EXPECT(1, HANDLER_FAIL, "preset");
	EXPECT(2, HANDLER_RETRY, msg);

	jobs(1, "a");
	cr_assert_eq(run("ferry-no-such-handler-xyz", 5000, 1), -1);
	cr_assert_str_eq(err, "cannot run handler command "
	    "\"ferry-no-such-handler-xyz\": No such file or directory");
	cr_assert_eq(run(dir, 5000, 1), -1);    /* a directory */
	cr_assert_str_eq(R[0].message, err);
	cr_assert(strstr(err, "Permission denied") != NULL, "%s", err);
}

Test(exec, bad_commands)
{
	jobs(1, "a");
	cr_assert_eq(run("/bin/echo \"open", 5000, 1), -1);
	cr_assert_str_eq(err,
	    "cannot run handler command \"/bin/echo \"open\": unterminated quote");
	EXPECT(0, HANDLER_RETRY, err);
	cr_assert_eq(run(" \t ", 5000, 1), -1);
	cr_assert_str_eq(err, "cannot run handler command \" \t \": empty command");
}

Test(exec, answers_before_reading_5000_jobs_of_1kb, .timeout = 60)
{
	enum { N = 5000 };
	static struct job js[N];
	static struct handler_result rs[N];
	static char raw[1024], ids[N][16];
	const char *cmd = script("h.sh", "pad=$(printf %0100d 0 | tr 0 m)\n"
	    "i=0\nwhile [ $i -lt 5000 ]; do\n"
	    "\techo \"retry j$i $pad\"\n\ti=$((i + 1))\ndone\n"
	    "cat >/dev/null\n");
	char pad[101];

	memset(raw, 'x', 1023);
	memcpy(raw, "{\"p\":\"", 6);
	memcpy(raw + 1021, "\"}", 3);
	memset(pad, 'm', 100);
	pad[100] = '\0';
	for (int i = 0; i < N; i++) {
		snprintf(ids[i], sizeof(ids[i]), "j%d", i);
		make_job(&js[i], ids[i], raw);
	}
	/* 550 KB of answers first, then 5 MB of stdin: both pipes fill */
	cr_assert_eq(run_jobs(cmd, 30000, js, rs, N), 0);
	cr_assert_str_eq(err, "");
	for (int i = 0; i < N; i++) {
		cr_assert_eq(rs[i].outcome, HANDLER_RETRY, "job %d", i);
		cr_assert_str_eq(rs[i].message, pad, "job %d", i);
	}
	/* one answer per line read, flushed: stdin must be fed in step */
	cmd = script("a.sh", "awk -F'\"' '{ print \"ok \" $4; fflush() }'\n");
	cr_assert_eq(run_jobs(cmd, 30000, js, rs, N), 0);
	for (int i = 0; i < N; i++)
		cr_assert_eq(rs[i].outcome, HANDLER_OK, "job %d", i);
}

Test(exec, duplicate_ids_take_results_in_order)
{
	int n = jobs(4, "a", "a", "b", "a");
	const char *cmd = script("h.sh", "cat >/dev/null\n"
	    "printf 'ok a\\nfail a boom\\nok b\\nretry a later\\nok a\\n'\n");

	cr_assert_eq(run(cmd, 5000, n), 0);
	EXPECT(0, HANDLER_OK, "");
	EXPECT(1, HANDLER_FAIL, "boom");
	EXPECT(2, HANDLER_OK, "");
	EXPECT(3, HANDLER_RETRY, "later");
	cr_assert_str_eq(err, "handler printed 1 unknown line: \"ok a\" "
	    "(that job has its result already)");
}

Test(exec, invalid_jobs_are_skipped)
{
	int n = jobs(3, "a", "bad", "c");
	char path[128], buf[512];
	const char *cmd = script("h.sh", "cat > \"$0.in\"\n"
	    READ_IDS "\techo \"ok $id\"\ndone < \"$0.in\"\necho 'ok bad'\n");
	FILE *f;
	int lines = 0;

	J[1].invalid = "malformed JSON: x";
	R[1] = (struct handler_result){ HANDLER_FAIL, "preset", false };
	snprintf(path, sizeof(path), "%s/h.sh.in", dir);
	cr_assert_eq(run(cmd, 5000, n), 0);
	EXPECT(0, HANDLER_OK, "");
	EXPECT(1, HANDLER_FAIL, "preset");
	EXPECT(2, HANDLER_OK, "");
	cr_assert_str_eq(err, "handler printed 1 unknown line: \"ok bad\" "
	    "(that job is invalid: it was not handed over)");
	cr_assert_not_null(f = fopen(path, "r"));
	while (fgets(buf, sizeof(buf), f) != NULL) {
		lines++;
		cr_assert(strstr(buf, "\"bad\"") == NULL, "%s", buf);
	}
	fclose(f);
	cr_assert_eq(lines, 2);
}

Test(exec, all_invalid_runs_nothing)
{
	jobs(2, "a", "b");
	J[0].invalid = J[1].invalid = "empty job";
	cr_assert_eq(run("/nonexistent/never-run", 5000, 2), 0);
	EXPECT(0, HANDLER_PENDING, "");
	cr_assert_str_eq(err, "");
}

Test(exec, quoted_argv)
{
	int n = jobs(1, "a");
	char full[400];
	const char *cmd = script("args.sh", "cat >/dev/null\n"
	    "printf 'retry a %s|%s|%s|%s|%s|%s\\n' $# \"$1\" \"$2\" \"$3\" "
	    "\"$4\" \"$5\"\n");

	snprintf(full, sizeof(full), "%s\t \"a b\" \"c\\\"d\"  \"e\\\\f\" "
	    "g\\h \"\"", cmd);
	cr_assert_eq(run(full, 5000, n), 0);
	EXPECT(0, HANDLER_RETRY, "5|a b|c\"d|e\\f|g\\h|");
	snprintf(full, sizeof(full), "%s x\"y z\"w", cmd);
	cr_assert_eq(run(full, 5000, n), 0);
	EXPECT(0, HANDLER_RETRY, "1|xy zw||||");
}

Test(exec, child_gets_clean_signals_fds_and_own_group)
{
	int n = jobs(1, "a");
	sigset_t usr1;
	const char *cmd = script("env.sh", "cat >/dev/null\n"
	    /* signals 32 and 33 belong to glibc: it refuses to reset them */
	    "ig=$(grep SigIgn /proc/$$/status | cut -f2)\n"
	    "ig=$(printf %016x $(( 0x$ig & ~0x180000000 )))\n"
	    "bl=$(grep SigBlk /proc/$$/status | cut -f2)\n"
	    "pg=$(cut -d' ' -f5 /proc/$$/stat)\n"
	    "if [ -e /proc/$$/fd/77 ]; then f=open; else f=closed; fi\n"
	    "[ \"$pg\" = $$ ] && g=own || g=shared\n"
	    "echo \"retry a $ig $bl $f $g\"\n");

	signal(SIGINT, SIG_IGN);
	signal(SIGHUP, SIG_IGN);
	sigemptyset(&usr1);
	sigaddset(&usr1, SIGUSR1);
	sigprocmask(SIG_BLOCK, &usr1, NULL);
	cr_assert_eq(dup2(open("/dev/null", O_RDONLY), 77), 77);
	cr_assert_eq(run(cmd, 5000, n), 0);
	EXPECT(0, HANDLER_RETRY,
	    "0000000000000000 0000000000000000 closed own");
}

static void
on_alarm(int sig)
{
	(void)sig;
}

Test(exec, signals_interrupting_the_loop)
{
	struct sigaction sa = { .sa_handler = on_alarm };   /* no SA_RESTART */
	struct itimerval it = { { 0, 2000 }, { 0, 2000 } };
	static struct job js[MAXJ * 50];
	static struct handler_result rs[MAXJ * 50];
	static char ids[MAXJ * 50][16];
	/* answers, then stays alive a while with stdout open, then closes
	 * stdout and lives on: poll() and the reaping both see EINTR */
	const char *cmd = script("h.sh", READ_IDS "\techo \"ok $id\"\n"
	    "done\nsleep 0.2\nexec >&-\nsleep 0.2\n");

	for (int i = 0; i < MAXJ * 50; i++) {
		snprintf(ids[i], sizeof(ids[i]), "%d", i);
		make_job(&js[i], ids[i], "{}");
	}
	sigaction(SIGALRM, &sa, NULL);
	setitimer(ITIMER_REAL, &it, NULL);
	cr_assert_eq(run_jobs(cmd, 20000, js, rs, MAXJ * 50), 0);
	setitimer(ITIMER_REAL, &(struct itimerval){ { 0, 0 }, { 0, 0 } }, NULL);
	for (int i = 0; i < MAXJ * 50; i++)
		cr_assert_eq(rs[i].outcome, HANDLER_OK, "job %d", i);
}

Test(exec, last_line_without_newline)
{
	int n = jobs(2, "a", "b");

	cr_assert_eq(run(script("h.sh", "cat >/dev/null\n"
	    "printf 'ok a\\nok b'\n"), 5000, n), 0);
	EXPECT(1, HANDLER_OK, "");
	/* not after a failed exit: the line may have been cut */
	n = jobs(2, "a", "b");
	cr_assert_eq(run(script("h.sh", "cat >/dev/null\n"
	    "printf 'ok a\\nok b'\nexit 1\n"), 5000, n), HANDLER_EXEC_CRASHED);
	EXPECT(0, HANDLER_OK, "");
	EXPECT(1, HANDLER_RETRY,
	    "handler exited with status 1 without a result for this job");
	cr_assert_str_eq(err, "handler printed 1 unknown line: \"ok b\" "
	    "(last line cut off: no newline, and the handler did not exit 0)");
}

Test(exec, overlong_line_is_dropped)
{
	int n = jobs(2, "a", "b");
	const char *cmd = script("h.sh", "cat >/dev/null\n"
	    "head -c 300000 /dev/zero | tr '\\0' x\n"
	    "printf ' ok b\\nok a\\nretry b again\\n'\n");

	cr_assert_eq(run(cmd, 5000, n), 0);
	EXPECT(0, HANDLER_OK, "");
	EXPECT(1, HANDLER_RETRY, "again");
	char want[300];
	snprintf(want, sizeof(want), "handler printed 1 unknown line: "
	    "\"%.200s...\" (longer than 64 KiB: dropped)",
	    "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
	    "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx");
	cr_assert_str_eq(err, want);
}

/* any id can be answered as a JSON string: blanks, control characters,
 * quotes, backslashes, \uXXXX; an id that merely starts with a quote is
 * still read plain (the last three) */
Test(exec, quoted_ids)
{
	int n = jobs(11, "a b", "x\001y", "q\"\\", "\xc3\xa9t\xc3\xa9",
	    "tab\there", "two\nlines", "plain", " lead", "\"q\"", "\"a\"x",
	    "\"open");
	const char *cmd = script("h.sh", "cat >/dev/null\n"
	    "printf '%s\\n' 'ok \"a b\"' 'retry  \"x\\u0001y\"  try later' "
	    "'fail \"q\\\"\\\\\" bad  one' 'ok \"\\u00e9t\\u00E9\"' "
	    "'ok \"tab\\there\"' 'ok \"two\\nlines\"\r' 'ok \"plain\"' "
	    "'fail \" lead\"' 'ok \"q\"' 'retry \"a\"x later' 'ok \"open'\n");

	/* all ok but these */
	const char *msg[MAXJ] = { [1] = "try later", [2] = "bad  one", [7] = "",
	    [9] = "later" };

	cr_assert_eq(run(cmd, 5000, n), 0);
	for (int i = 0; i < n; i++)
		EXPECT(i, msg[i] == NULL ? HANDLER_OK : i % 8 == 1 ? HANDLER_RETRY :
		    HANDLER_FAIL, msg[i] == NULL ? "" : msg[i]);
	cr_assert_str_eq(err, "");
}

/* jobs a and b to a handler running body: it exits 0, err is want */
static void
expect_err(const char *body, const char *want)
{
	jobs(2, "a", "b");
	cr_assert_eq(run(script("h.sh", body), 5000, 2), 0);
	cr_assert_str_eq(err, want);
}

/* lines that settle no job are described in err, the first three, cut at
 * 200 bytes, with their control characters made visible */
Test(exec, unknown_lines_described)
{
	char want[600];

	expect_err("cat >/dev/null\n"
	    "printf '%s\\n' 'ok a' 'ok a' 'ok \"nope\"' 'fail \"b\\q\" x'\n",
	    "handler printed 3 unknown lines: "
	    "\"ok a\" (that job has its result already); "
	    "\"ok \\\"nope\\\"\" (no job of the batch has that id); "
	    "\"fail \\\"b\\\\q\\\" x\" (bad escape)");
	snprintf(want, sizeof(want), "handler printed 4 unknown lines: "
	    "\"ok \\x01\\tz\\x1b\" (no job of the batch has that id); "
	    "\"ok %0197d...\" (no job of the batch has that id); "
	    "\"ok \\xc3\\xa9\" (no job of the batch has that id); ...", 0);
	expect_err("cat >/dev/null\n"
	    "printf 'ok \\001\\tz\\033\\n'\n"
	    "printf 'ok %0300d\\n' 0\n"
	    "printf 'ok \\303\\251\\n'\n"
	    "printf 'zap\\nok b\\n'\n", want);
	cr_assert_eq(R[1].outcome, HANDLER_OK);
}

static int
count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;

	cr_assert_not_null(d);
	while (readdir(d) != NULL)
		n++;
	closedir(d);
	return n;
}

Test(exec, no_fd_leaks_or_zombies_after_many_runs)
{
	int before = count_fds(), status;
	const char *cmd = script("h.sh", ok_all);

	for (int i = 0; i < 50; i++) {
		cr_assert_eq(run(cmd, 5000, jobs(3, "a", "b", "c")), 0);
		EXPECT(2, HANDLER_OK, "");
	}
	for (int i = 0; i < 5; i++)
		cr_assert_eq(run("/nonexistent/x", 5000, 1), -1);
	cr_assert_eq(run(script("s.sh", "exec >&-\nsleep 10\n"), 100, 1), 0);
	cr_assert_eq(run(script("t.sh", "sleep 10\n"), 100, 1), 0);
	cr_assert_eq(run(script("e.sh", "exit 0\n"), 100, 1), 0);
	cr_assert_eq(count_fds(), before);
	cr_assert_eq(waitpid(-1, &status, WNOHANG), -1);
	cr_assert_eq(errno, ECHILD);
}

Test(exec, noop_marks_valid_jobs_ok)
{
	int n = jobs(3, "a", "b", "c");

	J[1].invalid = "empty job";
	R[1] = (struct handler_result){ HANDLER_FAIL, "preset", false };
	handler_noop_run(J, R, n);
	EXPECT(0, HANDLER_OK, "");
	EXPECT(1, HANDLER_FAIL, "preset");
	EXPECT(2, HANDLER_OK, "");
}
