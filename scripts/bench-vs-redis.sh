#!/usr/bin/env bash
# Benchmark our `node` against Debian's `redis-server`, side by side in one
# run, on loopback, with the same redis-benchmark binary, and write
# BENCHMARKS.md (regenerated, except the sections other scripts own: fabric,
# replication, failover; see scripts/bench_sections.py).
#
# Usage: scripts/bench-vs-redis.sh            (full run, takes a while)
#        QUICK=1 scripts/bench-vs-redis.sh    (smoke test, tiny N)
#
# Env (defaults in brackets; QUICK=1 changes the N defaults only):
#   NODE_BIN       node binary; unset: `cargo build --release -p node` [target/release/node]
#   NODE_ARGS      extra flags for node, e.g. "--io-threads 2" []
#   REDIS_BIN      reference server [redis-server]
#   REDIS_ARGS     extra flags for redis-server []
#   NODE_PORT, REDIS_PORT   ports [free ports picked at random]
#   N_P1           requests per test at -P 1  [200000; QUICK: 2000]
#   N_P16          requests per test at -P 16 [2000000; QUICK: 20000]
#   CLIENTS        redis-benchmark -c [50]
#   TESTS          redis-benchmark -t [ping,set,get,incr,lpush,rpush,lpop,rpop,sadd,
#                  hset,spop,zadd,zpopmin,lrange_100,mset]
#   ROUNDS         interleaved rounds [3]
#   PIN            1: pin each server to CPU 1 and redis-benchmark to CPU 0 with
#                  taskset, so client and server do not fight over one core and
#                  both servers get the same placement; 0: no pinning [1 if the
#                  machine has >= 2 CPUs]
#   AGG            per-test aggregation over rounds: median | best [median]
#   MEM_KEYS       keys loaded for the memory comparison [1000000; QUICK: 100000]
#   VALUE_SIZE     value bytes for the memory comparison [100]
#   BENCH_TIMEOUT  seconds before one redis-benchmark run is killed [1800; QUICK: 300]
#   READY_TIMEOUT  seconds to wait for a server to answer PING [30]
#   OUT            report path [BENCHMARKS.md at the repo root]
#   SKIP_DEPS=1    do not run scripts/install-deps.sh (needs root)
#   KEEP_TMP=1     keep the temp dir (logs, raw CSV) even on success
# Exit status is non-zero, with a message, if a server dies, a server does not
# become ready, or redis-benchmark / redis-cli --pipe reports any error.
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$SCRIPT_DIR/.." && pwd)"

QUICK="${QUICK:-0}"
if [[ "$QUICK" == 1 ]]; then
    def_n1=2000 def_n16=20000 def_mem=100000 def_timeout=300
else
    # About 2.5 s per run at -P 1 and 2 s at -P 16 on the reference VM: runs of ~1 s left
    # single cells 5-10% apart between two full runs of this script (2026-12-03).
    def_n1=200000 def_n16=2000000 def_mem=1000000 def_timeout=1800
fi
NODE_BIN="${NODE_BIN:-}"
NODE_ARGS="${NODE_ARGS:-}"
REDIS_BIN="${REDIS_BIN:-redis-server}"
REDIS_ARGS="${REDIS_ARGS:-}"
N_P1="${N_P1:-$def_n1}"
N_P16="${N_P16:-$def_n16}"
CLIENTS="${CLIENTS:-50}"
TESTS="${TESTS:-ping,set,get,incr,lpush,rpush,lpop,rpop,sadd,hset,spop,zadd,zpopmin,lrange_100,mset}"
ROUNDS="${ROUNDS:-3}"
if [[ "$(nproc)" -ge 2 ]]; then def_pin=1; else def_pin=0; fi
PIN="${PIN:-$def_pin}"
AGG="${AGG:-median}"
MEM_KEYS="${MEM_KEYS:-$def_mem}"
VALUE_SIZE="${VALUE_SIZE:-100}"
BENCH_TIMEOUT="${BENCH_TIMEOUT:-$def_timeout}"
READY_TIMEOUT="${READY_TIMEOUT:-30}"
OUT="${OUT:-$ROOT/BENCHMARKS.md}"
SKIP_DEPS="${SKIP_DEPS:-0}"
KEEP_TMP="${KEEP_TMP:-0}"
HOST=127.0.0.1

