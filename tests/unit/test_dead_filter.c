/* test_dead_filter.c - selecting dead entries (src/format/dead_filter.c):
 * a reason as text (either of reason and last_error, ASCII case ignored)
 * or as a SQLSTATE (exactly, at the start of the error), a group, times
 * (RFC 3339, a date, a duration ago; before is exclusive, after
 * inclusive), id patterns; malformed entries; and the groups of a
 * summary (src/format/dead_summary.c). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dead_filter.h"
#include "dead_summary.h"

#define T0 1700000000000LL

struct fixture {
	char el[512];
	struct dead_entry e;
};

static void
make(struct fixture *x, const char *reason, const char *last_error,
    long long time)
{
	int n = snprintf(x->el, sizeof(x->el), "{\"reason\":\"%s\",\"attempts\":1,"
	    "\"recoveries\":0,\"time\":%lld,\"worker\":\"w\"%s%s%s,\"job\":{}}",
	    reason, time, last_error ? ",\"last_error\":\"" : "",
	    last_error ? last_error : "", last_error ? "\"" : "");
	dead_entry_read(&x->e, x->el, (size_t)n);
	cr_assert(x->e.ok, "%s", x->el);
}

static bool
sel(const struct dead_filter *f, const struct fixture *x, const char *id)
{
	return dead_filter_match(f, &x->e, id);
}

Test(dead_filter, reason_as_text_or_sqlstate)
{
	struct fixture pg, handler, reason_state;
	struct dead_filter f;

	make(&pg, "failed by the handler", "23505: duplicate key value", T0);
	make(&handler, "failed by the handler", "exit 3: 23505 in the text", T0);
	make(&reason_state, "42P01: relation \\\"t\\\" does not exist", NULL, T0);
	dead_filter_init(&f);
	cr_assert(!dead_filter_active(&f));
	cr_assert(sel(&f, &pg, "a") && sel(&f, &handler, "a"));
	f.reason = "23505";
	cr_assert(sel(&f, &pg, "a"));
	cr_assert(!sel(&f, &handler, "a"), "a SQLSTATE is not a substring");
	f.reason = "42P01";
	cr_assert(sel(&f, &reason_state, "a"));
	f.reason = "DUPLICATE key";
	cr_assert(sel(&f, &pg, "a") && !sel(&f, &handler, "a"));
	f.reason = "by the handler";
	cr_assert(sel(&f, &pg, "a") && sel(&f, &handler, "a"));
	f.reason = "does not exist";
	cr_assert(sel(&f, &reason_state, "a") && !sel(&f, &pg, "a"));
	cr_assert(dead_filter_is_sqlstate("23505"));
	cr_assert(dead_filter_is_sqlstate("42P01"));
	cr_assert(!dead_filter_is_sqlstate("2350"));
	cr_assert(!dead_filter_is_sqlstate("42p01"));
	cr_assert(!dead_filter_is_sqlstate("235055"));
	dead_entry_free(&pg.e);
	dead_entry_free(&handler.e);
	dead_entry_free(&reason_state.e);
}

Test(dead_filter, groups)
{
	struct fixture pg, handler, attempts;
	struct dead_filter f;
	char *g;

	make(&pg, "failed by the handler", "23505: duplicate key value", T0);
	make(&handler, "failed by the handler", "exit 3", T0);
	make(&attempts, "failed 5 attempts (max_attempts)", "40001: serialize",
	    T0);
	cr_assert_str_eq(g = dead_filter_group(&pg.e), "23505");
	free(g);
	cr_assert_str_eq(g = dead_filter_group(&handler.e),
	    "failed by the handler");
	free(g);
	cr_assert_str_eq(g = dead_filter_group(&attempts.e), "40001");
	free(g);
	dead_filter_init(&f);
	f.group = "failed by the handler";
	cr_assert(sel(&f, &handler, "a"));
	cr_assert(!sel(&f, &pg, "a"), "its group is 23505");
	f.group = "40001";
	cr_assert(sel(&f, &attempts, "a") && !sel(&f, &pg, "a"));
	dead_entry_free(&pg.e);
	dead_entry_free(&handler.e);
	dead_entry_free(&attempts.e);
}

Test(dead_filter, times_and_ids)
{
	struct fixture x;
	struct dead_filter f;
	long long ms;
	char err[400];

	make(&x, "r", NULL, T0);
	dead_filter_init(&f);
	f.before_ms = T0;
	cr_assert(!sel(&f, &x, "a"), "before is exclusive");
	f.before_ms = T0 + 1;
	cr_assert(sel(&f, &x, "a"));
	f.after_ms = T0;
	cr_assert(sel(&f, &x, "a"), "after is inclusive");
	f.after_ms = T0 + 1;
	cr_assert(!sel(&f, &x, "a"));
	dead_filter_init(&f);
	f.id_glob = "job-1*";
	cr_assert(sel(&f, &x, "job-12") && !sel(&f, &x, "job-21"));
	f.id_glob = "job-\\*";
	cr_assert(sel(&f, &x, "job-*") && !sel(&f, &x, "job-1"));

	cr_assert_eq(dead_filter_time("--before", "2023-11-14T22:13:20Z", 0, &ms,
	    err, sizeof(err)), 0);
	cr_assert_eq(ms, T0);
	cr_assert_eq(dead_filter_time("--before", "2023-11-14T23:13:20.5+01:00",
	    0, &ms, err, sizeof(err)), 0);
	cr_assert_eq(ms, T0 + 500);
	cr_assert_eq(dead_filter_time("--after", "2023-11-14", 0, &ms, err,
	    sizeof(err)), 0);
	cr_assert_eq(ms, T0 - (22 * 3600 + 13 * 60 + 20) * 1000LL);
	cr_assert_eq(dead_filter_time("--after", "2h", T0, &ms, err,
	    sizeof(err)), 0);
	cr_assert_eq(ms, T0 - 7200000);
	cr_assert_eq(dead_filter_time("--after", "90s", T0, &ms, err,
	    sizeof(err)), 0);
	cr_assert_eq(ms, T0 - 90000);
	const char *bad[] = { "2026", "tomorrow", "2h ago", "-2h",
	    "2023-13-01", "2023-11-14T22:13", "" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		cr_assert_eq(dead_filter_time("--after", bad[i], T0, &ms, err,
		    sizeof(err)), -1, "%s", bad[i]);
		cr_assert_not_null(strstr(err, "--after '"), "%s", err);
	}
	dead_entry_free(&x.e);
}

Test(dead_filter, check_refuses_what_selects_nothing)
{
	struct dead_filter f;
	char err[300];

	dead_filter_init(&f);
	cr_assert_eq(dead_filter_check(&f, err, sizeof(err)), 0);
	f.after_ms = T0;
	f.before_ms = T0;
	cr_assert_eq(dead_filter_check(&f, err, sizeof(err)), -1);
	cr_assert_not_null(strstr(err, "--after is not earlier than --before"));
	dead_filter_init(&f);
	f.reason = "";
	cr_assert_eq(dead_filter_check(&f, err, sizeof(err)), -1);
}

Test(dead_filter, malformed_entries)
{
	static const char el[] = "{\"reason\":\"x\",\"job\":1}";
	struct dead_entry e;
	struct dead_filter f;
	char *g;

	dead_entry_read(&e, el, sizeof(el) - 1);
	cr_assert(!e.ok);
	dead_filter_init(&f);
	cr_assert(dead_filter_match(&f, &e, "sha"));
	f.reason = "malformed";
	cr_assert(dead_filter_match(&f, &e, "sha"));
	f.reason = "x";
	cr_assert(!dead_filter_match(&f, &e, "sha"), "its text is unread");
	dead_filter_init(&f);
	f.group = DEAD_ENTRY_MALFORMED;
	cr_assert(dead_filter_match(&f, &e, "sha"));
	dead_filter_init(&f);
	f.before_ms = T0;
	cr_assert(!dead_filter_match(&f, &e, "sha"), "it has no time");
	cr_assert_str_eq(g = dead_filter_group(&e), DEAD_ENTRY_MALFORMED);
	free(g);
	dead_entry_free(&e);
}

Test(dead_summary, counts_times_and_examples)
{
	struct fixture x[5];
	struct dead_summary s;

	/* newest first, as LRANGE gives them */
	make(&x[0], "failed by the handler", "23505: dup b", T0 + 40);
	make(&x[1], "failed by the handler", "exit 3", T0 + 30);
	make(&x[2], "failed by the handler", "23505: dup a", T0 + 20);
	make(&x[3], "failed by the handler", "23505: dup", T0 + 10);
	make(&x[4], "failed by the handler", "exit 4", T0);
	dead_summary_init(&s);
	for (int i = 0; i < 5; i++)
		dead_summary_add(&s, &x[i].e);
	dead_summary_sort(&s);
	cr_assert_eq(s.total, 5);
	cr_assert_eq(s.n, 2);
	cr_assert_str_eq(s.groups[0].name, "23505");
	cr_assert_eq(s.groups[0].count, 3);
	cr_assert_eq(s.groups[0].oldest_ms, T0 + 10);
	cr_assert_eq(s.groups[0].newest_ms, T0 + 40);
	cr_assert_str_eq(s.groups[0].last_error, "23505: dup b");
	cr_assert_str_eq(s.groups[1].name, "failed by the handler");
	cr_assert_eq(s.groups[1].count, 2);
	cr_assert_eq(s.groups[1].oldest_ms, T0);
	dead_summary_free(&s);
	for (int i = 0; i < 5; i++)
		dead_entry_free(&x[i].e);
}
