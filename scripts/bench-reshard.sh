#!/usr/bin/env bash
# Slot migration (`operator bench reshard`, issue 17): three primaries, N keys of 100 bytes,
# every slot of the first primary moved to the second; on our node with CLUSTER
# MIGRATESLOTS, on Debian's redis-server with `redis-cli --cluster reshard
# --cluster-pipeline 1000`, one after the other in the same run. Reports both times, their
# ratio, our write pause per batch (p50/p99/max) and checks that every key reads back.
# Replaces the section between "<!-- BEGIN reshard -->" and "<!-- END reshard -->" in
# BENCHMARKS.md (appended at the end when missing). Not part of CI: run it by hand
# (tests/suite/bench_suites.rs runs it at a tiny scale).
#
# Usage: scripts/bench-reshard.sh      (`operator bench reshard --help` for the flags)
#
# Env (defaults in brackets):
#   NODE_BIN, OPERATOR_BIN, PROFILE   as in bench-failover.sh
#   KEYS           keys loaded before the move [1000000]
#   WRITERS        writers on the moving slots during the move [0]
#   MIGRATION_LINK what carries our node's migration data: fabric, tcp or auto [fabric]
#   SERVERS        server kinds, in order ["redis node"]
#   OUT            report [BENCHMARKS.md at the repo root]
#   KEEP_TMP=1     keep the work dir (server logs)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/bench-common.sh"
need redis-server redis-cli
if [[ -n "${SERVERS+x}" ]]; then FLAGS+=(--servers "$(words_to_list "$SERVERS")"); fi
flag_from KEYS --keys
flag_from WRITERS --writers
flag_from MIGRATION_LINK --migration-link
run_suite reshard
