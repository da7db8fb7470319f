/* worker.h - a worker process: forked by the master for one queue, it takes
 * batches, runs the handler, and reports in its scoreboard slot. */
#ifndef FERRY_WORKER_H
#define FERRY_WORKER_H

#include <stddef.h>
#include <sys/types.h>

#include "config.h"
#include "scoreboard.h"

struct worker_args {
	const struct ferry_config *cfg;
	const struct queue_config *queue;
	struct scoreboard *sb;
	int sb_index;
	int number;              /* 1.. within the queue */
	pid_t master_pid;
	const char *master_id;   /* names this master in Redis */
};

/* Entry point in the child after fork(); never returns. */
void worker_main(const struct worker_args *args) __attribute__((noreturn));
/* The worker's id in Redis (owners hash, processing list name). */
void worker_id(const char *master_id, pid_t pid, char *out, size_t size);

#endif
