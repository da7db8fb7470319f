/* servers_ha.c - Redis replicas and Redis Sentinel for integration tests.
 * See servers_ha.h for the contract. Plain C11 + POSIX; the process and file
 * helpers come from servers.c (servers_* in servers.h). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include "servers_ha.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define HA_START_TIMEOUT_MS 30000
#define HA_PORT_ATTEMPTS 8
#define HA_POLL_MS 50
/* SENTINEL DEBUG periods, see servers_ha.h */
#define SENTINEL_DEBUG_CMD "SENTINEL DEBUG info-period 1000 publish-period 500"

/* ------------------------------------------------------------------ */
/* RESP (RESP2, as the inline protocol answers) */

/* One scalar reply element at *pp (bulk, simple string, integer, nil) into
 * out; advances *pp. 0, or -1 if malformed or an array. */
static int
resp_scalar(const char **pp, char *out, size_t outsz)
{
	const char *p = *pp;
	const char *crlf = strstr(p, "\r\n");
	if (crlf == NULL || outsz == 0)
		return -1;
	out[0] = '\0';
	if (p[0] == '$') {
		long len = strtol(p + 1, NULL, 10);
		const char *data = crlf + 2;
		if (len < 0) {
			*pp = data;
			return 0;
		}
		if ((long)strnlen(data, (size_t)len + 2) < len + 2)
			return -1;
		size_t n = (size_t)len < outsz - 1 ? (size_t)len : outsz - 1;
		memcpy(out, data, n);
		out[n] = '\0';
		*pp = data + len + 2;
		return 0;
	}
	if (p[0] == '+' || p[0] == ':' || p[0] == '-') {
		size_t len = (size_t)(crlf - p - 1);
		size_t n = len < outsz - 1 ? len : outsz - 1;
		memcpy(out, p + 1, n);
		out[n] = '\0';
		*pp = crlf + 2;
		return 0;
	}
	return -1;
}

/* The header "*N\r\n" at *pp: N (-1 for a nil array), advances; -2 if *pp
 * is not an array. */
static long
resp_array(const char **pp)
{
	const char *p = *pp;
	const char *crlf = strstr(p, "\r\n");
	if (p[0] != '*' || crlf == NULL)
		return -2;
	*pp = crlf + 2;
	return strtol(p + 1, NULL, 10);
}

/* In the flat array of name/value pairs at *pp (SENTINEL MASTER, one entry
 * of SENTINEL REPLICAS), copy the value of `name` into out ("" if absent).
 * Advances *pp past the array. 0, or -1 if malformed. */
static int
resp_field(const char **pp, const char *name, char *out, size_t outsz)
{
	char key[128], val[256];
	long n = resp_array(pp);
	out[0] = '\0';
	if (n < 0)
		return -1;
	for (long i = 0; i + 1 < n; i += 2) {
		if (resp_scalar(pp, key, sizeof(key)) != 0 ||
		    resp_scalar(pp, val, sizeof(val)) != 0)
			return -1;
		if (strcmp(key, name) == 0) {
			size_t len = strlen(val);
			if (len >= outsz)
				len = outsz - 1;
			memcpy(out, val, len);
			out[len] = '\0';
		}
	}
	return 0;
}

/* "field:value" of an INFO reply into out ("" if absent). */
static void
info_field(const char *info, const char *field, char *out, size_t outsz)
{
	char pat[128];
	snprintf(pat, sizeof(pat), "\n%s:", field);
	const char *p = strstr(info, pat);
	out[0] = '\0';
	if (p == NULL)
		return;
	p += strlen(pat);
	size_t n = strcspn(p, "\r\n");
	if (n >= outsz)
		n = outsz - 1;
	memcpy(out, p, n);
	out[n] = '\0';
}

/* ------------------------------------------------------------------ */
/* replicas and roles */

static void
print_log(const char *dir, const char *file)
{
	char path[320];
	snprintf(path, sizeof(path), "%s/%s", dir, file);
	servers_print_tail(path);
}

