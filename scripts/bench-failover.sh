#!/usr/bin/env bash
# Failover under writes (issue "Replication", figures): a 6-node cluster (3 primaries with one
# replica each) made by `redis-cli --cluster create --cluster-replicas 1`, continuous writes,
# a primary killed with kill -9 ITERATIONS times; the time until a write to a slot of the
# killed primary succeeds on the new primary, and acknowledged writes lost. Debian's
# redis-server and our node at the same cluster-node-timeout in the same run. Replaces the
# section between "<!-- BEGIN failover -->" and "<!-- END failover -->" in BENCHMARKS.md
# (appended at the end when missing). Not part of CI: run it by hand.
#
# Usage: scripts/bench-failover.sh
#
# The work is done by scripts/bench_failover.py (one server kind, one timeout per call; it
# bounds every wait and reports a step that did not happen instead of hanging); this script
# runs it for each timeout, redis-server then node, and writes the report with
# scripts/bench_failover_report.py.
#
# Env (defaults in brackets):
#   NODE_BIN       node binary [target/release/node; built when missing]
#   SERVERS        server kinds, in order ["redis node"]
#   TIMEOUTS       cluster-node-timeout values in ms ["1000 200"]
#   ITERATIONS     kills per server and timeout [20]
#   FABRIC         our node's fabric provider (cluster bus and replication) [ofi:tcp]
#   NODE_ARGS      extra node flags ["--repl-sync-acks 1": a write is answered once a
#                  replica acknowledged it]
#   WAIT_MS        redis-server: `WAIT 1 WAIT_MS` after each acknowledged SET [100]
#   WRITE_RATE     writes per second of the writer, 0 = unpaced [2000]
#   OUT            report [BENCHMARKS.md at the repo root]
#   KEEP_TMP=1     keep the temp dir (server logs, raw JSON)
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$SCRIPT_DIR/.." && pwd)"

SERVERS="${SERVERS:-redis node}"
TIMEOUTS="${TIMEOUTS:-1000 200}"
ITERATIONS="${ITERATIONS:-20}"
FABRIC="${FABRIC:-ofi:tcp}"
NODE_ARGS="${NODE_ARGS---repl-sync-acks 1}"
WAIT_MS="${WAIT_MS:-100}"
WRITE_RATE="${WRITE_RATE:-2000}"
OUT="${OUT:-$ROOT/BENCHMARKS.md}"
# One bench_failover.py call: its own waits are bounded (create 120 s, each failover at most
# max(30 s, 30 node timeouts), each return to health 120 s); this is the backstop.
RUN_TIMEOUT=$((600 + ITERATIONS * 300))

NODE_BIN="${NODE_BIN:-$ROOT/target/release/node}"
if [[ " $SERVERS " == *" node "* && ! -x "$NODE_BIN" ]]; then
    (cd "$ROOT" && cargo build --release -p node --bin node)
fi
for tool in redis-server redis-cli python3; do
    command -v "$tool" >/dev/null || { echo "bench-failover: $tool missing (scripts/install-deps.sh)" >&2; exit 1; }
done

TMP="$(mktemp -d /tmp/bench-failover.XXXXXX)"
PIDFILE="$TMP/pids"   # every server the driver starts, in case the driver dies first
: >"$PIDFILE"
DRIVER_PID=""
# Kills the servers listed in the pid file that are still ours: a pid is killed only if its
# command line names this run's temp dir (every server's --dir is under it).
kill_servers() {
    local pid
    while read -r pid; do
        if tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline" | grep -qF "$TMP/"; then
            kill -9 "$pid" 2>/dev/null || true
        fi
    done <"$PIDFILE"
}
cleanup() {
    if [[ -n "$DRIVER_PID" ]]; then kill "$DRIVER_PID" 2>/dev/null || true; wait "$DRIVER_PID" 2>/dev/null || true; fi
    kill_servers
    if [[ "${KEEP_TMP:-0}" == 1 ]]; then echo "bench-failover: kept $TMP" >&2; else rm -rf "$TMP"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

RESULTS="$TMP/results.jsonl"
: >"$RESULTS"
load_start="$(cut -d' ' -f1-3 /proc/loadavg)"
for timeout_ms in $TIMEOUTS; do
    for server in $SERVERS; do
        echo "bench-failover: $server, cluster-node-timeout $timeout_ms ms, $ITERATIONS kills" >&2
        work="$TMP/$server-$timeout_ms"
        mkdir -p "$work"
        # The driver's exit status is in its summary line (status ok/failed); a failed run of
        # one server does not stop the others.
        timeout "$RUN_TIMEOUT" python3 "$SCRIPT_DIR/bench_failover.py" --server "$server" \
            --timeout-ms "$timeout_ms" --iterations "$ITERATIONS" --workdir "$work" \
            --node-bin "$NODE_BIN" --fabric "$FABRIC" --node-args "$NODE_ARGS" \
            --wait-ms "$WAIT_MS" --write-rate "$WRITE_RATE" --pidfile "$PIDFILE" \
            >>"$RESULTS" &
        DRIVER_PID=$!
        rc=0
        wait "$DRIVER_PID" || rc=$?
        DRIVER_PID=""
        if ((rc == 124)); then
            echo "{\"kind\": \"summary\", \"server\": \"$server\", \"timeout_ms\": $timeout_ms, \"status\": \"failed\", \"reason\": \"the driver did not finish within $RUN_TIMEOUT s\"}" >>"$RESULTS"
        elif ((rc != 0 && rc != 2)); then
            echo "{\"kind\": \"summary\", \"server\": \"$server\", \"timeout_ms\": $timeout_ms, \"status\": \"failed\", \"reason\": \"the driver exited with $rc (see $work)\"}" >>"$RESULTS"
        fi
        # Servers of this call are gone (the driver stops them); make sure.
        kill_servers
        : >"$PIDFILE"
    done
done

{
    echo "nproc: $(nproc)"
    echo "cpu: $(lscpu | sed -n 's/^Model name: *//p')"
    echo "kernel: $(uname -r)"
    echo "redis-server: $(redis-server --version | sed 's/ sha=.*//')"
    echo "git: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)"
    echo "load at start: $load_start; at end: $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "kills per server and timeout: $ITERATIONS"
    echo "writer: $WRITE_RATE writes/s, one at a time; redis-server: WAIT 1 $WAIT_MS after each SET"
    echo "node: --fabric-provider $FABRIC $NODE_ARGS"
    echo "node binary: ${NODE_BIN#"$ROOT"/}"
    echo "date: $(date -u '+%Y-%m-%d %H:%M:%S')"
} >"$TMP/machine.txt"

python3 "$SCRIPT_DIR/bench_failover_report.py" --results "$RESULTS" \
    --machine "$TMP/machine.txt" --out "$OUT"
