#!/usr/bin/env bash
# Runs the store: builds the node and operator (release) and starts a local cluster of three
# primaries on 127.0.0.1:7000-7002 whose cluster bus runs on a software fabric (libfabric's
# tcp provider), each also serving clients over that fabric on port+1000 and the admin gRPC API
# on port+2000 (127.0.0.1, token in .work/cluster/admin-token) and Prometheus metrics on
# port+3000 (127.0.0.1, GET /metrics). Ctrl-C stops them.
#
#   scripts/run.sh                       the local cluster (redis-cli -c -p 7000, redis-cli --cluster check 127.0.0.1:7000)
#   scripts/run.sh --standalone [opts]   one node on 127.0.0.1:6379 in the foreground; opts use
#                                        redis.conf names, e.g. --maxmemory 1gb
#
# Env: NODES (default 3), BASE_PORT (default 7000), FABRIC (default ofi:tcp; ofi:shm or verbs
# where present). Data and logs go to .work/cluster/PORT/.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cargo build --release -p node -p operator

if [[ "${1:-}" == "--standalone" ]]; then
    shift
    mkdir -p .work/data
    exec target/release/node --port 6379 --bind 127.0.0.1 --dir .work/data "$@"
fi

NODES="${NODES:-3}"
BASE_PORT="${BASE_PORT:-7000}"
FABRIC="${FABRIC:-ofi:tcp}"
# Every bus message carries an HMAC under this secret: a fresh random one per cluster, kept
# (0600) beside the nodes' data for adding nodes later. It reaches each node in a 0600
# config file, not on the command line, which every local user can read in /proc.
mkdir -p .work/cluster
SECRET_FILE=.work/cluster/secret
if [[ -n "${CLUSTER_SECRET:-}" ]]; then
    secret="$CLUSTER_SECRET"
else
    secret="$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')"
fi
(umask 077 && printf '%s\n' "$secret" >"$SECRET_FILE")
# The admin API's bearer token: `operator ... --admin 127.0.0.1:9000 --token-file .work/cluster/admin-token`.
ADMIN_TOKEN_FILE=.work/cluster/admin-token
(umask 077 && od -An -tx1 -N32 /dev/urandom | tr -d ' \n' >"$ADMIN_TOKEN_FILE")
admin_token="$(cat "$ADMIN_TOKEN_FILE")"
pids=()
stop() {
    kill "${pids[@]}" 2>/dev/null || true
    wait 2>/dev/null || true
}
trap stop EXIT INT TERM

addrs=()
for ((i = 0; i < NODES; i++)); do
    port=$((BASE_PORT + i))
    dir=".work/cluster/$port"
    rm -rf "$dir"
    mkdir -p "$dir"
    (umask 077 && printf 'cluster-secret %s\nadmin-token %s\n' "$secret" "$admin_token" >"$dir/node.conf")
    target/release/node "$dir/node.conf" --port "$port" --bind 127.0.0.1 --dir "$dir" --save "" \
        --cluster-enabled yes \
        --fabric-provider "$FABRIC" --rdma-port $((port + 1000)) --rdma-bind 127.0.0.1 \
        --admin-port $((port + 2000)) \
        --metrics-port $((port + 3000)) \
        2>"$dir/node.log" &
    pids+=($!)
    addrs+=("127.0.0.1:$port")
done
for a in "${addrs[@]}"; do
    until redis-cli -p "${a##*:}" PING >/dev/null 2>&1; do sleep 0.1; done
done
target/release/operator cluster create "${addrs[@]}"
target/release/operator cluster status "${addrs[0]}"
echo "cluster up: redis-cli -c -p $BASE_PORT; admin API: operator cluster show --admin 127.0.0.1:$((BASE_PORT + 2000)) --token-file $ADMIN_TOKEN_FILE; metrics: curl 127.0.0.1:$((BASE_PORT + 3000))/metrics; logs in .work/cluster/*/node.log; secret in $SECRET_FILE; Ctrl-C stops it"
wait
