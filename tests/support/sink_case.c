/* sink_case.c - the PostgreSQL sink driven directly (sink_case.h). */
#include "sink_case.h"

#include <criterion/criterion.h>
#include <string.h>

#include "pg_target.h"

struct ferryd sc_d;
struct ferry_config sc_cfg;

void
sc_teardown(void)
{
	config_free(&sc_cfg);
	h_teardown(&sc_d);
}

const struct queue_config *
sc_setup(void)
{
	struct config_errors errs = { 0, NULL };

	h_setup(&sc_d, NULL, "");
	h_config(&sc_d, h_pg_start(&sc_d), "[queue q]\nhandler = postgres\n"
	    "table = events\n");
	h_pg_exec(&sc_d, "CREATE TABLE events (n bigint)");
	cr_assert_eq(config_load(sc_d.config, &sc_cfg, &errs), 0);
	char err[256];
	cr_assert_eq(pg_target_check(&sc_cfg, &sc_cfg.queues[0], true, NULL,
	    err, sizeof(err)), PG_OK, "%s", err);
	return &sc_cfg.queues[0];
}

void
sc_make_jobs(struct job *jobs, char els[][128], int first, int n,
    const char *stamps)
{
	for (int i = 0; i < n; i++)
		if (stamps != NULL)
			h_job_parse(&jobs[i], els[i], 128, true, "{\"ferry\":1,"
			    "\"recoveries\":1,\"attempts\":0,\"stamps\":[%s],"
			    "\"job\":{\"n\":%d}}", stamps, first + i);
		else
			h_job_parse(&jobs[i], els[i], 128, false, "{\"n\":%d}",
			    first + i);
}

void
sc_assert_all(struct handler_result *res, int n, int outcome)
{
	for (int i = 0; i < n; i++)
		cr_assert_eq(res[i].outcome, outcome, "job %d: %d %s", i,
		    res[i].outcome, res[i].message);
}

void
sc_run_ok(struct sink_pg *s, struct job *jobs, struct handler_result *res,
    int n, const char *key)
{
	char err[256];

	memset(res, 0, sizeof(*res) * (size_t)n);
	cr_assert_eq(sink_pg_run(s, jobs, res, n, key, err, sizeof(err)),
	    HANDLER_DONE, "%s", err);
	sc_assert_all(res, n, HANDLER_OK);
}
