#!lua flags=allow-oom
-- promote.lua - move retries whose time has come (Redis clock) from delayed
-- to the left end of requeue (ferry's own list: producers write only ready).
-- KEYS: delayed, requeue   ARGV: at most this many
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now_ms(), 'LIMIT', 0,
	tonumber(ARGV[1]) or 100)
for _, el in ipairs(due) do
	redis.call('LPUSH', KEYS[2], el)
	redis.call('ZREM', KEYS[1], el)
end
return #due
