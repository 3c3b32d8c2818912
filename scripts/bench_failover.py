#!/usr/bin/env python3
"""Failover under writes, for scripts/bench-failover.sh: one server kind, one
cluster-node-timeout, ITERATIONS kills.

A 6-node cluster (3 primaries, 1 replica each, by `redis-cli --cluster create
--cluster-replicas 1`) takes continuous writes from a writer thread: unique keys `fo:<seq>`
with unique values, routed by slot, one at a time; a write counts as acknowledged when SET
answers OK, and for redis-server (which has no synchronous replication) it is followed by
`WAIT 1 <wait-ms>`, whose answer is recorded too. Then, ITERATIONS times:
  1. kill -9 the primary of the next shard (shards taken in turn);
  2. probe its replica every PROBE_INTERVAL: CLUSTER NODES (promoted when it flags itself
     `myself,master`) and a SET of a key in one of the killed primary's slots; failover
     time = kill -> first OK to that SET (kill -> promotion is recorded too);
  3. as soon as the replica is promoted, restart the killed node (same port, dir and flags):
     it must rejoin as a replica. (Our node with `repl-sync-acks 1` answers no write until
     a replica acknowledged it, so there the failover time includes this rejoin; the
     promotion time is the figure to compare with redis-server's.) Probing goes on until the
     write succeeds;
  4. wait until the cluster is healthy: every node says cluster_state:ok and sees 3
     primaries with one replica each, none flagged fail, every replica's link up and its
     applied offset at its primary's;
  5. read back every key acknowledged since the previous check from its current owner and
     count the lost ones (missing or another value).
Every wait has a timeout; a step that times out ends the run with a line saying which step
and why (status "failed"), never a hang. At the end every acknowledged key of the run is read
back once more. Results: one JSON line per iteration and a final summary line on stdout.

usage: bench_failover.py --server redis|node --timeout-ms 1000 --iterations 20 --workdir DIR
                         [--node-bin PATH] [--fabric ofi:tcp] [--node-args '...']
"""
import argparse
import atexit
import json
import os
import random
import shlex
import signal
import subprocess
import sys
import threading
import time

from bench_resp import Conn, ReplyError

NODES = 6
SHARDS = 3
SLOTS = 16384
SHARD_FIRST_SLOTS = (0, 5461, 10923)  # where redis-cli --cluster create starts each shard
READY_TIMEOUT_S = 30.0           # a started server answers PING
CREATE_TIMEOUT_S = 120.0         # redis-cli --cluster create
HEALTH_TIMEOUT_S = 120.0         # healthy again after a restart (full sync included)
PROBE_INTERVAL_S = 0.005         # failover time resolution
PROBE_SOCKET_TIMEOUT_S = 1.0     # a probe write held longer than this counts as not yet
WRITE_SOCKET_TIMEOUT_S = 2.0     # a write held longer than this is not acknowledged
MAP_REFRESH_MIN_S = 0.1          # the writer refreshes its slot map at most this often
DOWN_RETRY_S = 0.05              # a node that refused a connection is skipped this long
VERIFY_BATCH = 500               # GETs per pipeline when reading keys back
IN_SYNC_SLACK = 64 * 1024         # replica offset read after its primary's, under writes
SETTLE_AFTER_HEALTHY_S = 0.5     # writes keep going this long before a check
WRITES_MAX = 5_000_000           # bound on recorded writes (memory)


def failover_timeout_s(node_timeout_ms: int) -> float:
    """Failure detection plus election take a few node timeouts; beyond this no failover."""
    return max(30.0, 30 * node_timeout_ms / 1000.0)


def crc16(data: bytes) -> int:
    """CRC-16/XMODEM (poly 0x1021, init 0), the hash Redis Cluster maps keys with."""
    crc = 0
    for byte in data:
        crc ^= byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else (crc << 1)
            crc &= 0xFFFF
    return crc


def key_slot(key: str) -> int:
    k = key.encode()
    start = k.find(b"{")
    if start >= 0:
        end = k.find(b"}", start + 1)
        if end > start + 1:
            k = k[start + 1:end]
    return crc16(k) % SLOTS


