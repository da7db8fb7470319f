/* plan.c - `chaos_helper plan seed=N seconds=S ttl_ms=T`: the fault
 * schedule of one chaos run, one event a line, "MS EVENT ARGS...", sorted by
 * time. The same seed gives the same lines on every machine (splitmix64).
 *
 * The generator simulates what it schedules (hosts up, down or frozen; host
 * b present or not; servers down; links cut) so that every event makes
 * sense when it comes: a frozen host is only thawed, a killed master only
 * restarted, a freeze only happens while the other host is up to reap it.
 * The first round uses every fault kind once, in a seeded order, so even a
 * short run covers them all; after that kinds are drawn by weight.
 *
 * faults=0 or hostile=0 leave out the faults or the hostile elements (to
 * tell which of the two a failure needs).
 *
 * failover=1 (scripts/chaos --failover: a primary, two replicas, three
 * sentinels) leaves out rkill and the Redis link cuts (a proxy cannot
 * follow a failover) and adds the Redis failover kinds below. Without it
 * the plan of a seed is the one it always was (same kinds, same order,
 * same weights).
 *
 * Events (H is a or b):
 *   wkill H I           SIGKILL the I-th (mod count) worker of host H
 *   mkill H / mstart H  SIGKILL the master of H / start it again
 *   freeze H / thaw H   SIGSTOP every process of H / SIGCONT
 *   bstart / bstop term|kill   host b (a second ferryd, same hostname, own
 *                       PID namespace) comes / goes
 *   pgkill / pgstart    PostgreSQL immediate stop / start
 *   pgterm I            pg_terminate_backend of the I-th COPYing backend
 *   rkill / rstart      redis-server kill -9 / restart from its AOF
 *   cut H redis|pg reset|stall / uncut H redis|pg
 *   rfailover           (failover=1) SENTINEL FAILOVER: a replica promoted,
 *                       the old primary stays as a replica
 *   rpkill / rpstart    (failover=1) kill -9 of the current primary; restart
 *                       it on its port and dir 2-5 s later (the sentinels
 *                       make it a replica of the new primary)
 *   rrkill I / rrstart  (failover=1) kill -9 of a replica for 1-6 s: with
 *                       redis_wait_replicas = 2 batches wait meanwhile
 *   hostile pg|exec KIND I   an element LPUSHed onto ready by the producer
 *   forge pg|exec KIND I     a forged job pushed past the enqueue script
 *                       by the hostile producer (forge.c): the id of a live
 *                       honest job, or an honest job's key of ferry's own
 *   end                 the last fault is over
 *
 * The forged jobs are a stream of their own, drawn from a generator of
 * their own (the seed's "forge" sequence) and added after the others: a
 * seed's other lines, the end line included, are the ones it always gave
 * (grep -v ' forge ' of a plan is the plan before forged jobs existed).
 * forged=0 leaves them out; hostile=0 leaves out both kinds of hostile
 * input. */
#include "chaos.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum kind {
	K_WKILL, K_MKILL, K_FREEZE, K_HOSTB, K_PGKILL, K_PGTERM, K_RKILL,
	K_CUT_REDIS, K_CUT_PG, K_RFAILOVER, K_RPKILL, K_RRKILL, K_NKINDS
};
static const int weight[K_NKINDS] = { 30, 7, 5, 5, 5, 12, 5, 8, 8, 6, 6, 5 };

/* The kinds of this run, in enum order: the first nine without
 * failover=1, as the plan always had. */
static enum kind active[K_NKINDS];
static int nactive;

const char *const chaos_hostile_kinds[] = {
	"utf8-doc", "utf8-raw", "notjson", "wrap-stamp", "wrap-future",
	"wrap-noattempts", "wrap-nojob", "wrap-badattempts", "wrap-deep",
	"wrap-recovered", "deep-doc", "deep-doc2", "huge", "cache-foreign",
	"cache-ferry", "id-weird", NULL,
};

