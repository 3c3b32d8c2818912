#!/usr/bin/env bash
# Benchmark our `node` against Debian's `redis-server` (`operator bench vs-redis`), side by
# side in one run, on loopback, with the same redis-benchmark binary, and write BENCHMARKS.md
# (regenerated, except the sections the other suites own: fabric, replication, failover).
#
# Usage: scripts/bench-vs-redis.sh            (full run, takes a while)
#        QUICK=1 scripts/bench-vs-redis.sh    (smoke test, tiny N)
#        (`operator bench vs-redis --help` for the flags)
#
# Env (defaults in brackets; QUICK=1 changes the N defaults only):
#   NODE_BIN, OPERATOR_BIN, PROFILE   as in bench-failover.sh
#   NODE_ARGS      extra flags for node, e.g. "--io-threads 2" []
#   REDIS_BIN      reference server [redis-server]
#   REDIS_ARGS     extra flags for redis-server []
#   N_P1           requests per test at -P 1  [200000; QUICK: 2000]
#   N_P16          requests per test at -P 16 [2000000; QUICK: 20000]
#   CLIENTS        redis-benchmark -c [50]
#   TESTS          redis-benchmark -t, and eval (a script running one SET) [ping,set,get,incr,lpush,rpush,lpop,rpop,sadd,
#                  hset,spop,zadd,zpopmin,lrange_100,mset,eval]
#   ROUNDS         interleaved rounds [3]
#   PIN            1: pin each server to CPU 1 and redis-benchmark to CPU 0; 0: no pinning
#                  [1 if the machine has >= 2 CPUs]
#   AGG            per-test aggregation over rounds: median | best [median]
#   KEYSPACE       redis-benchmark -r over that many preloaded keys; writes only the
#                  `keyspace` section of the report, e.g. KEYSPACE=1000000 TESTS=set,get []
#   MEM_KEYS       keys loaded for the memory comparison [1000000; QUICK: 100000]
#   VALUE_SIZE     value bytes for the memory comparison [100]
#   BENCH_TIMEOUT  seconds before one redis-benchmark run is killed [1800; QUICK: 300]
#   OUT            report path [BENCHMARKS.md at the repo root]
#   SKIP_DEPS=1    do not run scripts/install-deps.sh (needs root)
#   KEEP_TMP=1     keep the work dir (server logs)
# Exit status is non-zero, with a message, if a server dies, a server does not become ready,
# or redis-benchmark reports any error.
set -euo pipefail
if [[ "${SKIP_DEPS:-0}" != 1 ]]; then
    "$(dirname "${BASH_SOURCE[0]}")/install-deps.sh"
fi
source "$(dirname "${BASH_SOURCE[0]}")/bench-common.sh"
need redis-benchmark taskset "${REDIS_BIN:-redis-server}"
if [[ "${QUICK:-0}" == 1 ]]; then FLAGS+=(--quick); fi
if [[ -n "${PIN+x}" ]]; then
    if [[ "$PIN" == 1 ]]; then FLAGS+=(--pin true); else FLAGS+=(--pin false); fi
fi
flag_from NODE_ARGS --node-args
flag_from REDIS_BIN --redis-bin
flag_from REDIS_ARGS --redis-args
flag_from N_P1 --n-p1
flag_from N_P16 --n-p16
flag_from CLIENTS -c
flag_from TESTS --tests
flag_from ROUNDS --rounds
flag_from AGG --agg
flag_from KEYSPACE --keyspace
flag_from MEM_KEYS --mem-keys
flag_from VALUE_SIZE --value-size
flag_from BENCH_TIMEOUT --bench-timeout
run_suite vs-redis
