/* backoff.c - exponential backoff, capped, without overflow for any input. */
#include "backoff.h"

static long
exponential(int step, long base_ms, long max_ms)
{
	long delay = base_ms;

	if (base_ms >= max_ms)
		return max_ms;
	for (int i = 0; i < step; i++) {
		if (delay >= max_ms / 2)
			return max_ms;
		delay *= 2;
	}
	return delay;
}

long
backoff_restart_delay(int streak, long min_ms, long max_ms)
{
	if (streak <= 0)
		return 0;
	return exponential(streak - 1, min_ms, max_ms);
}

long
backoff_retry_delay(int attempt, long base_ms, long max_ms, uint32_t random)
{
	long delay = exponential(attempt > 1 ? attempt - 1 : 0, base_ms, max_ms);
	long half = delay / 2;

	return delay - half + (long)(random % (uint32_t)(half + 1));
}
