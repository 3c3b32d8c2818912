//! Goal: bytes written on one end come out of the other unchanged and in order, whatever the
//! chunking, through window exhaustion and re-advertisement; keepalives flow; a dead or hostile
//! peer closes the stream with a typed error, never a panic.
//! Method: Stream pairs on two sim hosts; hostile peers are raw connections sending crafted
//! control messages and writes.

use std::net::SocketAddr;
use std::time::Duration;

use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::control::{ControlMsg, CONTROL_MSG_LEN};
use super::*;
use crate::access::Access;
use crate::config::EndpointConfig;
use crate::error::BusError;
use crate::provider::{
    Completion, Connection, Listener, LocalSlice, Op, Provider, Region, RemoteRegion, RemoteSlice,
    WorkError,
};
use crate::sim::{Faults, SimConnection, SimFabric, SimProvider, SimRegion};

fn jittery() -> Faults {
    Faults {
        delay_min: Duration::from_micros(1),
        delay_max: Duration::from_micros(30),
        ..Faults::default()
    }
}

struct Hosts {
    fabric: SimFabric,
    server_host: SimProvider,
    client_host: SimProvider,
    /// (client end, server end) of one connection.
    conns: (SimConnection, SimConnection),
}

fn hosts(seed: u64, faults: Faults) -> Hosts {
    let fabric = SimFabric::new(seed, faults).unwrap();
    let server_host = fabric.add_host().unwrap();
    let client_host = fabric.add_host().unwrap();
    let cfg = EndpointConfig::default();
    let at = SocketAddr::from(([10, 0, 1, 1], 6380));
    let mut l = server_host.listen(at, &cfg).unwrap();
    let c = client_host.connect(at, &cfg, Duration::ZERO).unwrap();
    let s = l.accept(Duration::ZERO).unwrap().unwrap();
    Hosts {
        fabric,
        server_host,
        client_host,
        conns: (c, s),
    }
}

struct Duo {
    fabric: SimFabric,
    server_host: SimProvider,
    client_host: SimProvider,
    server: Stream<SimConnection>,
    client: Stream<SimConnection>,
}

fn duo(seed: u64, faults: Faults, rx_size: usize) -> Duo {
    duo_sized(seed, faults, rx_size, rx_size)
}

/// Different RX sizes per side: each side's staging ring then wraps inside the peer's window.
fn duo_sized(seed: u64, faults: Faults, client_rx: usize, server_rx: usize) -> Duo {
    let h = hosts(seed, faults);
    let (c, s) = h.conns;
    let client = Stream::client(c, client_rx).unwrap();
    let server = Stream::server(s, server_rx).unwrap();
    Duo {
        fabric: h.fabric,
        server_host: h.server_host,
        client_host: h.client_host,
        server,
        client,
    }
}

impl Duo {
    fn pump(&mut self, dt: Duration) {
        self.fabric.advance(dt);
        let now = self.fabric.now();
        self.server.progress(now).unwrap();
        self.client.progress(now).unwrap();
    }
}

/// Client sends `data` in `chunks`-sized writes; the server echoes what it reads; returns what
/// came back.
fn echo(d: &mut Duo, data: &[u8], seed: u64) -> Vec<u8> {
    let mut rng = StdRng::seed_from_u64(seed);
    let (mut sent, mut back) = (0usize, Vec::new());
    let mut echo_pending: Vec<u8> = Vec::new();
    let mut buf = vec![0u8; 256 * 1024];
    // Bound: each round moves virtual time; a few rounds per KiB is plenty.
    for _ in 0..(data.len() / 64 + 2000) {
        if back.len() == data.len() {
            break;
        }
        if sent < data.len() {
            let want = rng.gen_range(1..=40_000).min(data.len() - sent);
            sent += d.client.write(&data[sent..sent + want]).unwrap();
            d.client.flush().unwrap();
        }
        d.pump(Duration::from_micros(rng.gen_range(1..50)));
        let n = rng.gen_range(1..=buf.len());
        let got = d.server.read(&mut buf[..n]).unwrap();
        echo_pending.extend_from_slice(&buf[..got]);
        let w = d.server.write(&echo_pending).unwrap();
        echo_pending.drain(..w);
        d.server.flush().unwrap();
        d.pump(Duration::from_micros(rng.gen_range(1..50)));
        let n = rng.gen_range(1..=buf.len());
        let got = d.client.read(&mut buf[..n]).unwrap();
        back.extend_from_slice(&buf[..got]);
    }
    back
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, ..ProptestConfig::default() })]

    /// Random sizes from a few bytes to several windows; the echo equals the input.
    #[test]
    fn echo_round_trips(
        seed in any::<u64>(),
        len in 1usize..300_000,
        server_rx in prop::sample::select(vec![RX_SIZE_MIN, RX_SIZE_MIN + 12_345, 3 * RX_SIZE_MIN]),
    ) {
        let data: Vec<u8> = (0..len).map(|i| (i * 7 + (seed as usize)) as u8).collect();
        let mut d = duo_sized(seed, jittery(), RX_SIZE_MIN, server_rx);
        let back = echo(&mut d, &data, seed);
        prop_assert_eq!(back.len(), data.len());
        prop_assert!(back == data);
        if len > 2 * server_rx {
            prop_assert!(d.server.stats().rx_readvertised > 0);
            prop_assert!(d.client.stats().rx_readvertised > 0);
        }
    }
}

