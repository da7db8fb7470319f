/* test_wait.c - `ferryctl enqueue --wait` against a real ferryd, Redis and
 * PostgreSQL: it answers when every job is done or dead (with the reason)
 * or the time is up (naming the pending ones); it needs a queue that keeps
 * ids; it rides through a Redis restart. And two ways a producer's reply
 * is lost, each ending with every job in PostgreSQL exactly once: a
 * connection cut after Redis ran the call (a proxy swallows the reply),
 * and a network partition (Redis in a network namespace whose link the
 * test takes down for longer than ferryctl's command timeout); ferryctl
 * sends the call again. (Redis killed during the calls: test_idempotency.c;
 * a Sentinel failover during them: test_sentinel.c.) */
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

#define READY "ferry:{q}:ready"
#define IDS "ferry:{q}:ids"
#define PG_QUEUE "[queue q]\nworkers = 2\nhandler = postgres\n" \
	"table = rows\nmax_attempts = 1\nidempotency_window = 10m\n"

static struct ferryd d;

static void
teardown(void)
{
	h_teardown(&d);
}

TestSuite(wait, .fini = teardown, .timeout = 300);

/* Redis and PostgreSQL (table rows (n int)), the config with `queues`. */
static void
setup(const char *const *redis_args, const char *queues)
{
	struct h_run init;

	h_setup_redis(&d, NULL, "", redis_args);
	h_config(&d, h_pg_start(&d), queues);
	h_pg_exec(&d, "CREATE TABLE rows (n int)");
	h_ctl(&init, d.config, NULL, "init-db", NULL);
	h_run_expect(&init, 0);
	h_run_free(&init);
}

/* `ferryctl -c d.config ARGS...` in the background, the file `input` on
 * stdin, stdout and stderr into d.dir/ctl.out and ctl.err. */
#define spawn_ctl(input, ...) h_ctl_spawn(d.config, input, ctl_file("out"), \
	ctl_file("err"), __VA_ARGS__)

static const char *
ctl_file(const char *what)
{
	static char path[2][300];
	char *p = path[strcmp(what, "out") == 0];

	snprintf(p, 300, "%s/ctl.%s", d.dir, what);
	return p;
}

/* Every one of `total` rows written once. */
static void
assert_rows_once(int total)
{
	cr_assert_eq(h_pg_int(&d, "SELECT count(*) FROM rows"), total);
	cr_assert_eq(h_pg_int(&d, "SELECT count(DISTINCT n) FROM rows"), total);
}

/* Done and dead: a line per job, exit 4 since one is dead, with the
 * reason PostgreSQL gave; its rows committed before the answer. */
Test(wait, each_job_done_or_dead_with_its_reason)
{
	struct h_run r;
	char input[300];

	setup(NULL, PG_QUEUE);
	h_start(&d, 2);
	h_jobs_file(&d, 100, input, sizeof(input));
	FILE *f = fopen(input, "a");
	fputs("{\"id\":\"bad\",\"data\":[{\"n\":\"not a number\"}]}\n", f);
	fclose(f);
	char *jobs = h_read_file(input);
	h_ctl(&r, d.config, jobs, "enqueue", "--wait", "1m", "q", "-", NULL);
	free(jobs);
	cr_assert_eq(r.status, 4, "exit %d: %s%s", r.status, r.out, r.err);
	int done = 0;
	for (const char *p = r.out; (p = strstr(p, " done\n")) != NULL; p++)
		done++;
	cr_assert_eq(done, 100, "%s", r.out);
	cr_assert_not_null(strstr(r.out, "r0 done\nr1 done\n"), "%s", r.out);
	cr_assert_not_null(strstr(r.out, "\nbad dead "), "%s", r.out);
	cr_assert_not_null(strstr(r.out, "invalid input syntax for type "
	    "integer"), "%s", r.out);
	cr_assert_not_null(strstr(r.err, "100 done, 1 dead, 0 pending, 0 "
	    "unknown"), "%s", r.err);
	h_run_free(&r);
	assert_rows_once(100);
	h_stop(&d);
}

/* No worker: the time is up, every job pending, exit 5, after about the
 * timeout (not before it). The jobs stay in the queue. */
