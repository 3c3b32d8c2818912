#!/usr/bin/env bash
# User-space instructions per request on the command path, counted by valgrind (callgrind) for
# node binaries side by side: a figure that does not move with the shared machine's load, where
# requests/s swing by several percent between runs. What is counted is everything under the
# session's `process_input` (parsing, routing, the command, statistics, the reply), the
# difference between a run of N and one of 3N requests divided by 2N, so start-up and the cron
# (whose share grows with valgrind's slowness) drop out. Kernel time (the socket calls) is not
# in it: it says which binary does more work per request, not how fast either is.
#
# Usage: scripts/instructions-per-request.sh BIN...
# Env: TEST redis-benchmark -t [set]   N requests of the short run [50000]   PORT [7341]
#      KEEP_DIR  keep each run's callgrind file there, named BIN-TEST-REQUESTS.cg, for
#                per-function figures (callgrind_annotate [--inclusive=yes] FILE)
# Needs valgrind and a node built with rustix's libc backend (Cargo.toml: its raw vDSO lookup
# faults under valgrind). Takes about a minute per binary.
set -euo pipefail
[[ $# -ge 1 ]] || { sed -n 2,15p "$0"; exit 2; }
TEST="${TEST:-set}" N="${N:-50000}" PORT="${PORT:-7341}"
for tool in valgrind callgrind_annotate redis-benchmark redis-cli; do
    command -v "$tool" >/dev/null || { echo "instructions-per-request: $tool missing"; exit 1; }
done

# path_instructions BIN REQUESTS -> instructions under process_input for that many requests
path_instructions() {
    local bin=$1 requests=$2 dir pid
    dir=$(mktemp -d)
    valgrind --tool=callgrind --callgrind-out-file="$dir/cg" --dump-instr=no \
        "$bin" --port "$PORT" --bind 127.0.0.1 --save "" --dir "$dir" >"$dir/log" 2>&1 &
    pid=$!
    for _ in $(seq 300); do redis-cli -p "$PORT" ping >/dev/null 2>&1 && break; sleep 0.2; done
    redis-benchmark -p "$PORT" -P 16 -c 50 -n "$requests" -q -t "$TEST" >/dev/null 2>&1
    redis-cli -p "$PORT" shutdown nosave >/dev/null 2>&1 || kill "$pid"
    wait "$pid" || true
    callgrind_annotate --inclusive=yes "$dir/cg" 2>/dev/null |
        awk '/session::Session::process_input \[/ { gsub(",", "", $1); print $1; exit }'
    if [[ -n "${KEEP_DIR:-}" ]]; then
        mkdir -p "$KEEP_DIR"
        cp "$dir/cg" "$KEEP_DIR/$(basename "$bin")-$TEST-$requests.cg"
    fi
    rm -rf "$dir"
}

for bin in "$@"; do
    short=$(path_instructions "$bin" "$N")
    long=$(path_instructions "$bin" $((3 * N)))
    echo "$bin $TEST: $(((long - short) / (2 * N))) instructions per request"
done
