#!/usr/bin/env bash
# Measures GeoEvent, Tile38 and Redis side by side with cmd/bench, on one
# machine, run from the repository's root:
#
#   cmd/bench/peers/compare.sh [RUNS] [DURATION] [WORKLOADS...]
#   cmd/bench/peers/compare.sh 3 8s insert upsert radius latest     # the defaults
#
# For each workload it interleaves short runs: GeoEvent, Tile38, Redis
# (appendfsync always), Redis (appendfsync everysec), then GeoEvent again,
# RUNS rounds, so that every server meets the machine's drifting speed (and
# the other work sharing its cores) alike. Each run has a fresh server and a
# fresh data directory, preloaded with 1,000,000 entities in 10,000-event
# batches (`--preload`, then a second of get-latest), after which the
# server's resident memory (VmRSS) is read; then the measured run. Workloads:
#
#   insert  new entities, 10,000-event batches, 4 sessions
#   upsert  single-event upserts of existing entities, 64 sessions
#   radius  1 km radius queries (about 80 results each), 64 sessions
#   latest  get latest of one entity, 64 sessions
#
# GeoEvent is `replica dev` (binary protocol, no HTTP gateway) built once,
# and runs like Tile38 on one Go processor (GOMAXPROCS=1), as the README
# advises for a server sharing its machine with its clients; the bench runs
# its Go code on one thread (its default). A peer that install.sh could not
# install is left out with a note. Every run's line goes to
# $OUT/runs.tsv (OUT defaults to /tmp/geoevent-peers), and the medians and
# ranges are printed at the end. SYSTEMS overrides the servers compared
# (geoevent tile38 redis-always redis-everysec by default); a peer's name
# with -pipelined (redis-everysec-pipelined) runs the bench with
# --peer-pipeline, the sessions' commands sharing connections. BASE=REV
# adds geoevent-base, the replica built at git revision REV (a temporary
# worktree), to compare GeoEvent against an earlier GeoEvent, interleaved:
#
#   BASE=dc069eb~ SYSTEMS="geoevent geoevent-base" cmd/bench/peers/compare.sh 4 8s insert radius latest
#
# (dc069eb~ is the last revision before history on disk). server_cores is the CPU the server used
# during the measured run, in cores (CPU seconds a second): on a machine
# shared with other work, throughput divided by it is the server's cost per
# operation, which the other work disturbs less than the throughput.
set -euo pipefail

RUNS=${1:-3}
DUR=${2:-8s}
shift $(($# < 2 ? $# : 2))
WORKLOADS=${*:-insert upsert radius latest}
OUT=${OUT:-/tmp/geoevent-peers}
PEERS=$(cd "$(dirname "$0")" && pwd)/install.sh
BASE_PORT=${BASE_PORT:-17300}

mkdir -p "$OUT/bin"
go build -o "$OUT/bin/replica" ./cmd/replica
go build -o "$OUT/bin/bench" ./cmd/bench
if [ -n "${BASE:-}" ]; then
	base_tree=$(mktemp -d)
	git worktree add -q --detach "$base_tree" "$BASE"
	(cd "$base_tree" && go build -o "$OUT/bin/replica-base" ./cmd/replica)
	git worktree remove --force "$base_tree"
fi
"$PEERS" install >"$OUT/install.log" 2>&1 || true
if [ -z "${SYSTEMS:-}" ]; then
	SYSTEMS="geoevent"
	if [ -x "${GOBIN:-$(go env GOPATH)/bin}/tile38-server" ]; then
		SYSTEMS="$SYSTEMS tile38"
	else
		echo "compare.sh: Tile38 is not installed (see $OUT/install.log): left out" >&2
	fi
	SYSTEMS="$SYSTEMS redis-always redis-everysec"
fi

flags() { # the bench's flags for a workload
	case $1 in
	insert) echo "--op insert --batch 10000 --concurrency 4" ;;
	upsert) echo "--op upsert --batch 1 --concurrency 64" ;;
	radius) echo "--op radius --concurrency 64" ;;
	latest) echo "--op latest --concurrency 64" ;;
	*)
		echo "compare.sh: unknown workload $1" >&2
		exit 2
		;;
	esac
}

HZ=$(getconf CLK_TCK)
cputicks() { # the CPU time a process has used, user and system, in clock ticks
	awk '{ print $14 + $15 }' "/proc/$1/stat"
}

PID="" TARGET=() DIR="" PORT=""

