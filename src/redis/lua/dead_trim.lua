#!lua flags=allow-oom
-- dead_trim.lua - remove the n oldest dead-letter entries (the right end)
-- once a worker has archived them, but only if they are still exactly the
-- entries it archived: SHA-1 of each entry as "<length>:<bytes>", oldest
-- last, as LRANGE gives them. Releases the cache keys archived with them
-- (release_keys, common.lua: each is deleted with the last job naming it).
-- On a queue that keeps ids, their ids are forgotten a window from now.
-- KEYS: dead, protected   ARGV: n, sha1, then the cache keys
-- Returns the entries removed: n, or 0 when the tail changed meanwhile.
local n = tonumber(ARGV[1])
local tail = redis.call('LRANGE', KEYS[1], -n, -1)
if #tail ~= n then return 0 end
local parts = {}
for i, e in ipairs(tail) do parts[i] = #e .. ':' .. e end
if redis.sha1hex(table.concat(parts)) ~= ARGV[2] then return 0 end
redis.call('LTRIM', KEYS[1], 0, -n - 1)
local keys = {}
for i = 3, #ARGV do keys[#keys + 1] = ARGV[i] end
release_keys(KEYS[2], keys)
local ids = {}
for _, e in ipairs(tail) do
	local d = parse_dead(e)
	if d then ids[#ids + 1] = dead_ref(d) end
end
ids_mark(string.sub(KEYS[2], 1, -10), ids, IDS_GONE)
return n
