# scripts/bench.d/idem.sh - `scripts/bench idem [memory] [rates] [wait] [cost]`,
# sourced by scripts/bench once its helpers are defined (start_redis,
# write_config, start_ferryd, make_jobs, run_helper, median, cpu_ms, start_pg
# of scripts/bench.d/pg.sh, lat_pcts of latency.sh): what an idempotent queue
# costs (`idempotency_window = 10m`: enqueue.lua holds every job's id in the
# sorted set ferry:{bench}:ids, a score in [0, 1) while it lives, -1 dead, T done:
# forgotten at T = settle time + window), and how soon `ferryctl enqueue
# --wait` answers, and what holding an id costs Redis in any structure.
# Parts (memory, rates and wait without an argument):
#
#   memory   Redis bytes per remembered id: N jobs with 10-byte ids
#            ("j000000001", 100-byte documents) done through a noop queue
#            (BENCH_IDEM_WORKERS workers, batch 100), window 10m and 0:
#            MEMORY USAGE of ids / N, and used_memory after the drain −
#            before the enqueue, / N; bytes per waiting job: the same jobs
#            into the queue with no workers, used_memory after − before, / N.
#            Readings after CONFIG RESETSTAT; the scripts are in the script
#            cache before (a job enqueued and drained, then FLUSHALL).
#   rates    jobs/s with the window 0 and 10m taking turns (BENCH_RUNS runs,
#            the median; each into an empty Redis): `ferryctl enqueue -q
#            bench -` of N jobs (calls of 1,000, the process timed),
#            BENCH_IDEM_CALLS runs of `ferryctl enqueue -q bench JSON` (one
#            job a process: process start dominates), and one Node process
#            (tests/bench/idem_enqueue.js, the client of clients/node)
#            enqueuing N jobs in calls of 1,000 and BENCH_IDEM_CALLS one a
#            call, awaited in turn, timed inside Node. Beside the clock:
#            redis-server's CPU per job (/proc/PID/stat, 10 ms ticks), and
#            the time in enqueue.lua and its ZMSCORE + ZADD (commandstats).
#   wait     a postgres queue (private PostgreSQL, table bench_idem,
#            BENCH_IDEM_WORKERS workers, batch_size BENCH_IDEM_BATCH),
#            window 10m; a background producer (tests/bench/latency_push.c,
#            plain LPUSH, no ids) at BENCH_IDEM_RATE jobs/s from
#            BENCH_IDEM_WARMUP s before the first probe to the last;
#            BENCH_IDEM_PROBES probes one after the other, `ferryctl enqueue
#            --wait 30s bench '{"id":"w-<i>",...}'`: the moment ferryctl
#            exits (CLOCK_REALTIME) − the moment its job settled (ZSCORE of
#            w-<i> − the window: Redis TIME, ms, the same clock; settle.lua
#            runs right after the commit), and start → exit.
#   cost     the floor under any check that remembers ids one by one
#            (tests/bench/id_cost.c): Redis' time per id (INFO commandstats,
#            BENCH_IDEM_COST_CALLS calls of 1,000 new ids, each removed
#            again so the size holds, BENCH_RUNS runs taking turns) of
#            ferry's ZADD NX against a hash and a set, and of the LPUSH of
#            the jobs themselves, with 100,000 and 1,000,000 ids held; and
#            each structure's bytes per id.
#
# Environment (defaults in brackets): BENCH_IDEM_JOBS [100000] (memory,
# rates), BENCH_IDEM_CALLS [2000] (rates: jobs one a call),
# BENCH_IDEM_WORKERS [2], BENCH_IDEM_BATCH [100], BENCH_IDEM_RATE [1000]
# (jobs/s), BENCH_IDEM_PROBES [300], BENCH_IDEM_WARMUP [3] (s; all wait),
# BENCH_IDEM_CELLS [all] (rates: a regular expression naming the cells to
# run: ctl-1000, ctl-1, node-1000, node-1), BENCH_IDEM_COST_CALLS [100]
# (cost), BENCH_RUNS [3], BENCH_REDIS_ARGS,
# BENCH_PG_ARGS, PG_BINDIR, FERRYD, FERRYCTL. The Node cells need node and
# clients/node/node_modules (npm ci). A shared machine is noisy: compare
# medians.
# shellcheck shell=bash disable=SC2154,SC2034,SC2016  # variables of scripts/bench; awk in quotes

