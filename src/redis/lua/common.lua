-- common.lua - helpers shared by every ferry script. The build (scripts/embed-lua) joins this file onto the second line of each script, so error line numbers point at the script's own lines; therefore: no comment after code on a line here, and no multi-line strings.
--
-- Elements of `ready` are producers' documents, never parsed here. What
-- ferry knows about a job (attempts, recoveries, batch stamps, errors)
-- lives only in ferry-side keys (requeue, delayed, dead, processing lists
-- of batches taken from requeue), in the two formats of doc/formats.md:
-- {"ferry":1,"recoveries":R,"attempts":A,...,"job":<document>} and the
-- dead entry {"reason":..,...,"job":<document>}. src/format/wrapper.c reads them
-- by the same grammar; the document is never decoded nor re-encoded.
-- Every function here is total: malformed input gives nil, never an error
-- (Redis does not roll back a script that raises halfway).

local STR_MAX = 4096

-- Error replies start with a code that C matches (src/redis/queue.h).
local function ferry_error(code, msg)
	return redis.error_reply(code .. ' ' .. msg)
end

-- Length of the valid UTF-8 character at j (RFC 3629) that ends before stop, or nil.
local function utf8_len(s, j, stop)
	local b = string.byte(s, j)
	local n, lo, hi = 0, 128, 191
	if b >= 194 and b <= 223 then n = 2 elseif b >= 224 and b <= 239 then n = 3 elseif b >= 240 and b <= 244 then n = 4 else return nil end
	if j + n - 1 > stop - 1 then return nil end
	if b == 224 then lo = 160 elseif b == 237 then hi = 159 elseif b == 240 then lo = 144 elseif b == 244 then hi = 143 end
	local b1 = string.byte(s, j + 1)
	if b1 < lo or b1 > hi then return nil end
	for k = 2, n - 1 do
		local bk = string.byte(s, j + k)
		if bk < 128 or bk > 191 then return nil end
	end
	return n
end

-- The index after literal l at i, if l ends before stop.
local function lit(s, i, stop, l)
	if i and i + #l - 1 <= stop - 1 and string.sub(s, i, i + #l - 1) == l then return i + #l end
	return nil
end

-- A number without leading zeros, at most maxd digits: index after, value.
local function number(s, i, stop, maxd)
	if not i then return nil end
	local a, e = string.find(s, '^%d+', i)
	if not a or e >= stop or e - a + 1 > maxd then return nil end
	if e > a and string.byte(s, a) == 48 then return nil end
	return e + 1, tonumber(string.sub(s, a, e))
end

-- A string token (doc/formats.md "str") at i: index after, token text.
local function str(s, i, stop)
	if not i or i >= stop or string.byte(s, i) ~= 34 then return nil end
	local j = i + 1
	while true do
		local _, e = string.find(s, '^[^"\\%z\1-\31\128-\255]+', j)
		if e then
			if e >= stop then return nil end
			j = e + 1
		end
		if j >= stop then return nil end
		local b = string.byte(s, j)
		if b == 34 then break end
		if b == 92 then
			if j + 1 > stop - 1 then return nil end
			local x = string.sub(s, j + 1, j + 1)
			if string.find('"\\/bfnrt', x, 1, true) then
				j = j + 2
			elseif x == 'u' and j + 5 <= stop - 1 and string.find(s, '^%x%x%x%x', j + 2) then
				local v = tonumber(string.sub(s, j + 2, j + 5), 16)
				if not ((v >= 1 and v <= 31) or v == 127) then return nil end
				j = j + 6
			else
				return nil
			end
		elseif b < 32 then
			return nil
		else
			local n = utf8_len(s, j, stop)
			if not n then return nil end
			j = j + n
		end
		if j - i > STR_MAX then return nil end
	end
	if j - i + 1 > STR_MAX then return nil end
	return j + 1, string.sub(s, i, j)
end

-- ,"name":str if that member comes next: index after and token, or i and nil; nil when the member is there but bad.
local function opt_str(s, i, stop, member)
	local at = lit(s, i, stop, member)
	if not at then return i, nil end
	return str(s, at, stop)
end

