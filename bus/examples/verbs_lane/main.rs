//! The verbs lane's guest test runner (scripts/verbs-lane.sh runs it inside the soft-RoCE VM).
//!
//! `verbs_lane list` prints the test names; `verbs_lane <name>` runs one and exits 0 on success.
//! The two-process tests start this same binary again as the peer process (`ring-writer`,
//! `ud-peer`, `dgram-peer`); the node checks start the node binary (`NODE_BIN`, default `node`
//! beside this binary). Env: `RXE_IP` (the rxe netdev's IPv4 address, default 10.11.12.13) and
//! `GID_IDX` (default 1, the IPv4-mapped RoCE v2 GID).
//!
//! Modules: [`node_stream`] (a real node served over a verbs Stream), [`node_cluster`] (three
//! nodes forming a cluster whose bus runs on verbs UD), [`replication`] (a primary and a replica
//! linked by verbs RC: the stream written into the replica's ring, WAIT), [`ring`] (the bus Ring
//! between two processes), [`covered`] (selective signaling's folded completions), [`srq`] (RC
//! connections sharing one receive pool), [`stream_pool`] (Streams on a listener's receive pool,
//! kept apart by memory windows), [`datagram`]
//! (the bus Datagram framing over UD between two processes), [`rogue`] (another connection's
//! protection domain refuses even an exact key; `fabric_rogue`'s probe against a node).
//! [`replication`] also runs the rogue's `forge-ack` against the primary.
//!
//! There are no timing assertions: every wait has a generous bound (`WAIT`) that only turns a
//! hang into a failure, because the guest runs under emulation on a shared machine.

mod covered;
mod datagram;
mod node_cluster;
mod node_idle_clients;
mod node_migration;
mod node_stream;
mod replication;
mod ring;
mod rogue;
mod srq;
mod stream_pool;

// The rogue's modules, shared with bus/examples/fabric_rogue (parts unused here).
#[allow(dead_code)]
#[path = "../fabric_rogue/guesses.rs"]
mod guesses;
#[allow(dead_code)]
#[path = "../fabric_rogue/probe.rs"]
mod probe;

use std::net::{IpAddr, SocketAddr};
use std::process::{Child, Command, ExitCode};
use std::time::{Duration, Instant};

use bus::verbs::{VerbsConnection, VerbsOptions, VerbsProvider, VerbsRegion, DATAGRAM_QKEY};
use bus::{
    Access, BusError, Completion, Connection, DatagramEndpoint, EndpointAddr, EndpointConfig,
    Listener, LocalSlice, Op, Provider, Region, RemoteRegion, RemoteSlice, WorkError,
};

pub(crate) type R<T = ()> = Result<T, Box<dyn std::error::Error>>;

/// Bound on any single wait (a connection, a completion, a datagram, a child process).
pub(crate) const WAIT: Duration = Duration::from_secs(90);

