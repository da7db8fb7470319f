# scripts/bench.d/cache.sh - `scripts/bench cache [memory] [rates] [backlog]`,
# sourced by scripts/bench once its helpers are defined (start_redis,
# write_config, start_ferryd, make_jobs, run_helper, median, and start_pg of
# scripts/bench.d/pg.sh): what protected cache keys cost (`ferryctl enqueue
# --cache` writes each job's "data" to a key of its own without a TTL, and
# counts it in its group's entry of ferry:{q}:protected; settle.lua deletes the
# key and takes it off the count). Parts (all
# three without an argument):
#
#   memory   Redis bytes per waiting job: N jobs (make_jobs: 100-byte
#            documents) enqueued into a queue with no workers, used_memory
#            after - before, / N; then the same N jobs with --cache, each
#            job {"id":"c<n>","data":<the 100-byte document>}: bytes per
#            job, MEMORY USAGE of ready, of ferry:{bench}:protected (/ N:
#            what the protection costs per key) and of one cache key. The
#            script cache is loaded before the first reading (one job
#            enqueued, FLUSHALL), so it is not in the figures.
#   rates    jobs/s of `ferryctl enqueue` of N jobs, plain and --cache
#            (without maxmemory, and with maxmemory 4gb volatile-lru, where
#            the refusal reads MEMORY USAGE of the queue's keys), and of a
#            drain of N jobs (noop, which only checks that a cache key
#            exists, with TYPE, and exec with a trivial acking handler, which reads
#            every value), with and without --cache; with this build and,
#            given BENCH_CACHE_BEFORE_DIR, with the build of the commit
#            before, taking turns (run 1: now, before; run 2: before, now;
#            ...). The ratio now/before of the medians; the goal is 0.90.
#            Beside the wall clock, redis-server's CPU time per job
#            (/proc/PID/stat utime + stime, 10 ms ticks), which the load of
#            a shared machine blurs less.
#   backlog  BENCH_CACHE_ROWS rows in documents of BENCH_CACHE_DOC_ROWS
#            rows, enqueued with --cache --chunk-rows BENCH_CACHE_CHUNK_ROWS
#            (BENCH_CACHE_ENQ_DOCS documents a ferryctl call, one atomic
#            enqueue.lua call) into a Redis with maxmemory
#            BENCH_CACHE_MAXMEMORY and volatile-lru while an application
#            cache churns (tests/bench/churn.c: SET app:cache:<random> of
#            8 KiB PX 60000, pipelined 16 deep, as fast as Redis takes
#            them; it fills maxmemory before the first enqueue); ferryd held
#            off for BENCH_CACHE_WAIT s, then a postgres queue (private
#            PostgreSQL, table bench_cache) drains it while the churn goes
#            on. A refused enqueue (exit 75) is retried every 0.2 s; the
#            first refusal starts ferryd at once (a queue refused while
#            nothing drains it would wait for ever), and a call refused for
#            BENCH_CACHE_REFUSE_MAX s gives up (the rest is not tried).
#            Checked: rows written = distinct n = rows enqueued,
#            cache_missing, dead, evicted_keys, protected keys.
#            BENCH_CACHE_BACKLOG_BEFORE=yes: the same with the build before.
#
# The build before: a directory holding ferryd and ferryctl of the commit
# before (e2efdf8: cache keys SET ... PX cache_ttl, no protected hash, the
# refusal from INFO memory alone), e.g.
#
#   git worktree add /tmp/ferry-before e2efdf8 && cd /tmp/ferry-before &&
#   autoreconf -fi && mkdir b && cd b && ../configure && make -j2 ferryd ferryctl
#   BENCH_CACHE_BEFORE_DIR=/tmp/ferry-before/b scripts/bench cache
#   git worktree remove --force /tmp/ferry-before     # afterwards
#
# Environment (defaults in brackets): BENCH_CACHE_CELLS [all] (rates: a
# regular expression naming the cells to run, e.g. drain-noop-cache|enq-cache),
# BENCH_CACHE_JOBS [100000] (memory,
# rates), BENCH_CACHE_EXEC_JOBS [20000] (the rates' exec drains, at most
# BENCH_CACHE_JOBS: a handler process a batch is slow), BENCH_CACHE_WORKERS
# [2], BENCH_CACHE_BATCH [100] (the rates' drains), BENCH_CACHE_ROWS
# [230000], BENCH_CACHE_DOC_ROWS [500], BENCH_CACHE_CHUNK_ROWS [250],
# BENCH_CACHE_ENQ_DOCS [20],
# BENCH_CACHE_MAXMEMORY [64mb], BENCH_CACHE_WAIT [60] (s),
# BENCH_CACHE_REFUSE_MAX [60] (s), BENCH_CACHE_PG_WORKERS [2],
# BENCH_CACHE_PG_BATCH [4] (jobs of BENCH_CACHE_CHUNK_ROWS rows),
# BENCH_CACHE_BEFORE_DIR [], BENCH_CACHE_BACKLOG_BEFORE [no], BENCH_RUNS [3],
# BENCH_REDIS_ARGS, BENCH_PG_ARGS, PG_BINDIR, FERRYD, FERRYCTL, and
# BENCH_BUILDDIR [build]: where ferryd and ferryctl are (built when
# missing) and the helpers are built (BENCH_BUILDDIR/bench/).
# shellcheck shell=bash disable=SC2154,SC2034  # variables of scripts/bench

ca_n=${BENCH_CACHE_JOBS:-100000}
ca_exec_n=${BENCH_CACHE_EXEC_JOBS:-20000}
ca_workers=${BENCH_CACHE_WORKERS:-2}
ca_batch=${BENCH_CACHE_BATCH:-100}
ca_rows=${BENCH_CACHE_ROWS:-230000}
ca_doc_rows=${BENCH_CACHE_DOC_ROWS:-500}
ca_chunk_rows=${BENCH_CACHE_CHUNK_ROWS:-250}
ca_enq_docs=${BENCH_CACHE_ENQ_DOCS:-20}
ca_maxmemory=${BENCH_CACHE_MAXMEMORY:-64mb}
ca_wait=${BENCH_CACHE_WAIT:-60}
ca_refuse_max=${BENCH_CACHE_REFUSE_MAX:-60}
ca_pg_workers=${BENCH_CACHE_PG_WORKERS:-2}
ca_pg_batch=${BENCH_CACHE_PG_BATCH:-4}
ca_before_dir=${BENCH_CACHE_BEFORE_DIR:-}
ca_backlog_before=${BENCH_CACHE_BACKLOG_BEFORE:-no}
ca_rates_maxmemory=4gb

