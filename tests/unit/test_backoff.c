/* test_backoff.c - restart and retry backoff arithmetic. */
#include <criterion/criterion.h>
#include <limits.h>

#include "backoff.h"

Test(backoff, restart_first_death_is_immediate)
{
	cr_assert_eq(backoff_restart_delay(0, 100, 30000), 0);
	cr_assert_eq(backoff_restart_delay(-3, 100, 30000), 0);
}

Test(backoff, restart_doubles_then_caps)
{
	long expect[] = { 100, 200, 400, 800, 1600, 3200, 6400, 12800, 25600,
	    30000, 30000 };
	for (int i = 0; i < (int)(sizeof(expect) / sizeof(expect[0])); i++)
		cr_assert_eq(backoff_restart_delay(i + 1, 100, 30000), expect[i],
		    "streak %d", i + 1);
}

Test(backoff, restart_never_overflows)
{
	cr_assert_eq(backoff_restart_delay(INT_MAX, 100, 30000), 30000);
	cr_assert_eq(backoff_restart_delay(5000, LONG_MAX / 3, LONG_MAX / 2),
	    LONG_MAX / 2);
	cr_assert_eq(backoff_restart_delay(3, 500, 200), 200);
}

Test(backoff, retry_without_jitter_bounds)
{
	/* random 0 gives the lower bound: half of the exponential delay */
	cr_assert_eq(backoff_retry_delay(1, 1000, 300000, 0), 500);
	cr_assert_eq(backoff_retry_delay(2, 1000, 300000, 0), 1000);
	cr_assert_eq(backoff_retry_delay(3, 1000, 300000, 0), 2000);
	cr_assert_eq(backoff_retry_delay(30, 1000, 300000, 0), 150000);
	cr_assert_eq(backoff_retry_delay(0, 1000, 300000, 0), 500);
}

Test(backoff, retry_jitter_stays_in_range)
{
	for (uint32_t r = 0; r < 100000; r += 7) {
		long d = backoff_retry_delay(4, 1000, 300000, r * 2654435761u);
		cr_assert(d >= 4000 && d <= 8000, "delay %ld out of 4000..8000", d);
	}
	cr_assert_eq(backoff_retry_delay(4, 1000, 300000, 4000), 8000);
	cr_assert_eq(backoff_retry_delay(4, 1000, 300000, 4001), 4000);
}

Test(backoff, retry_cap_holds_with_jitter)
{
	for (uint32_t r = 0; r < 1000; r++)
		cr_assert_leq(backoff_retry_delay(50, 1000, 300000, r * 97u), 300000);
	cr_assert_eq(backoff_retry_delay(1, 1, 1, 12345), 1);
}
