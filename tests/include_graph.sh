#!/bin/bash
# tests/include_graph.sh - make check: no include cycle between the modules
# of src/. A module is a stem: src/x.c and src/x.h are module x; x -> y when
# either includes "y.h" (but x_int.h, the private half of x.h shared by
# x's .c files, may include x.h). A cycle (x needs y needs x) is how a layer
# stops being one, so the build refuses new ones. The cycles below are known and
# being cut: each is allowed while it lasts, and the check fails once one
# is gone so that its line is removed (the list only shrinks).
set -euo pipefail
shopt -s nullglob
src=${CHAOS_SRCDIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}/src

# One known cycle a line: its modules, blank-separated.
known_cycles=(
)

# module -> module, one edge a line (self-includes dropped)
edges() {
	local f stem
	local inc='s/^[[:blank:]]*#[[:blank:]]*include[[:blank:]]*"\([^"/]*\)\.h".*/\1/p'
	for f in "$src"/*/*.c "$src"/*/*.h "$src"/*/*/*.c "$src"/*/*/*.h; do
		stem=$(basename "$f"); stem=${stem%.*}
		sed -n "$inc" "$f" | while read -r dep; do
			# x_int.h, x's private header, extends x.h
			if [ "$dep" != "$stem" ] && [ "$stem" != "${dep}_int" ] &&
			    { compgen -G "$src/*/$dep.h" || compgen -G "$src/*/*/$dep.h"; } >/dev/null; then
				echo "$stem $dep"
			fi
		done
	done | sort -u
}

# the modules of a known cycle that an edge stays within, or nothing
in_known() {
	local c
	for c in "${known_cycles[@]}"; do
		case " $c " in *" $1 "*) case " $c " in *" $2 "*)
			echo "$c"; return;; esac;; esac
	done
}

all=$(edges)
rest=""
while read -r a b; do
	if [ -z "$(in_known "$a" "$b")" ]; then rest+="$a $b"$'\n'; fi
done <<<"$all"

failed=0
# tsort names the modules of each loop it meets on stderr
loops=$(printf '%s' "$rest" | tsort 2>&1 >/dev/null) || true
if [ -n "$loops" ]; then
	echo "include_graph: include cycle among src/ modules (x.c/x.h):" >&2
	printf '%s\n' "$loops" | sed 's/^tsort: .*loop:$/  a cycle of:/; s/^tsort: /    /' >&2
	echo "include_graph: cut it (a narrower header, a callback, a pure module)" \
	    "instead of adding it to known_cycles" >&2
	failed=1
fi
for c in "${known_cycles[@]}"; do
	# still a cycle: tsort meets a loop in the edges among its modules
	inner=$(printf '%s\n' "$all" | awk -v c=" $c " \
	    'index(c, " " $1 " ") && index(c, " " $2 " ")')
	if [ -z "$(printf '%s\n' "$inner" | tsort 2>&1 >/dev/null)" ]; then
		echo "include_graph: known cycle \"$c\" is gone: remove it" \
		    "from known_cycles in tests/include_graph.sh" >&2
		failed=1
	fi
done
# x_int.h is x's private half: only x.c and x_*.c include it
for f in "$src"/*/*_int.h "$src"/*/*/*_int.h; do
	x=$(basename "$f" _int.h)
	for user in $(grep -l "^#include \"${x}_int.h\"" "$src"/*/*.c "$src"/*/*.h "$src"/*/*/*.c "$src"/*/*/*.h); do
		u=$(basename "$user"); u=${u%.*}
		case $u in "$x" | "${x}"_*) ;; *)
			echo "include_graph: src/$(basename "$user") includes" \
			    "${x}_int.h, private to ${x}*.c; use ${x}.h or a" \
			    "narrower header" >&2
			failed=1;;
		esac
	done
done
exit $failed