for v in ca_n ca_exec_n ca_workers ca_batch ca_rows ca_doc_rows ca_chunk_rows ca_enq_docs \
	ca_wait ca_refuse_max ca_pg_workers ca_pg_batch; do
	[[ ${!v} =~ ^[1-9][0-9]*$ ]] || die "BENCH_CACHE_* take positive integers, not \"${!v}\" ($v)"
done
[[ -z ${BENCH_CACHE_EXEC_JOBS:-} ]] && ((ca_exec_n > ca_n)) && ca_exec_n=$ca_n
((ca_exec_n <= ca_n)) || die "BENCH_CACHE_EXEC_JOBS must be at most BENCH_CACHE_JOBS"
[[ $ca_maxmemory =~ ^[1-9][0-9]*(kb|mb|gb)?$ ]] || die "BENCH_CACHE_MAXMEMORY is a size (64mb), not \"$ca_maxmemory\""
[[ $ca_backlog_before == yes || $ca_backlog_before == no ]] ||
	die "BENCH_CACHE_BACKLOG_BEFORE is yes or no, not \"$ca_backlog_before\""
# one ferryctl call of the backlog must be one enqueue.lua call (CTL_CHUNK
# jobs), so that a refused call pushed nothing and is simply tried again
((ca_enq_docs * ((ca_doc_rows + ca_chunk_rows - 1) / ca_chunk_rows) <= 1000)) ||
	die "BENCH_CACHE_ENQ_DOCS x chunks per document must be at most 1000 jobs (one enqueue.lua call)"
if [[ -n $ca_before_dir ]]; then
	ca_before_dir=$(cd "$ca_before_dir" 2>/dev/null && pwd) ||
		die "BENCH_CACHE_BEFORE_DIR: no directory ${BENCH_CACHE_BEFORE_DIR}"
	[[ -x $ca_before_dir/ferryd && -x $ca_before_dir/ferryctl ]] ||
		die "BENCH_CACHE_BEFORE_DIR: no ferryd and ferryctl in $ca_before_dir"
fi
[[ $ca_backlog_before == no || -n $ca_before_dir ]] ||
	die "BENCH_CACHE_BACKLOG_BEFORE=yes needs BENCH_CACHE_BEFORE_DIR"
if [[ -n ${BENCH_BUILDDIR:-} ]]; then
	mkdir -p "$BENCH_BUILDDIR" || die "BENCH_BUILDDIR: cannot create $BENCH_BUILDDIR"
	builddir=$(cd "$BENCH_BUILDDIR" && pwd)
fi

ca_parts=()
for p in "$@"; do
	case $p in
		memory | rates | backlog) ca_parts+=("$p") ;;
		*) usage >&2; exit 64 ;;
	esac
done
((${#ca_parts[@]} > 0)) || ca_parts=(memory rates backlog)
ca_has() { [[ " ${ca_parts[*]} " == *" $1 "* ]]; }

# The command line that reproduces part $1: its own variables only.
ca_cmdline() {
	local part=$1 v line="$prog cache $1"
	local -a envs=(BENCH_RUNS BENCH_REDIS_ARGS FERRYD FERRYCTL BENCH_BUILDDIR BENCH_CACHE_BEFORE_DIR)
	case $part in
		memory) envs+=(BENCH_CACHE_JOBS) ;;
		rates) envs+=(BENCH_CACHE_JOBS BENCH_CACHE_EXEC_JOBS BENCH_CACHE_WORKERS BENCH_CACHE_BATCH) ;;
		backlog) envs+=(BENCH_CACHE_ROWS BENCH_CACHE_DOC_ROWS BENCH_CACHE_CHUNK_ROWS
			BENCH_CACHE_ENQ_DOCS BENCH_CACHE_MAXMEMORY BENCH_CACHE_WAIT
			BENCH_CACHE_REFUSE_MAX BENCH_CACHE_PG_WORKERS BENCH_CACHE_PG_BATCH
			BENCH_CACHE_BACKLOG_BEFORE BENCH_PG_ARGS PG_BINDIR) ;;
	esac
	for v in "${envs[@]}"; do
		[[ $part == memory && $v == BENCH_RUNS ]] && continue
		if [[ -n ${!v:-} ]]; then line="$v=${!v@Q} $line"; fi
	done
	printf '%s' "$line"
}

# This build (now) or the one of BENCH_CACHE_BEFORE_DIR (before).
ca_now_ferryd=
ca_now_ferryctl=
ca_use() {
	if [[ $1 == before ]]; then
		ferryd=$ca_before_dir/ferryd ferryctl=$ca_before_dir/ferryctl
	else
		ferryd=$ca_now_ferryd ferryctl=$ca_now_ferryctl
	fi
}
ca_labels() { if [[ -n $ca_before_dir ]]; then echo now before; else echo now; fi; }
# run r's order: now first in odd runs, before first in even ones
ca_order() {
	if [[ -z $ca_before_dir ]]; then echo now
	elif (($1 % 2)); then echo now before
	else echo before now
	fi
}

# an INFO field (section $1, field $2)
ca_info() { rcli info "$1" | awk -F: -v f="$2" '$1 == f { sub(/\r/, "", $2); print $2 }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.3f", a / b; else printf "–" }'; }
per() { awk -v a="$1" -v n="$2" 'BEGIN { printf "%.1f", a / n }'; }
# fields of the stats hash on one line, 0 for a missing one
ca_stats() { rcli hmget "$k_stats" "$@" | awk '{ printf "%s%s", (NR > 1 ? " " : ""), ($0 == "" ? 0 : $0) } END { print "" }'; }
# the number of keys in the queue's cache space (SCAN, not KEYS)
ca_cache_keys() { rcli --scan --pattern 'ferry:{bench}:cache:*' | wc -l; }
k_protected='ferry:{bench}:protected'