Test(wait, the_time_is_up_with_jobs_pending)
{
	struct h_run r;

	setup(NULL, "[queue q]\nworkers = 0\nidempotency_window = 1m\n");
	long long t0 = h_now_ms();
	h_ctl(&r, d.config, "{\"id\":\"a\"}\n{\"id\":\"b\"}\n", "enqueue",
	    "--wait=1s", "q", "-", NULL);
	long long took = h_now_ms() - t0;
	cr_assert_eq(r.status, 5, "exit %d: %s", r.status, r.err);
	cr_assert_str_eq(r.out, "a pending\nb pending\n");
	cr_assert_geq(took, 1000);
	cr_assert_lt(took, 20000);
	h_run_free(&r);
	cr_assert_eq(h_redis_int(&d, "LLEN " READY), 2);
	/* -q: only the summary */
	h_ctl(&r, d.config, "{\"id\":\"c\"}", "enqueue", "-q", "--wait", "0",
	    "q", "-", NULL);
	cr_assert_eq(r.status, 5);
	cr_assert_str_eq(r.out, "");
	cr_assert_not_null(strstr(r.err, "0 done, 0 dead, 1 pending"), "%s",
	    r.err);
	h_run_free(&r);
}

/* --wait needs the queue to keep ids and every job to have one; refused
 * before anything is pushed. */
Test(wait, refused_without_ids)
{
	struct h_run r;

	setup(NULL, "[queue q]\nworkers = 0\nidempotency_window = 1m\n"
	    "[queue plain]\nworkers = 0\n");
	h_ctl(&r, d.config, NULL, "enqueue", "--wait", "plain",
	    "{\"id\":\"a\"}", NULL);
	cr_assert_eq(r.status, 64);
	cr_assert_not_null(strstr(r.err, "set idempotency_window in [queue "
	    "plain]"), "%s", r.err);
	h_run_free(&r);
	h_ctl(&r, d.config, "{\"id\":\"a\"}\n{\"n\":1}\n", "enqueue", "--wait",
	    "q", "-", NULL);
	cr_assert_eq(r.status, 64);
	cr_assert_not_null(strstr(r.err, "each job needs an id"), "%s", r.err);
	h_run_free(&r);
	h_ctl(&r, d.config, NULL, "enqueue", "--wait=soon", "q",
	    "{\"id\":\"a\"}", NULL);
	cr_assert_eq(r.status, 64);
	h_run_free(&r);
	cr_assert_eq(h_redis_int(&d, "LLEN " READY), 0);
	cr_assert_eq(h_redis_int(&d, "LLEN ferry:{plain}:ready"), 0);
}

/* A job purged from the dead list while waited for is dead, said so;
 * an id the queue never had is unknown (exit 5). */
Test(wait, purged_and_unknown)
{
	struct h_run r;

	setup(NULL, PG_QUEUE "[queue later]\nworkers = 0\n"
	    "idempotency_window = 10m\n");
	h_start(&d, 2);
	h_ctl(&r, d.config, NULL, "enqueue", "q",
	    "{\"id\":\"x\",\"data\":[{\"n\":\"x\"}]}", NULL);
	h_run_expect(&r, 0);
	h_run_free(&r);
	h_wait_redis_int(&d, 1, "LLEN ferry:{q}:dead");
	h_ctl(&r, d.config, NULL, "dead", "purge", "q", "x", NULL);
	h_run_expect(&r, 0);
	h_run_free(&r);
	h_ctl(&r, d.config, NULL, "enqueue", "--wait", "5s", "q",
	    "{\"id\":\"x\",\"data\":[{\"n\":1}]}", NULL);
	cr_assert_eq(r.status, 4, "%s", r.err);
	cr_assert_str_eq(r.out, "x dead (its entry was purged or archived "
	    "since)\n");
	h_run_free(&r);
	/* its id gone while waited for (as a failover that lost the push
	 * leaves it): unknown, and the message says to enqueue it again */
	char input[300];
	snprintf(input, sizeof(input), "%s/y.jsonl", d.dir);
	h_write_file(input, "{\"id\":\"y\"}\n");
	pid_t pid = spawn_ctl(input, "enqueue", "--wait", "1m", "later", "-",
	    NULL);
	/* y, and the marks' member "" while a job is live */
	h_wait_redis_int(&d, 2, "ZCARD ferry:{later}:ids");
	freeReplyObject(h_redis(&d, "ZREM ferry:{later}:ids y"));
	int status;
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 5);
	snprintf(input, sizeof(input), "%s/ctl.out", d.dir);
	char *out = h_read_file(input);
	cr_assert_str_eq(out, "y unknown\n");
	free(out);
	snprintf(input, sizeof(input), "%s/ctl.err", d.dir);
	char *err = h_read_file(input);
	cr_assert_not_null(strstr(err, "enqueue it again with the same ids"),
	    "%s", err);
	free(err);
	h_stop(&d);
}

