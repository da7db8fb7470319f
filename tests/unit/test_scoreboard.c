/* test_scoreboard.c - slots are shared across fork and recycled cleanly. */
#include <criterion/criterion.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "scoreboard.h"

Test(scoreboard, acquire_until_full_then_reuse)
{
	struct scoreboard sb;
	cr_assert_eq(scoreboard_create(&sb, 3), 0);
	cr_assert_eq(scoreboard_acquire(&sb), 0);
	cr_assert_eq(scoreboard_acquire(&sb), 1);
	cr_assert_eq(scoreboard_acquire(&sb), 2);
	cr_assert_eq(scoreboard_acquire(&sb), -1);
	scoreboard_release(&sb, 1);
	cr_assert_eq(scoreboard_slot(&sb, 1)->state, SB_FREE);
	cr_assert_eq(scoreboard_acquire(&sb), 1);
	cr_assert_eq(scoreboard_slot(&sb, 1)->state, SB_STARTING);
	scoreboard_destroy(&sb);
}

Test(scoreboard, reacquired_slot_is_reset)
{
	struct scoreboard sb;
	cr_assert_eq(scoreboard_create(&sb, 1), 0);
	struct scoreboard_slot *slot = scoreboard_slot(&sb, scoreboard_acquire(&sb));
	scoreboard_begin_batch(slot, 1234);
	scoreboard_end_batch(slot, 10);
	scoreboard_set_error(slot, "boom");
	scoreboard_release(&sb, 0);
	cr_assert_eq(scoreboard_acquire(&sb), 0);
	cr_assert_eq(slot->jobs_done, 0);
	cr_assert_eq(slot->batch_start_ms, 0);
	cr_assert_str_empty(slot->last_error);
	scoreboard_destroy(&sb);
}

Test(scoreboard, child_writes_are_seen_by_parent)
{
	struct scoreboard sb;
	char err[SCOREBOARD_ERROR_MAX];

	cr_assert_eq(scoreboard_create(&sb, 4), 0);
	int idx = scoreboard_acquire(&sb);
	struct scoreboard_slot *slot = scoreboard_slot(&sb, idx);
	pid_t pid = fork();
	cr_assert_neq(pid, -1);
	if (pid == 0) {
		slot->pid = getpid();
		scoreboard_begin_batch(slot, 5000);
		scoreboard_end_batch(slot, 7);
		scoreboard_begin_batch(slot, 6000);
		scoreboard_set_error(slot, "redis lost: Connection reset by peer");
		_exit(0);
	}
	int status;
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert_eq(slot->pid, pid);
	cr_assert_eq(slot->jobs_done, 7);
	cr_assert_eq(slot->batch_start_ms, 6000);
	cr_assert_eq(slot->state, SB_BUSY);
	scoreboard_get_error(slot, err, sizeof(err));
	cr_assert_str_eq(err, "redis lost: Connection reset by peer");
	scoreboard_destroy(&sb);
}

Test(scoreboard, long_error_is_truncated)
{
	struct scoreboard sb;
	char big[400], err[SCOREBOARD_ERROR_MAX];

	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	cr_assert_eq(scoreboard_create(&sb, 1), 0);
	struct scoreboard_slot *slot = scoreboard_slot(&sb, scoreboard_acquire(&sb));
	scoreboard_set_error(slot, big);
	scoreboard_get_error(slot, err, sizeof(err));
	cr_assert_eq(strlen(err), SCOREBOARD_ERROR_MAX - 1);
	cr_assert_str_eq(scoreboard_state_name(SB_BUSY), "busy");
	cr_assert_str_eq(scoreboard_state_name(99), "unknown");
	scoreboard_destroy(&sb);
}

/* A worker waiting for PostgreSQL, Redis or the replicas says which, and
 * its batch has no age: the master does not take the wait for a hang. */
Test(scoreboard, waiting_states)
{
	struct scoreboard sb;

	cr_assert_eq(scoreboard_create(&sb, 1), 0);
	struct scoreboard_slot *slot = scoreboard_slot(&sb, scoreboard_acquire(&sb));
	scoreboard_begin_batch(slot, 1234);
	scoreboard_set_waiting(slot, SB_WAIT_POSTGRES);
	cr_assert_eq(slot->state, SB_WAIT_POSTGRES);
	cr_assert_eq(slot->batch_start_ms, 0);
	cr_assert_str_eq(scoreboard_state_name(SB_WAIT_POSTGRES),
	    "waiting-postgres");
	cr_assert_str_eq(scoreboard_state_name(SB_WAIT_REDIS), "waiting-redis");
	cr_assert_str_eq(scoreboard_state_name(SB_WAIT_REPLICAS),
	    "waiting-replicas");
	cr_assert_str_eq(scoreboard_state_name(SB_STATES), "unknown");
	scoreboard_destroy(&sb);
}

/* A dead worker's counters are kept in its queue's totals: two processes
 * in turn in one slot add up, histogram and error classes included. */
Test(scoreboard, totals_add_every_counter_of_a_slot)
{
	struct scoreboard sb;
	struct scoreboard_totals t = { 0 };

	cr_assert_eq(scoreboard_create(&sb, 1), 0);
	for (int life = 0; life < 2; life++) {
		int i = scoreboard_acquire(&sb);
		struct scoreboard_slot *slot = scoreboard_slot(&sb, i);
		scoreboard_begin_batch(slot, 1000);
		scoreboard_end_batch(slot, 5);
		scoreboard_record_batch(slot, 7);
		scoreboard_set_error(slot, "redis: connection lost");
		scoreboard_totals_add_slot(&t, slot);
		scoreboard_release(&sb, i);
	}
	cr_assert_eq(t.jobs_done, 10);
	cr_assert_eq(t.batches, 4);
	int64_t in_buckets = 0;
	for (int b = 0; b < SCOREBOARD_BUCKETS; b++)
		in_buckets += t.buckets[b];
	cr_assert_eq(in_buckets, 4);
	cr_assert_eq(t.errors[SB_ERR_REDIS], 2);
	cr_assert_eq(t.restarts, 0);
	scoreboard_destroy(&sb);
}