int
test_redis_replica_start(struct test_redis *replica,
    const struct test_redis *primary, const char *const *extra_args)
{
	char port[16], buf[8192], link[64];
	memset(replica, 0, sizeof(*replica));
	if (primary == NULL || primary->port <= 0 || primary->pid <= 0) {
		fprintf(stderr, "test_redis_replica_start: the primary is not "
		    "running\n");
		return -1;
	}
	snprintf(port, sizeof(port), "%d", primary->port);
	size_t nextra = 0;
	while (extra_args != NULL && extra_args[nextra] != NULL)
		nextra++;
	const char **args = calloc(nextra + 4, sizeof(*args));
	if (args == NULL) {
		fprintf(stderr, "test_redis_replica_start: out of memory\n");
		return -1;
	}
	args[0] = "--replicaof";
	args[1] = "127.0.0.1";
	args[2] = port;
	for (size_t i = 0; i < nextra; i++)
		args[3 + i] = extra_args[i];
	int rc = test_redis_start(replica, args);
	free(args);
	if (rc != 0) {
		fprintf(stderr, "test_redis_replica_start: the replica of "
		    "127.0.0.1:%d did not start\n", primary->port);
		return -1;
	}
	/* 1. the link is up; 2. the stream flows: after a diskless sync the
	 * primary sends the stream only after the replica's first REPLCONF ACK
	 * (up to 1 s later), so wait until the replica has the primary's offset
	 * of a moment after link up (a PUBLISH, which replicates, makes sure
	 * there is something to send). */
	long long deadline = servers_now_ms() + HA_START_TIMEOUT_MS;
	long long want = -1;
	char off[32] = "";
	link[0] = '\0';
	for (;;) {
		if (test_redis_command(replica->port, "INFO replication", buf,
		    sizeof(buf)) > 0) {
			info_field(buf, "master_link_status", link, sizeof(link));
			info_field(buf, "slave_repl_offset", off, sizeof(off));
			if (strcmp(link, "up") == 0 && want < 0 &&
			    test_redis_command(primary->port, "PUBLISH "
			    "__ferry_test__:replica-sync 1", buf, sizeof(buf)) > 0 &&
			    test_redis_command(primary->port, "INFO replication",
			    buf, sizeof(buf)) > 0) {
				char m[32];
				info_field(buf, "master_repl_offset", m, sizeof(m));
				want = atoll(m);
			} else if (strcmp(link, "up") == 0 && want >= 0 &&
			    atoll(off) >= want) {
				return 0;
			}
		}
		if (servers_now_ms() >= deadline)
			break;
		servers_sleep_ms(want < 0 ? HA_POLL_MS : 10);
	}
	fprintf(stderr, "test_redis_replica_start: replica 127.0.0.1:%d of "
	    "127.0.0.1:%d: after %d s master_link_status is '%s' (want up) and "
	    "slave_repl_offset %s (want >= %lld)\n", replica->port,
	    primary->port, HA_START_TIMEOUT_MS / 1000, link, off, want);
	print_log(replica->dir, "redis.log");
	fprintf(stderr, "  primary 127.0.0.1:%d:\n", primary->port);
	print_log(primary->dir, "redis.log");
	test_redis_stop(replica);
	return -1;
}

int
test_redis_role(int port, char *role, size_t size)
{
	char buf[8192];
	if (role == NULL || size == 0)
		return -1;
	role[0] = '\0';
	if (test_redis_command(port, "ROLE", buf, sizeof(buf)) <= 0)
		return -1;
	const char *p = buf;
	if (resp_array(&p) < 1 || p[0] != '$')
		return -1;
	return resp_scalar(&p, role, size);
}

int
test_redis_wait_role(int port, const char *role, int timeout_ms)
{
	char seen[64] = "";
	long long deadline = servers_now_ms() + timeout_ms;
	for (;;) {
		int rc = test_redis_role(port, seen, sizeof(seen));
		if (rc == 0 && strcmp(seen, role) == 0)
			return 0;
		if (rc != 0)
			snprintf(seen, sizeof(seen), "(no answer)");
		if (servers_now_ms() >= deadline)
			break;
		servers_sleep_ms(HA_POLL_MS);
	}
	fprintf(stderr, "test_redis_wait_role: 127.0.0.1:%d is not '%s' after "
	    "%d ms; last ROLE: %s\n", port, role, timeout_ms, seen);
	return -1;
}

/* The state letter of /proc/PID/stat ('R', 'S', 'T', 'Z', ...), 0 if gone. */
static char
proc_state(pid_t pid)
{
	char path[64], buf[512];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	FILE *f = fopen(path, "r");
	if (f == NULL)
		return 0;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	const char *paren = strrchr(buf, ')');  /* comm may hold spaces */
	if (paren == NULL || paren[1] != ' ')
		return 0;
	return paren[2];
}

/* Send sig and wait (5 s) until the process is (stopped == 1) or is not
 * (stopped == 0) in state T. */
