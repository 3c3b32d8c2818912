#!/usr/bin/env python3
"""One replication measurement for scripts/bench-replication.sh: a redis-benchmark write load
against a primary that has one replica, with both offsets sampled while it runs.

Steps, each bounded by a timeout (a failure prints why and exits 1, never hangs):
  1. FLUSHALL on the primary, then wait until the replica's link is up and its applied offset
     (`slave_repl_offset`) has reached the primary's `master_repl_offset`.
  2. A sampler thread reads, every --interval seconds, the primary's offset, the replica's
     applied offset and the primary's offset again; the replica's lag in bytes is the mean of
     the two primary readings (the primary's offset at the moment the replica was read, to
     within one round trip) minus the replica's offset, floored at 0.
  3. redis-benchmark runs (under --bench-prefix, e.g. taskset) until it exits.
  4. Catch-up: the primary's offset right after the load is the target; the replica is polled
     as fast as a round trip allows until its applied offset reaches it.
Prints one JSON object: stream bytes and bytes/s over the load, redis-benchmark's rps, lag
percentiles over the samples taken during the load, and the catch-up time. Stdlib only
(bench_resp.py), so the sampler itself costs the servers one INFO per reading.

usage: bench_replication_run.py --primary PORT --replica PORT --test set -n N -P 16 -c 50
"""
import argparse
import json
import shlex
import signal
import subprocess
import sys
import threading
import time

from bench_resp import Conn

SYNC_TIMEOUT_S = 60.0      # a replica not in sync after this is a failure (full sync included)
CATCH_UP_TIMEOUT_S = 60.0  # a replica that has not applied the load after this is a failure
CATCH_UP_POLL_S = 0.001    # catch-up resolution; polling faster would steal the replica's CPU
BENCH_TIMEOUT_S = 900.0    # one redis-benchmark run
SAMPLES_MAX = 1_000_000    # 50 ms samples: far beyond any run; bounds memory


def primary_offset(c: Conn) -> int:
    return int(c.info("replication")["master_repl_offset"])


def replica_offset(c: Conn) -> int:
    """The replica's applied offset: the last stream byte it executed."""
    return int(c.info("replication").get("slave_repl_offset", -1))


def percentile(sorted_values, q: float):
    if not sorted_values:
        return 0
    i = min(len(sorted_values) - 1, max(0, round(q * (len(sorted_values) - 1))))
    return sorted_values[i]


def wait_in_sync(primary: Conn, replica: Conn) -> None:
    deadline = time.monotonic() + SYNC_TIMEOUT_S
    while True:
        r = replica.info("replication")
        p = primary_offset(primary)
        if r.get("master_link_status") == "up" and int(r.get("slave_repl_offset", -1)) >= p:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"replica not in sync after {SYNC_TIMEOUT_S:.0f} s: "
                               f"primary offset {p}, replica {r}")
        time.sleep(0.01)


def sampler(primary_port: int, replica_port: int, interval: float, stop: threading.Event,
            samples: list, errors: list) -> None:
    try:
        p, r = Conn(primary_port), Conn(replica_port)
        while not stop.is_set() and len(samples) < SAMPLES_MAX:
            t = time.monotonic()
            p1 = primary_offset(p)
            ro = replica_offset(r)
            p2 = primary_offset(p)
            samples.append((t, p1, ro, p2))
            stop.wait(max(0.0, interval - (time.monotonic() - t)))
    except Exception as e:  # reported by the main thread
        errors.append(repr(e))


def bench_rps(csv_text: str) -> float:
    """requests/s of the one test redis-benchmark --csv printed."""
    for line in csv_text.splitlines()[1:]:
        cells = [c.strip('"') for c in line.split('","')]
        if len(cells) >= 2:
            return float(cells[1])
    raise ValueError(f"no result in redis-benchmark output: {csv_text!r}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--primary", type=int, required=True)
    ap.add_argument("--replica", type=int, required=True)
    ap.add_argument("--test", required=True)
    ap.add_argument("-n", type=int, required=True)
    ap.add_argument("-P", type=int, default=16)
    ap.add_argument("-c", type=int, default=50)
    ap.add_argument("--interval", type=float, default=0.05)
    ap.add_argument("--bench-prefix", default="", help="e.g. 'taskset -c 0'")
    ap.add_argument("--label", default="")
    args = ap.parse_args()
    # TERM (from the script's trap, via timeout) unwinds: subprocess.run kills redis-benchmark.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    primary, replica = Conn(args.primary), Conn(args.replica)
    primary.call("FLUSHALL")
    wait_in_sync(primary, replica)

    samples, errors = [], []
    stop = threading.Event()
    th = threading.Thread(target=sampler, args=(args.primary, args.replica, args.interval,
                                                stop, samples, errors), daemon=True)
    start_offset = primary_offset(primary)
    th.start()
    cmd = shlex.split(args.bench_prefix) + [
        "redis-benchmark", "-h", "127.0.0.1", "-p", str(args.primary), "-t", args.test,
        "-n", str(args.n), "-P", str(args.P), "-c", str(args.c), "--csv"]
    t0 = time.monotonic()
    try:
        bench = subprocess.run(cmd, capture_output=True, text=True, timeout=BENCH_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        stop.set()
        print(f"bench_replication_run: redis-benchmark timed out: {shlex.join(cmd)}",
              file=sys.stderr)
        return 1
    t1 = time.monotonic()
    if bench.returncode != 0 or "error" in bench.stderr.lower():
        stop.set()
        print(f"bench_replication_run: {shlex.join(cmd)} failed:\n{bench.stderr}",
              file=sys.stderr)
        return 1
    target = primary_offset(primary)
    deadline = t1 + CATCH_UP_TIMEOUT_S
    while replica_offset(replica) < target:
        time.sleep(CATCH_UP_POLL_S)
        if time.monotonic() > deadline:
            stop.set()
            print(f"bench_replication_run: replica did not catch up to {target} within "
                  f"{CATCH_UP_TIMEOUT_S:.0f} s", file=sys.stderr)
            return 1
    caught_up = time.monotonic()
    stop.set()
    th.join(timeout=5)
    if errors:
        print(f"bench_replication_run: sampler failed: {errors[0]}", file=sys.stderr)
        return 1

    during = [max(0, (p1 + p2) // 2 - ro) for t, p1, ro, p2 in samples if t0 <= t <= t1]
    during.sort()
    stream_bytes = target - start_offset
    print(json.dumps({
        "label": args.label,
        "test": args.test.upper(),
        "n": args.n,
        "P": args.P,
        "clients": args.c,
        "rps": bench_rps(bench.stdout),
        "load_s": t1 - t0,
        "stream_bytes": stream_bytes,
        "bytes_per_s": stream_bytes / (t1 - t0),
        "samples": len(during),
        "lag_p50": percentile(during, 0.50),
        "lag_p99": percentile(during, 0.99),
        "lag_max": during[-1] if during else 0,
        "catch_up_ms": (caught_up - t1) * 1000.0,
        "command": shlex.join(cmd),
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