/* 20,000 jobs; Redis SIGKILLed while ferryctl waits (AOF always: all of
 * them are on disk) and restarted 1.5 s later: the wait goes on and ends
 * with every job done. */
Test(wait, a_redis_restart_while_waiting)
{
	static const char *const aof[] = { "--appendonly", "yes",
	    "--appendfsync", "always", NULL };
	char input[300];
	int total = 20000;

	setup(aof, "[queue q]\nworkers = 1\nhandler = postgres\n"
	    "table = rows\nbatch_size = 50\nidempotency_window = 10m\n");
	h_pg_exec(&d, "CREATE FUNCTION slow() RETURNS trigger LANGUAGE plpgsql "
	    "AS $$ BEGIN PERFORM pg_sleep(0.02); RETURN NEW; END $$");
	h_pg_exec(&d, "CREATE TRIGGER slow BEFORE INSERT ON rows FOR EACH "
	    "STATEMENT EXECUTE FUNCTION slow()");
	h_start(&d, 1);
	h_jobs_file(&d, total, input, sizeof(input));
	pid_t pid = spawn_ctl(input, "enqueue", "--wait", "5m", "q", "-",
	    NULL);
	/* every id, and the marks' member "" while a job is live */
	h_wait_redis_int(&d, total + 1, "ZCARD " IDS);
	while (h_pg_int(&d, "SELECT count(*) FROM rows") < 1000)
		h_sleep_ms(10);
	test_redis_kill9(&d.redis);
	h_sleep_ms(1500);
	cr_assert_eq(test_redis_restart(&d.redis, aof), 0);
	h_ctl_wait_ok(pid, ctl_file("err"), "still waiting");
	cr_assert_eq(h_count_in_file(ctl_file("out"), " done"), total);
	assert_rows_once(total);
	h_stop(&d);
}

/* ---------------------------------------------------------------- proxy
 * A TCP proxy in front of Redis that, for every `cut_every`th script call
 * (EVALSHA or EVAL), lets the call through, swallows Redis' reply and
 * closes the client's connection: the call ran, its producer cannot know. */
struct proxy {
	int listener, listener_port;
	int port;               /* Redis' */
	int cut_every;
	atomic_int cuts;        /* replies swallowed */
	atomic_bool stop;
	pthread_t thread;
};

#define PROXY_PAIRS 8

struct pair {
	int client, server;
	bool script;            /* the last request was a script call */
};

static void
pair_close(struct pair *p)
{
	if (p->client >= 0)
		close(p->client);
	if (p->server >= 0)
		close(p->server);
	p->client = p->server = -1;
}

static int
connect_redis(int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
	    .sin_port = htons((uint16_t)port),
	    .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0)
		return fd;
	if (fd >= 0)
		close(fd);
	return -1;
}

static void *
proxy_run(void *arg)
{
	struct proxy *x = arg;
	struct pair pairs[PROXY_PAIRS];
	long calls = 0;
	char buf[1 << 16];

	for (int i = 0; i < PROXY_PAIRS; i++)
		pairs[i] = (struct pair){ -1, -1, false };
	while (!atomic_load(&x->stop)) {
		struct pollfd fds[1 + 2 * PROXY_PAIRS];
		int n = 0;
		fds[n++] = (struct pollfd){ x->listener, POLLIN, 0 };
		for (int i = 0; i < PROXY_PAIRS; i++) {
			fds[n++] = (struct pollfd){ pairs[i].client, POLLIN, 0 };
			fds[n++] = (struct pollfd){ pairs[i].server, POLLIN, 0 };
		}
		if (poll(fds, (nfds_t)n, 50) <= 0)
			continue;
		if (fds[0].revents & POLLIN) {
			int c = accept(x->listener, NULL, NULL);
			int free_at = -1;
			for (int i = 0; i < PROXY_PAIRS && free_at < 0; i++)
				if (pairs[i].client < 0)
					free_at = i;
			if (c >= 0 && free_at >= 0) {
				pairs[free_at] = (struct pair){ c,
				    connect_redis(x->port), false };
				if (pairs[free_at].server < 0)
					pair_close(&pairs[free_at]);
			} else if (c >= 0)
				close(c);
		}
		for (int i = 0; i < PROXY_PAIRS; i++) {
			struct pair *p = &pairs[i];
			for (int side = 0; side < 2 && p->client >= 0; side++) {
				if (!(fds[1 + 2 * i + side].revents & (POLLIN |
				    POLLHUP | POLLERR)))
					continue;
				int from = side == 0 ? p->client : p->server;
				int to = side == 0 ? p->server : p->client;
				ssize_t got = read(from, buf, sizeof(buf));
				if (got <= 0) {
					pair_close(p);
					break;
				}
				/* a request may come in several reads; its
				 * reply ends it */
				if (side == 0 && memmem(buf, (size_t)got,
				    "\r\nEVAL", 6) != NULL)
					p->script = true;
				else if (side == 1 && p->script && buf[0] == '*' &&
				    ++calls % x->cut_every == 0) {
					atomic_fetch_add(&x->cuts, 1);
					pair_close(p);
					break;
				}
				if (side == 1)
					p->script = false;
				if (write(to, buf, (size_t)got) != got) {
					pair_close(p);
					break;
				}
			}
		}
	}
	for (int i = 0; i < PROXY_PAIRS; i++)
		pair_close(&pairs[i]);
	return NULL;
}

