/* worker.c - the worker process. It inherits the master's libev state and
 * signal handlers through fork(); it drops all of that first, then loops:
 * fetch a batch, handle it, report in the scoreboard, until SIGTERM (finish
 * the batch, then exit 0) or the master's death (PR_SET_PDEATHSIG, and a
 * getppid() check each turn because the parent may die before prctl). */
#include "worker.h"
#include "test_hooks.h"

#include <dirent.h>
#include <malloc.h>
#include <stdbool.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "consumer.h"
#include "exit_codes.h"
#include "log.h"
#include "proctitle.h"
#include "util.h"

static volatile sig_atomic_t stop_requested;
static volatile sig_atomic_t reopen_requested;

static void
on_signal(int sig)
{
	if (sig == SIGTERM)
		stop_requested = 1;
	else if (sig == SIGUSR1)
		reopen_requested = 1;
}

/* Undo what fork() inherited from the master: its signal handlers (libev's),
 * its blocked mask, its descriptors other than stdio and the log. */
static void
reset_process(void)
{
	struct sigaction sa;
	sigset_t all;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = SIG_DFL;
	for (int sig = 1; sig < NSIG; sig++)
		sigaction(sig, &sa, NULL);
	sa.sa_handler = SIG_IGN;
	/* the terminal's signals reach the whole process group; only the
	 * master acts on them and tells the workers */
	int ignored[] = { SIGINT, SIGQUIT, SIGHUP, SIGTSTP, SIGTTIN, SIGTTOU,
	    SIGPIPE, SIGCONT };
	for (size_t i = 0; i < FERRY_ARRAY_LEN(ignored); i++)
		sigaction(ignored[i], &sa, NULL);
	sa.sa_handler = on_signal;     /* no SA_RESTART: sleeps wake up */
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGUSR1, &sa, NULL);
	sigemptyset(&all);
	sigprocmask(SIG_SETMASK, &all, NULL);

	DIR *d = opendir("/proc/self/fd");
	if (d == NULL)
		return;
	int keep = log_fd(), self = dirfd(d);
	struct dirent *e;
	while ((e = readdir(d)) != NULL) {
		int fd = atoi(e->d_name);
		if (fd > 2 && fd != keep && fd != self)
			close(fd);
	}
	closedir(d);
}

static pid_t master_pid;
static char title_role[96];     /* "worker orders/2" */
static struct scoreboard_slot *title_slot;

/* The process title at each state change (consumer.c tells only those):
 * "ferryd: worker orders/2 busy batch of 500 since 12:00:03". */
static void
show_state(int state, int jobs)
{
	static const char *says[SB_STATES] = {
		[SB_STARTING] = "starting", [SB_IDLE] = "idle",
		[SB_STOPPING] = "stopping", [SB_PAUSED] = "paused",
		[SB_WAIT_POSTGRES] = "waiting for postgres",
		[SB_WAIT_REDIS] = "waiting for redis",
		[SB_WAIT_REPLICAS] = "waiting for replicas",
	};
	char since[16] = "";

	if (state == SB_BUSY) {
		/* when the batch began (it may be resumed after a wait) */
		int64_t started = atomic_load(&title_slot->batch_start_ms);
		time_t began = time(NULL) - (started != 0 ?
		    (time_t)((util_monotonic_ms() - started) / 1000) : 0);
		struct tm tm;
		if (localtime_r(&began, &tm) != NULL)
			strftime(since, sizeof(since), "%H:%M:%S", &tm);
		proctitle_set("%s busy batch of %d since %s", title_role, jobs,
		    since);
		return;
	}
	proctitle_set("%s %s", title_role, state >= 0 && state < SB_STATES &&
	    says[state] != NULL ? says[state] : "?");
}

/* Asked to stop, or orphaned: checked before every batch. */
static bool
should_stop(void)
{
	if (reopen_requested) {
		reopen_requested = 0;
		log_reopen();
	}
	return stop_requested || getppid() != master_pid;
}

void
worker_main(const struct worker_args *args)
{
	const struct queue_config *q = args->queue;
	struct scoreboard_slot *slot = scoreboard_slot(args->sb, args->sb_index);
	struct consumer c;
	char role[96], name[16];

	reset_process();
	/* every batch allocates and frees up to ~1 MB (job and result
	 * arrays): without these glibc maps and unmaps it, or hands the heap
	 * top back to the kernel, each time, and the pages fault in anew
	 * (17-22% of a worker's CPU in scripts/bench queue and pg) */
	mallopt(M_TRIM_THRESHOLD, 64 << 20);
	mallopt(M_MMAP_THRESHOLD, 32 << 20);
	master_pid = args->master_pid;
	prctl(PR_SET_PDEATHSIG, SIGTERM);
	snprintf(role, sizeof(role), "worker %s/%d", q->name, args->number);
	log_set_role(role);
	snprintf(title_role, sizeof(title_role), "%s", role);
	title_slot = slot;
	snprintf(name, sizeof(name), "ferry:%.9s", q->name);  /* comm: 15 */
	proctitle_set_comm(name);
	if (should_stop())
		_exit(FERRY_EXIT_OK);
	atomic_store(&slot->pid, getpid());
	scoreboard_set_state(slot, SB_IDLE);
	show_state(SB_IDLE, 0);

	memset(&c, 0, sizeof(c));
	c.cfg = args->cfg;
	c.q = q;
	c.slot = slot;
	c.quiet = &args->sb->header->quiet;
	c.switches = &args->sb->header->redis_switches;
	c.reached = &args->sb->header->redis_reached;
	c.should_stop = should_stop;
	c.on_state = show_state;
	c.told_state = SB_IDLE;
	snprintf(c.master_id, sizeof(c.master_id), "%s", args->master_id);
	worker_id(args->master_id, getpid(), c.worker_id, sizeof(c.worker_id));
	c.exit_after_commit = test_hook_exit_after_commit();
	c.freeze_after_fetch = test_hook_freeze_after_fetch();
	log_debug("started as %s", c.worker_id);
	enum consumer_exit status = consumer_run(&c);
	scoreboard_set_state(slot, SB_STOPPING);
	show_state(SB_STOPPING, 0);
	log_debug("exiting: %s", status == CONSUMER_EXIT_FATAL ? "fatal" :
	    stop_requested ? "SIGTERM" : getppid() != master_pid ?
	    "master died" : "done");
	_exit(status == CONSUMER_EXIT_FATAL ? FERRY_EXIT_FATAL :
	    status == CONSUMER_EXIT_UNSETTLED ? 1 : FERRY_EXIT_OK);
}

void
worker_id(const char *master_id, pid_t pid, char *out, size_t size)
{
	snprintf(out, size, "%s.%d", master_id, (int)pid);
}
