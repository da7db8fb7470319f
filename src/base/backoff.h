/* backoff.h - the two waiting rules of ferry, pure arithmetic: how long the
 * master waits before restarting a worker slot that keeps dying, and how long
 * a failed job waits before its next attempt. */
#ifndef FERRY_BACKOFF_H
#define FERRY_BACKOFF_H

#include <stdint.h>

/* Delay before restarting a slot after its `streak`-th quick death in a row
 * (streak 0: the first death after a healthy run, restarted at once). Doubles
 * from min_ms, capped at max_ms. */
long backoff_restart_delay(int streak, long min_ms, long max_ms);

/* Delay before attempt `attempt` + 1 of a job that failed `attempt` times
 * (attempt >= 1): base * 2^(attempt-1) capped at max, with "equal jitter":
 * half fixed, half drawn from `random`, so retries of many jobs spread out. */
long backoff_retry_delay(int attempt, long base_ms, long max_ms,
    uint32_t random);

#endif
