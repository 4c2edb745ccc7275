#!/usr/bin/env bash
# Installs and starts the servers that cmd/bench compares GeoEvent with,
# from what a fresh machine reaches: Redis from Debian's packages, Tile38
# built from source with `go install` (the Go module proxy). No prebuilt
# binary is downloaded. Every step is idempotent: an installed peer is not
# installed again, and a server already answering on its port is left as
# it is.
#
#   install.sh install                    # both peers (a missing Tile38 is reported, not fatal)
#   install.sh redis  PORT DIR [always|everysec]
#   install.sh tile38 PORT DIR
#   install.sh stop   PORT DIR            # stops the server that this script started there
#
# Servers listen on 127.0.0.1:PORT only and run in the background, keeping
# their files, pid file and log in DIR.
#
# Persistence, set as close to GeoEvent's (every acknowledged write is on
# disk: group commit, one fsync for the writes that arrive together) as each
# peer allows:
#   - Redis: appendonly yes, with appendfsync always (the default here: Redis
#     writes and fsyncs its log before it answers, once per turn of its
#     event loop for all the writes of that turn) or everysec (fsync once a
#     second: up to a second of acknowledged writes can be lost). RDB
#     snapshots are off (save ""), the AOF being the persistence.
#   - Tile38: its AOF (--appendonly yes, the default), which it writes as
#     commands arrive and fsyncs once a second in the background; it has no
#     setting to fsync before answering, so up to a second of acknowledged
#     writes can be lost.
# Tile38 runs with GOMAXPROCS=1 (as GeoEvent does beside its clients on two
# cores; set GOMAXPROCS in the environment to change it). Redis runs its
# commands on one thread anyway.
set -euo pipefail

TILE38_VERSION=${TILE38_VERSION:-latest}
GOBIN=${GOBIN:-$(go env GOPATH 2>/dev/null)/bin}

ping() { # ping PORT: true when a RESP server answers PING there
	[ "$(redis-cli -h 127.0.0.1 -p "$1" ping 2>/dev/null)" = PONG ]
}

wait_up() { # wait_up PORT NAME LOG
	for _ in $(seq 1 100); do
		if ping "$1"; then return 0; fi
		sleep 0.1
	done
	echo "install.sh: $2 did not answer on 127.0.0.1:$1; its log, $3:" >&2
	tail -20 "$3" >&2 || true
	return 1
}

install_redis() {
	if command -v redis-server >/dev/null && command -v redis-cli >/dev/null; then
		return 0
	fi
	apt-get update
	DEBIAN_FRONTEND=noninteractive apt-get install -y redis-server
	# Debian's package may start a system-wide server on 6379; the bench
	# starts its own on the ports it is given, so that one is left alone.
}

install_tile38() {
	if [ -x "$GOBIN/tile38-server" ]; then
		return 0
	fi
	install_redis # redis-cli checks that the server answers
	if ! go install "github.com/tidwall/tile38/cmd/tile38-server@$TILE38_VERSION"; then
		echo "install.sh: could not build Tile38 $TILE38_VERSION from the Go module proxy (set TILE38_VERSION=vX.Y.Z to try a tag)" >&2
		return 1
	fi
}

start_redis() { # PORT DIR FSYNC
	local port=$1 dir=$2 fsync=${3:-always}
	case $fsync in always | everysec) ;; *)
		echo "install.sh: appendfsync $fsync: want always or everysec" >&2
		exit 2
		;;
	esac
	install_redis
	if ping "$port"; then
		return 0
	fi
	mkdir -p "$dir"
	dir=$(cd "$dir" && pwd)
	redis-server --bind 127.0.0.1 --port "$port" --dir "$dir" \
		--appendonly yes --appendfsync "$fsync" --save "" \
		--daemonize yes --pidfile "$dir/server.pid" --logfile "$dir/server.log"
	wait_up "$port" redis "$dir/server.log"
}

start_tile38() { # PORT DIR
	local port=$1 dir=$2
	install_tile38
	if ping "$port"; then
		return 0
	fi
	mkdir -p "$dir"
	dir=$(cd "$dir" && pwd)
	GOMAXPROCS=${GOMAXPROCS:-1} nohup "$GOBIN/tile38-server" -h 127.0.0.1 -p "$port" -d "$dir" \
		--appendonly yes >"$dir/server.log" 2>&1 </dev/null &
	echo $! >"$dir/server.pid"
	wait_up "$port" tile38 "$dir/server.log"
}

stop_server() { # PORT DIR
	local port=$1 dir=$2 pid
	[ -f "$dir/server.pid" ] || return 0
	pid=$(cat "$dir/server.pid")
	kill "$pid" 2>/dev/null || true
	for _ in $(seq 1 100); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	rm -f "$dir/server.pid"
	if ping "$port"; then
		echo "install.sh: something still answers on 127.0.0.1:$port" >&2
		return 1
	fi
}

case ${1:-} in
install)
	install_redis
	install_tile38 || echo "install.sh: Tile38 is not installed; the comparison runs without it" >&2
	;;
redis) start_redis "${2:?PORT}" "${3:?DIR}" "${4:-always}" ;;
tile38) start_tile38 "${2:?PORT}" "${3:?DIR}" ;;
stop) stop_server "${2:?PORT}" "${3:?DIR}" ;;
*)
	sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
	exit 2
	;;
esac