/// A named guest test.
type Test = (&'static str, fn() -> R);

const TESTS: &[Test] = &[
    ("device", test_device),
    ("rc_send_recv", test_send_recv),
    ("rc_peer_addresses", test_peer_addresses),
    ("rc_write", test_write),
    ("rc_write_imm", test_write_imm),
    ("rc_covered_writes", covered::test_rc_covered_writes),
    ("rc_read", test_read),
    ("rc_wrong_rkey", test_wrong_rkey),
    ("rc_foreign_pd", rogue::test_rc_foreign_pd),
    ("rc_limits", test_limits),
    ("rc_peer_close", test_peer_close),
    ("rc_accept_short_timeouts", test_accept_short_timeouts),
    ("ud_two_process", test_ud_two_process),
    ("ring_two_process", ring::test_ring_two_process),
    ("datagram_two_process", datagram::test_datagram_two_process),
    ("srq_shared_receives", srq::test_srq_shared_receives),
    ("srq_connect_side", srq::test_srq_connect_side),
    ("srq_stream_pool", stream_pool::test_srq_stream_pool),
    ("node_stream", node_stream::test_node_stream),
    (
        "node_idle_clients",
        node_idle_clients::test_node_idle_clients,
    ),
    ("rogue_stream", rogue::test_rogue_stream),
    ("node_cluster", node_cluster::test_node_cluster),
    ("replication_wait", replication::test_replication_wait),
];

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let Some(cmd) = args.get(1) else {
        eprintln!(
            "usage: verbs_lane list | <test> | ring-writer <port> <seed> | ud-peer <addr> | dgram-peer <addr> <seed> | srq-sender <port> <seed>"
        );
        return ExitCode::from(2);
    };
    let result = match cmd.as_str() {
        "list" => {
            for (name, _) in TESTS {
                println!("{name}");
            }
            Ok(())
        }
        "ring-writer" => match (args.get(2), args.get(3)) {
            (Some(port), Some(seed)) => (|| ring::ring_writer(port.parse()?, seed.parse()?))(),
            _ => Err("ring-writer needs a port and a seed".into()),
        },
        "dgram-peer" => match (args.get(2), args.get(3)) {
            (Some(addr), Some(seed)) => (|| datagram::dgram_peer(addr.parse()?, seed.parse()?))(),
            _ => Err("dgram-peer needs an address and a seed".into()),
        },
        "srq-sender" => match (args.get(2), args.get(3)) {
            (Some(port), Some(seed)) => (|| srq::srq_sender(port.parse()?, seed.parse()?))(),
            _ => Err("srq-sender needs a port and a seed".into()),
        },
        "ud-peer" => args
            .get(2)
            .ok_or_else(|| "ud-peer needs an address".into())
            .and_then(|a| ud_peer(a.parse()?)),
        name => match TESTS.iter().find(|(n, _)| *n == name) {
            Some((_, test)) => test(),
            None => Err(format!("unknown test {name:?}").into()),
        },
    };
    match result {
        Ok(()) if cmd == "list" => ExitCode::SUCCESS,
        Ok(()) => {
            println!("{cmd}: ok");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{cmd}: FAILED: {e}");
            ExitCode::FAILURE
        }
    }
}

pub(crate) fn rxe_ip() -> IpAddr {
    std::env::var("RXE_IP")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| "10.11.12.13".parse().unwrap())
}

pub(crate) fn provider() -> R<VerbsProvider> {
    let gid_index = std::env::var("GID_IDX")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(bus::verbs::GID_INDEX_DEFAULT);
    Ok(VerbsProvider::open(&VerbsOptions {
        gid_index,
        ..Default::default()
    })?)
}

/// The defaults the node uses for clients (255-deep queues, 256-byte inline), so the lane
/// proves them.
pub(crate) fn config() -> EndpointConfig {
    EndpointConfig::default()
}

/// A connected pair in this process: (accepted side, connecting side).
pub(crate) fn pair(p: &VerbsProvider, port: u16) -> R<(VerbsConnection, VerbsConnection)> {
    let addr = SocketAddr::new(rxe_ip(), port);
    let mut listener = p.listen(addr, &config())?;
    let server = std::thread::spawn(move || listener.accept(WAIT));
    let client = p.connect(addr, &config(), WAIT)?;
    let server = server
        .join()
        .map_err(|_| "accept thread panicked")??
        .ok_or("no connection accepted")?;
    Ok((server, client))
}

/// Polls until `n` completions arrived; fails on the first unsuccessful one unless `allow_err`.
pub(crate) fn completions(
    conn: &mut VerbsConnection,
    n: usize,
    allow_err: bool,
) -> R<Vec<Completion>> {
    let deadline = Instant::now() + WAIT;
    let mut out = Vec::new();
    while out.len() < n {
        if Instant::now() > deadline {
            return Err(format!("only {} of {n} completions: {out:?}", out.len()).into());
        }
        let want = n - out.len();
        if conn.poll(&mut out, want)? == 0 {
            conn.wait(Duration::from_millis(200))?;
        }
    }
    if !allow_err {
        if let Some(bad) = out.iter().find(|c| c.status.is_err()) {
            return Err(format!("work request failed: {bad:?}").into());
        }
    }
    Ok(out)
}

