#!lua flags=allow-oom
-- reap.lua - find processing lists whose master is dead (a dead host: its
-- entry in the masters hash is missing, or its deadline has passed) and
-- hand them back, bumping recoveries; sweep the lists of workers already
-- handed back, then forget them after TOMBSTONE_MS; remove the entries of
-- dead masters once their lists are handed back.
-- KEYS: owners, requeue, dead, stats, bkeys, the queue's clock hash,
--       the queue's masters hash (both heartbeat.lua)
-- ARGV: key prefix ("ferry"), queue name, max_recoveries, heartbeat_ttl ms,
--       the calling master's id
-- Returns {jobs handed back, jobs dead, ms the reaper still waits}.
-- The processing lists are derived here; they carry the queue's hash tag
-- like KEYS, so in a cluster they are on this node.
--
-- The calling master never takes its own workers for dead: it is alive,
-- since it runs this, and it hands back the lists of its own workers that
-- die itself (at once, from their exit). Its entry may look dead all the
-- same: removed by hand, or its beat lost or late.
--
-- Liveness is judged in Redis' service time, never by a host's clock. A
-- deadline passes by Redis' clock even while Redis serves nobody: a script
-- or DEBUG SLEEP that blocks Redis past heartbeat_ttl passes every
-- master's deadline, and once Redis is free this script may run before a
-- live master's queued beat does; taking that master for dead would hand
-- back batches its workers are still running (jobs run twice). So no
-- master is taken for dead while the clock shows a gap no heartbeat has
-- seen yet (over half a heartbeat_ttl since the last beat of any master:
-- live masters beat every third of one), nor for one heartbeat_ttl after a
-- gap ended: long enough for every live master's next beat, whose timer
-- kept running while Redis was blocked, or which follows its
-- reconnection. A master really dead is then reaped within heartbeat_ttl
-- + reaper_interval after a gap ends (a gap longer than its ttl passed its
-- deadline already), or heartbeat_ttl + reaper_interval after its death
-- without one. Workers already handed back are swept whatever the clock
-- says.
local TOMBSTONE_MS = 30000
local owners = redis.call('HGETALL', KEYS[1])
local back, buried, now = 0, 0, now_ms()
local ttl, wait, self = tonumber(ARGV[4]), 0, ARGV[5]
local last, resumed = nil, 0
if redis.call('TYPE', KEYS[6]).ok == 'hash' then
	last = tonumber(redis.call('HGET', KEYS[6], 'last'))
	resumed = tonumber(redis.call('HGET', KEYS[6], 'resumed')) or 0
end
if last == nil or now < last or now - last > ttl / 2 then
	wait = ttl              -- a gap that no heartbeat has seen yet
elseif now - resumed < ttl then
	wait = ttl - (now - resumed)
end
-- master id -> deadline (0 when the entry is malformed: dead)
local deadline = {}
if redis.call('TYPE', KEYS[7]).ok == 'hash' then
	local m = redis.call('HGETALL', KEYS[7])
	for i = 1, #m, 2 do
		deadline[m[i]] = tonumber(string.match(m[i + 1], '^%S+ (%d+)$')) or 0
	end
end
-- masters whose lists this run leaves in place
local holds = {}
for i = 1, #owners, 2 do
	local wid, mid = owners[i], owners[i + 1]
	local proc = ARGV[1] .. ':{' .. ARGV[2] .. '}:proc:' .. wid
	local r = { 0, 0 }
	if string.sub(mid, 1, 5) == 'dead:' then
		-- a worker already handed back: anything in its list arrived
		-- after its death, unprocessed (no recovery counted)
		if redis.call('EXISTS', proc) == 1 then
			r = reclaim(proc, KEYS[2], KEYS[3], KEYS[4], KEYS[1], KEYS[5],
				wid, tonumber(ARGV[3]) or 0, false, false)
		elseif now - (tonumber(string.sub(mid, 6)) or 0) > TOMBSTONE_MS then
			redis.call('HDEL', KEYS[1], wid)
		end
	elseif wait == 0 and mid ~= self and (deadline[mid] or 0) <= now then
		r = reclaim(proc, KEYS[2], KEYS[3], KEYS[4], KEYS[1], KEYS[5],
			wid, tonumber(ARGV[3]) or 0, true, true)
	else
		holds[mid] = true
	end
	back, buried = back + r[1], buried + r[2]
end
-- A dead master's entry goes once its lists are handed back and a whole
-- heartbeat_ttl after its deadline (it counts as absent already; this
-- only bounds the hash by the masters that died lately).
if wait == 0 then
	for mid, d in pairs(deadline) do
		if mid ~= self and not holds[mid] and now - d > ttl then
			redis.call('HDEL', KEYS[7], mid)
		end
	end
end
return { back, buried, wait }
