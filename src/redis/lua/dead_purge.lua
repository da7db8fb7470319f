#!lua flags=allow-oom
-- dead_purge.lua - purge one dead-letter entry and release the cache key
-- its job names, in one step (release_keys, common.lua: the key is deleted
-- with the last job that names it), so that a purge never leaves a
-- protected key behind nor deletes the key of another live job. With an
-- empty entry, only the keys are released: `dead purge --all` deletes the
-- whole list first, then releases the keys of the entries it read.
-- KEYS: dead, protected, then the cache keys to release (at most
--       one with an entry)
-- ARGV: LREM count (1: from the newest end, -1: from the oldest), the
--       entry's exact bytes or "", [with "": the id of the job of an
--       entry `--all` deleted and the SHA-1 of its document]
-- A key of ferry's own that another job wrote (key_is_jobs, common.lua:
-- a forged job named it) is not released.
-- On a queue that keeps ids, the job's id is forgotten a window from now
-- (common.lua: idempotency).
-- Returns the entries removed (0: the entry was gone, nothing released);
-- the number of keys released when the entry is "".
-- allow-oom: it only deletes.
local count = tonumber(ARGV[1])
if not count or ARGV[2] == nil then
	return ferry_error('BADARGS', 'dead_purge: ARGV is an LREM count and an entry')
end
local removed = #KEYS - 2
if ARGV[2] ~= '' then
	removed = redis.call('LREM', KEYS[1], count, ARGV[2])
	if removed == 0 then return 0 end
end
local d = parse_dead(ARGV[2])
local sha = d and ids_sha(d.doc) or ARGV[4] or ''
local space, keys = cache_space_of(KEYS[2]), {}
for i = 3, #KEYS do
	if key_is_jobs(space, KEYS[i], sha) then keys[#keys + 1] = KEYS[i] end
end
release_keys(KEYS[2], keys)
if ARGV[2] == '' then removed = #keys end
ids_mark(string.sub(KEYS[2], 1, -10), { { d and dead_id(d) or ARGV[3] or '', sha } }, IDS_GONE)
return removed