pub(crate) fn slice(region: &VerbsRegion, offset: usize, len: usize) -> LocalSlice<VerbsRegion> {
    LocalSlice {
        region: region.clone(),
        offset,
        len,
    }
}

pub(crate) fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

pub(crate) fn ensure(cond: bool, what: impl Into<String>) -> R {
    if cond {
        Ok(())
    } else {
        Err(what.into().into())
    }
}

fn test_device() -> R {
    let p = provider()?;
    println!(
        "device {} gid {}",
        p.device_name(),
        std::net::Ipv6Addr::from(p.gid())
    );
    ensure(p.name() == "verbs", "provider name")?;
    // A named device that does not exist is a clean Unavailable, never a panic.
    match VerbsProvider::open(&VerbsOptions {
        device: Some("no-such-device".into()),
        ..Default::default()
    }) {
        Err(BusError::Unavailable { .. }) => Ok(()),
        other => Err(format!("expected Unavailable, got {other:?}").into()),
    }
}

fn test_send_recv() -> R {
    let p = provider()?;
    let (mut server, mut client) = pair(&p, 20101)?;
    // Each connection has its own protection domain: buffers are registered through it.
    let rx = server.register(8192, Access::LOCAL_WRITE)?;
    let tx = client.register(8192, Access::SEND)?;
    // One small (inline) and one large (not inline: > max_inline) message, in order.
    let small = b"hello over rc".to_vec();
    let large = pattern(5000, 7);
    server.post_recv(1, slice(&rx, 0, 64))?;
    server.post_recv(2, slice(&rx, 64, 6000))?;
    tx.write(0, &small)?;
    tx.write(100, &large)?;
    client.post_send(10, slice(&tx, 0, small.len()))?;
    client.post_send(11, slice(&tx, 100, large.len()))?;
    let sent = completions(&mut client, 2, false)?;
    ensure(sent.iter().all(|c| c.op == Op::Send), format!("{sent:?}"))?;
    let got = completions(&mut server, 2, false)?;
    ensure(
        got[0].wr_id == 1 && got[0].op == Op::Recv && got[0].byte_len as usize == small.len(),
        format!("first receive {:?}", got[0]),
    )?;
    ensure(
        got[1].wr_id == 2 && got[1].byte_len as usize == large.len(),
        format!("second receive {:?}", got[1]),
    )?;
    let mut buf = vec![0; small.len()];
    rx.read(0, &mut buf)?;
    ensure(buf == small, "small payload differs")?;
    let mut buf = vec![0; large.len()];
    rx.read(64, &mut buf)?;
    ensure(buf == large, "large payload differs")
}

/// Each side of an RC connection names its peer as the peer names itself (`peer()` ==
/// the other's `local()`): replication matches an accepted connection to the replica's
/// REPLCONF by that text.
fn test_peer_addresses() -> R {
    let p = provider()?;
    let (server, client) = pair(&p, 20109)?;
    ensure(
        server.peer() == client.local(),
        format!(
            "accepted side's peer {} but the connecting side is {}",
            server.peer(),
            client.local()
        ),
    )?;
    ensure(
        client.peer() == server.local(),
        format!(
            "connecting side's peer {} but the accepted side is {}",
            client.peer(),
            server.local()
        ),
    )?;
    println!(
        "accepted {} <-> connecting {}",
        server.local(),
        client.local()
    );
    Ok(())
}

