#!/bin/bash
# tests/grafana_check.sh - make check: etc/grafana/ferry.json and
# etc/prometheus/ferry-alerts.yml name only metrics and labels ferryd exports
# (tests/grafana_check.py), and the rules pass `promtool check rules` and the
# cases of tests/grafana_check.test.yml (`promtool test rules`). promtool comes
# with Debian's prometheus package, which scripts/deps installs: without it
# the test fails, unless scripts/deps no longer lists prometheus.
set -euo pipefail
src=${CHAOS_SRCDIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
promtool=${PROMTOOL:-promtool}

python3 "$src/tests/grafana_check.py" "$src"
if ! command -v "$promtool" >/dev/null 2>&1; then
	if grep -qE '^[[:space:]]*prometheus([[:space:]]|$)' "$src/scripts/deps"; then
		echo "grafana_check: no $promtool on PATH: install Debian's prometheus package (scripts/deps)" >&2
		exit 1
	fi
	echo "grafana_check: no $promtool: the rules' syntax and cases are not checked"
	exit 0
fi
"$promtool" check rules "$src/etc/prometheus/ferry-alerts.yml"
"$promtool" test rules "$src/tests/grafana_check.test.yml"
