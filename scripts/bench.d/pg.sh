# scripts/bench.d/pg.sh - sourced by scripts/bench: the private PostgreSQL
# (start_pg, pq, pg_settings) and the pg and pg upsert benchmarks. Uses
# the setup helpers and variables of scripts/bench (tmp, port, cfg, helper,
# run_helper, write_config, ...); runs nothing when sourced.
# shellcheck shell=bash disable=SC2154

# ------------------------------------------------------------------ pg: servers

pg_dir=
pg_db=ferry
pg_conninfo=

# Exec a PostgreSQL program, as user postgres when we are root (initdb and
# postgres refuse root), in the directory $1. Run it in a subshell:
# (exec_pg DIR PROG ARGS) &. setpriv execs too, so $! is the program's pid.
# BENCH_PG_PIN: on CPU 0 (taskset execs too).
exec_pg() {
	cd "$1" || exit 1
	shift
	if [[ ${BENCH_PG_PIN:-} == yes ]]; then
		set -- taskset -c 0 "$@"
	fi
	if ((EUID == 0)); then
		exec setpriv --reuid=postgres --regid=postgres --init-groups -- "$@"
	fi
	exec "$@"
}

pq() {
	"$pg_bindir/psql" -X -q -A -t -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$pg_port" \
		-U postgres -d "$pg_db" "$@"
}

pg_failed() {
	tail -n 30 "$pg_dir/postgres.log" >&2 2>/dev/null || true
	die "$*"
}

# initdb into $tmp/pg/data, then postgres on a free 127.0.0.1 port (random
# ports until one binds), its socket in $tmp/pg; CREATE DATABASE ferry.
start_pg() {
	local try i
	pg_dir=$tmp/pg
	mkdir -p "$pg_dir"
	if ((EUID == 0)); then
		id postgres >/dev/null 2>&1 ||
			die "running as root, but there is no user postgres to run initdb and postgres as (apt-get install postgresql-15)"
		chmod 711 "$tmp"
		chown postgres: "$pg_dir"
	fi
	# --no-sync: initdb's own files need not reach the disk; the server
	# below runs with fsync on
	(exec_pg "$pg_dir" "$pg_bindir/initdb" -D "$pg_dir/data" -U postgres -A trust \
		-E UTF8 --no-locale --no-sync --no-instructions) >"$pg_dir/initdb.log" 2>&1 || {
		tail -n 20 "$pg_dir/initdb.log" >&2
		die "initdb failed"
	}
	for ((try = 0; try < 10; try++)); do
		pg_port=$((20000 + RANDOM % 40000))
		(exec_pg "$pg_dir" "$pg_bindir/postgres" -D "$pg_dir/data" -k "$pg_dir" -h 127.0.0.1 \
			-p "$pg_port" "${pg_extra[@]}") </dev/null >>"$pg_dir/postgres.log" 2>&1 &
		pg_pid=$!
		for ((i = 0; i < 600; i++)); do
			kill -0 "$pg_pid" 2>/dev/null || break
			if "$pg_bindir/pg_isready" -q -h 127.0.0.1 -p "$pg_port" -d postgres; then
				[[ $(cat "/proc/$pg_pid/comm" 2>/dev/null) == postgres ]] ||
					pg_failed "pid $pg_pid is not the postmaster"
				pg_db=postgres pq -c "CREATE DATABASE ferry" ||
					pg_failed "CREATE DATABASE ferry failed"
				pg_conninfo="host=127.0.0.1 port=$pg_port dbname=ferry user=postgres sslmode=disable"
				say "private PostgreSQL on 127.0.0.1:$pg_port (pid $pg_pid, data $pg_dir/data)"
				return 0
			fi
			sleep 0.05
		done
		stop_pid "$pg_pid" INT 30
		pg_pid=
		grep -q 'Address already in use' "$pg_dir/postgres.log" 2>/dev/null ||
			pg_failed "postgres did not start"
		: >"$pg_dir/postgres.log"
	done
	pg_failed "could not start postgres on a free port"
}

# The server's durability and memory settings, "name=value, ...".
pg_settings() {
	pq -F= -c "SELECT name, setting || coalesce(unit, '') FROM pg_settings WHERE name IN
		('fsync', 'synchronous_commit', 'full_page_writes', 'wal_level',
		 'shared_buffers', 'max_wal_size', 'checkpoint_timeout', 'wal_buffers')
		ORDER BY name" | paste -sd, - | sed 's/,/, /g'
}

