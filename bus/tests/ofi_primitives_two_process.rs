//! Goal: the primitives written once over the contract (Ring, Stream, Datagram) work between
//! two real processes over the `ofi` provider, for `tcp;ofi_rxm` and `shm` (issue 3, the `ofi`
//! lane: "a Ring between two processes"):
//! - **Ring**: the reader process registers the ring and advertises it; the writer appends
//!   thousands of seeded records of random sizes, wrapping the ring many times and meeting
//!   `Full` (the reader holds back once until the writer has met it, so back-pressure is
//!   certain, not a matter of timing); acknowledgements come back by one-sided WRITE. The
//!   reader checks every record's content, order and count (nothing lost or duplicated, nothing
//!   after the last), and both processes exit cleanly. Then once more with both processes'
//!   endpoints opened with `FI_ORDER_NONE` for messages and completions ([`OfiOrdering::None`],
//!   issue 19: the ring must not need libfabric's ordering).
//! - **Stream**: an echo through the Valkey-over-RDMA framing: the client writes random-sized
//!   chunks totalling many RX windows, the server echoes them, the client checks every byte and
//!   both sides re-advertised their RX buffers.
//! - **Datagram**: framed messages of random sizes are echoed; raw datagrams injected under the
//!   framing (corrupt, foreign, short, wrong version, wrong length) are dropped and counted by
//!   kind, exactly, on both sides.
//!
//! Method: this binary (harness = false) is both sides. Run plainly it is the driving side (ring
//! writer, stream client, datagram sender): for each provider and primitive it re-executes
//! itself with `OFI_PRIM_ROLE` set, reads the child's address from its stdout and runs the
//! exchange; the child exits non-zero on any surprise. Ring adverts travel over a second
//! connection by SEND (the Ring API takes its connection whole; its adverts are carried by
//! whatever sets the ring up). Both sides keep polling throughout: tcp and shm move data only
//! inside libfabric calls.
//!
//! Seeded: `OFI_PRIM_SEED=<u64>` replays a run (the seed is printed). Needs libfabric
//! (`scripts/install-deps.sh`); `OFI_TEST_SKIP_UNAVAILABLE=1` turns its absence into a skip.
//! Run: `cargo test -p bus --test ofi_primitives_two_process`.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use bus::datagram::{frame, DatagramSocket, DatagramStats};
use bus::ofi::{OfiKind, OfiOrdering, OfiProvider};
use bus::ring::layout::RING_HEADER_LEN;
use bus::ring::{decode_advert, encode_advert, RingReader, RingWriter};
use bus::stream::{Stream, RX_SIZE_MIN};
use bus::{
    Access, BusError, Completion, Connection, DatagramEndpoint, EndpointAddr, EndpointConfig,
    Listener, LocalSlice, Op, Provider, Region,
};
use rand::rngs::SmallRng;
use rand::{Rng, RngCore, SeedableRng};

type Conn = <OfiProvider as Provider>::Conn;
type Reg = <OfiProvider as Provider>::Region;

/// Bound on every phase of an exchange (a run takes a few seconds per provider).
const PHASE_TIMEOUT: Duration = Duration::from_secs(30);
const DEFAULT_SEED: u64 = 0x0f1_5eed;

/// Ring data area: small, so the records below wrap it about two hundred times.
const RING_DATA_LEN: usize = 16 * 1024;
const RING_RECORDS: u64 = 3000;
/// Most records are at most this long; one in `RING_BIG_EVERY` has the largest payload.
const RING_RECORD_TYPICAL_MAX: usize = 2000;
const RING_BIG_EVERY: u64 = 50;
/// The reader stops taking records here until the writer reports it met `Full`.
const RING_HOLD_AT: u64 = 700;

/// The Stream echo: 16 windows of the smallest RX buffer each way.
const STREAM_RX: usize = RX_SIZE_MIN;
const STREAM_BYTES: usize = 16 * STREAM_RX + 4321;
const STREAM_CHUNK_MAX: usize = 40_000;
/// The byte the client sends after the echo to tell the server to finish.
const STREAM_END: u8 = b'!';

