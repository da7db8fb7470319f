/* servers_ctl.c - `chaos_helper servers NAME:redis|pg ...`: the real servers
 * of a chaos run (tests/support/servers.c starts them: the same code as
 * the integration tests) and one TCP proxy per NAME in front of them, so a
 * host's connection to Redis or PostgreSQL can be cut and restored.
 *
 * Prints "redis PORT DIR", "pg PORT DIR", "link NAME PORT"..., "ready",
 * then answers one line ("ok ..." or "err ...") per command on stdin:
 *   redis-kill | redis-start      kill -9; restart on the same AOF
 *   pg-kill | pg-start            immediate stop (SIGQUIT); start
 *   cut NAME reset|stall          reset: every connection gets an RST, new
 *                                 ones too; stall: nothing moves, new ones
 *                                 wait in the backlog (a partition)
 *   uncut NAME                    forward again
 *   quit (or end of input)        stop everything, remove the servers' dirs
 * The servers die with this process (PR_SET_PDEATHSIG), proxies with it.
 * maxmemory=BYTES among the arguments: every redis-server runs with that
 * maxmemory and maxmemory-policy volatile-lru (the cache and the queue in
 * one Redis, doc/redis.md, "One Redis for the cache and the queue"), restarts too.
 *
 * `chaos_helper servers ha=NAME LINK...` (scripts/chaos --failover): Redis
 * is a primary, two replicas and three sentinels watching it as NAME
 * (tests/support/servers_ha.c; quorum 2, down-after 1000 ms,
 * failover-timeout 5000 ms as in test_sentinel.c). LINKs may only be pg
 * ones: a proxy cannot follow a failover. It prints "redis PORT DIR" for
 * each of the three nodes and "sentinels P1,P2,P3", and takes instead of
 * redis-kill / redis-start:
 *   redis-primary                 "ok PORT": the primary the sentinels name
 *   redis-failover                SENTINEL FAILOVER; "ok OLDPORT"
 *   redis-primary-kill            kill -9 of the current primary; "ok IDX PORT"
 *   redis-replica-kill I          kill -9 of the I-th (mod) running replica;
 *                                 "ok IDX PORT"
 *   redis-node-start IDX          restart node IDX on its port and dir
 *                                 (AOF); a killed replica comes back as a
 *                                 replica of the current primary, a killed
 *                                 primary as it was (the sentinels demote it)
 *   redis-restore                 every node up, the primary with both
 *                                 replicas linked and in step (45 s)
 *   save-logs DIR                 copy each node's redis.log and each
 *                                 sentinel's sentinel.log into DIR */
#include "chaos.h"
#include "../support/servers.h"
#include "../support/servers_ha.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_LINKS 8
#define MAX_PAIRS 256
#define PAIR_BUF 65536

enum link_state { LINK_OK, LINK_RESET, LINK_STALL };

struct link {
	char name[32];
	int target_port;
	int listen_fd;
	int port;
	enum link_state state;
};

struct half {
	char buf[PAIR_BUF];
	size_t len;
};

struct pair {
	int link;      /* -1: free */
	int fd[2];     /* 0 client, 1 server */
	struct half to[2];  /* to[i]: bytes waiting to be written to fd[i] */
};

static struct link links[MAX_LINKS];
static int nlinks;
static struct pair pairs[MAX_PAIRS];
static int ctl_pipe[2];

static int
listen_loopback(int *port)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t len = sizeof(a);
	int one = 1;
	if (fd < 0)
		return -1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0 ||
	    listen(fd, 128) != 0 ||
	    getsockname(fd, (struct sockaddr *)&a, &len) != 0) {
		close(fd);
		return -1;
	}
	*port = ntohs(a.sin_port);
	return fd;
}

/* close with an RST: what a peer sees when the path breaks */
static void
close_rst(int fd)
{
	struct linger l = { 1, 0 };
	if (fd < 0)
		return;
	setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
	close(fd);
}

static void
pair_close(struct pair *p)
{
	close_rst(p->fd[0]);
	close_rst(p->fd[1]);
	p->fd[0] = p->fd[1] = -1;
	p->to[0].len = p->to[1].len = 0;
	p->link = -1;
}

