#!lua flags=allow-oom
-- dead_retry.lua - replay one dead-letter entry (doc/formats.md): remove
-- exactly that entry (searched from the oldest end, where `retry --all`
-- starts) and push its document to requeue as a fresh wrapper (attempts
-- and recoveries 0) that keeps the entry's stamps, so the sink fences
-- those batches again before it writes the job. The entry is read and the
-- wrapper built before the first write; a malformed entry is refused
-- (BADENTRY) and stays where it is. On a queue that keeps ids, the job's
-- id is live again (common.lua: idempotency).
-- KEYS: dead, requeue, stats   ARGV: entry bytes
-- Returns 1 when replayed, 0 when the entry was gone.
local d = parse_dead(ARGV[1] or '')
if not d then
	return ferry_error('BADENTRY', 'not a dead entry of doc/formats.md: it can only be purged')
end
local m = fresh(d.doc)
m.stamps = d.stamps
local el = wrap(m)
if redis.call('LREM', KEYS[1], -1, ARGV[1]) == 0 then return 0 end
redis.call('LPUSH', KEYS[2], el)
redis.call('HINCRBY', KEYS[3], 'replayed', 1)
ids_mark(string.sub(KEYS[3], 1, -6), { dead_ref(d) }, IDS_LIVE)
return 1