#[test]
fn window_bounds_writes_until_the_reader_drains() {
    let mut d = duo(1, Faults::default(), RX_SIZE_MIN);
    assert_eq!(
        d.client.write(b"early").unwrap(),
        0,
        "no window before the advert"
    );
    d.pump(Duration::from_millis(1));
    let big = vec![5u8; 100_000];
    let n = d.client.write(&big).unwrap();
    assert_eq!(n, RX_SIZE_MIN);
    assert_eq!(d.client.write(&big).unwrap(), 0);
    d.client.flush().unwrap();
    d.pump(Duration::from_millis(1));
    let mut buf = vec![0u8; RX_SIZE_MIN];
    assert_eq!(d.server.read(&mut buf[..1000]).unwrap(), 1000);
    d.pump(Duration::from_millis(1));
    assert_eq!(
        d.client.write(&big).unwrap(),
        0,
        "partial reads do not re-advertise"
    );
    assert_eq!(d.server.read(&mut buf).unwrap(), RX_SIZE_MIN - 1000);
    assert_eq!(d.server.stats().rx_readvertised, 1);
    d.pump(Duration::from_millis(1));
    assert_eq!(d.client.write(&big).unwrap(), RX_SIZE_MIN);
}

#[test]
fn server_sends_keepalives_every_three_seconds() {
    let mut d = duo(2, Faults::default(), RX_SIZE_MIN);
    for _ in 0..100 {
        d.pump(Duration::from_millis(100));
    }
    // 10 s of virtual time: keepalives at 3, 6 and 9 s.
    assert_eq!(d.server.stats().keepalives_sent, 3);
    assert_eq!(d.client.stats().keepalives_received, 3);
    assert_eq!(d.client.stats().keepalives_sent, 0);
}

#[test]
fn peer_disconnect_closes_the_stream_after_buffered_bytes_are_read() {
    let mut d = duo(3, Faults::default(), RX_SIZE_MIN);
    d.pump(Duration::from_millis(1));
    d.client.write(b"last words").unwrap();
    d.client.flush().unwrap();
    d.pump(Duration::from_millis(1));
    d.client.close("test");
    d.fabric.advance(Duration::from_millis(1));
    let err = d.server.progress(d.fabric.now()).unwrap_err();
    assert!(matches!(err, BusError::Closed(_)), "{err}");
    let mut buf = [0u8; 64];
    assert_eq!(d.server.read(&mut buf).unwrap(), 10);
    assert_eq!(&buf[..10], b"last words");
    assert!(matches!(d.server.read(&mut buf), Err(BusError::Closed(_))));
    assert!(d.server.write(b"x").is_err());
}

/// Goal: a client that says goodbye is dropped by the server at once, after the server has
/// read what the client wrote before it; a server cannot say goodbye.
#[test]
fn a_goodbye_closes_the_server_end_at_once_after_the_last_bytes() {
    let mut d = duo(13, Faults::default(), RX_SIZE_MIN);
    d.pump(Duration::from_millis(1));
    d.client.write(b"last words").unwrap();
    d.client.begin_goodbye().unwrap();
    assert!(!d.client.goodbye_delivered());
    let mut closed = None;
    for _ in 0..50 {
        d.fabric.advance(Duration::from_millis(1));
        let now = d.fabric.now();
        d.client.progress(now).unwrap();
        if let Err(e) = d.server.progress(now) {
            closed = Some(e);
            break;
        }
    }
    let err = closed.expect("the server never saw the goodbye");
    assert!(
        matches!(err, BusError::Closed(ref why) if why == PEER_SAID_GOODBYE),
        "{err}"
    );
    assert_eq!(d.server.stats().goodbyes_received, 1);
    let mut buf = [0u8; 64];
    assert_eq!(d.server.read(&mut buf).unwrap(), 10);
    assert_eq!(&buf[..10], b"last words");
    assert!(d.server.begin_goodbye().is_err());
}

#[test]
fn dead_client_is_found_by_the_keepalive() {
    let h = hosts(4, Faults::default());
    let (c, s) = h.conns;
    let _client = Stream::client(c, RX_SIZE_MIN).unwrap();
    let mut server = Stream::server(s, RX_SIZE_MIN).unwrap();
    h.fabric.advance(Duration::from_millis(1));
    server.progress(h.fabric.now()).unwrap();
    h.fabric.crash(h.client_host.host());
    let mut result = Ok(());
    for _ in 0..100 {
        h.fabric.advance(Duration::from_millis(100));
        result = server.progress(h.fabric.now());
        if result.is_err() {
            break;
        }
    }
    assert!(matches!(result, Err(BusError::Closed(_))), "{result:?}");
}

