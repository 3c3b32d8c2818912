//! Goal: Streams on a listener's receive pool (`Listener::serve_streams` with a depth, what a
//! node does for its clients on verbs by default) work as on receive queues of their own, and
//! stay apart although they share the device's protection domain.
//!
//! Two client Streams connect; their server Streams take every message from one pool of
//! `POOL_DEPTH` receives (fewer than one Stream's credit of 224, so the pool is recycled, and
//! a burst meets RNR back-pressure) and have no receive queue. Each client sends `BYTES`
//! (enough to grow the server's RX window from 64 KiB, so windows are re-registered and bound
//! again) and the server echoes them; both ends check every byte. Then a third, raw
//! connection to the same listener (its own server Stream, so it is a pooled peer in the same
//! PD) WRITEs into client A's server window with A's exact address and key: the device
//! refuses it (the key is a memory window bound to A's QP), A's bytes stay as they were and A
//! goes on. Last, with every connection dropped, the pool holds all its receives again.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bus::stream::Stream;
use bus::verbs::VerbsConnection;
use bus::{Access, Connection, EndpointAddr, Listener, Provider, Region, RemoteSlice, WorkError};

use crate::{completions, config, ensure, pattern, provider, rxe_ip, slice, R, WAIT};

const PORT: u16 = 20141;
/// The pool: smaller than a Stream's 224 receives, so it is shared and recycled.
const POOL_DEPTH: u32 = 64;
/// Bytes each client sends (and gets back): past the 64 KiB a granted window starts with.
const BYTES: usize = 600 * 1024;
const RX_SIZE: usize = 1024 * 1024;

fn qpn(addr: &EndpointAddr) -> u32 {
    match addr {
        EndpointAddr::Verbs { qpn, .. } => *qpn,
        _ => 0,
    }
}

/// Accepts `n` connections while `connect` makes them (it runs on this thread).
fn accept_while(
    listener: &mut bus::verbs::VerbsListener,
    n: usize,
    connect: impl FnOnce() -> Result<Vec<VerbsConnection>, String> + Send,
) -> R<(Vec<VerbsConnection>, Vec<VerbsConnection>)> {
    std::thread::scope(|scope| {
        let clients = scope.spawn(connect);
        let deadline = Instant::now() + WAIT;
        let mut accepted = Vec::new();
        while accepted.len() < n {
            ensure(Instant::now() < deadline, "connections not accepted")?;
            if let Some(conn) = listener.accept(Duration::from_millis(100))? {
                accepted.push(conn);
            }
        }
        let clients = clients.join().map_err(|_| "connect thread panicked")??;
        let clients: Vec<VerbsConnection> = clients;
        Ok((accepted, clients))
    })
}

/// The server Stream whose peer is `client`'s QP.
fn server_of(servers: &mut [Stream<VerbsConnection>], client: &VerbsConnection) -> R<usize> {
    let want = qpn(client.local());
    servers
        .iter()
        .position(|s| s.conn().is_some_and(|c| qpn(c.peer()) == want))
        .ok_or_else(|| "no server stream for a client".into())
}

/// One client and its server Stream: the client sends `data`, the server echoes it back.
struct Echo {
    client: Stream<VerbsConnection>,
    server: Stream<VerbsConnection>,
    data: Vec<u8>,
    sent: usize,
    /// What the server read and has not echoed yet.
    to_echo: Vec<u8>,
    got_by_server: Vec<u8>,
    got_back: Vec<u8>,
}

impl Echo {
    fn done(&self) -> bool {
        self.got_back.len() == self.data.len()
    }

    /// One turn of both ends; never blocks.
    fn turn(&mut self, now: Duration, buf: &mut [u8]) -> R {
        self.client.progress(now)?;
        self.server.progress(now)?;
        if self.sent < self.data.len() {
            let n = self.client.write(&self.data[self.sent..])?;
            self.sent += n;
            self.client.flush()?;
        }
        let n = self.server.read(buf)?;
        self.got_by_server.extend_from_slice(&buf[..n]);
        self.to_echo.extend_from_slice(&buf[..n]);
        if !self.to_echo.is_empty() {
            let n = self.server.write(&self.to_echo)?;
            self.to_echo.drain(..n);
            self.server.flush()?;
        }
        let n = self.client.read(buf)?;
        self.got_back.extend_from_slice(&buf[..n]);
        Ok(())
    }
}

