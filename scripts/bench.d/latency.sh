# scripts/bench.d/latency.sh - sourced by scripts/bench: `scripts/bench
# latency`, the time from a job's LPUSH to its row's commit in a postgres
# queue at fixed rates, and what the slowest jobs ran into. Uses the setup
# of scripts/bench and the PostgreSQL helpers of scripts/bench.d/pg.sh;
# runs nothing when sourced.
#
# What is measured: the producer (tests/bench/latency_push.c) stamps each
# job with CLOCK_REALTIME in microseconds just before its LPUSH; after the
# run, each row's latency is pg_xact_commit_timestamp(xmin) - enq_us
# (track_commit_timestamp = on). PostgreSQL takes that timestamp when it
# writes the commit record, just before the WAL flush, so the figure leaves
# out the commit's fsync (its mean, from pg_stat_wal with
# track_wal_io_timing = on, is reported beside it) and ferry's ack to Redis
# after the COMMIT, and has no trigger or extra write on the table. The
# row's inserted_at (clock_timestamp() when COPY wrote it) splits the time
# into enqueue -> in PostgreSQL and in PostgreSQL -> commit.
# shellcheck shell=bash disable=SC2154,SC2016

lat_table="bench_latency (seq bigint, enq_us bigint, payload text, inserted_at timestamptz DEFAULT clock_timestamp())"
declare -a lat_rows=() lat_class_rows=() lat_top_rows=()
lat_sampler_pid=

# Every 100 ms: wall clock µs, the kernel's Dirty and Writeback (kB),
# Redis' aof_rewrite_in_progress, rdb_bgsave_in_progress, aof_current_size,
# and the pressure stall totals (µs, /proc/pressure "some") of CPU and I/O.
lat_sampler() {
	local out=$1 info dirty wb rw bg sz pc pi
	while kill -0 "$$" 2>/dev/null; do   # ends with scripts/bench
		read -r dirty wb < <(awk '$1 == "Dirty:" { d = $2 } $1 == "Writeback:" { w = $2 } END { print d, w }' /proc/meminfo)
		info=$(rcli info persistence 2>/dev/null | tr -d '\r')
		rw=$(awk -F: '$1 == "aof_rewrite_in_progress" { print $2 }' <<<"$info")
		bg=$(awk -F: '$1 == "rdb_bgsave_in_progress" { print $2 }' <<<"$info")
		sz=$(awk -F: '$1 == "aof_current_size" { print $2 }' <<<"$info")
		pc=$(awk -F'total=' '/^some/ { print $2 }' /proc/pressure/cpu 2>/dev/null)
		pi=$(awk -F'total=' '/^some/ { print $2 }' /proc/pressure/io 2>/dev/null)
		printf '%s %s %s %s %s %s %s %s\n' "$(now_us)" "$dirty" "$wb" "${rw:-0}" "${bg:-0}" "${sz:-0}" "${pc:-0}" "${pi:-0}"
		sleep 0.1
	done >>"$out"
}

# Checkpoint windows from the server log (log_checkpoints, log_timezone UTC):
# "start_us end_us" per completed checkpoint.
lat_checkpoints() {
	TZ=UTC awk '
	function us(d, t,   s) { s = d " " t; gsub(/[-:]/, " ", s); split(t, f, "."); return mktime(substr(s, 1, 19)) * 1000000 + f[2] * 1000 }
	/LOG:  checkpoint starting/ { st = us($1, $2) }
	/LOG:  checkpoint complete/ { if (st) print st, us($1, $2); st = 0 }' "$pg_dir/postgres.log"
}