/// A server with a silence limit drops a live but silent client (one that sends no
/// keepalives, as Valkey clients) once the limit passes, and keeps a client that sends them.
#[test]
fn silence_limit_drops_silent_peers_and_keeps_keepalive_senders() {
    let limit = Duration::from_secs(5);
    let mut silent = duo(5, Faults::default(), RX_SIZE_MIN);
    silent.server.set_peer_silence_limit(Some(limit));
    let mut closed = None;
    for step in 0..100u64 {
        silent.fabric.advance(Duration::from_millis(100));
        let now = silent.fabric.now();
        let _ = silent.client.progress(now);
        if let Err(e) = silent.server.progress(now) {
            closed = Some((step, e));
            break;
        }
    }
    let (step, err) = closed.expect("the silent client was never dropped");
    assert!(
        matches!(err, BusError::Closed(ref why) if why.contains("silent")),
        "{err}"
    );
    // Its advert at the start counts as hearing from it: dropped just after 5 s.
    assert!((50..=52).contains(&step), "dropped at step {step}");

    let mut chatty = duo(6, Faults::default(), RX_SIZE_MIN);
    chatty.server.set_peer_silence_limit(Some(limit));
    chatty.client.set_client_keepalive(true);
    for _ in 0..300 {
        chatty.pump(Duration::from_millis(100));
    }
    assert!(!chatty.server.is_closed());
    // 30 s of virtual time from a first progress at 0.1 s: keepalives at 3.1 ... 27.1 s.
    assert_eq!(chatty.client.stats().keepalives_sent, 9);
    assert_eq!(chatty.server.stats().keepalives_received, 9);
}

/// A raw peer: a connection, a region for its sends and receives, no Stream logic.
struct RawPeer {
    host: SimProvider,
    conn: SimConnection,
    slots: SimRegion,
}

const RAW_RECVS: usize = 8;

impl RawPeer {
    fn new(host: SimProvider, mut conn: SimConnection) -> Self {
        let slots = host
            .register(4096, Access::LOCAL_WRITE | Access::SEND)
            .unwrap();
        for i in 0..RAW_RECVS {
            let dst = LocalSlice {
                region: slots.clone(),
                offset: i * 32,
                len: 32,
            };
            conn.post_recv(i as u64, dst).unwrap();
        }
        RawPeer { host, conn, slots }
    }

    fn send(&mut self, bytes: &[u8]) {
        self.slots.write(2048, bytes).unwrap();
        let src = LocalSlice {
            region: self.slots.clone(),
            offset: 2048,
            len: bytes.len(),
        };
        self.conn.post_send(100, src).unwrap();
    }

    fn completions(&mut self) -> Vec<Completion> {
        let mut out = Vec::new();
        self.conn.poll(&mut out, 64).unwrap();
        out
    }

    /// The control messages received so far.
    fn received(&mut self) -> Vec<ControlMsg> {
        let mut msgs = Vec::new();
        for c in self.completions() {
            if c.op == Op::Recv && c.status.is_ok() {
                let mut raw = [0u8; 32];
                self.slots.read(c.wr_id as usize * 32, &mut raw).unwrap();
                msgs.push(ControlMsg::decode(&raw).unwrap());
            }
        }
        msgs
    }
}

/// A server stream with a raw client attached; returns after the server's advert arrived.
fn hostile_client(seed: u64) -> (SimFabric, Stream<SimConnection>, RawPeer, RemoteRegion) {
    let h = hosts(seed, Faults::default());
    let (c, s) = h.conns;
    let mut raw = RawPeer::new(h.client_host.clone(), c);
    let mut server = Stream::server(s, RX_SIZE_MIN).unwrap();
    h.fabric.run_until_idle(1000);
    server.progress(h.fabric.now()).unwrap();
    let advert = match raw.received().as_slice() {
        [ControlMsg::RegisterXferMemory { addr, length, rkey }] => RemoteRegion {
            addr: *addr,
            len: u64::from(*length),
            rkey: u64::from(*rkey),
        },
        other => panic!("expected the server's advert, got {other:?}"),
    };
    (h.fabric, server, raw, advert)
}

fn expect_protocol_close(
    fabric: &SimFabric,
    server: &mut Stream<SimConnection>,
    raw: &mut RawPeer,
) {
    fabric.run_until_idle(1000);
    let err = server.progress(fabric.now()).unwrap_err();
    assert!(matches!(err, BusError::Protocol(_)), "{err}");
    assert!(server.is_closed());
    assert_eq!(server.stats().protocol_errors, 1);
    assert!(matches!(
        server.progress(fabric.now()),
        Err(BusError::Closed(_))
    ));
    // The hostile peer sees its connection torn down: its receives are flushed.
    fabric.run_until_idle(1000);
    let flushed = raw
        .completions()
        .iter()
        .filter(|c| c.status == Err(WorkError::Flushed))
        .count();
    assert!(flushed > 0, "the peer was disconnected");
}

#[test]
fn unknown_opcode_closes_the_connection() {
    let (fabric, mut server, mut raw, _) = hostile_client(10);
    let mut msg = [0u8; CONTROL_MSG_LEN];
    msg[1] = 9;
    raw.send(&msg);
    expect_protocol_close(&fabric, &mut server, &mut raw);
}

#[test]
fn wrong_size_send_closes_the_connection() {
    let (fabric, mut server, mut raw, _) = hostile_client(11);
    raw.send(&[0u8; 16]);
    expect_protocol_close(&fabric, &mut server, &mut raw);
}

#[test]
fn oversized_advert_closes_the_connection() {
    let (fabric, mut server, mut raw, _) = hostile_client(12);
    let mut msg = ControlMsg::RegisterXferMemory {
        addr: 0,
        length: 1,
        rkey: 1,
    }
    .encode();
    msg[24..28].copy_from_slice(&(RX_SIZE_MAX as u32 + 1).to_be_bytes());
    raw.send(&msg);
    expect_protocol_close(&fabric, &mut server, &mut raw);
}

