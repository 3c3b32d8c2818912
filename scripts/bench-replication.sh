#!/usr/bin/env bash
# Standalone replication under a redis-benchmark write load (`operator bench replication`):
# stream bytes per second and the replica's lag, our node over `ofi:shm` (and `ofi:tcp` for
# reference) side by side with Debian's redis-server primary + replica (classic TCP
# replication) in the same run, and one client's SET latency with asynchronous and
# synchronous (`repl-sync-acks 1`) replication. Replaces the section between "<!-- BEGIN replication -->" and
# "<!-- END replication -->" in BENCHMARKS.md (appended at the end when missing). Not part of
# CI: run it by hand.
#
# Usage: scripts/bench-replication.sh   (`operator bench replication --help` for the flags)
#
# Env (defaults in brackets):
#   NODE_BIN, OPERATOR_BIN, PROFILE   as in bench-failover.sh
#   SETUPS         setups to run, space separated ["redis ofi:shm ofi:tcp"]
#   TESTS          redis-benchmark -t, comma separated [set,incr,lpush]
#   N              requests per test [1000000]
#   PIPELINE       redis-benchmark -P [16]
#   CLIENTS        redis-benchmark -c [50]
#   ROUNDS         rounds; cells are medians over rounds [3]
#   INTERVAL_MS    sampling interval [50]
#   LATENCY_REQUESTS  SETs of the one-client latency runs, async and sync replication; 0 skips [20000]
#   BACKLOG        repl-backlog-size of both primaries; "" = the servers' default [64mb]
#   REDIS_ARGS, NODE_ARGS   extra flags for both redis-servers / both nodes []
#   PRIMARY_CPU, REPLICA_CPU, BENCH_CPU   taskset CPU lists; "" = not pinned [1, 1, 0]
#   OUT            report [BENCHMARKS.md at the repo root]
#   KEEP_TMP=1     keep the work dir (logs)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/bench-common.sh"
need redis-server redis-benchmark
if [[ -n "${SETUPS+x}" ]]; then FLAGS+=(--setups "$(words_to_list "$SETUPS")"); fi
flag_from TESTS --tests
flag_from N -n
flag_from PIPELINE -P
flag_from CLIENTS -c
flag_from ROUNDS --rounds
flag_from INTERVAL_MS --interval-ms
flag_from LATENCY_REQUESTS --latency-requests
flag_from BACKLOG --backlog
flag_from REDIS_ARGS --redis-args
flag_from NODE_ARGS --node-args
flag_from PRIMARY_CPU --primary-cpu
flag_from REPLICA_CPU --replica-cpu
flag_from BENCH_CPU --bench-cpu
run_suite replication