# ------------------------------------------------------------------ pg: benchmark

# The same rows as the jobs, in COPY text format: user_id, event, payload.
rows_file() {
	local n=$1 f=$tmp/rows-$1.txt
	if [[ ! -f $f ]]; then
		head -n "$n" "$jobs_file" |
			sed -E 's/^\{"user_id":([0-9]+),"event":"([^"]*)","payload":"([^"]*)"\}$/\1\t\2\t\3/' >"$f"
		if [[ $(wc -l <"$f") != "$n" ]] || grep -q '[{"]' "$f"; then
			die "cannot turn the jobs into COPY rows"
		fi
	fi
	printf '%s' "$f"
}

# Empty the tables between runs, and checkpoint so that no run pays for the
# previous run's dirty pages.
pg_reset() {
	pq -c "TRUNCATE bench_rows, ferry_batches" -c "CHECKPOINT" >/dev/null ||
		pg_failed "TRUNCATE failed"
}

# bench_rows must hold exactly $1 rows, $1 distinct user ids.
pg_check_rows() {
	local n=$1 got
	got=$(pq -c "SELECT count(*) || ' ' || count(DISTINCT user_id) FROM bench_rows")
	[[ $got == "$n $n" ]] || die "$2: bench_rows holds $got rows / distinct user ids, not $n"
}

declare -A raw_rate=() raw_all=()
declare -a pg_tp_rows=()
ins_rate=
ins_all=
declare -a pg_cpu_rows=()

# BENCH_PERF: profile the whole machine while ferry drains the queue
perf_pid=
perf_start() {
	[[ -n ${BENCH_PERF:-} ]] || return 0
	command -v perf >/dev/null || die "BENCH_PERF is set but perf is not installed (apt-get install linux-perf)"
	perf record -a -g -q -o "$1" >/dev/null 2>&1 &
	perf_pid=$!
	sleep 0.5   # let perf attach before the clock starts
}
perf_stop() {
	[[ -n $perf_pid ]] || return 0
	kill -INT "$perf_pid" 2>/dev/null || true
	wait "$perf_pid" 2>/dev/null || true
	perf_pid=
}

# One run's CPU: N rows in SECS s, then each party's CPU ms; printed as
# ms per 1000 rows each, then the cores they kept busy (all of it / SECS)
cpu_line() {
	local n=$1 secs=$2
	shift 2
	awk -v n="$n" -v secs="$secs" -v list="$*" 'BEGIN {
		k = split(list, ms, " ")
		for (i = 1; i <= k; i++) { printf "%.2f ", ms[i] * 1000 / n; all += ms[i] }
		printf "%.2f", (secs > 0 ? all / 1000 / secs : 0)
	}'
}
# The median of each column of cpu_line's runs ("a b c|a b c|...")
cpu_medians() {
	tr '|' '\n' <<<"${1%|}" | awk '
		NF { for (i = 1; i <= NF; i++) v[i, ++c[i]] = $i; if (NF > k) k = NF }
		END {
			for (i = 1; i <= k; i++) {
				m = c[i]
				for (a = 1; a <= m; a++) for (b = a + 1; b <= m; b++)
					if (v[i, b] + 0 < v[i, a] + 0) { t = v[i, a]; v[i, a] = v[i, b]; v[i, b] = t }
				x = (m % 2) ? v[i, (m + 1) / 2] : (v[i, m / 2] + v[i, m / 2 + 1]) / 2
				printf "%s%.2f", (i > 1 ? " " : ""), x
			}
		}'
}