start() { # start SYSTEM: a fresh server; sets PID and TARGET
	PORT=$((BASE_PORT + RANDOM % 500))
	DIR=$(mktemp -d "$OUT/data.XXXXXX")
	case $1 in
	geoevent | geoevent-base)
		local bin=$OUT/bin/replica
		[ "$1" = geoevent-base ] && bin=$OUT/bin/replica-base
		GOMAXPROCS=1 "$bin" dev --data "$DIR/data" --addresses "127.0.0.1:$PORT" --http "" \
			>"$DIR/server.out" 2>"$DIR/server.log" </dev/null &
		PID=$!
		local id=""
		for _ in $(seq 1 100); do
			id=$(sed -n 's/^GeoEvent dev replica: cluster \([^,]*\),.*/\1/p' "$DIR/server.out")
			[ -n "$id" ] && break
			sleep 0.1
		done
		[ -n "$id" ] || {
			echo "compare.sh: replica dev did not start:" >&2
			cat "$DIR/server.out" "$DIR/server.log" >&2
			exit 1
		}
		TARGET=(--addresses "127.0.0.1:$PORT" --cluster "$id")
		;;
	tile38 | tile38-pipelined)
		"$PEERS" tile38 "$PORT" "$DIR"
		PID=$(cat "$DIR/server.pid")
		TARGET=(--tile38 "127.0.0.1:$PORT")
		;;
	redis-always | redis-everysec | redis-always-pipelined | redis-everysec-pipelined)
		local fsync=${1#redis-}
		"$PEERS" redis "$PORT" "$DIR" "${fsync%-pipelined}"
		PID=$(cat "$DIR/server.pid")
		TARGET=(--redis "127.0.0.1:$PORT")
		;;
	*)
		echo "compare.sh: unknown system $1" >&2
		exit 2
		;;
	esac
	case $1 in *-pipelined) TARGET+=(--peer-pipeline) ;;
	esac
}

stop() {
	case $SYSTEM in
	geoevent | geoevent-base)
		kill "$PID"
		wait "$PID" || true
		;;
	*) "$PEERS" stop "$PORT" "$DIR" ;;
	esac
	rm -rf "$DIR"
}

trap 'if [ -n "$DIR" ] && [ -d "$DIR" ]; then stop; fi' EXIT

[ -f "$OUT/runs.tsv" ] || printf 'time\tworkload\tround\tsystem\tops_s\tevents_s\terrors\tp50\tp99\trss_kb_after_preload\tserver_cores\n' >"$OUT/runs.tsv"
for w in $WORKLOADS; do
	for round in $(seq 1 "$RUNS"); do
		for SYSTEM in $SYSTEMS; do
			start "$SYSTEM"
			"$OUT/bin/bench" "${TARGET[@]}" --preload --op latest --concurrency 4 --duration 1s --progress 0 >"$DIR/preload.out"
			rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$PID/status")
			cpu0=$(cputicks "$PID")
			# shellcheck disable=SC2046
			"$OUT/bin/bench" "${TARGET[@]}" $(flags "$w") --duration "$DUR" --progress 0 >"$DIR/bench.out"
			cpu=$(($(cputicks "$PID") - cpu0))
			read -r ops evs errs < <(awk '/^ops\/s/ {print $2, $4, $6}' "$DIR/bench.out")
			read -r p50 p99 < <(awk '/^latency/ {print $3, $5}' "$DIR/bench.out")
			printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$(date -u +%H:%M:%S)" "$w" "$round" "$SYSTEM" "$ops" "$evs" "$errs" "$p50" "$p99" "$rss" "$(awk -v t="$cpu" -v h="$HZ" -v d="$(awk '/^(binary|redis|tile38) op=/ {sub(/.*duration=/, ""); sub(/s .*/, ""); print}' "$DIR/bench.out")" 'BEGIN { printf "%.2f", t / h / d }')" | tee -a "$OUT/runs.tsv"
			stop
			DIR=""
		done
	done
done

median() { # the median, lowest and highest of the numbers on stdin
	sort -g | awk '{ a[NR] = $1 } END { if (NR) printf "%.0f (%d runs, %.0f-%.0f)", (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2, NR, a[1], a[NR] }'
}

echo
echo "medians (runs, lowest-highest) in $OUT/runs.tsv; insert in events/s, the others in operations/s:"
for w in $WORKLOADS; do
	for s in $SYSTEMS; do
		printf '%s\t%s\t%s\tVmRSS after preload %s kB\tper server core %s\n' "$w" "$s" \
			"$(awk -F'\t' -v w="$w" -v s="$s" '$2 == w && $4 == s { print (w == "insert") ? $6 : $5 }' "$OUT/runs.tsv" | median)" \
			"$(awk -F'\t' -v w="$w" -v s="$s" '$2 == w && $4 == s { print $10 }' "$OUT/runs.tsv" | median)" \
			"$(awk -F'\t' -v w="$w" -v s="$s" '$2 == w && $4 == s && $11 > 0 { print ((w == "insert") ? $6 : $5) / $11 }' "$OUT/runs.tsv" | median)"
	done
done
echo
echo "GeoEvent's throughput over each peer's in the same round (the runs minutes apart), median (runs, lowest-highest):"
for w in $WORKLOADS; do
	for s in $SYSTEMS; do
		[ "$s" = geoevent ] && continue
		printf '%s\t%s\t%s\n' "$w" "$s" "$(awk -F'\t' -v w="$w" -v s="$s" '
			$2 != w { next }
			{ v = (w == "insert") ? $6 : $5 }
			$4 == "geoevent" { ge = v; round = $3; next }
			$4 == s && $3 == round && v > 0 { printf "%.2f\n", ge / v }' "$OUT/runs.tsv" |
			sort -g | awk '{ a[NR] = $1 } END { if (NR) printf "%.1fx (%d rounds, %.1f-%.1fx)", (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2, NR, a[1], a[NR] }')"
	done
done
