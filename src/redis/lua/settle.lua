#!lua flags=allow-oom
-- settle.lua - the outcome of a whole batch in one atomic step: done jobs
-- vanish, failed ones go to delayed (attempts + 1, due after their backoff)
-- or to dead; the processing list is emptied. A job's cache key (named by
-- the worker, "" for none) is released with a done job (deleted with the
-- last job that names it: release_keys, common.lua) and stays protected
-- with a retried or dead one (no TTL: it cannot expire or be evicted while
-- the job waits or an operator decides; a key no entry protected yet, from
-- a job pushed without the enqueue script, is protected from here on).
-- KEYS: proc, delayed, dead, stats, bkeys, owners, protected
-- ARGV: worker id, master id, job count, then for each job that is not
--       simply done
--       (failed, done with a cache key, or done with an id on a queue
--       that keeps ids): its position in the processing
--       list (1 = the left end), outcome (ok|retry|dead|missing), id, delay
--       ms (retry) or reason (dead, missing), error message, cache key,
--       the SHA-1 of its document in hex ("" when it names no id).
--       missing = dead because its cache key was gone. Jobs not named are
--       done, so a batch that went well costs a few commands, not one per
--       job.
-- On a queue that holds ids (common.lua: idempotency), a done job's id is
-- forgotten a window from now, a dead one's is marked dead: only when the
-- set holds the id for that job (its SHA-1), never for another job that
-- carries the same id.
-- Returns 0 when the list is already empty (a settle repeated after a lost
-- reply), else {done, retried, dead}. A worker the master has handed back
-- (owners holds its tombstone, or another master) gets HANDEDBACK and
-- settles nothing: what its list holds now arrived after the hand-back.
-- Every argument is checked and every entry computed before the first
-- write. A job whose wrapper is malformed is dead-lettered whatever the
-- worker said (the worker says so too: src/format/wrapper.c reads it the same).
-- allow-oom: it only deletes and moves data (a retry's counters grow a job
-- by a few bytes), so the queue drains at maxmemory.
if redis.call('HGET', KEYS[6], ARGV[1]) ~= ARGV[2] then
	return ferry_error('HANDEDBACK', 'worker ' .. ARGV[1] .. ' is not registered: it was handed back as dead')
end
local held = redis.call('LLEN', KEYS[1])
if held == 0 then return 0 end
if held ~= tonumber(ARGV[3]) then
	return ferry_error('BADCOUNT', 'processing list of ' .. ARGV[1] .. ' holds ' .. held .. ' jobs, the worker settles ' .. tostring(ARGV[3]))
end
local outcomes = { ok = true, retry = true, dead = true, missing = true }
local kind = batch_of(KEYS[5], ARGV[1])
local now = now_ms()
local jobs = nil
local dels, persists, retries, deads = {}, {}, {}, {}
local done_ids, dead_ids = {}, {}
local done, missing = held, 0
for b = 4, #ARGV, 7 do
	local pos, outcome, id, p, err, ck, sha = tonumber(ARGV[b]), ARGV[b + 1],
		ARGV[b + 2], ARGV[b + 3], ARGV[b + 4], ARGV[b + 5], ARGV[b + 6]
	if not pos or pos < 1 or pos > held or pos ~= math.floor(pos) or not outcomes[outcome] or sha == nil or (outcome == 'retry' and not tonumber(p)) then
		return ferry_error('BADARGS', 'settle: job argument ' .. ((b - 4) / 7 + 1) .. ' is malformed')
	end
	jobs = jobs or (outcome ~= 'ok' or kind == 'w') and redis.call('LRANGE', KEYS[1], 0, -1) or nil
	local m = jobs and held_job(kind, jobs[pos])
	if jobs and not m then
		m = fresh(jobs[pos])
		outcome, p, err = 'dead', 'malformed ferry wrapper', 'malformed ferry wrapper'
	end
	if outcome == 'ok' then
		if ck ~= '' then dels[#dels + 1] = ck end
		if id ~= '' then done_ids[#done_ids + 1] = { id, sha } end
	else
		done = done - 1
		m.attempts = math.min(m.attempts + 1, 999999999)
		m.last_error = str_token(err)
		m.first_error = m.first_error or m.last_error
		-- stamps stay (doc/design.md, I2)
		if outcome == 'retry' then
			retries[#retries + 1] = { now + tonumber(p), m }
			if ck ~= '' then persists[#persists + 1] = ck end
		else
			deads[#deads + 1] = dead_entry(m, p, id, ARGV[1], now)
			dead_ids[#dead_ids + 1] = { id, sha }
			if outcome == 'missing' then
				missing = missing + 1
			elseif ck ~= '' then
				persists[#persists + 1] = ck
			end
		end
	end
end

release_keys(KEYS[7], dels)
for _, r in ipairs(retries) do
	r[2].seq = redis.call('HINCRBY', KEYS[4], 'seq', 1)
	redis.call('ZADD', KEYS[2], r[1], wrap(r[2]))
end
push_all('LPUSH', KEYS[3], deads)
-- keys of failed jobs that no entry counts yet (pushed past the enqueue
-- script): protected from here on
for _, k in ipairs(persists) do redis.call('PERSIST', k) end
if #persists > 0 then protect_keys(KEYS[7], unprotected_of(KEYS[7], persists)) end
local tag = string.sub(KEYS[4], 1, -6)
ids_mark(tag, done_ids, nil)
ids_mark(tag, dead_ids, IDS_DEAD)
redis.call('DEL', KEYS[1])
redis.call('HDEL', KEYS[5], ARGV[1])
if done > 0 then redis.call('HINCRBY', KEYS[4], 'done', done) end
if #retries > 0 then redis.call('HINCRBY', KEYS[4], 'retried', #retries) end
if #deads > 0 then redis.call('HINCRBY', KEYS[4], 'dead', #deads) end
if missing > 0 then redis.call('HINCRBY', KEYS[4], 'cache_missing', missing) end
return { done, #retries, #deads }