const DGRAM_MESSAGES: u32 = 300;
/// Every this many messages one raw (unframed or damaged) datagram is injected.
const DGRAM_GARBAGE_EVERY: u32 = 6;

// ------------------------------------------------------------------ shared helpers

fn kind_from_env() -> OfiKind {
    OfiKind::from_name(&std::env::var("OFI_PRIM_PROVIDER").unwrap()).unwrap()
}

/// The parent's provider ordering, passed to children as `OFI_PRIM_ORDERING=none`.
fn open_for_env(kind: OfiKind) -> OfiProvider {
    let ordering = match std::env::var("OFI_PRIM_ORDERING").as_deref() {
        Ok("none") => OfiOrdering::None,
        _ => OfiOrdering::AsAnswered,
    };
    OfiProvider::open_with_ordering(kind, ordering).unwrap()
}

fn seed_from_env() -> u64 {
    std::env::var("OFI_PRIM_SEED")
        .ok()
        .map(|s| s.parse().expect("OFI_PRIM_SEED is a u64"))
        .unwrap_or(DEFAULT_SEED)
}

/// Where a child listens: any free port (the default rendezvous is a TCP socket of the
/// listener's own, for shm as for tcp).
fn child_bind(_kind: OfiKind) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 0))
}

fn deadline() -> Instant {
    Instant::now() + PHASE_TIMEOUT
}

fn check_deadline(deadline: Instant, what: &str) {
    assert!(Instant::now() < deadline, "timed out: {what}");
}

/// Ring record `seq` of a run: its length and bytes follow from (seed, seq) alone, so the
/// reader checks content without being told it. The first 8 bytes (as many as fit) are `seq`.
fn ring_record(seed: u64, seq: u64, max_payload: usize) -> Vec<u8> {
    let mut rng = SmallRng::seed_from_u64(seed ^ seq.wrapping_mul(0x9e37_79b9_7f4a_7c15));
    let len = if seq % RING_BIG_EVERY == RING_BIG_EVERY - 1 {
        max_payload
    } else {
        rng.gen_range(0..=RING_RECORD_TYPICAL_MAX.min(max_payload))
    };
    let mut bytes = vec![0u8; len];
    rng.fill_bytes(&mut bytes);
    let head = len.min(8);
    bytes[..head].copy_from_slice(&seq.to_le_bytes()[..head]);
    bytes
}

fn stream_bytes(seed: u64) -> Vec<u8> {
    let mut bytes = vec![0u8; STREAM_BYTES];
    SmallRng::seed_from_u64(seed).fill_bytes(&mut bytes);
    bytes
}

/// Short control messages by SEND/RECV over a raw connection (the ring's advert channel).
struct Messenger {
    conn: Conn,
    recv: Reg,
    send: Reg,
    free_send_slots: Vec<usize>,
    inbox: VecDeque<Vec<u8>>,
    batch: Vec<Completion>,
}

const MSG_SLOT: usize = 256;
const MSG_SLOTS: usize = 16;
/// wr_ids of sends: this plus the slot, so they never look like receive slots.
const MSG_SEND_WR: u64 = 1 << 32;

impl Messenger {
    fn new(provider: &OfiProvider, conn: Conn) -> Messenger {
        let mut m = Messenger {
            conn,
            recv: provider
                .register(MSG_SLOT * MSG_SLOTS, Access::LOCAL_WRITE)
                .unwrap(),
            send: provider
                .register(MSG_SLOT * MSG_SLOTS, Access::SEND)
                .unwrap(),
            free_send_slots: (0..MSG_SLOTS).collect(),
            inbox: VecDeque::new(),
            batch: Vec::new(),
        };
        for slot in 0..MSG_SLOTS {
            m.post_recv(slot);
        }
        m
    }

    fn post_recv(&mut self, slot: usize) {
        let dst = LocalSlice {
            region: self.recv.clone(),
            offset: slot * MSG_SLOT,
            len: MSG_SLOT,
        };
        self.conn.post_recv(slot as u64, dst).unwrap();
    }