bench_pg() {
	local wait_bin raw_bin workers batch n r rf secs rate rates first t_done
	local steady dead retried batches c0 c1 p0 p1 r0 r1 f1
	wait_bin=$(helper drain_wait)
	raw_bin=$(helper copy_raw libpq)
	pq -c "CREATE TABLE bench_rows (user_id bigint, event text, payload text)" ||
		pg_failed "CREATE TABLE failed"
	pg_cfg_lines=("table = bench_rows" "pg_host = 127.0.0.1" "pg_port = $pg_port"
		"pg_database = ferry" "pg_user = postgres"
		"pipeline = ${BENCH_PG_PIPELINE:-yes}")
	write_config 1 1 postgres "${pg_cfg_lines[@]}"
	"$ferryctl" -c "$cfg" init-db >&2 || die "ferryctl init-db failed"

	# Raw COPY from W clients and ferry with W workers take turns (run r
	# of raw COPY, then run r of ferry, for each W), so that both see the
	# same load on a shared machine.
	for batch in "${pg_batches[@]}"; do
		n=$pg_jobs_n
		((batch == 1)) && n=$pg_jobs_b1
		rf=$(rows_file "$n")
		local -A cell_rates=() cell_steadies=() cell_startups=() cell_nb=() cell_cpu=()
		for workers in "${pg_workers[@]}"; do raw_all[$batch,$workers]=; done
		for ((r = 1; r <= runs; r++)); do
			for workers in "${pg_workers[@]}"; do
				# the ceiling: raw COPY from W clients in parallel, one
				# statement (= one transaction) per batch
				stop_ferryd TERM
				pg_reset
				children_cpu_ms
				c0=$children_ms p0=$(cpu_ms "$pg_pid")
				run_helper "$raw_bin" -c "$workers" "$pg_conninfo" bench_rows "$rf" "$batch" copy ||
					pg_failed "copy_raw failed"
				p1=$(cpu_ms "$pg_pid")
				children_cpu_ms
				c1=$children_ms
				read -r _ secs rate <<<"$helper_out"
				cell_cpu[raw,$workers]+="$(cpu_line "$n" "$secs" $((p1 - p0)) $((c1 - c0)))|"
				pg_check_rows "$n" "raw COPY"
				raw_all[$batch,$workers]+="$rate "
				say "raw COPY: $workers clients, $batch rows a transaction, $n rows: $secs s, $rate rows/s (run $r/$runs)"

				pg_reset
				rcli flushall >/dev/null
				write_config "$workers" "$batch" postgres "${pg_cfg_lines[@]}"
				enqueue "$n"
				[[ $(rcli llen "$k_ready") == "$n" ]] || die "ready does not hold $n jobs"
				perf_start "${BENCH_PERF:-}.b$batch.w$workers.r$r"
				p0=$(cpu_ms "$pg_pid") r0=$(cpu_ms "$redis_pid")
				t0=$(now_us)
				start_ferryd
				run_helper "$wait_bin" 127.0.0.1 "$port" "$k_stats" "done" "$n" 10 900 ||
					ferryd_failed "queue did not drain (workers $workers, batch $batch)"
				p1=$(cpu_ms "$pg_pid") r1=$(cpu_ms "$redis_pid") f1=$(cpu_ms "$ferryd_pid")
				perf_stop
				read -r first t_done <<<"$helper_out"
				cell_cpu[ferry,$workers]+="$(cpu_line "$n" "$(awk -v us=$((t_done - t0)) 'BEGIN { print us / 1e6 }')" \
					$((p1 - p0)) $((r1 - r0)) "$f1")|"
				stop_ferryd TERM
				pg_check_rows "$n" "ferry (workers $workers, batch $batch)"
				dead=$(rcli hget "$k_stats" dead)
				retried=$(rcli hget "$k_stats" retried)
				((${dead:-0} == 0 && ${retried:-0} == 0)) ||
					ferryd_failed "dead $dead, retried $retried jobs (workers $workers, batch $batch)"
				batches=$(pq -c "SELECT count(*) FROM ferry_batches")
				rate=$(awk -v n="$n" -v us=$((t_done - t0)) 'BEGIN { printf "%.0f", n * 1e6 / us }')
				steady=$(awk -v n="$n" -v us=$((t_done - first)) 'BEGIN { printf "%.0f", (us > 0 ? n * 1e6 / us : 0) }')
				cell_rates[$workers]+="$rate "
				cell_steadies[$workers]+="$steady "
				cell_startups[$workers]+="$(awk -v us=$((first - t0)) 'BEGIN { printf "%.0f", us / 1000 }') "
				cell_nb[$workers]=$(awk -v n="$n" -v b="$batches" 'BEGIN { printf "%.0f", n / b }')
				say "ferry: workers $workers, batch $batch, $n jobs: $(awk -v us=$((t_done - t0)) 'BEGIN { printf "%.3f", us / 1e6 }') s, $rate jobs/s, $batches transactions (run $r/$runs)"
			done
		done
		for workers in "${pg_workers[@]}"; do
			raw_all[$batch,$workers]=${raw_all[$batch,$workers]% }
			# shellcheck disable=SC2086 # lists of numbers
			raw_rate[$batch,$workers]=$(median_int ${raw_all[$batch,$workers]})
			# shellcheck disable=SC2086
			pg_tp_rows+=("$batch|$workers|$n|$(median_int ${cell_rates[$workers]})|${cell_rates[$workers]% }|$(median_int ${cell_steadies[$workers]})|$(median_int ${cell_startups[$workers]})|${cell_nb[$workers]}")
			pg_cpu_rows+=("$batch|$workers|$(cpu_medians "${cell_cpu[raw,$workers]}")|$(cpu_medians "${cell_cpu[ferry,$workers]}")")
		done
	done

	# the naive baseline: one INSERT per row, each its own transaction
	rf=$(rows_file "$pg_insert_n")
	rates=()
	for ((r = 1; r <= runs; r++)); do
		pg_reset
		run_helper "$raw_bin" "$pg_conninfo" bench_rows "$rf" 1 insert ||
			pg_failed "copy_raw insert failed"
		read -r _ secs rate <<<"$helper_out"
		pg_check_rows "$pg_insert_n" "INSERT"
		rates+=("$rate")
		say "INSERT: 1 row a transaction, $pg_insert_n rows: $secs s, $rate rows/s (run $r/$runs)"
	done
	ins_rate=$(median_int "${rates[@]}")
	ins_all="${rates[*]}"
	pg_reset
}

