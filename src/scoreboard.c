/* scoreboard.c - an anonymous shared mapping made before fork(), so every
 * worker inherits it. Counters are C11 atomics; the one string (last error)
 * is guarded by a sequence counter written only by the slot's worker. */
#include "scoreboard.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>

int
scoreboard_create(struct scoreboard *sb, int nslots)
{
	size_t size = sizeof(struct scoreboard_header) +
	    (size_t)nslots * sizeof(struct scoreboard_slot);
	void *p = mmap(NULL, size, PROT_READ | PROT_WRITE,
	    MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		return -1;
	memset(p, 0, size);
	sb->header = p;
	sb->header->nslots = nslots;
	sb->slots = (struct scoreboard_slot *)(sb->header + 1);
	sb->size = size;
	return 0;
}

void
scoreboard_destroy(struct scoreboard *sb)
{
	if (sb->header != NULL)
		munmap(sb->header, sb->size);
	memset(sb, 0, sizeof(*sb));
}

int
scoreboard_acquire(struct scoreboard *sb)
{
	for (int i = 0; i < sb->header->nslots; i++) {
		struct scoreboard_slot *slot = &sb->slots[i];
		if (atomic_load(&slot->state) != SB_FREE)
			continue;
		atomic_store(&slot->pid, 0);
		atomic_store(&slot->batch_start_ms, 0);
		atomic_store(&slot->jobs_done, 0);
		atomic_store(&slot->seen_ms, 0);
		slot->last_error[0] = '\0';
		atomic_store(&slot->state, SB_STARTING);
		return i;
	}
	errno = ENOSPC;
	return -1;
}

void
scoreboard_release(struct scoreboard *sb, int index)
{
	struct scoreboard_slot *slot = scoreboard_slot(sb, index);

	atomic_store(&slot->pid, 0);
	atomic_store(&slot->batch_start_ms, 0);
	atomic_store(&slot->state, SB_FREE);
}

struct scoreboard_slot *
scoreboard_slot(struct scoreboard *sb, int index)
{
	return &sb->slots[index];
}

void
scoreboard_set_state(struct scoreboard_slot *slot, int state)
{
	atomic_store(&slot->state, state);
}

void
scoreboard_begin_batch(struct scoreboard_slot *slot, int64_t now_ms)
{
	atomic_store(&slot->batch_start_ms, now_ms);
	atomic_store(&slot->state, SB_BUSY);
}

void
scoreboard_end_batch(struct scoreboard_slot *slot, long jobs)
{
	atomic_fetch_add(&slot->jobs_done, jobs);
	atomic_store(&slot->batch_start_ms, 0);
	atomic_store(&slot->state, SB_IDLE);
}

void
scoreboard_set_error(struct scoreboard_slot *slot, const char *msg)
{
	atomic_fetch_add(&slot->error_seq, 1);
	strncpy(slot->last_error, msg, sizeof(slot->last_error) - 1);
	slot->last_error[sizeof(slot->last_error) - 1] = '\0';
	atomic_fetch_add(&slot->error_seq, 1);
}

void
scoreboard_get_error(struct scoreboard_slot *slot, char *buf, size_t size)
{
	for (int tries = 0; tries < 100; tries++) {
		unsigned before = atomic_load(&slot->error_seq);
		if (before & 1)
			continue;
		memcpy(buf, slot->last_error,
		    size < sizeof(slot->last_error) ? size : sizeof(slot->last_error));
		buf[size - 1] = '\0';
		if (atomic_load(&slot->error_seq) == before)
			return;
	}
	buf[0] = '\0';
}

const char *
scoreboard_state_name(int state)
{
	static const char *names[] = {
		"free", "starting", "idle", "busy", "stopping",
	};
	if (state < 0 || state > SB_STOPPING)
		return "unknown";
	return names[state];
}
