#!lua flags=allow-oom
-- reap.lua - find processing lists whose master's heartbeat key is gone
-- (a dead host) and hand them back, bumping recoveries; sweep the lists of
-- workers already handed back, then forget them after TOMBSTONE_MS.
-- KEYS: owners, requeue, dead, stats, bkeys
-- ARGV: key prefix ("ferry"), queue name, max_recoveries
-- The processing and heartbeat keys are derived here, so this script
-- assumes a single Redis (not Cluster) like the rest of the master.
local TOMBSTONE_MS = 30000
local owners = redis.call('HGETALL', KEYS[1])
local back, buried, now = 0, 0, now_ms()
for i = 1, #owners, 2 do
	local wid, mid = owners[i], owners[i + 1]
	local proc = ARGV[1] .. ':{' .. ARGV[2] .. '}:proc:' .. wid
	local r = { 0, 0 }
	if string.sub(mid, 1, 5) == 'dead:' then
		-- a worker already handed back: anything in its list arrived
		-- after its death, unprocessed (no recovery counted)
		if redis.call('EXISTS', proc) == 1 then
			r = reclaim(proc, KEYS[2], KEYS[3], KEYS[4], KEYS[1], KEYS[5],
				wid, tonumber(ARGV[3]) or 0, false)
		elseif now - (tonumber(string.sub(mid, 6)) or 0) > TOMBSTONE_MS then
			redis.call('HDEL', KEYS[1], wid)
		end
	elseif redis.call('EXISTS', ARGV[1] .. ':master:' .. mid) == 0 then
		r = reclaim(proc, KEYS[2], KEYS[3], KEYS[4], KEYS[1], KEYS[5],
			wid, tonumber(ARGV[3]) or 0, true)
	end
	back, buried = back + r[1], buried + r[2]
end
return { back, buried }
