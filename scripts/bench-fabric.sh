#!/usr/bin/env bash
# The same node driven over TCP, ofi:shm and ofi:tcp by `operator bench` (issue "The fabric",
# item 8): throughput, p50, p99 and server CPU seconds per 100k requests, from the node's own
# CPU clock (INFO cpu: used_cpu_sys + used_cpu_user, whole process), which `operator bench
# --server-cpu` reads over a probe connection just before the first request and after the last
# reply (so connecting the clients, which costs a fabric far more than TCP, is not counted).
# Replaces the section between "<!-- BEGIN fabric -->" and "<!-- END fabric -->" in
# BENCHMARKS.md (appended at the end when missing). Not part of CI: run it by hand.
#
# Usage: scripts/bench-fabric.sh
#
# Per provider (ofi:shm, then ofi:tcp) one node is started with a TCP and a fabric listener;
# for each -P and each test the TCP run and the fabric run follow each other (the order swaps
# every round), so drifts in machine load hit both alike. Each test is its own `operator bench`
# run so that the CPU delta belongs to that test alone.
#
# Env (defaults in brackets):
#   PROFILE        cargo profile the binaries are built with [release]
#   NODE_BIN, OPERATOR_BIN   binaries to use instead of building [target/$PROFILE/...]
#   PROVIDERS      fabric providers, space separated ["ofi:shm ofi:tcp"]
#   TESTS          operator bench -t [set,get,incr,lpush,lpop,sadd,hset]
#   CLIENTS        operator bench -c [4]
#   N_P1, N_P16    requests per test at -P 1 and -P 16 [50000, 500000]
#   ROUNDS         interleaved rounds; cells are medians over rounds [5]
#   NODE_ARGS      extra node flags []
#   OUT            report [BENCHMARKS.md at the repo root]
#   KEEP_TMP=1     keep the temp dir (node logs, raw CSV)
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$SCRIPT_DIR/.." && pwd)"

PROFILE="${PROFILE:-release}"
PROVIDERS="${PROVIDERS:-ofi:shm ofi:tcp}"
TESTS="${TESTS:-set,get,incr,lpush,lpop,sadd,hset}"
CLIENTS="${CLIENTS:-4}"
N_P1="${N_P1:-50000}"
N_P16="${N_P16:-500000}"
ROUNDS="${ROUNDS:-5}"
NODE_ARGS="${NODE_ARGS:-}"
OUT="${OUT:-$ROOT/BENCHMARKS.md}"
READY_TIMEOUT=30
BENCH_TIMEOUT=600

profile_dir="$PROFILE"
[[ "$PROFILE" == dev ]] && profile_dir=debug
if [[ -z "${NODE_BIN:-}" || -z "${OPERATOR_BIN:-}" ]]; then
    (cd "$ROOT" && cargo build --profile "$PROFILE" -p node --bin node -p operator --bin operator)
fi
NODE_BIN="${NODE_BIN:-$ROOT/target/$profile_dir/node}"
OPERATOR_BIN="${OPERATOR_BIN:-$ROOT/target/$profile_dir/operator}"
command -v redis-cli >/dev/null || { echo "bench-fabric: redis-cli missing (scripts/install-deps.sh)" >&2; exit 1; }

TMP="$(mktemp -d /tmp/bench-fabric.XXXXXX)"
NODE_PID=""
cleanup() {
    if [[ -n "$NODE_PID" ]]; then kill "$NODE_PID" 2>/dev/null || true; wait "$NODE_PID" 2>/dev/null || true; fi
    if [[ "${KEEP_TMP:-0}" == 1 ]]; then echo "bench-fabric: kept $TMP" >&2; else rm -rf "$TMP"; fi
}
trap cleanup EXIT

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

RESULTS="$TMP/results.tsv"   # provider, P, test, transport, rps, p50, p99, cpu_s, requests
: >"$RESULTS"
COMMANDS="$TMP/commands.txt"
: >"$COMMANDS"

