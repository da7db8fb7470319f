#!lua flags=allow-oom
-- heartbeat.lua - a master's heartbeat key, and the service clock that the
-- reaper reads (reap.lua).
-- The key holds a token unique to this start of the master (pid and a
-- random part): a key that holds another token means another live ferryd
-- runs under the same master id (they would share processing lists), so
-- this master is refused, at its first beat as at any later one.
-- The clock hash records the Redis time of the last heartbeat of any
-- master ('last') and the end of the latest gap ('resumed'): a beat that
-- finds no heartbeat for over half a heartbeat_ttl (every live master
-- beats every third of one) sees a gap in Redis' service (a long script
-- or DEBUG SLEEP, Redis stopped or restarted, its clock stepped), in which
-- no master could beat.
-- A plain SET is refused when Redis is at maxmemory (noeviction); then the
-- reaper would take this master's own workers for dead and hand their
-- batches back. As a script flagged allow-oom the few bytes always go in.
-- KEYS: heartbeat key, clock hash
-- ARGV: token, ttl ms ("0": the master stops: delete the key if it is
--       still ours)
-- Returns the gap found in ms (0: none), or an error "IDTAKEN ..." naming
-- the token that holds the key.
local held = redis.call('GET', KEYS[1])
if held and held ~= ARGV[1] then
	return redis.error_reply('IDTAKEN ' .. KEYS[1] .. ' holds ' ..
		string.sub(held, 1, 64) .. ', not ' .. ARGV[1])
end
local ttl = tonumber(ARGV[2])
if ttl == 0 then
	if held then redis.call('DEL', KEYS[1]) end
	return 0
end
local now, gap = now_ms(), 0
local ctype = redis.call('TYPE', KEYS[2]).ok
if ctype ~= 'hash' and ctype ~= 'none' then redis.call('DEL', KEYS[2]) end
local last = tonumber(redis.call('HGET', KEYS[2], 'last'))
if last == nil or now < last or now - last > ttl / 2 then
	-- no clock yet (a new or emptied Redis) counts as a gap, unreported
	if last ~= nil then gap = math.max(now - last, 1) end
	redis.call('HSET', KEYS[2], 'resumed', now)
end
redis.call('HSET', KEYS[2], 'last', now)
redis.call('SET', KEYS[1], ARGV[1], 'PX', ttl)
return gap
