# scripts/bench.d/ratelimit.sh - `scripts/bench ratelimit`, sourced by
# scripts/bench once its helpers are defined (start_redis, write_config,
# start_ferryd, enqueue, drain_wait...): a noop queue held to rate_limit.
#
#   1. achieved jobs/s against the limit for BENCH_RL_RATES (100 1000
#      10000): BENCH_RL_SECS seconds of jobs (rate x secs) enqueued before
#      ferryd starts; achieved = the jobs after the first burst (one
#      second's tokens) / the time from the first done job to the last;
#      also the Redis script calls per second, all of ferry's (fetch,
#      settle, the master's): no busy loop while the workers wait
#   2. the same queue without a limit, with this ferryd and with
#      BENCH_RL_BEFORE (a ferryd built from the commit before, if given),
#      taking turns: the fetch path without a limit costs nothing
#
# Environment: BENCH_RL_RATES ["100 1000 10000"], BENCH_RL_SECS [5],
# BENCH_RL_WORKERS [4], BENCH_RL_BATCH [100], BENCH_RL_JOBS [200000] (the
# unlimited drain), BENCH_RL_BEFORE [] (a ferryd binary), BENCH_RUNS.
# shellcheck shell=bash disable=SC2154,SC2034  # variables of scripts/bench

read -r -a rl_rates <<<"${BENCH_RL_RATES:-100 1000 10000}"
rl_secs=${BENCH_RL_SECS:-5}
rl_workers=${BENCH_RL_WORKERS:-4}
rl_batch=${BENCH_RL_BATCH:-100}
rl_jobs=${BENCH_RL_JOBS:-200000}
rl_before=${BENCH_RL_BEFORE:-}
for v in "${rl_rates[@]}" "$rl_secs" "$rl_workers" "$rl_batch" "$rl_jobs"; do
	[[ $v =~ ^[1-9][0-9]*$ ]] || die "BENCH_RL_* take positive integers, not \"$v\""
done
[[ -z $rl_before || -x $rl_before ]] || die "BENCH_RL_BEFORE: no ferryd at $rl_before"
cmdline="$prog ratelimit"
for v in BENCH_RL_RATES BENCH_RL_SECS BENCH_RL_WORKERS BENCH_RL_BATCH BENCH_RL_JOBS \
	BENCH_RL_BEFORE BENCH_RUNS BENCH_REDIS_ARGS FERRYD FERRYCTL; do
	if [[ -n ${!v:-} ]]; then cmdline="$v=${!v@Q} $cmdline"; fi
done

# One drain of $1 jobs with the queue lines $2... (rate_limit); sets
# rl_first, rl_done (us) and rl_calls (script calls, EVALSHA + EVAL).
rl_drain() {
	local n=$1 wait_bin
	shift
	wait_bin=$(helper drain_wait)
	write_config "$rl_workers" "$rl_batch" noop "$@"
	rcli flushall >/dev/null
	enqueue "$n"
	[[ $(rcli llen "$k_ready") == "$n" ]] || die "ready does not hold $n jobs"
	rcli config resetstat >/dev/null
	start_ferryd
	run_helper "$wait_bin" 127.0.0.1 "$port" "$k_stats" "done" "$n" 5 600 ||
		ferryd_failed "queue did not drain ($*)"
	read -r rl_first rl_done <<<"$helper_out"
	rl_calls=$(rcli info commandstats | awk -F'[=:,]' '$1 ~ /^cmdstat_(evalsha|eval)$/ { c += $3 } END { print c + 0 }')
	stop_ferryd TERM
}

