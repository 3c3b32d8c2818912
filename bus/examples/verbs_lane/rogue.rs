//! Goal: on verbs a peer reaches only the regions of its own connection (issue 15): each
//! connection has its own protection domain, so even the exact address and key of another
//! connection's region (as if leaked) get a remote access error; and against a real node
//! with a password, the rogue of `bus/examples/fabric_rogue` (guesses plus the victim
//! client's exact window) gets nothing while the victim's session goes on.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bus::stream::Stream;
use bus::verbs::VerbsConnection;
use bus::{Access, Connection, Provider, Region, RemoteRegion, RemoteSlice, WorkError};

use crate::node_stream::{encode, reply_len, Node, FABRIC_PORT, RX_SIZE};
use crate::{completions, config, ensure, guesses, pair, probe, provider, rxe_ip, slice, R, WAIT};

const PASSWORD: &str = "lane-password-5b1e";
const SECRET: &str = "lane-secret-value-0c77";

/// Two connections of one process (one device): connection B's peer cannot reach a region
/// of connection A with A's exact advert, while A's peer can; and a region of A is no local
/// buffer on B.
pub fn test_rc_foreign_pd() -> R {
    let p = provider()?;
    let (server_a, mut client_a) = pair(&p, 20131)?;
    let (_server_b, mut client_b) = pair(&p, 20132)?;
    let target = server_a.register(4096, Access::REMOTE_WRITE | Access::REMOTE_READ)?;
    let advert = target.remote()?;
    let dst = RemoteSlice {
        region: advert,
        offset: 0,
        len: 8,
    };
    let src_a = client_a.register(64, Access::NONE)?;
    src_a.store_u64(0, 0x1111)?;
    client_a.post_write(1, slice(&src_a, 0, 8), dst, None)?;
    completions(&mut client_a, 1, false)?;
    ensure(
        target.load_u64(0)? == 0x1111,
        "A's own peer could not write",
    )?;

    let src_b = client_b.register(64, Access::NONE)?;
    src_b.store_u64(0, 0x2222)?;
    client_b.post_write(2, slice(&src_b, 0, 8), dst, None)?;
    let done = completions(&mut client_b, 1, true)?;
    ensure(
        done[0].status == Err(WorkError::RemoteAccess),
        format!("B's peer wrote A's region: {:?}", done[0]),
    )?;
    ensure(target.load_u64(0)? == 0x1111, "A's region changed")?;
    // A's region is no local buffer on B's connection either.
    let r = client_b.post_write(3, slice(&src_a, 0, 8), dst, None);
    ensure(
        matches!(r, Err(bus::BusError::Invalid { .. })),
        format!("a region of another connection used locally: {r:?}"),
    )?;
    println!("foreign PD refused: {:?}", done[0].status);
    Ok(())
}

/// A victim client: AUTHs and writes a secret, leaves its bytes in the node's RX buffer.
struct Victim {
    stream: Stream<VerbsConnection>,
    started: Instant,
    pending: Vec<u8>,
}

impl Victim {
    fn call(&mut self, args: &[&[u8]]) -> R<Vec<u8>> {
        let mut request = encode(args);
        let deadline = Instant::now() + WAIT;
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            ensure(
                Instant::now() < deadline,
                "the node did not answer the victim",
            )?;
            self.stream.progress(self.started.elapsed())?;
            if !request.is_empty() {
                let n = self.stream.write(&request)?;
                request.drain(..n);
                self.stream.flush()?;
            }
            let n = self.stream.read(&mut buf)?;
            self.pending.extend_from_slice(&buf[..n]);
            if let Some(len) = reply_len(&self.pending)? {
                return Ok(self.pending.drain(..len).collect());
            }
            if n == 0 {
                self.stream.wait(Duration::from_millis(20))?;
            }
        }
    }
}

/// The rogue against a node with a password: guesses from its own window and from nothing,
/// plus the victim's exact window (the node's RX buffer holding the victim's AUTH and SET):
/// every READ and WRITE is refused, nothing secret is read, and the victim goes on.
pub fn test_rogue_stream() -> R {
    let mut node = Node::start_with(&["--requirepass", PASSWORD])?;
    let p = provider()?;
    let to = SocketAddr::new(rxe_ip(), FABRIC_PORT);
    let deadline = Instant::now() + WAIT;
    let conn = loop {
        if let Some(status) = node.exited()? {
            return Err(format!("node exited at start: {status}").into());
        }
        match p.connect(to, &config(), Duration::from_secs(5)) {
            Ok(c) => break c,
            Err(e) if Instant::now() < deadline => {
                println!("not yet: {e}");
                std::thread::sleep(Duration::from_millis(300));
            }
            Err(e) => return Err(e.into()),
        }
    };
    let mut victim = Victim {
        stream: Stream::client(conn, RX_SIZE)?,
        started: Instant::now(),
        pending: Vec::new(),
    };
    ensure(
        victim.call(&[b"AUTH", PASSWORD.as_bytes()])? == b"+OK\r\n",
        "AUTH",
    )?;
    ensure(
        victim.call(&[b"SET", b"secret", SECRET.as_bytes()])? == b"+OK\r\n",
        "SET",
    )?;
    let window: RemoteRegion = victim
        .stream
        .peer_window()
        .ok_or("the node advertised no window")?;
    let mut opts = probe::ProbeOptions::stream(Duration::from_millis(500), false, 2);
    opts.secrets = vec![PASSWORD.into(), SECRET.into()];
    let make = |own: Option<&RemoteRegion>| {
        probe::attempts_of(&guesses::guesses(own, guesses::Density::LANE, 7, &[window]))
    };
    let report = probe::probe(&p, to, make, &opts)?;
    println!("{}", report.line());
    for b in &report.breaches {
        println!("rogue-breach: {b}");
    }
    ensure(
        report.victim_held(),
        format!("the rogue got in: {}", report.line()),
    )?;
    ensure(
        victim.call(&[b"GET", b"secret"])?
            == format!("${}\r\n{SECRET}\r\n", SECRET.len()).as_bytes(),
        "the victim's session after the rogue",
    )
}