struct event {
	long long t;
	size_t seq;  /* insertion order: equal times keep it */
	char text[96];
};

static struct event *ev;
static size_t nev, cap;

static void
add(long long t, const char *text)
{
	if (nev == cap) {
		cap = cap ? cap * 2 : 256;
		ev = realloc(ev, cap * sizeof(*ev));
		if (ev == NULL)
			chaos_die("out of memory");
	}
	ev[nev].t = t;
	ev[nev].seq = nev;
	snprintf(ev[nev].text, sizeof(ev[nev].text), "%s", text);
	nev++;
}

static int
by_time(const void *a, const void *b)
{
	const struct event *x = a, *y = b;
	if (x->t != y->t)
		return x->t < y->t ? -1 : 1;
	return x->seq < y->seq ? -1 : 1;
}

/* The simulated world: until when each thing is busy. */
struct world {
	long long host_busy[2];   /* a host down or frozen until */
	long long b_from, b_until; /* host b present in [from, until) */
	long long pg_busy, redis_busy;
	long long cut_busy[2][2]; /* [host][0 redis, 1 pg] */
};

static int
host_present(const struct world *w, int h, long long t, long long until)
{
	return h == 0 || (t >= w->b_from + 1500 && until < w->b_until - 1000);
}

static int
host_free(const struct world *w, int h, long long t, long long until)
{
	return host_present(w, h, t, until) && w->host_busy[h] <= t;
}

/* A fault that lasts d ms: `down` at t, `up` at t + d; what it touches
 * is busy until `settle` ms after that. Returns 1 (scheduled). */
static int
outage(long long *busy, long long t, long long d, long long settle,
    const char *down, const char *up)
{
	add(t, down);
	add(t + d, up);
	*busy = t + d + settle;
	return 1;
}