fn run_echoes(echoes: &mut [Echo]) -> R {
    let started = Instant::now();
    let mut buf = vec![0u8; 64 * 1024];
    while !echoes.iter().all(Echo::done) {
        ensure(
            started.elapsed() < WAIT,
            format!(
                "echo stalled: {:?}",
                echoes
                    .iter()
                    .map(|e| (e.sent, e.got_by_server.len(), e.got_back.len()))
                    .collect::<Vec<_>>()
            ),
        )?;
        for e in echoes.iter_mut() {
            e.turn(started.elapsed(), &mut buf)?;
        }
    }
    for (i, e) in echoes.iter().enumerate() {
        ensure(
            e.got_by_server == e.data,
            format!("server {i} read other bytes"),
        )?;
        ensure(
            e.got_back == e.data,
            format!("client {i} got other bytes back"),
        )?;
    }
    Ok(())
}

pub fn test_srq_stream_pool() -> R {
    let p = provider()?;
    let addr = SocketAddr::new(rxe_ip(), PORT);
    let mut listener = p.listen(addr, &config())?;
    ensure(
        listener.serve_streams(POOL_DEPTH),
        "the listener made no receive pool",
    )?;
    ensure(
        listener.shared_receives_posted() == Some(POOL_DEPTH as usize),
        "the pool is not full at the start",
    )?;
    let p2 = p.clone();
    let (accepted, clients) = accept_while(&mut listener, 2, move || {
        let a = p2.connect_for_stream(addr, &config(), WAIT);
        let b = p2.connect_for_stream(addr, &config(), WAIT);
        Ok(vec![
            a.map_err(|e| e.to_string())?,
            b.map_err(|e| e.to_string())?,
        ])
    })?;
    for conn in &accepted {
        ensure(
            conn.uses_srq(),
            "an accepted connection has its own receive queue",
        )?;
    }
    let mut servers = accepted
        .into_iter()
        .map(|c| Stream::server(c, RX_SIZE))
        .collect::<Result<Vec<_>, _>>()?;
    let mut echoes = Vec::new();
    for (i, conn) in clients.into_iter().enumerate() {
        let at = server_of(&mut servers, &conn)?;
        let server = servers.swap_remove(at);
        echoes.push(Echo {
            client: Stream::client(conn, RX_SIZE)?,
            server,
            data: pattern(BYTES, 17 + i as u8),
            sent: 0,
            to_echo: Vec::new(),
            got_by_server: Vec::new(),
            got_back: Vec::new(),
        });
    }
    run_echoes(&mut echoes)?;
    let grown = echoes[0].server.stats().window_grows;
    println!(
        "pooled echo: {BYTES} bytes each way on 2 streams, server windows grown {grown} times"
    );

    // The rogue: a pooled peer of the same listener, in the same PD, with A's exact window.
    let p3 = p.clone();
    let (mut rogue_server, mut rogue) = accept_while(&mut listener, 1, move || {
        Ok(vec![p3
            .connect(addr, &config(), WAIT)
            .map_err(|e| e.to_string())?])
    })?;
    let _rogue_stream = Stream::server(rogue_server.remove(0), RX_SIZE)?;
    let mut rogue = rogue.remove(0);
    let victim_window = echoes[0]
        .client
        .peer_window()
        .ok_or("A's server advertised no window")?;
    let src = rogue.register(64, Access::NONE)?;
    src.write(0, &[0xEE; 64])?;
    let dst = RemoteSlice {
        region: victim_window,
        offset: 0,
        len: 64,
    };
    rogue.post_write(1, slice(&src, 0, 64), dst, Some(64))?;
    let done = completions(&mut rogue, 1, true)?;
    ensure(
        done[0].status == Err(WorkError::RemoteAccess),
        format!("the rogue wrote A's pooled window: {:?}", done[0]),
    )?;
    println!("rogue refused on A's window: {:?}", done[0].status);
    // A goes on, and reads only its own bytes.
    for e in echoes.iter_mut() {
        e.data = pattern(BYTES / 8, 99);
        e.sent = 0;
        e.got_by_server.clear();
        e.got_back.clear();
    }
    run_echoes(&mut echoes)?;

    // Every receive goes back to the pool once the connections are gone.
    drop(echoes);
    drop(rogue);
    drop(_rogue_stream);
    let deadline = Instant::now() + WAIT;
    loop {
        let _ = listener.accept(Duration::from_millis(50))?;
        let posted = listener.shared_receives_posted().unwrap_or(0);
        if posted == POOL_DEPTH as usize {
            break;
        }
        ensure(
            Instant::now() < deadline,
            format!("the pool holds {posted} of {POOL_DEPTH} receives after the connections went"),
        )?;
    }
    println!("pool back to {POOL_DEPTH} receives");
    Ok(())
}