    /// One poll: received messages go to the inbox, send slots come back.
    fn pump(&mut self) {
        self.batch.clear();
        self.conn.poll(&mut self.batch, 16).unwrap();
        let batch = std::mem::take(&mut self.batch);
        for c in &batch {
            assert_eq!(c.status, Ok(()), "control connection: {c:?}");
            match c.op {
                Op::Recv => {
                    let slot = c.wr_id as usize;
                    let mut msg = vec![0u8; c.byte_len as usize];
                    self.recv.read(slot * MSG_SLOT, &mut msg).unwrap();
                    self.post_recv(slot);
                    self.inbox.push_back(msg);
                }
                Op::Send => self.free_send_slots.push((c.wr_id - MSG_SEND_WR) as usize),
                _ => panic!("control connection: unexpected {c:?}"),
            }
        }
        self.batch = batch;
    }

    fn send(&mut self, msg: &[u8]) {
        assert!(msg.len() <= MSG_SLOT);
        let end = deadline();
        let slot = loop {
            if let Some(slot) = self.free_send_slots.pop() {
                break slot;
            }
            check_deadline(end, "a free control send slot");
            self.pump();
        };
        self.send.write(slot * MSG_SLOT, msg).unwrap();
        let src = LocalSlice {
            region: self.send.clone(),
            offset: slot * MSG_SLOT,
            len: msg.len(),
        };
        // `Full`: poll, then post again (tcp;ofi_rxm says so until its connection is up).
        while let Err(e) = self.conn.post_send(MSG_SEND_WR + slot as u64, src.clone()) {
            assert!(matches!(e, BusError::Full { .. }), "post_send: {e}");
            check_deadline(end, "posting a control message");
            self.pump();
        }
    }

    fn try_recv(&mut self) -> Option<Vec<u8>> {
        if self.inbox.is_empty() {
            self.pump();
        }
        self.inbox.pop_front()
    }

    fn recv(&mut self, what: &str) -> Vec<u8> {
        let end = deadline();
        loop {
            if let Some(msg) = self.try_recv() {
                return msg;
            }
            check_deadline(end, what);
            self.conn.wait(Duration::from_millis(1)).unwrap();
        }
    }

    /// Polls until every send has completed (delivered, on tcp and shm), so the process may
    /// exit without losing its last message.
    fn finish_sends(&mut self) {
        let end = deadline();
        while self.free_send_slots.len() < MSG_SLOTS {
            check_deadline(end, "the last control sends to complete");
            self.pump();
        }
    }
}

// ------------------------------------------------------------------ child processes

fn run_child(role: &str) {
    let kind = kind_from_env();
    let seed = seed_from_env();
    let provider = open_for_env(kind);
    match role {
        "ring-reader" => ring_reader(&provider, kind, seed),
        "stream-server" => stream_server(&provider, kind),
        "datagram-peer" => datagram_peer(&provider),
        other => panic!("unknown role {other:?}"),
    }
}

