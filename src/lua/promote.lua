#!lua flags=allow-oom
-- promote.lua - move retries whose time has come (Redis clock) from delayed
-- to the left end of ready: they queue up behind the waiting jobs.
-- KEYS: delayed, ready   ARGV: at most this many
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now_ms(), 'LIMIT', 0,
	tonumber(ARGV[1]))
for _, el in ipairs(due) do
	redis.call('LPUSH', KEYS[2], el)
	redis.call('ZREM', KEYS[1], el)
end
return #due
