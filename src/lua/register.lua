#!lua flags=allow-oom
-- register.lua - a worker records its master before it fetches, so a dead
-- host's reaper can find the worker's processing list.
-- KEYS: owners   ARGV: worker id, master id
return redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