fn ring_reader(provider: &OfiProvider, kind: OfiKind, seed: u64) {
    let config = EndpointConfig::default();
    let mut listener = provider.listen(child_bind(kind), &config).unwrap();
    println!("ready {}", listener.local_addr());
    // The writer connects the control connection first, then the ring's.
    let ctrl_conn = listener.accept(PHASE_TIMEOUT).unwrap().expect("no control");
    let ring_conn = listener.accept(PHASE_TIMEOUT).unwrap().expect("no ring");
    let mut ctrl = Messenger::new(provider, ctrl_conn);
    let mut reader = RingReader::create(ring_conn, RING_DATA_LEN).unwrap();
    ctrl.send(&encode_advert(&reader.advert().unwrap()));
    let ack = decode_advert(&ctrl.recv("the writer's ack advert")).unwrap();
    reader.set_writer_ack(ack).unwrap();

    let max_payload = reader.max_payload();
    let mut buf = Vec::new();
    let mut taken = 0u64;
    let mut writer_met_full = false;
    let started = std::time::Instant::now();
    let end = deadline();
    while taken < RING_RECORDS {
        check_deadline(end, "the ring's records");
        // Publishes the consumed offset and, on tcp/shm, lets the writer's WRITEs land.
        reader.poll(started.elapsed()).unwrap();
        if let Some(msg) = ctrl.try_recv() {
            assert_eq!(msg, b"full", "ring reader: unexpected control message");
            writer_met_full = true;
        }
        if taken == RING_HOLD_AT && !writer_met_full {
            std::thread::yield_now();
            continue;
        }
        // Bounded per round, so acks go out while records stream in.
        for _ in 0..64 {
            let Some(offset) = reader.next(&mut buf, started.elapsed()).unwrap() else {
                break;
            };
            let want = ring_record(seed, taken, max_payload);
            assert!(
                buf == want,
                "record {taken} at offset {offset}: {} bytes, want {} bytes{}",
                buf.len(),
                want.len(),
                if buf.len() >= 8 {
                    format!(
                        " (it names record {})",
                        u64::from_le_bytes(buf[..8].try_into().unwrap())
                    )
                } else {
                    String::new()
                }
            );
            taken += 1;
            if taken == RING_HOLD_AT || taken == RING_RECORDS {
                break;
            }
        }
    }
    // The writer says "done <head>" once all it appended is acknowledged; nothing may follow.
    let done = loop {
        check_deadline(end, "the writer's done");
        reader.poll(started.elapsed()).unwrap();
        if let Some(msg) = ctrl.try_recv() {
            break String::from_utf8(msg).unwrap();
        }
    };
    let head: u64 = done
        .strip_prefix("done ")
        .unwrap_or_else(|| panic!("ring reader: got {done:?}"))
        .parse()
        .unwrap();
    assert_eq!(
        reader.next(&mut buf, started.elapsed()).unwrap(),
        None,
        "a record after the last"
    );
    assert_eq!(reader.consumed(), head, "reader consumed != writer head");
    assert!(writer_met_full);
    ctrl.send(format!("ok {taken} {} {}", reader.consumed(), reader.not_ready()).as_bytes());
    ctrl.finish_sends();
}

fn stream_server(provider: &OfiProvider, kind: OfiKind) {
    let config = EndpointConfig::default();
    let mut listener = provider.listen(child_bind(kind), &config).unwrap();
    println!("ready {}", listener.local_addr());
    let conn = listener.accept(PHASE_TIMEOUT).unwrap().expect("no client");
    let mut stream = Stream::server(conn, STREAM_RX).unwrap();
    let start = Instant::now();
    let end = deadline();
    let mut buf = vec![0u8; 128 * 1024];
    let mut pending: VecDeque<u8> = VecDeque::new();
    let mut received = 0usize;
    loop {
        check_deadline(end, "the stream echo");
        stream.progress(start.elapsed()).unwrap();
        let n = stream.read(&mut buf).unwrap();
        for &b in &buf[..n] {
            if received == STREAM_BYTES {
                assert_eq!(b, STREAM_END, "stream server: a byte past the data");
                assert_eq!(pending.len(), 0);
                let s = stream.stats();
                eprintln!("stream server stats: {s:?}");
                assert!(s.rx_readvertised > 0 && s.protocol_errors == 0, "{s:?}");
                return;
            }
            pending.push_back(b);
            received += 1;
        }
        let (front, _) = pending.as_slices();
        let w = stream.write(front).unwrap();
        pending.drain(..w);
        stream.flush().unwrap();
        if n == 0 && w == 0 {
            stream.wait(Duration::from_micros(200)).unwrap();
        }
    }
}