static void
proxy_accept(int li)
{
	for (;;) {
		int cfd = accept4(links[li].listen_fd, NULL, NULL,
		    SOCK_CLOEXEC | SOCK_NONBLOCK);
		if (cfd < 0)
			return;
		if (links[li].state == LINK_RESET) {
			close_rst(cfd);
			continue;
		}
		int sfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		struct sockaddr_in a = { .sin_family = AF_INET };
		a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		a.sin_port = htons((uint16_t)links[li].target_port);
		/* loopback: connect is immediate (refused while the server is
		 * down, and then the client sees its connection reset) */
		if (sfd < 0 || connect(sfd, (struct sockaddr *)&a, sizeof(a)) != 0) {
			if (sfd >= 0)
				close(sfd);
			close_rst(cfd);
			continue;
		}
		fcntl(sfd, F_SETFL, fcntl(sfd, F_GETFL) | O_NONBLOCK);
		int slot = -1;
		for (int i = 0; i < MAX_PAIRS && slot < 0; i++)
			if (pairs[i].link < 0)
				slot = i;
		if (slot < 0) {
			close_rst(cfd);
			close_rst(sfd);
			continue;
		}
		pairs[slot].link = li;
		pairs[slot].fd[0] = cfd;
		pairs[slot].fd[1] = sfd;
	}
}

/* Commands from the main thread: "<state><link index>" as two bytes. */
static void
proxy_control(void)
{
	unsigned char cmd[2];
	while (read(ctl_pipe[0], cmd, 2) == 2) {
		int li = cmd[1];
		links[li].state = (enum link_state)cmd[0];
		if (links[li].state == LINK_RESET)
			for (int i = 0; i < MAX_PAIRS; i++)
				if (pairs[i].link == li)
					pair_close(&pairs[i]);
	}
}

/* Move bytes of pair p after poll; -1 when the pair ended. */
static int
pair_io(struct pair *p, const short *rev)
{
	for (int s = 0; s < 2; s++) {
		struct half *out = &p->to[1 - s];
		if ((rev[s] & (POLLIN | POLLHUP | POLLERR)) && out->len < PAIR_BUF) {
			ssize_t n = read(p->fd[s], out->buf + out->len,
			    PAIR_BUF - out->len);
			if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
				return -1;
			if (n > 0)
				out->len += (size_t)n;
		}
	}
	for (int s = 0; s < 2; s++) {
		struct half *in = &p->to[s];
		if (in->len == 0)
			continue;
		ssize_t n = send(p->fd[s], in->buf, in->len, MSG_NOSIGNAL);
		if (n < 0 && errno != EAGAIN && errno != EINTR)
			return -1;
		if (n > 0) {
			memmove(in->buf, in->buf + n, in->len - (size_t)n);
			in->len -= (size_t)n;
		}
	}
	return 0;
}

static void *
proxy_thread(void *arg)
{
	(void)arg;
	struct pollfd pfd[1 + MAX_LINKS + 2 * MAX_PAIRS];
	int owner[1 + MAX_LINKS + 2 * MAX_PAIRS];
	for (;;) {
		int n = 0;
		pfd[n] = (struct pollfd){ ctl_pipe[0], POLLIN, 0 };
		owner[n++] = -1;
		for (int i = 0; i < nlinks; i++)
			if (links[i].state != LINK_STALL) {
				pfd[n] = (struct pollfd){ links[i].listen_fd, POLLIN, 0 };
				owner[n++] = -2 - i;
			}
		for (int i = 0; i < MAX_PAIRS; i++) {
			struct pair *p = &pairs[i];
			if (p->link < 0 || links[p->link].state == LINK_STALL)
				continue;
			for (int s = 0; s < 2; s++) {
				short ev = 0;
				if (p->to[1 - s].len < PAIR_BUF)
					ev |= POLLIN;
				if (p->to[s].len > 0)
					ev |= POLLOUT;
				pfd[n] = (struct pollfd){ p->fd[s], ev, 0 };
				owner[n++] = i * 2 + s;
			}
		}
		if (poll(pfd, (nfds_t)n, 1000) < 0)
			continue;
		short rev[MAX_PAIRS][2];
		memset(rev, 0, sizeof(rev));
		for (int k = 0; k < n; k++) {
			if (pfd[k].revents == 0)
				continue;
			if (owner[k] == -1)
				proxy_control();
			else if (owner[k] <= -2)
				proxy_accept(-2 - owner[k]);
			else
				rev[owner[k] / 2][owner[k] % 2] = pfd[k].revents;
		}
		for (int i = 0; i < MAX_PAIRS; i++) {
			struct pair *p = &pairs[i];
			if (p->link < 0 || links[p->link].state == LINK_STALL ||
			    (rev[i][0] == 0 && rev[i][1] == 0))
				continue;
			if (pair_io(p, rev[i]) != 0)
				pair_close(p);
		}
	}
	return NULL;
}