id_n=${BENCH_IDEM_JOBS:-100000}
id_calls=${BENCH_IDEM_CALLS:-2000}
id_workers=${BENCH_IDEM_WORKERS:-2}
id_batch=${BENCH_IDEM_BATCH:-100}
id_rate=${BENCH_IDEM_RATE:-1000}
id_probes=${BENCH_IDEM_PROBES:-300}
id_warmup=${BENCH_IDEM_WARMUP:-3}
id_cost_calls=${BENCH_IDEM_COST_CALLS:-100}
id_window=10m id_window_ms=600000
for v in id_n id_calls id_workers id_batch id_rate id_probes id_warmup id_cost_calls; do
	[[ ${!v} =~ ^[1-9][0-9]*$ ]] || die "BENCH_IDEM_* take positive integers, not \"${!v}\" ($v)"
done
((id_calls <= id_n)) || die "BENCH_IDEM_CALLS must be at most BENCH_IDEM_JOBS"

id_parts=()
for p in "$@"; do
	case $p in
		memory | rates | wait | cost) id_parts+=("$p") ;;
		*) usage >&2; exit 64 ;;
	esac
done
((${#id_parts[@]} > 0)) || id_parts=(memory rates wait)
id_has() { [[ " ${id_parts[*]} " == *" $1 "* ]]; }

# The command line that reproduces part $1: its own variables only.
id_cmdline() {
	local v line="$prog idem $1"
	local -a envs=(BENCH_REDIS_ARGS FERRYD FERRYCTL)
	case $1 in
		memory) envs+=(BENCH_IDEM_JOBS BENCH_IDEM_WORKERS) ;;
		rates) envs+=(BENCH_RUNS BENCH_IDEM_JOBS BENCH_IDEM_CALLS BENCH_IDEM_CELLS) ;;
		wait) envs+=(BENCH_IDEM_WORKERS BENCH_IDEM_BATCH BENCH_IDEM_RATE BENCH_IDEM_PROBES
			BENCH_IDEM_WARMUP BENCH_PG_ARGS PG_BINDIR) ;;
		cost) envs=(BENCH_REDIS_ARGS BENCH_RUNS BENCH_IDEM_COST_CALLS) ;;
	esac
	for v in "${envs[@]}"; do
		if [[ -n ${!v:-} ]]; then line="$v=${!v@Q} $line"; fi
	done
	printf '%s' "$line"
}

per() { awk -v a="$1" -v n="$2" 'BEGIN { printf "%.1f", a / n }'; }
med() { local d=$1; shift; printf "%.${d}f" "$(median "$@")"; }   # med DECIMALS NUMBERS...
usage_of() { rcli memory usage "$1" samples 0 | sed 's/^$/0/'; }
# the config with the window ($1: 0 or 10m) and any more queue lines
id_config() { local w=$1; shift; write_config "$@" "idempotency_window = $w"; }
# an empty Redis; with the window, published in config as ferryd would
id_flush() {
	rcli flushall >/dev/null
	[[ $1 == 0 ]] || rcli hset 'ferry:{bench}:config' idempotency_window "$id_window_ms" >/dev/null
}
id_push() { "$ferryctl" -c "$cfg" enqueue -q bench - <"$1" || die "ferryctl enqueue failed"; }