static void
proxy_start(struct proxy *x, int redis_port, int cut_every)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
	    .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);

	x->port = redis_port;
	x->cut_every = cut_every;
	x->listener = socket(AF_INET, SOCK_STREAM, 0);
	cr_assert(x->listener >= 0);
	cr_assert_eq(bind(x->listener, (struct sockaddr *)&a, sizeof(a)), 0);
	cr_assert_eq(listen(x->listener, 8), 0);
	cr_assert_eq(getsockname(x->listener, (struct sockaddr *)&a, &len), 0);
	x->port = redis_port;
	cr_assert_eq(pthread_create(&x->thread, NULL, proxy_run, x), 0);
	x->listener_port = ntohs(a.sin_port);
}

static void
proxy_stop(struct proxy *x)
{
	atomic_store(&x->stop, true);
	pthread_join(x->thread, NULL);
	close(x->listener);
}

/* d.config with Redis at `port` instead, written to path (ferryctl's
 * own file: ferryd keeps the direct address). */
static void
config_via(int port, char *path, size_t size)
{
	char *text = h_read_file(d.config), *at = strstr(text, "redis_port = ");

	cr_assert_not_null(at);
	snprintf(path, size, "%s/ctl.ini", d.dir);
	FILE *f = fopen(path, "w");
	cr_assert_not_null(f);
	fprintf(f, "%.*sredis_port = %d%s", (int)(at - text), text, port,
	    strchr(at, '\n'));
	fclose(f);
	free(text);
}

/* 30,000 jobs in 30 calls through a proxy that swallows the reply of
 * every 7th script call and cuts the connection: ferryctl sends each
 * again (its jobs already accepted), and --wait ends with every job done
 * and written once. */
Test(wait, replies_cut_after_the_call_ran)
{
	struct proxy x = { 0 };
	char input[300], ctl_ini[300];
	struct h_run r;
	int total = 30000;

	setup(NULL, PG_QUEUE);
	h_start(&d, 2);
	proxy_start(&x, d.redis.port, 7);
	config_via(x.listener_port, ctl_ini, sizeof(ctl_ini));
	h_jobs_file(&d, total, input, sizeof(input));
	char *jobs = h_read_file(input);
	h_ctl(&r, ctl_ini, jobs, "enqueue", "-q", "--wait", "5m", "q", "-",
	    NULL);
	free(jobs);
	proxy_stop(&x);
	cr_assert_eq(r.status, 0, "exit %d: %s", r.status, r.err);
	cr_assert_geq(atomic_load(&x.cuts), 4, "%d cuts", atomic_load(&x.cuts));
	cr_assert_not_null(strstr(r.err, "so it is safe to send again"), "%s",
	    r.err);
	cr_assert_not_null(strstr(r.err, "were accepted by queue q already"),
	    "%s", r.err);
	cr_assert_not_null(strstr(r.err, "30000 done, 0 dead, 0 pending"), "%s",
	    r.err);
	h_run_free(&r);
	assert_rows_once(total);
	h_stop(&d);
}

/* ---------------------------------------------------------- partition
 * Redis in a network namespace of its own, reached over a veth pair: the
 * test cuts the link (ip link set down: packets are dropped, nothing is
 * reset, as in a network partition) and restores it. */
struct netns {
	char name[32], veth[32];
	char addr[32];          /* Redis' side */
	pid_t redis;
};

static struct netns ns;