static int
signal_and_wait_state(struct test_redis *r, int sig, int stopped,
    const char *what)
{
	char why[128];
	if (r == NULL || r->pid <= 0) {
		fprintf(stderr, "%s: redis-server is not running\n", what);
		return -1;
	}
	if (kill(r->pid, sig) != 0) {
		fprintf(stderr, "%s: kill %d: %s\n", what, (int)r->pid,
		    strerror(errno));
		return -1;
	}
	long long deadline = servers_now_ms() + 5000;
	for (;;) {
		if (servers_gone(r->pid, why, sizeof(why))) {
			fprintf(stderr, "%s: redis-server 127.0.0.1:%d (pid %d) "
			    "ended: %s\n", what, r->port, (int)r->pid, why);
			r->pid = 0;
			print_log(r->dir, "redis.log");
			return -1;
		}
		char st = proc_state(r->pid);
		if (st != 0 && st != 'Z' && (st == 'T') == (stopped == 1))
			return 0;
		if (servers_now_ms() >= deadline)
			break;
		servers_sleep_ms(5);
	}
	fprintf(stderr, "%s: redis-server 127.0.0.1:%d (pid %d) is in state "
	    "'%c' 5 s after signal %d\n", what, r->port, (int)r->pid,
	    proc_state(r->pid), sig);
	return -1;
}

int
test_redis_sigstop(struct test_redis *r)
{
	return signal_and_wait_state(r, SIGSTOP, 1, "test_redis_sigstop");
}

int
test_redis_sigcont(struct test_redis *r)
{
	return signal_and_wait_state(r, SIGCONT, 0, "test_redis_sigcont");
}

/* ------------------------------------------------------------------ */
/* sentinels */

struct sentinel_conf {
	const char *name;
	int primary_port, quorum, down_after_ms, failover_timeout_ms;
};

static int
sentinel_write_conf(const struct test_sentinel *s,
    const struct sentinel_conf *c)
{
	char path[320];
	snprintf(path, sizeof(path), "%s/sentinel.conf", s->dir);
	FILE *f = fopen(path, "w");
	if (f == NULL) {
		fprintf(stderr, "test_sentinels_start: cannot write %s: %s\n",
		    path, strerror(errno));
		return -1;
	}
	fprintf(f,
	    "# written by servers_ha.c; sentinel rewrites this file\n"
	    "port %d\n"
	    "bind 127.0.0.1\n"
	    "protected-mode no\n"
	    "daemonize no\n"
	    "dir \"%s\"\n"
	    "logfile \"%s/sentinel.log\"\n"
	    "sentinel resolve-hostnames no\n"
	    "sentinel announce-hostnames no\n"
	    "sentinel monitor %s 127.0.0.1 %d %d\n"
	    "sentinel down-after-milliseconds %s %d\n"
	    "sentinel failover-timeout %s %d\n"
	    "sentinel parallel-syncs %s 1\n",
	    s->port, s->dir, s->dir, c->name, c->primary_port, c->quorum,
	    c->name, c->down_after_ms, c->name, c->failover_timeout_ms, c->name);
	if (fclose(f) != 0) {
		fprintf(stderr, "test_sentinels_start: cannot write %s: %s\n",
		    path, strerror(errno));
		return -1;
	}
	return 0;
}

static void
sentinel_report(const struct test_sentinel *s, const char *what,
    const char *why)
{
	char path[320];
	fprintf(stderr, "%s: sentinel 127.0.0.1:%d (%s --sentinel, dir %s): "
	    "%s\n", what, s->port, servers_redis_binary(), s->dir, why);
	print_log(s->dir, "sentinel.log");
	snprintf(path, sizeof(path), "%s/sentinel.out", s->dir);
	if (access(path, F_OK) == 0)
		servers_print_tail(path);
}

enum { S_READY = 0, S_FAILED = -1, S_EXITED = 1, S_PORT_TAKEN = 2 };

/* Spawn the sentinel of s->dir/sentinel.conf on s->port and wait until it
 * answers PING as itself; then set the SENTINEL DEBUG periods. */