fn test_write() -> R {
    let p = provider()?;
    let (server, mut client) = pair(&p, 20102)?;
    let target = server.register(1 << 16, Access::REMOTE_WRITE)?;
    let src = client.register(1 << 16, Access::NONE)?;
    let data = pattern(40_000, 3);
    src.write(0, &data)?;
    let dst = RemoteSlice {
        region: target.remote()?,
        offset: 128,
        len: data.len() as u64,
    };
    client.post_write(5, slice(&src, 0, data.len()), dst, None)?;
    let done = completions(&mut client, 1, false)?;
    ensure(
        done[0].op == Op::Write && done[0].wr_id == 5,
        format!("{done:?}"),
    )?;
    let mut buf = vec![0; data.len()];
    target.read(128, &mut buf)?;
    ensure(buf == data, "written bytes differ")?;
    // An 8-byte word published by WRITE is visible through load_u64.
    src.store_u64(0, 0x0123_4567_89ab_cdef)?;
    let word = RemoteSlice {
        region: target.remote()?,
        offset: 0,
        len: 8,
    };
    client.post_write(6, slice(&src, 0, 8), word, None)?;
    completions(&mut client, 1, false)?;
    ensure(
        target.load_u64(0)? == 0x0123_4567_89ab_cdef,
        "published word differs",
    )
}

fn test_write_imm() -> R {
    let p = provider()?;
    let (mut server, mut client) = pair(&p, 20103)?;
    let target = server.register(8192, Access::REMOTE_WRITE | Access::LOCAL_WRITE)?;
    let src = client.register(8192, Access::NONE)?;
    let data = pattern(3000, 9);
    src.write(0, &data)?;
    server.post_recv(77, slice(&target, 0, 0))?;
    let dst = RemoteSlice {
        region: target.remote()?,
        offset: 4096,
        len: data.len() as u64,
    };
    client.post_write(8, slice(&src, 0, data.len()), dst, Some(0xdead_beef))?;
    completions(&mut client, 1, false)?;
    let got = completions(&mut server, 1, false)?;
    ensure(
        got[0].op == Op::RecvWriteImm
            && got[0].wr_id == 77
            && got[0].imm == Some(0xdead_beef)
            && got[0].byte_len as usize == data.len(),
        format!("{:?}", got[0]),
    )?;
    let mut buf = vec![0; data.len()];
    target.read(4096, &mut buf)?;
    ensure(buf == data, "bytes of the write with imm differ")
}

fn test_read() -> R {
    let p = provider()?;
    let (server, mut client) = pair(&p, 20104)?;
    let source = server.register(1 << 15, Access::REMOTE_READ)?;
    let data = pattern(20_000, 11);
    source.write(1000, &data)?;
    let dst = client.register(1 << 15, Access::LOCAL_WRITE)?;
    let src = RemoteSlice {
        region: source.remote()?,
        offset: 1000,
        len: data.len() as u64,
    };
    client.post_read(3, slice(&dst, 0, data.len()), src)?;
    let done = completions(&mut client, 1, false)?;
    ensure(done[0].op == Op::Read, format!("{done:?}"))?;
    let mut buf = vec![0; data.len()];
    dst.read(0, &mut buf)?;
    ensure(buf == data, "read bytes differ")
}

fn test_wrong_rkey() -> R {
    let p = provider()?;
    let (server, mut client) = pair(&p, 20105)?;
    let target = server.register(4096, Access::REMOTE_WRITE)?;
    let src = client.register(4096, Access::NONE)?;
    let good = target.remote()?;
    let bad = RemoteRegion {
        rkey: good.rkey ^ 0x5a5a,
        ..good
    };
    // Above max_inline, so the payload is DMA-read (the common path for large writes).
    let len = 1024;
    let dst = RemoteSlice {
        region: bad,
        offset: 0,
        len,
    };
    client.post_write(1, slice(&src, 0, len as usize), dst, None)?;
    let done = completions(&mut client, 1, true)?;
    ensure(
        done[0].status == Err(WorkError::RemoteAccess),
        format!("expected RemoteAccess, got {:?}", done[0]),
    )
}