run_one() { # provider port rdma_port P N test transport round
    local provider=$1 port=$2 rdma_port=$3 p=$4 n=$5 test=$6 transport=$7 round=$8
    local args=(bench -p "$port" -t "$test" -n "$n" -P "$p" -c "$CLIENTS" --csv --server-cpu)
    if [[ "$transport" != tcp ]]; then args=(bench --fabric "$transport" -p "$rdma_port" -t "$test" -n "$n" -P "$p" -c "$CLIENTS" --csv --server-cpu); fi
    echo "operator ${args[*]}" | sed "s/-p $port /-p \$PORT /; s/-p $rdma_port /-p \$RDMA_PORT /" >>"$COMMANDS"
    redis-cli -p "$port" FLUSHALL >/dev/null
    local csv
    csv="$TMP/r$round-$provider-p$p-$test-$transport.csv"
    if ! timeout "$BENCH_TIMEOUT" "$OPERATOR_BIN" "${args[@]}" >"$csv" 2>"$csv.err"; then
        echo "bench-fabric: operator ${args[*]} failed:" >&2; cat "$csv.err" >&2; exit 1
    fi
    while IFS=, read -r title rps _avg _min p50 _p95 p99 _max _p999 errors cpu_us; do
        if [[ "$errors" != 0 ]]; then echo "bench-fabric: $title over $transport: $errors errors" >&2; exit 1; fi
        if [[ -z "$cpu_us" ]]; then echo "bench-fabric: $title over $transport: no server CPU column" >&2; exit 1; fi
        printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$provider" "$p" "$title" "$transport" \
            "$rps" "$p50" "$p99" "$(awk -v us="$cpu_us" -v n="$n" 'BEGIN {printf "%.6f", us * n / 1e6}')" "$n" "$round" >>"$RESULTS"
    done < <(tail -n +2 "$csv" | tr -d '"')
}

for provider in $PROVIDERS; do
    port="$(free_port)"; rdma_port="$(free_port)"
    dir="$TMP/node-${provider/:/-}"; mkdir -p "$dir"
    # shellcheck disable=SC2086
    "$NODE_BIN" --port "$port" --bind 127.0.0.1 --save '' --dir "$dir" \
        --rdma-port "$rdma_port" --rdma-bind 127.0.0.1 --fabric-provider "$provider" $NODE_ARGS \
        2>"$dir/node.log" &
    NODE_PID=$!
    echo "node --port \$PORT --bind 127.0.0.1 --save '' --dir \$DIR --rdma-port \$RDMA_PORT --rdma-bind 127.0.0.1 --fabric-provider $provider $NODE_ARGS" >>"$COMMANDS"
    deadline=$((SECONDS + READY_TIMEOUT))
    until grep -q 'ready to accept connections (fabric)' "$dir/node.log" 2>/dev/null; do
        if ! kill -0 "$NODE_PID" 2>/dev/null || ((SECONDS > deadline)); then
            echo "bench-fabric: node with $provider did not come up:" >&2; cat "$dir/node.log" >&2; exit 1
        fi
        sleep 0.1
    done
    for round in $(seq 1 "$ROUNDS"); do
        for p in 1 16; do
            n=$N_P1; [[ $p == 16 ]] && n=$N_P16
            for test in ${TESTS//,/ }; do
                if (( (round + p) % 2 == 0 )); then order="tcp $provider"; else order="$provider tcp"; fi
                for transport in $order; do
                    echo "bench-fabric: round $round $provider -P $p $test over $transport" >&2
                    run_one "$provider" "$port" "$rdma_port" "$p" "$n" "$test" "$transport" "$round"
                done
            done
        done
    done
    kill "$NODE_PID"; wait "$NODE_PID" 2>/dev/null || true; NODE_PID=""
done

{
    echo "nproc: $(nproc)"
    echo "cpu: $(lscpu | sed -n 's/^Model name: *//p')"
    echo "kernel: $(uname -r)"
    echo "libfabric: $(dpkg-query -W -f '${Version}' libfabric1 2>/dev/null || echo unknown)"
    echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "git: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)"
    echo "profile: $PROFILE"
    echo "clients: $CLIENTS"
    echo "n_p1: $N_P1"
    echo "n_p16: $N_P16"
    echo "rounds: $ROUNDS"
    echo "date: $(date -u '+%Y-%m-%d %H:%M:%S')"
} >"$TMP/machine.txt"

python3 "$SCRIPT_DIR/bench_fabric_report.py" --results "$RESULTS" --machine "$TMP/machine.txt" \
    --commands "$COMMANDS" --out "$OUT"
