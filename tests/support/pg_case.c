/* pg_case.c - the "profiles" fixture of test_upsert and test_update
 * (pg_case.h). */
#include "pg_case.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "job.h"
#include "pg_target.h"

struct ferryd pc_d;
struct ferry_config pc_cfg;

void
pc_teardown(void)
{
	config_free(&pc_cfg);
	h_teardown(&pc_d);
}

const struct queue_config *
pc_setup(struct ferryd *d, struct ferry_config *cfg, const char *queue)
{
	struct config_errors errs = { 0, NULL };
	char body[1024];

	h_setup(d, NULL, "");
	snprintf(body, sizeof(body), "[queue q]\nhandler = postgres\n"
	    "table = profiles\n%s", queue);
	h_config(d, h_pg_start(d), body);
	h_pg_exec(d, PC_PROFILES);
	cr_assert_eq(config_load(d->config, cfg, &errs), 0, "%s",
	    errs.n ? errs.msgs[0] : "");
	return &cfg->queues[0];
}

struct sink_pg *
pc_sink(struct ferry_config *cfg, const struct queue_config *q)
{
	char err[512];

	cr_assert_eq(pg_target_check(cfg, q, true, NULL, err, sizeof(err)),
	    PG_OK, "%s", err);
	return sink_pg_new(cfg, q);
}

void
pc_run(struct sink_pg *s, const char *const *docs, int n, const char *key,
    const char *const *dead)
{
	struct job jobs[16];
	struct handler_result res[16];
	char els[16][128], err[256];

	cr_assert_leq(n, 16);
	for (int i = 0; i < n; i++)
		h_job_parse(&jobs[i], els[i], 128, false, "%s", docs[i]);
	memset(res, 0, sizeof(res));
	cr_assert_eq(sink_pg_run(s, jobs, res, n, key, err, sizeof(err)),
	    HANDLER_DONE, "%s", err);
	for (int i = 0; i < n; i++) {
		const char *want = dead != NULL ? dead[i] : NULL;
		cr_assert_eq(res[i].outcome, want ? HANDLER_FAIL : HANDLER_OK,
		    "job %d (%s): %s", i, docs[i], res[i].message);
		if (want != NULL)
			cr_assert_eq(strncmp(res[i].message, want, strlen(want)), 0,
			    "job %d: \"%s\", want \"%s\"", i, res[i].message, want);
	}
	h_jobs_free(jobs, n);
}

void
pc_assert_rows(struct ferryd *d, const char *want)
{
	char *got = h_pg_text(d, "SELECT coalesce(string_agg(k || '=' || "
	    "coalesce(name, '-') || coalesce('/' || v, ''), ',' ORDER BY k), "
	    "'') FROM profiles");

	cr_assert_str_eq(got, want);
	free(got);
}

void
pc_setup_ferryd(struct ferryd *d, const char *ferryd_extra,
    const char *queue)
{
	char global[512], body[1024];
	struct h_run r;

	h_setup(d, NULL, "");
	snprintf(global, sizeof(global), "%s%s", h_pg_start(d), ferryd_extra);
	snprintf(body, sizeof(body), "[queue q]\nhandler = postgres\n"
	    "table = profiles\ncolumns = k, name, v\n%s", queue);
	h_config(d, global, body);
	h_pg_exec(d, PC_PROFILES);
	cr_assert_eq(h_ctl(&r, d->config, NULL, "init-db", NULL), 0, "%s%s",
	    r.out, r.err);
	h_run_free(&r);
}

void
pc_push(struct ferryd *d, int n, int keys, int delete_every)
{
	freeReplyObject(h_redis(d, "PING"));
	for (int i = 0; i < n; i++)
		if (delete_every > 0 && i < n - keys &&
		    i % delete_every == delete_every - 1)
			redisAppendCommand(d->rc, "LPUSH ferry:{q}:ready "
			    "{\"op\":\"delete\",\"k\":%d,\"v\":%d}", i % keys, i);
		else
			redisAppendCommand(d->rc, "LPUSH ferry:{q}:ready "
			    "{\"k\":%d,\"name\":\"n%d\",\"v\":%d}", i % keys, i, i);
	for (int i = 0; i < n; i++) {
		redisReply *r;
		cr_assert_eq(redisGetReply(d->rc, (void **)&r), REDIS_OK);
		freeReplyObject(r);
	}
}

void
pc_assert_last_of_each_key(struct ferryd *d, int n, int keys)
{
	char sql[256];

	cr_assert_eq(h_pg_int(d, "SELECT count(*) FROM profiles"), keys);
	snprintf(sql, sizeof(sql), "SELECT count(*) FROM profiles WHERE v = "
	    "%d - %d + k AND name = 'n' || v", n, keys);
	cr_assert_eq(h_pg_int(d, sql), keys, "a key does not hold its last "
	    "job");
	h_assert_queue_empty(d, "q");
	cr_assert_eq(h_redis_int(d, "LLEN ferry:{q}:dead"), 0);
	cr_assert_eq(h_redis_int(d, "HGET ferry:{q}:stats done"), n);
}
