#!lua flags=allow-oom
-- fetch.lua - move the next batch into this worker's processing list, in
-- one atomic step: from requeue (ferry's own wrappers: recovered, retried,
-- replayed jobs) when it holds any, else from ready (producers'
-- documents). The two never mix in a batch; the batch's kind goes into
-- bkeys with its key ("w KEY" or "r KEY", see batch_of).
-- Recovered jobs come in smaller batches as their recoveries grow
-- (batch_share): a job that kills its worker is isolated in a few rounds,
-- and its innocent neighbours do not each run alone.
-- KEYS: ready, proc, bkeys, owners, requeue, stats
-- ARGV: n, worker id, batch key, held, master id, max_recoveries
-- (held: jobs already in the processing list, moved there by BLMOVE from
-- ready; then only ready tops the batch up)
-- Returns {kind, {elements}}. A worker the master has already handed back
-- (owners holds its tombstone, or another master) gets HANDEDBACK.
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
if not n or not held or not maxr then
	return ferry_error('BADARGS', 'fetch: n, held and max_recoveries must be numbers')
end

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

local kind, out = 'r', {}
if held == 0 and n > 0 then
	local first = redis.call('LINDEX', KEYS[5], -1)
	if first then
		kind = 'w'
		local limit = batch_share(recoveries_of(first))
		local tail = redis.call('LRANGE', KEYS[5], -limit, -1)
		for i = #tail, 1, -1 do
			limit = math.min(limit, batch_share(recoveries_of(tail[i])))
			if #out >= limit then break end
			out[#out + 1] = tail[i]
		end
		redis.call('LTRIM', KEYS[5], 0, -#out - 1)
	end
end
if kind == 'r' and n > 0 then
	out = redis.call('RPOP', KEYS[1], n) or {}
end
local arrived = 0
if kind == 'r' then
	arrived = #out
	if held > 0 and not redis.call('HGET', KEYS[3], ARGV[2]) then arrived = arrived + held end
end
push_all('RPUSH', KEYS[2], out)
if #out + held > 0 then redis.call('HSET', KEYS[3], ARGV[2], kind .. ' ' .. ARGV[3]) end
if arrived > 0 then redis.call('HINCRBY', KEYS[6], 'enqueued', arrived) end
return { kind, out }