class Failure(Exception):
    """A step that did not happen in time or went wrong: ends the run, reported as is."""


def log(msg: str) -> None:
    print(f"bench_failover: {msg}", file=sys.stderr, flush=True)


def free_port(taken: set) -> int:
    """A port in 20000-29999 (its cluster bus port +10000 stays under 40000) that binds."""
    import socket
    for _ in range(500):
        port = random.randint(20000, 29999)
        if port in taken or port + 10000 in taken:
            continue
        ok = True
        for p in (port, port + 10000):
            s = socket.socket()
            try:
                s.bind(("127.0.0.1", p))
            except OSError:
                ok = False
            finally:
                s.close()
        if ok:
            taken.update((port, port + 10000))
            return port
    raise Failure("no free port pair in 20000-39999")


class Server:
    """One cluster member: its command line, its process, its log (appended over restarts)."""

    def __init__(self, args, port: int, dir_: str, kind: str, node_timeout_ms: int,
                 taken: set):
        self.port, self.dir, self.proc = port, dir_, None
        os.makedirs(dir_, exist_ok=True)
        if kind == "redis":
            self.argv = ["redis-server", "--port", str(port), "--bind", "127.0.0.1",
                         "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                         "--cluster-node-timeout", str(node_timeout_ms), "--save", "",
                         "--appendonly", "no", "--repl-diskless-sync-delay", "0",
                         "--daemonize", "no", "--dir", dir_]
        else:
            repl_port = free_port(taken)
            self.argv = [args.node_bin, "--port", str(port), "--bind", "127.0.0.1",
                         "--save", "", "--dir", dir_, "--cluster-enabled", "yes",
                         "--cluster-node-timeout", str(node_timeout_ms),
                         "--cluster-secret", "bench-failover",
                         "--fabric-provider", args.fabric, "--rdma-bind", "127.0.0.1",
                         "--repl-fabric-port", str(repl_port),
                         *shlex.split(args.node_args)]
        self.log_path = os.path.join(dir_, "server.log")
        names = {str(port): "$PORT", dir_: "$DIR"}
        if kind != "redis":
            names[str(repl_port)] = "$REPL_FABRIC_PORT"
            names[args.node_bin] = "node"
        # The command as the report shows it: this run's ports and paths by name.
        self.shown = " ".join(names.get(a, shlex.quote(a)) for a in self.argv)

    def start(self) -> None:
        with open(self.log_path, "ab") as logf:
            self.proc = subprocess.Popen(self.argv, stdout=logf, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL)
        register_pid(self.proc.pid)
        deadline = time.monotonic() + READY_TIMEOUT_S
        while True:
            try:
                Conn(self.port, timeout=1).call("PING")
                return
            except (OSError, ReplyError, ValueError):
                pass
            if self.proc.poll() is not None:
                raise Failure(f"server on port {self.port} exited at start "
                              f"(code {self.proc.returncode}): {self.log_tail()}")
            if time.monotonic() > deadline:
                raise Failure(f"server on port {self.port} not answering PING after "
                              f"{READY_TIMEOUT_S:.0f} s: {self.log_tail()}")
            time.sleep(0.05)

    def kill9(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=10)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)

    def log_tail(self, lines: int = 15) -> str:
        try:
            with open(self.log_path, errors="replace") as f:
                return "\n" + "".join(f.readlines()[-lines:])
        except OSError:
            return "(no log)"


SERVERS = []
PIDFILE = None


def register_pid(pid: int) -> None:
    """The wrapper script kills every pid in this file if we die without cleaning up."""
    if PIDFILE:
        with open(PIDFILE, "a") as f:
            f.write(f"{pid}\n")


def stop_all() -> None:
    for s in SERVERS:
        try:
            s.stop()
        except Exception:  # cleanup goes on for the others
            pass


