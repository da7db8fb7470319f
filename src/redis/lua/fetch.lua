#!lua flags=allow-oom
-- fetch.lua - move the next batch into this worker's processing list, in
-- one atomic step: from requeue (ferry's own wrappers: recovered, retried,
-- replayed jobs) when it holds any, else from ready (producers'
-- documents). The two never mix in a batch; the batch's kind goes into
-- bkeys with its key ("w KEY" or "r KEY", see batch_of).
-- Recovered jobs come in smaller batches as their recoveries grow
-- (batch_share): a job that kills its worker is isolated in a few rounds,
-- and its innocent neighbours do not each run alone.
-- KEYS: ready, proc, bkeys, owners, requeue, stats, rate, ids
-- ARGV: n, worker id, batch key, held, master id, max_recoveries, rate,
-- burst
-- (held: jobs already in the processing list, moved there by BLMOVE from
-- ready; then only ready tops the batch up)
-- Returns {kind, {elements}, 0, ids}, or {'r', {}, ms, ids} when the
-- queue's rate limit has too few tokens: try again in ms. ids: 1 when the
-- queue holds idempotency ids (common.lua: idempotency), so that the
-- worker names the ids of the jobs it settles, also after the window was
-- turned off; else 0. A worker the master has already
-- handed back (owners holds its tombstone, or another master) gets
-- HANDEDBACK.
-- Rate limit (rate > 0 jobs/s, a bucket of burst tokens; rate 0 touches no
-- key): the bucket is the string "MILLITOKENS AT" (AT: Redis time, ms),
-- refilled by the time since AT, up to burst; a missing key is a full
-- bucket. The key has no TTL: a volatile-* maxmemory-policy evicts keys
-- with one, and each eviction would grant another burst. Every job that
-- enters a processing list takes a token: the held ones too, even into
-- debt (BLMOVE moved them already; the next fetches wait it off). Without
-- held jobs, a fetch waits for as many tokens as it could take (its
-- batch, the burst, what the queue holds) and then takes at most what
-- the bucket has: batches stay whole while the limit holds the queue
-- back.
-- allow-oom: it only moves data, so the queue drains at maxmemory.
-- Counts in stats `enqueued` every document a batch takes from ready, by
-- whatever means a producer pushed it (ferryctl enqueue, LPUSH): ready
-- holds only producers' documents, taken once (a retried or recovered job
-- comes back through delayed or requeue, never ready). The held jobs are
-- counted here too unless bkeys already names their batch (a resumed
-- batch, counted by the fetch that stored its key); a worker that dies
-- before this script runs leaves them to reclaim, which counts them.
if redis.call('HGET', KEYS[4], ARGV[2]) ~= ARGV[5] then
	return ferry_error('HANDEDBACK', 'worker ' .. ARGV[2] .. ' is not registered: it was handed back as dead')
end
local n, held, maxr = tonumber(ARGV[1]), tonumber(ARGV[4]), tonumber(ARGV[6])
local rate, burst = tonumber(ARGV[7]), tonumber(ARGV[8])
if not n or not held or not maxr or not rate or not burst then
	return ferry_error('BADARGS', 'fetch: n, held, max_recoveries, rate and burst must be numbers')
end
-- held jobs no fetch has counted yet (none when bkeys names their batch)
local held_new = 0
if held > 0 and not redis.call('HGET', KEYS[3], ARGV[2]) then held_new = held end

-- Batch size for jobs recovered r times: n, then shrinking geometrically
-- to 1 at r = max_recoveries (n^((M-r)/M): 1000, 100, 10, 1 for M = 3).
local function batch_share(r)
	if r <= 0 then return n end
	if r >= maxr then return 1 end
	return math.max(1, math.floor(n ^ ((maxr - r) / maxr)))
end

-- recoveries of a requeued element (a malformed one counts as many: alone)
local function recoveries_of(el)
	local r = string.match(el, '^{"ferry":1,"recoveries":(%d%d?%d?%d?%d?%d?%d?%d?%d?)[,}]')
	return tonumber(r) or maxr
end

-- allow: how many jobs this fetch may take (n without a rate limit)
local allow, bucket, now, store_bucket = n, 0, 0, nil
if rate > 0 then
	now = now_ms()
	store_bucket = function(b)
		redis.call('SET', KEYS[7], string.format('%d %d', b, now))
	end
	bucket = burst * 1000
	local v = redis.call('GET', KEYS[7])
	local t, at = string.match(v or '', '^(%-?%d+) (%d+)$')
	if t then
		t, at = tonumber(t), tonumber(at)
		bucket = math.min(bucket, t + math.max(0, now - at) * rate)
		-- a clock that went back (a failover to another host): count from
		-- now, or the queue would stand still until the clock caught up
		if at > now then store_bucket(bucket) end
	end
	bucket = bucket - held_new * 1000
	if held == 0 and n > 0 then
		-- what this fetch would take: requeue's next batch, else ready
		local want = redis.call('LLEN', KEYS[5])
		if want > 0 then
			want = math.min(want, batch_share(recoveries_of(redis.call('LINDEX', KEYS[5], -1))))
		else
			want = redis.call('LLEN', KEYS[1])
		end
		want = math.min(n, burst, want)
		if want < 1 and bucket < 1000 then want = 1 end
		if bucket < want * 1000 then
			return { 'r', {}, math.max(1, math.ceil((want * 1000 - bucket) / rate)), redis.call('EXISTS', KEYS[8]) }
		end
	end
	allow = math.min(n, math.max(0, math.floor(bucket / 1000)))
end

local kind, out = 'r', {}
if held == 0 and allow > 0 then
	local first = redis.call('LINDEX', KEYS[5], -1)
	if first then
		kind = 'w'
		local limit = math.min(allow, batch_share(recoveries_of(first)))
		local tail = redis.call('LRANGE', KEYS[5], -limit, -1)
		for i = #tail, 1, -1 do
			limit = math.min(limit, batch_share(recoveries_of(tail[i])))
			if #out >= limit then break end
			out[#out + 1] = tail[i]
		end
		redis.call('LTRIM', KEYS[5], 0, -#out - 1)
	end
end
if kind == 'r' and allow > 0 then
	out = redis.call('RPOP', KEYS[1], allow) or {}
end
local arrived = 0
if kind == 'r' then arrived = #out + held_new end
push_all('RPUSH', KEYS[2], out)
if #out + held > 0 then redis.call('HSET', KEYS[3], ARGV[2], kind .. ' ' .. ARGV[3]) end
if arrived > 0 then redis.call('HINCRBY', KEYS[6], 'enqueued', arrived) end
if rate > 0 and #out + held_new > 0 then store_bucket(bucket - #out * 1000) end
return { kind, out, 0, redis.call('EXISTS', KEYS[8]) }