/// Queue depths and slice checks are enforced before anything reaches the device.
fn test_limits() -> R {
    let p = provider()?;
    let cfg = EndpointConfig {
        send_wr: bus::config::WR_MIN,
        recv_wr: bus::config::WR_MIN,
        cq_size: 2 * bus::config::WR_MIN,
        ..Default::default()
    };
    let addr = SocketAddr::new(rxe_ip(), 20106);
    let mut listener = p.listen(addr, &cfg)?;
    let server = std::thread::spawn(move || listener.accept(WAIT));
    let mut client = p.connect(addr, &cfg, WAIT)?;
    let mut server = server
        .join()
        .map_err(|_| "accept thread panicked")??
        .ok_or("no connection accepted")?;
    let target = server.register(4096, Access::REMOTE_WRITE | Access::LOCAL_WRITE)?;
    let src = client.register(4096, Access::NONE)?;
    let depth = bus::config::WR_MIN as u64;
    // Receives: exactly `recv_wr` may be outstanding.
    for i in 0..depth {
        server.post_recv(i, slice(&target, 0, 16))?;
    }
    let over = server.post_recv(99, slice(&target, 0, 16));
    ensure(
        matches!(over, Err(BusError::Full { .. })),
        format!("receive beyond depth: {over:?}"),
    )?;
    // Sends: `send_wr` writes stay outstanding until polled, then the queue has room again.
    let dst = RemoteSlice {
        region: target.remote()?,
        offset: 0,
        len: 8,
    };
    for i in 0..depth {
        client.post_write(i, slice(&src, 0, 8), dst, None)?;
    }
    let over = client.post_write(99, slice(&src, 0, 8), dst, None);
    ensure(
        matches!(over, Err(BusError::Full { .. })),
        format!("write beyond depth: {over:?}"),
    )?;
    completions(&mut client, depth as usize, false)?;
    client.post_write(100, slice(&src, 0, 8), dst, None)?;
    completions(&mut client, 1, false)?;
    // Slices are checked locally.
    let dst200 = RemoteSlice { len: 200, ..dst };
    let r = client.post_write(1, slice(&src, 4000, 200), dst200, None);
    ensure(
        matches!(r, Err(BusError::OutOfBounds { .. })),
        format!("local out of bounds: {r:?}"),
    )?;
    let r = client.post_write(1, slice(&src, 0, 16), dst, None);
    ensure(
        matches!(r, Err(BusError::Invalid { .. })),
        format!("length mismatch: {r:?}"),
    )?;
    let far = RemoteSlice {
        offset: 4090,
        ..dst
    };
    let r = client.post_write(1, slice(&src, 0, 8), far, None);
    ensure(
        matches!(r, Err(BusError::OutOfBounds { .. })),
        format!("remote out of bounds: {r:?}"),
    )
}

/// A peer that goes away flushes the other side's outstanding receives and closes it, in both
/// directions: the connecting side notices on its own channel, an accepted side through the
/// listener it came from (which the node keeps calling `accept` on).
fn test_peer_close() -> R {
    let p = provider()?;
    let addr = SocketAddr::new(rxe_ip(), 20107);
    let mut listener = p.listen(addr, &config())?;

    // The server drops its side: the client's receive is flushed.
    let (server, mut client) = {
        let handle = std::thread::spawn(move || {
            let c = listener.accept(WAIT);
            (listener, c)
        });
        let client = p.connect(addr, &config(), WAIT)?;
        let (l, server) = handle.join().map_err(|_| "accept thread panicked")?;
        listener = l;
        (server?.ok_or("no connection accepted")?, client)
    };
    let rx = client.register(4096, Access::LOCAL_WRITE)?;
    client.post_recv(1, slice(&rx, 0, 64))?;
    drop(server);
    let done = completions(&mut client, 1, true)?;
    ensure(
        done[0].status == Err(WorkError::Flushed),
        format!("client receive after server close: {:?}", done[0]),
    )?;
    ensure(
        matches!(
            client.post_recv(2, slice(&rx, 0, 64)),
            Err(BusError::Closed(_))
        ),
        "posting on a closed connection must fail",
    )?;
    drop(client);

    // The client drops its side: the accepted connection is flushed once the listener has seen
    // the disconnect.
    let handle = std::thread::spawn(move || {
        let c = listener.accept(WAIT);
        (listener, c)
    });
    let client = p.connect(addr, &config(), WAIT)?;
    let (mut listener, server) = handle.join().map_err(|_| "accept thread panicked")?;
    let mut server = server?.ok_or("no connection accepted")?;
    let rx = server.register(4096, Access::LOCAL_WRITE)?;
    server.post_recv(3, slice(&rx, 0, 64))?;
    drop(client);
    let deadline = Instant::now() + WAIT;
    let mut out = Vec::new();
    while out.is_empty() {
        ensure(
            Instant::now() < deadline,
            "accepted side never saw the close",
        )?;
        ensure(
            listener.accept(Duration::from_millis(200))?.is_none(),
            "unexpected new connection",
        )?;
        server.poll(&mut out, 1)?;
    }
    ensure(
        out[0].status == Err(WorkError::Flushed),
        format!("server receive after client close: {:?}", out[0]),
    )
}

