#!lua flags=allow-oom
-- dead_retry.lua - replay one dead-letter entry: remove exactly that entry
-- (searched from the oldest end, where `retry --all` starts) and push the
-- original document to ready with fresh counters. An entry that names the
-- batch its job was in goes back stamped with it, so the sink fences that
-- batch before writing the job.
-- KEYS: dead, ready, stats   ARGV: entry bytes, original document
if redis.call('LREM', KEYS[1], -1, ARGV[1]) == 0 then return 0 end
local el = ARGV[2]
local ok, entry = pcall(cjson.decode, ARGV[1])
if ok and type(entry) == 'table' and type(entry.batch) == 'string' then
	el = wrap({ recoveries = 0, attempts = 0, batch = entry.batch }, el)
end
redis.call('LPUSH', KEYS[2], el)
redis.call('HINCRBY', KEYS[3], 'replayed', 1)
return 1