/* ------------------------------------------------------------ servers */

/* the last four are --maxmemory N --maxmemory-policy volatile-lru with
 * maxmemory= (set by chaos_servers_main), NULL otherwise */
static const char *redis_args[] = {
	"--appendonly", "yes", "--appendfsync", "always",
	"--repl-diskless-sync", "yes", "--repl-diskless-sync-delay", "0", NULL,
	NULL, NULL, NULL, NULL,
};

#define NNODES 3
static struct test_redis node[NNODES]; /* node[0]: the (first) primary */
#define redis node[0]
static int ha;                          /* the sentinel setup */
static int is_replica[NNODES];          /* restart it as a replica */
static struct test_sentinels sentinels;
static struct test_pg pg;

/* The primary the sentinels name, if a running node answers ROLE master
 * there; -1 otherwise. */
static int
ha_primary(void)
{
	char role[32];
	int port = test_sentinels_master_port(&sentinels);
	if (port <= 0 || test_redis_role(port, role, sizeof(role)) != 0 ||
	    strcmp(role, "master") != 0)
		return -1;
	return port;
}

static int
ha_node_of(int port)
{
	for (int i = 0; i < NNODES; i++)
		if (node[i].port == port && node[i].pid > 0)
			return i;
	return -1;
}

/* Restart node i: a killed replica as a replica of the current primary
 * (the --replicaof of its start may name a demoted node), a killed primary
 * as it was, a primary with its AOF (the sentinels demote it). */
static int
ha_node_start(int i)
{
	if (node[i].pid > 0)
		return 0;
	int primary = ha_primary();
	char port[16];
	const char *args[16] = { 0 };
	int n = 0;
	if (is_replica[i] && primary > 0 && primary != node[i].port) {
		snprintf(port, sizeof(port), "%d", primary);
		args[n++] = "--replicaof";
		args[n++] = "127.0.0.1";
		args[n++] = port;
	}
	for (int k = 0; redis_args[k] != NULL; k++)
		args[n++] = redis_args[k];
	return test_redis_restart(&node[i], args);
}

/* The primary with both replicas online, lag at most 1 s (bounded). */
static int
ha_settled(long timeout_ms)
{
	char buf[8192];
	long long deadline = servers_now_ms() + timeout_ms;
	while (servers_now_ms() < deadline) {
		int p = ha_primary();
		if (p > 0 && test_redis_command(p, "INFO replication", buf,
		    sizeof(buf)) > 0 && strstr(buf, "connected_slaves:2") != NULL) {
			/* both replicas "online", acknowledging within a second */
			int ok = 0;
			for (char *l = buf; (l = strstr(l, "\nslave")) != NULL; l++) {
				if (l[6] < '0' || l[6] > '9')
					continue;
				char *eol = strchr(l + 1, '\n');
				char *st = strstr(l, "state=online");
				char *lag = strstr(l, "lag=");
				if (st != NULL && lag != NULL && (eol == NULL ||
				    lag < eol) && st < lag && atoi(lag + 4) <= 1)
					ok++;
			}
			if (ok >= 2)
				return 0;
		}
		servers_sleep_ms(100);
	}
	return -1;
}

