//! Goal: the connections one ofi listener accepts share its one endpoint (the hub,
//! `bus/src/ofi/hub.rs`) without stepping on each other, over `tcp;ofi_rxm` (on `shm` every
//! accepted connection keeps an endpoint of its own: `shares_endpoint` in listener.rs):
//! - three peers' interleaved Streams each arrive intact and in order at their own
//!   connection;
//! - a peer that floods SENDs past its posted receives has its connection failed at its
//!   bounded queue, and the other peers go on being served;
//! - a peer closed while its WRITEs are in flight leaves the hub: its address, its inbox, and
//!   (once the provider finishes them) its operations' slots and the regions they held.
//!
//! Needs libfabric (`scripts/install-deps.sh`). Run: `cargo test -p bus --test ofi_hub`.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bus::ofi::{OfiKind, OfiProvider};
use bus::stream::{Stream, RX_SIZE_MIN};
use bus::{Access, BusError, Connection, EndpointConfig, Listener, LocalSlice, Provider, Region};

type Conn = <OfiProvider as Provider>::Conn;

const STEP_TIMEOUT: Duration = Duration::from_secs(20);
/// How long operations of a closed peer are given to finish.
const SETTLE: Duration = Duration::from_secs(5);
/// Bytes each peer streams: several times the 64 KiB window, so re-adverts interleave too.
const STREAM_BYTES: usize = 320 * 1024;
/// Bytes each peer hands its stream per turn (odd, so the pieces straddle the window edges).
const PIECE: usize = 1531;

fn config() -> EndpointConfig {
    EndpointConfig {
        send_wr: 1024,
        recv_wr: 1024,
        cq_size: 2048,
        ..Default::default()
    }
}

/// A listener and `n` connections to it: (connector sides, accepted sides).
fn peers(p: &OfiProvider, n: usize) -> (impl Listener, Vec<Conn>, Vec<Conn>) {
    let mut listener = p
        .listen(SocketAddr::from(([127, 0, 0, 1], 0)), &config())
        .unwrap();
    let addr = listener.local_addr();
    let mut clients = Vec::new();
    let mut accepted = Vec::new();
    for _ in 0..n {
        let connector = {
            let p = p.clone();
            std::thread::spawn(move || p.connect(addr, &config(), STEP_TIMEOUT).unwrap())
        };
        accepted.push(listener.accept(STEP_TIMEOUT).unwrap().expect("no HELLO"));
        clients.push(connector.join().unwrap());
    }
    (listener, clients, accepted)
}

/// What peer `peer` sends at stream offset `i`: distinct per peer and per position.
fn byte_of(peer: usize, i: usize) -> u8 {
    (i.wrapping_mul(31) ^ (i >> 8) ^ (peer * 85)) as u8
}

fn now(start: Instant) -> Duration {
    start.elapsed()
}

/// Streams `STREAM_BYTES` from every client to its server end, one piece per client per
/// turn, and checks every byte at the server end it was meant for.
fn interleaved_streams(clients: &mut [Stream<Conn>], servers: &mut [Stream<Conn>], start: Instant) {
    let n = clients.len();
    let mut sent = vec![0usize; n];
    let mut received = vec![0usize; n];
    let mut buf = vec![0u8; 64 * 1024];
    let deadline = Instant::now() + STEP_TIMEOUT * 3;
    while received.iter().any(|&r| r < STREAM_BYTES) {
        assert!(Instant::now() < deadline, "streams stalled at {received:?}");
        for peer in 0..n {
            let end = (sent[peer] + PIECE).min(STREAM_BYTES);
            let piece: Vec<u8> = (sent[peer]..end).map(|i| byte_of(peer, i)).collect();
            sent[peer] += clients[peer].write(&piece).unwrap();
            clients[peer].progress(now(start)).unwrap();
            servers[peer].progress(now(start)).unwrap();
            let got = servers[peer].read(&mut buf).unwrap();
            for (k, &b) in buf[..got].iter().enumerate() {
                let i = received[peer] + k;
                assert_eq!(
                    b,
                    byte_of(peer, i),
                    "peer {peer} byte {i} damaged or misrouted"
                );
            }
            received[peer] += got;
        }
    }
    assert_eq!(received, vec![STREAM_BYTES; n]);
}

/// Polls `conn` until it fails, progressing the others meanwhile; the error.
fn poll_until_failed(conn: &mut Conn, others: &mut [Stream<Conn>], start: Instant) -> BusError {
    let deadline = Instant::now() + STEP_TIMEOUT;
    let mut out = Vec::new();
    loop {
        if let Err(e) = conn.poll(&mut out, 64) {
            return e;
        }
        for s in others.iter_mut() {
            s.progress(now(start)).unwrap();
        }
        assert!(
            Instant::now() < deadline,
            "the flooded connection never failed"
        );
    }
}

/// Goal: on shm each accepted connection has an endpoint of its own (no hub to share).
#[test]
fn shm_connections_keep_endpoints_of_their_own() {
    let p = OfiProvider::open(OfiKind::Shm).expect("libfabric with shm (install-deps.sh)");
    let (_listener, _clients, accepted) = peers(&p, 2);
    assert!(!Arc::ptr_eq(accepted[0].hub(), accepted[1].hub()));
    assert_eq!(accepted[0].hub().peers(), 1);
}

#[test]
fn peers_of_one_hub_stream_apart_a_flood_is_cut_off_and_a_closed_peer_is_released() {
    three_peers(OfiKind::Tcp);
}

