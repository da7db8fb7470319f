/* test_memory_check.c - reading INFO and CONFIG GET replies, and the
 * verdicts on eviction policy, persistence and fullness; and that the
 * embedded scripts are where their enum says. */
#include <criterion/criterion.h>
#include <string.h>

#include "lua_scripts.h"
#include "memory_check.h"

#define INFO_NOEVICT \
	"# Memory\r\nused_memory:1048576\r\nused_memory_human:1.00M\r\n" \
	"used_memory_rss:2000000\r\nmaxmemory:2097152\r\n" \
	"maxmemory_human:2.00M\r\nmaxmemory_policy:noeviction\r\n" \
	"# Persistence\r\nloading:0\r\nrdb_last_bgsave_status:ok\r\n" \
	"aof_enabled:0\r\naof_last_write_status:ok\r\n"

static redisReply *
config_reply(const char *name, const char *value)
{
	static redisReply el[2], *els[2] = { &el[0], &el[1] };
	static redisReply r;

	el[0] = (redisReply){ .type = REDIS_REPLY_STRING, .str = (char *)name,
	    .len = strlen(name) };
	el[1] = (redisReply){ .type = REDIS_REPLY_STRING, .str = (char *)value,
	    .len = strlen(value) };
	r = (redisReply){ .type = REDIS_REPLY_ARRAY, .elements = 2,
	    .element = els };
	return &r;
}

Test(memory_check, parse_info)
{
	struct redis_memory m;

	memory_init(&m);
	cr_assert_eq(m.aof, -1);
	cr_assert_eq(m.save, -1);
	cr_assert_eq(memory_percent(&m), -1);
	memory_parse_info(&m, INFO_NOEVICT);
	cr_assert_eq(m.used, 1048576);
	cr_assert_eq(m.max, 2097152);
	cr_assert_str_eq(m.policy, "noeviction");
	cr_assert_eq(m.aof, 0);
	cr_assert(!m.rdb_failed && !m.aof_failed);
	cr_assert_eq(memory_percent(&m), 50);
	memory_init(&m);
	memory_parse_info(&m, "used_memory:1\nmaxmemory:0\n"
	    "rdb_last_bgsave_status:err\naof_enabled:1\n"
	    "aof_last_write_status:err\n");
	cr_assert_eq(memory_percent(&m), -1);
	cr_assert_str_eq(m.policy, "");
	cr_assert(m.rdb_failed && m.aof_failed && m.aof == 1);
}

Test(memory_check, config_wins_over_info_and_errors_fall_back)
{
	struct redis_memory m;
	redisReply err = { .type = REDIS_REPLY_ERROR,
	    .str = "ERR unknown command 'CONFIG'", .len = 28 };

	memory_init(&m);
	memory_parse_config(&m, config_reply("maxmemory-policy",
	    "volatile-ttl"), true);
	memory_parse_config(&m, config_reply("save", "3600 1"), false);
	memory_parse_info(&m, INFO_NOEVICT);
	cr_assert_str_eq(m.policy, "volatile-ttl");
	cr_assert_eq(m.save, 1);
	cr_assert(!m.config_refused);
	memory_init(&m);
	memory_parse_config(&m, config_reply("save", ""), false);
	cr_assert_eq(m.save, 0);
	memory_init(&m);
	memory_parse_config(&m, &err, true);
	memory_parse_config(&m, &err, false);
	memory_parse_info(&m, INFO_NOEVICT);
	cr_assert(m.config_refused);
	cr_assert_str_eq(m.config_error, "ERR unknown command 'CONFIG'");
	cr_assert_str_eq(m.policy, "noeviction");
	cr_assert_eq(m.save, -1);
}

static enum memory_verdict
eviction(const char *policy, bool allow, char *msg)
{
	struct redis_memory m;

	memory_init(&m);
	snprintf(m.policy, sizeof(m.policy), "%s", policy);
	return memory_judge_eviction(&m, allow, msg, 512);
}

