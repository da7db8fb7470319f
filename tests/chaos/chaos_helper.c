/* chaos_helper.c - entry point of the fault-injection suite's helper, the
 * small utilities its modules share, and the foreign keys of the
 * application that shares Redis with ferry (its cache churn: churn.c; see
 * chaos.h). */
#include "chaos.h"

#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

long long
chaos_epoch_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void
chaos_die(const char *fmt, ...)
{
	va_list ap;
	fputs("chaos_helper: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(2);
}

const char *
chaos_arg(int argc, char **argv, const char *key, const char *def)
{
	size_t kl = strlen(key);
	for (int i = 1; i < argc; i++)
		if (strncmp(argv[i], key, kl) == 0 && argv[i][kl] == '=')
			return argv[i] + kl + 1;
	return def;
}

long long
chaos_arg_ll(int argc, char **argv, const char *key, long long def)
{
	const char *v = chaos_arg(argc, argv, key, NULL);
	char *end;
	if (v == NULL)
		return def;
	errno = 0;
	long long n = strtoll(v, &end, 10);
	if (errno != 0 || end == v || *end != '\0')
		chaos_die("%s=%s: not a number", key, v);
	return n;
}

uint64_t
chaos_rng_next(struct chaos_rng *r)
{
	uint64_t z = (r->s += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

long long
chaos_rng_range(struct chaos_rng *r, long long lo, long long hi)
{
	if (hi <= lo)
		return lo;
	return lo + (long long)(chaos_rng_next(r) % (uint64_t)(hi - lo + 1));
}

redisContext *
chaos_redis(int port, long timeout_ms)
{
	struct timeval tv = { timeout_ms / 1000, (timeout_ms % 1000) * 1000 };
	redisContext *c = redisConnectWithTimeout("127.0.0.1", port, tv);
	if (c == NULL || c->err) {
		if (c != NULL)
			redisFree(c);
		return NULL;
	}
	redisSetTimeout(c, tv);
	return c;
}

/* The primary the first answering sentinel of `sentinels` ("P1,P2,...")
 * names for `master`, if it says ROLE master; *port_out gets its port. */
redisContext *
chaos_redis_primary(const char *sentinels, const char *master,
    long timeout_ms, int *port_out)
{
	for (const char *s = sentinels; s != NULL && *s != '\0';) {
		int sport = atoi(s);
		const char *comma = strchr(s, ',');
		s = comma ? comma + 1 : NULL;
		redisContext *c = chaos_redis(sport, timeout_ms < 1000 ? timeout_ms :
		    1000);
		if (c == NULL)
			continue;
		redisReply *r = redisCommand(c, "SENTINEL get-master-addr-by-name %s",
		    master);
		int port = r != NULL && r->type == REDIS_REPLY_ARRAY &&
		    r->elements == 2 && r->element[1]->type == REDIS_REPLY_STRING ?
		    atoi(r->element[1]->str) : -1;
		if (r != NULL)
			freeReplyObject(r);
		redisFree(c);
		if (port <= 0)
			continue;
		c = chaos_redis(port, timeout_ms);
		if (c == NULL)
			continue;
		r = redisCommand(c, "ROLE");
		int ok = r != NULL && r->type == REDIS_REPLY_ARRAY &&
		    r->elements > 0 && r->element[0]->type == REDIS_REPLY_STRING &&
		    strcmp(r->element[0]->str, "master") == 0;
		if (r != NULL)
			freeReplyObject(r);
		if (ok) {
			if (port_out != NULL)
				*port_out = port;
			return c;
		}
		redisFree(c);
	}
	return NULL;
}

redisContext *
chaos_redis_arg(int argc, char **argv, long timeout_ms)
{
	const char *sentinels = chaos_arg(argc, argv, "sentinels", NULL);
	if (sentinels != NULL)
		return chaos_redis_primary(sentinels, chaos_arg(argc, argv,
		    "master", "ferry"), timeout_ms, NULL);
	return chaos_redis((int)chaos_arg_ll(argc, argv, "redis", 0), timeout_ms);
}

void
chaos_buf_add(struct chaos_buf *b, const void *data, size_t n)
{
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 256;
		while (cap < b->len + n + 1)
			cap *= 2;
		char *p = realloc(b->p, cap);
		if (p == NULL)
			chaos_die("out of memory");
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->len, data, n);
	b->len += n;
	b->p[b->len] = '\0';
}

void
chaos_buf_printf(struct chaos_buf *b, const char *fmt, ...)
{
	char small[1024];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(small, sizeof(small), fmt, ap);
	va_end(ap);
	if (n < 0)
		chaos_die("vsnprintf failed");
	if ((size_t)n < sizeof(small)) {
		chaos_buf_add(b, small, (size_t)n);
		return;
	}
	char *big = malloc((size_t)n + 1);
	if (big == NULL)
		chaos_die("out of memory");
	va_start(ap, fmt);
	vsnprintf(big, (size_t)n + 1, fmt, ap);
	va_end(ap);
	chaos_buf_add(b, big, (size_t)n);
	free(big);
}

void
chaos_buf_free(struct chaos_buf *b)
{
	free(b->p);
	b->p = NULL;
	b->len = b->cap = 0;
}

void
chaos_keys_add(struct chaos_keys *s, const char *k)
{
	if (s->n == s->cap) {
		s->cap = s->cap ? s->cap * 2 : 64;
		if ((s->k = realloc(s->k, s->cap * sizeof(*s->k))) == NULL)
			chaos_die("out of memory");
	}
	if ((s->k[s->n++] = strdup(k)) == NULL)
		chaos_die("out of memory");
}

int
chaos_keys_has(const struct chaos_keys *s, const char *k)
{
	for (size_t i = 0; i < s->n; i++)
		if (strcmp(s->k[i], k) == 0)
			return 1;
	return 0;
}

void
chaos_keys_free(struct chaos_keys *s)
{
	for (size_t i = 0; i < s->n; i++)
		free(s->k[i]);
	free(s->k);
	s->k = NULL;
	s->n = s->cap = 0;
}

/* ------------------------------------------------------ foreign keys */

/* Another application's keys, and other ferry instances' and queues'
 * lists: hostile jobs name them as cache_key; nothing may read them into a
 * handler, delete, PERSIST or change them. */
const char *const chaos_foreign_keys[] = {
	"app:session:1",          /* string with a TTL */
	"app:cart:2",             /* hash */
	"app:feed:3",             /* list */
	"other:{orders}:ready",   /* another ferry instance's queue */
	"ferry:{elsewhere}:ready", /* a queue of this prefix nobody serves */
	NULL,
};

static int
cmd_ok(redisContext *c, redisReply *r, const char *what)
{
	int ok = r != NULL && r->type != REDIS_REPLY_ERROR;
	if (!ok)
		fprintf(stderr, "chaos_helper: %s: %s\n", what,
		    r ? r->str : c->errstr);
	if (r != NULL)
		freeReplyObject(r);
	return ok ? 0 : -1;
}

int
chaos_foreign_create(redisContext *c)
{
	int rc = 0;
	rc |= cmd_ok(c, redisCommand(c, "SET app:session:1 user=42;token=abc "
	    "PX 86400000"), "SET app:session:1");
	rc |= cmd_ok(c, redisCommand(c, "HSET app:cart:2 item sku-1 qty 3"),
	    "HSET app:cart:2");
	rc |= cmd_ok(c, redisCommand(c, "RPUSH app:feed:3 a b c"),
	    "RPUSH app:feed:3");
	rc |= cmd_ok(c, redisCommand(c, "RPUSH other:{orders}:ready "
	    "{\"id\":\"theirs-1\"} {\"id\":\"theirs-2\"}"), "RPUSH other");
	rc |= cmd_ok(c, redisCommand(c, "RPUSH ferry:{elsewhere}:ready "
	    "{\"id\":\"elsewhere-1\"}"), "RPUSH elsewhere");
	return rc;
}

/* Expected DUMP-free view of each key: its value as one string. */
static int
foreign_view(redisContext *c, const char *key, struct chaos_buf *out)
{
	redisReply *t = redisCommand(c, "TYPE %s", key);
	if (t == NULL)
		return -1;
	chaos_buf_printf(out, "%s:", t->type == REDIS_REPLY_STATUS ? t->str : "?");
	const char *cmd = NULL;
	if (t->type == REDIS_REPLY_STATUS) {
		if (strcmp(t->str, "string") == 0)
			cmd = "GET";
		else if (strcmp(t->str, "hash") == 0)
			cmd = "HGETALL";
		else if (strcmp(t->str, "list") == 0)
			cmd = "LRANGE";
	}
	freeReplyObject(t);
	if (cmd != NULL) {
		redisReply *r = strcmp(cmd, "LRANGE") == 0 ?
		    redisCommand(c, "LRANGE %s 0 -1", key) :
		    redisCommand(c, "%s %s", cmd, key);
		if (r == NULL)
			return -1;
		if (r->type == REDIS_REPLY_STRING)
			chaos_buf_add(out, r->str, r->len);
		for (size_t i = 0; r->type == REDIS_REPLY_ARRAY && i < r->elements;
		    i++) {
			chaos_buf_add(out, r->element[i]->str, r->element[i]->len);
			chaos_buf_add(out, "|", 1);
		}
		freeReplyObject(r);
	}
	redisReply *ttl = redisCommand(c, "PTTL %s", key);
	if (ttl == NULL)
		return -1;
	chaos_buf_printf(out, " ttl:%s", ttl->integer > 0 ? "yes" :
	    ttl->integer == -1 ? "none" : "gone");
	freeReplyObject(ttl);
	return 0;
}

int
chaos_foreign_check(redisContext *c)
{
	static const char *const want[] = {
		"string:user=42;token=abc ttl:yes",
		"hash:item|sku-1|qty|3| ttl:none",
		"list:a|b|c| ttl:none",
		"list:{\"id\":\"theirs-1\"}|{\"id\":\"theirs-2\"}| ttl:none",
		"list:{\"id\":\"elsewhere-1\"}| ttl:none",
	};
	int changed = 0;
	for (int i = 0; chaos_foreign_keys[i] != NULL; i++) {
		struct chaos_buf v = { 0 };
		int ok = foreign_view(c, chaos_foreign_keys[i], &v) == 0;
		/* a key with a TTL: volatile-lru may evict it (the churn uses it
		 * to make that rare; a PERSIST would still show) */
		if (ok && i == 0 && strcmp(v.p, "none: ttl:gone") == 0)
			printf("foreign key %s evicted by Redis (it has a TTL)\n",
			    chaos_foreign_keys[i]);
		else if (!ok || strcmp(v.p, want[i]) != 0) {
			printf("foreign key %s changed: now %s, was %s\n",
			    chaos_foreign_keys[i], v.p ? v.p : "(unreadable)",
			    want[i]);
			changed++;
		}
		chaos_buf_free(&v);
	}
	return changed;
}

static int
foreign_main(int argc, char **argv)
{
	redisContext *c = chaos_redis_arg(argc, argv, 5000);
	if (c == NULL)
		chaos_die("foreign: cannot connect to redis");
	int rc = chaos_foreign_create(c);
	if (rc == 0 && chaos_arg(argc, argv, "sentinels", NULL) != NULL) {
		/* on both replicas before any failover */
		redisReply *r = redisCommand(c, "WAIT 2 10000");
		if (r == NULL || r->type != REDIS_REPLY_INTEGER || r->integer < 2)
			rc = -1;
		if (r != NULL)
			freeReplyObject(r);
	}
	redisFree(c);
	return rc == 0 ? 0 : 1;
}

int
main(int argc, char **argv)
{
	static const struct {
		const char *name;
		int (*fn)(int, char **);
	} cmds[] = {
		{ "servers", chaos_servers_main },
		{ "plan", chaos_plan_main },
		{ "produce", chaos_produce_main },
		{ "produce-cache", chaos_produce_cache_main },
		{ "foreign", foreign_main },
		{ "churn", chaos_churn_main },
		{ "check", chaos_check_main },
		{ "check-modes", chaos_modes_check_main },
		{ "wait", chaos_wait_main },
		{ "handle", chaos_handle_main },
		{ "watch", chaos_watch_main },
	};
	setvbuf(stdout, NULL, _IOLBF, 0);
	for (size_t i = 0; argc > 1 && i < sizeof(cmds) / sizeof(cmds[0]); i++)
		if (strcmp(argv[1], cmds[i].name) == 0)
			return cmds[i].fn(argc - 1, argv + 1);
	fprintf(stderr, "usage: chaos_helper servers|plan|produce|produce-cache|"
	    "foreign|churn|check|check-modes|wait|handle|watch ARGS (see tests/chaos/chaos.h)\n");
	return 2;
}
