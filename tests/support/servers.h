/* servers.h - start and stop REAL redis-server and PostgreSQL instances for
 * integration tests, each in its own temporary directory on its own port.
 *
 * Plain C11 + POSIX, no Criterion, no hiredis, no libpq inside. Every function
 * that can fail returns -1 and writes a clear message (with the tail of the
 * server's log) to stderr; callers only need `cr_assert_eq(rc, 0)`.
 *
 * Environment:
 *   REDIS_SERVER  redis-server binary (default "redis-server", looked up in PATH)
 *   PG_BINDIR     directory of initdb and postgres (default /usr/lib/postgresql/15/bin)
 *   TMPDIR        where the temporary directories go (default /tmp)
 *
 * Servers are children of the calling thread and get PR_SET_PDEATHSIG, so they
 * die with the test process even when it crashes; start them from the thread
 * that lives for the whole test (Criterion's test or fixture code is fine).
 * Nothing global is registered (no atexit, no signal handlers), so forking
 * after a start is safe. The stop functions accept zeroed or already-stopped
 * structs and never leave a server running.
 *
 * PostgreSQL: initdb runs once per PG binary into a shared template cluster
 * ($TMPDIR/ferry-pg-template-<uid>-<hash>, created atomically, reused by every
 * process afterwards); each start copies it. The cluster has trust auth, the
 * superuser "postgres" and the database "ferry". When running as root, initdb
 * and postgres run as the user "postgres". */
#ifndef FERRY_TEST_SERVERS_H
#define FERRY_TEST_SERVERS_H

#include <sys/types.h>

struct test_redis {
	pid_t pid;      /* 0 when not running */
	int port;
	char dir[256];  /* --dir; holds redis.log (and the AOF if enabled) */
};

/* Start redis-server on 127.0.0.1:<free port> in a new temp dir with
 *   --port P --bind 127.0.0.1 --dir DIR --save "" --appendonly no
 *   --daemonize no --logfile DIR/redis.log
 * followed by extra_args (NULL-terminated, may be NULL), which therefore
 * override the defaults, e.g. {"--appendonly", "yes", NULL}. Waits (up to 30 s)
 * until it answers PING. Retries with a new port if the port was taken. */
int test_redis_start(struct test_redis *r, const char *const *extra_args);
/* SIGTERM, wait (SIGKILL after 10 s), remove the dir. */
void test_redis_stop(struct test_redis *r);
/* SIGKILL, wait; keeps the dir (to restart from the AOF). */
void test_redis_kill9(struct test_redis *r);
/* Start again on the same port and dir (after kill9). Pass the same
 * extra_args as at start (e.g. appendonly yes) to load the AOF. */
int test_redis_restart(struct test_redis *r, const char *const *extra_args);
/* 0 if the server answers PING with PONG (and is not loading), else -1
 * (quietly). Extra helper, handy in tests and harnesses. */
int test_redis_ping(const struct test_redis *r);
/* Send one inline command (no trailing CRLF, e.g. "INFO replication") to
 * 127.0.0.1:port and read one complete RESP reply, nested arrays included,
 * raw into buf (NUL-terminated). Several commands joined by "\r\n" go on
 * the same connection and all their replies are read, one after the other
 * (e.g. "SET k v\r\nWAIT 1 1000": WAIT counts the replicas that have this
 * connection's writes). Returns the length of the replies, or -1 (quietly)
 * when the server is unreachable, a reply takes over 2 s, or they do not fit
 * in bufsz. Error replies ("-ERR ...") are returned like any other. */
int test_redis_command(int port, const char *inline_cmd, char *buf,
    size_t bufsz);

struct test_pg {
	pid_t pid;           /* postmaster pid; 0 when not running */
	int port;
	char dir[256];       /* temp dir: data/ (PGDATA), postgres.log, socket */
	char conninfo[512];  /* "host=127.0.0.1 port=P dbname=ferry user=postgres ..." */
};

/* Copy the template cluster (initdb on first use) and start
 *   postgres -D DIR/data -k DIR -h 127.0.0.1 -p PORT
 * Waits (up to 30 s) until it accepts connections. Database "ferry" exists. */
int test_pg_start(struct test_pg *p);
/* Fast shutdown (SIGINT; SIGQUIT after 30 s, SIGKILL after 5 more), wait,
 * remove the dir. */
void test_pg_stop(struct test_pg *p);
/* Fast shutdown keeping the data (database outage). */
int test_pg_pause(struct test_pg *p);
/* Start again on the same port and data. */
int test_pg_resume(struct test_pg *p);

/* A streaming standby of the running `primary`: pg_basebackup -R -X
 * stream (as the primary's user) into a new temp dir, started on its own
 * port; waits until it accepts (read-only) connections. Stop it with
 * test_pg_stop. The template's pg_hba.conf trusts replication from
 * 127.0.0.1. */
int test_pg_standby_start(struct test_pg *standby,
    const struct test_pg *primary);
/* Immediate shutdown (SIGQUIT, pg_ctl stop -m immediate), keeping the dir:
 * the primary of a failover. */
int test_pg_kill_immediate(struct test_pg *p);
/* pg_ctl promote -w: the standby becomes a primary. */
int test_pg_promote(struct test_pg *p);
/* A TCP port on 127.0.0.1 that was free a moment ago (bind to port 0). */
int test_free_port(void);
/* CLOCK_MONOTONIC in ms: the one clock of the test helpers (harness.h's
 * h_now_ms reads it). */
long long servers_now_ms(void);

/* Internals shared with servers_ha.c and servers_cluster.c (and the chaos
 * helper, built with servers.c); not for tests. Same behaviour as the
 * static helpers in servers.c they wrap. */
void servers_sleep_ms(long ms);
/* mkdtemp $TMPDIR/ferry-KIND-XXXXXX; -1 with a message */
int servers_make_temp_dir(char *out, size_t outsz, const char *kind);
void servers_remove_tree(const char *dir);  /* only ferry-* temp dirs */
void servers_print_tail(const char *path);  /* last lines, to stderr */
int servers_file_contains(const char *path, const char *needle);
const char *servers_redis_binary(void);     /* $REDIS_SERVER or redis-server */
/* fork+exec argv in cwd, stdout+stderr appended to out_path, own process
 * group, PR_SET_PDEATHSIG SIGKILL; pid or -1 */
pid_t servers_spawn_daemon(char *const *argv, const char *cwd,
    const char *out_path);
/* 1 (reaped, the reason in why) if pid has ended, 0 if it runs */
int servers_gone(pid_t pid, char *why, size_t whysz);
/* send sig, wait up to wait_ms, then SIGKILL; sets *pidp to 0 */
void servers_terminate(pid_t *pidp, int sig, long wait_ms, const char *what);
/* test_redis_command with a reply timeout of timeout_ms instead of 2 s
 * (slow commands: MIGRATE of big keys) */
int servers_redis_command_ms(int port, const char *inline_cmd, char *buf,
    size_t bufsz, int timeout_ms);
/* end of the one complete RESP reply (nested arrays included) starting at
 * p, or NULL if [p, end) does not hold all of it */
const char *servers_resp_end(const char *p, const char *end);

#endif