def cluster_nodes(port: int) -> list:
    """CLUSTER NODES of the node on `port` as dicts: id, port, flags (set), master, slots."""
    out = []
    for line in Conn(port, timeout=2).call("CLUSTER", "NODES").splitlines():
        f = line.split()
        if len(f) < 8:
            continue
        addr = f[1].split("@")[0].split(",")[0]
        out.append({
            "id": f[0], "port": int(addr.rsplit(":", 1)[1]) if ":" in addr else 0,
            "flags": set(f[2].split(",")), "master": f[3], "link": f[7],
            "slots": [s for s in f[8:] if not s.startswith("[")],
        })
    return out


def owns(node: dict, slot: int) -> bool:
    for r in node["slots"]:
        a, _, b = r.partition("-")
        if int(a) <= slot <= int(b or a):
            return True
    return False


class Writer(threading.Thread):
    """Continuous writes, one at a time, routed by slot; records the acknowledged ones."""

    def __init__(self, ports, kind: str, wait_ms: int, rate: float):
        super().__init__(daemon=True)
        self.ports, self.kind, self.wait_ms, self.rate = list(ports), kind, wait_ms, rate
        self.slot_port = [0] * SLOTS
        self.conns, self.down_until = {}, {}
        self.last_refresh = 0.0
        self.acked = []      # (key, value, waited) in order of acknowledgement
        self.failed = 0      # attempts not acknowledged (error, timeout, refused)
        self.stop_flag = threading.Event()
        self.error = None

    def refresh(self) -> None:
        now = time.monotonic()
        if now - self.last_refresh < MAP_REFRESH_MIN_S:
            return
        self.last_refresh = now
        for port in random.sample(self.ports, len(self.ports)):
            try:
                slots = Conn(port, timeout=0.5).call("CLUSTER", "SLOTS")
            except (OSError, ReplyError, ValueError):
                continue
            for entry in slots:
                for s in range(int(entry[0]), int(entry[1]) + 1):
                    self.slot_port[s] = int(entry[2][1])
            return

    def conn(self, port: int):
        if self.down_until.get(port, 0) > time.monotonic():
            return None
        c = self.conns.get(port)
        if c is None:
            try:
                c = Conn(port, timeout=WRITE_SOCKET_TIMEOUT_S)
            except OSError:
                self.down_until[port] = time.monotonic() + DOWN_RETRY_S
                return None
            self.conns[port] = c
        return c

    def drop(self, port: int) -> None:
        c = self.conns.pop(port, None)
        if c:
            c.close()

    def run(self) -> None:
        try:
            self.refresh()
            seq, period, next_at = 0, 1.0 / self.rate if self.rate > 0 else 0.0, time.monotonic()
            while not self.stop_flag.is_set() and len(self.acked) < WRITES_MAX:
                if period:
                    delay = next_at - time.monotonic()
                    if delay > 0:
                        time.sleep(delay)
                    next_at = max(next_at + period, time.monotonic() - 1.0)
                seq += 1
                key = f"fo:{seq}"
                value = f"{seq}:{random.getrandbits(48):012x}"
                self.write_one(key, value)
        except Exception as e:  # reported by the main thread
            self.error = repr(e)

    def write_one(self, key: str, value: str) -> None:
        port = self.slot_port[key_slot(key)]
        c = self.conn(port) if port else None
        if c is None:
            self.failed += 1
            self.refresh()
            return
        try:
            if self.kind == "redis" and self.wait_ms > 0:
                c.send(("SET", key, value), ("WAIT", "1", str(self.wait_ms)))
                ok, waited = c.read(), c.read()
            else:
                c.send(("SET", key, value))
                ok, waited = c.read(), None
        except (OSError, ValueError):
            self.drop(port)
            self.down_until[port] = time.monotonic() + DOWN_RETRY_S
            self.failed += 1
            self.refresh()
            return
        if ok == "OK":
            synced = waited >= 1 if isinstance(waited, int) else True
            self.acked.append((key, value, synced))
            return
        self.failed += 1
        if isinstance(ok, ReplyError) and ok.code == "MOVED":
            slot, target = ok.text.split()[1:3]
            self.slot_port[int(slot)] = int(target.rsplit(":", 1)[1])
        else:
            self.refresh()


