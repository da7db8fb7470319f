/* test_servers.c - the test-server library (servers.c) starts real Redis and
 * PostgreSQL servers that answer, keeps data where it promises to, and never
 * leaves anything behind. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include "harness.h"
#include "servers.h"

#include <criterion/criterion.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <libpq-fe.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

static int
alive(pid_t pid)
{
	return pid > 0 && kill(pid, 0) == 0;
}

static int
dir_exists(const char *path)
{
	struct stat st;
	return path[0] != '\0' && stat(path, &st) == 0;
}

static PGconn *
pg_connect(const struct test_pg *p)
{
	PGconn *c = PQconnectdb(p->conninfo);
	cr_assert_not_null(c);
	cr_assert_eq(PQstatus(c), CONNECTION_OK, "connect %s: %s", p->conninfo,
	    PQerrorMessage(c));
	return c;
}

static char *
pg_value(PGconn *c, const char *sql)
{
	PGresult *r = PQexec(c, sql);
	cr_assert_eq(PQresultStatus(r), PGRES_TUPLES_OK, "%s: %s", sql,
	    PQerrorMessage(c));
	cr_assert_eq(PQntuples(r), 1);
	char *v = strdup(PQgetvalue(r, 0, 0));
	PQclear(r);
	return v;
}

/* The negative tests expect servers.c to complain on stderr; keep that noise
 * out of the test log so real failures stand out. */
static int saved_stderr = -1;

static void
quiet(void)
{
	fflush(stderr);
	saved_stderr = dup(2);
	int devnull = open("/dev/null", O_WRONLY);
	if (devnull >= 0) {
		dup2(devnull, 2);
		close(devnull);
	}
}

static void
unquiet(void)
{
	if (saved_stderr < 0)
		return;
	fflush(stderr);
	dup2(saved_stderr, 2);
	close(saved_stderr);
	saved_stderr = -1;
}

TestSuite(servers, .timeout = 180);

Test(servers, free_port_is_bindable)
{
	int port = test_free_port();
	cr_assert(port > 0 && port < 65536, "port %d", port);
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	cr_assert(fd >= 0);
	struct sockaddr_in a;
	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	a.sin_port = htons((uint16_t)port);
	cr_assert_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0, "bind %d: %s",
	    port, strerror(errno));
	close(fd);
}

/* A test picks a port for ferryd and then starts servers: none of them may
 * be handed the same port (CI once saw metrics_listen on Redis's port). */
Test(servers, free_ports_are_never_handed_out_twice)
{
	enum { N = 300 };
	int port[N];
	for (int i = 0; i < N; i++) {
		port[i] = test_free_port();
		cr_assert(port[i] > 0, "port %d at call %d", port[i], i);
		for (int j = 0; j < i; j++)
			cr_assert_neq(port[i], port[j], "port %d handed out by "
			    "calls %d and %d", port[i], j, i);
	}
}

Test(servers, redis_starts_answers_and_stops)
{
	struct test_redis r;
	char buf[256];
	cr_assert_eq(test_redis_start(&r, NULL), 0);
	cr_assert(alive(r.pid));
	cr_assert(dir_exists(r.dir));
	cr_assert_eq(test_redis_ping(&r), 0);
	cr_assert_gt(test_redis_command(r.port, "PING", buf, sizeof(buf)), 0);
	cr_assert_str_eq(buf, "+PONG\r\n");
	/* the defaults: no persistence, listening where we said */
	cr_assert_gt(test_redis_command(r.port, "CONFIG GET appendonly", buf,
	    sizeof(buf)), 0);
	cr_assert(strstr(buf, "no") != NULL, "%s", buf);

	pid_t pid = r.pid;
	char dir[256];
	strcpy(dir, r.dir);
	test_redis_stop(&r);
	cr_assert(!alive(pid), "redis-server %d still running", (int)pid);
	cr_assert(!dir_exists(dir), "%s still exists", dir);
	cr_assert_eq(r.pid, 0);
	test_redis_stop(&r); /* twice is harmless */
}

Test(servers, redis_extra_args_override_defaults)
{
	struct test_redis r;
	char buf[256];
	const char *const args[] = { "--maxmemory", "10mb", "--maxmemory-policy",
		"noeviction", NULL };
	cr_assert_eq(test_redis_start(&r, args), 0);
	cr_assert_gt(test_redis_command(r.port, "CONFIG GET maxmemory", buf,
	    sizeof(buf)), 0);
	cr_assert(strstr(buf, "10485760") != NULL, "%s", buf);
	test_redis_stop(&r);
}

Test(servers, redis_kill9_and_restart_keeps_aof_data)
{
	struct test_redis r;
	char buf[256];
	const char *const aof[] = { "--appendonly", "yes", "--appendfsync",
		"always", NULL };
	cr_assert_eq(test_redis_start(&r, aof), 0);
	cr_assert_gt(test_redis_command(r.port, "RPUSH ferry:{q}:ready job1 "
	    "job2", buf, sizeof(buf)), 0);
	cr_assert_str_eq(buf, ":2\r\n");
	int port = r.port;
	pid_t old = r.pid;

	test_redis_kill9(&r);
	cr_assert(!alive(old));
	cr_assert_eq(r.pid, 0);
	cr_assert(dir_exists(r.dir), "kill9 must keep %s", r.dir);
	cr_assert_neq(test_redis_ping(&r), 0, "nothing answers after kill9");

	cr_assert_eq(test_redis_restart(&r, aof), 0);
	cr_assert_eq(r.port, port);
	cr_assert_neq(r.pid, old);
	cr_assert_gt(test_redis_command(r.port, "LRANGE ferry:{q}:ready 0 -1",
	    buf, sizeof(buf)), 0);
	cr_assert_str_eq(buf, "*2\r\n$4\r\njob1\r\n$4\r\njob2\r\n");
	test_redis_stop(&r);
}

