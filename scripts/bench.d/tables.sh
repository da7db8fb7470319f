# scripts/bench.d/tables.sh - `scripts/bench pg tables`, sourced by scripts/bench
# once its helpers are defined (start_redis, start_pg, write_config,
# start_ferryd, enqueue, drain_wait...): a postgres queue writing two tables
# with a foreign key (tables = orders, order_lines), each job one order and
# BENCH_TABLES_LINES lines, the lines first in the document (the parents-
# first order of tables makes that work). Jobs are enqueued before ferryd
# starts; the clock runs from `ferryd -f` until done = N; rows/s counts the
# rows of both tables. Every run's result is checked exactly (N orders,
# N x lines lines, none dead). The same rows into one table (orders alone,
# the lines dropped) beside it, for scale.
#
# Environment: BENCH_TABLES_JOBS [100000], BENCH_TABLES_LINES [2],
# BENCH_TABLES_BATCH [1000], BENCH_TABLES_WORKERS ["1 2"], BENCH_RUNS,
# BENCH_PG_ARGS, PG_BINDIR.
# shellcheck shell=bash disable=SC2154,SC2034  # variables of scripts/bench

tb_jobs=${BENCH_TABLES_JOBS:-100000}
tb_lines=${BENCH_TABLES_LINES:-2}
tb_batch=${BENCH_TABLES_BATCH:-1000}
read -r -a tb_workers <<<"${BENCH_TABLES_WORKERS:-1 2}"
for v in "$tb_jobs" "$tb_lines" "$tb_batch" "${tb_workers[@]}"; do
	[[ $v =~ ^[1-9][0-9]*$ ]] || die "BENCH_TABLES_* take positive integers, not \"$v\""
done
cmdline="$prog pg tables"
for v in BENCH_TABLES_JOBS BENCH_TABLES_LINES BENCH_TABLES_BATCH BENCH_TABLES_WORKERS \
	BENCH_RUNS BENCH_PG_ARGS BENCH_REDIS_ARGS PG_BINDIR FERRYD FERRYCTL; do
	if [[ -n ${!v:-} ]]; then cmdline="$v=${!v@Q} $cmdline"; fi
done

tb_schema="CREATE TABLE orders (id bigint PRIMARY KEY, customer text NOT NULL, total int NOT NULL);
CREATE TABLE order_lines (order_id bigint NOT NULL REFERENCES orders (id), line int NOT NULL, item text, qty int)"

# Job i: {"data":{"order_lines":[LINES lines of order i],"orders":[order i]}}
# into $tmp/tables-jobs.txt; the same orders alone into $tmp/orders-jobs.txt.
tb_make_jobs() {
	awk -v n="$tb_jobs" -v lines="$tb_lines" -v two="$tmp/tables-jobs.txt" \
		-v one="$tmp/orders-jobs.txt" 'BEGIN {
		for (i = 1; i <= n; i++) {
			o = sprintf("{\"id\":%d,\"customer\":\"customer-%d\",\"total\":%d}", i, i % 977, i % 10000)
			l = ""
			for (k = 1; k <= lines; k++)
				l = l sprintf("%s{\"order_id\":%d,\"line\":%d,\"item\":\"item-%d\",\"qty\":%d}", k > 1 ? "," : "", i, k, (i + k) % 5003, k)
			printf "{\"data\":{\"order_lines\":[%s],\"orders\":[%s]}}\n", l, o > two
			printf "{\"data\":%s}\n", o > one
		}
	}'
}

tb_reset() {
	pq -c "TRUNCATE order_lines, orders, ferry_batches" -c "CHECKPOINT" >/dev/null ||
		pg_failed "TRUNCATE failed"
}

# Both tables must hold exactly what the jobs wrote ($1: lines a job).
tb_check() {
	local got
	got=$(pq -c "SELECT count(*) || ' ' || count(DISTINCT id) FROM orders")
	[[ $got == "$tb_jobs $tb_jobs" ]] || die "orders holds $got rows / distinct ids, not $tb_jobs"
	got=$(pq -c "SELECT count(*) || ' ' || count(DISTINCT (order_id, line)) FROM order_lines")
	[[ $got == "$((tb_jobs * $1)) $((tb_jobs * $1))" ]] ||
		die "order_lines holds $got rows / distinct keys, not $((tb_jobs * $1))"
}

