#!/usr/bin/env bash
# capacity.sh: a capacity run of history on disk (docs/performance.md,
# History on disk). It builds the replica and the bench, starts `replica
# dev` on a fresh data directory, runs a track load of EVENTS events into
# ENTITIES entities (a fleet reporting in turn, 10,000-event inserts, so
# every event but each entity's latest joins its history), samples the
# replica's resident memory (VmRSS of /proc/PID/status) and the data
# directory's size during the load and after it, kills the replica with
# SIGKILL, restarts it on the same directory and times its first answer (a
# get-latest over HTTP that returns the entity), then measures --op history:
# one random entity's latest 1,000 events, one session, right after the
# restart and again warm. It prints each figure as it goes; the samples
# are in DIR/samples (time, phase, VmRSS in kB, data directory bytes).
#
#   cmd/bench/capacity.sh [EVENTS [ENTITIES]]      (default 20000000 10000)
#
# Environment: DIR, the work directory (default a new temporary one, removed
# at the end unless KEEP=1); CONCURRENCY (4) and BATCH (10000) of the load;
# PROBES (1), get-latest sessions reading during the load (--probe-latest:
# what a reader waits while the load runs);
# SAMPLE, seconds between samples (2); SETTLE, seconds to sample after the
# load before the kill (10); HISTORY, seconds of each history run (10);
# COLD=1 drops the page cache (root only: /proc/sys/vm/drop_caches) before
# the restart, so that the restart and the first history run read from the
# disk. Linux only (/proc).
set -euo pipefail

events=${1:-20000000}
entities=${2:-10000}
conc=${CONCURRENCY:-4}
batch=${BATCH:-10000}
sample=${SAMPLE:-2}
settle=${SETTLE:-10}
hist=${HISTORY:-10}
probes=${PROBES:-1}

root=$(cd "$(dirname "$0")/../.." && pwd)
work=${DIR:-$(mktemp -d)}
mkdir -p "$work"
data=$work/data
pid=
sampler=
cleanup() {
	[ -n "$sampler" ] && kill "$sampler" 2>/dev/null || true
	[ -n "$pid" ] && kill -9 "$pid" 2>/dev/null || true
	if [ -z "${DIR:-}" ] && [ "${KEEP:-0}" != 1 ]; then rm -rf "$work"; fi
}
trap cleanup EXIT

(cd "$root" && go build -o "$work/replica" ./cmd/replica && go build -o "$work/bench" ./cmd/bench)

