#!lua flags=allow-oom
-- fetch.lua - move up to N jobs from the right end of ready into this
-- worker's processing list, in one atomic step. A recovered job (one whose
-- worker died holding it) is fetched alone, so a poison job cannot take
-- innocent batch-mates down with it.
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
for i = 1, n do
	local el = redis.call('RPOP', KEYS[1])
	if not el then break end
	if recovered(el) and (i > 1 or held > 0) then
		redis.call('RPUSH', KEYS[1], el)
		break
	end
	redis.call('RPUSH', KEYS[2], el)
	out[i] = el
	if recovered(el) then break end
end
if #out + held > 0 then redis.call('HSET', KEYS[3], ARGV[2], ARGV[3]) end
return out