local function stamps(s, i, stop, out)
	local at = lit(s, i, stop, ',"stamps":[')
	if not at then return i end
	local close = lit(s, at, stop, ']')
	if close then return close end
	while true do
		local tok
		at, tok = str(s, at, stop)
		if not at then return nil end
		out[#out + 1] = tok
		close = lit(s, at, stop, ']')
		if close then return close end
		at = lit(s, at, stop, ',')
		if not at then return nil end
	end
end

-- The document after ,"job": at i, or nil.
local function job_doc(s, i, stop)
	local at = lit(s, i, stop, ',"job":')
	if not at then return nil end
	return string.sub(s, at, stop - 1)
end

-- A wrapper (doc/formats.md) as a table, or nil when malformed.
local function parse_wrapper(s)
	local stop = #s
	if stop < 2 or string.byte(s, stop) ~= 125 then return nil end
	local m, i = { stamps = {} }, nil
	i, m.recoveries = number(s, lit(s, 1, stop, '{"ferry":1,"recoveries":'), stop, 9)
	if not i then return nil end
	i, m.attempts = number(s, lit(s, i, stop, ',"attempts":'), stop, 9)
	if not i then return nil end
	i = stamps(s, i, stop, m.stamps)
	if not i then return nil end
	i, m.first_error = opt_str(s, i, stop, ',"first_error":')
	if not i then return nil end
	i, m.last_error = opt_str(s, i, stop, ',"last_error":')
	if not i then return nil end
	local at = lit(s, i, stop, ',"seq":')
	if at then
		i, m.seq = number(s, at, stop, 15)
		if not i then return nil end
	end
	m.doc = job_doc(s, i, stop)
	if not m.doc then return nil end
	return m
end

-- A dead entry (doc/formats.md) as a table, or nil when malformed.
local function parse_dead(s)
	local stop = #s
	if stop < 2 or string.byte(s, stop) ~= 125 then return nil end
	local d, i = { stamps = {} }, nil
	i, d.reason = str(s, lit(s, 1, stop, '{"reason":'), stop)
	if not i then return nil end
	i, d.attempts = number(s, lit(s, i, stop, ',"attempts":'), stop, 9)
	if not i then return nil end
	i, d.recoveries = number(s, lit(s, i, stop, ',"recoveries":'), stop, 9)
	if not i then return nil end
	i, d.time = number(s, lit(s, i, stop, ',"time":'), stop, 15)
	if not i then return nil end
	i, d.worker = str(s, lit(s, i, stop, ',"worker":'), stop)
	if not i then return nil end
	i, d.id = opt_str(s, i, stop, ',"id":')
	if not i then return nil end
	i = stamps(s, i, stop, d.stamps)
	if not i then return nil end
	i, d.first_error = opt_str(s, i, stop, ',"first_error":')
	if not i then return nil end
	i, d.last_error = opt_str(s, i, stop, ',"last_error":')
	if not i then return nil end
	d.doc = job_doc(s, i, stop)
	if not d.doc then return nil end
	return d
end

-- A fresh wrapper table for a producer's document.
local function fresh(doc)
	return { recoveries = 0, attempts = 0, stamps = {}, doc = doc }
end

-- The token of any Lua string: invalid UTF-8, NUL and overlong input are cut or replaced, so the result always matches "str".
local function str_token(x)
	local out, j, n = {}, 1, #x
	if n > 600 then n = 600 end
	while j <= n do
		local _, e = string.find(x, '^[\1-\127]+', j)
		if e then
			if e > n then e = n end
			out[#out + 1] = string.sub(x, j, e)
			j = e + 1
		elseif j <= n then
			local k = utf8_len(x, j, n + 1)
			if k then
				out[#out + 1] = string.sub(x, j, j + k - 1)
				j = j + k
			else
				out[#out + 1] = '?'
				j = j + 1
			end
		end
	end
	return cjson.encode(table.concat(out))
end

local function add_stamp(m, key)
	local tok = str_token(key)
	for _, t in ipairs(m.stamps) do
		if t == tok then return end
	end
	m.stamps[#m.stamps + 1] = tok
end

local function stamps_text(m)
	if #m.stamps == 0 then return '' end
	return ',"stamps":[' .. table.concat(m.stamps, ',') .. ']'
end

local function wrap(m)
	local parts = { '{"ferry":1,"recoveries":', string.format('%d', m.recoveries), ',"attempts":', string.format('%d', m.attempts), stamps_text(m) }
	if m.first_error then parts[#parts + 1] = ',"first_error":' .. m.first_error end
	if m.last_error then parts[#parts + 1] = ',"last_error":' .. m.last_error end
	if m.seq then parts[#parts + 1] = ',"seq":' .. string.format('%d', m.seq) end
	parts[#parts + 1] = ',"job":'
	parts[#parts + 1] = m.doc
	parts[#parts + 1] = '}'
	return table.concat(parts)
end

-- The dead entry of wrapper table m: the document is appended as it is, never encoded, so any bytes survive and a huge job costs a copy, not an encoding.
local function dead_entry(m, reason, id, worker, now)
	local e = { '{"reason":', str_token(reason), ',"attempts":', string.format('%d', m.attempts), ',"recoveries":', string.format('%d', m.recoveries), ',"time":', string.format('%d', now), ',"worker":', str_token(worker) }
	if id ~= nil and id ~= '' then e[#e + 1] = ',"id":' .. str_token(id) end
	e[#e + 1] = stamps_text(m)
	if m.first_error then e[#e + 1] = ',"first_error":' .. m.first_error end
	if m.last_error then e[#e + 1] = ',"last_error":' .. m.last_error end
	e[#e + 1] = ',"job":'
	e[#e + 1] = m.doc
	e[#e + 1] = '}'
	return table.concat(e)
end

local function now_ms()
	local t = redis.call('TIME')
	return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- A batch's kind and key, stored beside its processing list in bkeys as "r KEY" (documents taken from ready) or "w KEY" (wrappers taken from requeue). No entry: the list holds at most what a BLMOVE moved from ready.
local function batch_of(bkeys, wid)
	local v = redis.call('HGET', bkeys, wid)
	if not v then return 'r', nil end
	return string.sub(v, 1, 1), string.sub(v, 3)
end

-- Each element of a processing list of kind `kind` as a wrapper table, or nil when malformed.
local function held_job(kind, el)
	if kind == 'w' then return parse_wrapper(el) end
	return fresh(el)
end

-- RPUSH or LPUSH a list of values in chunks (unpack() is limited to a few thousand values).
local function push_all(cmd, key, vals)
	for i = 1, #vals, 1000 do
		redis.call(cmd, key, unpack(vals, i, math.min(i + 999, #vals)))
	end
end

-- cmd [key] [flag] args..., in chunks of at most per arguments (unpack() takes a few thousand at most).
local function call_chunked(cmd, key, args, per, flag)
	for i = 1, #args, per do
		local last = math.min(i + per - 1, #args)
		if key and flag then
			redis.call(cmd, key, flag, unpack(args, i, last))
		elseif key then
			redis.call(cmd, key, unpack(args, i, last))
		else
			redis.call(cmd, unpack(args, i, last))
		end
	end
end

-- Recovered this often, a job stops being recovered and is dead-lettered by the master itself: a job that kills its worker before the worker can bury it (max_recoveries + 1) must not cycle forever (doc/design.md, R11, I10).
local BURY_MARGIN = 3
-- Idempotency. A queue with an idempotency_window (in its config hash, field idempotency_window, ms, published by its masters: ids.lua) remembers the id of every job the enqueue script accepted, in the sorted set `ids`: a score in [0, 1) while the job waits, is scheduled, runs or is retried (the mark of the call that accepted it, ids_call_mark; 0 once replayed or restored); -1 while it is dead; once it is done, the Redis time (ms) at which to forget it, the window later; once its dead entry is purged or archived, minus that time (a producer waiting for it tells the two apart). The enqueue script answers "already accepted" for an id the set holds. The hash `idsha` binds each id to the job accepted under it: id -> "SHA1" (the SHA-1 of its document, in hex) or "SHA1 LAYOUT" (a chunk: ids_layout). Only that job moves its id (ids_mark checks the SHA-1): a job pushed past the script, or another job carrying the id, changes nothing. The member "" (no job's id) holds the newest call's mark.
local IDS_LIVE, IDS_DEAD, IDS_GONE = 0, -1, 'gone'
local IDS_MARK_UNIT = 2 ^ -52

-- The queue's idempotency_window in ms (0: it keeps no ids), from its tag "PREFIX:{QUEUE}:". A caller whose ACL may not read the config hash reads 0.
local function ids_window(tag)
	local v = redis.pcall('HGET', tag .. 'config', 'idempotency_window')
	return type(v) == 'string' and tonumber(v) or 0
end

-- How long a resolved id is kept: the window, or while the queue takes every job (a window turned off), the last window it had (ids_linger, written by ids.lua), so that the ids held then still resolve and a waiter still reads them.
local function ids_keep(tag)
	local window = ids_window(tag)
	if window > 0 then return window end
	local v = redis.pcall('HGET', tag .. 'config', 'ids_linger')
	return type(v) == 'string' and tonumber(v) or 0
end

-- The live mark of an enqueue call: a score in (0, 1) above every live score the set holds, so that no id held before the call can read as added by it, whatever anyone wrote into the set (a producer's ZADD cannot lower a mark to meet an old one). The member "" keeps it, which also makes every call a write, so that the caller's WAIT covers the writes that accepted its jobs before. Returns the mark and its text (%.17g: exact in a double and in its text), or nil when the live scores reach 1 (written by hand).
local function ids_call_mark(tag)
	local top = redis.call('ZREVRANGEBYSCORE', tag .. 'ids', '(1', '(0', 'WITHSCORES', 'LIMIT', 0, 1)
	local mark = (tonumber(top[2]) or 0) + IDS_MARK_UNIT
	if mark >= 1 then return nil end
	local text = string.format('%.17g', mark)
	redis.call('ZADD', tag .. 'ids', text, '')
	return mark, text
end

-- The SHA-1 of a document as idsha holds it.
local function ids_sha(doc)
	return redis.sha1hex(doc)
end

-- Of jobs (a list of {id, sha}; id "" skipped), those the set holds under their own SHA-1: the ids to mark (a list).
local function ids_owned(tag, jobs)
	local ids, shas = {}, {}
	for _, j in ipairs(jobs) do
		if j[1] ~= '' then
			ids[#ids + 1] = j[1]
			shas[#shas + 1] = j[2]
		end
	end
	local out = {}
	for i = 1, #ids, 1000 do
		local bound = redis.call('HMGET', tag .. 'idsha', unpack(ids, i, math.min(i + 999, #ids)))
		for k, v in ipairs(bound) do
			local n = i + k - 1
			if type(v) == 'string' and string.sub(v, 1, 40) == shas[n] then out[#out + 1] = ids[n] end
		end
	end
	return out
end

-- Mark the ids of jobs (a list of {id, sha}) with score; score nil: done, forgotten a window from now; IDS_GONE: purged from the dead list, the same time negated. Only an id the set holds for that very job is marked (ids_owned). Also with the window turned off: the ids held from before resolve and are forgotten after the last window (ids_keep).
local function ids_mark(tag, jobs, score)
	if #jobs == 0 then return end
	local ids = ids_owned(tag, jobs)
	if #ids == 0 then return end
	local keep = ids_keep(tag)
	if score == nil then
		score = string.format('%d', now_ms() + keep)
	elseif score == IDS_GONE then
		score = string.format('%d', -(now_ms() + keep))
	end
	local args = {}
	for _, id in ipairs(ids) do
		args[#args + 1] = score
		args[#args + 1] = id
	end
	call_chunked('ZADD', tag .. 'ids', args, 1000, 'XX')
end

-- Hold the ids of jobs (a list of {id, sha}) with score, held before or not (a restore, a redrive to another queue: the job is accepted there now); an id the set holds for another job stays that job's.
local function ids_hold(tag, jobs, score)
	local ids, shas = {}, {}
	for _, j in ipairs(jobs) do
		if j[1] ~= '' then
			ids[#ids + 1] = j[1]
			shas[j[1]] = j[2]
		end
	end
	local z, h = {}, {}
	for i = 1, #ids, 1000 do
		local bound = redis.call('HMGET', tag .. 'idsha', unpack(ids, i, math.min(i + 999, #ids)))
		for k, v in ipairs(bound) do
			local id = ids[i + k - 1]
			if type(v) ~= 'string' or string.sub(v, 1, 40) == shas[id] then
				z[#z + 1] = score
				z[#z + 1] = id
				h[#h + 1] = id
				h[#h + 1] = type(v) == 'string' and v or shas[id]
			end
		end
	end
	call_chunked('ZADD', tag .. 'ids', z, 1000)
	call_chunked('HSET', tag .. 'idsha', h, 1000)
end

-- The id a dead entry's job goes by: the entry's "id", else its document's "id" (a string, or an integer as written), else "".
local function dead_id(d)
	local ok, v = pcall(cjson.decode, d.id or '')
	if ok and type(v) == 'string' then return v end
	ok, v = pcall(cjson.decode, d.doc)
	if not ok or type(v) ~= 'table' then return '' end
	if type(v.id) == 'string' then return v.id end
	if type(v.id) == 'number' and v.id == math.floor(v.id) and math.abs(v.id) < 2 ^ 53 then return string.format('%d', v.id) end
	return ''
end

-- A dead entry's job as ids_mark takes it: {its id (dead_id), the SHA-1 of its document}.
local function dead_ref(d)
	local id = dead_id(d)
	if id == '' then return { '', '' } end
	return { id, ids_sha(d.doc) }
end


-- Hand a processing list back to requeue (doc/design.md, 3.6), stamped with the batch key (I2) and, when bump, one more recovery; counted as recovered in stats when count (its worker or host died, not a worker that stopped: a clean or fatal exit, ferryd stopping it). Everything is computed before the first write. A job past max_recoveries goes back too: the worker that takes it fences its stamps and buries it (it is dead only if it was never written).
local function reclaim(proc, requeue, dead, stats, owners, bkeys, wid, max_recoveries, bump, count)
	local jobs = redis.call('LRANGE', proc, 0, -1)
	local kind, batch = batch_of(bkeys, wid)
	-- a list of a worker handed back already (tombstoned) was a dead one's
	local owner = redis.call('HGET', owners, wid)
	if type(owner) == 'string' and string.sub(owner, 1, 5) == 'dead:' then count = true end
	-- no batch key: BLMOVE moved these documents from ready and no fetch counted them (fetch.lua)
	local uncounted = 0
	if not batch then uncounted = #jobs end
	local now = now_ms()
	local back, buried, buried_ids = {}, {}, {}
	for i = #jobs, 1, -1 do
		local m = held_job(kind, jobs[i])
		if not m then
			buried[#buried + 1] = dead_entry(fresh(jobs[i]), 'malformed ferry wrapper', nil, wid, now)
			buried_ids[#buried_ids + 1] = dead_ref({ doc = jobs[i] })
		else
			if batch then add_stamp(m, batch) end
			if bump and m.recoveries < 999999999 then m.recoveries = m.recoveries + 1 end
			if bump and m.recoveries > max_recoveries + BURY_MARGIN then
				m.last_error = str_token('worker died while processing')
				m.first_error = m.first_error or m.last_error
				buried[#buried + 1] = dead_entry(m, 'worker died while processing (it died before it could check the job\'s batches)', nil, wid, now)
				buried_ids[#buried_ids + 1] = dead_ref({ doc = m.doc })
			else
				back[#back + 1] = wrap(m)
			end
		end
	end
	push_all('RPUSH', requeue, back)
	push_all('LPUSH', dead, buried)
	ids_mark(string.sub(stats, 1, -6), buried_ids, IDS_DEAD)
	redis.call('DEL', proc)
	-- a tombstone, not a deletion: a command the dead worker sent before
	-- dying (a BLMOVE still blocked, a fetch in Redis' input buffer) may
	-- yet move a job into its list; fetch refuses a tombstoned worker and
	-- the reaper sweeps the list again before removing the tombstone
	redis.call('HSET', owners, wid, 'dead:' .. string.format('%d', now))
	redis.call('HDEL', bkeys, wid)
	if count and #back > 0 then redis.call('HINCRBY', stats, 'recovered', #back) end
	if #buried > 0 then redis.call('HINCRBY', stats, 'dead', #buried) end
	if uncounted > 0 then redis.call('HINCRBY', stats, 'enqueued', uncounted) end
	return { #back, #buried }
end

-- Protected cache keys. A cache key that live jobs name (waiting, scheduled, running, retried, recovered or dead) has no TTL, so no volatile-* policy can evict it nor can it expire, and it is counted in the queue's hash `protected` until the last job naming it is done or purged, when it is deleted. Two kinds of entry:
-- * A key of ferry's own, written by enqueue under "TAG cache:<16 hex digits>.<n>" (n from 0, below 1000, no leading zero), holds one job's data and no other job may name it. It has no entry of its own: the entry of its group "TAG cache:<16 hex digits>" reads "JOBS N BYTES LOST": how many live jobs name keys of the group, that its keys are <group>.0 to <group>.(N-1), their bytes (value, name and OWN_KEY_OVERHEAD each, as MEMORY USAGE counts them), and how many of them the sweep found lost (sweep.lua). A producer starts a group every thousand keys, so a batch costs one or two entries, whatever its size.
-- * Any other key (an application's, under cache_key_prefixes or in the cache space) has an entry of its own: how many live jobs name it (negative once the sweep found it lost).
local OWN_KEY_OVERHEAD = 64
local OWN_GROUP_HEX = 16

-- The queue's cache space, from the name of its protected hash ("TAG protected").
local function cache_space_of(protected)
	return string.sub(protected, 1, -10) .. 'cache:'
end

-- The group of a key of ferry's own in cache space `space`; nil for any other key. seen (a table, or nil) keeps the groups checked already, and in seen[1] the last one found: a batch's keys share a few, and this runs once a key.
local function own_group(space, key, seen)
	local dot, len = #space + OWN_GROUP_HEX + 1, #key
	if len <= dot or len > dot + 3 or string.byte(key, dot) ~= 46 or not string.find(key, '^%d+$', dot + 1) or (len > dot + 1 and string.byte(key, dot + 1) == 48) then return nil end
	local last = seen and seen[1]
	if last and string.find(key, last, 1, true) == 1 then return last end
	local g = string.sub(key, 1, dot - 1)
	local ok = seen and seen[g]
	if ok == nil then
		ok = string.sub(g, 1, #space) == space and string.find(g, '^%x+$', #space + 1) ~= nil
		if seen then seen[g] = ok end
	end
	if ok and seen then seen[1] = g end
	return ok and g or nil
end

-- The value of a key of ferry's own starts with the mark of the job that wrote it: the SHA-1 of its document in hex and OWN_MARK_SEP (enqueue.lua, restore.lua; src/redis/cache.c reads it). Does key, named by the job whose document has SHA-1 sha, belong to that job: any key but one of ferry's own that exists with another mark (or none)? A key that is gone belongs to whoever names it: releasing it only settles the count.
local OWN_MARK_SEP = ':'
local function key_is_jobs(space, key, sha)
	if not own_group(space, key) then return true end
	local head = redis.pcall('GETRANGE', key, 0, 40)
	if head == '' and redis.call('EXISTS', key) == 0 then return true end
	return type(head) == 'string' and head == sha .. OWN_MARK_SEP
end

-- The index of a key of ferry's own (own_group) in its group.
local function own_index(space, key)
	return tonumber(string.sub(key, #space + OWN_GROUP_HEX + 2))
end

-- Is field f of protected the entry of a group (own_group)?
local function is_group_field(space, f)
	return string.sub(f, 1, #space) == space and #f == #space + OWN_GROUP_HEX and string.find(f, '^%x+$', #space + 1) ~= nil
end

-- A group's entry, parsed (nil: none, or not a group's).
local function group_read(v)
	local c, n, b, l = string.match(v or '', '^(%d+) (%d+) (%d+) (%d+)$')
	if not c then return nil end
	return { jobs = tonumber(c), n = tonumber(n), bytes = tonumber(b), lost = tonumber(l) }
end

local function group_text(g)
	return string.format('%d %d %d %d', g.jobs, g.n, g.bytes, g.lost)
end

-- How many jobs an entry of its own counts for key (nil: none), and whether the key was found lost.
local function protected_entry(protected, key)
	local n = tonumber(redis.call('HGET', protected, key))
	if not n then return nil end
	return math.abs(n), n < 0
end

-- The counts of keys with entries of their own (a list, names may repeat), read in one HMGET per thousand: a table key -> count (negative: lost) or 0.
local function counts_of(protected, keys)
	local out = {}
	for i = 1, #keys, 1000 do
		local part = redis.call('HMGET', protected, unpack(keys, i, math.min(i + 999, #keys)))
		for j, v in ipairs(part) do out[keys[i + j - 1]] = tonumber(v) or 0 end
	end
	return out
end

-- Keys (a list) split into ferry's own, by group (group -> {jobs, n (with_index only), keys, entry: its entry now or nil}), and the others (a list, names may repeat). The groups' entries are read in one HMGET.
local function split_keys(protected, keys, with_index)
	local space, groups, names, others, seen = cache_space_of(protected), {}, {}, {}, {}
	for _, k in ipairs(keys) do
		local g = own_group(space, k, seen)
		if g then
			local e = groups[g]
			if not e then
				e = { jobs = 0, n = 0, keys = {} }
				groups[g] = e
				names[#names + 1] = g
			end
			e.jobs = e.jobs + 1
			if with_index then e.n = math.max(e.n, own_index(space, k) + 1) end
			e.keys[#e.keys + 1] = k
		else
			others[#others + 1] = k
		end
	end
	for i = 1, #names, 1000 do
		local part = redis.call('HMGET', protected, unpack(names, i, math.min(i + 999, #names)))
		for j, v in ipairs(part) do groups[names[i + j - 1]].entry = group_read(v) end
	end
	return groups, others
end

-- MEMORY USAGE of key k, or nil where it is missing or the command refused.
local function memory_usage(k)
	local ok, n = pcall(redis.call, 'MEMORY', 'USAGE', k)
	if ok and type(n) == 'number' then return n end
	return nil
end

-- Jobs naming keys (a list, names may repeat) are accepted: each counts one job more in its entry. value_bytes: key -> bytes of its value, where the caller knows them (else MEMORY USAGE tells). An entry of its own found lost counts as found again (the key exists now). A handful of commands whatever the count.
local function protect_keys(protected, keys, value_bytes)
	if #keys == 0 then return end
	local groups, others = split_keys(protected, keys, true)
	local fields = {}
	for g, e in pairs(groups) do
		local old = e.entry or { jobs = 0, n = 0, bytes = 0, lost = 0 }
		local bytes = 0
		for _, k in ipairs(e.keys) do
			local vb = value_bytes and value_bytes[k]
			bytes = bytes + (vb and vb + #k + OWN_KEY_OVERHEAD or memory_usage(k) or 0)
		end
		fields[#fields + 1] = g
		fields[#fields + 1] = group_text({ jobs = old.jobs + e.jobs, n = math.max(old.n, e.n), bytes = old.bytes + bytes, lost = old.lost })
	end
	if #others > 0 then
		local counts = counts_of(protected, others)
		for _, k in ipairs(others) do counts[k] = math.abs(counts[k]) + 1 end
		for k, n in pairs(counts) do
			fields[#fields + 1] = k
			fields[#fields + 1] = n
		end
	end
	call_chunked('HSET', protected, fields, 1000)
end

-- Of keys (a list) that failed jobs name, those that exist and that no entry counts (their jobs were pushed without the enqueue script, or by an older ferryd).
local function unprotected_of(protected, keys)
	local groups, others = split_keys(protected, keys)
	local out = {}
	for _, e in pairs(groups) do
		if not e.entry then
			for _, k in ipairs(e.keys) do out[#out + 1] = k end
		end
	end
	for k, n in pairs(#others > 0 and counts_of(protected, others) or {}) do
		if n == 0 then out[#out + 1] = k end
	end
	local present = {}
	for _, k in ipairs(out) do
		if redis.call('EXISTS', k) == 1 then present[#present + 1] = k end
	end
	return present
end

-- Jobs naming keys (a list, names may repeat) are done or purged. A key of ferry's own goes with its job; a group's entry goes with its last job. Any other key goes with the last job that names it. A key no entry counts (a job pushed without the enqueue script, or by an older ferryd) goes with its job, as it always did. A handful of commands whatever the count.
local function release_keys(protected, keys)
	if #keys == 0 then return end
	local groups, others = split_keys(protected, keys)
	local dels, unprotect, fields, keep = {}, {}, {}, nil
	for g, e in pairs(groups) do
		local deleted = 0
		for i = 1, #e.keys, 1000 do
			deleted = deleted + redis.call('DEL', unpack(e.keys, i, math.min(i + 999, #e.keys)))
		end
		local o = e.entry
		if o and o.jobs <= e.jobs then
			unprotect[#unprotect + 1] = g
		elseif o then
			local left = o.jobs - e.jobs
			o.bytes = o.bytes - math.floor(o.bytes * e.jobs / o.jobs)
			o.lost = math.max(0, math.min(o.lost - (e.jobs - deleted), left))
			o.jobs = left
			fields[#fields + 1] = g
			fields[#fields + 1] = group_text(o)
		end
	end
	local counts = #others > 0 and counts_of(protected, others) or {}
	for _, k in ipairs(others) do
		local n = counts[k]
		if n == 1 or n == -1 or n == 0 then
			dels[#dels + 1] = k
			if n ~= 0 then unprotect[#unprotect + 1] = k end
			counts[k] = false
			if keep then keep[k] = nil end
		elseif n then
			counts[k] = n > 0 and n - 1 or n + 1
			keep = keep or {}
			keep[k] = true
		end
	end
	for k in pairs(keep or {}) do
		fields[#fields + 1] = k
		fields[#fields + 1] = counts[k]
	end
	call_chunked('DEL', nil, dels, 1000)
	call_chunked('HDEL', protected, unprotect, 1000)
	call_chunked('HSET', protected, fields, 1000)
end

-- The bytes and the number of the protected keys: exact from every entry while there are at most PROTECTED_SAMPLE, else the mean of a sample of entries (HRANDFIELD) times their number. A group's entry counts its bytes and its keys not lost; an entry of its own, the key's MEMORY USAGE. 0 where HRANDFIELD is refused.
local PROTECTED_SAMPLE = 16

-- Add what MEMORY USAGE says of each key of list ks to a running {bytes, keys}.
local function add_usage(total, ks)
	for _, k in ipairs(ks) do
		local b = memory_usage(k)
		if b then
			total.bytes = total.bytes + b
			total.keys = total.keys + 1
		end
	end
end

local function protected_bytes_estimate(protected)
	local okn, n = pcall(redis.call, 'HLEN', protected)
	if not okn or type(n) ~= 'number' or n == 0 then return 0, 0 end
	local ok, fv
	if n <= PROTECTED_SAMPLE then
		ok, fv = pcall(redis.call, 'HGETALL', protected)
	else
		ok, fv = pcall(redis.call, 'HRANDFIELD', protected, PROTECTED_SAMPLE, 'WITHVALUES')
	end
	if not ok or type(fv) ~= 'table' or #fv == 0 then return 0, n end
	local bytes, keys, entries = 0, 0, 0
	for i = 1, #fv - 1, 2 do
		local g = group_read(fv[i + 1])
		local b = g and g.bytes or memory_usage(fv[i])
		if b then
			bytes = bytes + b
			keys = keys + (g and g.jobs - g.lost or 1)
			entries = entries + 1
		end
	end
	if entries == 0 then return 0, 0 end
	return math.floor(bytes / entries * n), math.floor(keys / entries * n + 0.5)
end

-- Bytes and keys of a queue's own data (tag "PREFIX:{QUEUE}:"): its lists, sets and hashes, the processing lists its owners hash names, and the protected cache keys (estimated: protected_bytes_estimate); then the protected keys' bytes and count alone. What MEMORY USAGE is refused on counts 0.
local QUEUE_KEYS = { 'ready', 'requeue', 'delayed', 'scheduled', 'dead', 'owners', 'bkeys', 'stats', 'protected', 'clock', 'masters', 'rate', 'ids', 'idsha', 'config' }
local function queue_bytes(tag)
	local t, names = { bytes = 0, keys = 0 }, {}
	for _, s in ipairs(QUEUE_KEYS) do names[#names + 1] = tag .. s end
	local ok, wids = pcall(redis.call, 'HKEYS', tag .. 'owners')
	if ok and type(wids) == 'table' then
		for _, w in ipairs(wids) do names[#names + 1] = tag .. 'proc:' .. w end
	end
	add_usage(t, names)
	local bytes, keys = t.bytes, t.keys
	local pb, np = protected_bytes_estimate(tag .. 'protected')
	return bytes + pb, keys + np, pb, np
end

-- The table entries of a key with a TTL (the main and the expires dict), freed with it.
local MEMORY_KEY_ENTRIES = 64

-- Redis' memory as ferry's refusal judges it, from INFO memory and keyspace and the queue's own bytes and keys: {used, max, policy, dataset, keys, volatile, own, own_keys, unevictable}, or nil and why (own: queue_bytes, counted under a volatile-* policy or when own_always). Under a volatile-* policy Redis can evict the keys with a TTL: they are given their share, by count, of the data that is not the queue's own, and their table entries; what Redis cannot evict is the rest of used_memory. Under any other policy it is all of it. src/redis/memory_check.c (memory_unevictable) computes the same from the same text, in the same order, in doubles.
local function memory_view(tag, own_always)
	local info = redis.pcall('INFO', 'memory', 'keyspace')
	if type(info) == 'table' and info.err then return nil, 'INFO failed: ' .. info.err end
	local m = { used = tonumber(string.match(info, '[\r\n]used_memory:(%d+)')), max = tonumber(string.match(info, '[\r\n]maxmemory:(%d+)')), dataset = tonumber(string.match(info, '[\r\n]used_memory_dataset:(%d+)')) or 0, policy = string.match(info, '[\r\n]maxmemory_policy:([%w%-]+)') or '', keys = 0, volatile = 0, own = 0, own_keys = 0, info = info }
	if not m.used or not m.max then return nil, 'INFO memory has no used_memory or maxmemory' end
	for k, e in string.gmatch(info, '[\r\n]db%d+:keys=(%d+),expires=(%d+)') do
		m.keys = m.keys + tonumber(k)
		m.volatile = m.volatile + tonumber(e)
	end
	local volatile_policy = m.max > 0 and string.sub(m.policy, 1, 9) == 'volatile-'
	if own_always or volatile_policy then m.own, m.own_keys = queue_bytes(tag) end
	m.unevictable = m.used
	if volatile_policy then
		local other_keys = math.max(m.keys - m.own_keys, 0)
		local other_data = math.max(m.dataset - m.own, 0)
		local share = 0
		if other_keys > 0 then share = math.min(m.volatile / other_keys, 1) end
		local evictable = math.floor(other_data * share) + m.volatile * MEMORY_KEY_ENTRIES
		m.unevictable = math.max(m.used - evictable, 0)
	end
	return m
end

-- "1.5 MiB", as src/redis/memory_check.c writes it.
local function fmt_bytes(n)
	local units, u = { 'KiB', 'MiB', 'GiB', 'TiB' }, 0
	while n >= 1024 and u < 4 do
		n = n / 1024
		u = u + 1
	end
	if u == 0 then return string.format('%d B', n) end
	return string.format('%.1f %s', n, units[u])
end

-- The producers' refusal: nil below refuse percent of maxmemory, else the percent and the message, which names the queue's own bytes and what to do.
local function memory_refusal(m, tag, refuse)
	if refuse <= 0 or m.max <= 0 then return nil end
	local pct = math.floor(m.unevictable * 100 / m.max)
	if pct < refuse then return nil end
	local own = m.own
	if m.own_keys == 0 then own = queue_bytes(tag) end
	local queue = string.match(tag, '{(.*)}:$') or tag
	local what = 'redis is ' .. pct .. '% full (maxmemory ' .. fmt_bytes(m.max) .. ', ' .. m.policy .. ')'
	if string.sub(m.policy, 1, 9) == 'volatile-' then
		what = 'what redis cannot evict is ' .. pct .. '% of maxmemory ' .. fmt_bytes(m.max) .. ' (' .. m.policy .. ' evicts only keys with a TTL)'
	end
	return pct, what .. ', queue ' .. queue .. ' holds ' .. fmt_bytes(own) .. ' of it (its jobs and protected cache keys); memory_refuse_percent ' .. refuse .. ': not enqueueing; drain the queue (is ferryd running, its sink up?) or raise maxmemory'
end

