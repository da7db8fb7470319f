#!lua flags=allow-oom
-- fetch.lua - move up to N jobs from the right end of ready into this
-- worker's processing list, in one atomic step. A recovered job (one whose
-- worker died holding it) is fetched alone, so a poison job cannot take
-- innocent batch-mates down with it. One RPOP and one RPUSH per batch: a
-- command per job made this script most of Redis' work.
-- KEYS: ready, proc, bkeys, owners
-- ARGV: n, worker id, batch key, held, master id
-- (held: jobs already in the processing list, moved there by BLMOVE)
-- A worker the master has already handed back (owners holds its
-- tombstone, or another master) gets an error: it must exit.
-- allow-oom: it only moves data, so the queue drains at maxmemory.
if redis.call('HGET', KEYS[4], ARGV[2]) ~= ARGV[5] then
	return redis.error_reply('ERR ferry: worker ' .. ARGV[2] ..
		' is not registered: it was handed back as dead')
end
local n = tonumber(ARGV[1])
local held = tonumber(ARGV[4])
local out = {}
local first = n > 0 and redis.call('LINDEX', KEYS[1], -1)
if first and recovered(first) then
	if held == 0 then out[1] = redis.call('RPOP', KEYS[1]) end
elseif first then
	-- one RPOP for the batch; a recovered job in it and those after it
	-- go back to the right end, in their order
	local got = redis.call('RPOP', KEYS[1], n)
	for i, el in ipairs(got) do
		if recovered(el) then
			for k = #got, i, -1 do redis.call('RPUSH', KEYS[1], got[k]) end
			break
		end
		out[i] = el
	end
end
for i = 1, #out, 1000 do     -- unpack() is limited to a few thousand values
	redis.call('RPUSH', KEYS[2], unpack(out, i, math.min(i + 999, #out)))
end
if #out + held > 0 then redis.call('HSET', KEYS[3], ARGV[2], ARGV[3]) end
return out
