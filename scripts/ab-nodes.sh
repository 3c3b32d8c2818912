#!/usr/bin/env bash
# Two node binaries (or one with two flag sets) alternated under the same redis-benchmark run,
# the way BENCHMARKS.md's by-hand A/B figures were taken (per-command costs, the write after
# the round), optionally with a preloaded keyspace and a perf profile of each run.
#
# Usage: scripts/ab-nodes.sh BIN_A BIN_B      (each may carry flags: "path --io-threads 2")
# Env (defaults in brackets):
#   TEST     redis-benchmark -t, or eval (the vs-redis suite's script of one SET) [set]
#   ROUNDS   A/B pairs [3]
#   P        pipeline depth [16]                 C       clients [50]
#   N        requests per run [2000000]          PORT    first port [7121]
#   KEYS     preload this many keys and draw from them (-r), e.g. 1000000 [none]
#   PERF=1   perf record -g each server run into $PERF_DIR/{a,b}-ROUND.data [/tmp]
# Servers are pinned to CPU 1 and redis-benchmark to CPU 0. Prints each pair's requests/s and
# the means with B/A. Ratios between runs minutes apart on a shared machine are noise-prone:
# alternate, repeat, and read a few percent as noise.
set -euo pipefail
[[ $# == 2 ]] || { sed -n 2,17p "$0"; exit 2; }
TEST="${TEST:-set}" ROUNDS="${ROUNDS:-3}" P="${P:-16}" C="${C:-50}" N="${N:-2000000}"
PORT="${PORT:-7121}" PERF_DIR="${PERF_DIR:-/tmp}"
for tool in redis-benchmark redis-cli taskset; do
    command -v "$tool" >/dev/null || { echo "ab-nodes: $tool missing (scripts/install-deps.sh)"; exit 1; }
done

# one_run NAME "BIN FLAGS" PORT ROUND -> prints requests/s
one_run() {
    local name=$1 bin=$2 port=$3 round=$4 dir pid perf_pid=""
    dir=$(mktemp -d)
    # shellcheck disable=SC2086 # the binary's flags are meant to split
    taskset -c 1 $bin --port "$port" --bind 127.0.0.1 --save "" --dir "$dir" >"$dir/log" 2>&1 &
    pid=$!
    for _ in $(seq 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
    local range=()
    if [[ -n "${KEYS:-}" ]]; then
        range=(-r "$KEYS")
        # About four SETs per key draw nearly every key; the node's warm gate is refreshed
        # by its cron within 1/hz s.
        taskset -c 0 redis-benchmark -p "$port" -t set -r "$KEYS" -n $((KEYS * 4)) -P 16 -c 50 -q >/dev/null 2>&1
        sleep 0.5
    fi
    if [[ "${PERF:-0}" == 1 ]]; then
        perf record -F 2000 -g -p "$pid" -o "$PERF_DIR/$name-$round.data" >/dev/null 2>&1 &
        perf_pid=$!
        sleep 0.3
    fi
    local test=(-t "$TEST")
    if [[ "$TEST" == eval ]]; then
        test=(EVAL "return redis.call('SET', KEYS[1], ARGV[1])" 1 "key:__rand_int__" value)
    fi
    taskset -c 0 redis-benchmark -p "$port" -P "$P" -c "$C" -n "$N" "${range[@]}" --csv "${test[@]}" 2>/dev/null |
        tail -1 | awk -F'","' '{ print $2 }'
    if [[ -n "$perf_pid" ]]; then kill -INT "$perf_pid"; wait "$perf_pid" 2>/dev/null || true; fi
    kill "$pid"; wait "$pid" 2>/dev/null || true
    rm -rf "$dir"
}

for round in $(seq "$ROUNDS"); do
    a=$(one_run a "$1" "$PORT" "$round")
    b=$(one_run b "$2" $((PORT + 1)) "$round")
    echo "$a $b"
done | awk '{ a += $1; b += $2; print } END { printf "mean A %.0f B %.0f B/A %.3f\n", a / NR, b / NR, b / a }'