# runs as "a, b, c" with thousands separators
runs_list() { for x in $1; do printf '%s ' "$(commas "$x")"; done | sed 's/ $//; s/ /, /g'; }

report_pg() {
	local row b w n med all steady startup nb target ratio sratio cpu kernel rev raw
	cpu=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)
	kernel=$(uname -sr)
	rev=$(git -C "$root" describe --always --dirty 2>/dev/null || echo unknown)
	local stale=
	if [[ -z ${FERRYD:-} ]] && [[ -n $(find "$root/src" -type f -newer "$ferryd" -print -quit 2>/dev/null) ]]; then
		stale=" (NOTE: older than files in src/; run make to measure the current source)"
	fi

	echo "## Benchmark: PostgreSQL sink (\`scripts/bench pg\`)"
	echo
	echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC')"
	echo "- machine: $(nproc --all) CPUs ($cpu), $kernel; load average at start $load_start, at end $(cut -d' ' -f1-3 /proc/loadavg)"
	echo "- software: $("$ferryd" -V) (source tree at git $rev), $(redis-server --version | awk '{ print $3 }' | sed 's/v=/redis-server /')" \
		"(private, 127.0.0.1 TCP, \`--save '' --appendonly no${BENCH_REDIS_ARGS:+ $BENCH_REDIS_ARGS}\`)," \
		"$("$pg_bindir/postgres" -V | sed 's/ (PostgreSQL)//') (private, fresh initdb, 127.0.0.1 TCP), all on the same host"
	echo "- PostgreSQL settings: ${BENCH_PG_ARGS:+\`$BENCH_PG_ARGS\`, else }defaults; in force: $pg_settings_str"
	echo "- ferry queue: \`pipeline = ${BENCH_PG_PIPELINE:-yes}\` (BENCH_PG_PIPELINE)"
	if [[ ${BENCH_PG_PIN:-} == yes ]]; then
		echo "- CPUs (BENCH_PG_PIN=yes): PostgreSQL on CPU 0 alone; redis-server, ferryd, the raw clients and psql on CPU 1"
	fi
	echo "- binaries: ${ferryd#"$root/"} and ${ferryctl#"$root/"}, built $(date -u -r "$ferryd" "+%Y-%m-%d %H:%M UTC")$stale"
	echo "- command: \`${cmdline}\`"
	echo "- rows: \`bench_rows (user_id bigint, event text, payload text)\`, no index;" \
		"each job one $job_bytes-byte JSON document, e.g. \`$(head -n 1 "$jobs_file")\`"
	echo
	echo "### Raw PostgreSQL from W clients in parallel (tests/bench/copy_raw.c, libpq)"
	echo
	echo "The same rows in COPY text format, read into memory first, then sent:"
	echo "one \`COPY bench_rows FROM STDIN\` per batch, each its own transaction (autocommit: the fewest round trips),"
	echo "from W processes at once (\`copy_raw -c W\`: each its own connection and 1/W of the rows, into the same table;"
	echo "the clock starts when all W are connected and stops when the last is done),"
	echo "or one prepared \`INSERT\` per row in autocommit from one client (pgbench-style). Median of $runs runs; TRUNCATE and CHECKPOINT before each;"
	echo "each raw COPY run with W clients precedes the ferry run with W workers of the same batch size, so that both see the same load."
	echo
	echo "| client | clients | rows per transaction | rows | rows/s (median) | runs, rows/s |"
	echo "|---|---:|---:|---:|---:|---|"
	for b in "${pg_batches[@]}"; do
		n=$pg_jobs_n
		((b == 1)) && n=$pg_jobs_b1
		for w in "${pg_workers[@]}"; do
			echo "| raw COPY | $w | $b | $(commas "$n") | **$(commas "${raw_rate[$b,$w]}")** | $(runs_list "${raw_all[$b,$w]}") |"
		done
	done
	echo "| 1 INSERT per row | 1 | 1 | $(commas "$pg_insert_n") | **$(commas "$ins_rate")** | $(runs_list "$ins_all") |"
	echo
	echo "### ferry end to end (handler postgres)"
	echo
	echo "N jobs are enqueued (\`ferryctl enqueue -q bench -\`) before ferryd starts; the clock runs from the start"
	echo "of \`ferryd -f\` until \`HGET ferry:{bench}:stats done\` = N (polled every 10 ms, tests/bench/drain_wait.c;"
	echo "a job is counted done after its batch's COMMIT), then \`SELECT count(*), count(DISTINCT user_id)\` must be N, N"
	echo "and the dead and retried counters 0. Each transaction: BEGIN, the batch's \`ferry_batches\` row, COPY, COMMIT,"
	echo "sent as one query string (the exactly-once bookkeeping included). Median of $runs runs; TRUNCATE bench_rows, ferry_batches,"
	echo "CHECKPOINT and FLUSHALL before each. \"ferry / raw\" compares with raw COPY from as many clients as ferry has workers,"
	echo "at the same rows per transaction; \"steady / raw\" uses the rate after the first ack (raw COPY's clock, too, starts once connected)."
	if ((pg_jobs_b1 != pg_jobs_n)); then
		echo "batch_size 1 uses N = $(commas "$pg_jobs_b1") instead of $(commas "$pg_jobs_n") to keep the run short."
	fi
	echo
	echo "| batch_size | workers | jobs | jobs/s (median) | runs, jobs/s | jobs/s after 1st ack | start-up ms | rows per transaction | raw COPY rows/s, W clients | ferry / raw | steady / raw | target: batch 1000, ferry / raw ≥ 0.9 |"
	echo "|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---|"
	for row in "${pg_tp_rows[@]}"; do
		IFS='|' read -r b w n med all steady startup nb <<<"$row"
		raw=${raw_rate[$b,$w]}
		ratio=$(awk -v f="$med" -v r="$raw" 'BEGIN { printf "%.2f", f / r }')
		sratio=$(awk -v f="$steady" -v r="$raw" 'BEGIN { printf "%.2f", f / r }')
		target=
		if ((b == 1000)); then
			if awk -v x="$ratio" 'BEGIN { exit !(x >= 0.9) }'; then target=met
			else target="missed: $ratio < 0.9"
			fi
		fi
		echo "| $b | $w | $(commas "$n") | **$(commas "$med")** | $(runs_list "$all") | $(commas "$steady") | $startup | $nb | $(commas "$raw") | $ratio | $sratio | $target |"
	done
	echo
	echo "### Where the CPU goes"
	echo
	echo "CPU time (user + system, from /proc/PID/stat: each server's processes with their children, ferryd's master"
	echo "and workers, copy_raw's processes) per 1000 rows during each run above, and the cores all of it kept busy"
	echo "(its CPU / the run's wall time; the machine has $(nproc --all)). Median of $runs runs; clock-tick resolution (10 ms a process)."
	echo
	echo "| batch_size | W | raw: postgres ms | raw: client ms | raw: cores busy | ferry: postgres ms | ferry: redis-server ms | ferry: ferryd ms | ferry: cores busy |"
	echo "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
	local rp rc rb fp fr ff fb
	for row in "${pg_cpu_rows[@]}"; do
		IFS='|' read -r b w raw row <<<"$row"
		read -r rp rc rb <<<"$raw"
		read -r fp fr ff fb <<<"$row"
		echo "| $b | $w | $rp | $rc | $rb | $fp | $fr | $ff | $fb |"
	done
}

