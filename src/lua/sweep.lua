#!lua flags=allow-oom
-- sweep.lua - one bounded step of the master's sweep of cache keys
-- (master_sweep.c hands over what one SCAN or HSCAN returned).
-- "orphans": keys of the queue's cache space. A key that no live job
-- names (no entry in protected) and that has no TTL is an orphan: a job
-- removed by hand, a producer that wrote the key and died before its
-- job went in. It gets the cache TTL now, and so goes like any cache
-- entry after it (expired, or evicted first under a volatile-* policy):
-- the fallback TTL of keys ferry writes, as a sweep rather than an expiry
-- on live keys. Counted in stats `orphans`.
-- "audit": fields of protected. A protected key that no longer exists was
-- lost (FLUSHDB, a DEL by hand, an allkeys-* policy set at run time): its
-- count is made negative (marked lost), and counted once in stats
-- `protected_lost`; the jobs that name it are dead "cache key expired or
-- evicted" when they run. A lost key written again is counted again.
-- Both: a protected key found with a TTL (the application set one again)
-- is made persistent again, counted in `reprotected`.
-- KEYS: protected, stats
-- ARGV: mode ("orphans" | "audit"), cache TTL ms, then the keys
-- Returns {orphans, reprotected, lost, the first key found lost or ""}.
-- allow-oom: it only removes TTLs and sets them.
local mode, ttl = ARGV[1], tonumber(ARGV[2])
if (mode ~= 'orphans' and mode ~= 'audit') or not ttl or ttl < 1 then
	return ferry_error('BADARGS', 'sweep: ARGV is "orphans" or "audit", a cache TTL in ms, then keys')
end
local orphans, reprotected, lost, first_lost = 0, 0, 0, ''
for i = 3, #ARGV do
	local key = ARGV[i]
	local pttl = redis.call('PTTL', key)
	local refs, was_lost = protected_entry(KEYS[1], key)
	if refs and pttl >= 0 then
		redis.call('PERSIST', key)
		reprotected = reprotected + 1
	end
	if mode == 'orphans' and not refs and pttl == -1 then
		redis.call('PEXPIRE', key, ttl)
		orphans = orphans + 1
	elseif mode == 'audit' and refs and pttl == -2 and not was_lost then
		redis.call('HSET', KEYS[1], key, -refs)
		lost = lost + 1
		if first_lost == '' then first_lost = key end
	elseif mode == 'audit' and refs and pttl ~= -2 and was_lost then
		redis.call('HSET', KEYS[1], key, refs)
	end
end
if orphans > 0 then redis.call('HINCRBY', KEYS[2], 'orphans', orphans) end
if reprotected > 0 then redis.call('HINCRBY', KEYS[2], 'reprotected', reprotected) end
if lost > 0 then redis.call('HINCRBY', KEYS[2], 'protected_lost', lost) end
return { orphans, reprotected, lost, first_lost }
