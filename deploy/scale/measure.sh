#!/usr/bin/env bash
# measure.sh: issue 24's scale figures on both backends, one after the other,
# from data sets seeded by seed.sh (memstore bench --seed --direct).
#
#   MEMSTORE=/path/to/memstore ./measure.sh [sqlite] [postgres]
#
# For each backend: database size and memories, `serve` start time (3 starts,
# until /healthz answers), the 200 req/s mix (60 s), and 1,000 SSE followers
# plus 100 change-feed long polls (30 s) with the server's memory, goroutines
# and descriptors sampled from /metrics. `uptime` is noted before and after
# every step. Everything lands in $OUT (one JSON per bench run, a log).
set -euo pipefail

ROOT=${ROOT:-/tmp/scale1m}
MEMSTORE=${MEMSTORE:-memstore}
OUT=${OUT:-$ROOT/results/$(date -u +%Y%m%d-%H%M%S)}
PGURL=${PGURL:-'postgres://memstore:memstore@localhost:5432/memstore_scale?sslmode=disable&pool_max_conns=16'}
ADDR=127.0.0.1:18924
METRICS=127.0.0.1:18927
BASE=http://$ADDR
BACKENDS=("$@")
[ ${#BACKENDS[@]} -gt 0 ] || BACKENDS=(sqlite postgres)

mkdir -p "$OUT"
ulimit -n "$(ulimit -Hn)" # a thousand streams and more
LOG=$OUT/measure.log
say() { echo "$(date -u +%H:%M:%S) $*" | tee -a "$LOG"; }
load() { say "uptime: $(uptime)"; }

SERVER_PID=
START_SECS=
start_server() { # backend, data folder; sets SERVER_PID and START_SECS
	if curl -fs "$BASE/healthz" >/dev/null 2>&1; then
		say "something already answers on $ADDR: stop it first"
		exit 1
	fi
	local args=(serve --addr "$ADDR" --metrics-addr "$METRICS" --data "$2"
		--max-requests-per-address -1 --max-requests-per-key -1)
	[ "$1" = postgres ] && args+=(--database "$PGURL")
	local t0
	t0=$(date +%s.%N)
	"$MEMSTORE" "${args[@]}" >>"$OUT/serve-$1.log" 2>&1 &
	SERVER_PID=$!
	until curl -fs "$BASE/healthz" >/dev/null 2>&1; do
		kill -0 "$SERVER_PID" 2>/dev/null || { say "serve exited, see $OUT/serve-$1.log"; exit 1; }
		sleep 0.01
	done
	START_SECS=$(echo "$(date +%s.%N) - $t0" | bc)
}
stop_server() {
	[ -n "$SERVER_PID" ] || return 0
	kill "$SERVER_PID" && wait "$SERVER_PID" || true
	SERVER_PID=
}
trap stop_server EXIT

sample_metrics() { # file: every 5 s until killed
	while sleep 5; do
		curl -s "http://$METRICS/metrics" | grep -E '^(go_memstats_heap_inuse_bytes|go_memstats_stack_inuse_bytes|go_goroutines|process_open_fds|process_resident_memory_bytes) ' |
			tr '\n' ' ' >>"$1" || true
		echo >>"$1"
	done
}

for b in "${BACKENDS[@]}"; do
	data=$ROOT/$b
	[ "$b" = postgres ] && data=$ROOT/pgdata
	mkdir -p "$data"
	say "=== $b"
	load

	# Size: the whole database (SQLite: the file and its WAL; PostgreSQL:
	# pg_database_size) over the memories and versions it holds.
	if [ "$b" = sqlite ]; then
		bytes=$(du -cb "$data"/memstore.db* | tail -1 | cut -f1)
		counts=$(sqlite3 -readonly "$data/memstore.db" "select (select count(*) from memories), (select count(*) from memory_versions)")
	else
		bytes=$(psql "${PGURL%%&pool_max_conns=*}" -Atc "select pg_database_size(current_database())")
		counts=$(psql "${PGURL%%&pool_max_conns=*}" -Atc "select (select count(*) from memories), (select count(*) from memory_versions)")
	fi
	mems=${counts%%|*}
	vers=${counts##*|}
	say "size $b: $bytes bytes, $mems memories, $vers versions: $(echo "scale=1; $bytes / $mems" | bc) bytes per memory"

	# Start time: three starts, until /healthz answers.
	for i in 1 2 3; do
		start_server "$b" "$data"
		say "serve start $b #$i: ${START_SECS}s"
		stop_server
	done

	start_server "$b" "$data"
	# The 200 req/s mix of single-memory operations and feed polls.
	load
	"$MEMSTORE" bench --base-url "$BASE" --data "$data" --reuse-seed 10000 --concurrency 16 --rate 200 \
		--duration "${MIX_DURATION:-60s}" --requests 100000 --followers 0 --output json \
		--mix memory.get=30,memory.list=10,memory.create=10,memory.update=20,version.list=10,changes.poll=5 \
		>"$OUT/$b-mix.json"
	load
	jq -r '.operations[] | "\(.operation) count \(.count) p50 \(.p50_ms) p95 \(.p95_ms) p99 \(.p99_ms) errors \(.errors)"' "$OUT/$b-mix.json" | tee -a "$LOG"
	jq -r '"\(.requests) requests in \(.elapsed_seconds)s"' "$OUT/$b-mix.json" | tee -a "$LOG"

	# 1,000 SSE followers (two sessions) and 100 long polls, appends at
	# about 3 a second, the server sampled every 5 s.
	load
	sample_metrics "$OUT/$b-followers-metrics.txt" &
	sampler=$!
	"$MEMSTORE" bench --base-url "$BASE" --data "$data" --reuse-seed 1000 --rate 103 --concurrency 130 \
		--followers 1000 --duration "${FOLLOW_DURATION:-30s}" --requests 100000 --mix event.append=3,changes.poll=100 --output json \
		>"$OUT/$b-followers.json"
	kill "$sampler" || true
	load
	jq -r '.operations[] | "\(.operation) count \(.count) p50 \(.p50_ms) p95 \(.p95_ms) p99 \(.p99_ms) errors \(.errors)"' "$OUT/$b-followers.json" | tee -a "$LOG"
	tee -a "$LOG" <"$OUT/$b-followers-metrics.txt"
	stop_server
done
say "done: $OUT"
