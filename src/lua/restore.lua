#!lua
-- restore.lua - put a chunk of archived dead-letter jobs back (ferryctl dead
-- restore): each job's cache key is created from the archived data unless
-- it exists (newer data is left alone), then the job goes to ready with
-- fresh counters. One atomic step per chunk. No allow-oom: at maxmemory
-- Redis refuses it before it starts, and nothing is half done.
-- KEYS: ready, stats, then the cache keys the entries name
-- ARGV: per job: document, the batch it was in ("" for none: one is
--       stamped on the job so that the sink fences it), index of its cache
--       key in KEYS (0: none), kind (string|hash|list), value count, values
--       (hash: field, value, ...)
-- Returns {jobs pushed, cache keys created, cache keys already there}.
local pushed, made, kept = 0, 0, 0
local i = 1
while i <= #ARGV do
	local job, batch, k, kind, n = ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2]),
		ARGV[i + 3], tonumber(ARGV[i + 4])
	local from = i + 5
	if k > 0 then
		local key = KEYS[k]
		if redis.call('EXISTS', key) == 1 then
			kept = kept + 1
		elseif kind == 'string' then
			redis.call('SET', key, ARGV[from])
			made = made + 1
		else
			local cmd = kind == 'hash' and 'HSET' or 'RPUSH'
			-- unpack() is limited to a few thousand values
			for at = from, from + n - 1, 1000 do
				redis.call(cmd, key, unpack(ARGV, at,
					math.min(at + 999, from + n - 1)))
			end
			made = made + 1
		end
	end
	if batch ~= '' then
		job = wrap({ recoveries = 0, attempts = 0, batch = batch }, job)
	end
	redis.call('LPUSH', KEYS[1], job)
	pushed = pushed + 1
	i = from + n
end
redis.call('HINCRBY', KEYS[2], 'replayed', pushed)
return { pushed, made, kept }
