#!lua flags=no-writes
-- memory.lua - Redis' memory as the producers' refusal judges it
-- (memory_view, common.lua), for the master's checks and metrics and for
-- ferryctl: one queue's own bytes, what Redis cannot evict, and the
-- INFO text it was computed from (src/redis/memory_check.c computes the
-- same from that text: a test holds the two together).
-- KEYS: the queue's ready list (its name gives the queue's other keys,
--       all in its hash slot)
-- ARGV: memory_refuse_percent (0: none)
-- Returns {used, max, policy, keys, volatile, unevictable, own bytes, own
-- keys, evicted_keys (-1: unknown), the INFO memory and keyspace text, the
-- producers' refusal at that percent or "", the protected cache keys'
-- bytes (estimated: protected_bytes_estimate) and count}, or an error
-- "NOINFO why".
local tag = string.gsub(KEYS[1], 'ready$', '')
local m, why = memory_view(tag, true)
if not m then return ferry_error('NOINFO', why) end
local evicted = -1
local stats = redis.pcall('INFO', 'stats')
if type(stats) == 'string' then
	evicted = tonumber(string.match(stats, '[\r\n]evicted_keys:(%d+)')) or -1
end
local _, refusal = memory_refusal(m, tag, tonumber(ARGV[1]) or 0)
local pbytes, pkeys = protected_bytes_estimate(tag .. 'protected')
return { m.used, m.max, m.policy, m.keys, m.volatile, m.unevictable, m.own, m.own_keys, evicted, m.info, refusal or '', pbytes, pkeys }