#[test]
fn write_claiming_more_than_the_buffer_closes_the_connection() {
    let (fabric, mut server, mut raw, advert) = hostile_client(13);
    let src = LocalSlice {
        region: raw.slots.clone(),
        offset: 0,
        len: 8,
    };
    let dst = RemoteSlice {
        region: advert,
        offset: 0,
        len: 8,
    };
    raw.conn
        .post_write(200, src, dst, Some(advert.len as u32 + 1))
        .unwrap();
    expect_protocol_close(&fabric, &mut server, &mut raw);
}

#[test]
fn bad_rkey_in_the_peers_advert_closes_the_connection() {
    let (fabric, mut server, mut raw, _) = hostile_client(14);
    let rx = raw
        .host
        .register(RX_SIZE_MIN, Access::LOCAL_WRITE | Access::REMOTE_WRITE)
        .unwrap();
    let good = rx.remote().unwrap();
    let advert = ControlMsg::RegisterXferMemory {
        addr: good.addr,
        length: good.len as u32,
        rkey: good.rkey as u32 ^ 0x5a5a,
    };
    raw.send(&advert.encode());
    fabric.run_until_idle(1000);
    server.progress(fabric.now()).unwrap();
    assert_eq!(server.write(b"+PONG\r\n").unwrap(), 7);
    server.flush().unwrap();
    expect_protocol_close(&fabric, &mut server, &mut raw);
}

#[test]
fn server_answers_get_server_feature() {
    let (fabric, mut server, mut raw, _) = hostile_client(15);
    let ask = ControlMsg::GetServerFeature {
        select: [1, 2],
        features: 0,
    };
    raw.send(&ask.encode());
    raw.send(
        &ControlMsg::SetClientFeature {
            select: [1, 2],
            features: 0,
        }
        .encode(),
    );
    fabric.run_until_idle(1000);
    server.progress(fabric.now()).unwrap();
    fabric.run_until_idle(1000);
    assert_eq!(raw.received(), vec![ask]);
    assert!(!server.is_closed());
}

#[test]
fn rx_size_limits_are_enforced() {
    let h = hosts(16, Faults::default());
    let (c, _s) = h.conns;
    let err = Stream::client(c, RX_SIZE_MIN - 1).unwrap_err();
    assert!(matches!(err, BusError::Invalid { .. }));
}

/// Goal: a Stream session replays exactly from its seed (what the chaos crate relies on).
/// Method: the same echo twice with one seed and once with another; compare network digests
/// and stream counters.
#[test]
fn same_seed_same_history() {
    let run = |seed: u64| {
        let data: Vec<u8> = (0..150_000).map(|i| (i % 251) as u8).collect();
        let mut d = duo_sized(seed, jittery(), RX_SIZE_MIN, RX_SIZE_MIN + 4096);
        assert!(echo(&mut d, &data, seed) == data);
        (
            d.fabric.trace_digest(),
            d.client.stats().clone(),
            d.server.stats().clone(),
        )
    };
    let first = run(77);
    assert_eq!(first, run(77));
    assert_ne!(first.0, run(78).0);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Arbitrary SENDs from a peer never panic the server: each is handled, or closes the
    /// stream with Protocol (bad size or opcode, impossible advert).
    #[test]
    fn arbitrary_control_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..=32)) {
        let (fabric, mut server, mut raw, _) = hostile_client(20);
        raw.send(&bytes);
        fabric.run_until_idle(1000);
        match server.progress(fabric.now()) {
            Ok(()) => prop_assert!(ControlMsg::decode(&bytes).is_ok()),
            Err(BusError::Protocol(_)) => prop_assert!(server.is_closed()),
            Err(e) => prop_assert!(false, "unexpected {e}"),
        }
    }
}

/// Goal: a Stream works between real threads on a real-time sim, each side blocking in `wait`
/// when idle, as the node's polling threads will. Method: a server thread echoes 200 KB sent
/// from the main thread. Loops are bounded by iteration counts, not by time.
#[test]
fn echo_between_threads_on_a_realtime_network() {
    let fabric = SimFabric::new_realtime(30, patient_rnr()).unwrap();
    let server_host = fabric.add_host().unwrap();
    let client_host = fabric.add_host().unwrap();
    let cfg = EndpointConfig::default();
    let mut l = server_host
        .listen(SocketAddr::from(([10, 0, 1, 9], 0)), &cfg)
        .unwrap();
    let at = l.local_addr();
    let total = 200_000usize;
    let server = std::thread::spawn(move || {
        let conn = loop {
            if let Some(c) = l.accept(Duration::from_secs(5)).unwrap() {
                break c;
            }
        };
        let mut s = Stream::server(conn, RX_SIZE_MIN).unwrap();
        let start = std::time::Instant::now();
        let (mut echoed, mut pending) = (0usize, Vec::new());
        let mut buf = vec![0u8; 32 * 1024];
        for _ in 0..1_000_000 {
            if echoed == total {
                break;
            }
            s.progress(start.elapsed()).unwrap();
            let n = s.read(&mut buf).unwrap();
            pending.extend_from_slice(&buf[..n]);
            let w = s.write(&pending).unwrap();
            pending.drain(..w);
            echoed += w;
            s.flush().unwrap();
            if n == 0 && w == 0 {
                s.wait(Duration::from_millis(1)).unwrap();
            }
        }
        // Keep the connection up until the client has read everything back.
        for _ in 0..100_000 {
            if s.progress(start.elapsed()).is_err() {
                break;
            }
            std::thread::sleep(Duration::from_micros(50));
        }
        echoed
    });
    let conn = client_host
        .connect(at, &cfg, Duration::from_secs(5))
        .unwrap();
    let mut c = Stream::client(conn, RX_SIZE_MIN).unwrap();
    let data: Vec<u8> = (0..total).map(|i| (i % 253) as u8).collect();
    let (mut sent, mut back) = (0usize, Vec::new());
    let mut buf = vec![0u8; 32 * 1024];
    let start = std::time::Instant::now();
    for _ in 0..1_000_000 {
        if back.len() == total {
            break;
        }
        c.progress(start.elapsed()).unwrap();
        sent += c.write(&data[sent..]).unwrap();
        c.flush().unwrap();
        let n = c.read(&mut buf).unwrap();
        back.extend_from_slice(&buf[..n]);
        if n == 0 {
            c.wait(Duration::from_millis(1)).unwrap();
        }
    }
    assert!(
        back == data,
        "echo differs ({} of {total} bytes back)",
        back.len()
    );
    c.close("done");
    assert_eq!(server.join().unwrap(), total);
}