log() { printf 'bench: %s\n' "$*" >&2; }
die() { printf 'bench: ERROR: %s\n' "$*" >&2; exit 1; }

for v in N_P1 N_P16 CLIENTS ROUNDS MEM_KEYS VALUE_SIZE BENCH_TIMEOUT READY_TIMEOUT; do
    [[ "${!v}" =~ ^[1-9][0-9]*$ ]] || die "$v must be a positive integer, got '${!v}'"
done
[[ "$AGG" == median || "$AGG" == best ]] || die "AGG must be median or best, got '$AGG'"
[[ "$PIN" == 0 || "$PIN" == 1 ]] || die "PIN must be 0 or 1, got '$PIN'"
if [[ "$PIN" == 1 ]]; then
    server_pin=(taskset -c 1)
    bench_pin=(taskset -c 0)
else
    server_pin=()
    bench_pin=()
fi

# ---- dependencies and binaries ----------------------------------------------
if [[ "$SKIP_DEPS" != 1 ]]; then
    "$SCRIPT_DIR/install-deps.sh"
fi
for tool in redis-cli redis-benchmark python3 timeout taskset; do
    command -v "$tool" >/dev/null || die "$tool not found (run scripts/install-deps.sh)"
done
command -v "$REDIS_BIN" >/dev/null || die "REDIS_BIN '$REDIS_BIN' not found"

