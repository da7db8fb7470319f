#!/bin/bash
# tests/ctl_docs.sh - make check: every command and option of ferryctl
# (read from `ferryctl --help`, the source of truth with the exit codes of
# src/base/exit_codes.h) is documented in doc/ferryctl.1, and every exit code
# in both. The man page is the reference; the other documents link to it.
# Fails naming what is missing.
set -euo pipefail
src=${CHAOS_SRCDIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
ctl=${FERRYCTL:-./ferryctl}
help=$("$ctl" --help)
missing=0

miss() {
	echo "ctl_docs: $1" >&2
	missing=$((missing + 1))
}

# commands: the lines two spaces in under a "commands ..." heading; "dead"
# takes its subcommand
commands=$(awk '/^commands/ { on = 1; next } /^[^ ]/ { on = 0 }
	on && /^  [a-z]/ { w = $1; if (w == "dead") w = w " " $2; print w }' \
	<<<"$help" | sort -u)
# options: --long and -x (not "-", the standard input)
options=$(grep -oE -- '--[a-z][a-z-]*|(^|[][ (|,])-[a-zA-Z]\b' <<<"$help" |
	sed 's/^[][ (|,]//' | sort -u)
# the values of src/base/exit_codes.h's CTL_EX_ lines: a number, or the name of
# a code defined before it (CTL_EX_CONFIG is FERRY_EX_CONFIG)
codes=$(awk '$1 == "#define" && $3 ~ /^[0-9]+$/ { v[$2] = $3 }
	$1 == "#define" && $3 ~ /^[A-Z_]+$/ && ($3 in v) { v[$2] = v[$3] }
	$1 == "#define" && $2 ~ /^CTL_EX_/ && ($2 in v) { print v[$2] }' \
	"$src/src/base/exit_codes.h" | sort -un)
[[ -n $commands && -n $options && -n $codes ]] || {
	echo "ctl_docs: could not read the commands, options or exit codes" >&2
	exit 1
}
echo "ctl_docs: $(wc -l <<<"$commands") commands, $(wc -l <<<"$options") options, $(wc -l <<<"$codes") exit codes"

# check WHAT TEXT PATTERN WHERE: each item on stdin (@ in PATTERN) is in TEXT
check() {
	local item
	while IFS= read -r item; do
		[[ -n $item ]] || continue
		grep -qE -- "${3//@/$item}" <<<"$2" || miss "$1 \"$item\" not in $4"
	done
}

# --help lists every exit code of src/base/exit_codes.h
check "exit code" "$(awk '/^exit status/ { on = 1; next } on' <<<"$help")" \
	'^  @ ' "ferryctl --help (src/base/exit_codes.h has it)" <<<"$codes"

# the man page, without groff escapes; its sections by name
man=$(sed -e 's/\\-/-/g' -e 's/\\f[BIRP]//g' -e "s/\\\\(aq/'/g" \
	"$src/doc/ferryctl.1")
section() {
	awk -v name="$1" '/^\.SH / { on = ($0 == ".SH " name); next } on' <<<"$man"
}
# a command is the start of a term: a .B, .BR or .BI line of COMMANDS
terms=$(section COMMANDS | sed -n 's/^\.B[IR]\{0,1\} //p' | tr -d '"' |
	tr -s ' ')
check command "$terms" '^@( |$)' "COMMANDS of doc/ferryctl.1" <<<"$commands"
check option "$man" '(^|[^a-z-])@([^a-z-]|$)' doc/ferryctl.1 <<<"$options"
check "exit code" "$(section "EXIT STATUS")" '^\.B @$' \
	"EXIT STATUS of doc/ferryctl.1" <<<"$codes"

if ((missing > 0)); then
	echo "ctl_docs: $missing missing: document them (--help is the list)" >&2
	exit 1
fi
echo "ctl_docs: every command, option and exit code is documented"