/// RNR retries for tests on real threads: a peer thread may be descheduled for a long while
/// on a loaded machine before it posts its receives, so retry for up to a minute (verbs' RNR
/// retry of 7 means forever).
fn patient_rnr() -> Faults {
    Faults {
        rnr_delay: Duration::from_millis(1),
        rnr_retry_limit: 60_000,
        ..Faults::default()
    }
}

/// Goal: a Stream's RX buffer belongs to its connection: a third connection to the same host
/// that names it with the exact advert (as if leaked), from another host or from the peer's
/// own host, gets `RemoteAccess` for a WRITE and a READ, and the stream carries on unharmed.
/// Method: a client/server pair on two sim hosts, then rogue connections to each side aiming
/// at the RX window that side advertised to its legitimate peer.
#[test]
fn a_third_connection_cannot_reach_a_streams_rx() {
    let mut d = duo(21, Faults::default(), RX_SIZE_MIN);
    d.pump(Duration::from_micros(100));
    let server_rx = d.client.peer_rx.expect("the server advertised its RX");
    let client_rx = d.server.peer_rx.expect("the client advertised its RX");
    let cfg = EndpointConfig::default();
    let rogue_host = d.fabric.add_host().unwrap();
    let server_side = SocketAddr::from(([10, 0, 1, 1], 6390));
    let client_side = SocketAddr::from(([10, 0, 1, 2], 6390));
    let mut ls = d.server_host.listen(server_side, &cfg).unwrap();
    let mut lc = d.client_host.listen(client_side, &cfg).unwrap();
    let aims = [
        (rogue_host.clone(), server_side, server_rx),
        (d.client_host.clone(), server_side, server_rx),
        (rogue_host.clone(), client_side, client_rx),
        (d.server_host.clone(), client_side, client_rx),
    ];
    for (from, to, target) in aims {
        let mut rogue = from.connect(to, &cfg, Duration::ZERO).unwrap();
        let listener = if to == server_side { &mut ls } else { &mut lc };
        let _victim_end = listener.accept(Duration::ZERO).unwrap().unwrap();
        let buf = from.register(64, Access::LOCAL_WRITE).unwrap();
        let slice = LocalSlice {
            region: buf,
            offset: 0,
            len: 64,
        };
        let remote = RemoteSlice {
            region: target,
            offset: 0,
            len: 64,
        };
        rogue.post_write(1, slice.clone(), remote, None).unwrap();
        rogue.post_read(2, slice, remote).unwrap();
        d.fabric.run_until_idle(10_000);
        let mut out = Vec::new();
        rogue.poll(&mut out, 16).unwrap();
        let write = out.iter().find(|c| c.wr_id == 1).unwrap();
        assert_eq!(write.status, Err(WorkError::RemoteAccess), "{out:?}");
        // The READ was queued behind the refused WRITE: the queue pair is in error.
        let read = out.iter().find(|c| c.wr_id == 2).unwrap();
        assert!(read.status.is_err(), "{out:?}");
    }
    let data: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
    assert_eq!(echo(&mut d, &data, 5), data);
}

/// A pair whose server end starts with the pre-auth window.
fn preauth_duo(seed: u64) -> Duo {
    let h = hosts(seed, Faults::default());
    let (c, s) = h.conns;
    let client = Stream::client(c, RX_SIZE_MIN).unwrap();
    let server = Stream::server_preauth(s, RX_SIZE_MIN).unwrap();
    Duo {
        fabric: h.fabric,
        server_host: h.server_host,
        client_host: h.client_host,
        server,
        client,
    }
}

/// Client writes `n` bytes, the server reads them all (a drain point when `n` fills the
/// window).
fn fill_and_drain(d: &mut Duo, n: usize) {
    let data = vec![7u8; n];
    let mut sent = 0;
    let mut got = 0;
    let mut buf = vec![0u8; 64 * 1024];
    for _ in 0..10_000 {
        if got == n {
            return;
        }
        if sent < n {
            sent += d.client.write(&data[sent..]).unwrap();
        }
        d.pump(Duration::from_micros(20));
        got += d.server.read(&mut buf).unwrap();
    }
    panic!("only {got} of {n} bytes arrived");
}