# Fold the sampled timeline into per-job classes and the slowest jobs.
# $1: latencies file "enq_us commit_us inserted_us", $2: label (rate).
lat_analyse() {
	local lf=$1 rate=$2 cf=$tmp/checkpoints.txt
	lat_checkpoints >"$cf"
	# class of each job by the 100 ms sample at or before its enqueue, and
	# any stall event over its [enqueue, commit] window
	awk -v samples="$tmp/samples.txt" -v cps="$cf" -v dir="$tmp" '
	BEGIN {
		while ((getline l < samples) > 0) { split(l, f, " "); n++; st[n] = f[1]; dirty[n] = f[2]; wb[n] = f[3]; rw[n] = f[4]; bg[n] = f[5]
			# share of the interval before this sample that some task
			# waited for a CPU / for I/O
			pcpu[n] = n > 1 && f[1] > st[n - 1] ? (f[7] - pc0) / (f[1] - st[n - 1]) : 0
			pio[n] = n > 1 && f[1] > st[n - 1] ? (f[8] - pi0) / (f[1] - st[n - 1]) : 0
			pc0 = f[7]; pi0 = f[8] }
		while ((getline l < cps) > 0) { split(l, f, " "); nc++; cs[nc] = f[1]; ce[nc] = f[2] }
		i = 1
	}
	{
		e = $1; c = $2; lat = c - e
		# samples are in time order and so are the jobs (seq order)
		while (i < n && st[i + 1] <= e) i++
		aof = 0; wmax = 0; cmax = 0; imax = 0
		for (k = i; k <= n && st[k] <= c + 100000; k++) {
			if (rw[k] || bg[k]) aof = 1
			if (wb[k] > wmax) wmax = wb[k]
			if (pcpu[k] > cmax) cmax = pcpu[k]
			if (pio[k] > imax) imax = pio[k]
		}
		cp = 0
		for (k = 1; k <= nc; k++) if (cs[k] <= c && ce[k] >= e) cp = 1
		cls = "quiet"
		if (cp) cls = "checkpoint"
		else if (aof) cls = "aof"
		else if (wmax >= 1024) cls = "writeback"
		else if (imax >= 0.5) cls = "io-pressure"
		else if (cmax >= 0.5) cls = "cpu-pressure"
		print lat > (dir "/lat-" cls ".txt")
		print lat > (dir "/lat-all.txt")
		printf "%.0f %.0f %.0f %.0f %.0f %d %.0f %.0f\n", lat, e, $3 - e, c - $3, wmax, (cp ? 2 : 0) + aof, cmax * 100, imax * 100 > (dir "/lat-ctx.txt")
	}' "$lf"
	local cls f n p50 p99 max
	for cls in all quiet cpu-pressure io-pressure writeback aof checkpoint; do
		f=$tmp/lat-$cls.txt
		[[ -s $f ]] || continue
		n=$(wc -l <"$f")
		read -r _ p50 _ p99 max < <(lat_pcts '$1' "$f")
		lat_class_rows+=("$rate|$cls|$n|$p50|$p99|$max")
	done
	# the slowest jobs, at most one per 100 ms of enqueue time
	sort -k1,1nr -o "$tmp/lat-ctx.txt" "$tmp/lat-ctx.txt"
	awk '{ w = substr($2, 1, length($2) - 5); if (w in seen) next; seen[w] = 1; print; if (++k == 5) exit }' "$tmp/lat-ctx.txt" |
		while read -r lat e ins cm wmax ev cpct ipct; do
			printf '%s|%s|%.2f|%.2f|%.2f|%s|%s|%s|%s\n' "$rate" "$(date -u -d "@${e:0:10}.${e:10:3}" '+%H:%M:%S.%3N')" \
				"$(awk -v x="$lat" 'BEGIN { print x / 1000 }')" "$(awk -v x="$ins" 'BEGIN { print x / 1000 }')" \
				"$(awk -v x="$cm" 'BEGIN { print x / 1000 }')" "$((wmax / 1024))" \
				"$(case $ev in 0) echo -;; 1) echo "AOF rewrite";; 2) echo checkpoint;; 3) echo "checkpoint, AOF rewrite";; esac)" "$cpct" "$ipct"
		done >"$tmp/top.txt"
	while IFS= read -r row; do lat_top_rows+=("$row"); done <"$tmp/top.txt"
	rm -f "$tmp"/lat-*.txt
}

# lat_pcts EXPR FILE: count, p50, p90, p99 and max in ms of the awk
# expression EXPR (µs) over the lines of FILE.
lat_pcts() {
	awk "{ print $1 }" "$2" | sort -n | awk '{ a[NR] = $1 }
		function pct(p,   k) { k = int(NR * p) + 1; return (k > NR ? a[NR] : a[k]) / 1000 }
		END { if (NR) printf "%d %.2f %.2f %.2f %.2f\n", NR, pct(.5), pct(.9), pct(.99), a[NR] / 1000; else print "0 0 0 0 0" }'
}