/* Try to schedule one fault of kind k at t; 1 if it was. */
static int
schedule(struct world *w, struct chaos_rng *r, enum kind k, long long t,
    long long end, long long ttl)
{
	static const char hn[2] = { 'a', 'b' };
	char buf[96], up[96];
	int h = (int)chaos_rng_range(r, 0, 1);
	if (!host_present(w, h, t, t + 1))
		h = 0;
	long long d;
	switch (k) {
	case K_WKILL:
		if (!host_free(w, h, t, t + 1))
			return 0;
		snprintf(buf, sizeof(buf), "wkill %c %lld", hn[h],
		    chaos_rng_range(r, 0, 99));
		add(t, buf);
		return 1;
	case K_MKILL:
		d = chaos_rng_range(r, 200, 3000);
		if (!host_free(w, h, t, t + d))
			return 0;
		snprintf(buf, sizeof(buf), "mkill %c", hn[h]);
		snprintf(up, sizeof(up), "mstart %c", hn[h]);
		return outage(&w->host_busy[h], t, d, 1000, buf, up);
	case K_FREEZE:
		/* longer than heartbeat_ttl, with the other host up to reap */
		d = ttl + chaos_rng_range(r, 1000, 3000);
		if (!host_free(w, h, t, t + d) || !host_free(w, 1 - h, t, t + d + 2000))
			return 0;
		snprintf(buf, sizeof(buf), "freeze %c", hn[h]);
		snprintf(up, sizeof(up), "thaw %c", hn[h]);
		w->host_busy[1 - h] = t + 500;  /* no kill of the reaper at once */
		return outage(&w->host_busy[h], t, d, 500, buf, up);
	case K_HOSTB:
		if (t < w->b_until + 2000)
			return 0;
		d = chaos_rng_range(r, 8000, 25000);
		if (t + d > end)
			d = end - t;
		if (d < 5000)
			return 0;
		w->b_from = t;
		w->b_until = t + d;
		add(t, "bstart");
		add(t + d, chaos_rng_range(r, 0, 1) ? "bstop kill" : "bstop term");
		return 1;
	case K_PGKILL:
		d = chaos_rng_range(r, 500, 4000);
		if (w->pg_busy > t)
			return 0;
		return outage(&w->pg_busy, t, d, 1500, "pgkill", "pgstart");
	case K_PGTERM:
		if (w->pg_busy > t)
			return 0;
		snprintf(buf, sizeof(buf), "pgterm %lld", chaos_rng_range(r, 0, 99));
		add(t, buf);
		return 1;
	case K_RKILL:
		d = chaos_rng_range(r, 300, 3000);
		if (w->redis_busy > t)
			return 0;
		return outage(&w->redis_busy, t, d, 1500, "rkill", "rstart");
	case K_RFAILOVER:
		if (w->redis_busy > t)
			return 0;
		add(t, "rfailover");
		/* the old primary a replica in sync again, with time for a
		 * split election's retry */
		w->redis_busy = t + 9000;
		return 1;
	case K_RPKILL:
		d = chaos_rng_range(r, 2000, 5000);
		if (w->redis_busy > t)
			return 0;
		return outage(&w->redis_busy, t, d, 8000, "rpkill", "rpstart");
	case K_RRKILL:
		d = chaos_rng_range(r, 1000, 6000);
		if (w->redis_busy > t)
			return 0;
		snprintf(buf, sizeof(buf), "rrkill %lld", chaos_rng_range(r, 0, 99));
		return outage(&w->redis_busy, t, d, 5000, buf, "rrstart");
	case K_CUT_REDIS:
	case K_CUT_PG: {
		int s = k == K_CUT_PG;
		int stall = (int)chaos_rng_range(r, 0, 1);
		/* a Redis partition past heartbeat_ttl lets the other host
		 * reap this one while its workers still hold batches */
		d = chaos_rng_range(r, 1000, s ? 6000 : ttl + 3000);
		if (!host_present(w, h, t, t + d) || w->cut_busy[h][s] > t)
			return 0;
		snprintf(buf, sizeof(buf), "cut %c %s %s", hn[h],
		    s ? "pg" : "redis", stall ? "stall" : "reset");
		snprintf(up, sizeof(up), "uncut %c %s", hn[h], s ? "pg" : "redis");
		return outage(&w->cut_busy[h][s], t, d, 500, buf, up);
	}
	default:
		return 0;
	}
}

static enum kind
draw(struct chaos_rng *r)
{
	int total = 0;
	for (int i = 0; i < nactive; i++)
		total += weight[active[i]];
	long long x = chaos_rng_range(r, 0, total - 1);
	for (int i = 0; i < nactive; i++) {
		if (x < weight[active[i]])
			return active[i];
		x -= weight[active[i]];
	}
	return K_WKILL;
}

/* The forged jobs (forge.c): from 10 s on, when the first honest jobs are
 * dead and their keys can be named, to 1.5 s before the end; every kind
 * once first, then drawn, with gaps of 200 ms to gap_max. */
static void
forge_stream(uint64_t seed, long long end, long long gap_max)
{
	struct chaos_rng r = { seed ^ 0x666f726765ULL };
	int nk = chaos_forged_nkinds(), fi = 0;
	char buf[96];

	for (long long t = 10000; t < end - 1500;
	    t += chaos_rng_range(&r, 200, gap_max)) {
		int kind = fi < nk ? fi : (int)chaos_rng_range(&r, 0, nk - 1);
		const char *q, *name = chaos_forged_name(kind, &q);
		snprintf(buf, sizeof(buf), "forge %s %s %lld", q, name,
		    chaos_rng_range(&r, 0, 999));
		add(t, buf);
		fi++;
	}
}

