#!/usr/bin/env python3
"""Turn the raw results of scripts/bench-vs-redis.sh into tables.

Reads a results directory written by bench-vs-redis.sh:
  params.txt                  key=value lines (run parameters)
  r<round>-p<P>-<server>.csv  redis-benchmark --csv output, server in {redis,node}
  cpu-r<round>-p<P>-<server>.txt  test,server CPU ns,requests per redis-benchmark run
                              (optional: older result dirs have none)
  memory.txt                  key=value lines (used_memory, RSS, DBSIZE per server)
  commands.txt                the exact commands run, one per line (deduplicated here)
  warnings.txt                optional: non-fatal warnings (e.g. redis-benchmark WARNING lines)
Prints plain-text tables to stdout and writes the whole Markdown report to --out, keeping the
existing sections other scripts own (bench_sections.OWNED: between "<!-- BEGIN name -->" and
"<!-- END name -->", written by scripts/bench-fabric.sh, bench-replication.sh and
bench-failover.sh) verbatim at the end.

redis-benchmark 7.0 --csv columns (checked against redis-benchmark 7.0.15):
  "test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms",
  "p99_latency_ms","max_latency_ms"
Stdlib only.
"""
import argparse
import csv
import math
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

import bench_sections

SERVERS = ("redis", "node")
CSV_NAME = re.compile(r"^r(\d+)-p(\d+)-(redis|node)\.csv$")
CPU_NAME = re.compile(r"^cpu-r(\d+)-p(\d+)-(redis|node)\.txt$")


def read_cpu(res: Path) -> dict:
    """cpu[(server, P)][test] = [server CPU ns per request, one per round]."""
    cpu = {}
    for path in sorted(res.iterdir()):
        m = CPU_NAME.match(path.name)
        if not m:
            continue
        _, p, server = m.groups()
        for line in path.read_text().splitlines():
            parts = line.split(",")
            if len(parts) != 3 or not all(x.isdigit() for x in parts[1:]) or parts[2] == "0":
                fail(f"{path}: bad line {line!r} (want test,cpu_ns,requests)")
            cpu.setdefault((server, int(p)), {}).setdefault(parts[0], []).append(
                int(parts[1]) / int(parts[2]))
    return cpu


def fail(msg: str) -> None:
    print(f"bench_report: error: {msg}", file=sys.stderr)
    sys.exit(1)


def owned_sections(path: Path) -> list:
    """The sections other benchmark scripts own in an existing report, markers included, kept
    verbatim when this script rewrites the rest of the file."""
    if not path.exists():
        return []
    text = path.read_text()
    return [sec for sec in (bench_sections.section(text, n) for n in bench_sections.OWNED) if sec]


def read_kv(path: Path) -> dict:
    out = {}
    if not path.exists():
        return out
    for line in path.read_text().splitlines():
        if "=" in line:
            k, v = line.split("=", 1)
            out[k.strip()] = v.strip()
    return out


def read_csv(path: Path) -> list:
    """Rows of one redis-benchmark --csv file as (test, rps, p50_ms)."""
    with path.open(newline="") as f:
        rows = list(csv.reader(f))
    if not rows:
        fail(f"{path.name}: empty CSV")
    header = rows[0]
    for col in ("test", "rps", "p50_latency_ms"):
        if col not in header:
            fail(f"{path.name}: unexpected CSV header {header} (no {col!r}); "
                 "has redis-benchmark's --csv format changed?")
    it, ir, ip = header.index("test"), header.index("rps"), header.index("p50_latency_ms")
    out = []
    for row in rows[1:]:
        if not row:
            continue
        try:
            out.append((row[it], float(row[ir]), float(row[ip])))
        except (IndexError, ValueError):
            fail(f"{path.name}: malformed row {row}")
    if not out:
        fail(f"{path.name}: no result rows")
    return out


def run(cmd: str) -> str:
    """Output of a shell command for the machine description ('' if it fails)."""
    try:
        r = subprocess.run(cmd, shell=True, capture_output=True, text=True, timeout=20)
        return r.stdout.rstrip()  # keep leading spaces: free -g aligns its header with them
    except (OSError, subprocess.SubprocessError):
        return ""


def ratio(node: float, redis: float):
    return node / redis if redis > 0 else None


def fmt_ratio(r) -> str:
    return "n/a" if r is None else f"{r:.2f}"


def fmt_rps(x: float) -> str:
    return f"{x:,.0f}"


def fmt_ms(x: float) -> str:
    return f"{x:.3f}"