/// Several clients connect at once while the server calls `accept` with timeouts far shorter
/// than connection set-up takes here: every connection still arrives, and each carries data.
fn test_accept_short_timeouts() -> R {
    const CLIENTS: usize = 3;
    let p = provider()?;
    let addr = SocketAddr::new(rxe_ip(), 20108);
    let mut listener = p.listen(addr, &config())?;
    let clients: Vec<_> = (0..CLIENTS)
        .map(|i| {
            let p = p.clone();
            std::thread::spawn(move || -> Result<(), String> {
                let mut conn = p
                    .connect(addr, &config(), WAIT)
                    .map_err(|e| e.to_string())?;
                let tx = conn.register(64, Access::SEND).map_err(|e| e.to_string())?;
                tx.write(0, &[i as u8; 8]).map_err(|e| e.to_string())?;
                conn.post_send(1, slice(&tx, 0, 8))
                    .map_err(|e| e.to_string())?;
                completions(&mut conn, 1, false).map_err(|e| e.to_string())?;
                Ok(())
            })
        })
        .collect();
    let deadline = Instant::now() + WAIT;
    let mut conns = Vec::new();
    let mut rxs = Vec::new();
    while conns.len() < CLIENTS {
        ensure(
            Instant::now() < deadline,
            format!("only {} accepted", conns.len()),
        )?;
        if let Some(mut c) = listener.accept(Duration::from_millis(10))? {
            let n = conns.len();
            let rx = c.register(64, Access::LOCAL_WRITE)?;
            c.post_recv(n as u64, slice(&rx, 0, 64))?;
            conns.push(c);
            rxs.push(rx);
        }
    }
    let mut seen = Vec::new();
    for (c, rx) in conns.iter_mut().zip(&rxs) {
        let got = completions(c, 1, false)?;
        ensure(got[0].byte_len == 8, format!("{:?}", got[0]))?;
        let mut b = [0u8; 8];
        rx.read(0, &mut b)?;
        ensure(b.iter().all(|x| *x == b[0]), "message bytes differ")?;
        seen.push(b[0]);
    }
    seen.sort_unstable();
    ensure(seen == [0, 1, 2], format!("messages from clients {seen:?}"))?;
    for c in clients {
        c.join().map_err(|_| "client thread panicked")??;
    }
    Ok(())
}

// --- Peer processes ---------------------------------------------------------------------

pub(crate) fn spawn_self(args: &[&str]) -> R<Child> {
    Ok(Command::new(std::env::current_exe()?).args(args).spawn()?)
}