# The jobs: make_jobs' N 100-byte documents, and the same as the data of
# a job with an id of its own (the key of the build before was the id).
ca_make_files() {
	make_jobs "$ca_n"
	ca_plain_file=$tmp/plain.txt
	ca_cache_file=$tmp/cache.txt
	cp "$jobs_file" "$ca_plain_file"
	awk '{ printf "{\"id\":\"c%d\",\"data\":%s}\n", 99999 + NR, $0 }' "$jobs_file" >"$ca_cache_file"
	head -n "$ca_exec_n" "$ca_plain_file" >"$tmp/plain-exec.txt"
	head -n "$ca_exec_n" "$ca_cache_file" >"$tmp/cache-exec.txt"
	ca_cache_bytes=$(head -n 1 "$ca_cache_file" | tr -d '\n' | wc -c)
}

# ferryctl enqueue of a file into queue bench (options first); exit status
ca_push() {
	local file=$1
	shift
	"$ferryctl" -c "$cfg" enqueue -q "$@" bench - <"$file"
}

bench_header() {
	local rev brev=
	rev=$(git -C "$root" describe --always --dirty 2>/dev/null || echo unknown)
	echo "## Benchmark: protected cache keys (\`scripts/bench cache\`)"
	echo
	echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC'); machine: $(nproc) CPUs ($(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)), $(uname -sr); load average at start $load_start"
	echo "- now: $("$ca_now_ferryd" -V) (${ca_now_ferryd#"$root/"}, ${ca_now_ferryctl#"$root/"}, built $(date -u -r "$ca_now_ferryd" '+%Y-%m-%d %H:%M UTC'); source tree at git $rev)"
	if [[ -n $ca_before_dir ]]; then
		brev=$(git -C "$ca_before_dir" describe --always --dirty 2>/dev/null || echo unknown)
		echo "- before: $("$ca_before_dir/ferryd" -V) ($ca_before_dir, git $brev)"
	else
		echo "- before: none (BENCH_CACHE_BEFORE_DIR not set: no ratios)"
	fi
	echo "- $(redis-server --version | awk '{ print $3 }' | sed 's/v=/redis-server /') (private, 127.0.0.1 TCP, \`--save '' --appendonly no${BENCH_REDIS_ARGS:+ $BENCH_REDIS_ARGS}\`), all on the same host"
	echo
}

# ------------------------------------------------------------------ memory

declare -A mem=()

# One build's memory readings, into mem[LABEL.*].
ca_memory_one() {
	local l=$1 b a key entry
	ca_use "$l"
	write_config 2 100 noop
	rcli flushall >/dev/null
	rcli script flush >/dev/null
	# load the build's scripts (enqueue, memory) into the script cache
	head -n 1 "$ca_plain_file" >"$tmp/one.txt"
	head -n 1 "$ca_cache_file" >"$tmp/one-cache.txt"
	ca_push "$tmp/one.txt" || die "ferryctl enqueue failed ($l)"
	ca_push "$tmp/one-cache.txt" --cache || die "ferryctl enqueue --cache failed ($l)"
	rcli flushall >/dev/null

	b=$(used_memory)
	ca_push "$ca_plain_file" || die "ferryctl enqueue failed ($l)"
	a=$(used_memory)
	[[ $(rcli llen "$k_ready") == "$ca_n" ]] || die "ready does not hold $ca_n jobs ($l)"
	mem[$l.plain]=$(per $((a - b)) "$ca_n")
	mem[$l.plain_ready]=$(per "$(rcli memory usage "$k_ready" samples 0)" "$ca_n")
	mem[$l.plain_before]=$b mem[$l.plain_after]=$a

	rcli flushall >/dev/null
	b=$(used_memory)
	ca_push "$ca_cache_file" --cache || die "ferryctl enqueue --cache failed ($l)"
	a=$(used_memory)
	[[ $(rcli llen "$k_ready") == "$ca_n" ]] || die "ready does not hold $ca_n jobs ($l, --cache)"
	mem[$l.cache]=$(per $((a - b)) "$ca_n")
	mem[$l.cache_before]=$b mem[$l.cache_after]=$a
	mem[$l.cache_ready]=$(per "$(rcli memory usage "$k_ready" samples 0)" "$ca_n")
	mem[$l.keys]=$(ca_cache_keys)
	mem[$l.volatile]=$(rcli info keyspace | awk -F'[=,]' '/^db0:/ { print $4 + 0 }')
	mem[$l.prot_n]=$(rcli hlen "$k_protected")
	if ((mem[$l.prot_n] > 0)); then
		mem[$l.prot]=$(per "$(rcli memory usage "$k_protected" samples 0)" "$ca_n")
	else
		mem[$l.prot]=0
	fi
	# one job's key: its length, MEMORY USAGE, TTL and the protected entry
	# of its group ("<16 hex>.<n>": the key up to its last ".")
	key=$(rcli --raw lindex "$k_ready" 0 | sed -E 's/.*"cache_key":"([^"]*)".*/\1/')
	[[ $(rcli exists "$key") == 1 ]] || die "no cache key $key ($l)"
	entry=$(rcli --raw hget "$k_protected" "${key%.*}")
	mem[$l.key]=$key
	mem[$l.key_usage]=$(rcli memory usage "$key" samples 0)
	mem[$l.key_ttl]=$(rcli pttl "$key")
	mem[$l.entry]=${entry:-none}
	mem[$l.doc]=$(rcli --raw lindex "$k_ready" 0)
	say "memory ($l): plain ${mem[$l.plain]} B/job, --cache ${mem[$l.cache]} B/job, protected ${mem[$l.prot]} B/key"
}

bench_cache_memory() {
	local l
	for l in $(ca_labels); do ca_memory_one "$l"; done
	rcli flushall >/dev/null
}