int
chaos_plan_main(int argc, char **argv)
{
	long long seed = chaos_arg_ll(argc, argv, "seed", 1);
	long long end = chaos_arg_ll(argc, argv, "seconds", 60) * 1000;
	long long ttl = chaos_arg_ll(argc, argv, "ttl_ms", 3000);
	long long gap_min = chaos_arg_ll(argc, argv, "gap_min_ms", 300);
	long long gap_max = chaos_arg_ll(argc, argv, "gap_max_ms", 2500);
	long long hgap_max = chaos_arg_ll(argc, argv, "hostile_gap_max_ms", 1500);
	int faults = (int)chaos_arg_ll(argc, argv, "faults", 1);
	int hostiles = (int)chaos_arg_ll(argc, argv, "hostile", 1);
	int forged = hostiles && chaos_arg_ll(argc, argv, "forged", 1);
	long long fgap_max = chaos_arg_ll(argc, argv, "forged_gap_max_ms", 1800);
	int failover = (int)chaos_arg_ll(argc, argv, "failover", 0);
	struct chaos_rng r = { (uint64_t)seed };
	struct world w = { .b_from = -100000, .b_until = -100000 };
	char buf[96];

	nactive = 0;
	for (int k = 0; k < K_NKINDS; k++) {
		int ha_kind = k == K_RFAILOVER || k == K_RPKILL || k == K_RRKILL;
		int no_ha = k == K_RKILL || k == K_CUT_REDIS;
		if (failover ? !no_ha : !ha_kind)
			active[nactive++] = (enum kind)k;
	}
	/* round one: every kind once, shuffled (Fisher-Yates) */
	enum kind order[K_NKINDS];
	for (int k = 0; k < nactive; k++)
		order[k] = active[k];
	for (int k = nactive - 1; k > 0; k--) {
		int j = (int)chaos_rng_range(&r, 0, k);
		enum kind x = order[k];
		order[k] = order[j];
		order[j] = x;
	}
	int next_first = 0;
	/* host b first: the freeze of round one needs it */
	if (faults)
		schedule(&w, &r, K_HOSTB, 1000, end - 1000, ttl);
	long long t = 2500;
	while (faults && t < end - 1500) {
		int done = 0;
		for (int tries = 0; tries < 12 && !done; tries++) {
			enum kind k = next_first < nactive ? order[next_first] : draw(&r);
			done = schedule(&w, &r, k, t, end - 500, ttl);
			if (done && next_first < nactive)
				next_first++;
			else if (!done && next_first < nactive && tries == 11)
				next_first++;  /* cannot now (e.g. host b gone): skip */
		}
		t += chaos_rng_range(&r, gap_min, gap_max);
	}
	/* hostile elements: their own stream, every kind once first */
	int nh = 0;
	while (chaos_hostile_kinds[nh] != NULL)
		nh++;
	int hi = 0;
	for (t = 1500; hostiles && t < end - 1000;
	    t += chaos_rng_range(&r, 100, hgap_max)) {
		int kind = hi < 2 * nh ? hi % nh : (int)chaos_rng_range(&r, 0, nh - 1);
		/* round one onto the pg queue, round two onto exec, then drawn */
		const char *q = hi < nh ? "pg" : hi < 2 * nh ? "exec" :
		    chaos_rng_range(&r, 0, 2) ? "pg" : "exec";
		snprintf(buf, sizeof(buf), "hostile %s %s %lld", q,
		    chaos_hostile_kinds[kind], chaos_rng_range(&r, 0, 999));
		add(t, buf);
		hi++;
	}
	/* the end: after the last fault or hostile element, as before the
	 * forged jobs, which may come after it */
	long long last = 0;
	for (size_t i = 0; i < nev; i++)
		last = ev[i].t > last ? ev[i].t : last;
	add(last + 1, "end");
	if (forged)
		forge_stream((uint64_t)seed, end, fgap_max);
	qsort(ev, nev, sizeof(*ev), by_time);
	for (size_t i = 0; i < nev; i++)
		printf("%lld %s\n", ev[i].t, ev[i].text);
	free(ev);
	return 0;
}
