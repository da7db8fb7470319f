#!lua flags=no-writes
-- dead_page.lua - a page of the dead-letter list for the dashboard
-- (src/ferryd/http/http_dead.c) without handing the master whole entries: per entry
-- its length, its name for replay and purge (the SHA-1 of its first
-- ARGV[4] bytes followed by its length in decimal: dead_entry_ref in
-- src/format/dead_entry.c computes the same) and at most its first ARGV[3] bytes.
-- It stops, after at least one entry, once the prefixes returned reach
-- ARGV[5] bytes in all (the master's memory stays bounded whatever the
-- entries' sizes) or the entries read reach ARGV[6] bytes (each LINDEX
-- copies a whole entry: Redis' time in the script stays bounded).
-- KEYS: dead   ARGV: offset, limit, prefix bytes, ref bytes, budget bytes,
--               read budget bytes
-- Returns { LLEN, len1, ref1, prefix1, len2, ref2, prefix2, ... }.
local offset, limit = tonumber(ARGV[1]), tonumber(ARGV[2])
local prefix, refn, budget = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local read_budget = tonumber(ARGV[6])
local out = { redis.call('LLEN', KEYS[1]) }
local used, read = 0, 0
for i = offset, offset + limit - 1 do
	if used >= budget or read >= read_budget then break end
	local el = redis.call('LINDEX', KEYS[1], i)
	if not el then break end
	local p = string.sub(el, 1, prefix)
	out[#out + 1] = #el
	out[#out + 1] = redis.sha1hex(string.sub(el, 1, refn) .. #el)
	out[#out + 1] = p
	used = used + #p
	read = read + #el
end
return out
