#!lua flags=allow-oom
-- settle.lua - the outcome of a whole batch in one atomic step: done jobs
-- vanish, failed ones go to delayed (attempts + 1, due after their backoff)
-- or to dead; the processing list is emptied. A job's cache key (named by
-- the worker, "" for none) is deleted with a done job and made persistent
-- with a dead one, so it cannot expire while an operator decides.
-- KEYS: proc, delayed, dead, stats, bkeys
-- ARGV: worker id, job count, then per job: outcome (ok|retry|dead|missing),
--       id, delay ms (retry) or reason (dead, missing), error message,
--       cache key. missing = dead because its cache key was gone.
-- Returns 0 when the list is already empty (a settle repeated after a lost
-- reply), else {done, retried, dead}.
-- allow-oom: it only deletes and moves data (a retry's counters grow a job
-- by a few bytes), so the queue drains at maxmemory.
local jobs = redis.call('LRANGE', KEYS[1], 0, -1)
if #jobs == 0 then return 0 end
if #jobs ~= tonumber(ARGV[2]) then
	return redis.error_reply('ERR ferry: processing list of ' .. ARGV[1] ..
		' holds ' .. #jobs .. ' jobs, the worker settles ' .. ARGV[2])
end
local now = now_ms()
local done, retried, buried, missing = 0, 0, 0, 0
for i, el in ipairs(jobs) do
	local b = 3 + (i - 1) * 5
	local outcome, id, p, err, ck = ARGV[b], ARGV[b + 1], ARGV[b + 2],
		ARGV[b + 3], ARGV[b + 4]
	if outcome == 'ok' then
		done = done + 1
		if ck ~= '' then redis.call('DEL', ck) end
	else
		local meta, raw = unwrap(el)
		meta.attempts = meta.attempts + 1
		meta.first_error = meta.first_error or err
		meta.last_error = err
		meta.batch = nil
		if outcome == 'retry' then
			meta.seq = redis.call('HINCRBY', KEYS[4], 'seq', 1)
			redis.call('ZADD', KEYS[2], now + tonumber(p), wrap(meta, raw))
			retried = retried + 1
		else
			redis.call('LPUSH', KEYS[3], dead_entry(meta, raw, id, p, ARGV[1], now))
			buried = buried + 1
			if outcome == 'missing' then
				missing = missing + 1
			elseif ck ~= '' then
				redis.call('PERSIST', ck)
			end
		end
	end
end
redis.call('DEL', KEYS[1])
redis.call('HDEL', KEYS[5], ARGV[1])
if done > 0 then redis.call('HINCRBY', KEYS[4], 'done', done) end
if retried > 0 then redis.call('HINCRBY', KEYS[4], 'retried', retried) end
if buried > 0 then redis.call('HINCRBY', KEYS[4], 'dead', buried) end
if missing > 0 then redis.call('HINCRBY', KEYS[4], 'cache_missing', missing) end
return { done, retried, buried }
