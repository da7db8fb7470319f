#!lua flags=allow-oom
-- register.lua - a worker records its master before it fetches, so a dead
-- host's reaper can find the worker's processing list.
-- KEYS: owners   ARGV: worker id, master id
-- A worker already handed back as dead may not come back (a frozen host
-- waking up): it gets HANDEDBACK and exits.
local v = redis.call('HGET', KEYS[1], ARGV[1])
if v and string.sub(v, 1, 5) == 'dead:' then
	return ferry_error('HANDEDBACK', 'worker ' .. ARGV[1] .. ' is not registered: it was handed back as dead')
end
return redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