/// Goal: an unproven peer gets an 8 KiB window; draining it gives the same small window
/// again until the full window is granted; after the grant, the next drain advertises a
/// fresh full-size buffer under a new key and address, and the old one is dead (a WRITE to
/// its advert is refused); the server's staging grows too (a reply larger than 4 KiB goes in
/// one piece).
#[test]
fn the_preauth_window_grows_only_after_the_grant_and_at_a_drain() {
    let mut d = preauth_duo(31);
    d.pump(Duration::from_micros(100));
    let first = d.client.peer_window().unwrap();
    assert_eq!(first.len, PREAUTH_RX_LEN as u64);
    assert!(!d.server.full_window_granted());
    fill_and_drain(&mut d, PREAUTH_RX_LEN);
    d.pump(Duration::from_micros(100));
    assert_eq!(
        d.client.peer_window().unwrap(),
        first,
        "not granted: same window"
    );

    d.server.grant_full_window();
    // Not before the drain: the client still has (part of) the small window.
    fill_and_drain(&mut d, 100);
    d.pump(Duration::from_micros(100));
    assert_eq!(d.client.peer_window().unwrap(), first);
    fill_and_drain(&mut d, PREAUTH_RX_LEN - 100);
    d.pump(Duration::from_micros(100));
    let full = d.client.peer_window().unwrap();
    assert_eq!(full.len, RX_SIZE_MIN as u64);
    assert_eq!(d.server.rx_window(), RX_SIZE_MIN);
    assert!(full.rkey != first.rkey || full.addr != first.addr);

    // The old window's key is dead: a WRITE aimed at it is refused.
    let src = d.client_host.register(8, Access::NONE).unwrap();
    let conn = d.client.conn.as_mut().unwrap();
    let remote = RemoteSlice {
        region: first,
        offset: 0,
        len: 8,
    };
    let slice = LocalSlice {
        region: src,
        offset: 0,
        len: 8,
    };
    conn.post_write(u64::MAX >> 8, slice, remote, None).unwrap();
    d.fabric.run_until_idle(10_000);
    let mut out = Vec::new();
    d.client.conn.as_mut().unwrap().poll(&mut out, 64).unwrap();
    let c = out.iter().find(|c| c.wr_id == u64::MAX >> 8).unwrap();
    assert_eq!(c.status, Err(WorkError::RemoteAccess));
}

/// Goal: a pre-auth server end posts only `PREAUTH_RECV_SLOTS` command receives (an idle
/// unproven peer costs that many); once granted it posts the rest of `RECV_SLOTS` in a
/// second region, and WRITEs that land in those slots, many in flight at once, deliver
/// their bytes in order.
#[test]
fn the_preauth_receive_slots_grow_after_the_grant() {
    let mut d = preauth_duo(33);
    d.pump(Duration::from_micros(100));
    assert_eq!(d.server.recv_slots(), PREAUTH_RECV_SLOTS);
    d.server.grant_full_window();
    d.pump(Duration::from_micros(100));
    assert_eq!(d.server.recv_slots(), RECV_SLOTS);
    // Each flush posts one WRITE WITH IMM, which consumes one receive: up to
    // DATA_WRITES_MAX (192) in flight need slots of the second region.
    let data: Vec<u8> = (0..3000u32).map(|i| (i % 251) as u8).collect();
    for piece in data.chunks(10) {
        assert_eq!(d.client.write(piece).unwrap(), piece.len());
        d.client.flush().unwrap();
    }
    let mut got = Vec::new();
    let mut buf = vec![0u8; 4096];
    for _ in 0..1000 {
        d.pump(Duration::from_micros(20));
        let n = d.server.read(&mut buf).unwrap();
        got.extend_from_slice(&buf[..n]);
        if got.len() == data.len() {
            break;
        }
    }
    assert_eq!(got, data);
    assert!(!d.server.is_closed());
}

/// Goal: the server's staging starts at 4 KiB and grows once granted and empty, so a proven
/// peer gets replies in full-window pieces; the bytes stay in order through the change.
#[test]
fn the_preauth_staging_grows_when_empty_after_the_grant() {
    let mut d = preauth_duo(32);
    d.pump(Duration::from_micros(100));
    let reply = vec![9u8; 20_000];
    // Before the grant: at most 4 KiB staged at once.
    assert_eq!(d.server.write(&reply).unwrap(), PREAUTH_TX_LEN);
    let mut buf = vec![0u8; 64 * 1024];
    let mut got = Vec::new();
    for _ in 0..1000 {
        d.server.flush().unwrap();
        d.pump(Duration::from_micros(20));
        let n = d.client.read(&mut buf).unwrap();
        got.extend_from_slice(&buf[..n]);
        if got.len() == PREAUTH_TX_LEN && d.server.unacknowledged() == 0 {
            break;
        }
    }
    assert_eq!(got.len(), PREAUTH_TX_LEN);
    d.server.grant_full_window();
    let more = d.server.write(&reply[PREAUTH_TX_LEN..]).unwrap();
    assert_eq!(
        more,
        reply.len() - PREAUTH_TX_LEN,
        "one piece after the grant"
    );
    for _ in 0..1000 {
        d.server.flush().unwrap();
        d.pump(Duration::from_micros(20));
        let n = d.client.read(&mut buf).unwrap();
        got.extend_from_slice(&buf[..n]);
        if got.len() == reply.len() {
            break;
        }
    }
    assert_eq!(got, reply);
}

