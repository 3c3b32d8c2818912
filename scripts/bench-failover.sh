#!/usr/bin/env bash
# Failover under writes (`operator bench failover`): a 6-node cluster (3 primaries with one
# replica each) made by `redis-cli --cluster create --cluster-replicas 1`, continuous writes,
# a primary killed with kill -9 ITERATIONS times; the time until a write to a slot of the
# killed primary succeeds on the new primary, and acknowledged writes lost. Debian's
# redis-server and our node at the same cluster-node-timeout in the same run. Replaces the
# section between "<!-- BEGIN failover -->" and "<!-- END failover -->" in BENCHMARKS.md
# (appended at the end when missing). Not part of CI: run it by hand.
#
# Usage: scripts/bench-failover.sh      (`operator bench failover --help` for the flags)
#
# Env (defaults in brackets):
#   NODE_BIN, OPERATOR_BIN   binaries [target/$PROFILE/...; built when unset]
#   PROFILE        cargo profile to build [release]
#   SERVERS        server kinds, in order ["redis node"]
#   TIMEOUTS       cluster-node-timeout values in ms ["1000 200"]
#   ITERATIONS     kills per server and timeout [20]
#   FABRIC         our node's fabric provider (cluster bus and replication) [ofi:tcp]
#   NODE_ARGS      extra node flags ["--repl-sync-acks 1": a write is answered once a
#                  replica acknowledged it]
#   WAIT_MS        redis-server: `WAIT 1 WAIT_MS` after each acknowledged SET [100]
#   WRITE_RATE     writes per second of the writer, 0 = unpaced [2000]
#   OUT            report [BENCHMARKS.md at the repo root]
#   KEEP_TMP=1     keep the work dir (server logs)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/bench-common.sh"
need redis-server redis-cli
if [[ -n "${SERVERS+x}" ]]; then FLAGS+=(--servers "$(words_to_list "$SERVERS")"); fi
if [[ -n "${TIMEOUTS+x}" ]]; then FLAGS+=(--timeouts "$(words_to_list "$TIMEOUTS")"); fi
flag_from ITERATIONS --iterations
flag_from FABRIC --fabric
flag_from NODE_ARGS --node-args
flag_from WAIT_MS --wait-ms
flag_from WRITE_RATE --write-rate
run_suite failover
