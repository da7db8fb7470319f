#!lua flags=allow-oom
-- reclaim.lua - the master hands back the processing list of one of its
-- workers that died (1: each job's recoveries + 1, counted as recovered;
-- 0: counted only, a batch that waited behind the one that ran) or that
-- it killed itself on QUIT or shutdown timeout, or that stopped (a clean
-- or fatal exit) ("stopped": neither). The jobs go to requeue, stamped
-- with the batch key (common.lua reclaim).
-- KEYS: proc, requeue, dead, stats, owners, bkeys
-- ARGV: worker id, max_recoveries, 1 / 0 / stopped
return reclaim(KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], ARGV[1],
	tonumber(ARGV[2]) or 0, ARGV[3] == '1', ARGV[3] ~= 'stopped')