/// Goal: a server end's window follows its client's traffic (issue 19, "grown on demand"):
/// it starts at `GRANTED_START_LEN` whatever `rdma-rx-size` says; a client sending small
/// requests one at a time never grows it, however many it sends; one that fills the window
/// doubles it at each drain up to `rdma-rx-size`; staging grows the same way when a reply
/// outgrows it; the bytes stay intact throughout.
#[test]
fn a_server_window_grows_with_its_clients_traffic_and_stays_small_when_idle() {
    let full = 16 * RX_SIZE_MIN;
    let mut d = duo_sized(34, Faults::default(), full, full);
    d.pump(Duration::from_micros(100));
    assert_eq!(d.server.rx_window(), GRANTED_START_LEN);
    assert_eq!(d.server.tx_staging(), GRANTED_START_LEN);
    assert_eq!(
        d.client.peer_window().unwrap().len,
        GRANTED_START_LEN as u64
    );

    // Small requests, each read as it lands: several drains, no growth.
    let mut buf = vec![0u8; 64 * 1024];
    // 128 bytes divide the window: each request fits whole before a drain.
    let request = [b'x'; 128];
    for _ in 0..(3 * GRANTED_START_LEN / request.len()) {
        assert_eq!(d.client.write(&request).unwrap(), request.len());
        d.client.flush().unwrap();
        d.pump(Duration::from_micros(20));
        assert_eq!(d.server.read(&mut buf).unwrap(), request.len());
        // Small replies: staging never runs short.
        assert_eq!(d.server.write(b"+OK\r\n").unwrap(), 5);
        d.server.flush().unwrap();
        d.pump(Duration::from_micros(20));
        assert_eq!(d.client.read(&mut buf).unwrap(), 5);
    }
    assert!(d.server.stats().rx_readvertised >= 2);
    assert_eq!(d.server.stats().window_grows, 0);
    assert_eq!(d.server.rx_window(), GRANTED_START_LEN);
    assert_eq!(d.server.tx_staging(), GRANTED_START_LEN);

    // A bulk writer: the window doubles at each drain until it is the full size.
    fill_and_drain(&mut d, 8 * full);
    d.pump(Duration::from_micros(100));
    assert_eq!(d.server.rx_window(), full);
    assert_eq!(d.client.peer_window().unwrap().len, full as u64);

    // A reply larger than staging: staging doubles each time it empties.
    let reply: Vec<u8> = (0..3 * full as u32).map(|i| (i % 253) as u8).collect();
    assert!(
        server_to_client(&mut d, &reply) == reply,
        "the reply arrived intact"
    );
    assert_eq!(d.server.tx_staging(), full);
    // 64 KiB to 1 MiB is four doublings each.
    assert_eq!(d.server.stats().window_grows, 8);
}

/// Client sends 128-byte requests (they divide any window), the server reading each as it
/// lands, until the server has re-advertised its window `drains` more times.
fn small_requests_until_drains(d: &mut Duo, drains: u64) {
    let target = d.server.stats().rx_readvertised + drains;
    let mut buf = vec![0u8; 4096];
    for _ in 0..100_000 {
        if d.server.stats().rx_readvertised >= target {
            return;
        }
        let request = [b'r'; 128];
        let mut sent = 0;
        while sent < request.len() {
            sent += d.client.write(&request[sent..]).unwrap();
            d.client.flush().unwrap();
            d.pump(Duration::from_micros(20));
        }
        let mut got = 0;
        while got < request.len() {
            got += d.server.read(&mut buf).unwrap();
            d.pump(Duration::from_micros(20));
        }
    }
    panic!("the server never drained {drains} windows");
}

/// Client writes `n` bytes at once; the server reads them only once all landed, in pieces.
fn burst(d: &mut Duo, n: usize) {
    let data = vec![b'b'; n];
    assert_eq!(
        d.client.write(&data).unwrap(),
        n,
        "the burst fits the window"
    );
    d.client.flush().unwrap();
    d.pump(Duration::from_micros(200));
    assert_eq!(
        d.server.readable(),
        n,
        "the whole burst landed before the read"
    );
    let mut buf = vec![0u8; 1000];
    let mut got = 0;
    while got < n {
        got += d.server.read(&mut buf).unwrap();
    }
}

/// Goal: the RX window's threshold and its reset (`window.rs`): a window whose client had
/// less than half of it unread at once is re-advertised at its size; one with half of it
/// unread grows once, at its drain; the windows after it, read as they land, do not grow.
#[test]
fn a_window_grows_once_for_a_burst_of_half_of_it_and_not_below() {
    let full = 16 * RX_SIZE_MIN;
    let mut d = duo_sized(35, Faults::default(), full, full);
    d.pump(Duration::from_micros(100));
    let start = GRANTED_START_LEN;
    burst(&mut d, start / 2 - 128);
    small_requests_until_drains(&mut d, 1);
    assert_eq!(d.server.rx_window(), start, "just under half: no growth");
    assert_eq!(d.server.stats().window_grows, 0);

    burst(&mut d, start / 2);
    small_requests_until_drains(&mut d, 1);
    assert_eq!(d.server.rx_window(), 2 * start, "half: grown once");
    d.pump(Duration::from_micros(100));
    assert_eq!(d.client.peer_window().unwrap().len, 2 * start as u64);

    small_requests_until_drains(&mut d, 2);
    assert_eq!(
        d.server.rx_window(),
        2 * start,
        "the peak was reset at the drain"
    );
    assert_eq!(d.server.stats().window_grows, 1);
}