# make_jobs' 100-byte documents with an "id" of 10 bytes first, the
# payload 18 bytes shorter: still 100 bytes
id_make_files() {
	make_jobs "$id_n"
	id_jobs=$tmp/idem-jobs.txt
	awk '{ d = substr($0, 2); sub(/xxxxxxxxxxxxxxxxxx"}$/, "\"}", d)
		printf "{\"id\":\"j%09d\",%s\n", NR, d }' "$jobs_file" >"$id_jobs"
	head -n 1 "$id_jobs" >"$tmp/one.txt"
	head -n "$id_calls" "$id_jobs" >"$tmp/calls.txt"
	id_bytes=$(head -n 1 "$id_jobs" | tr -d '\n' | wc -c)
	((id_bytes == 100)) || die "the jobs with ids are $id_bytes bytes, not 100"
}

id_header() {
	local rev
	rev=$(git -C "$root" describe --always --dirty 2>/dev/null || echo unknown)
	echo "## Benchmark: idempotent enqueue (\`scripts/bench idem\`)"
	echo
	echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC'); machine: $(nproc) CPUs ($(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)), $(uname -sr); load average at start $load_start"
	echo "- $("$ferryd" -V) (${ferryd#"$root/"}, ${ferryctl#"$root/"}, built $(date -u -r "$ferryd" '+%Y-%m-%d %H:%M UTC'); source tree at git $rev)"
	echo "- $(redis-server --version | awk '{ print $3 }' | sed 's/v=/redis-server /') (private, 127.0.0.1 TCP, \`--save '' --appendonly no${BENCH_REDIS_ARGS:+ $BENCH_REDIS_ARGS}\`), all on the same host"
	echo "- jobs: \`$(head -n 1 "$id_jobs")\` ($id_bytes bytes, ids \`j000000001\`...)"
	echo
}

# ------------------------------------------------------------------ memory

declare -A im=()

id_memory() {
	local w b a wait_bin
	wait_bin=$(helper drain_wait)
	for w in "$id_window" 0; do
		id_config "$w" "$id_workers" 100 noop
		# the scripts into Redis' cache: a job enqueued and drained
		id_flush "$w"
		id_push "$tmp/one.txt"
		start_ferryd
		run_helper "$wait_bin" 127.0.0.1 "$port" "$k_stats" "done" 1 10 60 || ferryd_failed "warm-up job not done"
		stop_ferryd TERM
		id_flush "$w"
		# waiting: no workers
		b=$(used_memory)
		id_push "$id_jobs"
		a=$(used_memory)
		[[ $(rcli llen "$k_ready") == "$id_n" ]] || die "ready does not hold $id_n jobs"
		im[$w.wait]=$(per $((a - b)) "$id_n")
		im[$w.wait_ready]=$(per "$(usage_of "$k_ready")" "$id_n")
		im[$w.wait_ids]=$(per "$(usage_of 'ferry:{bench}:ids')" "$id_n")
		# done: the same jobs drained
		id_flush "$w"
		b=$(used_memory)
		id_push "$id_jobs"
		start_ferryd
		run_helper "$wait_bin" 127.0.0.1 "$port" "$k_stats" "done" "$id_n" 10 600 ||
			ferryd_failed "queue did not drain (window $w)"
		stop_ferryd TERM
		a=$(used_memory)
		im[$w.done]=$(per $((a - b)) "$id_n")
		im[$w.done_ids]=$(per "$(usage_of 'ferry:{bench}:ids')" "$id_n")
		im[$w.done_card]=$(rcli zcard 'ferry:{bench}:ids')
		im[$w.done_pos]=$(rcli zcount 'ferry:{bench}:ids' '(0' +inf)
		im[$w.keys]=$(rcli --raw keys '*' | sort | tr '\n' ' ')
		say "memory (window $w): waiting ${im[$w.wait]} B/job, done ${im[$w.done]} B/job, ids ${im[$w.done_ids]} B/id"
	done
	rcli flushall >/dev/null
}