static const char *
ha_command(int argc, char **argv)
{
	static char out[128];
	if (strcmp(argv[0], "redis-primary") == 0) {
		snprintf(out, sizeof(out), "ok %d", ha_primary());
		return out;
	}
	if (strcmp(argv[0], "redis-failover") == 0) {
		int old = ha_primary();
		if (old < 0)
			return "err no primary";
		if (test_sentinels_failover(&sentinels) != 0)
			return "err SENTINEL FAILOVER refused";
		snprintf(out, sizeof(out), "ok %d", old);
		return out;
	}
	if (strcmp(argv[0], "redis-primary-kill") == 0) {
		int i = ha_node_of(ha_primary());
		if (i < 0)
			return "err no primary";
		test_redis_kill9(&node[i]);
		is_replica[i] = 0;
		snprintf(out, sizeof(out), "ok %d %d", i, node[i].port);
		return out;
	}
	if (strcmp(argv[0], "redis-replica-kill") == 0 && argc == 2) {
		int primary = ha_primary(), cand[NNODES], n = 0;
		for (int i = 0; i < NNODES; i++)
			if (node[i].pid > 0 && node[i].port != primary)
				cand[n++] = i;
		if (primary < 0 || n == 0)
			return "err no replica";
		int i = cand[atoi(argv[1]) % n];
		test_redis_kill9(&node[i]);
		is_replica[i] = 1;
		snprintf(out, sizeof(out), "ok %d %d", i, node[i].port);
		return out;
	}
	if (strcmp(argv[0], "redis-node-start") == 0 && argc == 2) {
		int i = atoi(argv[1]);
		if (i < 0 || i >= NNODES)
			return "err no such node";
		return ha_node_start(i) == 0 ? "ok" : "err did not restart";
	}
	if (strcmp(argv[0], "save-logs") == 0 && argc == 2) {
		char cmd[1024];
		int rc = 0;
		for (int i = 0; i < NNODES; i++) {
			snprintf(cmd, sizeof(cmd), "cp '%s/redis.log' '%s/redis-%d.log' "
			    "2>/dev/null", node[i].dir, argv[1], node[i].port);
			rc |= system(cmd);
		}
		for (int i = 0; i < sentinels.n; i++) {
			snprintf(cmd, sizeof(cmd), "cp '%s/sentinel.log' "
			    "'%s/sentinel-%d.log' 2>/dev/null", sentinels.s[i].dir,
			    argv[1], sentinels.s[i].port);
			rc |= system(cmd);
		}
		return rc == 0 ? "ok" : "err some logs were not copied";
	}
	if (strcmp(argv[0], "redis-restore") == 0) {
		for (int i = 0; i < NNODES; i++) {
			if (node[i].pid > 0)
				continue;
			/* a primary killed and never restarted: a replica now */
			is_replica[i] = 1;
			if (ha_node_start(i) != 0)
				return "err a node did not restart";
		}
		return ha_settled(45000) == 0 ? "ok" :
		    "err the primary does not have both replicas in step";
	}
	return "err unknown command";
}

/* pg_ctl stop -m immediate: SIGQUIT to the postmaster, which takes its
 * backends along without a checkpoint (crash recovery at the next start). */
static int
pg_kill(void)
{
	if (pg.pid <= 0)
		return -1;
	kill(pg.pid, SIGQUIT);
	for (int i = 0; i < 3000; i++) {
		if (waitpid(pg.pid, NULL, WNOHANG) == pg.pid) {
			pg.pid = 0;
			return 0;
		}
		servers_sleep_ms(10);
	}
	kill(pg.pid, SIGKILL);
	waitpid(pg.pid, NULL, 0);
	pg.pid = 0;
	return 0;
}

static int
link_index(const char *name)
{
	for (int i = 0; i < nlinks; i++)
		if (strcmp(links[i].name, name) == 0)
			return i;
	return -1;
}

static void
link_set(int li, enum link_state st)
{
	unsigned char cmd[2] = { (unsigned char)st, (unsigned char)li };
	if (write(ctl_pipe[1], cmd, 2) != 2)
		chaos_die("servers: control pipe: %s", strerror(errno));
}

static const char *
command(char *line)
{
	char *argv[4] = { 0 };
	int argc = 0;
	for (char *t = strtok(line, " \t\n"); t && argc < 4; t = strtok(NULL, " \t\n"))
		argv[argc++] = t;
	if (argc == 0)
		return "err empty command";
	if (ha && (strncmp(argv[0], "redis-", 6) == 0 ||
	    strcmp(argv[0], "save-logs") == 0))
		return ha_command(argc, argv);
	if (strcmp(argv[0], "redis-kill") == 0) {
		test_redis_kill9(&redis);
		return "ok";
	}
	if (strcmp(argv[0], "redis-start") == 0)
		return redis.pid > 0 ? "ok running" :
		    test_redis_restart(&redis, redis_args) == 0 ? "ok" :
		    "err redis-server did not restart";
	if (strcmp(argv[0], "pg-kill") == 0)
		return pg_kill() == 0 ? "ok" : "err postgres not running";
	if (strcmp(argv[0], "pg-start") == 0)
		return pg.pid > 0 ? "ok running" : test_pg_resume(&pg) == 0 ? "ok" :
		    "err postgres did not restart";
	if ((strcmp(argv[0], "cut") == 0 && argc == 3) ||
	    (strcmp(argv[0], "uncut") == 0 && argc == 2)) {
		int li = link_index(argv[1]);
		if (li < 0)
			return "err no such link";
		link_set(li, argv[0][0] == 'u' ? LINK_OK :
		    strcmp(argv[2], "stall") == 0 ? LINK_STALL : LINK_RESET);
		return "ok";
	}
	return "err unknown command";
}

