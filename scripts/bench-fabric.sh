#!/usr/bin/env bash
# The same node driven over TCP, ofi:shm and ofi:tcp by `operator bench` (`operator bench
# fabric`): throughput, p50, p99 and the node's CPU seconds per 100k requests, from its own CPU
# clock (INFO cpu), read just before the first request and after the last reply. Replaces the
# section between "<!-- BEGIN fabric -->" and "<!-- END fabric -->" in BENCHMARKS.md (appended
# at the end when missing). Not part of CI: run it by hand.
#
# Usage: scripts/bench-fabric.sh        (`operator bench fabric --help` for the flags)
#
# Env (defaults in brackets):
#   NODE_BIN, OPERATOR_BIN, PROFILE   as in bench-failover.sh
#   PROVIDERS      fabric providers, space separated ["ofi:shm ofi:tcp"]
#   TESTS          operator bench -t [set,get,incr,lpush,lpop,sadd,hset]
#   CLIENTS        operator bench -c [4]
#   N_P1, N_P16    requests per test at -P 1 and -P 16 [50000, 500000]
#   ROUNDS         interleaved rounds; cells are medians over rounds [5]
#   NODE_ARGS      extra node flags []
#   OUT            report [BENCHMARKS.md at the repo root]
#   KEEP_TMP=1     keep the work dir (node logs)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/bench-common.sh"
FLAGS+=(--profile "$PROFILE")
if [[ -n "${PROVIDERS+x}" ]]; then FLAGS+=(--providers "$(words_to_list "$PROVIDERS")"); fi
flag_from TESTS --tests
flag_from CLIENTS -c
flag_from N_P1 --n-p1
flag_from N_P16 --n-p16
flag_from ROUNDS --rounds
flag_from NODE_ARGS --node-args
run_suite fabric
