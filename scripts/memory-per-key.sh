#!/usr/bin/env bash
# Memory per key, node against redis-server, side by side: loads exactly MEM_KEYS
# `SET key:<i> <VALUE_SIZE bytes>` into each fresh server through `redis-cli --pipe` and prints
# `used_memory` (INFO memory) and the process's VmRSS for both, empty and loaded. Memory does
# not depend on CPU load, so this is repeatable on a busy machine (unlike throughput).
#
# Usage: scripts/memory-per-key.sh
# Env (defaults in brackets):
#   NODE_BIN     node binary [target/release/node, built if missing]
#   REDIS_BIN    reference server [redis-server]
#   MEM_KEYS     keys loaded [1000000]
#   VALUE_SIZE   value bytes [100] (with SHAPE=hash: each field's value)
#   SHAPE        string: `SET key:<i> value`; hash: `HSET key:<i> f0 value ... f<FIELDS-1> value`;
#                set: `SADD key:<i> m0-value ... m<FIELDS-1>-value` (small hashes and sets,
#                packed by both servers: Redis's listpack; sets of strings are hash tables in
#                redis-server 7.0); zset: `ZADD key:<i> 0 m0-value ... <FIELDS-1> m<FIELDS-1>-value`;
#                list: `RPUSH key:<i> m0-value ... m<FIELDS-1>-value` [string]
#   FIELDS       fields per hash, members per set, sorted set or list [10]
#   SETTLE_SECS  seconds both servers idle after the load before they are read [2]
#   KEEP_TMP=1   keep the work dir (server logs, the load file)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
NODE_BIN="${NODE_BIN:-$ROOT/target/release/node}"
REDIS_BIN="${REDIS_BIN:-redis-server}"
MEM_KEYS="${MEM_KEYS:-1000000}"
VALUE_SIZE="${VALUE_SIZE:-100}"
SETTLE_SECS="${SETTLE_SECS:-2}"
SHAPE="${SHAPE:-string}"
FIELDS="${FIELDS:-10}"
for tool in redis-cli python3 "$REDIS_BIN"; do
    command -v "$tool" >/dev/null || { echo "$0: $tool missing (scripts/install-deps.sh)" >&2; exit 1; }
done
if [[ ! -x "$NODE_BIN" ]]; then
    (cd "$ROOT" && cargo build --workspace --release --bin node)
fi

WORK="$(mktemp -d /tmp/memory-per-key.XXXXXX)"
PIDS=()
cleanup() {
    local pid
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    if [[ "${KEEP_TMP:-0}" == 1 ]]; then echo "work dir kept: $WORK" >&2; else rm -rf "$WORK"; fi
}
trap cleanup EXIT

