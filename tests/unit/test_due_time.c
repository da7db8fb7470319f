/* test_due_time.c - the values of ferryctl enqueue --delay and --at: units,
 * limits, RFC 3339 with offsets and fractions, and what is refused. */
#include <criterion/criterion.h>
#include <string.h>

#include "due_time.h"

static long long
delay(const char *s)
{
	char err[256];
	long long ms = -1;
	cr_assert_eq(due_time_parse_delay(s, &ms, err, sizeof(err)), 0,
	    "%s: %s", s, err);
	return ms;
}

static long long
at(const char *s)
{
	char err[256];
	long long ms = -1;
	cr_assert_eq(due_time_parse_at(s, &ms, err, sizeof(err)), 0, "%s: %s",
	    s, err);
	return ms;
}

Test(due_time, delays_in_every_unit)
{
	cr_assert_eq(delay("0"), 0);
	cr_assert_eq(delay("30"), 30000);
	cr_assert_eq(delay("30s"), 30000);
	cr_assert_eq(delay("1500ms"), 1500);
	cr_assert_eq(delay("2m"), 120000);
	cr_assert_eq(delay("2h"), 7200000);
	cr_assert_eq(delay("1d"), 86400000);
	cr_assert_eq(delay("3650d"), DUE_TIME_DELAY_MAX_MS);
}

Test(due_time, times_with_offsets_and_fractions)
{
	cr_assert_eq(at("1970-01-01T00:00:00Z"), 0);
	cr_assert_eq(at("2026-12-02T10:00:00Z"), 1796205600000LL);
	cr_assert_eq(at("2026-12-02T11:00:00+01:00"), 1796205600000LL);
	cr_assert_eq(at("2026-12-02T05:30:00.5-04:30"), 1796205600500LL);
	cr_assert_eq(at("2024-02-29t10:00:00.123z"), 1709200800123LL);
}

Test(due_time, refusals_say_why)
{
	static const char *const bad_delays[] = { "", "s", "-1s", "1.5s", "5x",
	    "1 s", "3651d", "99999999999999999999999", "1s2" };
	static const char *const bad_times[] = { "", "tomorrow",
	    "2026-12-02T10:00:00", "2026-12-02 10:00Z", "2026-13-02T10:00:00Z",
	    "2026-02-29T10:00:00Z", "2026-12-02T24:00:00Z",
	    "2026-12-02T10:00:00.Z", "2026-12-02T10:00:00+1:00",
	    "1969-12-31T23:59:59Z", "2026-12-02T10:00:00Zjunk" };
	char err[256];
	long long ms;

	for (size_t i = 0; i < sizeof(bad_delays) / sizeof(*bad_delays); i++) {
		cr_assert_eq(due_time_parse_delay(bad_delays[i], &ms, err,
		    sizeof(err)), -1, "%s", bad_delays[i]);
		cr_assert(strncmp(err, "--delay '", 9) == 0, "%s", err);
	}
	for (size_t i = 0; i < sizeof(bad_times) / sizeof(*bad_times); i++) {
		cr_assert_eq(due_time_parse_at(bad_times[i], &ms, err,
		    sizeof(err)), -1, "%s", bad_times[i]);
		cr_assert(strstr(err, "not an RFC 3339 time") != NULL, "%s", err);
	}
}