bench_latency() {
	local push_bin wait_bin rate base sent first achieved behind wend got
	local c0 c1 wal0 wal1 n p50 p90 p99 max i50 i99 c50 c99 wsync secs
	push_bin=$(helper latency_push)
	wait_bin=$(helper drain_wait)
	pq -c "CREATE TABLE $lat_table" || pg_failed "CREATE TABLE failed"
	local lines=("table = bench_latency" "columns = seq, enq_us, payload" "pg_host = 127.0.0.1"
		"pg_port = $pg_port" "pg_database = ferry" "pg_user = postgres"
		"pipeline = $lat_pipeline")
	write_config "$lat_workers" "$lat_batch" postgres "${lines[@]}"
	"$ferryctl" -c "$cfg" init-db >&2 || die "ferryctl init-db failed"
	start_ferryd
	lat_sampler "$tmp/samples.txt" &
	lat_sampler_pid=$!
	base=0
	for rate in "${lat_rates[@]}"; do
		pq -c "TRUNCATE bench_latency, ferry_batches" -c "CHECKPOINT" >/dev/null || pg_failed "TRUNCATE failed"
		c0=$(pq -F' ' -c "SELECT checkpoints_timed + checkpoints_req, buffers_checkpoint + buffers_clean + buffers_backend FROM pg_stat_bgwriter")
		wal0=$(pq -F' ' -c "SELECT wal_sync, wal_sync_time FROM pg_stat_wal")
		secs=$(awk -v a="$lat_warmup" -v b="$lat_secs" 'BEGIN { print a + b }')
		say "latency: $rate jobs/s for ${lat_warmup} s warm-up + ${lat_secs} s"
		run_helper "$push_bin" 127.0.0.1 "$port" "$k_ready" "$rate" "$secs" "$base" ||
			die "latency_push failed"
		read -r sent first _ achieved behind <<<"$helper_out"
		run_helper "$wait_bin" 127.0.0.1 "$port" "$k_stats" "done" $((base + sent)) 10 300 ||
			ferryd_failed "the queue did not drain ($rate jobs/s)"
		base=$((base + sent))
		c1=$(pq -F' ' -c "SELECT checkpoints_timed + checkpoints_req, buffers_checkpoint + buffers_clean + buffers_backend FROM pg_stat_bgwriter")
		wal1=$(pq -F' ' -c "SELECT wal_sync, wal_sync_time FROM pg_stat_wal")
		got=$(pq -c "SELECT count(*) FROM bench_latency")
		((got == sent)) || die "bench_latency holds $got rows, not $sent ($rate jobs/s)"
		wend=$((first + ${lat_warmup%.*} * 1000000))
		pq -F' ' -c "SELECT enq_us, (extract(epoch FROM pg_xact_commit_timestamp(xmin)) * 1e6)::bigint,
			(extract(epoch FROM inserted_at) * 1e6)::bigint FROM bench_latency WHERE enq_us >= $wend ORDER BY seq" >"$tmp/lat.txt" ||
			pg_failed "reading the latencies failed (track_commit_timestamp?)"
		read -r n p50 p90 p99 max < <(lat_pcts '$2 - $1' "$tmp/lat.txt")
		read -r _ i50 _ i99 _ < <(lat_pcts '$3 - $1' "$tmp/lat.txt")
		read -r _ c50 _ c99 _ < <(lat_pcts '$2 - $3' "$tmp/lat.txt")
		read -r -a c0a <<<"$c0"
		read -r -a c1a <<<"$c1"
		read -r -a w0a <<<"$wal0"
		read -r -a w1a <<<"$wal1"
		wsync=$(awk -v n=$((w1a[0] - w0a[0])) -v t0="${w0a[1]}" -v t1="${w1a[1]}" 'BEGIN { printf "%.2f", (n > 0 ? (t1 - t0) / n : 0) }')
		lat_rows+=("$rate|$n|$achieved|$behind|$p50|$p90|$p99|$max|$i50|$i99|$c50|$c99|$wsync|$((w1a[0] - w0a[0]))|$((c1a[0] - c0a[0]))|$((c1a[1] - c0a[1]))|$(cut -d' ' -f1 /proc/loadavg)")
		say "latency: $rate jobs/s: $n jobs after the warm-up, p50 $p50 p90 $p90 p99 $p99 max $max ms"
		lat_analyse "$tmp/lat.txt" "$rate"
	done
	kill "$lat_sampler_pid" 2>/dev/null || true
	wait "$lat_sampler_pid" 2>/dev/null || true
	lat_sampler_pid=
	stop_ferryd TERM
}