# ------------------------------------------------------------------ pg upsert

up_table="bench_upsert (user_id bigint PRIMARY KEY, seq bigint, payload text)"
up_setup="CREATE TEMP TABLE stage (LIKE bench_upsert INCLUDING DEFAULTS) ON COMMIT DELETE ROWS; ALTER TABLE stage ADD COLUMN pos bigint GENERATED ALWAYS AS IDENTITY"
up_sql="INSERT INTO bench_upsert AS t (user_id, seq, payload) SELECT DISTINCT ON (user_id) user_id, seq, payload FROM stage ORDER BY user_id, pos DESC ON CONFLICT (user_id) DO UPDATE SET seq = excluded.seq, payload = excluded.payload"

# Job i of N: {"user_id": 100000 + i % KEYS, "seq": i, "payload": 52 x}, as
# jobs ($tmp/upsert-jobs.txt) and as COPY rows ($tmp/upsert-rows.txt).
make_upsert_jobs() {
	awk -v n="$up_jobs_n" -v keys="$up_keys" -v jobs="$tmp/upsert-jobs.txt" \
		-v rows="$tmp/upsert-rows.txt" 'BEGIN {
		x = sprintf("%52s", ""); gsub(/ /, "x", x)
		for (i = 0; i < n; i++) {
			printf "{\"user_id\":%d,\"seq\":%d,\"payload\":\"%s\"}\n", 100000 + i % keys, i, x > jobs
			printf "%d\t%d\t%s\n", 100000 + i % keys, i, x > rows
		}
	}'
}