static int
sentinel_spawn_ready(struct test_sentinel *s, char *why, size_t whysz)
{
	char conf[320], out[320], buf[8192];
	snprintf(conf, sizeof(conf), "%s/sentinel.conf", s->dir);
	snprintf(out, sizeof(out), "%s/sentinel.out", s->dir);
	char *argv[] = { (char *)servers_redis_binary(), conf, "--sentinel",
		NULL };
	s->pid = servers_spawn_daemon(argv, s->dir, out);
	if (s->pid < 0) {
		s->pid = 0;
		snprintf(why, whysz, "fork failed");
		return S_FAILED;
	}
	long long deadline = servers_now_ms() + HA_START_TIMEOUT_MS;
	for (;;) {
		if (servers_gone(s->pid, why, whysz)) {
			s->pid = 0;
			char path[320];
			snprintf(path, sizeof(path), "%s/sentinel.log", s->dir);
			if (servers_file_contains(path, "Address already in use") ||
			    servers_file_contains(out, "Address already in use"))
				return S_PORT_TAKEN;
			return S_EXITED;
		}
		if (test_redis_command(s->port, "PING", buf, sizeof(buf)) > 0 &&
		    strncmp(buf, "+PONG", 5) == 0 &&
		    test_redis_command(s->port, "INFO server", buf,
		    sizeof(buf)) > 0) {
			char pid[32];
			info_field(buf, "process_id", pid, sizeof(pid));
			if (atol(pid) != (long)s->pid) {
				snprintf(why, whysz, "another server answers on "
				    "that port");
				return S_PORT_TAKEN;
			}
			break;
		}
		if (servers_now_ms() >= deadline) {
			snprintf(why, whysz, "no PONG within %d s",
			    HA_START_TIMEOUT_MS / 1000);
			return S_FAILED;
		}
		servers_sleep_ms(20);
	}
	if (test_redis_command(s->port, SENTINEL_DEBUG_CMD, buf,
	    sizeof(buf)) <= 0 || strncmp(buf, "+OK", 3) != 0) {
		snprintf(why, whysz, "%s: %.100s", SENTINEL_DEBUG_CMD, buf);
		return S_FAILED;
	}
	return S_READY;
}

static int
sentinel_start_one(struct test_sentinel *s, const struct sentinel_conf *c)
{
	char why[256];
	memset(s, 0, sizeof(*s));
	if (servers_make_temp_dir(s->dir, sizeof(s->dir), "sentinel") != 0)
		return -1;
	for (int attempt = 1;; attempt++) {
		s->port = test_free_port();
		if (s->port < 0 || sentinel_write_conf(s, c) != 0)
			break;
		int rc = sentinel_spawn_ready(s, why, sizeof(why));
		if (rc == S_READY)
			return 0;
		servers_terminate(&s->pid, SIGKILL, 5000, "redis-sentinel");
		if (rc == S_PORT_TAKEN && attempt < HA_PORT_ATTEMPTS) {
			char path[320];
			snprintf(path, sizeof(path), "%s/sentinel.log", s->dir);
			unlink(path);
			snprintf(path, sizeof(path), "%s/sentinel.out", s->dir);
			unlink(path);
			continue;
		}
		sentinel_report(s, "test_sentinels_start", why);
		break;
	}
	servers_remove_tree(s->dir);
	memset(s, 0, sizeof(*s));
	return -1;
}

/* Does sentinel s see the master up, want_sentinels others and at least
 * want_replicas good replicas? Describes what it sees in `seen`. */
static int
sentinel_sees_all(const struct test_sentinel *s, const char *name,
    int want_sentinels, int want_replicas, char *seen, size_t seensz)
{
	static char buf[65536];
	char cmd[128], flags[128], others[32], slaves[32];
	snprintf(cmd, sizeof(cmd), "SENTINEL MASTER %s", name);
	if (test_redis_command(s->port, cmd, buf, sizeof(buf)) <= 0) {
		snprintf(seen, seensz, "no answer to %s", cmd);
		return 0;
	}
	const char *p = buf;
	if (buf[0] != '*' ||
	    resp_field(&p, "flags", flags, sizeof(flags)) != 0) {
		snprintf(seen, seensz, "%s: %.100s", cmd, buf);
		return 0;
	}
	p = buf;
	resp_field(&p, "num-other-sentinels", others, sizeof(others));
	p = buf;
	resp_field(&p, "num-slaves", slaves, sizeof(slaves));

	int good = 0;
	snprintf(cmd, sizeof(cmd), "SENTINEL REPLICAS %s", name);
	if (test_redis_command(s->port, cmd, buf, sizeof(buf)) > 0) {
		p = buf;
		long n = resp_array(&p);
		for (long i = 0; i < n; i++) {
			char rflags[128], link[32];
			const char *q = p;
			if (resp_field(&q, "flags", rflags, sizeof(rflags)) != 0)
				break;
			resp_field(&p, "master-link-status", link, sizeof(link));
			if (strcmp(rflags, "slave") == 0 && strcmp(link, "ok") == 0)
				good++;
		}
	}
	snprintf(seen, seensz, "master flags %s, num-other-sentinels %s, "
	    "num-slaves %s, good replicas %d", flags, others, slaves, good);
	return strcmp(flags, "master") == 0 && atoi(others) == want_sentinels &&
	    atoi(slaves) >= want_replicas && good >= want_replicas;
}