report_cache_memory() {
	local l
	echo "### Redis bytes per waiting job"
	echo
	echo "- command: \`$(ca_cmdline memory)\`"
	echo "- $(commas "$ca_n") jobs enqueued (\`ferryctl enqueue -q bench -\`) into a queue with no workers (ferryd not running);"
	echo "  \`used_memory\` after − before (each after \`CONFIG RESETSTAT\`), / N. The build's scripts are in Redis' script"
	echo "  cache before the first reading (one job enqueued, then FLUSHALL), so they are not counted:"
	echo "  \`scripts/bench queue memory\` counts the script cache too."
	echo "- plain: \`$(head -n 1 "$ca_plain_file")\` ($job_bytes bytes); --cache: \`$(head -n 1 "$ca_cache_file")\`"
	echo "  ($ca_cache_bytes bytes; its \"data\" goes to a key of its own, the job becomes e.g. \`${mem[now.doc]}\`)"
	echo
	echo "| build | plain B/job | MEMORY USAGE ready / job | --cache B/job | ready / job | protected hash / key | cache keys | keys with a TTL | one key: MEMORY USAGE, PTTL | its group's protected entry |"
	echo "|---|---:|---:|---:|---:|---:|---:|---:|---|---|"
	for l in $(ca_labels); do
		echo "| $l | **${mem[$l.plain]}** | ${mem[$l.plain_ready]} | **${mem[$l.cache]}** | ${mem[$l.cache_ready]} | **${mem[$l.prot]}** | $(commas "${mem[$l.keys]}") | $(commas "${mem[$l.volatile]:-0}") | ${mem[$l.key_usage]} B, ${mem[$l.key_ttl]} | \`${mem[$l.entry]}\` |"
	done
	echo
	echo "Per --cache job (now): ready ${mem[now.cache_ready]} B + protected hash ${mem[now.prot]} B + the cache key and its"
	echo "table entry $(awk -v a="${mem[now.cache]}" -v r="${mem[now.cache_ready]}" -v p="${mem[now.prot]}" 'BEGIN { printf "%.1f", a - r - p }') B = ${mem[now.cache]} B."
	if [[ -n $ca_before_dir ]]; then
		echo "Against the build before (key \`${mem[before.key]}\`, with a TTL: an entry in the expires table instead):"
		echo "--cache $(awk -v a="${mem[now.cache]}" -v b="${mem[before.cache]}" 'BEGIN { printf "%+.1f", a - b }') B/job, plain $(awk -v a="${mem[now.plain]}" -v b="${mem[before.plain]}" 'BEGIN { printf "%+.1f", a - b }') B/job"
		echo "(key names: now \`<16 hex>.<n>\` after the cache space, before the job's id; in the key and in the job's \`cache_key\`)."
	fi
	echo
}

# ------------------------------------------------------------------ rates

# cells: name|kind|description
ca_rate_cells=(
	"enq-plain|enq|\`ferryctl enqueue\`, 100-byte jobs"
	"enq-cache|enq|\`ferryctl enqueue --cache\`"
	"enq-plain-vol|enq|\`ferryctl enqueue\`, maxmemory $ca_rates_maxmemory volatile-lru"
	"enq-cache-vol|enq|\`ferryctl enqueue --cache\`, maxmemory $ca_rates_maxmemory volatile-lru"
	"drain-noop-plain|drain|drain, noop"
	"drain-noop-cache|drain|drain, noop, --cache jobs (TYPE of each key)"
	"drain-exec-plain|drain|drain, exec (acking handler)"
	"drain-exec-cache|drain|drain, exec, --cache jobs (each value read)"
)
# BENCH_CACHE_CELLS: a regular expression; only the cells whose name
# matches it run (e.g. drain-noop-cache)
if [[ -n ${BENCH_CACHE_CELLS:-} ]]; then
	for i in "${!ca_rate_cells[@]}"; do
		[[ ${ca_rate_cells[i]%%|*} =~ $BENCH_CACHE_CELLS ]] || unset 'ca_rate_cells[i]'
	done
	ca_rate_cells=("${ca_rate_cells[@]}")
fi
declare -A ca_rate=() ca_steady=() ca_pair=() ca_load=() ca_us=()
ca_rate_checks=ok
ca_last_rate=
ca_last_steady=
ca_last_us=

# redis-server's CPU time (ms) so far; per job ($2 jobs) since $1, in µs
ca_redis_ms() { cpu_ms "$redis_pid"; }
ca_redis_us() { awk -v a="$1" -v b="$(ca_redis_ms)" -v n="$2" 'BEGIN { printf "%.2f", (b - a) * 1000 / n }'; }

# The exec handler: answers "ok ID" for every line (the id is the line's
# first string), like scripts/bench drain's recorder without the record.
ca_write_ack() {
	ca_ack=$tmp/ack.sh
	cat >"$ca_ack" <<'ACK'
#!/bin/sh
exec awk -F'"' '{ print "ok " $4; fflush() }'
ACK
	chmod 755 "$ca_ack"
}

# One timed enqueue of N jobs into an empty Redis: $1 plain|cache, $2 yes
# for maxmemory + volatile-lru.
ca_enq_timed() {
	local what=$1 vol=$2 t0 t1 c0 file=$ca_plain_file
	local -a opts=()
	[[ $what == cache ]] && file=$ca_cache_file opts=(--cache)
	write_config "$ca_workers" "$ca_batch" noop
	rcli flushall >/dev/null
	if [[ $vol == yes ]]; then
		rcli config set maxmemory "$ca_rates_maxmemory" >/dev/null
		rcli config set maxmemory-policy volatile-lru >/dev/null
	fi
	c0=$(ca_redis_ms)
	t0=$(now_us)
	ca_push "$file" "${opts[@]}" || die "ferryctl enqueue ${opts[*]} failed"
	t1=$(now_us)
	ca_last_us=$(ca_redis_us "$c0" "$ca_n")
	rcli config set maxmemory 0 >/dev/null
	rcli config set maxmemory-policy noeviction >/dev/null
	[[ $(rcli llen "$k_ready") == "$ca_n" ]] || die "ready does not hold $ca_n jobs after the timed enqueue"
	ca_last_rate=$(awk -v n="$ca_n" -v us=$((t1 - t0)) 'BEGIN { printf "%.0f", n * 1e6 / us }')
	ca_last_steady=
}