def read_back(ports, entries) -> tuple:
    """Reads `entries` (key, value, synced) from their current owners: (lost, lost_synced,
    examples). Raises Failure if a key cannot be read at all."""
    slot_port = [0] * SLOTS
    for port in ports:
        try:
            for entry in Conn(port, timeout=2).call("CLUSTER", "SLOTS"):
                for s in range(int(entry[0]), int(entry[1]) + 1):
                    slot_port[s] = int(entry[2][1])
            break
        except (OSError, ReplyError, ValueError):
            continue
    by_port = {}
    for e in entries:
        by_port.setdefault(slot_port[key_slot(e[0])], []).append(e)
    lost = lost_synced = 0
    examples = []
    for port, items in by_port.items():
        if port == 0:
            raise Failure("read-back: slots without an owner")
        c = Conn(port, timeout=10)
        for i in range(0, len(items), VERIFY_BATCH):
            batch = items[i:i + VERIFY_BATCH]
            c.send(*[("GET", k) for k, _, _ in batch])
            for k, v, synced in batch:
                got = c.read()
                if isinstance(got, ReplyError):
                    raise Failure(f"read-back: GET {k} on port {port}: {got.text}")
                if got != v:
                    lost += 1
                    lost_synced += int(synced)
                    if len(examples) < 5:
                        examples.append(f"{k}: wrote {v!r}, read {got!r}")
        c.close()
    return lost, lost_synced, examples


def healthy(servers) -> str:
    """"" when the cluster is healthy, else what is not yet."""
    offsets = {}
    views = []
    for s in servers:
        try:
            c = Conn(s.port, timeout=1)
            if "cluster_state:ok" not in c.call("CLUSTER", "INFO"):
                return f"port {s.port}: cluster_state not ok"
            views.append((s, cluster_nodes(s.port)))
            offsets[s.port] = c.info("replication")
        except (OSError, ReplyError, ValueError) as e:
            return f"port {s.port}: {e}"
    for s, view in views:
        masters = [n for n in view if "master" in n["flags"] and n["slots"]]
        if len(view) != NODES or len(masters) != SHARDS:
            return f"port {s.port} sees {len(view)} nodes, {len(masters)} primaries with slots"
        for n in view:
            if n["flags"] & {"fail", "fail?", "handshake", "noaddr"}:
                return f"port {s.port} flags {n['port']} {sorted(n['flags'])}"
        for m in masters:
            reps = [n for n in view if n["master"] == m["id"]]
            if len(reps) != 1:
                return f"port {s.port}: primary {m['port']} has {len(reps)} replicas"
    flagged = {n["port"] for n in views[0][1] if "slave" in n["flags"]}
    for port, info in offsets.items():
        if port in flagged and info.get("role") != "slave":
            return (f"port {port} is a replica in CLUSTER NODES but INFO replication says "
                    f"role:{info.get('role')} (no replication link)")
        if info.get("role") == "slave":
            if info.get("master_link_status") != "up":
                return f"replica {port}: link {info.get('master_link_status')}"
            primary = offsets.get(int(info.get("master_port", 0)))
            if primary is None:
                return f"replica {port}: primary {info.get('master_port')} unknown"
            behind = int(primary["master_repl_offset"]) - int(info.get("slave_repl_offset", -1))
            if behind > IN_SYNC_SLACK:
                return f"replica {port}: {behind} bytes behind its primary"
    return ""


def wait_healthy(servers, timeout_s: float, what: str) -> float:
    start = time.monotonic()
    deadline = start + timeout_s
    why = "not checked"
    while time.monotonic() < deadline:
        why = healthy(servers)
        if not why:
            return time.monotonic() - start
        time.sleep(0.1)
    raise Failure(f"{what}: cluster not healthy after {timeout_s:.0f} s ({why})")