pub(crate) fn wait_child(mut child: Child) -> R {
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some(status) = child.try_wait()? {
            return ensure(status.success(), format!("peer process failed: {status}"));
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Err("peer process did not finish".into());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

// --- UD datagrams between two processes ----------------------------------------------------

/// The receiver: waits for a ping from the peer process, checks the sender address it reports
/// (GID from the GRH, QPN), and answers every ping with a pong to that address.
fn test_ud_two_process() -> R {
    let p = provider()?;
    let mut ep = p.datagram(&config())?;
    let me = ep.local().clone();
    println!("ud endpoint {me} mtu {}", ep.mtu());
    let mut child = Some(spawn_self(&["ud-peer", &me.to_string()])?);
    let deadline = Instant::now() + WAIT;
    let mut buf = vec![0u8; ep.mtu()];
    let mut pings = 0;
    let result = loop {
        if Instant::now() > deadline {
            break Err("no ping arrived".into());
        }
        if let Some(c) = child.as_mut() {
            if c.try_wait()?.is_some() {
                break wait_child(child.take().unwrap())
                    .and_then(|_| ensure(pings > 0, "peer finished without our seeing a ping"));
            }
        }
        match ep.try_recv(&mut buf)? {
            Some(meta) => {
                ensure(
                    buf[..meta.len].starts_with(b"ping"),
                    "datagram is not a ping",
                )?;
                let EndpointAddr::Verbs { gid, qkey, .. } = meta.from else {
                    break Err("sender address is not verbs".into());
                };
                let EndpointAddr::Verbs { gid: my_gid, .. } = me else {
                    unreachable!()
                };
                // Same guest, same rxe device: the sender's GID is ours.
                ensure(
                    gid == my_gid,
                    format!("sender {} has a foreign GID", meta.from),
                )?;
                ensure(qkey == DATAGRAM_QKEY, "qkey")?;
                pings += 1;
                // Same length as the ping (which may be MTU-sized): "ping" becomes "pong".
                let mut reply = b"pong".to_vec();
                reply.extend_from_slice(&buf[4..meta.len]);
                send_retrying(&mut ep, &meta.from, &reply)?;
            }
            None => ep.wait(Duration::from_millis(200))?,
        }
    };
    if let Some(mut c) = child {
        let _ = c.kill();
        let _ = c.wait();
    }
    result
}

fn send_retrying<D: DatagramEndpoint>(ep: &mut D, to: &EndpointAddr, msg: &[u8]) -> R {
    let deadline = Instant::now() + WAIT;
    loop {
        match ep.send_to(to, msg) {
            Err(BusError::Full { .. }) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(10))
            }
            other => return Ok(other?),
        }
    }
}

/// The peer: sends pings (again every second: datagrams may be lost) until a pong naming one of
/// them comes back; also sends one MTU-sized datagram and checks an oversized one is refused.
fn ud_peer(to: EndpointAddr) -> R {
    let p = provider()?;
    let mut ep = p.datagram(&config())?;
    let big = vec![0xab; ep.mtu() + 1];
    ensure(
        matches!(ep.send_to(&to, &big), Err(BusError::Invalid { .. })),
        "oversized datagram accepted",
    )?;
    let deadline = Instant::now() + WAIT;
    let mut buf = vec![0u8; ep.mtu()];
    let mut n = 0u32;
    let mut last_ping = Instant::now() - Duration::from_secs(10);
    loop {
        if Instant::now() > deadline {
            return Err("no pong".into());
        }
        if last_ping.elapsed() >= Duration::from_secs(1) {
            let mut ping = format!("ping {n} ").into_bytes();
            ping.resize(ep.mtu(), b'.');
            send_retrying(&mut ep, &to, &ping)?;
            n += 1;
            last_ping = Instant::now();
        }
        match ep.try_recv(&mut buf)? {
            Some(meta) => {
                ensure(buf[..meta.len].starts_with(b"pong "), "not a pong")?;
                ensure(
                    meta.from == to,
                    format!("pong from {} instead of {to}", meta.from),
                )?;
                return Ok(());
            }
            None => ep.wait(Duration::from_millis(200))?,
        }
    }
}

/// A deterministic generator (splitmix64): both processes of a two-process check derive the
/// same record sizes and contents from the seed the parent passes on the command line.
pub(crate) struct SplitMix(pub u64);

impl SplitMix {
    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A payload of `len` bytes that starts with `seq` (little endian) when there is room for it.
    pub(crate) fn payload(&mut self, seq: u64, len: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(len + 8);
        out.extend_from_slice(&seq.to_le_bytes());
        while out.len() < len {
            out.extend_from_slice(&self.next_u64().to_le_bytes());
        }
        out.truncate(len);
        out
    }
}

/// A seed for a two-process check: differs per run, printed so a failure can be replayed.
pub(crate) fn fresh_seed() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    nanos ^ u64::from(std::process::id()).rotate_left(32)
}