fn three_peers(kind: OfiKind) {
    let p = OfiProvider::open(kind).expect("libfabric with tcp;ofi_rxm and shm (install-deps.sh)");
    let start = Instant::now();
    let (_listener, clients, accepted) = peers(&p, 4);
    let hub = accepted[0].hub().clone();
    for c in &accepted {
        assert!(
            Arc::ptr_eq(c.hub(), &hub),
            "{kind:?}: an accepted connection has its own endpoint"
        );
    }
    assert_eq!(hub.peers(), 4);
    let mut clients = clients.into_iter();
    let mut accepted = accepted.into_iter();
    let mut flooder = clients.next().unwrap();
    let mut flooded = accepted.next().unwrap();
    let mut client_streams: Vec<Stream<Conn>> = clients
        .map(|c| Stream::client(c, RX_SIZE_MIN).unwrap())
        .collect();
    let mut server_streams: Vec<Stream<Conn>> = accepted
        .map(|c| Stream::server(c, RX_SIZE_MIN).unwrap())
        .collect();

    interleaved_streams(&mut client_streams, &mut server_streams, start);

    // The flooder SENDs far more than its server end has receives posted (none) and the
    // hub lets it queue (recv_wr + 64 messages, or 64 KiB).
    let src = flooder.register(64, Access::SEND).unwrap();
    src.write(0, &[7u8; 64]).unwrap();
    let flood = config().recv_wr as usize * 2;
    let mut posted = 0;
    let mut done = Vec::new();
    let deadline = Instant::now() + STEP_TIMEOUT;
    while posted < flood {
        assert!(
            Instant::now() < deadline,
            "{kind:?}: flood of {flood} posted {posted}"
        );
        let slice = LocalSlice {
            region: src.clone(),
            offset: 0,
            len: 32,
        };
        match flooder.post_send(posted as u64, slice) {
            Ok(()) => posted += 1,
            Err(BusError::Full { .. }) => {
                flooder.poll(&mut done, 64).unwrap();
                done.clear();
                // The others' polls drive the hub too, and route the flood to its inbox.
                for s in server_streams.iter_mut() {
                    s.progress(now(start)).unwrap();
                }
            }
            Err(e) => panic!("{kind:?}: flood send failed: {e}"),
        }
    }
    let error = poll_until_failed(&mut flooded, &mut server_streams, start);
    assert!(
        matches!(error, BusError::Protocol(_)),
        "{kind:?}: the flooded connection failed with {error:?}, not a protocol error"
    );
    drop(flooded);
    drop(flooder);
    assert_eq!(
        hub.peers(),
        3,
        "{kind:?}: the flooded connection stayed attached"
    );
    // The others did not notice.
    interleaved_streams(&mut client_streams, &mut server_streams, start);

    // The server writes a full window to the last client, which stops polling: on tcp and
    // shm data moves only inside the target's libfabric calls too, so the WRITEs stay in
    // flight. Then the server closes that connection.
    let (mut silent_server, mut others_server) = {
        let last = server_streams.pop().unwrap();
        (last, server_streams)
    };
    let silent_client = client_streams.pop().unwrap();
    let window = vec![1u8; RX_SIZE_MIN];
    let mut written = 0;
    let deadline = Instant::now() + STEP_TIMEOUT;
    while written < window.len() && Instant::now() < deadline {
        written += silent_server.write(&window[written..]).unwrap();
        silent_server.progress(now(start)).unwrap();
    }
    let in_flight_before_close = hub.in_flight();
    assert!(
        in_flight_before_close > 0,
        "{kind:?}: no WRITE in flight to the silent peer"
    );
    assert_eq!(hub.orphaned(), 0);
    silent_server.close("test: the server closes a peer with WRITEs in flight");
    assert!(!silent_server.holds_regions());
    assert_eq!(
        hub.peers(),
        2,
        "{kind:?}: the closed connection stayed attached"
    );
    // Its in-flight operations must end (completed or flushed) and give their slots back,
    // with the peer silent or gone: progress the rest for a while, then drop the peer.
    let settle = |others: &mut Vec<Stream<Conn>>, clients: &mut Vec<Stream<Conn>>| {
        let deadline = Instant::now() + SETTLE;
        while hub.in_flight() > 0 && Instant::now() < deadline {
            for s in others.iter_mut().chain(clients.iter_mut()) {
                s.progress(now(start)).unwrap();
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    };
    settle(&mut others_server, &mut client_streams);
    let left_while_silent = hub.in_flight();
    // Those left are the closed peer's, counted as orphaned (the others' all finished).
    assert_eq!(hub.orphaned(), left_while_silent);
    drop(silent_client);
    settle(&mut others_server, &mut client_streams);
    eprintln!(
        "{kind:?}: hub operations in flight: {in_flight_before_close} before the close, \
         {left_while_silent} while the closed peer stayed silent, {} after it went",
        hub.in_flight()
    );
    assert_eq!(
        hub.orphaned(),
        hub.in_flight(),
        "{kind:?}: orphans miscounted"
    );
    // The peer's transport connection went: its operations were flushed.
    assert_eq!(
        hub.in_flight(),
        0,
        "{kind:?}: operations of a closed peer kept their slots (and regions) on the hub"
    );
    // The remaining peers are still served.
    interleaved_streams(&mut client_streams, &mut others_server, start);
}
