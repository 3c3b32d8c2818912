#!/usr/bin/env bash
# Run Redis 7.0.15's own test suite (tests/unit/*) against our node as an external server, and
# the same units against Debian's redis-server, each unit on a fresh server, and print a
# per-unit table of passed tests (markdown). Not part of scripts/test.sh: a full run takes
# tens of minutes.
#
# Usage: scripts/redis-suite.sh [options] [UNIT...]
#   UNIT               a unit name as the suite spells it (type/list, keyspace, ...);
#                      default: every unit in DEFAULT_UNITS below
#   --cluster-mode     servers run with cluster-enabled (all slots on the one node) and the
#                      suite runs with its --cluster-mode (one db, no cross-slot tests)
#   --singledb         the suite avoids SELECT (it uses db 9 otherwise, as Redis's CI does)
#   --tags TAGS        passed to the suite (e.g. "-needs:debug" skips the tests that call DEBUG,
#                      the suite's own switch for servers without it); both servers alike
#   --servers LIST     node,redis (default), node or redis
#   --out FILE         also write the table to FILE
#   --timeout SEC      per unit and server; a unit still running then counts as a hang [300]
#   --node-bin PATH    node binary [target/release/node if built, else target/debug/node]
#   --skiptest NAME    passed to the suite (a test name or regexp it skips; repeatable), e.g.
#                      for tests that need a command the node lacks (EVAL)
#   --reference FILE   take the redis-server columns from an earlier table (--out) instead of
#                      running redis-server again (its results do not change between runs)
#
# Env: SUITE_TARBALL [../shared/reference/redis-tests-7.0.15.tar.gz], SUITE_WORK (logs and the
# unpacked suite) [.work/redis-suite], NODE_PORT [21611], REDIS_PORT [21612], REDIS_BIN
# [redis-server]. Each unit's log stays in SUITE_WORK/logs/<server>-<unit>.log.
#
# Columns: passed = `[ok]` lines, failed = `[err]` lines; "abort" means the suite stopped the
# unit early (an `[exception]`, a server that died, or a non-zero exit without failures);
# "hang" means it hit --timeout.
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$SCRIPT_DIR/.." && pwd)"

DEFAULT_UNITS=(
    type/string type/incr type/list type/hash type/set type/zset keyspace expire multi pubsub
    pubsubshard scan info info-command protocol bitops hyperloglog geo sort dump introspection
    introspection-2 latency-monitor
    type/stream type/stream-cgroups scripting
    # units of features the node does not have yet
    functions acl tracking
)

cluster_mode=0
singledb=0
tags=""
servers="node,redis"
out=""
unit_timeout=300
node_bin=""
reference=""
skiptests=()
units=()
while [[ $# -gt 0 ]]; do
    case "$1" in
    --cluster-mode) cluster_mode=1 ;;
    --singledb) singledb=1 ;;
    --tags) tags="$2"; shift ;;
    --servers) servers="$2"; shift ;;
    --out) out="$2"; shift ;;
    --timeout) unit_timeout="$2"; shift ;;
    --node-bin) node_bin="$2"; shift ;;
    --skiptest) skiptests+=("$2"); shift ;;
    --reference) reference="$2"; servers="${servers/,redis/}"; shift ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "unknown option $1" >&2; exit 2 ;;
    *) units+=("$1") ;;
    esac
    shift