# The per-row baseline: one INSERT ... ON CONFLICT per row in autocommit,
# as a hand-written worker does, as one psql script (a round trip a row).
upsert_row_script() {
	local f=$tmp/upsert-row.sql
	head -n "$up_row_n" "$tmp/upsert-rows.txt" | awk -F'\t' '{
		printf "INSERT INTO bench_upsert (user_id, seq, payload) VALUES (%s, %s, '\''%s'\'') ON CONFLICT (user_id) DO UPDATE SET seq = excluded.seq, payload = excluded.payload;\n", $1, $2, $3
	}' >"$f"
	printf '%s' "$f"
}

up_reset() {
	pq -c "TRUNCATE bench_upsert, ferry_batches" -c "CHECKPOINT" >/dev/null ||
		pg_failed "TRUNCATE failed"
}

# bench_upsert must hold KEYS rows; with $1 = exact, each the last job of
# its key (seq = N - KEYS + user_id - 100000).
up_check() {
	local got want=$up_keys
	got=$(pq -c "SELECT count(*) FROM bench_upsert")
	[[ $got == "$want" ]] || die "$2: bench_upsert holds $got rows, not $want"
	[[ $1 == exact ]] || return 0
	got=$(pq -c "SELECT count(*) FROM bench_upsert WHERE seq = $up_jobs_n - $up_keys + user_id - 100000")
	[[ $got == "$want" ]] || die "$2: $((want - got)) keys do not hold their last job"
}

declare -a up_raw=() up_row=()
declare -A up_ferry=()

# psql -f SCRIPT, timed: rows/s of $2 rows into $rate
up_run_psql() {
	local t0 t1
	t0=$(now_us)
	pq -f "$1" >/dev/null || pg_failed "psql -f $1 failed"
	t1=$(now_us)
	rate=$(awk -v n="$2" -v us=$((t1 - t0)) 'BEGIN { printf "%.0f", n * 1e6 / us }')
}

