#!lua flags=allow-oom
-- dead_move.lua - take a batch of dead-letter entries out of a queue's dead
-- list in one step: replayed (retry: each pushed to a requeue list as a
-- fresh wrapper that keeps the entry's stamps, as dead_retry.lua does) or
-- purged (the cache keys their jobs name released: release_keys). A redrive
-- (`ferryctl dead retry|purge` with a selection, the dashboard's "all
-- matching") runs it batch after batch: whenever it stops, every entry is
-- either still dead or moved, never both or neither.
-- Each entry comes with the index (negative: from the oldest end) at which
-- the caller read it. The entry there is checked byte for byte; when the
-- list moved meanwhile, the entry is looked for from the oldest end (LPOS);
-- an entry no longer there is gone (moved or purged by someone else) and
-- nothing is done for it. The entries found are overwritten with the
-- caller's tombstone (a string no entry is) and removed together (one LREM
-- from the oldest end, where they are: the cost is that of the part of the
-- list read, not of the list times the batch).
-- Retry: every entry must match doc/formats.md (else BADENTRY and nothing
-- done). The wrappers go onto requeue oldest first (LPUSH: the oldest is
-- taken first). The `replayed` counter of the entries' queue grows. Ids
-- (common.lua: idempotency): replayed in place, the job's id is live again;
-- replayed to another queue (requeue of that queue), the job's id is
-- accepted there (score 0 in its ids when that queue keeps ids) and its dead
-- entry is gone from this queue (forgotten a window from now, as a purge).
-- Purge: the ids are forgotten a window from now; a key of ferry's own
-- that another job wrote (key_is_jobs, common.lua) is not released.
-- KEYS: dead, stats, protected (of the entries' queue), requeue (of the
--       queue they go to; a purge ignores it), then the cache keys a purge
--       releases
-- ARGV: mode ("retry" or "purge"), tombstone, then per entry: its index,
--       its exact bytes, and (purge) the position in KEYS of the cache key
--       its job names ("0": none)
-- Returns { moved, gone }.
local mode, tomb = ARGV[1], ARGV[2]
local per = 2
if mode == 'purge' then per = 3 end
if (mode ~= 'retry' and mode ~= 'purge') or not tomb or #tomb < 16 or (#ARGV - 2) % per ~= 0 then
	return ferry_error('BADARGS', 'dead_move: ARGV is retry|purge, a tombstone, then per entry an index, its bytes (and for purge a key position)')
end
local tag = string.sub(KEYS[1], 1, -5)
local to_tag = string.sub(KEYS[4], 1, -8)
local entries, wrappers = {}, {}
for b = 3, #ARGV, per do
	local at = tonumber(ARGV[b])
	if not at then
		return ferry_error('BADARGS', 'dead_move: entry ' .. ((b - 3) / per + 1) .. ' has no index')
	end
	local d = parse_dead(ARGV[b + 1])
	if mode == 'retry' then
		if not d then
			return ferry_error('BADENTRY', 'not a dead entry of doc/formats.md: it can only be purged')
		end
		local m = fresh(d.doc)
		m.stamps = d.stamps
		wrappers[#entries + 1] = wrap(m)
	end
	local key = nil
	if mode == 'purge' then key = KEYS[tonumber(ARGV[b + 2]) or 0] end
	entries[#entries + 1] = { at = at, el = ARGV[b + 1], d = d, key = key }
end
local moved, gone = {}, 0
for i, e in ipairs(entries) do
	local at = e.at
	if redis.call('LINDEX', KEYS[1], at) ~= e.el then
		at = redis.call('LPOS', KEYS[1], e.el, 'RANK', -1)
	end
	if at then
		redis.call('LSET', KEYS[1], at, tomb)
		moved[#moved + 1] = i
	else
		gone = gone + 1
	end
end
if #moved == 0 then return { 0, gone } end
redis.call('LREM', KEYS[1], -#moved, tomb)
local ids, keys, pushed = {}, {}, {}
local space = cache_space_of(KEYS[3])
for _, i in ipairs(moved) do
	local e = entries[i]
	if e.d then ids[#ids + 1] = dead_ref(e.d) end
	if e.key and key_is_jobs(space, e.key, e.d and ids_sha(e.d.doc) or '') then keys[#keys + 1] = e.key end
	pushed[#pushed + 1] = wrappers[i]
end
if mode == 'purge' then
	release_keys(KEYS[3], keys)
	ids_mark(tag, ids, IDS_GONE)
	return { #moved, gone }
end
push_all('LPUSH', KEYS[4], pushed)
redis.call('HINCRBY', KEYS[2], 'replayed', #moved)
if to_tag == tag then
	ids_mark(tag, ids, IDS_LIVE)
	return { #moved, gone }
end
ids_mark(tag, ids, IDS_GONE)
if ids_window(to_tag) > 0 then ids_hold(to_tag, ids, IDS_LIVE) end
return { #moved, gone }
