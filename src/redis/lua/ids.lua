#!lua flags=allow-oom
-- ids.lua - the master's step for a queue's idempotency (master_ids.c):
-- publishes its idempotency_window in the queue's config hash, where the
-- enqueue script reads it (HDEL at 0: the queue takes every job), and
-- forgets the ids of jobs done or purged longer ago than the window (their
-- score in ids is the Redis time to forget them at, negated for a purged
-- dead job: ids_mark, common.lua; a live one's is in [0, 1)),
-- at most ARGV[2] a call, so that Redis is held a bounded time; the master
-- calls again at once while a call forgot that many.
-- KEYS: config, ids
-- ARGV: idempotency_window ms (0: off), how many ids to forget at most
-- Returns how many ids were forgotten.
-- allow-oom: it only deletes (and writes one number).
local window, limit = tonumber(ARGV[1]), tonumber(ARGV[2])
if not window or window < 0 or not limit or limit < 1 then
	return ferry_error('BADARGS', 'ids: ARGV is idempotency_window ms and a count')
end
local published = redis.call('HGET', KEYS[1], 'idempotency_window')
if window == 0 and published then
	redis.call('HDEL', KEYS[1], 'idempotency_window')
elseif window > 0 and published ~= tostring(window) then
	redis.call('HSET', KEYS[1], 'idempotency_window', window)
end
local now = now_ms()
local old = redis.call('ZRANGEBYSCORE', KEYS[2], 1, now, 'LIMIT', 0, limit)
if #old < limit then
	-- purged from the dead list: minus the time to forget them at
	local gone = redis.call('ZRANGEBYSCORE', KEYS[2], -now, '(-1', 'LIMIT', 0, limit - #old)
	for _, id in ipairs(gone) do old[#old + 1] = id end
end
call_chunked('ZREM', KEYS[2], old, 1000)
return #old