static int
sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static int
sh(const char *fmt, ...)
{
	char cmd[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	return system(cmd);
}

static void
netns_teardown(void)
{
	if (ns.redis > 0) {
		kill(ns.redis, SIGKILL);
		waitpid(ns.redis, NULL, 0);
	}
	if (ns.name[0] != '\0')
		sh("ip link del %s 2>/dev/null; ip netns del %s 2>/dev/null",
		    ns.veth, ns.name);
	memset(&ns, 0, sizeof(ns));
	teardown();
}

/* The namespace, the link and a redis-server (AOF always) in it on
 * ns.addr:6379; its data in dir. */
static void
netns_redis(const char *dir)
{
	int n = getpid() % 250 + 1;

	snprintf(ns.name, sizeof(ns.name), "ferry%d", (int)getpid());
	snprintf(ns.veth, sizeof(ns.veth), "fa%d", (int)getpid());
	snprintf(ns.addr, sizeof(ns.addr), "10.213.%d.2", n);
	cr_assert_eq(sh("ip netns add %s && "
	    "ip link add %s type veth peer name fb%d && "
	    "ip link set fb%d netns %s && "
	    "ip addr add 10.213.%d.1/30 dev %s && ip link set %s up && "
	    "ip netns exec %s ip addr add %s/30 dev fb%d && "
	    "ip netns exec %s ip link set fb%d up && "
	    "ip netns exec %s ip link set lo up", ns.name, ns.veth,
	    (int)getpid(), (int)getpid(), ns.name, n, ns.veth, ns.veth, ns.name,
	    ns.addr, (int)getpid(), ns.name, (int)getpid(), ns.name), 0,
	    "cannot make a network namespace and a veth pair (needs root and "
	    "iproute2)");
	ns.redis = fork();
	cr_assert_neq(ns.redis, -1);
	if (ns.redis == 0) {
		const char *server = getenv("REDIS_SERVER");
		execlp("ip", "ip", "netns", "exec", ns.name,
		    server != NULL ? server : "redis-server", "--bind", ns.addr,
		    "--port", "6379", "--dir", dir, "--save", "", "--appendonly",
		    "yes", "--appendfsync", "always", "--protected-mode", "no",
		    (char *)NULL);
		_exit(127);
	}
	long long end = h_now_ms() + 20000;
	redisContext *c = NULL;
	struct timeval tv = { 2, 0 };
	while (c == NULL) {
		cr_assert_lt(h_now_ms(), end, "redis-server in %s did not answer",
		    ns.name);
		c = redisConnectWithTimeout(ns.addr, 6379, tv);
		if (c != NULL && c->err) {
			redisFree(c);
			c = NULL;
			h_sleep_ms(50);
		}
	}
	redisFree(c);
}

/* 30,000 jobs pushed by ferryctl to a Redis across a link the test cuts
 * for 12 s once 3,000 are in (longer than ferryctl's 10 s command timeout:
 * the reply of the call in flight is lost), then restores: ferryctl sends
 * that call again and goes on; ferryd, started after, writes every job
 * once. */
Test(wait, a_network_partition_during_the_calls, .fini = netns_teardown)
{
	char input[300], lines[128], pg[200];
	int total = 30000;

	setup(NULL, PG_QUEUE);
	netns_redis(d.dir);
	snprintf(lines, sizeof(lines), "redis_host = %s\nredis_port = 6379\n",
	    ns.addr);
	d.redis_lines = lines;
	snprintf(pg, sizeof(pg), "pg_host = 127.0.0.1\npg_port = %d\n"
	    "pg_database = ferry\npg_user = postgres\n", d.pg.port);
	h_config(&d, pg, PG_QUEUE);
	redisFree(d.rc);
	struct timeval tv = { 30, 0 };
	d.rc = redisConnectWithTimeout(ns.addr, 6379, tv);
	cr_assert(d.rc != NULL && d.rc->err == 0);
	h_jobs_file(&d, total, input, sizeof(input));
	pid_t pid = spawn_ctl(input, "enqueue", "q", "-", NULL);
	while (h_redis_int(&d, "LLEN " READY) < 3000)
		h_sleep_ms(1);
	cr_assert_eq(sh("ip link set %s down", ns.veth), 0);
	h_sleep_ms(12000);
	cr_assert_eq(sh("ip link set %s up", ns.veth), 0);
	h_ctl_wait_ok(pid, ctl_file("err"), "so it is safe to send again");
	cr_assert_eq(h_redis_int(&d, "LLEN " READY), total);
	h_start(&d, 2);
	h_wait_pg_int(&d, total, "SELECT count(*) FROM rows");
	assert_rows_once(total);
	h_stop(&d);
}
