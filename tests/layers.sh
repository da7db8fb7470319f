#!/bin/bash
# tests/layers.sh - make check: src/ stays in layers (doc/layout.md).
#  1. A file includes headers of its own folder and of the folders below
#     it, as `below` lists them (the include paths of Makefile.am say the
#     same to the compiler); a folder missing from the table fails.
#  2. No include cycle between modules: src/*/x.c and x.h are module x,
#     x -> y when either includes "y.h" (x_int.h, the private half of x.h
#     shared by x's .c files, may include x.h). Inside a folder too: a
#     cycle is how a layer stops being one.
#  3. x_int.h is included only by x.c and x_*.c.
set -euo pipefail
shopt -s nullglob
src=${CHAOS_SRCDIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}/src

# a folder of src/ and the folders its files may include from, besides its
# own, bottom first
declare -A below=(
	[base]=""
	[format]="base"
	[config]="base format"
	[redis]="base format config"
	[pg]="base format config"
	[handler]="base format config redis pg"
	[worker]="base format config redis pg handler"
	[ferryd]="base format config redis pg handler worker"
	[ferryd/http]="base format config redis pg handler worker ferryd"
	[ferryctl]="base format config redis pg"
)
# ferryd's entry opens the HTTP listener and hands the master its calls
# (struct master_http): the one file of src/ferryd that sees src/ferryd/http
declare -A also=([ferryd/main.c]="ferryd/http")

failed=0
files=$(cd "$src" && find . -name '*.[ch]' | sed 's|^\./||' | sort)
declare -A folder_of=()        # header name -> its folder
for f in $files; do
	case $f in *.h) folder_of[${f##*/}]=${f%/*};; esac
done

# every quoted include, "file header" a line, read once
all_includes=$(cd "$src" && for f in $files; do
	sed -n "s|^[[:blank:]]*#[[:blank:]]*include[[:blank:]]*\"\\([^\"/]*\\.h\\)\".*|$f \\1|p" "$f"
done)
# 1. layers
for d in $(printf '%s\n' $files | xargs -n1 dirname | sort -u); do
	[ -z "${below[$d]+set}" ] || continue
	echo "layers: src/$d is not in tests/layers.sh's table: say which" \
	    "layers it may include (and give it its include path in" \
	    "Makefile.am)" >&2
	failed=1
done
while read -r f h; do
	d=${f%/*}
	hd=${folder_of[$h]:-}
	[ -n "$hd" ] && [ "$hd" != "$d" ] && [ -n "${below[$d]+set}" ] || continue
	case " ${below[$d]} ${also[$f]:-} " in *" $hd "*) continue;; esac
	echo "layers: src/$f includes $h of src/$hd, a layer it may not" \
	    "see (src/$d sees: ${below[$d]:-nothing}); move the code down," \
	    "or pass a callback up" >&2
	failed=1
done <<<"$all_includes"

# 2. module cycles: module -> module, one edge a line
edges() {
	local f h stem dep
	while read -r f h; do
		stem=${f##*/}; stem=${stem%.*}
		dep=${h%.h}
		if [ "$dep" != "$stem" ] && [ "$stem" != "${dep}_int" ] &&
		    [ -n "${folder_of[$h]:-}" ]; then
			echo "$stem $dep"
		fi
	done <<<"$all_includes" | sort -u
}
# tsort names the modules of each loop it meets on stderr
loops=$(edges | tsort 2>&1 >/dev/null) || true
if [ -n "$loops" ]; then
	echo "layers: include cycle among src/ modules (x.c/x.h):" >&2
	printf '%s\n' "$loops" | sed 's/^tsort: .*loop:$/  a cycle of:/; s/^tsort: /    /' >&2
	echo "layers: cut it (a narrower header, a callback, a pure module)" >&2
	failed=1
fi

# 3. x_int.h is x's private half: only x.c and x_*.c include it
for f in $files; do
	case $f in *_int.h) ;; *) continue;; esac
	x=$(basename "$f" _int.h)
	for user in $(awk -v h="${x}_int.h" '$2 == h { print $1 }' \
	    <<<"$all_includes"); do
		u=${user##*/}; u=${u%.*}
		case $u in "$x" | "${x}"_*) ;; *)
			echo "layers: src/$user includes ${x}_int.h, private to" \
			    "${x}*.c; use ${x}.h or a narrower header" >&2
			failed=1;;
		esac
	done
done
exit $failed
