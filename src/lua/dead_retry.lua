#!lua flags=allow-oom
-- dead_retry.lua - replay one dead-letter entry: remove exactly that entry
-- (searched from the oldest end, where `retry --all` starts) and push the
-- original document to ready with fresh counters.
-- KEYS: dead, ready, stats   ARGV: entry bytes, original document
if redis.call('LREM', KEYS[1], -1, ARGV[1]) == 0 then return 0 end
redis.call('LPUSH', KEYS[2], ARGV[2])
redis.call('HINCRBY', KEYS[3], 'replayed', 1)
return 1
