#!lua flags=allow-oom
-- heartbeat.lua - a master's entry in the queue's masters hash, and the
-- service clock that the reaper reads (reap.lua).
-- The masters hash maps each master id to "TOKEN DEADLINE": a token unique
-- to this start of the master (pid and a random part) and the Redis time
-- (ms) until which the master counts as alive. The hash has no TTL: a
-- volatile-* maxmemory-policy evicts only keys with one, and an evicted
-- heartbeat would make the reapers take a live master's workers for dead.
-- An entry whose deadline has passed counts as absent; the reaper removes
-- it once the master's lists are handed back.
-- An entry that holds another token with a deadline still ahead means
-- another live ferryd runs under the same master id (they would share
-- processing lists), so this master is refused, at its first beat as at
-- any later one.
-- The clock hash records the Redis time of the last heartbeat of any
-- master ('last') and the end of the latest gap ('resumed'): a beat that
-- finds no heartbeat for over half a heartbeat_ttl (every live master
-- beats every third of one) sees a gap in Redis' service (a long script
-- or DEBUG SLEEP, Redis stopped or restarted, its clock stepped), in which
-- no master could beat.
-- A plain HSET is refused when Redis is at maxmemory (noeviction); then the
-- reaper would take this master's own workers for dead and hand their
-- batches back. As a script flagged allow-oom the few bytes always go in.
-- KEYS: masters hash, clock hash
-- ARGV: master id, token, ttl ms ("0": the master stops: delete its entry
--       if it is still ours)
-- Returns the gap found in ms (0: none; -1: no clock at all, a new or
-- emptied Redis: the master that had beaten here before knows that
-- ferry's keys were lost), or an error "IDTAKEN ..." naming the token that
-- holds the entry.
local now, gap = now_ms(), 0
local mtype = redis.call('TYPE', KEYS[1]).ok
local held, deadline = nil, nil
if mtype == 'hash' then
	local v = redis.call('HGET', KEYS[1], ARGV[1])
	held, deadline = string.match(v or '', '^(%S+) (%d+)$')
	deadline = tonumber(deadline)
end
if held and held ~= ARGV[2] and deadline > now then
	return redis.error_reply('IDTAKEN ' .. KEYS[1] .. ' entry ' .. ARGV[1] ..
		' holds ' .. string.sub(held, 1, 64) .. ', not ' .. ARGV[2])
end
local ttl = tonumber(ARGV[3])
if ttl == 0 then
	if held == ARGV[2] then redis.call('HDEL', KEYS[1], ARGV[1]) end
	return 0
end
-- a key of another type in its place is not ferry's: HSET would fail
if mtype ~= 'hash' and mtype ~= 'none' then redis.call('DEL', KEYS[1]) end
local ctype = redis.call('TYPE', KEYS[2]).ok
if ctype ~= 'hash' and ctype ~= 'none' then redis.call('DEL', KEYS[2]) end
local last = tonumber(redis.call('HGET', KEYS[2], 'last'))
if last == nil or now < last or now - last > ttl / 2 then
	-- no clock yet (a new or emptied Redis) counts as a gap, unreported
	if last ~= nil then gap = math.max(now - last, 1) else gap = -1 end
	redis.call('HSET', KEYS[2], 'resumed', now)
end
redis.call('HSET', KEYS[2], 'last', now)
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2] .. ' ' .. string.format('%d', now + ttl))
return gap
