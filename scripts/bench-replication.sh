#!/usr/bin/env bash
# Standalone replication under a redis-benchmark write load (issue "Replication", figures):
# stream bytes per second and the replica's lag, our node over `ofi:shm` (and `ofi:tcp` for
# reference) side by side with Debian's redis-server primary + replica (classic TCP
# replication) in the same run. Replaces the section between "<!-- BEGIN replication -->" and
# "<!-- END replication -->" in BENCHMARKS.md (appended at the end when missing). Not part of
# CI: run it by hand.
#
# Usage: scripts/bench-replication.sh
#
# Per round, per setup (the order rotates every round so drifts in machine load hit all
# alike): a primary and a replica are started, the replica is left to sync, then for each
# test scripts/bench_replication_run.py runs `redis-benchmark -t TEST -n N -P 16` against the
# primary while it samples INFO replication on both every 50 ms, and times the replica's
# catch-up after the load; then both are stopped (only one pair runs at a time: an idle
# fabric node still polls its completion queues).
#
# Env (defaults in brackets):
#   NODE_BIN       node binary [target/release/node; built when missing]
#   SETUPS         setups to run, space separated ["redis ofi:shm ofi:tcp"]
#   TESTS          redis-benchmark -t, comma separated [set,incr,lpush]
#   N              requests per test [1000000]
#   PIPELINE       redis-benchmark -P [16]
#   CLIENTS        redis-benchmark -c [50]
#   ROUNDS         rounds; cells are medians over rounds [3]
#   INTERVAL       sampling interval in seconds [0.05]
#   BACKLOG        repl-backlog-size of both primaries; "" = the servers' default (1mb) [64mb]
#                  (redis-server streams to a connected replica from its output buffer, not
#                  from the backlog; our primary ships from the backlog, and a replica further
#                  behind than it drops its link and must resync)
#   REDIS_ARGS, NODE_ARGS   extra flags for both redis-servers / both nodes []
#   PRIMARY_CPU, REPLICA_CPU, BENCH_CPU   taskset CPU lists; "" = not pinned [1, 1, 0]
#   OUT            report [BENCHMARKS.md at the repo root]
#   KEEP_TMP=1     keep the temp dir (logs, raw JSON)
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$SCRIPT_DIR/.." && pwd)"

SETUPS="${SETUPS:-redis ofi:shm ofi:tcp}"
TESTS="${TESTS:-set,incr,lpush}"
N="${N:-1000000}"
PIPELINE="${PIPELINE:-16}"
CLIENTS="${CLIENTS:-50}"
ROUNDS="${ROUNDS:-3}"
INTERVAL="${INTERVAL:-0.05}"
BACKLOG="${BACKLOG-64mb}"
REDIS_ARGS="${REDIS_ARGS:-}"
NODE_ARGS="${NODE_ARGS:-}"
PRIMARY_CPU="${PRIMARY_CPU-1}"
REPLICA_CPU="${REPLICA_CPU-1}"
BENCH_CPU="${BENCH_CPU-0}"
OUT="${OUT:-$ROOT/BENCHMARKS.md}"
READY_TIMEOUT=30
RUN_TIMEOUT=1200   # one bench_replication_run.py (it bounds its own waits; this is the backstop)

NODE_BIN="${NODE_BIN:-$ROOT/target/release/node}"
if [[ " $SETUPS " == *" ofi:"* && ! -x "$NODE_BIN" ]]; then
    (cd "$ROOT" && cargo build --release -p node --bin node)
fi
for tool in redis-server redis-cli redis-benchmark python3; do
    command -v "$tool" >/dev/null || { echo "bench-replication: $tool missing (scripts/install-deps.sh)" >&2; exit 1; }
done