report_latency() {
	local row rate n achieved behind p50 p90 p99 max i50 i99 c50 c99 wsync nsync ncp nbuf load1 cls t lat ins cm wb ev cpct ipct rev
	rev=$(git -C "$root" describe --always --dirty 2>/dev/null || echo unknown)
	echo "## Benchmark: latency (\`scripts/bench latency\`)"
	echo
	echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC')"
	echo "- machine: $(nproc --all) CPUs ($(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)), $(uname -sr); load average at start $load_start, at end $(cut -d' ' -f1-3 /proc/loadavg)"
	echo "- software: $("$ferryd" -V) (source tree at git $rev), $(redis-server --version | awk '{ print $3 }' | sed 's/v=/redis-server /')" \
		"(private, \`${redis_extra[*]}\`), $("$pg_bindir/postgres" -V | sed 's/ (PostgreSQL)//') (private, fresh initdb, \`${pg_extra[*]}\`), all on the same host"
	echo "- PostgreSQL settings in force: $pg_settings_str"
	echo "- ferry: one postgres queue, workers $lat_workers, batch_size $lat_batch, pipeline $lat_pipeline, \`columns = seq, enq_us, payload\` into \`$lat_table\`"
	echo "- command: \`${cmdline}\`"
	echo
	echo "The producer (tests/bench/latency_push.c) LPUSHes the jobs due every 1 ms, each"
	echo "\`{\"seq\":N,\"enq_us\":T,\"payload\":\"x...\"}\` with T its CLOCK_REALTIME µs just before the LPUSH; ${lat_warmup} s"
	echo "of warm-up (left out), then ${lat_secs} s measured. Latency = \`pg_xact_commit_timestamp(xmin)\` − enq_us"
	echo "(track_commit_timestamp = on): PostgreSQL's commit timestamp is taken when the commit record is written,"
	echo "before the WAL flush, so the commit's fsync (mean in the \"WAL fsync\" column, pg_stat_wal) comes on top."
	echo "\"to PG\" is enqueue → the row's \`inserted_at\` (clock_timestamp() as COPY wrote it), \"in PG\" inserted_at → commit."
	echo "TRUNCATE and CHECKPOINT before each rate; ferryd keeps running."
	echo
	echo "| jobs/s | jobs measured | achieved jobs/s | producer max lag ms | p50 ms | p90 ms | p99 ms | max ms | to PG p50 / p99 | in PG p50 / p99 | WAL fsync mean ms (n) | checkpoints | buffers written | load (1 min) |"
	echo "|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---:|---:|---:|---:|"
	for row in "${lat_rows[@]}"; do
		IFS='|' read -r rate n achieved behind p50 p90 p99 max i50 i99 c50 c99 wsync nsync ncp nbuf load1 <<<"$row"
		echo "| $(commas "$rate") | $(commas "$n") | $(commas "$achieved") | $(awk -v x="$behind" 'BEGIN { printf "%.1f", x / 1000 }') | **$p50** | $p90 | **$p99** | **$max** | $i50 / $i99 | $c50 / $c99 | $wsync ($(commas "$nsync")) | $ncp | $(commas "$nbuf") |  $load1 |"
	done
	echo
	echo "### Where the tail is"
	echo
	echo "Every 100 ms a sampler records the kernel's Dirty and Writeback (/proc/meminfo) and Redis'"
	echo "\`aof_rewrite_in_progress\` / \`rdb_bgsave_in_progress\` (INFO persistence); checkpoints come from the server log"
	echo "(log_checkpoints). Each job is put in one class by what overlapped [enqueue, commit]: checkpoint, else AOF"
	echo "rewrite or RDB save, else Writeback ≥ 1 MB, else I/O pressure ≥ 50 %, else CPU pressure ≥ 50 % (/proc/pressure"
	echo "\"some\": some task waited for I/O / for a CPU in at least half of a 100 ms interval), else quiet."
	echo "The commit timestamp precedes the WAL flush: a commit whose fsync stalls shows up in the latency of the jobs"
	echo "queued behind it (\"to PG\"), not in its own."
	echo
	echo "| jobs/s | class | jobs | p50 ms | p99 ms | max ms |"
	echo "|---:|---|---:|---:|---:|---:|"
	for row in "${lat_class_rows[@]}"; do
		IFS='|' read -r rate cls n p50 p99 max <<<"$row"
		echo "| $(commas "$rate") | $cls | $(commas "$n") | $p50 | $p99 | $max |"
	done
	echo
	echo "The slowest jobs (at most one per 100 ms), with the largest Writeback and CPU / I/O pressure sampled during their wait:"
	echo
	echo "| jobs/s | enqueued (UTC) | latency ms | to PG ms | in PG ms | Writeback MB | CPU pressure % | I/O pressure % | during |"
	echo "|---:|---|---:|---:|---:|---:|---:|---:|---|"
	for row in "${lat_top_rows[@]}"; do
		IFS='|' read -r rate t lat ins cm wb ev cpct ipct <<<"$row"
		echo "| $(commas "$rate") | $t | $lat | $ins | $cm | $wb | $cpct | $ipct | $ev |"
	done
	echo
	echo "Checkpoints logged: $(grep -c 'checkpoint complete' "$pg_dir/postgres.log" || true);" \
		"Redis AOF rewrites logged: $(grep -c 'Background AOF rewrite finished\|Background append only file rewriting started' "$tmp/redis.log" 2>/dev/null || true)" \
		"(lines \"started\" + \"finished\")."
}

