#!lua flags=allow-oom
-- ids.lua - the master's step for a queue's idempotency (master_ids.c):
-- publishes its idempotency_window in the queue's config hash, where the
-- enqueue script reads it (HDEL at 0: the queue takes every job), and
-- forgets the ids of jobs done or purged longer ago than the window (their
-- score in ids is the Redis time to forget them at, negated for a purged
-- dead job: ids_mark, common.lua; a live one's is in [0, 1)) with their
-- binding in idsha, at most ARGV[2] a call, so that Redis is held a bounded
-- time; the master calls again at once while a call forgot that many.
-- A window turned off leaves the ids held then to resolve: the last window
-- goes into the config hash as ids_linger (ids_keep, common.lua), and once
-- no id is held, ids_linger goes too.
-- KEYS: config, ids, idsha
-- ARGV: idempotency_window ms (0: off), how many ids to forget at most
-- Returns how many ids were forgotten.
-- allow-oom: it only deletes (and writes a number or two).
local window, limit = tonumber(ARGV[1]), tonumber(ARGV[2])
if not window or window < 0 or window ~= math.floor(window) or not limit or limit < 1 or not KEYS[3] then
	return ferry_error('BADARGS', 'ids: KEYS are config, ids and idsha; ARGV is idempotency_window ms and a count')
end
local published = redis.call('HGET', KEYS[1], 'idempotency_window')
if window == 0 and published then
	redis.call('HSET', KEYS[1], 'ids_linger', published)
	redis.call('HDEL', KEYS[1], 'idempotency_window')
elseif window > 0 and published ~= tostring(window) then
	redis.call('HSET', KEYS[1], 'idempotency_window', window)
	redis.call('HDEL', KEYS[1], 'ids_linger')
end
local now = now_ms()
local old = redis.call('ZRANGEBYSCORE', KEYS[2], 1, now, 'LIMIT', 0, limit)
if #old < limit then
	-- purged from the dead list: minus the time to forget them at
	local gone = redis.call('ZRANGEBYSCORE', KEYS[2], -now, '(-1', 'LIMIT', 0, limit - #old)
	for _, id in ipairs(gone) do old[#old + 1] = id end
end
call_chunked('ZREM', KEYS[2], old, 1000)
call_chunked('HDEL', KEYS[3], old, 1000)
-- the marks' member "" goes once no live mark is left beside it: the next
-- call's mark is then above every live score whatever it is
if redis.call('ZCOUNT', KEYS[2], '(0', '(1') == 1 and redis.call('ZSCORE', KEYS[2], '') then
	redis.call('ZREM', KEYS[2], '')
end
if window == 0 and redis.call('EXISTS', KEYS[2]) == 0 then
	redis.call('HDEL', KEYS[1], 'ids_linger')
end
return #old
