-- common.lua - helpers shared by every ferry script; the build inserts this
-- file after each script's first (shebang) line.
--
-- A job is the producer's JSON document, kept byte for byte. When ferry must
-- remember something about it (attempts, recoveries, batch key, errors) it
-- wraps it: {"ferry":1,"recoveries":R,"attempts":A,...,"job":<document>}.
-- The document is never decoded and re-encoded here (cjson would round
-- numbers); only the wrapper's own prefix, up to ,"job":, is parsed.

local WRAP = '{"ferry":1,'
local JOB_MARK = ',"job":'

local function unwrap(el)
	if string.sub(el, 1, #WRAP) ~= WRAP then
		return { recoveries = 0, attempts = 0 }, el
	end
	local at = string.find(el, JOB_MARK, 1, true)
	local meta = cjson.decode(string.sub(el, 1, at - 1) .. '}')
	return meta, string.sub(el, at + #JOB_MARK, -2)
end

local function wrap(meta, raw)
	local parts = { WRAP, '"recoveries":', string.format('%d', meta.recoveries),
		',"attempts":', string.format('%d', meta.attempts) }
	for _, k in ipairs({ 'batch', 'first_error', 'last_error' }) do
		if meta[k] ~= nil then
			parts[#parts + 1] = ',"' .. k .. '":' .. cjson.encode(meta[k])
		end
	end
	if meta.seq ~= nil then
		parts[#parts + 1] = ',"seq":' .. string.format('%d', meta.seq)
	end
	parts[#parts + 1] = JOB_MARK
	parts[#parts + 1] = raw
	parts[#parts + 1] = '}'
	return table.concat(parts)
end

local function recovered(el)
	return string.match(el, '^{"ferry":1,"recoveries":[1-9]') ~= nil
end

local function now_ms()
	local t = redis.call('TIME')
	return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- The dead-letter entry: the original document as a JSON string (so even
-- malformed bytes survive), the reason, the counters and both errors.
local function dead_entry(meta, raw, id, reason, worker, now)
	local e = {
		'{"reason":', cjson.encode(reason),
		',"attempts":', string.format('%d', meta.attempts),
		',"recoveries":', string.format('%d', meta.recoveries),
		',"time":', string.format('%d', now),
		',"worker":', cjson.encode(worker),
	}
	if id ~= nil and id ~= '' then e[#e + 1] = ',"id":' .. cjson.encode(id) end
	-- the batch the job was in when its worker died: a replay must still
	-- fence it, or a late commit of that batch would write the job twice
	if meta.batch ~= nil then
		e[#e + 1] = ',"batch":' .. cjson.encode(meta.batch)
	end
	if meta.first_error ~= nil then
		e[#e + 1] = ',"first_error":' .. cjson.encode(meta.first_error)
	end
	if meta.last_error ~= nil then
		e[#e + 1] = ',"last_error":' .. cjson.encode(meta.last_error)
	end
	e[#e + 1] = ',"job":' .. cjson.encode(raw) .. '}'
	return table.concat(e)
end

-- Hand a processing list back: each job goes to the right end of ready
-- (taken next), stamped with the batch key and, when `bump`, one more
-- recovery; past max_recoveries it is dead-lettered instead.
local function reclaim(proc, ready, dead, stats, owners, bkeys, wid,
		max_recoveries, bump)
	local jobs = redis.call('LRANGE', proc, 0, -1)
	local batch = redis.call('HGET', bkeys, wid)
	local back, buried, now = 0, 0, now_ms()
	for i = #jobs, 1, -1 do
		local el = jobs[i]
		if bump or batch then
			local meta, raw = unwrap(jobs[i])
			if batch then meta.batch = batch end
			if bump then meta.recoveries = meta.recoveries + 1 end
			if bump and meta.recoveries > max_recoveries then
				meta.last_error = 'worker died while processing'
				meta.first_error = meta.first_error or meta.last_error
				redis.call('LPUSH', dead, dead_entry(meta, raw, nil,
					'worker died while processing', wid, now))
				buried = buried + 1
				el = nil
			else
				el = wrap(meta, raw)
			end
		end
		if el then
			redis.call('RPUSH', ready, el)
			back = back + 1
		end
	end
	redis.call('DEL', proc)
	-- a tombstone, not a deletion: a command the dead worker sent before
	-- dying (a BLMOVE still blocked, a fetch in Redis' input buffer) may
	-- yet move a job into its list; fetch refuses a tombstoned worker and
	-- the reaper sweeps the list again before removing the tombstone
	redis.call('HSET', owners, wid, 'dead:' .. string.format('%d', now))
	redis.call('HDEL', bkeys, wid)
	if back > 0 then redis.call('HINCRBY', stats, 'recovered', back) end
	if buried > 0 then redis.call('HINCRBY', stats, 'dead', buried) end
	return { back, buried }
end