Test(servers, redis_restart_refuses_while_running)
{
	struct test_redis r;
	cr_assert_eq(test_redis_start(&r, NULL), 0);
	quiet();
	int rc = test_redis_restart(&r, NULL);
	unquiet();
	cr_assert_eq(rc, -1);
	test_redis_stop(&r);
}

Test(servers, two_redis_side_by_side)
{
	struct test_redis a, b;
	cr_assert_eq(test_redis_start(&a, NULL), 0);
	cr_assert_eq(test_redis_start(&b, NULL), 0);
	cr_assert_neq(a.port, b.port);
	cr_assert_str_neq(a.dir, b.dir);
	cr_assert_eq(test_redis_ping(&a), 0);
	cr_assert_eq(test_redis_ping(&b), 0);
	test_redis_stop(&a);
	cr_assert_eq(test_redis_ping(&b), 0);
	test_redis_stop(&b);
}

Test(servers, redis_bad_args_fail_loudly)
{
	struct test_redis r;
	const char *const bad[] = { "--no-such-option", "1", NULL };
	quiet();
	int rc = test_redis_start(&r, bad);
	unquiet();
	cr_assert_eq(rc, -1);
	cr_assert_eq(r.pid, 0);
	test_redis_stop(&r); /* harmless after a failed start */
}

Test(servers, pg_starts_answers_and_stops)
{
	struct test_pg p;
	cr_assert_eq(test_pg_start(&p), 0);
	cr_assert(alive(p.pid));
	cr_assert(strstr(p.conninfo, "dbname=ferry") != NULL);

	PGconn *c = pg_connect(&p);
	char *one = pg_value(c, "select 1");
	cr_assert_str_eq(one, "1");
	free(one);
	char *db = pg_value(c, "select current_database()");
	cr_assert_str_eq(db, "ferry");
	free(db);
	PQfinish(c);

	/* psql takes the same conninfo */
	char cmd[1024];
	const char *bindir = getenv("PG_BINDIR");
	snprintf(cmd, sizeof(cmd), "'%s/psql' -X -At -d '%s' -c 'select 40+2'",
	    bindir && *bindir ? bindir : "/usr/lib/postgresql/15/bin",
	    p.conninfo);
	FILE *f = popen(cmd, "r");
	cr_assert_not_null(f);
	char out[64] = "";
	cr_assert_not_null(fgets(out, sizeof(out), f));
	cr_assert_eq(pclose(f), 0);
	cr_assert_str_eq(out, "42\n");

	pid_t pid = p.pid;
	char dir[256];
	strcpy(dir, p.dir);
	test_pg_stop(&p);
	cr_assert(!alive(pid), "postgres %d still running", (int)pid);
	cr_assert(!dir_exists(dir), "%s still exists", dir);
	test_pg_stop(&p); /* twice is harmless */
}

Test(servers, pg_pause_and_resume_keep_data)
{
	struct test_pg p;
	cr_assert_eq(test_pg_start(&p), 0);
	PGconn *c = pg_connect(&p);
	h_pq_exec(c, "create table t (id int primary key)");
	h_pq_exec(c, "insert into t values (1), (2), (3)");
	int port = p.port;
	pid_t old = p.pid;

	cr_assert_eq(test_pg_pause(&p), 0);
	cr_assert(!alive(old));
	cr_assert_eq(p.pid, 0);
	/* the open session is gone, new ones are refused: an outage */
	PGresult *r = PQexec(c, "select 1");
	cr_assert_neq(PQresultStatus(r), PGRES_TUPLES_OK);
	PQclear(r);
	PQfinish(c);
	c = PQconnectdb(p.conninfo);
	cr_assert_eq(PQstatus(c), CONNECTION_BAD);
	PQfinish(c);
	quiet();
	int rc = test_pg_pause(&p);
	unquiet();
	cr_assert_eq(rc, -1, "pausing a paused server fails");

	cr_assert_eq(test_pg_resume(&p), 0);
	cr_assert_eq(p.port, port);
	cr_assert(alive(p.pid));
	c = pg_connect(&p);
	char *n = pg_value(c, "select count(*) from t");
	cr_assert_str_eq(n, "3");
	free(n);
	PQfinish(c);
	test_pg_stop(&p);
}

Test(servers, pg_stop_while_paused_cleans_up)
{
	struct test_pg p;
	cr_assert_eq(test_pg_start(&p), 0);
	char dir[256];
	strcpy(dir, p.dir);
	cr_assert_eq(test_pg_pause(&p), 0);
	cr_assert(dir_exists(dir));
	test_pg_stop(&p);
	cr_assert(!dir_exists(dir));
}

Test(servers, two_pg_side_by_side)
{
	struct test_pg a, b;
	cr_assert_eq(test_pg_start(&a), 0);
	cr_assert_eq(test_pg_start(&b), 0);
	cr_assert_neq(a.port, b.port);
	PGconn *ca = pg_connect(&a), *cb = pg_connect(&b);
	h_pq_exec(ca, "create table only_in_a (x int)");
	PGresult *r = PQexec(cb, "select * from only_in_a");
	cr_assert_eq(PQresultStatus(r), PGRES_FATAL_ERROR);
	PQclear(r);
	PQfinish(ca);
	PQfinish(cb);
	test_pg_stop(&a);
	test_pg_stop(&b);
}