bench_upsert() {
	local wait_bin raw_bin row_sql r workers rate secs t0 first t_done dead retried
	wait_bin=$(helper drain_wait)
	raw_bin=$(helper copy_raw libpq)
	make_upsert_jobs
	jobs_file=$tmp/upsert-jobs.txt
	row_sql=$(upsert_row_script)
	pq -c "CREATE TABLE $up_table" || pg_failed "CREATE TABLE failed"
	pg_cfg_lines=("table = bench_upsert" "mode = upsert" "key = user_id"
		"pg_host = 127.0.0.1" "pg_port = $pg_port" "pg_database = ferry" "pg_user = postgres")
	write_config 1 "$up_batch" postgres "${pg_cfg_lines[@]}"
	"$ferryctl" -c "$cfg" init-db >&2 || die "ferryctl init-db failed"
	# raw and ferry take turns, as in bench_pg
	for ((r = 1; r <= runs; r++)); do
		stop_ferryd TERM
		up_reset
		run_helper "$raw_bin" "$pg_conninfo" stage "$tmp/upsert-rows.txt" "$up_batch" upsert \
			"$up_setup" "BEGIN;COPY stage (user_id, seq, payload) FROM STDIN;$up_sql;COMMIT" ||
			pg_failed "copy_raw upsert failed"
		read -r _ secs rate <<<"$helper_out"
		up_check exact "raw COPY + INSERT ON CONFLICT"
		up_raw+=("$rate")
		say "raw COPY into temp + INSERT ON CONFLICT, $up_batch rows a transaction: $rate rows/s (run $r/$runs)"
		for workers in "${up_workers[@]}"; do
			stop_ferryd TERM
			up_reset
			rcli flushall >/dev/null
			write_config "$workers" "$up_batch" postgres "${pg_cfg_lines[@]}"
			drain_timed "$up_jobs_n" "upsert, workers $workers"
			# one worker applies the batches in queue order: exact values;
			# several commit in any order (no version): the count only
			if ((workers == 1)); then up_check exact "ferry upsert"; else up_check count "ferry upsert"; fi
			dead=$(rcli hget "$k_stats" dead)
			retried=$(rcli hget "$k_stats" retried)
			((${dead:-0} == 0)) || ferryd_failed "dead $dead jobs (upsert, workers $workers)"
			rate=$(awk -v n="$up_jobs_n" -v us=$((t_done - t0)) 'BEGIN { printf "%.0f", n * 1e6 / us }')
			up_ferry[$workers]+="$rate "
			say "ferry upsert: workers $workers, batch $up_batch: $rate jobs/s, retried ${retried:-0} (run $r/$runs)"
		done
	done
	for ((r = 1; r <= runs; r++)); do
		up_reset
		up_run_psql "$row_sql" "$up_row_n"
		up_row+=("$rate")
		say "one INSERT ON CONFLICT per row: $rate rows/s (run $r/$runs)"
	done
}

report_upsert() {
	local raw w med rev
	rev=$(git -C "$root" describe --always --dirty 2>/dev/null || echo unknown)
	raw=$(median_int "${up_raw[@]}")
	echo "## Benchmark: PostgreSQL upsert (\`scripts/bench pg upsert\`)"
	echo
	echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC'); machine: $(nproc --all) CPUs ($(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)); load average at start $load_start, at end $(cut -d' ' -f1-3 /proc/loadavg)"
	echo "- software: $("$ferryd" -V) (git $rev), $("$pg_bindir/postgres" -V | sed 's/ (PostgreSQL)//') (private, fresh initdb, 127.0.0.1 TCP); PostgreSQL settings in force: $pg_settings_str"
	echo "- command: \`${cmdline}\`"
	echo "- table: \`$up_table\`; $(commas "$up_jobs_n") jobs over $(commas "$up_keys") keys (so most rows update), e.g. \`$(head -n 1 "$jobs_file")\`"
	echo "- raw: one libpq client (tests/bench/copy_raw.c upsert, rows read into memory first), per $up_batch rows one query string \`BEGIN;COPY stage FROM STDIN;$up_sql;COMMIT\` into a temporary table \`$up_setup\` (two round trips, as ferry); per row: one \`INSERT ... ON CONFLICT DO UPDATE\` per row in autocommit from one psql ($(commas "$up_row_n") rows)"
	echo "- ferry: jobs enqueued before ferryd starts, clock from \`ferryd -f\` until done = N; one worker's result checked exactly (each key holds its last job), more workers' by count; median of $runs runs"
	echo
	echo "| client | rows or jobs/s (median) | runs | ferry / raw |"
	echo "|---|---:|---|---:|"
	echo "| raw COPY + INSERT ON CONFLICT, $up_batch a transaction | **$(commas "$raw")** | $(runs_list "${up_raw[*]}") | |"
	for w in "${up_workers[@]}"; do
		# shellcheck disable=SC2086 # lists of numbers
		med=$(median_int ${up_ferry[$w]})
		echo "| ferry, mode = upsert, batch $up_batch, $w worker(s) | **$(commas "$med")** | $(runs_list "${up_ferry[$w]% }") | $(awk -v f="$med" -v r="$raw" 'BEGIN { printf "%.2f", f / r }') |"
	done
	echo "| one INSERT ON CONFLICT per row (autocommit) | **$(commas "$(median_int "${up_row[@]}")")** | $(runs_list "${up_row[*]}") | |"
}

