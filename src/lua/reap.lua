#!lua flags=allow-oom
-- reap.lua - find processing lists whose master's heartbeat key is gone
-- (a dead host) and hand them back, bumping recoveries.
-- KEYS: owners, ready, dead, stats, bkeys
-- ARGV: key prefix ("ferry"), queue name, max_recoveries
-- The processing and heartbeat keys are derived here, so this script
-- assumes a single Redis (not Cluster) like the rest of the master.
local owners = redis.call('HGETALL', KEYS[1])
local back, buried = 0, 0
for i = 1, #owners, 2 do
	local wid, mid = owners[i], owners[i + 1]
	if redis.call('EXISTS', ARGV[1] .. ':master:' .. mid) == 0 then
		local proc = ARGV[1] .. ':{' .. ARGV[2] .. '}:proc:' .. wid
		local r = reclaim(proc, KEYS[2], KEYS[3], KEYS[4], KEYS[1], KEYS[5],
			wid, tonumber(ARGV[3]), true)
		back, buried = back + r[1], buried + r[2]
	end
end
return { back, buried }