# The same value for every key (as `operator bench vs-redis`): reproducible, stored per key.
python3 - "$WORK/load.resp" "$MEM_KEYS" "$VALUE_SIZE" "$SHAPE" "$FIELDS" <<'EOF'
import sys
path, keys, size, shape, fields = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], int(sys.argv[5])
value = (b"0123456789abcdef" * (size // 16 + 1))[:size]
if shape not in ("string", "hash", "set", "zset", "list"):
    sys.exit(f"SHAPE={shape}: string, hash, set, zset or list")
def request(*words):
    return b"*%d\r\n" % len(words) + b"".join(b"$%d\r\n%s\r\n" % (len(w), w) for w in words)
with open(path, "wb") as out:
    for i in range(keys):
        key = b"key:%d" % i
        if shape == "string":
            out.write(request(b"SET", key, value))
        elif shape == "hash":
            pairs = [w for f in range(fields) for w in (b"f%d" % f, value)]
            out.write(request(b"HSET", key, *pairs))
        elif shape == "set":
            out.write(request(b"SADD", key, *[b"m%d-%s" % (f, value) for f in range(fields)]))
        elif shape == "zset":
            pairs = [w for f in range(fields) for w in (b"%d" % f, b"m%d-%s" % (f, value))]
            out.write(request(b"ZADD", key, *pairs))
        else:
            out.write(request(b"RPUSH", key, *[b"m%d-%s" % (f, value) for f in range(fields)]))
EOF

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
wait_ready() {
    local port="$1" i
    for i in $(seq 1 200); do
        redis-cli -h 127.0.0.1 -p "$port" PING 2>/dev/null | grep -q PONG && return 0
        sleep 0.05
    done
    echo "$0: server on port $port did not answer PING" >&2
    exit 1
}
used_memory() {
    redis-cli -h 127.0.0.1 -p "$1" INFO memory | tr -d '\r' | sed -n 's/^used_memory://p'
}
vmrss_kb() {
    awk '/^VmRSS:/ {print $2}' "/proc/$1/status"
}

mkdir -p "$WORK/redis" "$WORK/node"
REDIS_PORT="$(free_port)"
"$REDIS_BIN" --port "$REDIS_PORT" --bind 127.0.0.1 --save '' --appendonly no \
    --daemonize no --dir "$WORK/redis" >"$WORK/redis.log" 2>&1 &
PIDS+=($!)
REDIS_PID=$!
NODE_PORT="$(free_port)"
"$NODE_BIN" --port "$NODE_PORT" --bind 127.0.0.1 --save '' --dir "$WORK/node" \
    >"$WORK/node.log" 2>&1 &
PIDS+=($!)
NODE_PID=$!
wait_ready "$REDIS_PORT"
wait_ready "$NODE_PORT"

declare -A EMPTY_USED EMPTY_RSS USED RSS DBSIZE
for name in redis node; do
    port_var="${name^^}_PORT"
    pid_var="${name^^}_PID"
    EMPTY_USED[$name]="$(used_memory "${!port_var}")"
    EMPTY_RSS[$name]="$(vmrss_kb "${!pid_var}")"
done
for name in redis node; do
    port_var="${name^^}_PORT"
    out="$(redis-cli -h 127.0.0.1 -p "${!port_var}" --pipe <"$WORK/load.resp")"
    grep -q 'errors: 0,' <<<"$out" || { echo "$0: load into $name failed: $out" >&2; exit 1; }
done
sleep "$SETTLE_SECS"
for name in redis node; do
    port_var="${name^^}_PORT"
    pid_var="${name^^}_PID"
    DBSIZE[$name]="$(redis-cli -h 127.0.0.1 -p "${!port_var}" DBSIZE)"
    USED[$name]="$(used_memory "${!port_var}")"
    RSS[$name]="$(vmrss_kb "${!pid_var}")"
    [[ "${DBSIZE[$name]}" == "$MEM_KEYS" ]] || { echo "$0: $name DBSIZE ${DBSIZE[$name]}" >&2; exit 1; }
done

# Where the node's resident bytes beyond its allocations are (jemalloc's totals).
redis-cli -h 127.0.0.1 -p "$NODE_PORT" MEMORY MALLOC-STATS | grep -v '^___\|^---' | sed 's/^/node jemalloc: /'
python3 - "$MEM_KEYS" "$VALUE_SIZE" "$SHAPE" "$FIELDS" \
    "${EMPTY_USED[redis]}" "${USED[redis]}" "${EMPTY_RSS[redis]}" "${RSS[redis]}" \
    "${EMPTY_USED[node]}" "${USED[node]}" "${EMPTY_RSS[node]}" "${RSS[node]}" <<'EOF'
import sys
keys, size, shape, fields = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
r_eu, r_u, r_er, r_r, n_eu, n_u, n_er, n_r = map(int, sys.argv[5:])
mib = lambda b: f"{b / 2**20:.1f} MiB"
what = {"string": f"{size} B values", "hash": f"hashes of {fields} fields of {size} B values",
        "set": f"sets of {fields} members of {size + 3} B",
        "zset": f"sorted sets of {fields} members of {size + 3} B",
        "list": f"lists of {fields} elements of {size + 3} B"}[shape]
print(f"{keys} keys x {what}, loaded by redis-cli --pipe")
print(f"| figure | redis | node | node/redis |")
print(f"| --- | ---: | ---: | ---: |")
print(f"| used_memory, empty | {mib(r_eu)} | {mib(n_eu)} | |")
print(f"| used_memory, loaded | {mib(r_u)} | {mib(n_u)} | {n_u / r_u:.2f} |")
print(f"| used_memory per key, minus empty | {(r_u - r_eu) / keys:.1f} B | {(n_u - n_eu) / keys:.1f} B | {(n_u - n_eu) / (r_u - r_eu):.2f} |")
print(f"| VmRSS, empty | {mib(r_er * 1024)} | {mib(n_er * 1024)} | |")
print(f"| VmRSS, loaded | {mib(r_r * 1024)} | {mib(n_r * 1024)} | {n_r / r_r:.2f} |")
print(f"| VmRSS per key, minus empty | {(r_r - r_er) * 1024 / keys:.1f} B | {(n_r - n_er) * 1024 / keys:.1f} B | {(n_r - n_er) / (r_r - r_er):.2f} |")
EOF
