/* lua_scripts.h - the Redis scripts of src/redis/lua, embedded at build time by
 * scripts/embed-lua (order here = order on its command line). */
#ifndef FERRY_LUA_SCRIPTS_H
#define FERRY_LUA_SCRIPTS_H

enum lua_script {
	LUA_FETCH,
	LUA_SETTLE,
	LUA_RECLAIM,
	LUA_REAP,
	LUA_PROMOTE,
	LUA_REGISTER,
	LUA_DEAD_RETRY,
	LUA_DEAD_TRIM,
	LUA_HEARTBEAT,
	LUA_RESTORE,
	LUA_ENQUEUE,
	LUA_DEAD_PAGE,
	LUA_DEAD_PURGE,
	LUA_SWEEP,
	LUA_MEMORY,
	LUA_IDS,
	LUA_DEAD_MOVE,
	LUA_SCRIPT_COUNT,
};

#define LUA_SCRIPT_NAMES fetch settle reclaim reap promote register dead_retry \
	dead_trim heartbeat restore enqueue dead_page dead_purge sweep memory ids \
	dead_move

/* common.lua as joined into every script: one line */
extern const char lua_common_source[];
extern const char *const lua_script_source[LUA_SCRIPT_COUNT];
extern const char *const lua_script_name[LUA_SCRIPT_COUNT];

#endif