static void
stop_all(void)
{
	test_sentinels_stop(&sentinels);
	for (int i = 0; i < NNODES; i++)
		test_redis_stop(&node[i]);
	test_pg_stop(&pg);
}

int
chaos_servers_main(int argc, char **argv)
{
	signal(SIGPIPE, SIG_IGN);
	if (pipe2(ctl_pipe, O_CLOEXEC) != 0)
		chaos_die("servers: pipe: %s", strerror(errno));
	fcntl(ctl_pipe[0], F_SETFL, O_NONBLOCK);
	const char *ha_name = chaos_arg(argc, argv, "ha", NULL);
	const char *maxmemory = chaos_arg(argc, argv, "maxmemory", NULL);
	ha = ha_name != NULL;
	if (maxmemory != NULL) {
		const char *mm[] = { "--maxmemory", maxmemory, "--maxmemory-policy",
			"volatile-lru" };
		for (size_t i = 0; i < 4; i++)
			redis_args[8 + i] = mm[i];
	}
	if (test_redis_start(&redis, redis_args) != 0)
		chaos_die("servers: redis-server did not start");
	for (int i = 1; ha && i < NNODES; i++) {
		is_replica[i] = 1;
		if (test_redis_replica_start(&node[i], &redis, redis_args) != 0) {
			stop_all();
			chaos_die("servers: a replica did not start");
		}
	}
	if (ha && test_sentinels_start(&sentinels, 3, ha_name, redis.port, 2,
	    1000, 5000, 2) != 0) {
		stop_all();
		chaos_die("servers: the sentinels did not start");
	}
	if (test_pg_start(&pg) != 0) {
		stop_all();
		chaos_die("servers: postgres did not start");
	}
	for (int i = 0; i < (ha ? NNODES : 1); i++)
		printf("redis %d %s\n", node[i].port, node[i].dir);
	if (ha)
		printf("sentinels %d,%d,%d\n", sentinels.s[0].port,
		    sentinels.s[1].port, sentinels.s[2].port);
	printf("pg %d %s\n", pg.port, pg.dir);
	for (int i = 1; i < argc && nlinks < MAX_LINKS; i++) {
		if (strncmp(argv[i], "ha=", 3) == 0 ||
		    strncmp(argv[i], "maxmemory=", 10) == 0)
			continue;
		struct link *l = &links[nlinks];
		const char *colon = strchr(argv[i], ':');
		if (colon == NULL || (size_t)(colon - argv[i]) >= sizeof(l->name)) {
			stop_all();
			chaos_die("servers: bad link %s (NAME:redis or NAME:pg)",
			    argv[i]);
		}
		memcpy(l->name, argv[i], (size_t)(colon - argv[i]));
		l->target_port = strcmp(colon + 1, "pg") == 0 ? pg.port : redis.port;
		if (ha && strcmp(colon + 1, "pg") != 0) {
			stop_all();
			chaos_die("servers: %s: with ha= only pg links (a proxy "
			    "cannot follow a failover)", argv[i]);
		}
		l->listen_fd = listen_loopback(&l->port);
		if (l->listen_fd < 0) {
			stop_all();
			chaos_die("servers: cannot listen: %s", strerror(errno));
		}
		printf("link %s %d\n", l->name, l->port);
		nlinks++;
	}
	for (int i = 0; i < MAX_PAIRS; i++)
		pairs[i].link = -1;
	pthread_t t;
	if (pthread_create(&t, NULL, proxy_thread, NULL) != 0) {
		stop_all();
		chaos_die("servers: pthread_create failed");
	}
	printf("ready\n");
	char line[256];
	while (fgets(line, sizeof(line), stdin) != NULL) {
		if (strncmp(line, "quit", 4) == 0)
			break;
		printf("%s\n", command(line));
	}
	stop_all();
	printf("ok\n");
	return 0;
}