id_report_memory() {
	local w=$id_window
	echo "### Redis bytes per id and per waiting job"
	echo
	echo "- command: \`$(id_cmdline memory)\`"
	echo "- done: $(commas "$id_n") jobs enqueued (\`ferryctl enqueue -q bench -\`), drained by ferryd (noop, $id_workers workers, batch 100),"
	echo "  which stops; \`used_memory\` after the drain − before the enqueue (after \`CONFIG RESETSTAT\`, the scripts already cached), / N;"
	echo "  waiting: the same jobs into the queue with no workers. Keys after the drain (window $w): \`${im[$w.keys]% }\`."
	echo
	echo "| idempotency_window | done: used_memory Δ / job | MEMORY USAGE ids / job | ids held (with a forget time) | waiting: B/job | MEMORY USAGE ready / job | ids / job |"
	echo "|---|---:|---:|---:|---:|---:|---:|"
	for w in 0 "$id_window"; do
		echo "| $w | **${im[$w.done]}** | **${im[$w.done_ids]}** | $(commas "${im[$w.done_card]:-0}") ($(commas "${im[$w.done_pos]:-0}")) | **${im[$w.wait]}** | ${im[$w.wait_ready]} | ${im[$w.wait_ids]} |"
	done
	echo
	echo "A remembered id costs $(awk -v a="${im[$id_window.done]}" -v b="${im[0.done]}" 'BEGIN { printf "%.1f", a - b }') B (done, window $id_window − 0), a waiting job"
	echo "$(awk -v a="${im[$id_window.wait]}" -v b="${im[0.wait]}" 'BEGIN { printf "%.1f", a - b }') B more with the window (its id held live)."
	echo
}

# ------------------------------------------------------------------ cost

id_cost_rows=

id_cost() {
	local bin runs=${BENCH_RUNS:-3}
	((runs <= 15)) || die "idem cost takes BENCH_RUNS up to 15"
	bin=$(helper id_cost)
	say "cost: $runs runs of $id_cost_calls calls per structure, 100,000 then 1,000,000 ids held"
	run_helper "$bin" "$port" "$runs" "$id_cost_calls" || die "id_cost failed"
	id_cost_rows=$helper_out
	rcli flushall >/dev/null
}

id_report_cost() {
	echo "### What holding one id costs Redis"
	echo
	echo "- command: \`$(id_cmdline cost)\`"
	echo "- one EVALSHA of 1,000 new ids a call (each call's ids removed again by an untimed EVAL, so the size holds);"
	echo "  Redis' time from \`INFO commandstats\`, the median of $((${BENCH_RUNS:-3})) runs of $id_cost_calls calls; \`plain\` is the same script with no id work"
	echo
	echo "| ids held | structure | what a call does | µs per id in Redis | net of plain | bytes per id |"
	echo "|---:|---|---|---:|---:|---:|"
	printf '%s\n' "$id_cost_rows"
	echo
}

# ------------------------------------------------------------------ rates

# cells: name|description|jobs
id_cells=(
	"ctl-1000|\`ferryctl enqueue -q bench -\`, one run, calls of 1,000|$id_n"
	"ctl-1|\`ferryctl enqueue -q bench JSON\`, one job a run (process start dominates)|$id_calls"
	"node-1000|Node \`Producer#enqueue\`, calls of 1,000 (timed inside Node)|$id_n"
	"node-1|Node \`Producer#enqueue\`, one job a call, awaited in turn|$id_calls"
)
if [[ -n ${BENCH_IDEM_CELLS:-} ]]; then
	for i in "${!id_cells[@]}"; do
		[[ ${id_cells[i]%%|*} =~ $BENCH_IDEM_CELLS ]] || unset 'id_cells[i]'
	done
	id_cells=("${id_cells[@]}")
fi
declare -A ir_rate=() ir_us=() ir_pair=() ir_load=() ir_script=() ir_z=()
ir_checks=ok

