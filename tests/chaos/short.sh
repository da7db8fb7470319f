#!/bin/bash
# tests/chaos/short.sh - make check's form of the fault-injection suite:
# scripts/chaos --short with a seed from the clock (printed, so a failure
# can be replayed with scripts/chaos --seed N --short), against the
# binaries make check built (FERRYD, FERRYCTL, CHAOS_HELPER).
# FERRY_CHAOS=skip skips it (exit 77); to take it out of make check for
# good, empty chaos_tests in Makefile.am. FERRY_CHAOS=failover adds, after
# it, a 30 s run of scripts/chaos --failover (Redis behind Sentinel, about
# 35-40 s more on the 2-core VM); not by default: on a loaded machine the sentinels (down-after
# 1 s) fail over on their own at times, which ferry must survive, but the
# time it adds is less predictable.
set -euo pipefail
if [[ ${FERRY_CHAOS:-} == skip ]]; then
	echo "chaos: skipped (FERRY_CHAOS=skip)"
	exit 77
fi
if ((EUID != 0)); then
	echo "chaos: skipped (needs root: PID namespaces, PostgreSQL as user postgres)"
	exit 77
fi
src=${CHAOS_SRCDIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
seed=${FERRY_CHAOS_SEED:-$(date +%s)}
echo "chaos: seed $seed (replay: scripts/chaos --seed $seed --short)"
if [[ ${FERRY_CHAOS:-} != failover ]]; then
	exec "$src/scripts/chaos" --short --seed "$seed"
fi
"$src/scripts/chaos" --short --seed "$seed"
echo "chaos: failover pass, seed $seed (replay: scripts/chaos --seed $seed --minutes 0.5 --failover)"
exec "$src/scripts/chaos" --failover --minutes 0.5 --seed "$seed"
