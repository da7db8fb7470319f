/* scoreboard.h - shared memory the master maps before forking, one slot per
 * worker. Workers write their own slot (state, batch start, jobs done, last
 * error); the master reads every slot to find hung or bloated workers and to
 * report status, and writes the header's `quiet` flag (TSTP/CONT). */
#ifndef FERRY_SCOREBOARD_H
#define FERRY_SCOREBOARD_H

#include <stdatomic.h>
#include <stdint.h>
#include <sys/types.h>

#define SCOREBOARD_ERROR_MAX 160

enum scoreboard_state {
	SB_FREE = 0,     /* slot unused */
	SB_STARTING,     /* forked, not yet in its loop */
	SB_IDLE,         /* waiting for jobs */
	SB_BUSY,         /* running a batch since batch_start_ms */
	SB_STOPPING,     /* told to stop, finishing its batch */
};

struct scoreboard_slot {
	_Atomic int pid;
	_Atomic int state;
	_Atomic int64_t batch_start_ms; /* CLOCK_MONOTONIC, 0 when idle */
	_Atomic int64_t jobs_done;
	_Atomic int64_t seen_ms;        /* last loop turn of the worker */
	_Atomic unsigned error_seq;     /* odd while last_error is written */
	char last_error[SCOREBOARD_ERROR_MAX];
};

struct scoreboard_header {
	_Atomic int quiet;              /* 1: workers stop fetching */
	int nslots;
};

struct scoreboard {
	struct scoreboard_header *header;
	struct scoreboard_slot *slots;
	size_t size;
};

int scoreboard_create(struct scoreboard *sb, int nslots);
void scoreboard_destroy(struct scoreboard *sb);
/* A free slot, marked SB_STARTING, or -1 when all are taken. */
int scoreboard_acquire(struct scoreboard *sb);
void scoreboard_release(struct scoreboard *sb, int index);
struct scoreboard_slot *scoreboard_slot(struct scoreboard *sb, int index);

void scoreboard_set_state(struct scoreboard_slot *slot, int state);
void scoreboard_begin_batch(struct scoreboard_slot *slot, int64_t now_ms);
void scoreboard_end_batch(struct scoreboard_slot *slot, long jobs);
void scoreboard_set_error(struct scoreboard_slot *slot, const char *msg);
/* Copy last_error consistently (retries while the worker writes it). */
void scoreboard_get_error(struct scoreboard_slot *slot, char *buf, size_t size);
const char *scoreboard_state_name(int state);

#endif