int
test_sentinels_start(struct test_sentinels *ss, int n, const char *name,
    int primary_port, int quorum, int down_after_ms, int failover_timeout_ms,
    int expect_replicas)
{
	memset(ss, 0, sizeof(*ss));
	int max = (int)(sizeof(ss->s) / sizeof(ss->s[0]));
	if (n < 1 || n > max || name == NULL || name[0] == '\0' ||
	    strlen(name) >= sizeof(ss->name) || strpbrk(name, " \t\r\n") ||
	    primary_port <= 0 || quorum < 1) {
		fprintf(stderr, "test_sentinels_start: bad arguments (n %d, 1..%d; "
		    "name '%s'; primary port %d; quorum %d)\n", n, max,
		    name ? name : "(null)", primary_port, quorum);
		return -1;
	}
	snprintf(ss->name, sizeof(ss->name), "%s", name);
	struct sentinel_conf c = { name, primary_port, quorum, down_after_ms,
		failover_timeout_ms };
	for (int i = 0; i < n; i++) {
		if (sentinel_start_one(&ss->s[i], &c) != 0) {
			fprintf(stderr, "test_sentinels_start: sentinel %d of %d "
			    "(monitor %s 127.0.0.1:%d) did not start\n", i + 1, n,
			    name, primary_port);
			test_sentinels_stop(ss);
			return -1;
		}
		ss->n = i + 1;
	}

	char seen[512] = "";
	long long deadline = servers_now_ms() + HA_START_TIMEOUT_MS;
	for (;;) {
		int i;
		for (i = 0; i < n; i++)
			if (!sentinel_sees_all(&ss->s[i], name, n - 1,
			    expect_replicas, seen, sizeof(seen)))
				break;
		if (i == n)
			return 0;
		if (servers_now_ms() >= deadline) {
			char why[1024];
			snprintf(why, sizeof(why), "after %d s it sees %s; wanted "
			    "master flags master, %d other sentinels, %d good "
			    "replicas", HA_START_TIMEOUT_MS / 1000, seen, n - 1,
			    expect_replicas);
			sentinel_report(&ss->s[i], "test_sentinels_start", why);
			break;
		}
		servers_sleep_ms(HA_POLL_MS);
	}
	test_sentinels_stop(ss);
	return -1;
}

void
test_sentinels_stop(struct test_sentinels *ss)
{
	if (ss == NULL)
		return;
	int max = (int)(sizeof(ss->s) / sizeof(ss->s[0]));
	for (int i = 0; i < ss->n && i < max; i++) {
		struct test_sentinel *s = &ss->s[i];
		servers_terminate(&s->pid, SIGTERM, 10000, "redis-sentinel");
		if (s->dir[0] != '\0')
			servers_remove_tree(s->dir);
	}
	memset(ss, 0, sizeof(*ss));
}

void
test_sentinel_kill9(struct test_sentinel *s)
{
	if (s == NULL)
		return;
	servers_terminate(&s->pid, SIGKILL, 10000, "redis-sentinel");
}

int
test_sentinel_restart(struct test_sentinel *s)
{
	char why[256];
	if (s == NULL || s->dir[0] == '\0' || s->port <= 0) {
		fprintf(stderr, "test_sentinel_restart: sentinel was never "
		    "started\n");
		return -1;
	}
	if (s->pid > 0) {
		fprintf(stderr, "test_sentinel_restart: sentinel (pid %d) is "
		    "still running; kill9 it first\n", (int)s->pid);
		return -1;
	}
	if (sentinel_spawn_ready(s, why, sizeof(why)) == S_READY)
		return 0;
	servers_terminate(&s->pid, SIGKILL, 5000, "redis-sentinel");
	sentinel_report(s, "test_sentinel_restart", why);
	return -1;
}