declare -A tb_rate=()
# One drain: $1 label, $2 workers, $3 jobs file, $4 lines a job, the
# queue lines after. Appends rows/s to tb_rate[$1 $2].
tb_drain() {
	local label=$1 workers=$2 file=$3 lines=$4 wait_bin t0 first t_done dead rate
	shift 4
	wait_bin=$(helper drain_wait)
	stop_ferryd TERM
	tb_reset
	rcli flushall >/dev/null
	write_config "$workers" "$tb_batch" postgres "$@"
	jobs_file=$file
	drain_timed "$tb_jobs" "$label, workers $workers"
	dead=$(rcli hget "$k_stats" dead)
	((${dead:-0} == 0)) || ferryd_failed "dead $dead jobs ($label, workers $workers)"
	tb_check "$lines"
	rate=$(awk -v n="$((tb_jobs * (1 + lines)))" -v us=$((t_done - t0)) 'BEGIN { printf "%.0f", n * 1e6 / us }')
	tb_rate["$label $workers"]+="$rate "
	say "$label: workers $workers, batch $tb_batch: $rate rows/s (run $r/$runs)"
}

bench_tables() {
	local r w pg=("pg_host = 127.0.0.1" "pg_port = $pg_port" "pg_database = ferry" "pg_user = postgres")
	tb_make_jobs
	pq -c "$tb_schema" >/dev/null || pg_failed "CREATE TABLE failed"
	write_config 1 "$tb_batch" postgres "tables = orders, order_lines" "${pg[@]}"
	"$ferryctl" -c "$cfg" init-db >&2 || die "ferryctl init-db failed"
	for ((r = 1; r <= runs; r++)); do
		for w in "${tb_workers[@]}"; do
			tb_drain "two tables" "$w" "$tmp/tables-jobs.txt" "$tb_lines" \
				"tables = orders, order_lines" "${pg[@]}"
			tb_drain "orders alone" "$w" "$tmp/orders-jobs.txt" 0 \
				"table = orders" "${pg[@]}"
		done
	done
}

report_tables() {
	local rev w label
	rev=$(git -C "$root" describe --always --dirty 2>/dev/null || echo unknown)
	echo "## Benchmark: two PostgreSQL tables with a foreign key (\`scripts/bench pg tables\`)"
	echo
	echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC'); machine: $(nproc) CPUs ($(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)); load average at start $load_start, at end $(cut -d' ' -f1-3 /proc/loadavg)"
	echo "- software: $("$ferryd" -V) (git $rev), $("$pg_bindir/postgres" -V | sed 's/ (PostgreSQL)//') (private, fresh initdb, 127.0.0.1 TCP); PostgreSQL settings in force: $pg_settings_str"
	echo "- command: \`${cmdline}\`"
	echo "- tables: \`$(tr '\n' ' ' <<<"$tb_schema")\`; $(commas "$tb_jobs") jobs of one order and $tb_lines lines each (lines first), e.g. \`$(head -n 1 "$tmp/tables-jobs.txt")\`; \"orders alone\": the same orders, one table"
	echo "- clock from \`ferryd -f\` until done = N; rows of both tables counted; each run checked exactly; median of $runs runs"
	echo
	echo "| queue | workers | rows/s (median) | runs |"
	echo "|---|---:|---:|---|"
	for label in "two tables" "orders alone"; do
		for w in "${tb_workers[@]}"; do
			# shellcheck disable=SC2086  # the runs, one word each
			echo "| $label | $w | **$(commas "$(median_int ${tb_rate["$label $w"]})")** | ${tb_rate["$label $w"]% } |"
		done
	done
}

ensure_build
helper drain_wait >/dev/null
need_pg_bindir
bench_start
start_pg
pg_settings_str=$(pg_settings)
bench_tables
report_tables