def myself_is_primary(c: Conn) -> bool:
    """Whether the node behind `c` flags itself `myself,master` in CLUSTER NODES."""
    for line in c.call("CLUSTER", "NODES").splitlines():
        f = line.split()
        if len(f) > 2 and "myself" in f[2].split(","):
            return "master" in f[2].split(",")
    return False


def probe_failover(victim: Server, replica_port: int, probe_key: str, timeout_s: float,
                   t_kill: float, restart) -> tuple:
    """(promoted_s, write_s) after t_kill; calls restart() once, as soon as the replica is
    promoted (or a write succeeded): a node that answers writes only once a replica
    acknowledged them (`repl-sync-acks 1`) needs the killed node back as its replica."""
    deadline = t_kill + timeout_s
    promoted = wrote = None
    restarted = False
    c = None
    n = 0
    last = "nothing"
    while time.monotonic() < deadline:
        now = time.monotonic()
        try:
            if c is None:
                c = Conn(replica_port, timeout=PROBE_SOCKET_TIMEOUT_S)
            if promoted is None and myself_is_primary(c):
                promoted = now - t_kill
            n += 1
            c.send(("SET", probe_key, f"probe-{n}"))
            reply = c.read()
            if reply == "OK":
                wrote = time.monotonic() - t_kill
            else:
                last = str(reply)
        except (OSError, ReplyError, ValueError) as e:
            last = repr(e)
            if c:
                c.close()
            c = None
        if wrote is not None and promoted is None:
            promoted = wrote
        if not restarted and (wrote is not None or promoted is not None):
            restart()
            restarted = True
        if wrote is not None:
            break
        time.sleep(PROBE_INTERVAL_S)
    if c:
        c.close()
    if wrote is None:
        state = (f"promoted after {promoted * 1000:.0f} ms but no write accepted" if promoted
                 else "replica never promoted")
        raise Failure(f"no failover within {timeout_s:.0f} s of killing port {victim.port} "
                      f"({state}; replica port {replica_port}; its last answer to SET "
                      f"{probe_key}: {last})")
    return promoted, wrote