now() { date +%s.%N; }
rss_kb() { awk '/^VmRSS/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }
# du of a directory pebble is changing: a file may vanish under it.
size() { du -sb "$1" 2>/dev/null | awk '{print $1}' || echo 0; }
mb() { awk -v b="$1" 'BEGIN {printf "%.0f MB", b / 1e6}'; }

# start ADDR HTTP: starts the dev replica, waits for its banner, sets pid,
# cluster, addr and httpaddr.
start() {
	: >"$work/out"
	"$work/replica" dev --data "$data" --addresses "$1" --http "$2" >"$work/out" 2>>"$work/replica.log" &
	pid=$!
	for _ in $(seq 1 3000); do
		if grep -q 'Ctrl-C' "$work/out"; then break; fi
		kill -0 "$pid" 2>/dev/null || { echo "the replica exited:" >&2; tail "$work/replica.log" >&2; exit 1; }
		sleep 0.01
	done
	cluster=$(sed -n 's/.*cluster \([0-9a-f-]\{36\}\),.*/\1/p' "$work/out")
	addr=$(sed -n 's/.*binary protocol on \([0-9.]*:[0-9]*\):.*/\1/p' "$work/out")
	httpaddr=$(sed -n 's|.*HTTP JSON API on http://\([0-9.]*:[0-9]*\):.*|\1|p' "$work/out")
}

# breakdown prints the data directory's parts: the history store, the
# log's segments, the snapshots and their history checkpoints (hard links
# into one another and the store: each counted on its own here).
breakdown() {
	echo "  history store $(mb "$(size "$data/history")") ($(awk -v d="$(size "$data/history")" -v n="$events" 'BEGIN {printf "%.1f", d / n}') bytes an event), log $(mb "$(sum "$data"/log-*.seg)"), snapshots $(mb "$(sum "$data"/snapshot-*.snap)"), their history checkpoints $(mb "$(sum "$data"/snapshot-*.history)")"
}

# sum PATH...: the bytes of the paths that exist, each counted on its own.
sum() {
	local n=0 p
	for p in "$@"; do
		[ -e "$p" ] && n=$((n + $(size "$p")))
	done
	echo "$n"
}

# sample PHASE: one line of the samples: seconds, phase, VmRSS, data size.
sample() {
	printf '%s %s %s %s\n' "$(now)" "$1" "$(rss_kb "$pid")" "$(size "$data")" >>"$work/samples"
}

start 127.0.0.1:0 127.0.0.1:0
echo "replica $pid: cluster $cluster, binary $addr, http $httpaddr, data $data"
: >"$work/samples"
(while kill -0 "$pid" 2>/dev/null; do sample load; sleep "$sample"; done) &
sampler=$!

echo "track load: $events events into $entities entities, $conc sessions, batches of $batch"
t0=$(now)
"$work/bench" --addresses "$addr" --cluster "$cluster" --op track --entities "$entities" --batch "$batch" \
	--concurrency "$conc" --events "$events" --duration 24h --progress 10s --probe-latest "$probes" | tee "$work/track.txt"
t1=$(now)
kill "$sampler" 2>/dev/null || true
wait "$sampler" 2>/dev/null || true
sampler=
load_s=$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.1f", b - a}')
for _ in $(seq 1 $((settle / sample))); do sample after; sleep "$sample"; done
sample after

peak_load=$(awk '$2 == "load" && $3 > m {m = $3} END {print m + 0}' "$work/samples")
peak_after=$(awk '$2 == "after" && $3 > m {m = $3} END {print m + 0}' "$work/samples")
disk_load=$(awk '$2 == "load" && $4 > m {m = $4} END {print m + 0}' "$work/samples")
last_rss=$(tail -1 "$work/samples" | awk '{print $3}')
last_disk=$(tail -1 "$work/samples" | awk '{print $4}')
echo
echo "load: ${load_s} s for $events events (and up to $((conc * batch)) more: the inserts under way finish)"
echo "resident memory: peak $((peak_load / 1024)) MB during the load, peak $((peak_after / 1024)) MB in ${settle} s after, $((last_rss / 1024)) MB at the end"
echo "data directory: peak $(mb "$disk_load") during the load, $(mb "$last_disk") at the end ($(awk -v d="$last_disk" -v n="$events" 'BEGIN {printf "%.1f", d / n}') bytes an event)"
breakdown

kill -9 "$pid"
wait "$pid" 2>/dev/null || true
pid=
echo "killed with SIGKILL"
if [ "${COLD:-0}" = 1 ]; then
	sync
	echo 3 >/proc/sys/vm/drop_caches
	echo "page cache dropped"
fi

# The first answer: entity 1's latest (the bench numbers the fleet from
# 00000000-0000-0001-0000-000000000001), over HTTP, polled every 10 ms
# from the moment the process starts.
t0=$(now)
start "$addr" "$httpaddr"
t_banner=$(now)
for _ in $(seq 1 30000); do
	if curl -sf "http://$httpaddr/entity/00000000-0000-0001-0000-000000000001" >/dev/null 2>&1; then break; fi
	kill -0 "$pid" 2>/dev/null || { echo "the replica exited:" >&2; tail "$work/replica.log" >&2; exit 1; }
	sleep 0.01
done
t1=$(now)
echo "restart: banner after $(awk -v a="$t0" -v b="$t_banner" 'BEGIN {printf "%.2f", b - a}') s, first answer after $(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.2f", b - a}') s; resident memory $(($(rss_kb "$pid") / 1024)) MB"

# Each entity reported at an even pace through the load: its latest 1,000
# events span about load_s * 1000 / (events / entities). The bench reads
# from that span (a tenth more, so the page is full) before the latest.
span_ms=$(awk -v s="$load_s" -v n="$events" -v e="$entities" 'BEGIN {printf "%.0f", s * 1000 * 1000 / (n / e) * 1.1}')
# The first history answer after the restart: entity 1's first 1,000
# events, over HTTP.
until curl -sf "http://$httpaddr/entity/00000000-0000-0001-0000-000000000001/history?limit=1000" >/dev/null 2>&1; do
	kill -0 "$pid" 2>/dev/null || { echo "the replica exited:" >&2; tail "$work/replica.log" >&2; exit 1; }
	sleep 0.01
done
t2=$(now)
echo "first history answer (1,000 events) after $(awk -v a="$t0" -v b="$t2" 'BEGIN {printf "%.2f", b - a}') s"

for run in first warm; do
	echo "history ($run): one entity's latest 1,000 events (--history-span ${span_ms}ms), one session, ${hist} s"
	"$work/bench" --addresses "$addr" --cluster "$cluster" --op history --entities "$entities" \
		--history-span "${span_ms}ms" --concurrency 1 --duration "${hist}s" --progress 0 | tee "$work/history-$run.txt"
done
echo "after the history runs: resident memory $(($(rss_kb "$pid") / 1024)) MB, data directory $(mb "$(size "$data")")"
breakdown
