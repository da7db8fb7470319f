#!lua flags=allow-oom
-- heartbeat.lua - a master's heartbeat key (SET with PX). A plain SET is
-- refused when Redis is at maxmemory (noeviction); then the reaper would
-- take this master's own workers for dead and hand their batches back. As
-- a script flagged allow-oom the few bytes of the key always go in.
-- KEYS: heartbeat key   ARGV: value, ttl ms
return redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