Test(memory_check, eviction_verdicts)
{
	char msg[512];

	cr_assert_eq(eviction("noeviction", false, msg), MEMORY_OK);
	cr_assert_str_eq(msg, "");
	cr_assert_eq(eviction("allkeys-lru", false, msg), MEMORY_REFUSE);
	cr_assert_str_eq(msg, "maxmemory-policy is allkeys-lru: a full Redis "
	    "evicts any key, queue lists included, and their jobs are lost; set "
	    "maxmemory-policy noeviction (or volatile-*), or "
	    "allow_unsafe_eviction = yes to run anyway");
	cr_assert_eq(eviction("allkeys-random", true, msg), MEMORY_WARN);
	cr_assert(strstr(msg, "running anyway: allow_unsafe_eviction = yes"));
	/* no key ferry relies on has a TTL, and cache keys of live jobs are
	 * protected: volatile-* is the setup ferry is made for */
	cr_assert_eq(eviction("volatile-lfu", false, msg), MEMORY_OK);
	cr_assert_str_eq(msg, "");
	cr_assert_eq(eviction("volatile-ttl", true, msg), MEMORY_OK);
	cr_assert_eq(eviction("", false, msg), MEMORY_WARN);
	cr_assert(strstr(msg, "cannot tell the maxmemory-policy"));
}

static enum memory_verdict
persistence(int aof, int save, bool rdb_err, bool require, char *msg)
{
	struct redis_memory m;

	memory_init(&m);
	m.aof = aof;
	m.save = save;
	m.rdb_failed = rdb_err;
	return memory_judge_persistence(&m, require, msg, 512);
}

Test(memory_check, persistence_verdicts)
{
	char msg[512];

	cr_assert_eq(persistence(1, 0, false, true, msg), MEMORY_OK);
	cr_assert_eq(persistence(0, 1, false, true, msg), MEMORY_OK);
	cr_assert_eq(persistence(0, 0, false, false, msg), MEMORY_WARN);
	cr_assert_str_eq(msg, "redis has neither AOF (appendonly no) nor RDB "
	    "snapshots (save \"\"): a restart of Redis loses every queued job; "
	    "set appendonly yes or a save schedule");
	cr_assert_eq(persistence(0, 0, false, true, msg), MEMORY_REFUSE);
	cr_assert(strstr(msg, "(require_persistence = yes)"));
	cr_assert_eq(persistence(0, -1, false, false, msg), MEMORY_WARN);
	cr_assert(strstr(msg, "RDB snapshots cannot be verified"));
	cr_assert_eq(persistence(1, 1, true, false, msg), MEMORY_WARN);
	cr_assert(strstr(msg, "rdb_last_bgsave_status:err"));
	cr_assert_eq(persistence(1, 1, true, true, msg), MEMORY_REFUSE);
}

Test(memory_check, bytes)
{
	char b[32];

	cr_assert_str_eq(memory_fmt_bytes(512, b, sizeof(b)), "512 B");
	cr_assert_str_eq(memory_fmt_bytes(1536, b, sizeof(b)), "1.5 KiB");
	cr_assert_str_eq(memory_fmt_bytes(20971520, b, sizeof(b)), "20.0 MiB");
}

/* The enum in lua_scripts.h follows lua_names in Makefile.am: a script
 * added in one place only would run under another script's name. */
Test(lua_scripts, names_follow_the_enum)
{
	static const char *const want[LUA_SCRIPT_COUNT] = {
		[LUA_FETCH] = "fetch", [LUA_SETTLE] = "settle",
		[LUA_RECLAIM] = "reclaim", [LUA_REAP] = "reap",
		[LUA_PROMOTE] = "promote", [LUA_REGISTER] = "register",
		[LUA_DEAD_RETRY] = "dead_retry", [LUA_DEAD_TRIM] = "dead_trim",
		[LUA_HEARTBEAT] = "heartbeat", [LUA_RESTORE] = "restore",
		[LUA_ENQUEUE] = "enqueue", [LUA_DEAD_PAGE] = "dead_page",
		[LUA_DEAD_PURGE] = "dead_purge", [LUA_SWEEP] = "sweep",
		[LUA_MEMORY] = "memory", [LUA_IDS] = "ids",
		[LUA_DEAD_MOVE] = "dead_move",
	};

	for (int i = 0; i < LUA_SCRIPT_COUNT; i++) {
		cr_assert_not_null(want[i], "enum %d has no name here", i);
		cr_assert_str_eq(lua_script_name[i], want[i]);
		cr_assert(strstr(lua_script_source[i], "#!lua") ==
		    lua_script_source[i]);
	}
}

/* What Redis cannot evict. INFO of a Redis at maxmemory 100 MB under
 * volatile-lru: 90 MB used, 80 MB of it data, 10,000 keys of which 9,000
 * have a TTL; the queue holds 20 MB in 990 keys (10 lists and 980
 * protected cache keys). The other 9,010 keys share the other 60 MB by
 * count: the 9,000 with a TTL about 59.9 MB, plus 64 bytes of table
 * entries each; Redis cannot evict the rest. */
