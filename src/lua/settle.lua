#!lua flags=allow-oom
-- settle.lua - the outcome of a whole batch in one atomic step: done jobs
-- vanish, failed ones go to delayed (attempts + 1, due after their backoff)
-- or to dead; the processing list is emptied. A job's cache key (named by
-- the worker, "" for none) is deleted with a done job and made persistent
-- with a dead one, so it cannot expire while an operator decides.
-- KEYS: proc, delayed, dead, stats, bkeys, owners
-- ARGV: worker id, master id, job count, then for each job that is not
--       simply done
--       (failed, or done with a cache key): its position in the processing
--       list (1 = the left end), outcome (ok|retry|dead|missing), id, delay
--       ms (retry) or reason (dead, missing), error message, cache key.
--       missing = dead because its cache key was gone. Jobs not named are
--       done, so a batch that went well costs a few commands, not one per
--       job.
-- Returns 0 when the list is already empty (a settle repeated after a lost
-- reply), else {done, retried, dead}. A worker the master has handed back
-- (owners holds its tombstone, or another master) gets an error and
-- settles nothing: what its list holds now arrived after the hand-back.
-- allow-oom: it only deletes and moves data (a retry's counters grow a job
-- by a few bytes), so the queue drains at maxmemory.
if redis.call('HGET', KEYS[6], ARGV[1]) ~= ARGV[2] then
	return redis.error_reply('ERR ferry: worker ' .. ARGV[1] ..
		' is not registered: it was handed back as dead')
end
local held = redis.call('LLEN', KEYS[1])
if held == 0 then return 0 end
if held ~= tonumber(ARGV[3]) then
	return redis.error_reply('ERR ferry: processing list of ' .. ARGV[1] ..
		' holds ' .. held .. ' jobs, the worker settles ' .. ARGV[3])
end
local now = now_ms()
local jobs = nil
local done, retried, buried, missing = held, 0, 0, 0
for b = 4, #ARGV, 6 do
	local pos, outcome, id, p, err, ck = tonumber(ARGV[b]), ARGV[b + 1],
		ARGV[b + 2], ARGV[b + 3], ARGV[b + 4], ARGV[b + 5]
	if outcome == 'ok' then
		if ck ~= '' then redis.call('DEL', ck) end
	else
		done = done - 1
		jobs = jobs or redis.call('LRANGE', KEYS[1], 0, -1)
		local meta, raw = unwrap(jobs[pos])
		meta.attempts = meta.attempts + 1
		meta.first_error = meta.first_error or err
		meta.last_error = err
		-- a batch stamp stays: the fence this attempt made may have
		-- rolled back, and that batch could still commit late
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