declare -a rl_rows=() rl_free_rows=()
bench_ratelimit() {
	local rate n r burst ach calls achs callss keys
	for rate in "${rl_rates[@]}"; do
		n=$((rate * rl_secs))
		burst=$rate
		achs=() callss=()
		for ((r = 1; r <= runs; r++)); do
			rl_drain "$n" "rate_limit = $rate/s"
			ach=$(awk -v n=$((n - burst)) -v us=$((rl_done - rl_first)) 'BEGIN { printf "%.0f", (us > 0 ? n * 1e6 / us : 0) }')
			calls=$(awk -v c="$rl_calls" -v us=$((rl_done - rl_first)) 'BEGIN { printf "%.0f", (us > 0 ? c * 1e6 / us : 0) }')
			achs+=("$ach")
			callss+=("$calls")
			say "ratelimit: $rate/s, $n jobs: $ach jobs/s achieved, $calls script calls/s (run $r/$runs)"
		done
		rl_rows+=("$rate|$n|$(median_int "${achs[@]}")|${achs[*]}|$(median_int "${callss[@]}")")
	done
	local bin label rates_now=() rates_before=() rate_now
	for ((r = 1; r <= runs; r++)); do
		for label in now before; do
			bin=$ferryd
			if [[ $label == before ]]; then
				[[ -n $rl_before ]] || continue
				bin=$rl_before
			fi
			local saved=$ferryd
			ferryd=$bin
			rl_drain "$rl_jobs"
			ferryd=$saved
			keys=$(rcli exists 'ferry:{bench}:rate')
			[[ $keys == 0 ]] || die "a queue without rate_limit has a bucket key"
			rate_now=$(awk -v n="$rl_jobs" -v us=$((rl_done - rl_first)) 'BEGIN { printf "%.0f", n * 1e6 / us }')
			if [[ $label == now ]]; then rates_now+=("$rate_now"); else rates_before+=("$rate_now"); fi
			say "ratelimit: no limit ($label), $rl_jobs jobs: $rate_now jobs/s (run $r/$runs)"
		done
	done
	rl_free_rows+=("this ferryd|$(median_int "${rates_now[@]}")|${rates_now[*]}")
	if [[ -n $rl_before ]]; then
		rl_free_rows+=("before ($rl_before)|$(median_int "${rates_before[@]}")|${rates_before[*]}")
	fi
}

report_ratelimit() {
	local row rate n med all calls
	echo "### rate_limit ($(date -u '+%Y-%m-%d %H:%M UTC'), git $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?'))"
	echo
	echo "\`$cmdline\`; load average at start $load_start, at the end $(cut -d' ' -f1-3 /proc/loadavg);"
	echo "$(nproc) cores. A noop queue, $rl_workers workers, batch_size $rl_batch, median of $runs runs."
	echo
	echo "Held to the limit: rate × $rl_secs s of jobs enqueued before ferryd starts; achieved = the jobs after the"
	echo "first burst (one second's tokens) / the time from the first done job to the last (polled every 5 ms)."
	echo
	echo "| rate_limit | jobs | achieved jobs/s | runs | script calls/s (fetch, settle, the master's) |"
	echo "|---:|---:|---:|---|---:|"
	for row in "${rl_rows[@]}"; do
		IFS='|' read -r rate n med all calls <<<"$row"
		echo "| $(commas "$rate")/s | $(commas "$n") | **$(commas "$med")** | $all | $calls |"
	done
	echo
	echo "Without a limit, $(commas "$rl_jobs") jobs (time from the first done job to the last; no \`ferry:{bench}:rate\` key"
	echo "afterwards, checked):"
	echo
	echo "| ferryd | jobs/s | runs |"
	echo "|---|---:|---|"
	for row in "${rl_free_rows[@]}"; do
		IFS='|' read -r rate med all <<<"$row"
		echo "| $rate | **$(commas "$med")** | $all |"
	done
}

ensure_build
helper drain_wait >/dev/null
bench_start
maxn=$rl_jobs
for rate in "${rl_rates[@]}"; do
	if ((rate * rl_secs > maxn)); then maxn=$((rate * rl_secs)); fi
done
make_jobs "$maxn"
bench_ratelimit
report_ratelimit