fn datagram_peer(provider: &OfiProvider) {
    let config = EndpointConfig::default();
    let mut sock = DatagramSocket::new(provider.datagram(&config).unwrap()).unwrap();
    println!("ready {}", sock.local());
    let mut out = vec![0u8; sock.max_payload()];
    let end = deadline();
    loop {
        check_deadline(end, "the datagram exchange");
        let Some((from, n)) = sock.recv(&mut out).unwrap() else {
            sock.wait(Duration::from_millis(1)).unwrap();
            continue;
        };
        let msg = out[..n].to_vec();
        if let Some(expect) = msg.strip_prefix(b"bye ") {
            // "bye <messages> <garbage>": wait until all of it arrived (RDM is reliable, but
            // need not keep the garbage in order with the messages), then report.
            let expect = String::from_utf8(expect.to_vec()).unwrap();
            let (messages, garbage) = expect.split_once(' ').unwrap();
            let (messages, garbage): (u64, u64) =
                (messages.parse().unwrap(), garbage.parse().unwrap());
            while sock.stats().received < messages + 1 || sock.stats().dropped() < garbage {
                check_deadline(end, "the rest of the datagrams");
                if sock.recv(&mut out).unwrap().is_some() {
                    panic!("datagram peer: a message after bye");
                }
            }
            // One damaged datagram the other way, then the counts.
            let mut forged = Vec::new();
            frame::encode(b"from the peer", &mut forged);
            *forged.last_mut().unwrap() ^= 1;
            send_raw(sock.endpoint_mut(), &from, &forged);
            let report = stats_text(sock.stats());
            send_framed(&mut sock, &from, report.as_bytes());
            // Keep progressing a little so the last datagrams leave before the endpoint closes.
            let linger = Instant::now() + Duration::from_millis(200);
            while Instant::now() < linger {
                let _ = sock.recv(&mut out);
            }
            return;
        }
        send_framed(&mut sock, &from, &msg);
    }
}

fn stats_text(s: &DatagramStats) -> String {
    format!(
        "received={} short={} magic={} version={} length={} checksum={}",
        s.received,
        s.dropped_short,
        s.dropped_magic,
        s.dropped_version,
        s.dropped_length,
        s.dropped_checksum
    )
}

/// `send_to`, retried while the endpoint says `Full` (its outbox drains as it progresses).
fn send_framed<D: DatagramEndpoint>(sock: &mut DatagramSocket<D>, to: &EndpointAddr, msg: &[u8]) {
    let end = deadline();
    while let Err(e) = sock.send_to(to, msg) {
        assert!(matches!(e, BusError::Full { .. }), "send_to: {e}");
        check_deadline(end, "sending a datagram");
        sock.wait(Duration::from_micros(100)).unwrap();
    }
}

fn send_raw<D: DatagramEndpoint>(ep: &mut D, to: &EndpointAddr, bytes: &[u8]) {
    let end = deadline();
    while let Err(e) = ep.send_to(to, bytes) {
        assert!(matches!(e, BusError::Full { .. }), "raw send_to: {e}");
        check_deadline(end, "sending a raw datagram");
        ep.wait(Duration::from_micros(100)).unwrap();
    }
}

// ------------------------------------------------------------------ driving side

struct ChildGuard(Child);

impl ChildGuard {
    /// Waits for the child's exit while `progress` keeps our side moving (its last operations
    /// may need us to poll), and checks it succeeded.
    fn expect_success(&mut self, mut progress: impl FnMut()) {
        let end = deadline();
        let status = loop {
            if let Some(status) = self.0.try_wait().unwrap() {
                break status;
            }
            check_deadline(end, "the child's exit");
            progress();
            std::thread::sleep(Duration::from_millis(1));
        };
        assert!(status.success(), "child exited with {status}");
    }
}