/* The port sentinel s names for ss->name, or -1. */
static int
sentinel_master_port(const struct test_sentinels *ss,
    const struct test_sentinel *s)
{
	char cmd[256], buf[1024], ip[64], port[16];
	snprintf(cmd, sizeof(cmd), "SENTINEL get-master-addr-by-name %s",
	    ss->name);
	if (s->pid <= 0 || test_redis_command(s->port, cmd, buf,
	    sizeof(buf)) <= 0)
		return -1;
	const char *p = buf;
	if (resp_array(&p) != 2 || resp_scalar(&p, ip, sizeof(ip)) != 0 ||
	    resp_scalar(&p, port, sizeof(port)) != 0)
		return -1;
	return atoi(port) > 0 ? atoi(port) : -1;
}

int
test_sentinels_master_port(const struct test_sentinels *ss)
{
	for (int i = 0; ss != NULL && i < ss->n; i++) {
		int port = sentinel_master_port(ss, &ss->s[i]);
		if (port > 0)
			return port;
	}
	return -1;
}

int
test_sentinels_wait_master(const struct test_sentinels *ss, int port,
    int timeout_ms)
{
	char role[64] = "";
	long long deadline = servers_now_ms() + timeout_ms;
	for (;;) {
		int agree = ss->n > 0, running = 0;
		for (int i = 0; i < ss->n; i++) {
			if (ss->s[i].pid <= 0)
				continue;
			running++;
			if (sentinel_master_port(ss, &ss->s[i]) != port)
				agree = 0;
		}
		if (test_redis_role(port, role, sizeof(role)) != 0)
			snprintf(role, sizeof(role), "(no answer)");
		if (running > 0 && agree && strcmp(role, "master") == 0)
			return 0;
		if (servers_now_ms() >= deadline)
			break;
		servers_sleep_ms(HA_POLL_MS);
	}
	fprintf(stderr, "test_sentinels_wait_master: after %d ms not every "
	    "sentinel names 127.0.0.1:%d for %s with ROLE master there; ROLE of "
	    "127.0.0.1:%d: %s\n", timeout_ms, port, ss->name, port, role);
	for (int i = 0; i < ss->n; i++) {
		const struct test_sentinel *s = &ss->s[i];
		if (s->pid <= 0) {
			fprintf(stderr, "  sentinel 127.0.0.1:%d: not running\n",
			    s->port);
			continue;
		}
		fprintf(stderr, "  sentinel 127.0.0.1:%d names port %d\n",
		    s->port, sentinel_master_port(ss, s));
		print_log(s->dir, "sentinel.log");
	}
	return -1;
}

int
test_sentinels_failover(const struct test_sentinels *ss)
{
	char cmd[256], buf[1024] = "";
	const struct test_sentinel *s = NULL;
	for (int i = 0; ss != NULL && i < ss->n && s == NULL; i++)
		if (ss->s[i].pid > 0)
			s = &ss->s[i];
	if (s == NULL) {
		fprintf(stderr, "test_sentinels_failover: no sentinel is "
		    "running\n");
		return -1;
	}
	snprintf(cmd, sizeof(cmd), "SENTINEL FAILOVER %s", ss->name);
	long long deadline = servers_now_ms() + 10000;
	for (;;) {
		if (test_redis_command(s->port, cmd, buf, sizeof(buf)) <= 0)
			snprintf(buf, sizeof(buf), "(no answer)");
		if (strncmp(buf, "+OK", 3) == 0)
			return 0;
		int retry = strncmp(buf, "-INPROG", 7) == 0 ||
		    strncmp(buf, "-NOGOODSLAVE", 12) == 0;
		if (!retry || servers_now_ms() >= deadline)
			break;
		servers_sleep_ms(250);
	}
	buf[strcspn(buf, "\r\n")] = '\0';
	fprintf(stderr, "test_sentinels_failover: %s on sentinel 127.0.0.1:%d: "
	    "%s\n", cmd, s->port, buf);
	print_log(s->dir, "sentinel.log");
	return -1;
}

/* ------------------------------------------------------------------ */
/* helpers shared with servers_cluster.c (declared at the end of
 * servers_ha.h) */

int
servers_resp_scalar(const char **pp, char *out, size_t outsz)
{
	return resp_scalar(pp, out, outsz);
}

long
servers_resp_array(const char **pp)
{
	return resp_array(pp);
}

void
servers_info_field(const char *info, const char *field, char *out,
    size_t outsz)
{
	info_field(info, field, out, outsz);
}
