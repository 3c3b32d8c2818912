//! Goal: the fabric listener serves the same commands as TCP. Method: a real `Server`, the
//! listener on a real-time `sim` network, and a client Stream on a second simulated host that
//! sends RESP and reads the replies back, including a pipeline larger than the RX window and a
//! blocking command woken by another client.

use super::listener;
use crate::config::Config;
use crate::node_state::stats::Stats;
use crate::server::Server;
use bus::sim::{Faults, SimFabric, SimProvider};
use bus::stream::Stream;
use bus::{EndpointConfig, Provider};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

const RX: usize = 64 * 1024;
const DEADLINE: Duration = Duration::from_secs(30);

struct Client {
    stream: Stream<<SimProvider as Provider>::Conn>,
    started: Instant,
}

impl Client {
    fn connect(host: &SimProvider, to: SocketAddr) -> Client {
        let conn = host
            .connect(to, &EndpointConfig::default(), Duration::from_secs(5))
            .unwrap();
        Client {
            stream: Stream::client(conn, RX).unwrap(),
            started: Instant::now(),
        }
    }

    fn send(&mut self, mut data: &[u8]) {
        let until = Instant::now() + DEADLINE;
        while !data.is_empty() {
            self.stream.progress(self.started.elapsed()).unwrap();
            let n = self.stream.write(data).unwrap();
            data = &data[n..];
            self.stream.flush().unwrap();
            assert!(Instant::now() < until, "send stalled");
        }
    }

    /// Reads until `expected_len` bytes arrived.
    fn recv(&mut self, expected_len: usize) -> Vec<u8> {
        let until = Instant::now() + DEADLINE;
        let mut out = Vec::new();
        let mut buf = vec![0u8; 64 * 1024];
        while out.len() < expected_len {
            // A server that closes after its last reply shows up here as an error; what it
            // wrote before is still readable.
            let _ = self.stream.progress(self.started.elapsed());
            let n = self.stream.read(&mut buf).unwrap();
            out.extend_from_slice(&buf[..n]);
            if n == 0 {
                std::thread::sleep(Duration::from_micros(50));
            }
            assert!(
                Instant::now() < until,
                "reply stalled: {:?}",
                String::from_utf8_lossy(&out)
            );
        }
        out
    }

    fn call(&mut self, request: &[u8], expected: &[u8]) {
        self.send(request);
        let got = self.recv(expected.len());
        assert_eq!(
            String::from_utf8_lossy(&got),
            String::from_utf8_lossy(expected)
        );
    }
}

fn start() -> (Arc<Server>, SimFabric, listener::FabricListener) {
    start_with(false)
}

fn start_with(protected_mode: bool) -> (Arc<Server>, SimFabric, listener::FabricListener) {
    start_config(Config {
        protected_mode,
        ..Config::default()
    })
}

fn start_config(mut config: Config) -> (Arc<Server>, SimFabric, listener::FabricListener) {
    config.fabric.rx_size = RX as u64;
    crate::commands::install_table();
    let server = Arc::new(Server::new(config));
    let fabric = SimFabric::new_realtime(7, Faults::default()).unwrap();
    let host = fabric.add_host().unwrap();
    let bind: SocketAddr = "10.0.0.1:16379".parse().unwrap();
    let l = listener::start(server.clone(), host, bind).unwrap();
    (server, fabric, l)
}

fn stop(server: &Server, l: listener::FabricListener) {
    server.shutdown.trigger(Default::default());
    for c in server.clients.all() {
        c.kill();
    }
    l.join();
}