static const char info_volatile[] =
    "# Memory\r\nused_memory:90000000\r\nused_memory_human:85.83M\r\n"
    "used_memory_dataset:80000000\r\nmaxmemory:100000000\r\n"
    "maxmemory_policy:volatile-lru\r\n\r\n# Keyspace\r\n"
    "db0:keys=9000,expires=8500,avg_ttl=1000\r\n"
    "db1:keys=1000,expires=500,avg_ttl=0\r\n";

Test(memory_check, unevictable)
{
	struct redis_memory m;
	long long u;

	memory_init(&m);
	memory_parse_info(&m, info_volatile);
	cr_assert_eq(m.keys, 10000);
	cr_assert_eq(m.volatile_keys, 9000);
	cr_assert_eq(m.dataset, 80000000);
	cr_assert_str_eq(m.policy, "volatile-lru");
	/* 60,000,000 * 9000 / 9010 = 59,933,407.3 -> 59,933,407; + 576,000 */
	u = memory_unevictable(&m, 20000000, 990);
	cr_assert_eq(u, 90000000LL - 59933407 - 576000, "%lld", u);
	cr_assert_eq(memory_unevictable_percent(&m, u), 29);
	/* the queue empty: nine keys in ten have a TTL, so 90% of the data */
	cr_assert_eq(memory_unevictable(&m, 0, 0), 90000000LL - 72000000 -
	    576000);
	/* a queue that holds nearly all the data leaves little to evict */
	u = memory_unevictable(&m, 79000000, 1000);
	cr_assert_eq(u, 90000000LL - 1000000 - 576000, "%lld", u);
	cr_assert_eq(memory_unevictable_percent(&m, u), 88);
	/* noeviction, allkeys-*, no maxmemory: all of used_memory */
	snprintf(m.policy, sizeof(m.policy), "noeviction");
	cr_assert_eq(memory_unevictable(&m, 0, 0), 90000000);
	snprintf(m.policy, sizeof(m.policy), "volatile-ttl");
	m.max = 0;
	cr_assert_eq(memory_unevictable(&m, 0, 0), 90000000);
	cr_assert_eq(memory_unevictable_percent(&m, 1), -1);
	/* no key with a TTL: nothing to evict; more than used: none left */
	m.max = 100000000;
	m.volatile_keys = 0;
	cr_assert_eq(memory_unevictable(&m, 0, 0), 90000000);
	m.volatile_keys = m.keys = 2000000;
	cr_assert_eq(memory_unevictable(&m, 0, 0), 0);
}

/* Up at once, down only 5 points below the mark it leaves. */
Test(memory_check, marks_have_hysteresis)
{
	enum memory_mark m = MEMORY_BELOW_WARN;
	const struct { int pct; enum memory_mark want; } steps[] = {
		{ 79, MEMORY_BELOW_WARN }, { 80, MEMORY_ABOVE_WARN },
		{ 79, MEMORY_ABOVE_WARN }, { 75, MEMORY_ABOVE_WARN },
		{ 74, MEMORY_BELOW_WARN }, { 95, MEMORY_ABOVE_REFUSE },
		{ 86, MEMORY_ABOVE_REFUSE }, { 85, MEMORY_ABOVE_REFUSE },
		{ 84, MEMORY_ABOVE_WARN }, { 90, MEMORY_ABOVE_REFUSE },
		{ 10, MEMORY_BELOW_WARN }, { -1, MEMORY_BELOW_WARN },
	};
	for (size_t i = 0; i < sizeof(steps) / sizeof(*steps); i++) {
		m = memory_mark(steps[i].pct, 80, 90, m);
		cr_assert_eq(m, steps[i].want, "step %zu: %d%% -> %d", i,
		    steps[i].pct, m);
	}
	/* warn = refuse: one mark */
	cr_assert_eq(memory_mark(90, 90, 90, MEMORY_BELOW_WARN),
	    MEMORY_ABOVE_REFUSE);
	cr_assert_eq(memory_mark(86, 90, 90, MEMORY_ABOVE_REFUSE),
	    MEMORY_ABOVE_REFUSE);
	cr_assert_eq(memory_mark(84, 90, 90, MEMORY_ABOVE_REFUSE),
	    MEMORY_BELOW_WARN);
}
