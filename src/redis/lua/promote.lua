#!lua flags=allow-oom
-- promote.lua - move what has come due (Redis clock) out of the two zsets:
-- ferry's retries from delayed to the left end of requeue (ferry's own
-- list), and producers' delayed documents from scheduled to the left end
-- of ready, as a producer's LPUSH would put them. The two never mix:
-- delayed holds ferry's wrappers, scheduled producers' documents, each
-- member "<us>-<n>:<document>" (enqueue.lua: the prefix makes identical
-- documents distinct members); the prefix is stripped, the document goes
-- on byte for byte. A member without the prefix (ZADDed by hand) goes on
-- as it is: it is a document like any other. One script, so a promoter
-- that dies mid-way loses or doubles nothing; bounded per call.
-- A scheduled key of another type (a producer's mistake) is left alone so
-- that the retries still move.
-- KEYS: delayed, requeue, scheduled, ready   ARGV: at most this many of each
-- Returns the number of retries plus documents moved.
local limit = tonumber(ARGV[1]) or 100
local now = now_ms()
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, limit)
for _, el in ipairs(due) do
	redis.call('LPUSH', KEYS[2], el)
	redis.call('ZREM', KEYS[1], el)
end
local moved = #due
if KEYS[3] and redis.call('TYPE', KEYS[3]).ok == 'zset' and (redis.call('TYPE', KEYS[4]).ok == 'list' or redis.call('TYPE', KEYS[4]).ok == 'none') then
	local docs = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now, 'LIMIT', 0, limit)
	for _, m in ipairs(docs) do
		local cut = string.match(m, '^%d+%-%d+:()')
		redis.call('LPUSH', KEYS[4], cut and string.sub(m, cut) or m)
		redis.call('ZREM', KEYS[3], m)
	end
	moved = moved + #docs
end
return moved