if [[ -z "$NODE_BIN" ]]; then
    log "building node (release)"
    (cd "$ROOT" && cargo build --release -p node)
    target="${CARGO_TARGET_DIR:-$ROOT/target}"
    [[ "$target" == /* ]] || target="$ROOT/$target"
    NODE_BIN="$target/release/node"
fi
[[ -x "$NODE_BIN" ]] || NODE_BIN="$(command -v "$NODE_BIN" || true)"
[[ -n "$NODE_BIN" && -x "$NODE_BIN" ]] || die "node binary not found or not executable"

# Extra flags are split on whitespace on purpose (flag lists, not paths).
read -r -a node_extra <<<"$NODE_ARGS"
read -r -a redis_extra <<<"$REDIS_ARGS"

# ---- temp dir, servers, cleanup ---------------------------------------------
WORK="$(mktemp -d "${TMPDIR:-/tmp}/bench-vs-redis.XXXXXX")"
RES="$WORK/results"
mkdir -p "$WORK/redis" "$WORK/node" "$RES"
: >"$RES/commands.txt"
: >"$RES/warnings.txt"

declare -A PID=() PORT=() LOGF=()
BENCH_PID=""  # the redis-benchmark run in flight, if any

cleanup() {
    local rc=$? s pid
    # Stop only what this script started, by pid: a benchmark in flight
    # (it would spin once its server is gone), then the servers.
    if [[ -n "$BENCH_PID" ]]; then
        kill "$BENCH_PID" 2>/dev/null || true
        wait "$BENCH_PID" 2>/dev/null || true
    fi
    for s in "${!PID[@]}"; do
        pid="${PID[$s]}"
        kill "$pid" 2>/dev/null || true
    done
    for s in "${!PID[@]}"; do
        pid="${PID[$s]}"
        for _ in $(seq 50); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        kill -9 "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    if [[ $rc -eq 0 && "$KEEP_TMP" != 1 ]]; then
        rm -rf "$WORK"
    else
        log "server logs and raw results kept in $WORK"
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM   # run the EXIT trap on Ctrl-C / kill too

# A free loopback port chosen by the kernel (tiny race until the server binds;
# a bind failure shows up as "server exited" with its log).
free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
PORT[redis]="${REDIS_PORT:-$(free_port)}"
PORT[node]="${NODE_PORT:-$(free_port)}"
while [[ "${PORT[node]}" == "${PORT[redis]}" ]]; do PORT[node]="$(free_port)"; done

# Record a command line for the report's "Commands" section, shell-quoted
# but readable: plain words stay bare, anything else is single-quoted
# (printf %q would print ping\,set\,get...).
record() {
    local a q line=""
    for a in "$@"; do
        if [[ "$a" =~ ^[A-Za-z0-9_./:,=+@%-]+$ ]]; then
            q="$a"
        else
            q="'${a//\'/\'\\\'\'}'"
        fi
        line+="${line:+ }$q"
    done
    printf '%s\n' "$line" >>"$RES/commands.txt"
}

rcli() {  # rcli SERVER ARGS... ; bounded so a hung server cannot hang us
    timeout 60 redis-cli -h "$HOST" -p "${PORT[$1]}" "${@:2}"
}

check_alive() {
    if ! kill -0 "${PID[$1]}" 2>/dev/null; then
        log "last lines of the $1 log (${LOGF[$1]}):"
        tail -n 30 "${LOGF[$1]}" >&2 || true
        die "$1 server (pid ${PID[$1]}) exited"
    fi
}

start_server() {  # start_server NAME CMD...
    local name="$1"
    shift
    record "$@"
    LOGF[$name]="$WORK/$name.log"
    "$@" >"${LOGF[$name]}" 2>&1 &
    PID[$name]=$!
}

wait_ready() {
    local name="$1" deadline=$((SECONDS + READY_TIMEOUT))
    while :; do
        check_alive "$name"
        if [[ "$(timeout 5 redis-cli -h "$HOST" -p "${PORT[$name]}" ping 2>/dev/null || true)" == PONG ]]; then
            return 0
        fi
        ((SECONDS < deadline)) || die "$name did not answer PING on port ${PORT[$name]} within ${READY_TIMEOUT}s"
        sleep 0.2
    done
}

# CPU time the server process has used, in ns: the sum over its threads of the
# scheduler's run time (/proc/PID/task/TID/schedstat, first field), precise where
# /proc/PID/stat counts 10 ms ticks. (%.0f: mawk's %d stops at 2^31 ns, 2.1 s.)
# Only live threads count: both servers keep their threads for their whole life; a thread
# that exited during a run would take its CPU time with it.
server_cpu_ns() {
    cat /proc/"${PID[$1]}"/task/*/schedstat 2>/dev/null | awk '{ t += $1 } END { printf "%.0f\n", t }'
}

# Microseconds the node's event loop spent busy polling with nothing to read (INFO stats
# io_busy_poll_usec; redis-server has no such field: 0). Taken out of the server CPU per
# request, which is meant to compare the work each server does per request, not how it waits.
busy_poll_usec() {
    local v
    v="$(rcli "$1" INFO stats 2>/dev/null | tr -d '\r' | sed -n 's/^io_busy_poll_usec://p')"
    echo "${v:-0}"
}

flushall() {
    local out
    check_alive "$1"
    out="$(rcli "$1" FLUSHALL 2>&1 || true)"
    [[ "$out" == OK ]] || die "FLUSHALL on $1 failed: $out"
}

start_server redis "${server_pin[@]}" "$REDIS_BIN" --port "${PORT[redis]}" --bind "$HOST" --save "" \
    --appendonly no --daemonize no --dir "$WORK/redis" "${redis_extra[@]}"
start_server node "${server_pin[@]}" "$NODE_BIN" --port "${PORT[node]}" --bind "$HOST" --save "" \
    --dir "$WORK/node" "${node_extra[@]}"
wait_ready redis
wait_ready node
log "redis-server on port ${PORT[redis]} (pid ${PID[redis]}), node on port ${PORT[node]} (pid ${PID[node]}); work dir $WORK"

git_rev="$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)"
if [[ -n "$(git -C "$ROOT" status --porcelain --untracked-files=no 2>/dev/null || true)" ]]; then
    git_rev="$git_rev + uncommitted changes"
fi
{
    echo "date=$(date -u '+%Y-%m-%d %H:%M:%S')"
    echo "quick=$QUICK"
    echo "rounds=$ROUNDS"
    echo "pin=$PIN"
    echo "agg=$AGG"
    echo "clients=$CLIENTS"
    echo "n_p1=$N_P1"
    echo "n_p16=$N_P16"
    echo "node_bin=$NODE_BIN"
    echo "redis_bin=$(command -v "$REDIS_BIN")"
    echo "git_rev=$git_rev"
    echo "loadavg_start=$(cut -d' ' -f1-3 /proc/loadavg)"
} >"$RES/params.txt"

# ---- throughput / latency ---------------------------------------------------
# One redis-benchmark run. redis-benchmark exits 1 on the first error reply
# ("Error from server: ..."), but to be safe we also treat any unexpected
# output as an error: stdout must be pure CSV, stderr may only hold WARNING
# lines (e.g. "WARNING: Could not fetch server CONFIG"), which go to the
# report. redis-benchmark spins forever at 100% CPU if the server dies under
# it, hence both the server watch loop below and the `timeout` backstop.
run_bench() {  # run_bench SERVER PIPELINE N ROUND TEST
    local name="$1" p="$2" n="$3" round="$4" test="$5" base part rc bad start
    base="$RES/r$round-p$p-$name"
    part="$WORK/part"
    local cmd=("${bench_pin[@]}" redis-benchmark -h "$HOST" -p "${PORT[$name]}" -t "$test"
        -c "$CLIENTS" -n "$n" -P "$p" --csv)
    record "${cmd[@]}"
    flushall "$name"
    start=$SECONDS
    poll_before="$(busy_poll_usec "$name")"
    cpu_before="$(server_cpu_ns "$name")"
    rc=0
    timeout "$BENCH_TIMEOUT" "${cmd[@]}" >"$part.csv" 2>"$part.err" &
    BENCH_PID=$!
    # Watch the server while the benchmark runs: if it dies, stop the
    # (otherwise spinning) benchmark now rather than after BENCH_TIMEOUT.
    while kill -0 "$BENCH_PID" 2>/dev/null; do
        if ! kill -0 "${PID[$name]}" 2>/dev/null; then
            check_alive "$name"  # dies; cleanup stops the benchmark
        fi
        sleep 0.2
    done
    wait "$BENCH_PID" || rc=$?
    BENCH_PID=""
    check_alive "$name"
    cpu_after="$(server_cpu_ns "$name")"
    poll_after="$(busy_poll_usec "$name")"
    if [[ $rc -eq 124 ]]; then
        die "redis-benchmark -t $test against $name (P$p) timed out after ${BENCH_TIMEOUT}s"
    fi
    bad="$( (grep -v -E '^WARNING: ' "$part.err" || true; grep -v -E '^"' "$part.csv" || true) | head -n 20)"
    if [[ $rc -ne 0 || -n "$bad" ]]; then
        die "redis-benchmark -t $test against $name (P$p) reported errors (exit $rc):
$bad"
    fi
    grep -q -E '^"[^"]+","[0-9.]+"' "$part.csv" || die "redis-benchmark -t $test against $name (P$p) wrote no results"
    # One CSV per round, pipeline and server: the header once, then every test's rows.
    if [[ -s "$base.csv" ]]; then
        grep -v -E '^"test"' "$part.csv" >>"$base.csv" || true
    else
        cat "$part.csv" >"$base.csv"
    fi
    # Server CPU over the run (connection set-up included), per request: one -t test can
    # run several (lrange_100 also runs its LPUSH), each -n requests.
    rows="$(grep -c -E '^"[^"]+","[0-9.]+"' "$part.csv")"
    # (Polling time is wall time of idle turns; were the thread descheduled inside one, it
    # could exceed the CPU it stands for: never below 0.)
    cpu_ns=$((cpu_after - cpu_before - (poll_after - poll_before) * 1000))
    ((cpu_ns >= 0)) || cpu_ns=0
    echo "$test,$cpu_ns,$((n * rows))" >>"$RES/cpu-r$round-p$p-$name.txt"
    sed "s/^/$name: /" "$part.err" >>"$RES/warnings.txt"
    flushall "$name"  # do not leave the idle server holding memory
    log "round $round/$ROUNDS  -P $p  $test  $name  done in $((SECONDS - start))s"
}

# Interleave at the finest grain, one test at a time, so that drifts in
# machine load (other processes on a shared box) hit both servers alike:
# per round, per pipeline depth, per test, both servers back to back, the
# order alternating between rounds.
IFS=, read -r -a test_list <<<"$TESTS"
for round in $(seq "$ROUNDS"); do
    if ((round % 2 == 1)); then order=(redis node); else order=(node redis); fi
    for p in 1 16; do
        if [[ $p == 1 ]]; then n="$N_P1"; else n="$N_P16"; fi
        for test in "${test_list[@]}"; do
            for s in "${order[@]}"; do
                run_bench "$s" "$p" "$n" "$round" "$test"
            done
        done
    done
done

# ---- memory ------------------------------------------------------------------
info_field() {  # info_field SERVER FIELD -> value from INFO memory
    rcli "$1" INFO memory | tr -d '\r' | awk -F: -v f="$2" '$1 == f { print $2 }'
}

vmrss_kb() {
    awk '$1 == "VmRSS:" { print $2 }' "/proc/${PID[$1]}/status"
}

{
    echo "keys=$MEM_KEYS"
    echo "value_size=$VALUE_SIZE"
} >"$RES/memory.txt"

for s in redis node; do
    flushall "$s"
    empty="$(info_field "$s" used_memory)"
    [[ "$empty" =~ ^[0-9]+$ ]] || die "$s: INFO memory has no numeric used_memory (got '$empty')"
    echo "${s}_used_memory_empty=$empty" >>"$RES/memory.txt"

    log "loading $MEM_KEYS keys x $VALUE_SIZE B into $s"
    echo "python3 scripts/gen_resp_sets.py $MEM_KEYS $VALUE_SIZE | redis-cli -h $HOST -p ${PORT[$s]} --pipe" \
        >>"$RES/commands.txt"
    # --pipe ends with ECHO <random> to learn that the last reply arrived, and
    # prints "errors: E, replies: R"; it exits non-zero if E > 0.
    rc=0
    python3 "$SCRIPT_DIR/gen_resp_sets.py" "$MEM_KEYS" "$VALUE_SIZE" |
        timeout "$BENCH_TIMEOUT" redis-cli -h "$HOST" -p "${PORT[$s]}" --pipe \
            >"$WORK/pipe-$s.log" 2>&1 || rc=$?
    check_alive "$s"
    summary="$(grep -E '^errors: ' "$WORK/pipe-$s.log" || true)"
    if [[ $rc -ne 0 || "$summary" != "errors: 0, replies: $MEM_KEYS" ]]; then
        die "loading keys into $s with redis-cli --pipe (needs SET and ECHO) failed (exit $rc):
$(tail -n 5 "$WORK/pipe-$s.log")"
    fi
done

# Measure both only after both are loaded, so each has been idle the same way.
for s in redis node; do
    record redis-cli -h "$HOST" -p "${PORT[$s]}" DBSIZE
    record redis-cli -h "$HOST" -p "${PORT[$s]}" INFO memory
    dbsize="$(rcli "$s" DBSIZE | tr -d '\r')"
    [[ "$dbsize" == "$MEM_KEYS" ]] || die "$s: DBSIZE is '$dbsize', expected $MEM_KEYS"
    used="$(info_field "$s" used_memory)"
    [[ "$used" =~ ^[0-9]+$ ]] || die "$s: INFO memory has no numeric used_memory (got '$used')"
    {
        echo "${s}_dbsize=$dbsize"
        echo "${s}_used_memory=$used"
        echo "${s}_vmrss_kb=$(vmrss_kb "$s")"
    } >>"$RES/memory.txt"
done
echo "loadavg_end=$(cut -d' ' -f1-3 /proc/loadavg)" >>"$RES/params.txt"

# ---- report -------------------------------------------------------------------
python3 "$SCRIPT_DIR/bench_report.py" --results "$RES" --out "$OUT"
