#!/usr/bin/env bash
# User-space instructions per request, counted by valgrind (callgrind) for node binaries side
# by side: a figure that moves little with the shared machine's load (within 1-2% run to run),
# where requests/s swing by 5-10%. Counted: every instruction of the node's threads while
# redis-benchmark runs (parsing, routing, the command, statistics, the reply, the socket
# calls' user side, the scheduler), less the cron's and the compaction's, whose share grows
# with valgrind's slowness and not with requests. Instrumentation is switched on once the
# node answers and off before it shuts down, so start-up (the TSC calibration varies by a
# million instructions run to run) is not in it; the difference between a run of N and one
# of 3N requests, divided by 2N, takes out the 50 clients' connects and closes. Kernel time
# (the socket calls themselves) is not in it: it says which binary does more work per
# request, not how fast either is. A test that needs data first (LRANGE_*: redis-benchmark
# runs its LPUSH with the same -n) counts both per request.
#
# Usage: scripts/instructions-per-request.sh BIN...
# Env: TEST redis-benchmark -t [set]   N requests of the short run [50000]   PORT [7341]
#      KEEP_DIR  keep each run's callgrind file there, named BIN-TEST-REQUESTS.cg, for
#                per-function figures (callgrind_annotate [--inclusive=yes] FILE)
# Needs valgrind and a node built with rustix's libc backend (Cargo.toml: its raw vDSO lookup
# faults under valgrind). Takes about a minute per binary.
set -euo pipefail
# Failures inside $(...) (callgrind_control, a missing file) must stop the script, not print 0.
shopt -s inherit_errexit
[[ $# -ge 1 ]] || { sed -n 2,20p "$0"; exit 2; }
TEST="${TEST:-set}" N="${N:-50000}" PORT="${PORT:-7341}"
for tool in valgrind callgrind_annotate callgrind_control redis-benchmark redis-cli; do
    command -v "$tool" >/dev/null || { echo "instructions-per-request: $tool missing"; exit 1; }
done

# counted_instructions BIN REQUESTS -> instructions of the benchmark's run less the cron's
# and the compaction's
counted_instructions() {
    local bin=$1 requests=$2 dir pid total timed
    dir=$(mktemp -d)
    valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$dir/cg" \
        --dump-instr=no "$bin" --port "$PORT" --bind 127.0.0.1 --save "" --dir "$dir" \
        >"$dir/log" 2>&1 &
    pid=$!
    for _ in $(seq 300); do redis-cli -p "$PORT" ping >/dev/null 2>&1 && break; sleep 0.2; done
    callgrind_control -i on "$pid" >/dev/null 2>&1
    redis-benchmark -p "$PORT" -P 16 -c 50 -n "$requests" -q -t "$TEST" >/dev/null 2>&1
    callgrind_control -i off "$pid" >/dev/null 2>&1
    redis-cli -p "$PORT" shutdown nosave >/dev/null 2>&1 || kill "$pid"
    wait "$pid" || true
    total=$(awk '/^totals:/ { print $2 }' "$dir/cg")
    # The inclusive cost of the work driven by time, not requests: the cron task and the
    # keyspace compaction's steps (both read jemalloc's statistics, a few million
    # instructions a call). 0 for either that never ran while counted.
    # --threshold=100: by default the listing stops at 99% of the cost, which can leave out a
    # cron or compaction under 1% of it (and so subtract 0 for it in one run only).
    timed=$(callgrind_annotate --inclusive=yes --auto=no --threshold=100 "$dir/cg" 2>/dev/null |
        awk '/cron::run::\{\{closure\}\} \[/ && !cron { gsub(",", "", $1); cron = $1 }
             /db::compaction::step \[/ && !step { gsub(",", "", $1); step = $1 }
             END { print cron + step }')
    if [[ -n "${KEEP_DIR:-}" ]]; then
        mkdir -p "$KEEP_DIR"
        cp "$dir/cg" "$KEEP_DIR/$(basename "$bin")-$TEST-$requests.cg"
    fi
    rm -rf "$dir"
    [[ $total =~ ^[1-9][0-9]*$ && $timed =~ ^[0-9]+$ ]] ||
        { echo "instructions-per-request: no count for $bin (totals '$total')" >&2; exit 1; }
    echo $((total - timed))
}

for bin in "$@"; do
    short=$(counted_instructions "$bin" "$N")
    long=$(counted_instructions "$bin" $((3 * N)))
    echo "$bin $TEST: $(((long - short) / (2 * N))) instructions per request"
done
