/* scoreboard.c - an anonymous shared mapping made before fork(), so every
 * worker inherits it. Counters are C11 atomics; the one string (last error)
 * is guarded by a sequence counter written only by the slot's worker. */
#include "scoreboard.h"

#include <ctype.h>
#include <errno.h>
#include <string.h>
#include <sys/mman.h>

#include "util.h"

const int64_t scoreboard_bucket_ms[SCOREBOARD_BUCKETS - 1] = {
	5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000,
};

int
scoreboard_create(struct scoreboard *sb, int nslots)
{
	/* the slots start at their own alignment (8: int64_t), whatever the
	 * header's size */
	size_t align = _Alignof(struct scoreboard_slot);
	size_t head = (sizeof(struct scoreboard_header) + align - 1) / align *
	    align;
	size_t size = head + (size_t)nslots * sizeof(struct scoreboard_slot);
	void *p = mmap(NULL, size, PROT_READ | PROT_WRITE,
	    MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		return -1;
	memset(p, 0, size);
	sb->header = p;
	sb->header->nslots = nslots;
	sb->slots = (struct scoreboard_slot *)((char *)p + head);
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
		atomic_store(&slot->fetch_start_ms, 0);
		slot->last_error[0] = '\0';
		atomic_store(&slot->paused, 0);
		atomic_store(&slot->batches, 0);
		atomic_store(&slot->batch_sum_ms, 0);
		for (int b = 0; b < SCOREBOARD_BUCKETS; b++)
			atomic_store(&slot->batch_buckets[b], 0);
		for (int c = 0; c < SB_ERR_CLASSES; c++)
			atomic_store(&slot->errors[c], 0);
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
	atomic_store(&slot->fetch_start_ms, 0);
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
scoreboard_set_waiting(struct scoreboard_slot *slot, int state)
{
	atomic_store(&slot->batch_start_ms, 0);
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
	int64_t started = atomic_load(&slot->batch_start_ms);

	if (jobs > 0 && started != 0)
		scoreboard_record_batch(slot, util_monotonic_ms() - started);
	atomic_fetch_add(&slot->jobs_done, jobs);
	atomic_store(&slot->batch_start_ms, 0);
	atomic_store(&slot->state, SB_IDLE);
}

void
scoreboard_record_batch(struct scoreboard_slot *slot, int64_t ms)
{
	int b = 0;

	while (b < SCOREBOARD_BUCKETS - 1 && ms > scoreboard_bucket_ms[b])
		b++;
	atomic_fetch_add(&slot->batch_buckets[b], 1);
	atomic_fetch_add(&slot->batch_sum_ms, ms);
	atomic_fetch_add(&slot->batches, 1);
}

/* The messages come from queue.c, consumer.c, sink_pg.c and
 * handler_exec.c; Redis error replies start with an upper-case code. */
enum scoreboard_error_class
scoreboard_error_class(const char *msg)
{
	size_t code = 0;

	while (isupper((unsigned char)msg[code]))
		code++;
	if (strncmp(msg, "postgres:", 9) == 0)
		return SB_ERR_POSTGRES;
	if (strncmp(msg, "[queue ", 7) == 0 || strncmp(msg, "table ", 6) == 0 ||
	    strncmp(msg, "cannot create ferry_batches", 27) == 0)
		return SB_ERR_SCHEMA;
	if (strncmp(msg, "handler ", 8) == 0 ||
	    strncmp(msg, "cannot run handler", 18) == 0)
		return SB_ERR_HANDLER;
	if (strstr(msg, "redis") != NULL || (code >= 2 && msg[code] == ' '))
		return SB_ERR_REDIS;
	return SB_ERR_OTHER;
}

const char *
scoreboard_error_class_name(int cls)
{
	static const char *names[] = {
		"redis", "postgres", "schema", "handler", "other",
	};
	if (cls < 0 || cls >= SB_ERR_CLASSES)
		return "other";
	return names[cls];
}

void
scoreboard_set_error(struct scoreboard_slot *slot, const char *msg)
{
	atomic_fetch_add(&slot->errors[scoreboard_error_class(msg)], 1);
	atomic_fetch_add(&slot->error_seq, 1);
	strncpy(slot->last_error, msg, sizeof(slot->last_error) - 1);
	slot->last_error[sizeof(slot->last_error) - 1] = '\0';
	atomic_fetch_add(&slot->error_seq, 1);
}

void
scoreboard_clear_error(struct scoreboard_slot *slot)
{
	atomic_fetch_add(&slot->error_seq, 1);
	slot->last_error[0] = '\0';
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
		"free", "starting", "idle", "busy", "stopping", "paused",
		"waiting-postgres", "waiting-redis", "waiting-replicas",
	};
	_Static_assert(FERRY_ARRAY_LEN(names) == SB_STATES,
	    "a name for every scoreboard state");
	if (state < 0 || state >= SB_STATES)
		return "unknown";
	return names[state];
}

void
scoreboard_totals_add_slot(struct scoreboard_totals *t,
    struct scoreboard_slot *slot)
{
	t->jobs_done += atomic_load(&slot->jobs_done);
	t->batches += atomic_load(&slot->batches);
	t->batch_sum_ms += atomic_load(&slot->batch_sum_ms);
	for (int b = 0; b < SCOREBOARD_BUCKETS; b++)
		t->buckets[b] += atomic_load(&slot->batch_buckets[b]);
	for (int c = 0; c < SB_ERR_CLASSES; c++)
		t->errors[c] += atomic_load(&slot->errors[c]);
}