done
[[ ${#units[@]} -gt 0 ]] || units=("${DEFAULT_UNITS[@]}")

TARBALL="${SUITE_TARBALL:-$ROOT/../shared/reference/redis-tests-7.0.15.tar.gz}"
WORK="${SUITE_WORK:-$ROOT/.work/redis-suite}"
NODE_PORT="${NODE_PORT:-21611}"
REDIS_PORT="${REDIS_PORT:-21612}"
REDIS_BIN="${REDIS_BIN:-redis-server}"

if [[ -z "$node_bin" ]]; then
    if [[ -x "$ROOT/target/release/node" ]]; then
        node_bin="$ROOT/target/release/node"
    else
        node_bin="$ROOT/target/debug/node"
    fi
fi
if [[ ",$servers," == *",node,"* && ! -x "$node_bin" ]]; then
    echo "no node binary at $node_bin (cargo build --release -p node --bin node)" >&2
    exit 1
fi
for tool in tclsh redis-cli timeout; do
    command -v "$tool" >/dev/null || { echo "$tool missing (scripts/install-deps.sh)" >&2; exit 1; }
done
[[ -f "$TARBALL" ]] || { echo "suite tarball not found: $TARBALL" >&2; exit 1; }

# A fresh copy of the suite per run: units write into tests/tmp.
SUITE="$WORK/suite"
rm -rf "$SUITE" "$WORK/logs" "$WORK/servers"
mkdir -p "$SUITE" "$WORK/logs" "$WORK/servers"
tar -xzf "$TARBALL" -C "$SUITE"

server_pid=""
stop_server() {
    if [[ -n "$server_pid" ]]; then
        kill "$server_pid" 2>/dev/null || true
        # A server that ignores SIGTERM for 5 s is killed outright.
        for _ in $(seq 50); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$server_pid" 2>/dev/null || true
        wait "$server_pid" 2>/dev/null || true
        server_pid=""
    fi
}
trap stop_server EXIT INT TERM

# start_server KIND PORT DIR: a fresh server of KIND (node | redis) on PORT with its files in DIR.
start_server() {
    local kind="$1" port="$2" dir="$3"
    rm -rf "$dir"
    mkdir -p "$dir"
    local args=(--port "$port" --bind 127.0.0.1 --dir "$dir" --save "" --appendonly no)
    if [[ $cluster_mode == 1 ]]; then
        args+=(--cluster-enabled yes --cluster-config-file "$dir/nodes.conf")
    fi
    if [[ $kind == node ]]; then
        "$node_bin" "${args[@]}" 2>"$dir/server.log" >/dev/null &
    else
        # The suite's own server config enables DEBUG; some units call it unconditionally.
        "$REDIS_BIN" "${args[@]}" --enable-debug-command yes --logfile "$dir/server.log" >/dev/null 2>&1 &
    fi
    server_pid=$!
    for _ in $(seq 300); do
        if redis-cli -p "$port" PING 2>/dev/null | grep -q PONG; then break; fi
        kill -0 "$server_pid" 2>/dev/null || { echo "$kind did not start, see $dir/server.log" >&2; return 1; }
        sleep 0.1
    done
    if [[ $cluster_mode == 1 ]]; then
        redis-cli -p "$port" CLUSTER ADDSLOTSRANGE 0 16383 >/dev/null
        for _ in $(seq 100); do
            redis-cli -p "$port" CLUSTER INFO | grep -q 'cluster_state:ok' && break
            sleep 0.1
        done
    fi
}

# run_unit KIND PORT UNIT: runs UNIT on a fresh server of KIND and sets unit_passed,
# unit_failed and unit_status (done | hang | abort | no-start). Not run in a subshell, so that
# the EXIT trap can always stop the server it started.
run_unit() {
    local kind="$1" port="$2" unit="$3"
    local log="$WORK/logs/$kind-${unit//\//_}.log"
    local dir="$WORK/servers/$kind"
    if ! start_server "$kind" "$port" "$dir" >"$log" 2>&1; then
        stop_server
        unit_passed=0 unit_failed=0 unit_status=no-start
        return
    fi
    # --baseport: where the suite's own test server listens (baseport - 32 and up), away from
    # that of a run against the other server's port.
    local suite_args=(--host 127.0.0.1 --port "$port" --baseport $((port + 1000))
        --single "unit/$unit" --timeout "$unit_timeout")
    [[ $singledb == 1 ]] && suite_args+=(--singledb)
    [[ -n "$tags" ]] && suite_args+=(--tags "$tags")
    [[ $cluster_mode == 1 ]] && suite_args+=(--cluster-mode)
    local skip
    for skip in ${skiptests[@]+"${skiptests[@]}"}; do suite_args+=(--skiptest "$skip"); done
    local rc=0
    # TERM=dumb: the suite colours its output on xterm-like terminals only.
    (cd "$SUITE" && TERM=dumb timeout --kill-after=10 "$unit_timeout" ./runtest "${suite_args[@]}") \
        >>"$log" 2>&1 || rc=$?
    local alive=1
    kill -0 "$server_pid" 2>/dev/null || alive=0
    stop_server
    # The suite spawns its test client as a separate tclsh; a timeout leaves it orphaned.
    pkill_suite_clients "$port"
    local passed failed exceptions status
    passed=$(grep -c '^\[ok\]: ' "$log" || true)
    failed=$(grep -c '^\[err\]: ' "$log" || true)
    exceptions=$(grep -c '^\[exception\]: ' "$log" || true)
    if [[ $rc == 124 || $rc == 137 ]]; then
        status=hang
    elif [[ $alive == 0 ]]; then
        status=abort
    elif [[ $exceptions -gt 0 ]]; then
        status=abort
    elif [[ $rc != 0 && $failed == 0 ]]; then
        status=abort
    else
        status=done
    fi
    unit_passed=$passed unit_failed=$failed unit_status=$status
}

# Ends the suite's own client processes for this run's port, found by their exact argument list
# (never by a broad name): `tclsh tests/test_helper.tcl ... --port PORT ... --client N`.
pkill_suite_clients() {
    local port="$1" pid args
    for pid in $(pgrep -x tclsh8.6 2>/dev/null; pgrep -x tclsh 2>/dev/null); do
        args=$( (tr '\0' ' ' <"/proc/$pid/cmdline") 2>/dev/null || true)
        if [[ "$args" == *"tests/test_helper.tcl"*"--port $port "* ]]; then
            kill "$pid" 2>/dev/null || true
        fi
    done
}

mode="standalone"
[[ $cluster_mode == 1 ]] && mode="cluster mode"
[[ $singledb == 1 && $cluster_mode == 0 ]] && mode="standalone, --singledb"
[[ -n "$tags" ]] && mode="$mode, --tags $tags"
node_version=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)

table=$(mktemp)
{
    echo "Redis 7.0.15 test suite, $mode, $(date -u +%Y-%m-%d), node at $node_version ($(basename "$(dirname "$node_bin")") build), $("$REDIS_BIN" --version | sed 's/ sha=.*//'); per unit and server: a fresh server, ${unit_timeout} s limit."
    echo
    echo "| unit | node passed | node failed | redis-server passed | redis-server failed | ratio | node status |"
    echo "|---|---:|---:|---:|---:|---:|---|"
} >"$table"
cat "$table"

total_node=0 total_redis=0 total_node_failed=0 total_redis_failed=0
for unit in "${units[@]}"; do
    n_pass="-" n_fail="-" n_status="-" r_pass="-" r_fail="-" r_status="-"
    if [[ ",$servers," == *",node,"* ]]; then
        run_unit node "$NODE_PORT" "$unit"
        n_pass=$unit_passed n_fail=$unit_failed n_status=$unit_status
        total_node=$((total_node + n_pass))
        total_node_failed=$((total_node_failed + n_fail))
    fi
    if [[ ",$servers," == *",redis,"* ]]; then
        run_unit redis "$REDIS_PORT" "$unit"
        r_pass=$unit_passed r_fail=$unit_failed r_status=$unit_status
        total_redis=$((total_redis + r_pass))
        total_redis_failed=$((total_redis_failed + r_fail))
        # redis-server itself hanging or aborting would make the ratio meaningless: say so.
        [[ $r_status == done ]] || r_pass="$r_pass ($r_status)"
    elif [[ -n "$reference" ]]; then
        # Columns 4 and 5 of the unit's row in the earlier table.
        r_pass=$(awk -F' [|] ' -v u="$unit" '$1 == "| " u { print $4 }' "$reference")
        r_fail=$(awk -F' [|] ' -v u="$unit" '$1 == "| " u { print $5 }' "$reference")
        [[ -n "$r_pass" ]] || r_pass="-" r_fail="-"
        [[ $r_pass == "-" ]] || total_redis=$((total_redis + ${r_pass%% *}))
        [[ $r_fail == "-" ]] || total_redis_failed=$((total_redis_failed + r_fail))
    fi
    ratio="-"
    if [[ $n_pass != "-" && ${r_pass%% *} != "-" && ${r_pass%% *} -gt 0 ]]; then
        ratio=$(awk -v n="$n_pass" -v r="${r_pass%% *}" 'BEGIN { printf "%.0f%%", 100 * n / r }')
    fi
    row="| $unit | $n_pass | $n_fail | $r_pass | $r_fail | $ratio | $n_status |"
    echo "$row" | tee -a "$table"
done
ratio="-"
if [[ $total_redis -gt 0 && ",$servers," == *",node,"* ]]; then
    ratio=$(awk -v n="$total_node" -v r="$total_redis" 'BEGIN { printf "%.0f%%", 100 * n / r }')
fi
echo "| **total** | **$total_node** | $total_node_failed | **$total_redis** | $total_redis_failed | **$ratio** | |" | tee -a "$table"
if [[ -n "$out" ]]; then
    cp "$table" "$out"
fi
rm -f "$table"
echo "logs: $WORK/logs" >&2