def main() -> int:
    global PIDFILE
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--server", choices=("redis", "node"), required=True)
    ap.add_argument("--timeout-ms", type=int, required=True)
    ap.add_argument("--iterations", type=int, default=20)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--node-bin", default="target/release/node")
    ap.add_argument("--fabric", default="ofi:tcp")
    ap.add_argument("--node-args", default="--repl-sync-acks 1")
    ap.add_argument("--wait-ms", type=int, default=100, help="redis: WAIT 1 <ms> after each SET")
    ap.add_argument("--write-rate", type=float, default=2000.0, help="writes/s, 0 = unpaced")
    ap.add_argument("--pidfile", default="")
    args = ap.parse_args()
    PIDFILE = args.pidfile or None
    atexit.register(stop_all)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    label = {"server": args.server, "timeout_ms": args.timeout_ms}
    if args.server == "node":
        label["fabric"] = args.fabric
        label["node_args"] = args.node_args

    def emit(obj: dict) -> None:
        print(json.dumps({**label, **obj}), flush=True)

    writer = None
    try:
        taken = set()
        for i in range(NODES):
            port = free_port(taken)
            SERVERS.append(Server(args, port, os.path.join(args.workdir, f"n{i}-{port}"),
                                  args.server, args.timeout_ms, taken))
        emit({"kind": "command", "command": SERVERS[0].shown})
        for s in SERVERS:
            s.start()
        create = ["redis-cli", "--cluster", "create",
                  *[f"127.0.0.1:{s.port}" for s in SERVERS],
                  "--cluster-replicas", "1", "--cluster-yes"]
        try:
            out = subprocess.run(create, capture_output=True, text=True,
                                 timeout=CREATE_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise Failure(f"redis-cli --cluster create took over {CREATE_TIMEOUT_S:.0f} s")
        if out.returncode != 0 or "[OK] All 16384 slots covered." not in out.stdout:
            raise Failure(f"redis-cli --cluster create failed:\n{out.stdout}{out.stderr}")
        took = wait_healthy(SERVERS, HEALTH_TIMEOUT_S, "after create")
        log(f"{args.server} timeout {args.timeout_ms} ms: cluster healthy {took:.1f} s after create")

        by_port = {s.port: s for s in SERVERS}
        writer = Writer(by_port, args.server, args.wait_ms, args.write_rate)
        writer.start()
        time.sleep(1.0)
        checked = 0
        for it in range(args.iterations):
            if writer.error:
                raise Failure(f"writer failed: {writer.error}")
            view = cluster_nodes(SERVERS[0].port if SERVERS[0].proc.poll() is None
                                 else SERVERS[1].port)
            first = SHARD_FIRST_SLOTS[it % SHARDS]
            primary = next((n for n in view if "master" in n["flags"] and owns(n, first)), None)
            if primary is None:
                raise Failure(f"iteration {it + 1}: no primary owns slot {first}")
            replica = next((n for n in view if n["master"] == primary["id"]), None)
            if replica is None:
                raise Failure(f"iteration {it + 1}: primary {primary['port']} has no replica")
            victim = by_port[primary["port"]]
            probe_key = next(k for k in (f"probe:{j}" for j in range(100000))
                             if owns(primary, key_slot(k)))
            acked_before = len(writer.acked)
            t_kill = time.monotonic()
            victim.kill9()
            restart_at, restart_errors, restarts = [], [], []

            def restart_victim():
                try:
                    victim.start()
                except Failure as e:
                    restart_errors.append(str(e))

            def restart():
                # In the background: probing goes on while the killed node starts.
                restart_at.append(time.monotonic() - t_kill)
                restarts.append(threading.Thread(target=restart_victim, daemon=True))
                restarts[0].start()

            try:
                promoted, wrote = probe_failover(victim, replica["port"], probe_key,
                                                 failover_timeout_s(args.timeout_ms), t_kill,
                                                 restart)
            finally:
                for th in restarts:  # its process must be known before any stop_all
                    th.join(timeout=READY_TIMEOUT_S + 10)
            if restart_errors:
                raise Failure(f"iteration {it + 1}: restarting the killed node: "
                              f"{restart_errors[0]}")
            healthy_s = wait_healthy(SERVERS, HEALTH_TIMEOUT_S, f"iteration {it + 1}")
            time.sleep(SETTLE_AFTER_HEALTHY_S)
            upto = len(writer.acked)
            lost, lost_synced, examples = read_back(by_port, writer.acked[checked:upto])
            emit({"kind": "iteration", "iteration": it + 1, "victim_port": victim.port,
                  "promoted_ms": promoted * 1000, "failover_ms": wrote * 1000,
                  "restart_at_ms": restart_at[0] * 1000,
                  "healthy_after_restart_ms": healthy_s * 1000,
                  "acked_checked": upto - checked,
                  "acked_synced_checked": sum(1 for e in writer.acked[checked:upto] if e[2]),
                  "acked_during_iteration": upto - acked_before,
                  "lost": lost, "lost_synced": lost_synced, "lost_examples": examples,
                  "write_failures": writer.failed})
            log(f"{args.server} timeout {args.timeout_ms} ms: iteration {it + 1}: failover "
                f"{wrote * 1000:.0f} ms, lost {lost} of {upto - checked}")
            checked = upto
        writer.stop_flag.set()
        writer.join(timeout=10)
        lost, lost_synced, examples = read_back(by_port, writer.acked)
        emit({"kind": "summary", "status": "ok", "iterations": args.iterations,
              "acked": len(writer.acked),
              "acked_synced": sum(1 for e in writer.acked if e[2]),
              "final_lost": lost, "final_lost_synced": lost_synced,
              "lost_examples": examples, "write_failures": writer.failed})
        return 0
    except Failure as e:
        log(f"{args.server} timeout {args.timeout_ms} ms: FAILED: {e}")
        emit({"kind": "summary", "status": "failed", "reason": str(e),
              "acked": len(writer.acked) if writer else 0})
        return 2
    finally:
        if writer:
            writer.stop_flag.set()
        stop_all()


if __name__ == "__main__":
    sys.exit(main())
