#!lua
-- restore.lua - put a chunk of archived dead-letter jobs back (ferryctl dead
-- restore): each job's cache key is created from the archived data unless
-- it exists (newer data is left alone; a key of ferry's own gets the mark
-- of the job it is written for, OWN_MARK_SEP in common.lua, as the
-- enqueue writes it) and is protected (protect_keys,
-- common.lua: no TTL while the job lives), then the job goes to requeue as a
-- fresh wrapper (attempts and recoveries 0) carrying the entry's stamps, so
-- the sink fences those batches again. One atomic step per chunk: every
-- argument is checked and every wrapper built before the first write. No
-- allow-oom: at maxmemory Redis refuses it before it starts, and nothing
-- is half done.
-- KEYS: requeue, stats, protected, then the cache keys the entries name
-- ARGV: per job: document, stamp count, the stamps (batch keys as plain
--       strings), index of its cache key in KEYS (0: none), kind
--       (string|hash|list, "" without a key), value count, values (hash:
--       field, value, ...)
-- Returns {jobs pushed, cache keys created, cache keys already there}.
local kinds = { string = 1, hash = 2, list = 1 }
local jobs = {}
local i = 1
while i <= #ARGV do
	local ns = tonumber(ARGV[i + 1])
	if not ns or ns < 0 or ns ~= math.floor(ns) or i + 1 + ns + 3 > #ARGV then
		return ferry_error('BADARGS', 'restore: job argument ' .. (#jobs + 1) .. ' is malformed')
	end
	local m = fresh(ARGV[i])
	for s = 1, ns do add_stamp(m, ARGV[i + 1 + s]) end
	local at = i + 2 + ns
	local k, kind, n = tonumber(ARGV[at]), ARGV[at + 1], tonumber(ARGV[at + 2])
	local from = at + 3
	if not k or k < 0 or k ~= math.floor(k) or (k >= 1 and k <= 3) or k > #KEYS or not n or n < 0 or n ~= math.floor(n) or from + n - 1 > #ARGV or (k > 0 and (not kinds[kind] or n < 1 or n % kinds[kind] ~= 0 or (kind == 'string' and n ~= 1))) then
		return ferry_error('BADARGS', 'restore: job argument ' .. (#jobs + 1) .. ' is malformed')
	end
	jobs[#jobs + 1] = { el = wrap(m), doc = ARGV[i], k = k, kind = kind, from = from, n = n }
	i = from + n
end

local made, kept, named, value_bytes = 0, 0, {}, {}
local space = cache_space_of(KEYS[3])
local els = {}
for j, e in ipairs(jobs) do
	if e.k > 0 then
		local key = KEYS[e.k]
		if redis.call('EXISTS', key) == 1 then
			kept = kept + 1
			redis.call('PERSIST', key)
		elseif e.kind == 'string' then
			local value = ARGV[e.from]
			if own_group(space, key) then value = ids_sha(e.doc) .. OWN_MARK_SEP .. value end
			redis.call('SET', key, value)
			value_bytes[key] = #value
			made = made + 1
		else
			local cmd = e.kind == 'hash' and 'HSET' or 'RPUSH'
			-- unpack() is limited to a few thousand values
			for at = e.from, e.from + e.n - 1, 1000 do
				redis.call(cmd, key, unpack(ARGV, at, math.min(at + 999, e.from + e.n - 1)))
			end
			made = made + 1
		end
		named[#named + 1] = key
	end
	els[j] = e.el
end
protect_keys(KEYS[3], named, value_bytes)
push_all('LPUSH', KEYS[1], els)
-- the jobs' ids are held again (common.lua: idempotency)
local tag = string.sub(KEYS[3], 1, -10)
if ids_window(tag) > 0 then
	local refs = {}
	for _, e in ipairs(jobs) do refs[#refs + 1] = dead_ref({ doc = e.doc }) end
	ids_hold(tag, refs, IDS_LIVE)
end
if #els > 0 then redis.call('HINCRBY', KEYS[2], 'replayed', #els) end
return { #els, made, kept }