#[test]
fn commands_over_a_fabric_stream() {
    let (server, fabric, l) = start();
    let host = fabric.add_host().unwrap();
    let mut c = Client::connect(&host, l.local);
    c.call(b"PING\r\n", b"+PONG\r\n");
    c.call(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$2\r\nv1\r\n", b"+OK\r\n");
    c.call(b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n", b"$2\r\nv1\r\n");
    c.call(
        b"NOSUCH\r\n",
        b"-ERR unknown command 'NOSUCH', with args beginning with: \r\n",
    );
    // A pipeline whose replies are several times the 64 KiB window: the server must wait for
    // the client to drain and re-advertise, not drop or reorder anything.
    let n = 5000;
    let mut req = Vec::new();
    let mut want = Vec::new();
    for i in 0..n {
        req.extend_from_slice(b"*2\r\n$4\r\nINCR\r\n$3\r\nctr\r\n");
        want.extend_from_slice(format!(":{}\r\n", i + 1).as_bytes());
    }
    req.extend_from_slice(b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n");
    want.extend_from_slice(b"$2\r\nv1\r\n");
    c.send(&req);
    let got = c.recv(want.len());
    assert_eq!(got, want);
    assert_eq!(server.clients.count(), 1);
    assert_eq!(Stats::get(&server.stats.fabric_connected_clients), 1);
    assert!(Stats::get(&server.stats.fabric_connections_received) >= 1);
    stop(&server, l);
    assert_eq!(Stats::get(&server.stats.fabric_connected_clients), 0);
}

/// Goal: a client that sends a pipeline and says goodbye at once, without waiting for the
/// replies, has every request run (as a TCP server runs what came before a FIN), and the
/// node counts the goodbye and lets the client go.
#[test]
fn requests_sent_just_before_a_goodbye_are_run() {
    let (server, fabric, l) = start();
    let host = fabric.add_host().unwrap();
    let mut c = Client::connect(&host, l.local);
    c.call(b"PING\r\n", b"+PONG\r\n");
    let mut req = Vec::new();
    for _ in 0..200 {
        req.extend_from_slice(b"*2\r\n$4\r\nINCR\r\n$3\r\nctr\r\n");
    }
    req.extend_from_slice(b"*3\r\n$3\r\nSET\r\n$4\r\nlast\r\n$1\r\n1\r\n");
    c.send(&req);
    let until = Instant::now() + DEADLINE;
    loop {
        c.stream.progress(c.started.elapsed()).unwrap();
        match c.stream.begin_goodbye() {
            Ok(()) => break,
            Err(bus::BusError::Full { .. }) => assert!(Instant::now() < until, "no goodbye"),
            Err(e) => panic!("{e}"),
        }
    }
    while Stats::get(&server.stats.fabric_clients_said_goodbye) == 0 {
        let _ = c.stream.progress(c.started.elapsed());
        assert!(Instant::now() < until, "the goodbye was not counted");
        std::thread::sleep(Duration::from_millis(1));
    }
    let mut other = Client::connect(&host, l.local);
    other.call(b"*2\r\n$3\r\nGET\r\n$3\r\nctr\r\n", b"$3\r\n200\r\n");
    other.call(b"*2\r\n$3\r\nGET\r\n$4\r\nlast\r\n", b"$1\r\n1\r\n");
    stop(&server, l);
}

#[test]
fn blocking_command_is_woken_by_another_fabric_client() {
    let (server, fabric, l) = start();
    let host = fabric.add_host().unwrap();
    let mut waiter = Client::connect(&host, l.local);
    let mut pusher = Client::connect(&host, l.local);
    waiter.send(b"*3\r\n$5\r\nBLPOP\r\n$1\r\nq\r\n$1\r\n0\r\n");
    // Let the BLPOP park before the push (the result is the same either way).
    let until = Instant::now() + DEADLINE;
    while server.clients.blocked_count() == 0 {
        assert!(Instant::now() < until, "BLPOP never blocked");
        std::thread::sleep(Duration::from_millis(1));
    }
    pusher.call(b"*3\r\n$5\r\nRPUSH\r\n$1\r\nq\r\n$1\r\nx\r\n", b":1\r\n");
    let want = b"*2\r\n$1\r\nq\r\n$1\r\nx\r\n";
    let got = waiter.recv(want.len());
    assert_eq!(got, want);
    // A timeout answers with a null array.
    waiter.call(
        b"*3\r\n$5\r\nBLPOP\r\n$1\r\nq\r\n$4\r\n0.05\r\n",
        b"*-1\r\n",
    );
    stop(&server, l);
}

/// Protected mode without a password refuses fabric clients on a non-loopback listener, with
/// the same DENIED text as TCP, and closes them.
#[test]
fn protected_mode_refuses_fabric_clients_on_a_public_listener() {
    let (server, fabric, l) = start_with(true);
    let host = fabric.add_host().unwrap();
    let mut c = Client::connect(&host, l.local);
    let want = crate::server::listener::PROTECTED_MODE_DENIAL;
    let got = c.recv(want.len());
    assert_eq!(got, want);
    stop(&server, l);
}

/// A poller stuck inside one call (here: a command waiting on a keyspace lock the test holds,
/// standing in for libfabric shm spinning on a lock a killed peer held) does not take the
/// listener down: after the watchdog's limit a new client is served by a replacement poller,
/// and the stuck client gets its reply once the call returns.
#[test]
fn a_stuck_poller_does_not_stop_new_clients() {
    let (server, fabric, l) = start();
    let host = fabric.add_host().unwrap();
    let mut stuck = Client::connect(&host, l.local);
    stuck.call(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n", b"+OK\r\n");
    let shard = crate::db::keyspace::shard_of_slot(proto::slot::key_slot(b"k"));
    let held = server.keyspace.lock_shard(shard);
    stuck.send(b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n");
    // Connect once the watchdog has judged the poller stuck: a client admitted before would
    // be taken by the stuck poller, and its clients wait with it.
    let until = Instant::now() + DEADLINE;
    while Stats::get(&server.stats.fabric_poller_stalls) == 0 {
        assert!(Instant::now() < until, "the watchdog never saw the stall");
        std::thread::sleep(Duration::from_millis(10));
    }
    // The stuck poller's client is served by nobody: counted stranded, not connected.
    let gauges = || {
        (
            Stats::get(&server.stats.fabric_connected_clients),
            Stats::get(&server.stats.fabric_stranded_clients),
        )
    };
    assert_eq!(gauges(), (0, 1));
    let mut fresh = Client::connect(&host, l.local);
    fresh.call(b"PING\r\n", b"+PONG\r\n");
    assert_eq!(gauges(), (1, 1));
    // INFO's connected_clients leaves the stranded one out (both stay registered).
    assert_eq!((server.clients.count(), server.connected_clients()), (2, 1));
    drop(held);
    assert_eq!(stuck.recv(7), b"$1\r\nv\r\n");
    fresh.call(b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n", b"$1\r\nv\r\n");
    // Running again, the poller's client counts as connected again (the watchdog moves it
    // between its looks, a few times a second).
    let until = Instant::now() + DEADLINE;
    while gauges() != (2, 0) {
        assert!(
            Instant::now() < until,
            "the poller never counted as running again: {:?}",
            gauges()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(server.connected_clients(), 2);
    stop(&server, l);
}

fn with_password(unauthenticated_max: u64) -> Config {
    let mut config = Config {
        requirepass: Some("sesame".into()),
        ..Config::default()
    };
    config.fabric.unauthenticated_max = unauthenticated_max;
    config
}

impl Client {
    /// Progresses the stream for a moment (control messages, adverts).
    fn settle(&mut self) {
        let until = Instant::now() + Duration::from_millis(50);
        while Instant::now() < until {
            let _ = self.stream.progress(self.started.elapsed());
            std::thread::sleep(Duration::from_micros(200));
        }
    }
}

/// Goal: with a password, an unauthenticated client is given an 8 KiB window, never
/// `rdma-rx-size`; once AUTH succeeded and it filled that window, the node advertises a
/// fresh full-size window under a new key, and a pipeline larger than it flows.
#[test]
fn an_unauthenticated_client_gets_the_small_window_until_auth() {
    let (server, fabric, l) = start_config(with_password(64));
    let host = fabric.add_host().unwrap();
    let mut c = Client::connect(&host, l.local);
    c.settle();
    let small = c
        .stream
        .peer_window()
        .expect("the node advertised a window");
    assert_eq!(small.len, bus::stream::PREAUTH_RX_LEN as u64);
    c.call(b"PING\r\n", b"-NOAUTH Authentication required.\r\n");
    c.call(b"AUTH sesame\r\n", b"+OK\r\n");
    // Up to the end of the small window (8 KiB of requests), the window stays.
    let ping = b"*1\r\n$4\r\nPING\r\n";
    let mut sent = b"PING\r\n".len() + b"AUTH sesame\r\n".len();
    while sent + ping.len() + 40 <= bus::stream::PREAUTH_RX_LEN {
        c.call(ping, b"+PONG\r\n");
        sent += ping.len();
    }
    assert_eq!(c.stream.peer_window().unwrap(), small);
    // Fill the rest exactly: the node drains it and re-advertises the full window.
    let rest = bus::stream::PREAUTH_RX_LEN - sent;
    // `*2\r\n$4\r\nECHO\r\n$NN\r\n` is 19 bytes for a two-digit pad, then the pad, `\r\n`.
    let pad = "x".repeat(rest - 21);
    let echo = format!("*2\r\n$4\r\nECHO\r\n${}\r\n{pad}\r\n", pad.len());
    assert_eq!(
        echo.len(),
        rest,
        "the padding request fills the window exactly"
    );
    c.call(
        echo.as_bytes(),
        format!("${}\r\n{pad}\r\n", pad.len()).as_bytes(),
    );
    c.settle();
    let full = c.stream.peer_window().unwrap();
    assert_eq!(full.len, RX as u64);
    assert!(full.rkey != small.rkey || full.addr != small.addr);
    let mut req = Vec::new();
    let mut want = Vec::new();
    for i in 0..3000 {
        req.extend_from_slice(b"*2\r\n$4\r\nINCR\r\n$1\r\nn\r\n");
        want.extend_from_slice(format!(":{}\r\n", i + 1).as_bytes());
    }
    c.send(&req);
    assert_eq!(c.recv(want.len()), want);
    stop(&server, l);
}

/// Goal: at most `rdma-unauthenticated-max` clients wait for AUTH: one more closes the
/// oldest waiting one (an authenticated one does not count), and the others are served.
#[test]
fn past_the_unauthenticated_limit_the_oldest_waiting_client_is_closed() {
    let (server, fabric, l) = start_config(with_password(2));
    let host = fabric.add_host().unwrap();
    let mut authed = Client::connect(&host, l.local);
    authed.call(b"AUTH sesame\r\n", b"+OK\r\n");
    let mut first = Client::connect(&host, l.local);
    first.settle();
    let mut second = Client::connect(&host, l.local);
    second.settle();
    assert_eq!(Stats::get(&server.stats.fabric_unauthenticated_closed), 0);
    let mut third = Client::connect(&host, l.local);
    let until = Instant::now() + DEADLINE;
    while !first.stream.is_closed() {
        let _ = first.stream.progress(first.started.elapsed());
        assert!(
            Instant::now() < until,
            "the oldest unauthenticated client stayed"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(Stats::get(&server.stats.fabric_unauthenticated_closed), 1);
    second.call(b"PING\r\n", b"-NOAUTH Authentication required.\r\n");
    third.call(b"AUTH sesame\r\n", b"+OK\r\n");
    authed.call(b"PING\r\n", b"+PONG\r\n");
    stop(&server, l);
}

/// Goal: an unauthenticated client may not pend more than 8 KiB of input: a request that
/// never ends (a huge bulk header, then its bytes) closes it.
#[test]
fn an_unauthenticated_client_pending_too_much_input_is_closed() {
    let (server, fabric, l) = start_config(with_password(64));
    let host = fabric.add_host().unwrap();
    let mut c = Client::connect(&host, l.local);
    // Within the pre-auth bulk limit (16 KiB), but more than 8 KiB left pending.
    let mut req = b"*2\r\n$4\r\nECHO\r\n$16000\r\n".to_vec();
    req.extend(std::iter::repeat_n(b'y', 12_000));
    c.send(&req);
    let until = Instant::now() + DEADLINE;
    while !c.stream.is_closed() {
        let _ = c.stream.progress(c.started.elapsed());
        assert!(Instant::now() < until, "the client was not closed");
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(Stats::get(&server.stats.fabric_unauthenticated_closed), 1);
    stop(&server, l);
}

/// Goal: an idle poller blocks instead of sleeping when it can, and its doorbell brings it
/// back for a new client. Pollers without clients block on their doorbells alone (no
/// sleeps while the node is idle); the simulated provider has no descriptor to wait on, so a
/// poller serving one of its clients sleeps in steps, as on libfabric's shm.
#[test]
fn idle_pollers_block_until_their_doorbell_or_sleep_without_a_descriptor() {
    let (server, fabric, l) = start();
    let counts = || {
        (
            Stats::get(&server.stats.fabric_poller_blocks),
            Stats::get(&server.stats.fabric_poller_sleeps),
        )
    };
    let until = Instant::now() + DEADLINE;
    while counts().0 == 0 {
        assert!(Instant::now() < until, "no idle poller ever blocked");
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        counts().1,
        0,
        "a poller without clients slept instead of blocking"
    );
    let bell_wakes = Stats::get(&server.stats.fabric_poller_bell_wakes);
    let host = fabric.add_host().unwrap();
    let mut c = Client::connect(&host, l.local);
    c.call(b"PING\r\n", b"+PONG\r\n");
    assert!(
        Stats::get(&server.stats.fabric_poller_bell_wakes) > bell_wakes,
        "the admission did not ring the poller's doorbell"
    );
    let until = Instant::now() + DEADLINE;
    while counts().1 == 0 {
        assert!(
            Instant::now() < until,
            "a poller of a sim client never slept"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    c.call(b"PING\r\n", b"+PONG\r\n");
    stop(&server, l);
}
