/* test_pg_conn.c - what a SQLSTATE means for a batch (pg_conn_error_class:
 * pure, no server). */
#include <criterion/criterion.h>

#include "pg_conn.h"
#include "util.h"

Test(pg_conn, error_class)
{
	static const struct {
		const char *state;
		enum pg_error_class want;
	} t[] = {
		{ "22001", PG_ERR_DATA }, { "22P02", PG_ERR_DATA },
		{ "23505", PG_ERR_DATA }, { "23502", PG_ERR_DATA },
		{ "42804", PG_ERR_DATA }, { "42P02", PG_ERR_DATA },
		{ "42P01", PG_ERR_UNAVAILABLE }, { "42703", PG_ERR_UNAVAILABLE },
		{ "42501", PG_ERR_UNAVAILABLE }, { "3F000", PG_ERR_UNAVAILABLE },
		{ "3F001", PG_ERR_OTHER },
		{ "40001", PG_ERR_TRANSIENT }, { "40P01", PG_ERR_TRANSIENT },
		{ "40002", PG_ERR_OTHER }, { "40003", PG_ERR_OTHER },
		{ "08006", PG_ERR_UNAVAILABLE }, { "08P01", PG_ERR_UNAVAILABLE },
		{ "57P01", PG_ERR_UNAVAILABLE }, { "57P02", PG_ERR_UNAVAILABLE },
		{ "57P03", PG_ERR_UNAVAILABLE }, { "57014", PG_ERR_OTHER },
		{ "55P03", PG_ERR_UNAVAILABLE }, { "55000", PG_ERR_OTHER },
		{ "57P04", PG_ERR_OTHER }, { "53100", PG_ERR_UNAVAILABLE },
		{ "53300", PG_ERR_UNAVAILABLE }, { "XX000", PG_ERR_OTHER },
		{ "25P02", PG_ERR_OTHER }, { "25006", PG_ERR_UNAVAILABLE },
		{ "25001", PG_ERR_OTHER }, { "", PG_ERR_OTHER },
		{ "22", PG_ERR_OTHER }, { "220011", PG_ERR_OTHER },
		{ NULL, PG_ERR_OTHER },
	};
	size_t i;

	for (i = 0; i < FERRY_ARRAY_LEN(t); i++)
		cr_assert_eq(pg_conn_error_class(t[i].state), t[i].want, "%s",
		    t[i].state ? t[i].state : "NULL");
}