/// Goal: closing a stream deregisters its regions at once (RX once what landed was read):
/// the peer's WRITE into the closed side's window is refused afterwards.
#[test]
fn close_drops_the_regions() {
    let mut d = duo(33, Faults::default(), RX_SIZE_MIN);
    d.pump(Duration::from_micros(100));
    let server_rx = d.client.peer_window().unwrap();
    assert!(d.server.holds_regions());
    d.client.write(b"unread").unwrap();
    d.client.flush().unwrap();
    d.pump(Duration::from_micros(100));
    d.pump(Duration::from_micros(100));
    d.server.close("test");
    assert!(
        d.server.holds_regions(),
        "6 unread bytes keep the RX buffer"
    );
    let mut buf = [0u8; 16];
    assert_eq!(d.server.read(&mut buf).unwrap(), 6);
    assert!(!d.server.holds_regions());
    // The client's raw WRITE into the dropped window: refused (its queue pair may also be
    // in error from the close, which fails it too; both mean nothing landed).
    let src = d.client_host.register(8, Access::NONE).unwrap();
    let remote = RemoteSlice {
        region: server_rx,
        offset: 0,
        len: 8,
    };
    let slice = LocalSlice {
        region: src,
        offset: 0,
        len: 8,
    };
    let conn = d.client.conn.as_mut().unwrap();
    let _ = conn.post_write(1 << 40, slice, remote, None);
    d.fabric.run_until_idle(10_000);
    let mut out = Vec::new();
    let _ = d.client.conn.as_mut().unwrap().poll(&mut out, 64);
    assert!(out.iter().all(|c| c.wr_id != 1 << 40 || c.status.is_err()));
}

/// Goal: a window whose growth the device refuses (registration fails: a memlock limit, a
/// full MR table) keeps its size and counts the failure; the client's bytes and a reply
/// larger than staging still arrive intact; once registrations succeed again, the next
/// drain grows it.
/// Method: the server's sim host refuses registrations above the start size after the
/// stream is up; a bulk writer and a large reply; the limit lifted; the bulk writer again.
#[test]
fn a_window_whose_growth_is_refused_keeps_its_size_and_its_bytes() {
    let full = 16 * RX_SIZE_MIN;
    let mut d = duo_sized(35, Faults::default(), full, full);
    d.pump(Duration::from_micros(100));
    assert_eq!(d.server.rx_window(), GRANTED_START_LEN);
    d.fabric
        .limit_registrations(d.server_host.host(), GRANTED_START_LEN);
    let request: Vec<u8> = (0..4 * full as u32).map(|i| (i % 251) as u8).collect();
    assert_eq!(
        client_to_server(&mut d, &request),
        request,
        "request intact"
    );
    let stats = d.server.stats();
    assert_eq!(stats.window_grows, 0);
    assert!(stats.window_grow_failures >= 1, "{stats:?}");
    assert_eq!(d.server.rx_window(), GRANTED_START_LEN);
    assert_eq!(
        d.client.peer_window().unwrap().len,
        GRANTED_START_LEN as u64
    );
    // A reply three times the full size goes through the start-size staging.
    let reply: Vec<u8> = (0..3 * full as u32).map(|i| (i % 253) as u8).collect();
    assert!(server_to_client(&mut d, &reply) == reply, "reply intact");
    assert_eq!(d.server.tx_staging(), GRANTED_START_LEN);
    assert_eq!(d.server.stats().window_grows, 0);
    // Registrations succeed again: the next drains grow the window.
    d.fabric
        .limit_registrations(d.server_host.host(), crate::sim::REGION_LEN_MAX);
    assert_eq!(
        client_to_server(&mut d, &request),
        request,
        "request intact"
    );
    assert!(d.server.stats().window_grows >= 1);
    assert!(d.server.rx_window() > GRANTED_START_LEN);
}

/// Client writes `data` as fast as the window lets it; the server reads as it lands;
/// returns what the server read.
fn client_to_server(d: &mut Duo, data: &[u8]) -> Vec<u8> {
    let (mut sent, mut got, mut buf) = (0, Vec::new(), vec![0u8; 64 * 1024]);
    // Bound: each round moves virtual time; a few rounds per window is plenty.
    for _ in 0..20_000 {
        if got.len() == data.len() {
            break;
        }
        if sent < data.len() {
            sent += d.client.write(&data[sent..]).unwrap();
            d.client.flush().unwrap();
        }
        d.pump(Duration::from_micros(20));
        let n = d.server.read(&mut buf).unwrap();
        got.extend_from_slice(&buf[..n]);
    }
    got
}

/// The server writes `data` as fast as its staging lets it; the client reads as it lands;
/// returns what the client read.
fn server_to_client(d: &mut Duo, data: &[u8]) -> Vec<u8> {
    let (mut sent, mut got, mut buf) = (0, Vec::new(), vec![0u8; 64 * 1024]);
    // Bound: each round moves virtual time; a few rounds per staging buffer is plenty.
    for _ in 0..20_000 {
        if got.len() == data.len() {
            break;
        }
        sent += d.server.write(&data[sent..]).unwrap();
        d.server.flush().unwrap();
        d.pump(Duration::from_micros(20));
        let n = d.client.read(&mut buf).unwrap();
        got.extend_from_slice(&buf[..n]);
    }
    got
}