impl Drop for ChildGuard {
    /// A child left running (this side failed) gets SIGTERM first: libfabric's shm provider
    /// removes its /dev/shm files on SIGTERM, not on SIGKILL.
    fn drop(&mut self) {
        if self.0.try_wait().ok().flatten().is_some() {
            return;
        }
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(self.0.id().to_string())
            .status();
        let end = Instant::now() + Duration::from_secs(2);
        while Instant::now() < end {
            if self.0.try_wait().ok().flatten().is_some() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts this binary as `role` and returns it with the text after "ready " on its stdout.
fn spawn_child(provider: &OfiProvider, role: &str, seed: u64) -> (ChildGuard, String) {
    let kind = provider.kind();
    let ordering = match provider.ordering() {
        OfiOrdering::None => "none",
        OfiOrdering::AsAnswered => "as-answered",
    };
    let mut child = Command::new(std::env::current_exe().unwrap())
        .env("OFI_PRIM_ROLE", role)
        .env("OFI_PRIM_ORDERING", ordering)
        .env("OFI_PRIM_PROVIDER", kind.name())
        .env("OFI_PRIM_SEED", seed.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let guard = ChildGuard(child);
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line).unwrap();
    let rest = line
        .trim()
        .strip_prefix("ready ")
        .unwrap_or_else(|| panic!("{role} said {line:?}"))
        .to_owned();
    (guard, rest)
}

fn ring_writer(provider: &OfiProvider, seed: u64) {
    let (mut child, addr) = spawn_child(provider, "ring-reader", seed);
    let addr: SocketAddr = addr.parse().unwrap();
    let config = EndpointConfig::default();
    let ctrl_conn = provider.connect(addr, &config, PHASE_TIMEOUT).unwrap();
    let ring_conn = provider.connect(addr, &config, PHASE_TIMEOUT).unwrap();
    let mut ctrl = Messenger::new(provider, ctrl_conn);
    let ring = decode_advert(&ctrl.recv("the ring advert")).unwrap();
    assert_eq!(ring.len as usize, RING_HEADER_LEN + RING_DATA_LEN);
    let mut writer = RingWriter::create(ring_conn, ring, &config).unwrap();
    ctrl.send(&encode_advert(&writer.ack_advert().unwrap()));
    let started = Instant::now();

    let max_payload = writer.max_payload();
    let (mut next, mut ring_full, mut queue_full) = (0u64, 0u64, 0u64);
    let mut record = ring_record(seed, next, max_payload);
    let end = deadline();
    while next < RING_RECORDS || !writer.is_drained() {
        check_deadline(end, "appending and draining the ring");
        if next < RING_RECORDS {
            match writer.append(&record) {
                Ok(_) => {
                    next += 1;
                    record = ring_record(seed, next, max_payload);
                }
                Err(BusError::Full { what: "ring" }) => {
                    ring_full += 1;
                    if ring_full == 1 {
                        ctrl.send(b"full");
                    }
                    // Leave the (shared, small) CPU to the reader a moment.
                    std::thread::yield_now();
                }
                Err(BusError::Full { .. }) => queue_full += 1,
                Err(e) => panic!("append: {e}"),
            }
        }
        writer.poll(started.elapsed()).unwrap();
        ctrl.pump();
    }
    assert!(ring_full > 0, "the writer met Full");
    assert!(
        writer.head() > 100 * RING_DATA_LEN as u64,
        "the ring wrapped about a hundred times or more ({} bytes)",
        writer.head()
    );
    ctrl.send(format!("done {}", writer.head()).as_bytes());
    let report = String::from_utf8(ctrl.recv("the reader's report")).unwrap();
    let fields: Vec<u64> = report
        .strip_prefix("ok ")
        .unwrap_or_else(|| panic!("reader said {report:?}"))
        .split(' ')
        .map(|f| f.parse().unwrap())
        .collect();
    assert_eq!(fields[0], RING_RECORDS, "records the reader took");
    assert_eq!(fields[1], writer.head(), "the reader's consumed offset");
    eprintln!(
        "  ring: {RING_RECORDS} records, {} bytes ({} laps), Full {ring_full}x (send queue \
         {queue_full}x, provider refused {}x), reader waited on a landing record {}x, resent \
         everything unacknowledged {}x",
        writer.head(),
        writer.head() / RING_DATA_LEN as u64,
        writer.provider_full(),
        fields[2],
        writer.resends()
    );
    child.expect_success(|| {
        let _ = writer.poll(started.elapsed());
        ctrl.pump();
    });
}

fn stream_client(provider: &OfiProvider, seed: u64) {
    let (mut child, addr) = spawn_child(provider, "stream-server", seed);
    let addr: SocketAddr = addr.parse().unwrap();
    let config = EndpointConfig::default();
    let conn = provider.connect(addr, &config, PHASE_TIMEOUT).unwrap();
    let mut stream = Stream::client(conn, STREAM_RX).unwrap();
    let data = stream_bytes(seed);
    let mut rng = SmallRng::seed_from_u64(seed ^ 0x5157);
    let start = Instant::now();
    let end = deadline();
    let (mut sent, mut back) = (0usize, 0usize);
    let mut buf = vec![0u8; 128 * 1024];
    while back < data.len() {
        check_deadline(end, "the stream echo");
        if sent < data.len() {
            let want = rng.gen_range(1..=STREAM_CHUNK_MAX).min(data.len() - sent);
            sent += stream.write(&data[sent..sent + want]).unwrap();
            stream.flush().unwrap();
        }
        stream.progress(start.elapsed()).unwrap();
        let n = stream.read(&mut buf).unwrap();
        assert!(
            buf[..n] == data[back..back + n],
            "echo differs in bytes {back}..{}",
            back + n
        );
        back += n;
        if n == 0 && sent == data.len() {
            stream.wait(Duration::from_micros(200)).unwrap();
        }
    }
    while stream.write(&[STREAM_END]).unwrap() == 0 {
        check_deadline(end, "room for the end byte");
        stream.progress(start.elapsed()).unwrap();
    }
    stream.flush().unwrap();
    let s = stream.stats().clone();
    assert!(s.rx_readvertised > 0 && s.protocol_errors == 0, "{s:?}");
    eprintln!(
        "  stream: {} bytes echoed through {STREAM_RX}-byte windows; client stats {s:?}",
        data.len()
    );
    child.expect_success(|| {
        // The server exits once it has the end byte; errors after that are its goodbye.
        let _ = stream.progress(start.elapsed());
    });
}

/// The raw datagrams injected under the framing, in turn; each names the counter it must hit.
fn garbage(i: u32) -> (Vec<u8>, &'static str) {
    let mut f = Vec::new();
    frame::encode(format!("garbage {i}").as_bytes(), &mut f);
    match i % 5 {
        0 => {
            *f.last_mut().unwrap() ^= 0x40;
            (f, "checksum")
        }
        1 => (b"GET / HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(), "magic"),
        2 => (b"RBU".to_vec(), "short"),
        3 => {
            f[4] = 9;
            (f, "version")
        }
        _ => {
            f.push(0);
            (f, "length")
        }
    }
}

fn datagram_sender(provider: &OfiProvider, seed: u64) {
    let (mut child, addr) = spawn_child(provider, "datagram-peer", seed);
    let peer: EndpointAddr = addr.parse().unwrap();
    let config = EndpointConfig::default();
    let mut sock = DatagramSocket::new(provider.datagram(&config).unwrap()).unwrap();
    let mut rng = SmallRng::seed_from_u64(seed ^ 0xda7a);
    let max = sock.max_payload();
    let messages: Vec<Vec<u8>> = (0..DGRAM_MESSAGES)
        .map(|i| {
            let len = if i % 37 == 0 {
                max
            } else {
                rng.gen_range(4..=max)
            };
            let mut m = vec![0u8; len];
            rng.fill_bytes(&mut m);
            m[..4].copy_from_slice(&i.to_le_bytes());
            m
        })
        .collect();
    let mut echoed = vec![false; messages.len()];
    let mut out = vec![0u8; max];
    let mut want_dropped = [0u64; 5]; // short, magic, version, length, checksum
    let mut garbage_sent = 0u64;
    let mut take_echoes = |sock: &mut DatagramSocket<_>, out: &mut [u8]| {
        while let Some((from, n)) = sock.recv(out).unwrap() {
            assert_eq!(from, peer, "an echo from someone else");
            assert!(n >= 4, "a short echo");
            let i = u32::from_le_bytes(out[..4].try_into().unwrap()) as usize;
            assert!(
                i < messages.len() && !echoed[i],
                "echo {i} unknown or twice"
            );
            assert!(out[..n] == messages[i], "echo {i} differs");
            echoed[i] = true;
        }
        echoed.iter().all(|e| *e)
    };
    for (i, m) in messages.iter().enumerate() {
        send_framed(&mut sock, &peer, m);
        if i as u32 % DGRAM_GARBAGE_EVERY == DGRAM_GARBAGE_EVERY - 1 {
            let (bytes, counter) = garbage(i as u32 / DGRAM_GARBAGE_EVERY);
            send_raw(sock.endpoint_mut(), &peer, &bytes);
            garbage_sent += 1;
            let slot = ["short", "magic", "version", "length", "checksum"]
                .iter()
                .position(|c| *c == counter)
                .unwrap();
            want_dropped[slot] += 1;
        }
        take_echoes(&mut sock, &mut out);
    }
    let end = deadline();
    while !take_echoes(&mut sock, &mut out) {
        check_deadline(end, "every echo");
        sock.wait(Duration::from_millis(1)).unwrap();
    }
    send_framed(
        &mut sock,
        &peer,
        format!("bye {DGRAM_MESSAGES} {garbage_sent}").as_bytes(),
    );
    // The peer's report, and the one damaged datagram it sends us first (in either order).
    let report = loop {
        check_deadline(end, "the peer's report");
        if let Some((_, n)) = sock.recv(&mut out).unwrap() {
            break String::from_utf8(out[..n].to_vec()).unwrap();
        }
        sock.wait(Duration::from_millis(1)).unwrap();
    };
    while sock.stats().dropped() == 0 {
        check_deadline(end, "the peer's damaged datagram");
        assert!(
            sock.recv(&mut out).unwrap().is_none(),
            "a message after the report"
        );
        sock.wait(Duration::from_millis(1)).unwrap();
    }
    let want = format!(
        "received={} short={} magic={} version={} length={} checksum={}",
        DGRAM_MESSAGES + 1,
        want_dropped[0],
        want_dropped[1],
        want_dropped[2],
        want_dropped[3],
        want_dropped[4]
    );
    assert_eq!(report, want, "the peer's counts");
    let ours = sock.stats().clone();
    assert_eq!(
        (ours.received, ours.dropped_checksum, ours.dropped()),
        (u64::from(DGRAM_MESSAGES) + 1, 1, 1),
        "our counts: {ours:?}"
    );
    eprintln!("  datagram: {DGRAM_MESSAGES} echoed, {garbage_sent} raw injected; peer {report}");
    child.expect_success(|| {
        let _ = sock.recv(&mut out);
    });
}

fn main() {
    if let Ok(role) = std::env::var("OFI_PRIM_ROLE") {
        run_child(&role);
        return;
    }
    let seed = seed_from_env();
    eprintln!("ofi_primitives_two_process: seed {seed} (replay with OFI_PRIM_SEED={seed})");
    type Exchange = fn(&OfiProvider, u64);
    let exchanges: [(&str, Exchange); 3] = [
        ("ring", ring_writer),
        ("stream", stream_client),
        ("datagram", datagram_sender),
    ];
    for kind in [OfiKind::Tcp, OfiKind::Shm] {
        let provider = match OfiProvider::open(kind) {
            Ok(p) => p,
            Err(e @ BusError::Unavailable { .. })
                if std::env::var_os("OFI_TEST_SKIP_UNAVAILABLE").is_some() =>
            {
                eprintln!("skipping {}: {e}", kind.name());
                continue;
            }
            Err(e) => panic!("{}: {e}", kind.name()),
        };
        for (name, exchange) in exchanges {
            let started = Instant::now();
            eprintln!("ofi_primitives_two_process: {} {name}", kind.name());
            exchange(&provider, seed);
            eprintln!(
                "ofi_primitives_two_process: {} {name} ok ({:.2?})",
                kind.name(),
                started.elapsed()
            );
        }
        // Issue 19: the ring needs no ordering from libfabric. Both processes open their
        // endpoints with FI_ORDER_NONE for messages and completions, where the provider
        // answered what it orders (printed), and the ring exchange runs again.
        let unordered = OfiProvider::open_with_ordering(kind, OfiOrdering::None).unwrap();
        let started = Instant::now();
        eprintln!(
            "ofi_primitives_two_process: {} ring, endpoints opened with FI_ORDER_NONE \
             (fi_getinfo answered msg_order {:#x})",
            kind.name(),
            unordered.answered_msg_order()
        );
        ring_writer(&unordered, seed);
        eprintln!(
            "ofi_primitives_two_process: {} ring with FI_ORDER_NONE ok ({:.2?})",
            kind.name(),
            started.elapsed()
        );
    }
}