# The knobs (checked in lat_main).
read -r -a lat_rates <<<"${BENCH_LAT_RATES:-1000 10000 30000}"
lat_secs=${BENCH_LAT_SECS:-30}
lat_warmup=${BENCH_LAT_WARMUP:-5}
lat_workers=${BENCH_LAT_WORKERS:-2}
lat_batch=${BENCH_LAT_BATCH:-1000}
lat_pipeline=${BENCH_LAT_PIPELINE:-yes}
# shellcheck disable=SC2034 # read by scripts/bench
lat_envs=(BENCH_LAT_RATES BENCH_LAT_SECS BENCH_LAT_WARMUP BENCH_LAT_WORKERS BENCH_LAT_BATCH
	BENCH_LAT_PIPELINE BENCH_REDIS_ARGS BENCH_PG_ARGS PG_BINDIR FERRYD FERRYCTL)

# scripts/bench latency: everything after the common setup (redis-server
# started by the caller: start it with lat_redis_args).
lat_main() {
	local v b
	for v in "${lat_rates[@]}" "$lat_secs" "$lat_warmup" "$lat_workers" "$lat_batch"; do
		[[ $v =~ ^[1-9][0-9]*$ ]] ||
			die "BENCH_LAT_RATES, BENCH_LAT_SECS, BENCH_LAT_WARMUP, BENCH_LAT_WORKERS and BENCH_LAT_BATCH take positive integers, not \"$v\""
	done
	[[ $lat_pipeline == yes || $lat_pipeline == no ]] ||
		die "BENCH_LAT_PIPELINE takes yes or no, not \"$lat_pipeline\""
	need_pg_bindir
	pg_extra+=(-c track_commit_timestamp=on -c track_wal_io_timing=on -c log_checkpoints=on -c log_timezone=UTC)
	start_pg
	pg_settings_str=$(pg_settings)
	bench_latency
	report_latency
}

# Redis for the latency benchmark: AOF on (appendfsync everysec, Redis'
# own default when AOF is on), as a durable queue runs, unless
# BENCH_REDIS_ARGS says otherwise.
lat_redis_args() {
	[[ -n ${BENCH_REDIS_ARGS:-} ]] || redis_extra=(--appendonly yes --appendfsync everysec)
}
