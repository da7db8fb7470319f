#!/bin/bash
# tests/chaos/short.sh - make check's form of the fault-injection suite:
# scripts/chaos --short with a seed from the clock (printed, so a failure
# can be replayed with scripts/chaos --seed N --short), against the
# binaries make check built (FERRYD, FERRYCTL, CHAOS_HELPER).
# FERRY_CHAOS=skip skips it (exit 77); to take it out of make check for
# good, empty chaos_tests in Makefile.am.
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
exec "$src/scripts/chaos" --short --seed "$seed"
