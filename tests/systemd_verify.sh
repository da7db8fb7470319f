#!/bin/bash
# tests/systemd_verify.sh - make check: `systemd-analyze verify` finds
# nothing to say about etc/ferryd.service (the unit `make install` and the
# Debian package install), with its binary paths pointed at this build's
# ferryd. Skipped (77) where systemd-analyze is not installed.
set -euo pipefail
src=${CHAOS_SRCDIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
ferryd=$(cd "$(dirname "${FERRYD:-./ferryd}")" && pwd)/$(basename "${FERRYD:-./ferryd}")
command -v systemd-analyze >/dev/null || {
	echo "systemd_verify: systemd-analyze is not installed: not checked"
	exit 77
}
[[ -x $ferryd ]] || { echo "systemd_verify: no ferryd at $ferryd" >&2; exit 1; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
sed "s|/usr/sbin/ferryd|$ferryd|g" "$src/etc/ferryd.service" >"$dir/ferryd.service"
grep -q '^Type=notify$' "$dir/ferryd.service" || {
	echo "systemd_verify: etc/ferryd.service is not Type=notify" >&2
	exit 1
}
if ! out=$(systemd-analyze verify --man=no "$dir/ferryd.service" 2>&1) ||
	[[ -n $out ]]; then
	echo "systemd_verify: systemd-analyze verify etc/ferryd.service:" >&2
	printf '%s\n' "$out" >&2
	exit 1
fi
echo "systemd_verify: etc/ferryd.service verified"
