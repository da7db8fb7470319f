/* worker.c - the worker process. It inherits the master's libev state and
 * signal handlers through fork(); it drops all of that first, then loops:
 * fetch a batch, handle it, report in the scoreboard, until SIGTERM (finish
 * the batch, then exit 0) or the master's death (PR_SET_PDEATHSIG, and a
 * getppid() check each turn because the parent may die before prctl). */
#include "worker.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "master.h"
#include "util.h"

#define WORKER_IDLE_WAIT_MS 100

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

static void
sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);       /* a signal cuts it short: fine */
}

static int
master_alive(pid_t master_pid)
{
	return getppid() == master_pid;
}

void
worker_main(const struct worker_args *args)
{
	const struct queue_config *q = args->queue;
	struct scoreboard_slot *slot = scoreboard_slot(args->sb, args->sb_index);
	char role[96], name[16];

	reset_process();
	prctl(PR_SET_PDEATHSIG, SIGTERM);
	snprintf(role, sizeof(role), "worker %s/%d", q->name, args->number);
	log_set_role(role);
	snprintf(name, sizeof(name), "ferry:%.9s", q->name);  /* comm: 15 */
	prctl(PR_SET_NAME, name);
	if (!master_alive(args->master_pid))
		_exit(FERRY_EXIT_OK);
	atomic_store(&slot->pid, getpid());
	scoreboard_set_state(slot, SB_IDLE);
	log_debug("started");

	while (!stop_requested && master_alive(args->master_pid)) {
		if (reopen_requested) {
			reopen_requested = 0;
			log_reopen();
		}
		atomic_store(&slot->seen_ms, util_monotonic_ms());
		/* The queue (fetch, handler, ack) plugs in here. Until then
		 * the worker idles, which is all supervision needs. */
		sleep_ms(WORKER_IDLE_WAIT_MS);
	}
	scoreboard_set_state(slot, SB_STOPPING);
	log_debug("stopping: %s", stop_requested ? "SIGTERM" : "master died");
	_exit(FERRY_EXIT_OK);
}
