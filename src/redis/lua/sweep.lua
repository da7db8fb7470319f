#!lua flags=allow-oom
-- sweep.lua - one bounded step of the master's sweep of cache keys
-- (master_sweep.c hands over what one SCAN or HSCAN returned).
-- "orphans": keys of the queue's cache space. A key that no live job
-- names (no entry in protected counts it: common.lua) and that has no TTL
-- is an orphan: a job removed by hand, a producer that wrote the key and
-- died before its job went in. It gets the cache TTL now, and so goes like
-- any cache entry after it (expired, or evicted first under a volatile-*
-- policy): the fallback TTL of keys ferry writes, as a sweep rather than
-- an expiry on live keys. Counted in stats `orphans`.
-- "audit": fields of protected. A protected key that no longer exists was
-- lost (FLUSHDB, a DEL by hand, an allkeys-* policy set at run time): an
-- entry of its own is made negative (marked lost); a group's entry counts
-- its lost keys (its live jobs less its keys that exist, EXISTS on
-- <group>.0 to <group>.(N-1)). Each lost key is counted once in stats
-- `protected_lost`; the jobs that name it are dead "cache key expired or
-- evicted" when they run. A lost key written again is counted again.
-- Both: a protected key found with a TTL (the application set one again)
-- is made persistent again, counted in `reprotected`.
-- KEYS: protected, stats
-- ARGV: mode ("orphans" | "audit"), cache TTL ms, then the keys
-- A call looks at the keys of groups until it has looked at AUDIT_BUDGET
-- (a group's keys at once), so that it holds Redis a millisecond or so
-- whatever the backlog: the fields it did not get to are the caller's to
-- send again.
-- Returns {orphans, reprotected, lost, the first key found lost or "", the
-- position (from 1) of the first key not looked at, 0 when all were}.
-- allow-oom: it only removes TTLs and sets them.
local mode, ttl = ARGV[1], tonumber(ARGV[2])
if (mode ~= 'orphans' and mode ~= 'audit') or not ttl or ttl < 1 then
	return ferry_error('BADARGS', 'sweep: ARGV is "orphans" or "audit", a cache TTL in ms, then keys')
end
local space = cache_space_of(KEYS[1])
-- keys of groups looked at in one call, at most (and at least one group's)
local AUDIT_BUDGET = 2000
local orphans, reprotected, lost, first_lost = 0, 0, 0, ''

-- How many of a group's keys were found lost just now (counted once), and
-- how many keys were looked at.
local function audit_group(g)
	local e = group_read(redis.call('HGET', KEYS[1], g))
	if not e then return 0, 0 end
	local existing, names = 0, {}
	for i = 0, e.n - 1 do
		names[#names + 1] = g .. '.' .. i
		if #names == 1000 or i == e.n - 1 then
			existing = existing + redis.call('EXISTS', unpack(names))
			names = {}
		end
	end
	local missing = math.max(e.jobs - existing, 0)
	if missing == e.lost then return 0, e.n end
	local found = math.max(missing - e.lost, 0)
	e.lost = missing
	redis.call('HSET', KEYS[1], g, group_text(e))
	return found, e.n
end

local budget, stopped = AUDIT_BUDGET, 0
for i = 3, #ARGV do
	local key = ARGV[i]
	local group = own_group(space, key)
	if mode == 'audit' and is_group_field(space, key) and budget <= 0 then
		stopped = i - 2
		break
	elseif mode == 'audit' and is_group_field(space, key) then
		local found, looked = audit_group(key)
		budget = budget - looked
		lost = lost + found
		if found > 0 and first_lost == '' then first_lost = key .. '.*' end
	elseif mode == 'orphans' or not group then
		local pttl = redis.call('PTTL', key)
		local refs, was_lost
		if group then
			refs = redis.call('HEXISTS', KEYS[1], group) == 1 and 1 or nil
		else
			refs, was_lost = protected_entry(KEYS[1], key)
		end
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
end
if orphans > 0 then redis.call('HINCRBY', KEYS[2], 'orphans', orphans) end
if reprotected > 0 then redis.call('HINCRBY', KEYS[2], 'reprotected', reprotected) end
if lost > 0 then redis.call('HINCRBY', KEYS[2], 'protected_lost', lost) end
return { orphans, reprotected, lost, first_lost, stopped }