# One drain of N jobs: $1 noop|exec, $2 plain|cache. Enqueued (untimed)
# by the same build; the clock from ferryd's start until done = N.
ca_drain_timed() {
	local handler=$1 what=$2 label=$3 wait_bin t0 first t_done file=$ca_plain_file s dead retried missing left prot
	local n=$ca_n c0
	local -a opts=() lines=()
	wait_bin=$(helper drain_wait)
	[[ $what == cache ]] && file=$ca_cache_file opts=(--cache)
	if [[ $handler == exec ]]; then
		lines=("command = $ca_ack" "handler_timeout = 60s" "job_timeout = 120s")
		n=$ca_exec_n file=$tmp/$what-exec.txt
	fi
	write_config "$ca_workers" "$ca_batch" "$handler" "${lines[@]}"
	rcli flushall >/dev/null
	ca_push "$file" "${opts[@]}" || die "ferryctl enqueue ${opts[*]} failed"
	[[ $(rcli llen "$k_ready") == "$n" ]] || die "ready does not hold $n jobs"
	c0=$(ca_redis_ms)
	t0=$(now_us)
	start_ferryd
	run_helper "$wait_bin" 127.0.0.1 "$port" "$k_stats" "done" "$n" 10 900 ||
		ferryd_failed "queue did not drain ($handler, $what, $label)"
	read -r first t_done <<<"$helper_out"
	ca_last_us=$(ca_redis_us "$c0" "$n")
	stop_ferryd TERM
	read -r dead retried missing < <(ca_stats dead retried cache_missing)
	left=$(ca_cache_keys)
	prot=$(rcli hlen "$k_protected")
	s="dead ${dead:-0}, retried ${retried:-0}, cache_missing ${missing:-0}, cache keys left $left, protected left $prot"
	if ((${dead:-0} + ${retried:-0} + ${missing:-0} + left + prot != 0)); then
		ca_rate_checks="FAILED ($handler, $what, $label): $s"
		say "rates: check FAILED: $s"
	fi
	ca_last_rate=$(awk -v n="$n" -v us=$((t_done - t0)) 'BEGIN { printf "%.0f", n * 1e6 / us }')
	ca_last_steady=$(awk -v n="$n" -v us=$((t_done - first)) 'BEGIN { printf "%.0f", (us > 0 ? n * 1e6 / us : 0) }')
}