TMP="$(mktemp -d /tmp/bench-replication.XXXXXX)"
PIDS=()
DRIVER_PID=""
stop_all() {
    local pid
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
    PIDS=()
}
cleanup() {
    if [[ -n "$DRIVER_PID" ]]; then kill "$DRIVER_PID" 2>/dev/null || true; wait "$DRIVER_PID" 2>/dev/null || true; fi
    stop_all
    if [[ "${KEEP_TMP:-0}" == 1 ]]; then echo "bench-replication: kept $TMP" >&2; else rm -rf "$TMP"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# A TCP port in 20000-39999 nobody listens on (checked by binding it).
free_port() {
    python3 - <<'EOF'
import random, socket
for _ in range(200):
    port = random.randint(20000, 39999)
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", port))
    except OSError:
        continue
    finally:
        s.close()
    print(port)
    break
else:
    raise SystemExit("no free port in 20000-39999")
EOF
}

pin() { # cpu-list: the taskset prefix, or nothing when unpinned
    if [[ -n "$1" ]]; then echo "taskset -c $1"; fi
}

wait_ping() { # port pid log
    local deadline=$((SECONDS + READY_TIMEOUT))
    until redis-cli -p "$1" PING >/dev/null 2>&1; do
        if ! kill -0 "$2" 2>/dev/null || ((SECONDS > deadline)); then
            echo "bench-replication: server on port $1 did not come up:" >&2; cat "$3" >&2; exit 1
        fi
        sleep 0.1
    done
}

wait_log() { # file line pid
    local deadline=$((SECONDS + READY_TIMEOUT))
    until grep -q "$2" "$1" 2>/dev/null; do
        if ! kill -0 "$3" 2>/dev/null || ((SECONDS > deadline)); then
            echo "bench-replication: no '$2' in $1:" >&2; cat "$1" >&2; exit 1
        fi
        sleep 0.1
    done
}

COMMANDS="$TMP/commands.txt"
: >"$COMMANDS"
RESULTS="$TMP/results.jsonl"
: >"$RESULTS"
note_command() { # the command with this run's ports and dirs replaced by names
    sed "s/ *$//; s#$TMP/[^ ]*#\$DIR#g; s/ $PRIMARY_PORT\b/ \$PRIMARY_PORT/g; s/ $REPLICA_PORT\b/ \$REPLICA_PORT/g; s/ $REPL_FABRIC_PORT\b/ \$REPL_FABRIC_PORT/g" <<<"$*" >>"$COMMANDS"
}

# Starts a primary and its replica for `setup`; sets PRIMARY_PORT and REPLICA_PORT.
start_pair() {
    local setup=$1 round=$2 dir
    dir="$TMP/r$round-${setup/:/-}"
    mkdir -p "$dir/primary" "$dir/replica"
    PRIMARY_PORT="$(free_port)"; REPLICA_PORT="$(free_port)"; REPL_FABRIC_PORT="$(free_port)"
    local primary_cmd replica_cmd backlog=""
    if [[ -n "$BACKLOG" ]]; then backlog=" --repl-backlog-size $BACKLOG"; fi
    if [[ "$setup" == redis ]]; then
        primary_cmd="$(pin "$PRIMARY_CPU") redis-server --port $PRIMARY_PORT --bind 127.0.0.1 --save '' --appendonly no --repl-diskless-sync-delay 0 --daemonize no --dir $dir/primary$backlog $REDIS_ARGS"
        replica_cmd="$(pin "$REPLICA_CPU") redis-server --port $REPLICA_PORT --bind 127.0.0.1 --save '' --appendonly no --daemonize no --dir $dir/replica --replicaof 127.0.0.1 $PRIMARY_PORT $REDIS_ARGS"
    else
        primary_cmd="$(pin "$PRIMARY_CPU") $NODE_BIN --port $PRIMARY_PORT --bind 127.0.0.1 --save '' --dir $dir/primary --fabric-provider $setup --rdma-bind 127.0.0.1 --repl-fabric-port $REPL_FABRIC_PORT$backlog $NODE_ARGS"
        replica_cmd="$(pin "$REPLICA_CPU") $NODE_BIN --port $REPLICA_PORT --bind 127.0.0.1 --save '' --dir $dir/replica --fabric-provider $setup --rdma-bind 127.0.0.1 --replicaof '127.0.0.1 $PRIMARY_PORT' $NODE_ARGS"
    fi
    # exec: the pid kept is the server's own (taskset execs it too), so stop_all reaches it.
    eval "exec $primary_cmd" >"$dir/primary.log" 2>&1 &
    PIDS+=($!)
    wait_ping "$PRIMARY_PORT" "${PIDS[-1]}" "$dir/primary.log"
    if [[ "$setup" != redis ]]; then
        wait_log "$dir/primary.log" 'accepting replication links (fabric)' "${PIDS[-1]}"
    fi
    eval "exec $replica_cmd" >"$dir/replica.log" 2>&1 &
    PIDS+=($!)
    wait_ping "$REPLICA_PORT" "${PIDS[-1]}" "$dir/replica.log"
    if ((round == 1)); then
        note_command "${primary_cmd/$NODE_BIN/node}"
        note_command "${replica_cmd/$NODE_BIN/node}"
    fi
}

setups=($SETUPS)
load_start="$(cut -d' ' -f1-3 /proc/loadavg)"
for round in $(seq 1 "$ROUNDS"); do
    # Rotate the setup order each round.
    shift_by=$(((round - 1) % ${#setups[@]}))
    order=("${setups[@]:shift_by}" "${setups[@]:0:shift_by}")
    for setup in "${order[@]}"; do
        start_pair "$setup" "$round"
        for test in ${TESTS//,/ }; do
            echo "bench-replication: round $round $setup $test -n $N -P $PIPELINE" >&2
            # In the background and waited for, so that INT/TERM reach the trap at once.
            timeout "$RUN_TIMEOUT" python3 "$SCRIPT_DIR/bench_replication_run.py" \
                --primary "$PRIMARY_PORT" --replica "$REPLICA_PORT" --test "$test" \
                -n "$N" -P "$PIPELINE" -c "$CLIENTS" --interval "$INTERVAL" \
                --bench-prefix "$(pin "$BENCH_CPU")" --label "$setup" >"$TMP/run.json" &
            DRIVER_PID=$!
            rc=0
            wait "$DRIVER_PID" || rc=$?
            DRIVER_PID=""
            if ((rc != 0)); then
                echo "bench-replication: $setup $test failed; logs in $TMP (KEEP_TMP=1 keeps them)" >&2
                exit 1
            fi
            out="$(cat "$TMP/run.json")"
            echo "$out" | python3 -c 'import json,sys; d=json.load(sys.stdin); d["round"]=int(sys.argv[1]); print(json.dumps(d))' "$round" >>"$RESULTS"
            if ((round == 1)); then note_command "$(python3 -c 'import json,sys; print(json.load(sys.stdin)["command"])' <<<"$out")"; fi
        done
        stop_all
    done
done

{
    echo "nproc: $(nproc)"
    echo "cpu: $(lscpu | sed -n 's/^Model name: *//p')"
    echo "kernel: $(uname -r)"
    echo "redis-server: $(redis-server --version | sed 's/ sha=.*//')"
    echo "libfabric: $(dpkg-query -W -f '${Version}' libfabric1 2>/dev/null || echo unknown)"
    echo "git: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)"
    echo "node binary: ${NODE_BIN#"$ROOT"/}"
    echo "load at start: $load_start; at end: $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "placement: primary CPU ${PRIMARY_CPU:-any}, replica CPU ${REPLICA_CPU:-any}, redis-benchmark CPU ${BENCH_CPU:-any}"
    echo "requests: $N per test, -P $PIPELINE, -c $CLIENTS"
    echo "rounds: $ROUNDS"
    echo "sampling: every ${INTERVAL} s"
    echo "repl-backlog-size: ${BACKLOG:-server default}"
    echo "date: $(date -u '+%Y-%m-%d %H:%M:%S')"
} >"$TMP/machine.txt"

python3 "$SCRIPT_DIR/bench_replication_report.py" --results "$RESULTS" \
    --machine "$TMP/machine.txt" --commands "$COMMANDS" --out "$OUT"