def fmt_bytes(n: int) -> str:
    return f"{n / (1024 * 1024):,.1f} MiB"


def geomean(xs):
    xs = [x for x in xs if x is not None and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def geomean_row(gm: dict, pipelines) -> list:
    """The last row of a (redis, node, node/redis) per pipeline table."""
    row = ["geometric mean"]
    for p in pipelines:
        row += ["", "", fmt_ratio(gm[p])]
    return row


def text_table(headers, rows) -> str:
    widths = [max(len(str(c)) for c in col) for col in zip(headers, *rows)]
    lines = []
    for i, r in enumerate([headers] + rows):
        cells = [str(c).ljust(w) if j == 0 else str(c).rjust(w)
                 for j, (c, w) in enumerate(zip(r, widths))]
        lines.append("  ".join(cells).rstrip())
        if i == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def md_table(headers, rows) -> str:
    align = ["---"] + ["---:"] * (len(headers) - 1)
    lines = ["| " + " | ".join(headers) + " |", "| " + " | ".join(align) + " |"]
    lines += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", required=True, type=Path)
    ap.add_argument("--out", required=True, type=Path)
    args = ap.parse_args()
    res = args.results
    params = read_kv(res / "params.txt")
    agg = params.get("agg", "median")
    if agg not in ("median", "best"):
        fail(f"unknown aggregation {agg!r}")

    # data[(server, P)][test] = ([rps...], [p50...]); test order as first seen.
    data, order, pipelines = {}, [], set()
    files = sorted(p for p in res.iterdir() if CSV_NAME.match(p.name))
    if not files:
        fail(f"no r<round>-p<P>-<server>.csv files in {res}")
    for path in files:
        _, p, server = CSV_NAME.match(path.name).groups()
        p = int(p)
        pipelines.add(p)
        for test, rps, p50 in read_csv(path):
            if test not in order:
                order.append(test)
            d = data.setdefault((server, p), {}).setdefault(test, ([], []))
            d[0].append(rps)
            d[1].append(p50)
    pipelines = sorted(pipelines)

    # Both servers must have answered every test at every pipeline depth,
    # otherwise the ratio table would silently compare different things.
    for p in pipelines:
        for s in SERVERS:
            missing = [t for t in order if t not in data.get((s, p), {})]
            if missing:
                fail(f"{s} P{p}: no result for {', '.join(missing)}")

    # Median of the rounds, or the best round (max rps, min p50) per test.
    def pick(vals, higher_better):
        if agg == "median":
            return statistics.median(vals)
        return max(vals) if higher_better else min(vals)

    rps = {k: {t: pick(v[0], True) for t, v in d.items()} for k, d in data.items()}
    p50 = {k: {t: pick(v[1], False) for t, v in d.items()} for k, d in data.items()}

    thr_headers, lat_headers = ["test"], ["test"]
    for p in pipelines:
        thr_headers += [f"redis P{p}", f"node P{p}", f"node/redis P{p}"]
        lat_headers += [f"redis P{p}", f"node P{p}", f"node/redis P{p}"]
    thr_rows, lat_rows, ratios = [], [], {p: [] for p in pipelines}
    for t in order:
        tr, lr = [t], [t]
        for p in pipelines:
            r_, n_ = rps[("redis", p)][t], rps[("node", p)][t]
            q = ratio(n_, r_)
            ratios[p].append(q)
            tr += [fmt_rps(r_), fmt_rps(n_), fmt_ratio(q)]
            rl, nl = p50[("redis", p)][t], p50[("node", p)][t]
            lr += [fmt_ms(rl), fmt_ms(nl), fmt_ratio(ratio(nl, rl))]
        thr_rows.append(tr)
        lat_rows.append(lr)
    gm = {p: geomean(ratios[p]) for p in pipelines}
    thr_rows.append(geomean_row(gm, pipelines))

    # Server CPU per request, per -t test (lrange_100's includes its LPUSH).
    cpu_raw = read_cpu(res)
    cpu_headers, cpu_rows, cpu_gm = ["test (-t)"], [], {}
    if cpu_raw:
        cpu_tests = []
        for d in cpu_raw.values():
            cpu_tests += [t for t in d if t not in cpu_tests]
        for p in pipelines:
            cpu_headers += [f"redis P{p}", f"node P{p}", f"node/redis P{p}"]
        cpu_ratios = {p: [] for p in pipelines}
        for t in cpu_tests:
            row = [t]
            for p in pipelines:
                r_ = cpu_raw.get(("redis", p), {}).get(t)
                n_ = cpu_raw.get(("node", p), {}).get(t)
                if not r_ or not n_:
                    fail(f"P{p} {t}: server CPU missing for redis or node")
                r_, n_ = statistics.median(r_), statistics.median(n_)
                cpu_ratios[p].append(ratio(n_, r_))
                row += [f"{r_:,.0f}", f"{n_:,.0f}", fmt_ratio(ratio(n_, r_))]
            cpu_rows.append(row)
        cpu_gm = {p: geomean(cpu_ratios[p]) for p in pipelines}
        cpu_rows.append(geomean_row(cpu_gm, pipelines))

    # Memory.
    mem = read_kv(res / "memory.txt")
    mem_rows, mem_ratio = [], None
    if mem:
        def num(key):
            v = mem.get(key, "")
            return int(v) if v.isdigit() else None

        keys = int(mem.get("keys", "0"))
        um = {s: num(f"{s}_used_memory") for s in SERVERS}
        base = {s: num(f"{s}_used_memory_empty") for s in SERVERS}
        rss = {s: num(f"{s}_vmrss_kb") for s in SERVERS}
        dbs = {s: mem.get(f"{s}_dbsize", "?") for s in SERVERS}
        if um["redis"] and um["node"]:
            mem_ratio = um["node"] / um["redis"]

        def row(label, vals, fmt):
            cells = [fmt(vals[s]) if vals[s] is not None else "n/a" for s in SERVERS]
            q = (vals["node"] / vals["redis"]
                 if vals["redis"] and vals["node"] is not None else None)
            return [label] + cells + [fmt_ratio(q)]

        per_key = {s: ((um[s] - base[s]) / keys
                       if um[s] is not None and base[s] is not None and keys else None)
                   for s in SERVERS}
        rss_b = {s: rss[s] * 1024 if rss[s] is not None else None for s in SERVERS}
        mem_rows = [
            ["DBSIZE"] + [dbs[s] for s in SERVERS] + [""],
            row("used_memory (INFO memory)", um, fmt_bytes),
            row("used_memory per key, minus empty server", per_key, lambda x: f"{x:,.1f} B"),
            row("VmRSS of the process (/proc/PID/status)", rss_b, fmt_bytes),
        ]
    mem_headers = ["memory", "redis", "node", "node/redis"]

    # ---- stdout ----
    print()
    print(f"Throughput, requests/s ({agg} of {params.get('rounds', '?')} round(s); "
          "node/redis > 1 means node is faster)")
    print(text_table(thr_headers, thr_rows))
    print()
    print(f"Latency p50, ms ({agg} of {params.get('rounds', '?')} round(s); "
          "node/redis < 1 means node is faster)")
    print(text_table(lat_headers, lat_rows))
    if cpu_rows:
        print()
        print("Server CPU per request, ns (median over rounds; node/redis < 1 means node "
              "uses less)")
        print(text_table(cpu_headers, cpu_rows))
    if mem_rows:
        print()
        print(f"Memory after loading {int(mem.get('keys', 0)):,} keys with "
              f"{mem.get('value_size', '?')}-byte values")
        print(text_table(mem_headers, mem_rows))
    print()

    # ---- Markdown ----
    nproc = run("nproc") or "?"
    quick = params.get("quick") == "1"
    commands = []
    for line in (res / "commands.txt").read_text().splitlines() if (res / "commands.txt").exists() else []:
        if line and line not in commands:
            commands.append(line)
    warnings = []
    if (res / "warnings.txt").exists():
        for line in (res / "warnings.txt").read_text().splitlines():
            if line and line not in warnings:
                warnings.append(line)
    machine = "\n".join([
        "$ nproc", nproc,
        "$ lscpu | grep 'Model name'", run("lscpu | grep 'Model name'"),
        "$ free -g", run("free -g"),
        "$ uname -r", run("uname -r"),
        f"$ {params.get('redis_bin', 'redis-server')} --version",
        run(f"{params.get('redis_bin', 'redis-server')} --version"),
        "$ redis-benchmark --version", run("redis-benchmark --version"),
    ])

    md = ["# Benchmarks", ""]
    md.append("Our `node` against Debian's `redis-server`, side by side in one run on loopback, "
              "both driven by the same `redis-benchmark` binary. Generated by "
              "`scripts/bench-vs-redis.sh`, which rewrites this whole file except the sections "
              "at the end that other scripts own (`scripts/bench-fabric.sh`, "
              "`scripts/bench-replication.sh`, `scripts/bench-failover.sh`); do not edit by "
              "hand.")
    md.append("")
    if quick:
        md += ["> **QUICK smoke run (QUICK=1): tiny request counts, the numbers mean nothing.** "
               "Run without QUICK for real results.", ""]
    md += [
        f"> **Read these as ratios measured in one run, not as absolute numbers.** The machine "
        f"is a shared {nproc}-core box: `redis-benchmark` itself competes with the server under "
        f"test for the same {nproc} cores, and other work on the machine (e.g. builds) adds "
        f"noise. Ratios are node/redis: for throughput > 1 means node is faster, for latency "
        f"< 1 means node is faster.",
        "",
        "## Summary",
        "",
        f"- Date (UTC): {params.get('date', '?')}",
    ]
    for p in pipelines:
        md.append(f"- Throughput at `-P {p}`, geometric mean of node/redis over all tests: "
                  f"**{fmt_ratio(gm[p])}**")
    for p in cpu_gm:
        md.append(f"- Server CPU per request at `-P {p}`, geometric mean of node/redis: "
                  f"**{fmt_ratio(cpu_gm[p])}** (< 1: node uses less)")
    if mem_rows:
        md.append(f"- Memory, `used_memory` with {int(mem.get('keys', 0)):,} keys x "
                  f"{mem.get('value_size', '?')} B values, node/redis: **{fmt_ratio(mem_ratio)}**")
    md += [
        "",
        "## Machine",
        "",
        "```",
        machine,
        "```",
        "",
        f"- node binary: `{params.get('node_bin', '?')}` (git {params.get('git_rev', '?')})",
        f"- Load average (1/5/15 min) at start: {params.get('loadavg_start', '?')}; "
        f"at end: {params.get('loadavg_end', '?')}",
        "",
        "## Method",
        "",
        "- Both servers run at once, each on its own loopback port, persistence off, in a temp "
        "dir; node uses its own thread count, redis its defaults. "
        + ("Both servers are pinned to CPU 1 and `redis-benchmark` to CPU 0 (`taskset`), so "
           "client and server never share a core and both servers get the same placement."
           if params.get("pin") == "1" else "Nothing is pinned to a core."),
        f"- `redis-benchmark` with {params.get('clients', '?')} clients; "
        f"`-n {params.get('n_p1', '?')}` at `-P 1` and `-n {params.get('n_p16', '?')}` at "
        "`-P 16`.",
        f"- Runs are interleaved one test at a time so drifts in machine load hit both servers "
        f"alike: per round, per pipeline depth, per test, redis then node (even rounds: node "
        f"then redis). "
        f"{params.get('rounds', '?')} round(s); each cell is the **{agg}** over rounds"
        + (" (max rps, min p50)." if agg == "best" else " (rps and p50 taken separately)."),
        "- `FLUSHALL` on the server before and after each of its runs.",
        "- Server CPU per request: the server process's CPU time (sum of its threads' "
        "`/proc/PID/task/TID/schedstat` run time) over one `redis-benchmark` run, divided by the "
        "requests it sent; it includes accepting the 50 connections. The node's time spent "
        "busy polling with nothing to read (INFO stats `io_busy_poll_usec`, see README) is "
        "taken out: it is waiting, not work. Unlike requests/s it does "
        "not depend on whether `redis-benchmark`, which has one core of its own, is the "
        "bottleneck (it often is: checked with `perf stat`, its CPU time about equals the "
        "run's wall time at `-P 16` GET).",
        f"- Memory: `FLUSHALL`, read `used_memory` of the empty server, then load exactly "
        f"{int(mem.get('keys', 0)):,} `SET key:<i> <{mem.get('value_size', '?')} bytes>` with "
        "`redis-cli --pipe`, check `DBSIZE`, read `INFO memory` and the process's VmRSS.",
        "",
        "## Commands",
        "",
        "```sh",
        *commands,
        "```",
        "",
        "## Throughput (requests/s)",
        "",
        md_table(thr_headers, thr_rows),
        "",
        "## Latency p50 (ms)",
        "",
        md_table(lat_headers, lat_rows),
        "",
    ]
    if cpu_rows:
        md += ["## Server CPU per request (ns)", "", md_table(cpu_headers, cpu_rows), ""]
    if mem_rows:
        md += ["## Memory", "", md_table(mem_headers, mem_rows), ""]
    if warnings:
        md += ["## Warnings", "", "```", *warnings, "```", ""]
    for owned in owned_sections(args.out):
        md += [owned, ""]
    tmp = args.out.with_suffix(args.out.suffix + ".tmp")
    tmp.write_text("\n".join(md))
    os.replace(tmp, args.out)  # never leave a half-written report
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