# One timed run of cell $1 with the window $2: sets id_last_rate, id_last_us.
id_rate_one() {
	local name=$1 w=$2 n=$3 t0 t1 c0 i out
	id_config "$w" 1 100 noop
	id_flush "$w"
	rcli config resetstat >/dev/null
	c0=$(cpu_ms "$redis_pid")
	case $name in
		ctl-1000)
			t0=${EPOCHREALTIME/./}
			id_push "$id_jobs"
			t1=${EPOCHREALTIME/./} ;;
		ctl-1)
			t0=${EPOCHREALTIME/./}
			for ((i = 0; i < n; i++)); do
				"$ferryctl" -c "$cfg" enqueue -q bench "${id_lines[i]}" || die "ferryctl enqueue JSON failed"
			done
			t1=${EPOCHREALTIME/./} ;;
		node-*)
			run_helper node "$root/tests/bench/idem_enqueue.js" "$root" "$port" bench "$id_jobs" "$n" "${name#node-}" ||
				die "idem_enqueue.js failed"
			read -r _ out _ i <<<"$helper_out"
			((i == 0)) || ir_checks="FAILED ($name, window $w): $i jobs already accepted"
			t0=0 t1=$out ;;
	esac
	id_last_us=$(awk -v a="$c0" -v b="$(cpu_ms "$redis_pid")" -v n="$n" 'BEGIN { printf "%.2f", (b - a) * 1000 / n }')
	# µs per job in enqueue.lua, and in its ZMSCORE + ZADD (commandstats)
	read -r id_last_script id_last_z < <(rcli info commandstats | awk -F'[:=,]' -v n="$n" '
		$1 ~ /^cmdstat_(eval|evalsha)$/ { s += $5 } $1 ~ /^cmdstat_(zadd|zmscore)$/ { z += $5 }
		END { printf "%.2f %.2f\n", s / n, z / n }')
	id_last_rate=$(awk -v n="$n" -v us=$((t1 - t0)) 'BEGIN { printf "%.0f", n * 1e6 / us }')
	out="ready $(rcli llen "$k_ready"), ids $(rcli zcard 'ferry:{bench}:ids')"
	if [[ $w == 0 && $out != "ready $n, ids 0" || $w != 0 && $out != "ready $n, ids $n" ]]; then
		ir_checks="FAILED ($name, window $w): $out"
	fi
}

id_rates() {
	local r cell name desc n w a b
	mapfile -t id_lines <"$tmp/calls.txt"
	# enqueue.lua into the script cache
	for w in 0 "$id_window"; do id_config "$w" 1 100 noop; id_push "$tmp/one.txt"; done
	for ((r = 1; r <= runs; r++)); do
		for cell in "${id_cells[@]}"; do
			IFS='|' read -r name desc n <<<"$cell"
			ir_load[$name]+="$(cut -d' ' -f1 /proc/loadavg) "
			for w in $( ((r % 2)) && echo "0 $id_window" || echo "$id_window 0"); do
				id_rate_one "$name" "$w" "$n"
				ir_rate[$name|$w]+="$id_last_rate "
				ir_us[$name|$w]+="$id_last_us "
				ir_script[$name|$w]+="$id_last_script " ir_z[$name|$w]+="$id_last_z "
				if [[ $w == 0 ]]; then a=$id_last_rate; else b=$id_last_rate; fi
				say "rates: $name, window $w: $id_last_rate jobs/s, Redis $id_last_us µs/job, script $id_last_script (ZMSCORE + ZADD $id_last_z) (run $r/$runs)"
			done
			ir_pair[$name]+="$(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.3f", b / a }') "
		done
	done
	rcli flushall >/dev/null
}

