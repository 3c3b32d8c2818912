#!/usr/bin/env bash
# A node's CPU while idle, with fabric clients connected and doing nothing: the figure behind
# "busy polling only while there is work, then blocking" (README, fabric section). Starts a
# node with a fabric listener and POLL_THREADS pollers, connects CLIENTS `operator cli`
# clients (each sends one PING, then waits on its input), lets SETTLE_SECS pass, then reads
# the node's user+system CPU (/proc/PID/stat) over WINDOW_SECS and its poller counters
# (INFO fabric). Not part of CI: run it by hand; compare binaries with NODE_BIN.
#
# Usage: scripts/idle-cpu.sh
# Env (defaults in brackets):
#   NODE_BIN       node binary [target/release/node]
#   OPERATOR_BIN   operator binary [target/release/operator]
#   PROVIDER       fabric provider [ofi:tcp]
#   CLIENTS        idle fabric clients [8]
#   POLL_THREADS   rdma-poll-threads [2]
#   WINDOW_SECS    measured idle window [10]
#   SETTLE_SECS    wait after the clients connect [3]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
NODE_BIN="${NODE_BIN:-$ROOT/target/release/node}"
OPERATOR_BIN="${OPERATOR_BIN:-$ROOT/target/release/operator}"
PROVIDER="${PROVIDER:-ofi:tcp}"
CLIENTS="${CLIENTS:-8}"
POLL_THREADS="${POLL_THREADS:-2}"
WINDOW_SECS="${WINDOW_SECS:-10}"
SETTLE_SECS="${SETTLE_SECS:-3}"
for bin in "$NODE_BIN" "$OPERATOR_BIN"; do
    [[ -x "$bin" ]] || { echo "idle-cpu: $bin missing (cargo build --release)"; exit 1; }
done
command -v redis-cli >/dev/null || { echo "idle-cpu: redis-cli missing (scripts/install-deps.sh)"; exit 1; }

port=$((20000 + RANDOM % 10000))
rdma_port=$((port + 1))
dir=$(mktemp -d)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$dir"
}
trap cleanup EXIT
"$NODE_BIN" --port "$port" --bind 127.0.0.1 --save "" --dir "$dir" \
    --rdma-port "$rdma_port" --rdma-bind 127.0.0.1 --fabric-provider "$PROVIDER" \
    --rdma-poll-threads "$POLL_THREADS" >"$dir/log" 2>&1 &
node=$!
pids+=("$node")
for _ in $(seq 200); do
    grep -q "ready to accept connections (fabric)" "$dir/log" && break
    sleep 0.1
done
grep -q "ready to accept connections (fabric)" "$dir/log" || { cat "$dir/log"; exit 1; }

# Each client reads commands from a pipe that stays open (a FIFO held by a sleeping writer).
for i in $(seq "$CLIENTS"); do
    mkfifo "$dir/in$i"
    "$OPERATOR_BIN" cli --fabric "$PROVIDER" -p "$rdma_port" <"$dir/in$i" >"$dir/out$i" 2>&1 &
    pids+=("$!")
    { echo PING; sleep $((SETTLE_SECS + WINDOW_SECS + 30)); } >"$dir/in$i" &
    pids+=("$!")
done
sleep "$SETTLE_SECS"
field() { redis-cli -p "$port" INFO fabric | tr -d '\r' | sed -n "s/^$1://p"; }
connected=$(field fabric_connected_clients)
ticks() { awk '{ print $14 + $15 }' "/proc/$node/stat"; }
t0=$(ticks) b0=$(field fabric_poller_blocks) s0=$(field fabric_poller_sleeps)
sleep "$WINDOW_SECS"
t1=$(ticks) b1=$(field fabric_poller_blocks) s1=$(field fabric_poller_sleeps)
hz=$(getconf CLK_TCK)
echo "provider $PROVIDER, $connected idle fabric clients, $POLL_THREADS pollers, ${WINDOW_SECS} s:"
awk -v t=$((t1 - t0)) -v hz="$hz" 'BEGIN { printf "  node CPU %.2f s\n", t / hz }'
echo "  poller blocks $((b1 - b0)), sleeps $((s1 - s0))"