bench_cache_rates() {
	local r cell name kind desc l a b what vol handler
	ca_write_ack
	for ((r = 1; r <= runs; r++)); do
		for cell in "${ca_rate_cells[@]}"; do
			IFS='|' read -r name kind desc <<<"$cell"
			ca_load[$name]+="$(cut -d' ' -f1 /proc/loadavg) "
			a='' b=''
			for l in $(ca_order "$r"); do
				ca_use "$l"
				if [[ $kind == enq ]]; then
					what=${name#enq-} vol=no
					[[ $what == *-vol ]] && what=${what%-vol} vol=yes
					ca_enq_timed "$what" "$vol"
				else
					handler=${name#drain-}
					what=${handler#*-} handler=${handler%-*}
					ca_drain_timed "$handler" "$what" "$l"
				fi
				ca_rate[$name|$l]+="$ca_last_rate "
				ca_steady[$name|$l]+="${ca_last_steady:-0} "
				ca_us[$name|$l]+="$ca_last_us "
				if [[ $l == now ]]; then a=$ca_last_rate; else b=$ca_last_rate; fi
				say "rates: $name ($l): $ca_last_rate jobs/s, Redis $ca_last_us us/job (run $r/$runs)"
			done
			[[ -n $b ]] && ca_pair[$name]+="$(ratio "$a" "$b") "
		done
	done
	ca_use now
}

report_cache_rates() {
	local cell name kind desc med_now med_b rat goal st_now st_b us_now us_b n steady
	echo "### Enqueue and drain rates, now and before"
	echo
	echo "- command: \`$(ca_cmdline rates)\`"
	echo "- $(commas "$ca_n") jobs a run, $(commas "$ca_exec_n") with the exec handler (plain: \`$(head -n 1 "$ca_plain_file")\`; --cache: \`$(head -n 1 "$ca_cache_file")\`)."
	echo "  enqueue: \`ferryctl enqueue -q [--cache] bench -\` into an empty Redis, from start to exit (\"maxmemory"
	echo "  $ca_rates_maxmemory volatile-lru\": \`CONFIG SET\` just before, so that the refusal is computed under a volatile-*"
	echo "  policy, never reached). drain: the jobs enqueued by the same build, then ferryd ($ca_workers workers,"
	echo "  batch_size $ca_batch; exec: \`$(tail -n 1 "$ca_ack")\`) from its start until \`stats done\` = N"
	echo "  (tests/bench/drain_wait.c, every 10 ms); \"after 1st ack\" leaves out the start-up."
	echo "- the builds take turns (run 1: now, before; run 2: before, now; ...), $runs runs; jobs/s: the median;"
	echo "  now / before: of the medians, and of each run's pair. Goal: now within 10% of before (≥ 0.90)."
	echo "- Redis µs/job: redis-server's CPU time (/proc/PID/stat utime + stime, 10 ms ticks) from the start of the"
	echo "  enqueue or of ferryd until the end / N, the median of each build's runs."
	echo "- load average (1 min) at the start of each cell's runs: in the last column; at the end $(cut -d' ' -f1-3 /proc/loadavg)"
	echo
	echo "| what | jobs | now jobs/s | runs | before jobs/s | runs | now / before | per run | ≥ 0.90 | after 1st ack, now / before | Redis µs/job, now / before | load |"
	echo "|---|---:|---:|---|---:|---|---:|---|---|---|---|---|"
	for cell in "${ca_rate_cells[@]}"; do
		IFS='|' read -r name kind desc <<<"$cell"
		# shellcheck disable=SC2086  # lists of numbers
		med_now=$(median_int ${ca_rate[$name|now]})
		med_b=– rat=– goal='' st_b=–
		# shellcheck disable=SC2086
		st_now=$(median_int ${ca_steady[$name|now]})
		# shellcheck disable=SC2086
		us_now=$(median ${ca_us[$name|now]})
		us_b=–
		n=$ca_n
		[[ $name == drain-exec-* ]] && n=$ca_exec_n
		if [[ -n $ca_before_dir ]]; then
			# shellcheck disable=SC2086
			med_b=$(median_int ${ca_rate[$name|before]})
			# shellcheck disable=SC2086
			st_b=$(median_int ${ca_steady[$name|before]})
			# shellcheck disable=SC2086
			us_b=$(median ${ca_us[$name|before]})
			rat=$(ratio "$med_now" "$med_b")
			if awk -v r="$rat" 'BEGIN { exit !(r >= 0.90) }'; then goal=met
			else goal="**missed**"
			fi
		fi
		steady="–"
		[[ $kind == drain ]] && steady="$(commas "$st_now") / $(commas "$st_b")"
		echo "| $desc | $(commas "$n") | **$(commas "$med_now")** | $(runs_list "${ca_rate[$name|now]% }") | $(commas "$med_b") | $( [[ -n $ca_before_dir ]] && runs_list "${ca_rate[$name|before]% }") | **$rat** | $(runs_list "${ca_pair[$name]:-}") | $goal | $steady | $us_now / $us_b | ${ca_load[$name]% } |"
	done
	echo
	echo "Checks after every drain (dead, retried, cache_missing 0; no cache key and no protected entry left): $ca_rate_checks"
	echo
}

# ------------------------------------------------------------------ backlog

declare -A bl=()
ca_bl_jobs=0
ca_bl_groups=()

# Documents of ca_doc_rows rows (the last one shorter), rows
# {"n":N,"payload":"<60 y>"} with n = 1..ROWS, ca_enq_docs documents to a
# file; ca_bl_jobs = the jobs they make (chunks of ca_chunk_rows rows).
ca_backlog_files() {
	local d=$tmp/backlog
	mkdir -p "$d"
	ca_bl_jobs=$(awk -v rows="$ca_rows" -v per="$ca_doc_rows" -v chunk="$ca_chunk_rows" \
		-v group="$ca_enq_docs" -v dir="$d" 'BEGIN {
		p = sprintf("%60s", ""); gsub(/ /, "y", p)
		n = 1
		doc = 0
		while (n <= rows) {
			f = sprintf("%s/g%06d.txt", dir, int(doc / group))
			k = (rows - n + 1 < per) ? rows - n + 1 : per
			jobs += int((k + chunk - 1) / chunk)
			printf "{\"id\":\"d%d\",\"data\":[", doc + 1 >> f
			for (i = 0; i < k; i++)
				printf "%s{\"n\":%d,\"payload\":\"%s\"}", (i ? "," : ""), n++, p >> f
			printf "]}\n" >> f
			close(f)
			doc++
		}
		print jobs
	}')
	mapfile -t ca_bl_groups < <(find "$d" -name 'g*.txt' | sort)
	ca_bl_doc_bytes=$(head -n 1 "${ca_bl_groups[0]}" | tr -d '\n' | wc -c)
}

ca_evicted() { ca_info stats evicted_keys; }

# Stop the churn (probe_pid): its SETs per second (INFO commandstats since
# the CONFIG RESETSTAT before it started, less the cache keys' SETs, one a
# job), the SETs Redis refused, and the first refusal, into bl[$1.churn_*].
ca_churn_stop() {
	local l=$1 calls rejected
	[[ -n $probe_pid ]] || return 0
	kill -TERM "$probe_pid" 2>/dev/null || true
	wait "$probe_pid" 2>/dev/null || true
	probe_pid=
	read -r calls rejected < <(rcli info commandstats |
		awk -F'[:=,]' '$1 == "cmdstat_set" { for (i = 2; i < NF; i += 2) v[$i] = $(i + 1) }
			END { print v["calls"] + 0, v["rejected_calls"] + v["failed_calls"] }')
	bl[$l.churn_rate]=$(awk -v n=$((calls - bl[$l.jobs])) -v us=$(($(now_us) - bl[$l.t_churn0])) 'BEGIN { printf "%.0f", n * 1e6 / us }')
	bl[$l.churn_errors]=$rejected
	bl[$l.churn_error]=$(sed -n 's/^churn: SET refused: //p' "$tmp/churn.err")
}

# One ferryctl call of a group of documents, again every 0.2 s while it is
# refused (exit 75): the first refusal starts ferryd. Returns 1 when it
# was refused for ca_refuse_max s (given up).
ca_bl_push() {
	local l=$1 file=$2 rc t_start t
	t_start=$(now_us)
	while :; do
		rc=0
		"$ferryctl" -c "$cfg" enqueue --cache --chunk-rows "$ca_chunk_rows" bench - \
			<"$file" >"$tmp/enq.out" 2>"$tmp/enq.err" || rc=$?
		t=$(now_us)
		if ((rc == 0)); then
			if ((bl[$l.refused_now])); then
				bl[$l.refused_us]=$((bl[$l.refused_us] + t - t_start))
				bl[$l.refused_now]=0
			fi
			bl[$l.enq_rows]=$((bl[$l.enq_rows] + $(grep -o '"n":' "$file" | wc -l)))
			return 0
		fi
		((rc == 75)) || { cat "$tmp/enq.err" >&2; die "ferryctl enqueue --cache exited $rc ($l)"; }
		[[ -s $tmp/enq.out ]] && die "a refused ferryctl enqueue pushed some jobs ($l): BENCH_CACHE_ENQ_DOCS too large?"
		bl[$l.refused_calls]=$((bl[$l.refused_calls] + 1))
		[[ -n ${bl[$l.refusal]:-} ]] || bl[$l.refusal]=$(head -n 1 "$tmp/enq.err")
		bl[$l.refused_now]=1
		if [[ -z $ferryd_pid ]]; then
			say "backlog ($l): enqueue refused (exit 75) after $(secs_of $((t - bl[$l.t_enq0]))) s: ferryd starts now"
			bl[$l.t_ferryd]=$t
			bl[$l.early]=yes
			bl[$l.ev_wait0]=$(ca_evicted) bl[$l.ev_wait1]=${bl[$l.ev_wait0]}
			start_ferryd
		fi
		if ((t - t_start > ca_refuse_max * 1000000)); then
			bl[$l.refused_us]=$((bl[$l.refused_us] + t - t_start))
			bl[$l.gave_up]=yes
			say "backlog ($l): refused for $ca_refuse_max s: giving up the rest of the enqueue"
			return 1
		fi
		sleep 0.2
	done
}

ca_backlog_one() {
	local l=$1 churn_bin wait_bin g i t d dd got cell
	local -a pg=("table = bench_cache" "pg_host = 127.0.0.1" "pg_port = $pg_port"
		"pg_database = ferry" "pg_user = postgres")
	ca_use "$l"
	churn_bin=$(helper churn)
	stop_ferryd TERM
	pq -c "DROP TABLE IF EXISTS ferry_batches" -c "TRUNCATE bench_cache" -c "CHECKPOINT" >/dev/null ||
		pg_failed "TRUNCATE failed"
	write_config "$ca_pg_workers" "$ca_pg_batch" postgres "${pg[@]}"
	"$ferryctl" -c "$cfg" init-db >&2 || die "ferryctl init-db failed ($l)"
	rcli flushall >/dev/null
	rcli config set maxmemory "$ca_maxmemory" >/dev/null
	rcli config set maxmemory-policy volatile-lru >/dev/null
	rcli config resetstat >/dev/null
	for cell in refused_calls refused_us refused_now enq_rows; do bl[$l.$cell]=0; done
	bl[$l.early]=no bl[$l.gave_up]=no bl[$l.refusal]=

	# the application's cache, full before the first job comes
	bl[$l.t_churn0]=$(now_us)
	"$churn_bin" 127.0.0.1 "$port" app:cache: 8192 60000 16 10000000 2>"$tmp/churn.err" &
	probe_pid=$!
	for ((i = 0; i < 600; i++)); do
		(($(ca_evicted) > 0)) && break
		kill -0 "$probe_pid" 2>/dev/null || die "the churn helper died"
		sleep 0.05
	done
	(($(ca_evicted) > 0)) || die "the churn did not fill maxmemory $ca_maxmemory in 30 s"

	bl[$l.ev_enq0]=$(ca_evicted)
	bl[$l.t_enq0]=$(now_us)
	for g in "${ca_bl_groups[@]}"; do
		ca_bl_push "$l" "$g" || break
	done
	bl[$l.t_enq1]=$(now_us)
	bl[$l.ev_enq1]=$(ca_evicted)
	bl[$l.used]=$(ca_info memory used_memory)
	bl[$l.prot_before]=$(rcli hlen "$k_protected")
	bl[$l.keys_before]=$(ca_cache_keys)
	bl[$l.queued]=$(( $(rcli llen "$k_ready") ))
	bl[$l.protected_mem]=$(rcli memory usage "$k_protected" samples 0)
	say "backlog ($l): ${bl[$l.enq_rows]} rows enqueued in $(secs_of $((bl[$l.t_enq1] - bl[$l.t_enq0]))) s, ${bl[$l.prot_before]} protected fields, ${bl[$l.keys_before]} cache keys"

	if [[ -z $ferryd_pid ]]; then
		bl[$l.ev_wait0]=$(ca_evicted)
		say "backlog ($l): ferryd held off for $ca_wait s while the cache churns"
		sleep "$ca_wait"
		bl[$l.ev_wait1]=$(ca_evicted)
		bl[$l.keys_after_wait]=$(ca_cache_keys)
		bl[$l.t_ferryd]=$(now_us)
		start_ferryd
	else
		bl[$l.keys_after_wait]=–
	fi
	bl[$l.ev_drain0]=$(ca_evicted)
	# until every enqueued job is done or dead
	local want
	want=$(awk -v r="${bl[$l.enq_rows]}" -v per="$ca_doc_rows" -v chunk="$ca_chunk_rows" 'BEGIN {
		j = 0
		while (r > 0) { k = r < per ? r : per; j += int((k + chunk - 1) / chunk); r -= k }
		print j }')
	bl[$l.jobs]=$want
	for ((i = 0; ; i++)); do
		read -r d dd < <(ca_stats "done" dead)
		((${d:-0} + ${dd:-0} >= want)) && break
		((i < 9000)) || ferryd_failed "backlog ($l): done ${d:-0} + dead ${dd:-0} of $want jobs after 900 s"
		kill -0 "$ferryd_pid" 2>/dev/null || ferryd_failed "backlog ($l): ferryd exited"
		sleep 0.1
	done
	bl[$l.t_done]=$(now_us)
	bl[$l.ev_drain1]=$(ca_evicted)
	ca_churn_stop "$l"
	stop_ferryd TERM
	read -r "bl[$l.done]" "bl[$l.dead]" "bl[$l.missing]" < <(ca_stats "done" dead cache_missing)
	bl[$l.prot_after]=$(rcli hlen "$k_protected")
	bl[$l.keys_after]=$(ca_cache_keys)
	got=$(pq -c "SELECT count(*) || ' ' || count(DISTINCT n) FROM bench_cache")
	read -r "bl[$l.count]" "bl[$l.distinct]" <<<"$got"
	rcli config set maxmemory 0 >/dev/null
	rcli config set maxmemory-policy noeviction >/dev/null
	rcli flushall >/dev/null
	say "backlog ($l): drained in $(secs_of $((bl[$l.t_done] - bl[$l.t_ferryd]))) s: rows ${bl[$l.count]}, distinct ${bl[$l.distinct]}, cache_missing ${bl[$l.missing]:-0}, dead ${bl[$l.dead]:-0}"
}

bench_cache_backlog() {
	local l
	ca_backlog_files
	pq -c "CREATE TABLE bench_cache (n bigint, payload text)" >/dev/null || pg_failed "CREATE TABLE failed"
	for l in now $([[ $ca_backlog_before == yes ]] && echo before); do
		: >"$tmp/ferryd.log"
		ca_backlog_one "$l"
	done
	ca_use now
}

report_cache_backlog() {
	local l lost dup check secs more
	echo "### The backlog at scale: one Redis for the cache and the queue"
	echo
	echo "- command: \`$(ca_cmdline backlog)\`"
	echo "- Redis: \`CONFIG SET maxmemory $ca_maxmemory\`, \`maxmemory-policy volatile-lru\`; the cache: tests/bench/churn.c,"
	echo "  \`SET app:cache:<random of 10^7> <8192 bytes> PX 60000\`, 16 pipelined, from before the first enqueue (once Redis"
	echo "  evicts) until the queue has drained. (redis-benchmark 7.0 does not fill \`__data__\` in a command of its own.)"
	echo "- jobs: $(commas "$ca_rows") rows \`{\"n\":N,\"payload\":\"<60 bytes>\"}\` in documents of $ca_doc_rows rows"
	echo "  ($(commas "$ca_bl_doc_bytes") bytes), $ca_enq_docs documents a \`ferryctl enqueue --cache --chunk-rows $ca_chunk_rows bench -\`"
	echo "  (one enqueue.lua call); exit 75 retried every 0.2 s, and the first refusal starts ferryd."
	echo "- ferryd (handler postgres, table \`bench_cache (n bigint, payload text)\`, $ca_pg_workers workers, batch_size $ca_pg_batch,"
	echo "  private PostgreSQL $("$pg_bindir/postgres" -V | awk '{ print $3 }'), $pg_settings_str) held off for $ca_wait s after the"
	echo "  last enqueue, then drains until done + dead = the jobs; the clock from ferryd's start."
	echo
	echo "| build | rows enqueued | jobs | enqueue s | refused calls (exit 75) | refused s | evicted keys during enqueue | during the wait | during the drain | protected fields before / after | cache keys before / after wait / after | drain s | rows/s | rows written | distinct n | lost | duplicated | cache_missing | dead | churn SETs/s (refused) |"
	echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"
	for l in now $([[ $ca_backlog_before == yes ]] && echo before); do
		lost=$((bl[$l.enq_rows] - bl[$l.distinct]))
		dup=$((bl[$l.count] - bl[$l.distinct]))
		secs=$(secs_of $((bl[$l.t_done] - bl[$l.t_ferryd])))
		local wait_ev=$((bl[$l.ev_wait1] - bl[$l.ev_wait0]))
		[[ ${bl[$l.early]} == yes ]] && wait_ev="– (ferryd started at the first refusal)"
		echo "| $l | $(commas "${bl[$l.enq_rows]}") of $(commas "$ca_rows") | $(commas "${bl[$l.jobs]}") | $(secs_of $((bl[$l.t_enq1] - bl[$l.t_enq0]))) | ${bl[$l.refused_calls]}$([[ ${bl[$l.gave_up]} == yes ]] && echo ", gave up") | $(secs_of "${bl[$l.refused_us]}") | $(commas $((bl[$l.ev_enq1] - bl[$l.ev_enq0]))) | $(commas "$wait_ev") | $(commas $((bl[$l.ev_drain1] - bl[$l.ev_drain0]))) | $(commas "${bl[$l.prot_before]}") / ${bl[$l.prot_after]} | $(commas "${bl[$l.keys_before]}") / $(commas "${bl[$l.keys_after_wait]}") / ${bl[$l.keys_after]} | **$secs** | $(commas "$(awk -v n="${bl[$l.count]}" -v s="$secs" 'BEGIN { printf "%.0f", (s > 0 ? n / s : 0) }')") | $(commas "${bl[$l.count]}") | $(commas "${bl[$l.distinct]}") | **$lost** | **$dup** | **${bl[$l.missing]:-0}** | **${bl[$l.dead]:-0}** | $(commas "${bl[$l.churn_rate]}") (${bl[$l.churn_errors]}) |"
	done
	echo
	for l in now $([[ $ca_backlog_before == yes ]] && echo before); do
		check=
		((bl[$l.enq_rows] == ca_rows)) || check="REFUSED: $(commas "${bl[$l.enq_rows]}") of $(commas "$ca_rows") rows enqueued; "
		if ((bl[$l.enq_rows] == bl[$l.count] && bl[$l.count] == bl[$l.distinct])); then
			check+="every enqueued row written once"
		else
			check+="FAILED: $(commas "${bl[$l.enq_rows]}") rows enqueued, $(commas "${bl[$l.count]}") written, $(commas "${bl[$l.distinct]}") distinct"
		fi
		((${bl[$l.missing]:-0} == 0 && ${bl[$l.dead]:-0} == 0)) || check+="; cache_missing ${bl[$l.missing]:-0}, dead ${bl[$l.dead]:-0}"
		((bl[$l.prot_after] == 0 && bl[$l.keys_after] == 0)) || check+="; left: ${bl[$l.prot_after]} protected entries, ${bl[$l.keys_after]} cache keys"
		more=
		[[ -n ${bl[$l.refusal]} ]] && more+="; the first refusal: \`${bl[$l.refusal]}\`"
		[[ -n ${bl[$l.churn_error]} ]] && more+="; the churn's first refused SET: \`${bl[$l.churn_error]}\`"
		echo "- $l: $check. At the end of the enqueue: used_memory $(commas "${bl[$l.used]}") B, ready $(commas "${bl[$l.queued]}") jobs, the protected hash $(commas "${bl[$l.protected_mem]:-0}") B$more."
	done
	echo
}

# ------------------------------------------------------------------ main

command -v redis-server >/dev/null || die "redis-server is not installed (scripts/deps)"
command -v redis-cli >/dev/null || die "redis-cli is not installed (scripts/deps)"
ensure_build
ca_now_ferryd=$ferryd
ca_now_ferryctl=$ferryctl
helper drain_wait >/dev/null
if ca_has backlog; then
	need_pg_bindir
	helper churn >/dev/null
fi
bench_start
ca_make_files
bench_header
if ca_has memory; then
	bench_cache_memory
	report_cache_memory
fi
if ca_has rates; then
	bench_cache_rates
	report_cache_rates
fi
if ca_has backlog; then
	start_pg
	pg_settings_str=$(pg_settings)
	bench_cache_backlog
	report_cache_backlog
fi
echo "Load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)."
