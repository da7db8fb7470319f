#!lua
local STR_MAX = 4096 local function ferry_error(code, msg) return redis.error_reply(code .. ' ' .. msg) end local function utf8_len(s, j, stop) local b = string.byte(s, j) local n, lo, hi = 0, 128, 191 if b >= 194 and b <= 223 then n = 2 elseif b >= 224 and b <= 239 then n = 3 elseif b >= 240 and b <= 244 then n = 4 else return nil end if j + n - 1 > stop - 1 then return nil end if b == 224 then lo = 160 elseif b == 237 then hi = 159 elseif b == 240 then lo = 144 elseif b == 244 then hi = 143 end local b1 = string.byte(s, j + 1) if b1 < lo or b1 > hi then return nil end for k = 2, n - 1 do local bk = string.byte(s, j + k) if bk < 128 or bk > 191 then return nil end end return n end local function lit(s, i, stop, l) if i and i + #l - 1 <= stop - 1 and string.sub(s, i, i + #l - 1) == l then return i + #l end return nil end local function number(s, i, stop, maxd) if not i then return nil end local a, e = string.find(s, '^%d+', i) if not a or e >= stop or e - a + 1 > maxd then return nil end if e > a and string.byte(s, a) == 48 then return nil end return e + 1, tonumber(string.sub(s, a, e)) end local function str(s, i, stop) if not i or i >= stop or string.byte(s, i) ~= 34 then return nil end local j = i + 1 while true do local _, e = string.find(s, '^[^"\\%z\1-\31\128-\255]+', j) if e then if e >= stop then return nil end j = e + 1 end if j >= stop then return nil end local b = string.byte(s, j) if b == 34 then break end if b == 92 then if j + 1 > stop - 1 then return nil end local x = string.sub(s, j + 1, j + 1) if string.find('"\\/bfnrt', x, 1, true) then j = j + 2 elseif x == 'u' and j + 5 <= stop - 1 and string.find(s, '^%x%x%x%x', j + 2) then local v = tonumber(string.sub(s, j + 2, j + 5), 16) if not ((v >= 1 and v <= 31) or v == 127) then return nil end j = j + 6 else return nil end elseif b < 32 then return nil else local n = utf8_len(s, j, stop) if not n then return nil end j = j + n end if j - i > STR_MAX then return nil end end if j - i + 1 > STR_MAX then return nil end return j + 1, string.sub(s, i, j) end local function opt_str(s, i, stop, member) local at = lit(s, i, stop, member) if not at then return i, nil end return str(s, at, stop) end local function stamps(s, i, stop, out) local at = lit(s, i, stop, ',"stamps":[') if not at then return i end local close = lit(s, at, stop, ']') if close then return close end while true do local tok at, tok = str(s, at, stop) if not at then return nil end out[#out + 1] = tok close = lit(s, at, stop, ']') if close then return close end at = lit(s, at, stop, ',') if not at then return nil end end end local function job_doc(s, i, stop) local at = lit(s, i, stop, ',"job":') if not at then return nil end return string.sub(s, at, stop - 1) end local function parse_wrapper(s) local stop = #s if stop < 2 or string.byte(s, stop) ~= 125 then return nil end local m, i = { stamps = {} }, nil i, m.recoveries = number(s, lit(s, 1, stop, '{"ferry":1,"recoveries":'), stop, 9) if not i then return nil end i, m.attempts = number(s, lit(s, i, stop, ',"attempts":'), stop, 9) if not i then return nil end i = stamps(s, i, stop, m.stamps) if not i then return nil end i, m.first_error = opt_str(s, i, stop, ',"first_error":') if not i then return nil end i, m.last_error = opt_str(s, i, stop, ',"last_error":') if not i then return nil end local at = lit(s, i, stop, ',"seq":') if at then i, m.seq = number(s, at, stop, 15) if not i then return nil end end m.doc = job_doc(s, i, stop) if not m.doc then return nil end return m end local function parse_dead(s) local stop = #s if stop < 2 or string.byte(s, stop) ~= 125 then return nil end local d, i = { stamps = {} }, nil i, d.reason = str(s, lit(s, 1, stop, '{"reason":'), stop) if not i then return nil end i, d.attempts = number(s, lit(s, i, stop, ',"attempts":'), stop, 9) if not i then return nil end i, d.recoveries = number(s, lit(s, i, stop, ',"recoveries":'), stop, 9) if not i then return nil end i, d.time = number(s, lit(s, i, stop, ',"time":'), stop, 15) if not i then return nil end i, d.worker = str(s, lit(s, i, stop, ',"worker":'), stop) if not i then return nil end i, d.id = opt_str(s, i, stop, ',"id":') if not i then return nil end i = stamps(s, i, stop, d.stamps) if not i then return nil end i, d.first_error = opt_str(s, i, stop, ',"first_error":') if not i then return nil end i, d.last_error = opt_str(s, i, stop, ',"last_error":') if not i then return nil end d.doc = job_doc(s, i, stop) if not d.doc then return nil end return d end local function fresh(doc) return { recoveries = 0, attempts = 0, stamps = {}, doc = doc } end local function str_token(x) local out, j, n = {}, 1, #x if n > 600 then n = 600 end while j <= n do local _, e = string.find(x, '^[\1-\127]+', j) if e then if e > n then e = n end out[#out + 1] = string.sub(x, j, e) j = e + 1 elseif j <= n then local k = utf8_len(x, j, n + 1) if k then out[#out + 1] = string.sub(x, j, j + k - 1) j = j + k else out[#out + 1] = '?' j = j + 1 end end end return cjson.encode(table.concat(out)) end local function add_stamp(m, key) local tok = str_token(key) for _, t in ipairs(m.stamps) do if t == tok then return end end m.stamps[#m.stamps + 1] = tok end local function stamps_text(m) if #m.stamps == 0 then return '' end return ',"stamps":[' .. table.concat(m.stamps, ',') .. ']' end local function wrap(m) local parts = { '{"ferry":1,"recoveries":', string.format('%d', m.recoveries), ',"attempts":', string.format('%d', m.attempts), stamps_text(m) } if m.first_error then parts[#parts + 1] = ',"first_error":' .. m.first_error end if m.last_error then parts[#parts + 1] = ',"last_error":' .. m.last_error end if m.seq then parts[#parts + 1] = ',"seq":' .. string.format('%d', m.seq) end parts[#parts + 1] = ',"job":' parts[#parts + 1] = m.doc parts[#parts + 1] = '}' return table.concat(parts) end local function dead_entry(m, reason, id, worker, now) local e = { '{"reason":', str_token(reason), ',"attempts":', string.format('%d', m.attempts), ',"recoveries":', string.format('%d', m.recoveries), ',"time":', string.format('%d', now), ',"worker":', str_token(worker) } if id ~= nil and id ~= '' then e[#e + 1] = ',"id":' .. str_token(id) end e[#e + 1] = stamps_text(m) if m.first_error then e[#e + 1] = ',"first_error":' .. m.first_error end if m.last_error then e[#e + 1] = ',"last_error":' .. m.last_error end e[#e + 1] = ',"job":' e[#e + 1] = m.doc e[#e + 1] = '}' return table.concat(e) end local function now_ms() local t = redis.call('TIME') return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) end local function batch_of(bkeys, wid) local v = redis.call('HGET', bkeys, wid) if not v then return 'r', nil end return string.sub(v, 1, 1), string.sub(v, 3) end local function held_job(kind, el) if kind == 'w' then return parse_wrapper(el) end return fresh(el) end local function push_all(cmd, key, vals) for i = 1, #vals, 1000 do redis.call(cmd, key, unpack(vals, i, math.min(i + 999, #vals))) end end local function call_chunked(cmd, key, args, per, flag) for i = 1, #args, per do local last = math.min(i + per - 1, #args) if key and flag then redis.call(cmd, key, flag, unpack(args, i, last)) elseif key then redis.call(cmd, key, unpack(args, i, last)) else redis.call(cmd, unpack(args, i, last)) end end end local BURY_MARGIN = 3 local IDS_LIVE, IDS_DEAD, IDS_GONE = 0, -1, 'gone' local IDS_MARK_UNIT = 2 ^ -52 local function ids_window(tag) local v = redis.pcall('HGET', tag .. 'config', 'idempotency_window') return type(v) == 'string' and tonumber(v) or 0 end local function ids_keep(tag) local window = ids_window(tag) if window > 0 then return window end local v = redis.pcall('HGET', tag .. 'config', 'ids_linger') return type(v) == 'string' and tonumber(v) or 0 end local function ids_call_mark(tag) local top = redis.call('ZREVRANGEBYSCORE', tag .. 'ids', '(1', '(0', 'WITHSCORES', 'LIMIT', 0, 1) local mark = (tonumber(top[2]) or 0) + IDS_MARK_UNIT if mark >= 1 then return nil end local text = string.format('%.17g', mark) redis.call('ZADD', tag .. 'ids', text, '') return mark, text end local function ids_sha(doc) return redis.sha1hex(doc) end local function ids_owned(tag, jobs) local ids, shas = {}, {} for _, j in ipairs(jobs) do if j[1] ~= '' then ids[#ids + 1] = j[1] shas[#shas + 1] = j[2] end end local out = {} for i = 1, #ids, 1000 do local bound = redis.call('HMGET', tag .. 'idsha', unpack(ids, i, math.min(i + 999, #ids))) for k, v in ipairs(bound) do local n = i + k - 1 if type(v) == 'string' and string.sub(v, 1, 40) == shas[n] then out[#out + 1] = ids[n] end end end return out end local function ids_mark(tag, jobs, score) if #jobs == 0 then return end local ids = ids_owned(tag, jobs) if #ids == 0 then return end local keep = ids_keep(tag) if score == nil then score = string.format('%d', now_ms() + keep) elseif score == IDS_GONE then score = string.format('%d', -(now_ms() + keep)) end local args = {} for _, id in ipairs(ids) do args[#args + 1] = score args[#args + 1] = id end call_chunked('ZADD', tag .. 'ids', args, 1000, 'XX') end local function ids_hold(tag, jobs, score) local ids, shas = {}, {} for _, j in ipairs(jobs) do if j[1] ~= '' then ids[#ids + 1] = j[1] shas[j[1]] = j[2] end end local z, h = {}, {} for i = 1, #ids, 1000 do local bound = redis.call('HMGET', tag .. 'idsha', unpack(ids, i, math.min(i + 999, #ids))) for k, v in ipairs(bound) do local id = ids[i + k - 1] if type(v) ~= 'string' or string.sub(v, 1, 40) == shas[id] then z[#z + 1] = score z[#z + 1] = id h[#h + 1] = id h[#h + 1] = type(v) == 'string' and v or shas[id] end end end call_chunked('ZADD', tag .. 'ids', z, 1000) call_chunked('HSET', tag .. 'idsha', h, 1000) end local function dead_id(d) local ok, v = pcall(cjson.decode, d.id or '') if ok and type(v) == 'string' then return v end ok, v = pcall(cjson.decode, d.doc) if not ok or type(v) ~= 'table' then return '' end if type(v.id) == 'string' then return v.id end if type(v.id) == 'number' and v.id == math.floor(v.id) and math.abs(v.id) < 2 ^ 53 then return string.format('%d', v.id) end return '' end local function dead_ref(d) local id = dead_id(d) if id == '' then return { '', '' } end return { id, ids_sha(d.doc) } end local function reclaim(proc, requeue, dead, stats, owners, bkeys, wid, max_recoveries, bump, count) local jobs = redis.call('LRANGE', proc, 0, -1) local kind, batch = batch_of(bkeys, wid) local owner = redis.call('HGET', owners, wid) if type(owner) == 'string' and string.sub(owner, 1, 5) == 'dead:' then count = true end local uncounted = 0 if not batch then uncounted = #jobs end local now = now_ms() local back, buried, buried_ids = {}, {}, {} for i = #jobs, 1, -1 do local m = held_job(kind, jobs[i]) if not m then buried[#buried + 1] = dead_entry(fresh(jobs[i]), 'malformed ferry wrapper', nil, wid, now) buried_ids[#buried_ids + 1] = dead_ref({ doc = jobs[i] }) else if batch then add_stamp(m, batch) end if bump and m.recoveries < 999999999 then m.recoveries = m.recoveries + 1 end if bump and m.recoveries > max_recoveries + BURY_MARGIN then m.last_error = str_token('worker died while processing') m.first_error = m.first_error or m.last_error buried[#buried + 1] = dead_entry(m, 'worker died while processing (it died before it could check the job\'s batches)', nil, wid, now) buried_ids[#buried_ids + 1] = dead_ref({ doc = m.doc }) else back[#back + 1] = wrap(m) end end end push_all('RPUSH', requeue, back) push_all('LPUSH', dead, buried) ids_mark(string.sub(stats, 1, -6), buried_ids, IDS_DEAD) redis.call('DEL', proc) redis.call('HSET', owners, wid, 'dead:' .. string.format('%d', now)) redis.call('HDEL', bkeys, wid) if count and #back > 0 then redis.call('HINCRBY', stats, 'recovered', #back) end if #buried > 0 then redis.call('HINCRBY', stats, 'dead', #buried) end if uncounted > 0 then redis.call('HINCRBY', stats, 'enqueued', uncounted) end return { #back, #buried } end local OWN_KEY_OVERHEAD = 64 local OWN_GROUP_HEX = 16 local function cache_space_of(protected) return string.sub(protected, 1, -10) .. 'cache:' end local function own_group(space, key, seen) local dot, len = #space + OWN_GROUP_HEX + 1, #key if len <= dot or len > dot + 3 or string.byte(key, dot) ~= 46 or not string.find(key, '^%d+$', dot + 1) or (len > dot + 1 and string.byte(key, dot + 1) == 48) then return nil end local last = seen and seen[1] if last and string.find(key, last, 1, true) == 1 then return last end local g = string.sub(key, 1, dot - 1) local ok = seen and seen[g] if ok == nil then ok = string.sub(g, 1, #space) == space and string.find(g, '^%x+$', #space + 1) ~= nil if seen then seen[g] = ok end end if ok and seen then seen[1] = g end return ok and g or nil end local OWN_MARK_SEP = ':' local function key_is_jobs(space, key, sha) if not own_group(space, key) then return true end local head = redis.pcall('GETRANGE', key, 0, 40) if head == '' and redis.call('EXISTS', key) == 0 then return true end return type(head) == 'string' and head == sha .. OWN_MARK_SEP end local function own_index(space, key) return tonumber(string.sub(key, #space + OWN_GROUP_HEX + 2)) end local function is_group_field(space, f) return string.sub(f, 1, #space) == space and #f == #space + OWN_GROUP_HEX and string.find(f, '^%x+$', #space + 1) ~= nil end local function group_read(v) local c, n, b, l = string.match(v or '', '^(%d+) (%d+) (%d+) (%d+)$') if not c then return nil end return { jobs = tonumber(c), n = tonumber(n), bytes = tonumber(b), lost = tonumber(l) } end local function group_text(g) return string.format('%d %d %d %d', g.jobs, g.n, g.bytes, g.lost) end local function protected_entry(protected, key) local n = tonumber(redis.call('HGET', protected, key)) if not n then return nil end return math.abs(n), n < 0 end local function counts_of(protected, keys) local out = {} for i = 1, #keys, 1000 do local part = redis.call('HMGET', protected, unpack(keys, i, math.min(i + 999, #keys))) for j, v in ipairs(part) do out[keys[i + j - 1]] = tonumber(v) or 0 end end return out end local function split_keys(protected, keys, with_index) local space, groups, names, others, seen = cache_space_of(protected), {}, {}, {}, {} for _, k in ipairs(keys) do local g = own_group(space, k, seen) if g then local e = groups[g] if not e then e = { jobs = 0, n = 0, keys = {} } groups[g] = e names[#names + 1] = g end e.jobs = e.jobs + 1 if with_index then e.n = math.max(e.n, own_index(space, k) + 1) end e.keys[#e.keys + 1] = k else others[#others + 1] = k end end for i = 1, #names, 1000 do local part = redis.call('HMGET', protected, unpack(names, i, math.min(i + 999, #names))) for j, v in ipairs(part) do groups[names[i + j - 1]].entry = group_read(v) end end return groups, others end local function memory_usage(k) local ok, n = pcall(redis.call, 'MEMORY', 'USAGE', k) if ok and type(n) == 'number' then return n end return nil end local function protect_keys(protected, keys, value_bytes) if #keys == 0 then return end local groups, others = split_keys(protected, keys, true) local fields = {} for g, e in pairs(groups) do local old = e.entry or { jobs = 0, n = 0, bytes = 0, lost = 0 } local bytes = 0 for _, k in ipairs(e.keys) do local vb = value_bytes and value_bytes[k] bytes = bytes + (vb and vb + #k + OWN_KEY_OVERHEAD or memory_usage(k) or 0) end fields[#fields + 1] = g fields[#fields + 1] = group_text({ jobs = old.jobs + e.jobs, n = math.max(old.n, e.n), bytes = old.bytes + bytes, lost = old.lost }) end if #others > 0 then local counts = counts_of(protected, others) for _, k in ipairs(others) do counts[k] = math.abs(counts[k]) + 1 end for k, n in pairs(counts) do fields[#fields + 1] = k fields[#fields + 1] = n end end call_chunked('HSET', protected, fields, 1000) end local function unprotected_of(protected, keys) local groups, others = split_keys(protected, keys) local out = {} for _, e in pairs(groups) do if not e.entry then for _, k in ipairs(e.keys) do out[#out + 1] = k end end end for k, n in pairs(#others > 0 and counts_of(protected, others) or {}) do if n == 0 then out[#out + 1] = k end end local present = {} for _, k in ipairs(out) do if redis.call('EXISTS', k) == 1 then present[#present + 1] = k end end return present end local function release_keys(protected, keys) if #keys == 0 then return end local groups, others = split_keys(protected, keys) local dels, unprotect, fields, keep = {}, {}, {}, nil for g, e in pairs(groups) do local deleted = 0 for i = 1, #e.keys, 1000 do deleted = deleted + redis.call('DEL', unpack(e.keys, i, math.min(i + 999, #e.keys))) end local o = e.entry if o and o.jobs <= e.jobs then unprotect[#unprotect + 1] = g elseif o then local left = o.jobs - e.jobs o.bytes = o.bytes - math.floor(o.bytes * e.jobs / o.jobs) o.lost = math.max(0, math.min(o.lost - (e.jobs - deleted), left)) o.jobs = left fields[#fields + 1] = g fields[#fields + 1] = group_text(o) end end local counts = #others > 0 and counts_of(protected, others) or {} for _, k in ipairs(others) do local n = counts[k] if n == 1 or n == -1 or n == 0 then dels[#dels + 1] = k if n ~= 0 then unprotect[#unprotect + 1] = k end counts[k] = false if keep then keep[k] = nil end elseif n then counts[k] = n > 0 and n - 1 or n + 1 keep = keep or {} keep[k] = true end end for k in pairs(keep or {}) do fields[#fields + 1] = k fields[#fields + 1] = counts[k] end call_chunked('DEL', nil, dels, 1000) call_chunked('HDEL', protected, unprotect, 1000) call_chunked('HSET', protected, fields, 1000) end local PROTECTED_SAMPLE = 16 local function add_usage(total, ks) for _, k in ipairs(ks) do local b = memory_usage(k) if b then total.bytes = total.bytes + b total.keys = total.keys + 1 end end end local function protected_bytes_estimate(protected) local okn, n = pcall(redis.call, 'HLEN', protected) if not okn or type(n) ~= 'number' or n == 0 then return 0, 0 end local ok, fv if n <= PROTECTED_SAMPLE then ok, fv = pcall(redis.call, 'HGETALL', protected) else ok, fv = pcall(redis.call, 'HRANDFIELD', protected, PROTECTED_SAMPLE, 'WITHVALUES') end if not ok or type(fv) ~= 'table' or #fv == 0 then return 0, n end local bytes, keys, entries = 0, 0, 0 for i = 1, #fv - 1, 2 do local g = group_read(fv[i + 1]) local b = g and g.bytes or memory_usage(fv[i]) if b then bytes = bytes + b keys = keys + (g and g.jobs - g.lost or 1) entries = entries + 1 end end if entries == 0 then return 0, 0 end return math.floor(bytes / entries * n), math.floor(keys / entries * n + 0.5) end local QUEUE_KEYS = { 'ready', 'requeue', 'delayed', 'scheduled', 'dead', 'owners', 'bkeys', 'stats', 'protected', 'clock', 'masters', 'rate', 'ids', 'idsha', 'config' } local function queue_bytes(tag) local t, names = { bytes = 0, keys = 0 }, {} for _, s in ipairs(QUEUE_KEYS) do names[#names + 1] = tag .. s end local ok, wids = pcall(redis.call, 'HKEYS', tag .. 'owners') if ok and type(wids) == 'table' then for _, w in ipairs(wids) do names[#names + 1] = tag .. 'proc:' .. w end end add_usage(t, names) local bytes, keys = t.bytes, t.keys local pb, np = protected_bytes_estimate(tag .. 'protected') return bytes + pb, keys + np, pb, np end local MEMORY_KEY_ENTRIES = 64 local function memory_view(tag, own_always) local info = redis.pcall('INFO', 'memory', 'keyspace') if type(info) == 'table' and info.err then return nil, 'INFO failed: ' .. info.err end local m = { used = tonumber(string.match(info, '[\r\n]used_memory:(%d+)')), max = tonumber(string.match(info, '[\r\n]maxmemory:(%d+)')), dataset = tonumber(string.match(info, '[\r\n]used_memory_dataset:(%d+)')) or 0, policy = string.match(info, '[\r\n]maxmemory_policy:([%w%-]+)') or '', keys = 0, volatile = 0, own = 0, own_keys = 0, info = info } if not m.used or not m.max then return nil, 'INFO memory has no used_memory or maxmemory' end for k, e in string.gmatch(info, '[\r\n]db%d+:keys=(%d+),expires=(%d+)') do m.keys = m.keys + tonumber(k) m.volatile = m.volatile + tonumber(e) end local volatile_policy = m.max > 0 and string.sub(m.policy, 1, 9) == 'volatile-' if own_always or volatile_policy then m.own, m.own_keys = queue_bytes(tag) end m.unevictable = m.used if volatile_policy then local other_keys = math.max(m.keys - m.own_keys, 0) local other_data = math.max(m.dataset - m.own, 0) local share = 0 if other_keys > 0 then share = math.min(m.volatile / other_keys, 1) end local evictable = math.floor(other_data * share) + m.volatile * MEMORY_KEY_ENTRIES m.unevictable = math.max(m.used - evictable, 0) end return m end local function fmt_bytes(n) local units, u = { 'KiB', 'MiB', 'GiB', 'TiB' }, 0 while n >= 1024 and u < 4 do n = n / 1024 u = u + 1 end if u == 0 then return string.format('%d B', n) end return string.format('%.1f %s', n, units[u]) end local function memory_refusal(m, tag, refuse) if refuse <= 0 or m.max <= 0 then return nil end local pct = math.floor(m.unevictable * 100 / m.max) if pct < refuse then return nil end local own = m.own if m.own_keys == 0 then own = queue_bytes(tag) end local queue = string.match(tag, '{(.*)}:$') or tag local what = 'redis is ' .. pct .. '% full (maxmemory ' .. fmt_bytes(m.max) .. ', ' .. m.policy .. ')' if string.sub(m.policy, 1, 9) == 'volatile-' then what = 'what redis cannot evict is ' .. pct .. '% of maxmemory ' .. fmt_bytes(m.max) .. ' (' .. m.policy .. ' evicts only keys with a TTL)' end return pct, what .. ', queue ' .. queue .. ' holds ' .. fmt_bytes(own) .. ' of it (its jobs and protected cache keys); memory_refuse_percent ' .. refuse .. ': not enqueueing; drain the queue (is ferryd running, its sink up?) or raise maxmemory' end -- enqueue.lua - the one atomic enqueue of every producer (ferryctl enqueue,
-- clients/python): each job checked the way a worker will read it (a JSON
-- object of valid UTF-8, strict JSON as jansson reads it, no larger than
-- max_job_bytes, not shaped like ferry's wrapper, an id and a cache_key of
-- the right types), Redis' fullness checked against memory_refuse_percent,
-- then the cache keys written or protected and the jobs LPUSHed onto
-- ready. All or nothing: every job is checked before the first write, and
-- one bad job refuses the whole call, naming its index (from 1). No
-- allow-oom: at maxmemory Redis refuses the script before it starts.
-- `enqueued` is not counted here: fetch.lua counts it when a worker takes
-- the job.
-- Cache keys: a job's data may live in a key the job names. Every such key
-- is protected from here until the last job naming it is done or purged
-- (protect_keys, common.lua): it carries no TTL, so no volatile-* policy
-- can evict it and no outage expires it. A value the caller hands over is
-- written under a key of the queue's own cache space, a key of its own
-- per job (the caller names it), so that no
-- later job can overwrite it: "<cache space><16 random hex digits>.<n>",
-- a new random part every thousand keys (own_group, common.lua). Such a
-- key is written only where no key is, or again by the same job (a call
-- sent again after a lost reply; a call naming a key another job wrote is
-- refused whole), and its value starts with the SHA-1 of the document of
-- the job that wrote it and ":" (OWN_MARK), so that a worker reads it only
-- for that job (src/redis/cache.c): no other job may name it. A key the application
-- wrote itself (in the cache space, or under one of the queue's
-- cache_key_prefixes) must exist when its job comes; its TTL is removed.
-- KEYS: ready, [scheduled (with a due marker),] [protected, then
--       the cache keys the jobs name (when they name any)]. (A producer's
--       ACL then needs only the keys its calls use.)
-- ARGV: max_job_bytes (0: no limit), memory_refuse_percent (0: not
--       checked), the number of options, the options, then per job: the
--       document, K, a value, and its binding. K = 0: the job names no
--       cache key; K > 0: write the value under KEYS[K] (the document names
--       that key); K < 0: the document names the existing key KEYS[-K]
--       (value ""). The binding: "" or the SHA-1 of the document in hex,
--       then, for a document whose "data" rows producers split into
--       chunks, " F+C" (its rows F to F+C-1 of the document its id names:
--       src/format/chunk.c). Needed (with "checked"; else computed here and
--       checked) for a job that writes a key of ferry's own or whose id
--       the call holds.
-- Options:
--       "checked": the caller (ferryctl) has parsed every document as a
--       worker will, so only the cheap checks run here (wrapper prefix,
--       empty, size), not the JSON ones, which cost ~6 us a job of Redis'
--       time. Nothing is trusted by this: a worker parses every job again
--       (the trust boundary is the worker, not this script).
--       "delay=MS" (from now, by the Redis clock) or "at=MS" (Unix ms, by
--       the Redis clock; KEYS[2] is then the scheduled set): jobs not yet
--       due go into scheduled, scored by
--       their due ms, each member "<us>-<n>:<document>" (us: Redis TIME in
--       microseconds, n: the job's index, raised past any member already
--       there, so that identical documents stay distinct; promote.lua
--       strips the prefix and LPUSHes the document onto ready). Due
--       already: pushed onto ready at once.
--       "prefix=P", any number of them: the queue's cache_key_prefixes,
--       under which a job may name an application's key.
--       "ids": each job has a fifth value, its id as a worker reads it
--       (its "id" member, an integer as written; "" without one). On a
--       queue with an idempotency_window (its config hash: ids_window,
--       common.lua), a job whose id the queue holds already (waiting,
--       scheduled, running, retried, dead, or done within the window), or
--       that an earlier job of the call has, is not pushed again nor its
--       cache value written: "already accepted". The others' ids are held
--       from here on, bound to their job (idsha: the binding). A chunk
--       whose id the queue holds for other rows (another chunk_rows: its
--       binding's F+C differs) refuses the call: the same document sent
--       in other chunks would write rows twice. Without "checked", each id
--       must be the document's.
-- Returns {jobs pushed, "" or why the memory was not checked, the indexes
-- (from 1) of the jobs already accepted}.
-- Errors: BADARGS ..., INVALID <index> <reason>, FULL <pct> <limit> <text>,
-- IDSTATE <text> (the ids set holds a live score no call can pass).
local max_bytes, refuse, nopts = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local checked, with_ids, due_kind, due_arg = false, false, nil, nil
local prefixes = {}
local opts_ok = nopts ~= nil and nopts >= 0 and nopts == math.floor(nopts) and 3 + nopts <= #ARGV
for a = 4, opts_ok and 3 + nopts or 3 do
	local kind, v = string.match(ARGV[a], '^(%a+)=(%d+)$')
	if ARGV[a] == 'checked' and not checked then
		checked = true
	elseif ARGV[a] == 'ids' and not with_ids then
		with_ids = true
	elseif (kind == 'delay' or kind == 'at') and not due_kind and #v <= 15 then
		due_kind, due_arg = kind, tonumber(v)
	elseif string.sub(ARGV[a], 1, 7) == 'prefix=' and #ARGV[a] > 7 then
		prefixes[#prefixes + 1] = string.sub(ARGV[a], 8)
	else
		opts_ok = false
	end
end
local STRIDE = with_ids and 5 or 4
opts_ok = opts_ok and (#ARGV - 3 - nopts) % STRIDE == 0
local scheduled = due_kind and KEYS[2]
local protected_at = due_kind and 3 or 2
local protected = KEYS[protected_at]
if not max_bytes or not refuse or not opts_ok or (due_kind and not scheduled) then
	return ferry_error('BADARGS', 'enqueue: KEYS are ready, [scheduled (with a due marker),] [protected, then cache keys]; ARGV is max_job_bytes, memory_refuse_percent, the number of options, the options ("checked", "delay=MS" or "at=MS", "prefix=P", "ids"), then four per job (five with "ids")')
end
local first_job = 4 + nopts
local FIRST_CACHE = protected_at + 1
local now = due_kind and now_ms() or 0
local due = due_kind == 'delay' and now + due_arg or due_arg or 0
local wait_ms = due > now and due - now or 0
-- the queue's own cache space, and the prefix of every key of ferry's
local cache_space = string.gsub(KEYS[1], 'ready$', 'cache:')
local ferry_space = string.match(KEYS[1], '^(.-:){') or ''
local WRAPPER_HEAD = '{"ferry":1,'
local JANSSON_MAX_DEPTH = 2048
local ID_MAX, CACHE_KEY_MAX = 128, 512

-- The document with its escapes blanked (\\ and \" as __), and that
-- with every string emptied: what lies between the strings.
local function blank_strings(s)
	local t = string.gsub(string.gsub(s, '\\\\', '__'), '\\"', '__')
	return t, (string.gsub(t, '"[^"]*"', '""'))
end

-- Does a decoded value hold a number beyond a double (1e400, read as inf)?
local function overflows(v)
	if type(v) == 'number' then return v == math.huge or v == -math.huge end
	if type(v) ~= 'table' then return false end
	for _, x in pairs(v) do
		if overflows(x) then return true end
	end
	return false
end

-- What cjson accepts but a worker (jansson) refuses, in document s that
-- cjson decoded into v (so its strings are well formed): control
-- characters (raw tabs and line breaks inside strings too), invalid UTF-8
-- (utf8_len: common.lua), the escape \u0000, "1." and "1.e5", numbers
-- beyond a double. Lua patterns cost tens of ns a byte, so each rule runs
-- only when a cheaper look finds what it is about.
local function strict(s, v)
	if string.find(s, '[^\32-\126]') then
		if string.find(s, '%c') then
			if string.find(s, '[%z\1-\8\11\12\14-\31]') then return 'a control character inside a string' end
			local t, between = blank_strings(s)
			if select(2, string.gsub(t, '[\t\n\r]', '')) ~= select(2, string.gsub(between, '[\t\n\r]', '')) then
				return 'a control character (tab or line break) inside a string'
			end
		end
		local p = string.find(s, '[\128-\255]')
		while p do
			local len = utf8_len(s, p, #s + 1)
			if not len then return 'invalid UTF-8 at byte ' .. p end
			p = string.find(s, '[\128-\255]', p + len)
		end
	end
	if string.find(s, 'u0000', 1, true) and string.find(string.gsub(s, '\\\\', '__'), '\\u0000', 1, true) then
		return 'the string escape \\u0000 (NUL)'
	end
	local dot = string.find(s, '.', 1, true)
	while dot do
		local b = string.byte(s, dot + 1)
		if not b or b < 48 or b > 57 then
			local _, between = blank_strings(s)
			if string.find(between, '%.%D') or string.sub(between, -1) == '.' then
				return 'a number with no digit after its "."'
			end
			break
		end
		dot = string.find(s, '.', dot + 1, true)
	end
	if overflows(v) then return 'real number overflow' end
	return nil
end

-- A member name as written (quotes included), decoded.
local function key_text(raw)
	if not string.find(raw, '\\', 1, true) then return string.sub(raw, 2, -2) end
	local ok, k = pcall(cjson.decode, raw)
	return ok and k or nil
end

-- The text of the top-level "id" member's value as written (the last one,
-- as jansson reads it; "" when not a number): cjson reads 1.0 and 1e2 as
-- integers. At once when it is the only "id" and comes first.
local function id_text(s)
	local first = string.find(s, '"id"', 1, true)
	if first and not string.find(s, '"id"', first + 1, true) and not string.find(s, '\\u', 1, true) then
		local num = string.match(s, '^[ \t\n\r]*{[ \t\n\r]*"id"[ \t\n\r]*:[ \t\n\r]*([%-%d.eE+]+)')
		if num then return num end
	end
	local i, n, depth, key, text = 1, #s, 0, nil, nil
	while i <= n do
		local q = string.find(s, '"', i, true) or n + 1
		local seg = string.sub(s, i, q - 1)
		local colon, num = string.match(seg, '^[ \t\n\r]*(:)[ \t\n\r]*([%-%d.eE+]*)')
		if key == 'id' and colon then text = num end
		local _, opens = string.gsub(seg, '[{%[]', '')
		local _, closes = string.gsub(seg, '[}%]]', '')
		depth = depth + opens - closes
		key = nil
		if q > n then break end
		local j = q + 1
		while true do
			local p = string.find(s, '["\\]', j)
			if not p then return text end
			if string.byte(s, p) == 92 then
				j = p + 2
			else
				if depth == 1 then key = key_text(string.sub(s, q, p)) end
				i = p + 1
				break
			end
		end
	end
	return text
end

-- Is this number's text an integer that fits 64 bits (as jansson reads it)?
local function int64_text(t)
	if not t or not string.find(t, '^%-?%d+$') then return false end
	local digits = string.gsub(t, '^%-', '')
	local limit = string.sub(t, 1, 1) == '-' and '9223372036854775808' or '9223372036854775807'
	return #digits < 19 or (#digits == 19 and digits <= limit)
end

-- Why the document can never be processed, by what costs nothing to see,
-- or nil.
local function cheap_refusal(doc)
	if string.sub(doc, 1, #WRAPPER_HEAD) == WRAPPER_HEAD then
		return 'it starts with {"ferry":1, the prefix of ferry\'s own wrapper format (doc/formats.md), which producers may not use: push the job\'s document itself'
	end
	if #doc == 0 then return 'empty job' end
	if max_bytes > 0 and #doc > max_bytes then
		return 'job is ' .. #doc .. ' bytes, over max_job_bytes ' .. max_bytes
	end
	return nil
end

-- Why the document can never be processed, or nil, its cache_key and its
-- id as a worker reads it ("" without one).
local function refusal(doc)
	local cheap = cheap_refusal(doc)
	if cheap then return cheap end
	local ok, v = pcall(cjson.decode, doc)
	if not ok then
		return 'malformed JSON: ' .. string.gsub(tostring(v), '^.-: ', '', 1)
	end
	local why = strict(doc, v)
	if why then return 'malformed JSON: ' .. why end
	if type(v) ~= 'table' or not string.find(doc, '^[ \t\n\r]*{') then return 'job is not a JSON object' end
	local id = v['id']
	if type(id) == 'string' and #id > ID_MAX then
		return 'job id is longer than ' .. ID_MAX .. ' bytes'
	elseif id ~= nil and type(id) ~= 'string' and (type(id) ~= 'number' or not int64_text(id_text(doc))) then
		return 'job id is not a string or integer'
	end
	local ck = v['cache_key']
	if ck ~= nil and (type(ck) ~= 'string' or #ck == 0 or string.find(ck, '%z')) then
		return 'cache_key is not a non-empty string'
	elseif ck ~= nil and #ck > CACHE_KEY_MAX then
		return 'cache_key is longer than ' .. CACHE_KEY_MAX .. ' bytes'
	end
	if type(id) == 'number' then id = id_text(doc) end
	-- jansson reads -0 as the integer 0
	if id == '-0' then id = '0' end
	return nil, ck, id or ''
end

-- The size of a cache value as the worker hands it on: a JSON string.
local function cache_json_len(value)
	local _, quotes = string.gsub(value, '["\\]', '')
	return #value + 2 + quotes
end

-- The key a job names, shown in a reason: at most 64 bytes, printable.
local function shown_key(key)
	local k = string.gsub(string.sub(key, 1, 64), '[^\32-\126]', '?')
	return '"' .. k .. (#key > 64 and '..."' or '"')
end

-- Why a job may not name this application's key (K < 0), or nil.
local function foreign_refusal(key, written)
	local allowed = string.sub(key, 1, #cache_space) == cache_space
	if not allowed and (ferry_space == '' or string.sub(key, 1, #ferry_space) ~= ferry_space) then
		for _, p in ipairs(prefixes) do
			if string.sub(key, 1, #p) == p then allowed = true end
		end
	end
	if not allowed then
		return 'cache_key ' .. shown_key(key) .. ' is outside the queue\'s cache space ' .. cache_space .. ' and cache_key_prefixes'
	end
	if own_group(cache_space, key) then
		return 'cache_key ' .. shown_key(key) .. ' is a key of ferry\'s own (written with the job that names it, deleted with it): no other job may name it'
	end
	if not written[key] and redis.call('EXISTS', key) == 0 then
		return 'cache_key ' .. shown_key(key) .. ' does not exist: write the key before the job that names it'
	end
	return nil
end

-- A job's binding argument: its SHA-1 (or "") and its layout (" F+C" or
-- ""), or nil when malformed. The SHA-1's digits are the caller's (40
-- lowercase hex digits): a wrong one binds only the caller's own job.
local function binding_of(arg)
	local n = #arg
	if n == 40 or n == 0 then return arg, '' end
	local layout = string.sub(arg, 41)
	if n < 40 or not string.find(layout, '^ %d+%+%d+$') then return nil end
	return string.sub(arg, 1, 40), layout
end

cjson.decode_invalid_numbers(false)
cjson.decode_max_depth(JANSSON_MAX_DEPTH)
-- the ids the jobs carry (named_ids; the job of each: at; as ZADD's
-- score-member pairs: id_pairs), for the idempotency check below; each
-- job's SHA-1 and layout where it needs them (shas, layouts)
local jobs, written, named_ids, at, id_pairs = {}, {}, {}, {}, {}
local shas, layouts = {}, {}
for a = first_job, #ARGV, STRIDE do
	local index = #jobs + 1
	local doc, k, value = ARGV[a], tonumber(ARGV[a + 1]), ARGV[a + 2]
	local sha, layout = binding_of(ARGV[a + 3])
	local id = with_ids and ARGV[a + 4] or ''
	local key = k and KEYS[math.abs(k)]
	if not k or k ~= math.floor(k) or (k ~= 0 and (math.abs(k) < FIRST_CACHE or not key)) or (k > 0 and string.sub(key, 1, #cache_space) ~= cache_space) or (k < 0 and value ~= '') then
		return ferry_error('BADARGS', 'enqueue: job ' .. index .. ': its cache key index must be 0, K in ' .. FIRST_CACHE .. '..' .. #KEYS .. ' naming a key of the queue\'s cache space ' .. cache_space .. ' to write its value under, or -K naming an existing key (value "")')
	end
	local own = k > 0 and own_group(cache_space, key) ~= nil
	if not sha or (checked and sha == '' and (own or id ~= '')) then
		return ferry_error('BADARGS', 'enqueue: job ' .. index .. ': its binding must be "" or the SHA-1 of its document in hex (then " F+C" for a chunk), and is needed for a job that writes a key of ferry\'s own or has an id')
	end
	local why, ck, doc_id = nil, nil, nil
	if checked then why = cheap_refusal(doc) else why, ck, doc_id = refusal(doc) end
	if not why and with_ids and not checked and id ~= doc_id then
		why = 'the caller passed id ' .. shown_key(id) .. ', the job\'s is ' .. shown_key(doc_id)
	end
	if not why and not checked and ck ~= key then
		why = ck and 'it names cache_key ' .. shown_key(ck) .. ': the caller must pass that key (KEYS, index -K) so that it is protected' or 'the caller passed a cache key the job does not name'
	end
	if not why and not checked and (own or id ~= '') then
		local real = ids_sha(doc)
		if sha ~= '' and sha ~= real then why = 'the caller passed SHA-1 ' .. sha .. ', the job\'s is ' .. real end
		sha = real
	end
	if not why and k > 0 and max_bytes > 0 and cache_json_len(value) > max_bytes then
		why = 'its data is ' .. cache_json_len(value) .. ' bytes as a JSON string, over max_job_bytes ' .. max_bytes
	end
	if not why and k < 0 then why = foreign_refusal(key, written) end
	if not why and own and written[key] then
		why = 'its cache key ' .. shown_key(key) .. ' is written by another job of this call: a key of ferry\'s own holds one job\'s data'
	end
	if not why and own and not key_is_jobs(cache_space, key, sha) then
		why = 'its cache key ' .. shown_key(key) .. ' exists already, written for another job: a key of ferry\'s own is written only where no key is, or again by the same job (draw a new random part for its group)'
	end
	if why then return ferry_error('INVALID', index .. ' ' .. why) end
	if k > 0 then written[key] = true end
	jobs[index] = doc
	shas[index], layouts[index] = sha, layout
	if id ~= '' then
		local n = #named_ids + 1
		named_ids[n] = id
		at[n] = index
		id_pairs[2 * n] = id
	end
end

-- Backpressure: refused only when what Redis cannot evict (memory_view:
-- under a volatile-* policy not the cache, which Redis evicts to make
-- room) reaches memory_refuse_percent of maxmemory (memory_refusal).
local unchecked = ''
if refuse > 0 then
	local tag = string.gsub(KEYS[1], 'ready$', '')
	local m, why = memory_view(tag, false)
	local pct, text = nil, nil
	if m then pct, text = memory_refusal(m, tag, refuse) else unchecked = why end
	if pct then return ferry_error('FULL', pct .. ' ' .. refuse .. ' ' .. text) end
end

-- Idempotency (common.lua): a job whose id the queue holds already, or
-- that an earlier job of this call has, is not pushed again; the others'
-- ids are held from now on, scored with this call's own live mark
-- (ids_call_mark: above every live score, and a write on every call, also
-- one whose jobs were all accepted already, so that the caller's WAIT,
-- which counts up to a connection's own last write, covers the writes
-- that accepted them), and bound to their job in idsha.
-- Chunks first (before any write): one whose id is held for other rows
-- refuses the call. Then all the call's ids go in one ZADD NX; only when
-- it added fewer than the call names (some held already, or named twice)
-- are their scores read: an id scored with another mark was held before.
local tag = string.gsub(KEYS[1], 'ready$', '')
local already, any_already, added = {}, false, 0
local window = with_ids and #named_ids > 0 and ids_window(tag) or 0
local ids_key, nnamed = tag .. 'ids', #named_ids
if window > 0 then
	local chunk_ids, chunk_at = {}, {}
	for n = 1, nnamed do
		if layouts[at[n]] ~= '' then
			chunk_ids[#chunk_ids + 1] = named_ids[n]
			chunk_at[#chunk_ids] = at[n]
		end
	end
	for from = 1, #chunk_ids, 1000 do
		local bound = redis.call('HMGET', tag .. 'idsha', unpack(chunk_ids, from, math.min(from + 999, #chunk_ids)))
		for j, v in ipairs(bound) do
			local index = chunk_at[from + j - 1]
			local held = type(v) == 'string' and string.sub(v, 41) or ''
			if held ~= '' and held ~= layouts[index] then
				return ferry_error('INVALID', index .. ' its id ' .. shown_key(chunk_ids[from + j - 1]) .. ' is held for rows' .. held .. ' (first+count) of its document, and this job has rows' .. layouts[index] .. ': the document was sent before in other chunks (another chunk_rows); send it again with the same chunk_rows, or its rows would be written twice')
			end
		end
	end
	local mark, mark_text = ids_call_mark(tag)
	if not mark then
		return ferry_error('IDSTATE', 'the ids set ' .. ids_key .. ' holds a live score at the top of (0, 1), which only a hand can write: no new call can be told from it; repair the set (doc/formats.md)')
	end
	for n = 1, nnamed do id_pairs[2 * n - 1] = mark_text end
	for from = 1, 2 * nnamed, 2000 do
		added = added + redis.call('ZADD', ids_key, 'NX', unpack(id_pairs, from, math.min(from + 1999, 2 * nnamed)))
	end
	if added < nnamed then
		local seen = {}
		for from = 1, nnamed, 1000 do
			local scores = redis.call('ZMSCORE', ids_key, unpack(named_ids, from, math.min(from + 999, nnamed)))
			for j = 1, #scores do
				local n = from + j - 1
				local id = named_ids[n]
				if tonumber(scores[j]) ~= mark or seen[id] then
					already[at[n]] = true
					any_already = true
				end
				seen[id] = true
			end
		end
	end
	local bind = {}
	for n = 1, nnamed do
		if not already[at[n]] then
			local i = at[n]
			bind[#bind + 1] = named_ids[n]
			bind[#bind + 1] = layouts[i] == '' and shas[i] or shas[i] .. layouts[i]
		end
	end
	call_chunked('HSET', tag .. 'idsha', bind, 1000)
end
local pushing, already_list = jobs, {}
if any_already then
	pushing = {}
	for i, doc in ipairs(jobs) do
		if already[i] then already_list[#already_list + 1] = i else pushing[#pushing + 1] = doc end
	end
end

-- the values in one MSET (no TTL), the application's keys made
-- persistent, all of them counted in protected in one HMGET and one HSET
-- (ferry's own keys in the entries of their groups: common.lua)
local named, values, value_bytes = {}, {}, {}
for a = first_job, #KEYS >= FIRST_CACHE and #ARGV or 0, STRIDE do
	local k = tonumber(ARGV[a + 1])
	if already[(a - first_job) / STRIDE + 1] then
		k = 0
	end
	if k > 0 then
		local value = ARGV[a + 2]
		if own_group(cache_space, KEYS[k]) then value = shas[(a - first_job) / STRIDE + 1] .. OWN_MARK_SEP .. value end
		values[#values + 1] = KEYS[k]
		values[#values + 1] = value
		named[#named + 1] = KEYS[k]
		value_bytes[KEYS[k]] = #value
	elseif k < 0 then
		redis.call('PERSIST', KEYS[-k])
		named[#named + 1] = KEYS[-k]
	end
end
call_chunked('MSET', nil, values, 1000)
protect_keys(protected, named, value_bytes)
if wait_ms > 0 then
	local t = redis.call('TIME')
	local us = t[1] .. string.format('%06d', tonumber(t[2]))
	for i, doc in ipairs(pushing) do
		local n = i
		while redis.call('ZADD', scheduled, 'NX', due, us .. '-' .. n .. ':' .. doc) == 0 do
			n = n + #pushing
		end
	end
	return { #pushing, unchecked, already_list }
end
for from = 1, #pushing, 1000 do
	redis.call('LPUSH', KEYS[1], unpack(pushing, from, math.min(from + 999, #pushing)))
end
return { #pushing, unchecked, already_list }