id_report_rates() {
	local cell name desc n m0 m1 rat
	echo "### Enqueue rates with and without the window"
	echo
	echo "- command: \`$(id_cmdline rates)\`"
	echo "- each run into an empty Redis (with the window, \`ferry:{bench}:config\` holds it, as ferryd publishes it); no ferryd."
	echo "  ferryctl: from its start to its exit (one job a run: the loop of $(commas "$id_calls") processes, each fork, exec, config,"
	echo "  connect and one script call: process start dominates). Node: one process (tests/bench/idem_enqueue.js), timed inside it."
	echo "- the two settings take turns (run 1: 0 first, run 2: $id_window first, ...), $runs runs; jobs/s: the median;"
	echo "  ratio: with / without, of the medians and of each run's pair; goal for calls of 1,000: a cost under 15% (ratio ≥ 0.85)."
	echo "- Redis CPU: redis-server's utime + stime (/proc/PID/stat, 10 ms ticks) over the run / N; enqueue.lua: the \`usec\` of"
	echo "  EVALSHA and EVAL in \`INFO commandstats\` (reset before each run) / N, and of the ZMSCORE and ZADD it calls; medians."
	echo "- a shared 2-core machine (other engineers' tests ran beside): noisy; the load average (1 min) at each cell's runs is in the last column."
	echo
	echo "| what | jobs | window 0, jobs/s | runs | window $id_window, jobs/s | runs | with / without | per run | Redis CPU µs/job, 0 / $id_window | enqueue.lua µs/job, 0 / $id_window (ZMSCORE + ZADD) | load |"
	echo "|---|---:|---:|---|---:|---|---:|---|---|---|---|"
	for cell in "${id_cells[@]}"; do
		IFS='|' read -r name desc n <<<"$cell"
		# shellcheck disable=SC2086  # lists of numbers
		m0=$(median_int ${ir_rate[$name|0]}) m1=$(median_int ${ir_rate[$name|$id_window]})
		rat=$(awk -v a="$m0" -v b="$m1" 'BEGIN { printf "%.3f", b / a }')
		# shellcheck disable=SC2086
		echo "| $desc | $(commas "$n") | **$(commas "$m0")** | $(runs_list "${ir_rate[$name|0]% }") | **$(commas "$m1")** | $(runs_list "${ir_rate[$name|$id_window]% }") | **$rat** | $(runs_list "${ir_pair[$name]% }") | $(med 1 ${ir_us[$name|0]}) / $(med 1 ${ir_us[$name|$id_window]}) | $(med 2 ${ir_script[$name|0]}) / $(med 2 ${ir_script[$name|$id_window]}) ($(med 2 ${ir_z[$name|$id_window]})) | ${ir_load[$name]% } |"
	done
	echo
	echo "Checks after every run (ready holds N; ids holds N with the window, none without; Node: none \"already accepted\"): $ir_checks"
	echo
}

# ------------------------------------------------------------------ wait

iw_checks=ok

id_wait() {
	local push_bin i doc t0 t1 rc out total got dead t_push0 t_push1 pushed
	local -a lines=("table = bench_idem" "columns = seq, enq_us, payload" "pg_host = 127.0.0.1"
		"pg_port = $pg_port" "pg_database = ferry" "pg_user = postgres")
	push_bin=$(helper latency_push)
	pq -c "CREATE TABLE bench_idem (seq bigint, enq_us bigint, payload text)" || pg_failed "CREATE TABLE failed"
	id_config "$id_window" "$id_workers" "$id_batch" postgres "${lines[@]}"
	"$ferryctl" -c "$cfg" init-db >&2 || die "ferryctl init-db failed"
	rcli flushall >/dev/null
	start_ferryd
	t_push0=$(now_us)
	"$push_bin" 127.0.0.1 "$port" "$k_ready" "$id_rate" 100000 0 >"$tmp/push.out" &
	probe_pid=$!
	sleep "$id_warmup"
	iw_load0=$(cut -d' ' -f1 /proc/loadavg)
	: >"$tmp/probes.txt"
	for ((i = 1; i <= id_probes; i++)); do
		rc=0
		t0=${EPOCHREALTIME/./}
		doc="{\"id\":\"w-$i\",\"seq\":-$i,\"enq_us\":$t0,\"payload\":\"probe\"}"
		"$ferryctl" -c "$cfg" enqueue --wait 30s bench "$doc" >"$tmp/probe.out" 2>"$tmp/probe.err" || rc=$?
		t1=${EPOCHREALTIME/./}
		out=$(<"$tmp/probe.out")
		if ((rc != 0)) || [[ $out != "w-$i done" ]]; then
			iw_checks="FAILED (probe $i): exit $rc, \"$out\" $(head -c 200 "$tmp/probe.err")"
			say "wait: probe $i: exit $rc, $out"
		fi
		echo "$i $t0 $t1" >>"$tmp/probes.txt"
		((i % 50)) || say "wait: $i/$id_probes probes"
	done
	stop_pid "$probe_pid" TERM 5
	probe_pid=
	t_push1=$(now_us)
	iw_load1=$(cut -d' ' -f1 /proc/loadavg)
	# drained: nothing waiting or in a processing list, every job taken done
	for ((i = 0; ; i++)); do
		[[ $(rcli eval "if redis.call('EXISTS', KEYS[1], KEYS[2]) + #redis.call('KEYS', 'ferry:{bench}:proc:*') > 0 then return 0 end
			local s = redis.call('HMGET', KEYS[3], 'enqueued', 'done', 'dead')
			return tonumber(s[1] or 0) == tonumber(s[2] or 0) + tonumber(s[3] or 0) and 1 or 0" 3 "$k_ready" "$k_requeue" "$k_stats") == 1 ]] && break
		((i < 3000)) || ferryd_failed "the queue did not drain"
		sleep 0.1
	done
	stop_ferryd TERM
	read -r got total pushed < <(pq -F' ' -c "SELECT count(*), count(DISTINCT seq), max(seq) + 1 FROM bench_idem")
	dead=$(rcli hget "$k_stats" dead)
	((got == total && pushed + id_probes == total && ${dead:-0} == 0)) ||
		iw_checks="FAILED: $got rows, $total distinct seq, $pushed background jobs + $id_probes probes, dead ${dead:-0}"
	iw_bg_rate=$(awk -v n="$pushed" -v us=$((t_push1 - t_push0)) 'BEGIN { printf "%.0f", n * 1e6 / us }')
	iw_total=$total
	# settle time of each probe: its score − the window (ms), in one ZMSCORE
	rcli zmscore 'ferry:{bench}:ids' $(seq -f 'w-%g' 1 "$id_probes") >"$tmp/scores.txt"
	# i, start µs, exit µs, settle µs
	paste -d' ' "$tmp/probes.txt" "$tmp/scores.txt" |
		awk -v w="$id_window_ms" '$4 > w { printf "%s %s %s %.0f\n", $1, $2, $3, ($4 - w) * 1000 }' >"$tmp/lat.txt"
	iw_n=$(wc -l <"$tmp/lat.txt")
	((iw_n == id_probes)) || iw_checks="FAILED: $iw_n of $id_probes probes have a done score"
	read -r _ iw_a50 iw_a90 iw_a99 iw_amax < <(lat_pcts '$3 - $4' "$tmp/lat.txt")
	read -r _ iw_t50 iw_t90 iw_t99 iw_tmax < <(lat_pcts '$3 - $2' "$tmp/lat.txt")
	read -r _ iw_s50 iw_s90 iw_s99 iw_smax < <(lat_pcts '$4 - $2' "$tmp/lat.txt")
	read -r iw_amin iw_smin < <(awk 'NR == 1 || $3 - $4 < a { a = $3 - $4 } NR == 1 || $4 - $2 < s { s = $4 - $2 }
		END { printf "%.2f %.2f\n", a / 1000, s / 1000 }' "$tmp/lat.txt")
	say "wait: exit − settle p50 $iw_a50 p90 $iw_a90 p99 $iw_a99 max $iw_amax ms; start → exit p50 $iw_t50 ms"
}

id_report_wait() {
	echo "### How soon \`ferryctl enqueue --wait\` answers"
	echo
	echo "- command: \`$(id_cmdline wait)\`"
	echo "- a postgres queue (\`idempotency_window = $id_window\`, $id_workers workers, batch_size $id_batch, \`columns = seq, enq_us, payload\`"
	echo "  into \`bench_idem\`; private PostgreSQL $("$pg_bindir/postgres" -V | awk '{ print $3 }'), $pg_settings_str);"
	echo "  a background producer (tests/bench/latency_push.c, plain LPUSH every 1 ms, no ids) at $(commas "$id_rate") jobs/s"
	echo "  (achieved $(commas "$iw_bg_rate")) from $id_warmup s before the first probe to the last; $(commas "$iw_total") jobs in all, every one a row"
	echo "- $id_probes probes one after the other: \`ferryctl -c CONFIG enqueue --wait 30s bench '{\"id\":\"w-<i>\",\"seq\":-<i>,\"enq_us\":T,\"payload\":\"probe\"}'\`."
	echo "  exit: CLOCK_REALTIME when ferryctl has exited (bash's \$EPOCHREALTIME after the wait); settle: \`ZSCORE ferry:{bench}:ids w-<i>\`"
	echo "  − the window, read after the run: the Redis time (ms, floored: up to 1 ms early) at which settle.lua marked the job done,"
	echo "  right after the PostgreSQL commit. The waiter reads ZMSCORE right after the push, then after pauses of 15, 22, 33, 49,"
	echo "  73, ... ms (1.5 times the last, up to 250) while nothing settles: \"after the settle\" is where the settle falls between"
	echo "  two reads, plus the last read and ferryctl's exit."
	echo "- load average (1 min) at the first probe $iw_load0, after the last $iw_load1; a shared 2-core machine: noisy."
	echo
	echo "| ms | median | p90 | p99 | max |"
	echo "|---|---:|---:|---:|---:|"
	echo "| ferryctl exit − the settle that follows the commit | **$iw_a50** | **$iw_a90** | **$iw_a99** | $iw_amax |"
	echo "| start of ferryctl → the settle (push, queue, COPY, commit) | $iw_s50 | $iw_s90 | $iw_s99 | $iw_smax |"
	echo "| start of ferryctl → its exit (enqueue → answer) | **$iw_t50** | **$iw_t90** | **$iw_t99** | $iw_tmax |"
	echo
	echo "Smallest: exit − settle $iw_amin ms, start → settle $iw_smin ms. Checks (each probe exits 0 printing \`w-<i> done\`, has a done score; rows = jobs, dead 0): $iw_checks"
	echo
}

# ------------------------------------------------------------------ main

command -v redis-server >/dev/null || die "redis-server is not installed (scripts/deps)"
command -v redis-cli >/dev/null || die "redis-cli is not installed (scripts/deps)"
ensure_build
helper drain_wait >/dev/null
if id_has rates && [[ " ${id_cells[*]} " == *"|Node "* ]]; then
	command -v node >/dev/null || die "the Node cells need node (or BENCH_IDEM_CELLS=ctl)"
	[[ -d $root/clients/node/node_modules/redis ]] ||
		die "no clients/node/node_modules: run npm ci --prefer-offline in clients/node"
fi
if id_has wait; then
	need_pg_bindir
	helper latency_push >/dev/null
fi
bench_start
id_make_files
id_header
if id_has cost; then
	id_cost
	id_report_cost
fi
if id_has memory; then
	id_memory
	id_report_memory
fi
if id_has rates; then
	id_rates
	id_report_rates
fi
if id_has wait; then
	start_pg
	pg_settings_str=$(pg_settings)
	id_wait
	id_report_wait
fi
echo "Load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)."
