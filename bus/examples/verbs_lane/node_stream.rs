//! Goal: a real node process serves clients over verbs: started with `--fabric-provider verbs`
//! on the rxe address, it answers PING/SET/GET sent over a Stream (Valkey-over-RDMA framing,
//! through `bus::select::connect_stream` as `operator` connects), including a value and a
//! pipeline that each span several RX windows in both directions; keys written over the fabric
//! are visible over TCP and the other way round; peers that send a control message of the wrong
//! size, an unknown opcode or more than a receive holds are disconnected while the Stream client
//! keeps being served; SHUTDOWN over the fabric stops it cleanly.

use std::fs::File;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use bus::select::{connect_stream, ByteStream};
use bus::stream::control::CONTROL_MSG_LEN;
use bus::{Access, BusError, Connection, Op, Provider, Region, WorkError};

use crate::{config, ensure, provider, rxe_ip, slice, R, WAIT};

pub(crate) const FABRIC_PORT: u16 = 16379;
const TCP_PORT: u16 = 6379;
/// Both sides use the smallest RX window, so the big value and the pipeline cross many
/// re-advertisements.
pub(crate) const RX_SIZE: usize = bus::stream::RX_SIZE_MIN;
/// INCRs in one pipeline: ~90 bytes each, several of the node's RX windows.
const PIPELINE: usize = 2000;
const PIPELINE_KEY: &str = "lane:pipeline-counter-with-a-long-name-so-requests-fill-windows";
/// Larger than two RX windows.
const BIG_VALUE_LEN: usize = 150_000;
const NODE_LOG: &str = "/tmp/node-lane.log";
/// Replies buffered before a reader gives up on a malformed stream.
const REPLY_BYTES_MAX: usize = 4 * 1024 * 1024;

/// The node process; killed on drop unless it already exited.
pub(crate) struct Node {
    child: Option<Child>,
}

impl Node {
    fn start() -> R<Node> {
        Self::start_with(&[])
    }

    /// A node on the rxe address with `extra` flags (a password, say).
    pub(crate) fn start_with(extra: &[&str]) -> R<Node> {
        let bin = match std::env::var_os("NODE_BIN") {
            Some(b) => PathBuf::from(b),
            None => std::env::current_exe()?
                .parent()
                .ok_or("no directory")?
                .join("node"),
        };
        let log = File::create(NODE_LOG)?;
        let child = Command::new(&bin)
            .args(["--port", &TCP_PORT.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--dir", "/tmp"])
            .args(["--fabric-provider", "verbs"])
            .args(["--rdma-port", &FABRIC_PORT.to_string()])
            .args(["--rdma-bind", &rxe_ip().to_string()])
            .args(["--rdma-rx-size", &RX_SIZE.to_string()])
            // The fabric listener is on the rxe address, not loopback, and there is no
            // password: protected mode would refuse every client.
            .args(["--protected-mode", "no"])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .map_err(|e| format!("starting {}: {e}", bin.display()))?;
        Ok(Node { child: Some(child) })
    }

    pub(crate) fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(|c| c.id())
    }

    pub(crate) fn exited(&mut self) -> R<Option<std::process::ExitStatus>> {
        match self.child.as_mut() {
            Some(c) => Ok(c.try_wait()?),
            None => Err("node already reaped".into()),
        }
    }

    /// Waits for the node to exit by itself; its exit status.
    fn wait_exit(&mut self) -> R<std::process::ExitStatus> {
        let deadline = Instant::now() + WAIT;
        loop {
            if let Some(status) = self.exited()? {
                self.child = None;
                return Ok(status);
            }
            ensure(Instant::now() < deadline, "node did not exit")?;
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// A client on the fabric: a boxed Stream plus the bytes read but not yet parsed.
struct Client {
    stream: Box<dyn ByteStream>,
    started: Instant,
    pending: Vec<u8>,
}

impl Client {
    fn progress(&mut self) -> R {
        Ok(self.stream.progress(self.started.elapsed())?)
    }

    /// Sends `request` and returns the next `replies` complete RESP replies (raw bytes each),
    /// reading while writing so neither side's window can stall the other.
    fn exchange(&mut self, mut request: &[u8], replies: usize) -> R<Vec<Vec<u8>>> {
        let deadline = Instant::now() + WAIT;
        let mut out = Vec::with_capacity(replies);
        let mut buf = vec![0u8; 64 * 1024];
        while !request.is_empty() || out.len() < replies {
            ensure(
                Instant::now() < deadline,
                format!(
                    "stalled: {} request bytes unsent, {} of {replies} replies",
                    request.len(),
                    out.len()
                ),
            )?;
            ensure(!self.stream.is_closed(), "the node closed the stream")?;
            self.progress()?;
            let mut moved = false;
            if !request.is_empty() {
                let n = self.stream.write(request)?;
                request = &request[n..];
                self.stream.flush()?;
                moved |= n > 0;
            }
            let n = self.stream.read(&mut buf)?;
            self.pending.extend_from_slice(&buf[..n]);
            ensure(self.pending.len() <= REPLY_BYTES_MAX, "reply too large")?;
            moved |= n > 0;
            while out.len() < replies {
                match reply_len(&self.pending)? {
                    Some(len) => out.push(self.pending.drain(..len).collect()),
                    None => break,
                }
            }
            if !moved {
                self.stream.wait(Duration::from_millis(20))?;
            }
        }
        Ok(out)
    }

    fn command(&mut self, args: &[&[u8]]) -> R<Vec<u8>> {
        let mut replies = self.exchange(&encode(args), 1)?;
        replies.pop().ok_or_else(|| "no reply".into())
    }
}

/// One RESP command as a multi-bulk request.
pub(crate) fn encode(args: &[&[u8]]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// Length of the complete RESP2 reply at the start of `b`, or `None` if more bytes are needed.
pub(crate) fn reply_len(b: &[u8]) -> R<Option<usize>> {
    let Some(eol) = b.windows(2).position(|w| w == b"\r\n") else {
        return Ok(None);
    };
    let line = eol + 2;
    let Some(kind) = b.first() else {
        return Ok(None);
    };
    let num = || -> R<i64> { Ok(std::str::from_utf8(&b[1..eol])?.parse()?) };
    match kind {
        b'+' | b'-' | b':' => Ok(Some(line)),
        b'$' => {
            let n = num()?;
            if n < 0 {
                return Ok(Some(line));
            }
            let total = line + n as usize + 2;
            Ok((b.len() >= total).then_some(total))
        }
        b'*' => {
            let n = num()?;
            let mut at = line;
            for _ in 0..n.max(0) {
                match reply_len(&b[at..])? {
                    Some(len) => at += len,
                    None => return Ok(None),
                }
            }
            Ok(Some(at))
        }
        other => Err(format!("unexpected reply type byte {other:#04x}").into()),
    }
}

fn bulk(v: &[u8]) -> Vec<u8> {
    let mut out = format!("${}\r\n", v.len()).into_bytes();
    out.extend_from_slice(v);
    out.extend_from_slice(b"\r\n");
    out
}

fn expect_reply(got: &[u8], want: &[u8], what: &str) -> R {
    ensure(
        got == want,
        format!(
            "{what}: got {:?}, expected {:?}",
            String::from_utf8_lossy(&got[..got.len().min(80)]),
            String::from_utf8_lossy(&want[..want.len().min(80)])
        ),
    )
}

/// Connects over the fabric once the node listens (it may still be starting).
fn connect(node: &mut Node) -> R<Client> {
    let to = SocketAddr::new(rxe_ip(), FABRIC_PORT);
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some(status) = node.exited()? {
            return Err(format!("node exited at start: {status}").into());
        }
        match connect_stream("verbs", to, RX_SIZE, Duration::from_secs(5)) {
            Ok(stream) => {
                return Ok(Client {
                    stream,
                    started: Instant::now(),
                    pending: Vec::new(),
                })
            }
            Err(e) if Instant::now() < deadline => {
                println!("not yet: {e}");
                std::thread::sleep(Duration::from_millis(300));
            }
            Err(e) => return Err(format!("connecting to the node: {e}").into()),
        }
    }
}

/// A raw verbs peer sends `msg` as its first control message; the node must disconnect it,
/// which our side sees as its posted receives flushed.
fn bad_peer(what: &str, msg: &[u8]) -> R {
    const SLOTS: usize = 4;
    let p = provider()?;
    let to = SocketAddr::new(rxe_ip(), FABRIC_PORT);
    let mut conn = p.connect(to, &config(), WAIT)?;
    // Room for the node's RegisterXferMemory and keepalives, so only our message offends.
    let rx = conn.register(SLOTS * CONTROL_MSG_LEN, Access::LOCAL_WRITE)?;
    for i in 0..SLOTS {
        conn.post_recv(i as u64, slice(&rx, i * CONTROL_MSG_LEN, CONTROL_MSG_LEN))?;
    }
    let tx = conn.register(msg.len(), Access::SEND)?;
    tx.write(0, msg)?;
    conn.post_send(100, slice(&tx, 0, msg.len()))?;
    let deadline = Instant::now() + WAIT;
    let mut out = Vec::new();
    loop {
        ensure(
            Instant::now() < deadline,
            format!("the node kept a peer that sent {what} ({out:?})"),
        )?;
        match conn.poll(&mut out, 8) {
            Ok(_) => {}
            Err(BusError::Closed(_)) => return Ok(()),
            Err(e) => return Err(e.into()),
        }
        let flushed = |c: &bus::Completion| c.op == Op::Recv && c.status == Err(WorkError::Flushed);
        if out.iter().any(flushed) {
            println!("{what}: disconnected");
            return Ok(());
        }
        conn.wait(Duration::from_millis(100))?;
    }
}

/// One request/reply over TCP on the guest's loopback.
pub(crate) fn tcp_command(args: &[&[u8]]) -> R<Vec<u8>> {
    let mut s = TcpStream::connect(("127.0.0.1", TCP_PORT))?;
    s.set_read_timeout(Some(WAIT))?;
    s.write_all(&encode(args))?;
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        if let Some(len) = reply_len(&got)? {
            got.truncate(len);
            return Ok(got);
        }
        let n = s.read(&mut buf)?;
        ensure(n > 0, "TCP connection closed before the reply")?;
        got.extend_from_slice(&buf[..n]);
    }
}

fn checks(node: &mut Node) -> R {
    let mut c = connect(node)?;
    println!("connected over {}", c.stream.provider());
    expect_reply(&c.command(&[b"PING"])?, b"+PONG\r\n", "PING")?;
    expect_reply(
        &c.command(&[b"SET", b"lane:key", b"over-verbs"])?,
        b"+OK\r\n",
        "SET",
    )?;
    expect_reply(
        &c.command(&[b"GET", b"lane:key"])?,
        &bulk(b"over-verbs"),
        "GET",
    )?;

    // A value larger than two RX windows, out and back.
    let big: Vec<u8> = (0..BIG_VALUE_LEN).map(|i| (i % 251) as u8).collect();
    expect_reply(
        &c.command(&[b"SET", b"lane:big", &big])?,
        b"+OK\r\n",
        "SET big",
    )?;
    expect_reply(&c.command(&[b"GET", b"lane:big"])?, &bulk(&big), "GET big")?;

    // A pipeline larger than the node's RX window; replies in order.
    let one = encode(&[b"INCR", PIPELINE_KEY.as_bytes()]);
    let request = one.repeat(PIPELINE);
    ensure(
        request.len() > 2 * RX_SIZE,
        "pipeline smaller than two windows",
    )?;
    let replies = c.exchange(&request, PIPELINE)?;
    for (i, r) in replies.iter().enumerate() {
        expect_reply(r, format!(":{}\r\n", i + 1).as_bytes(), "INCR")?;
    }

    // Fabric and TCP see one keyspace.
    expect_reply(
        &tcp_command(&[b"GET", b"lane:key"])?,
        &bulk(b"over-verbs"),
        "GET over TCP",
    )?;
    expect_reply(
        &tcp_command(&[b"GET", PIPELINE_KEY.as_bytes()])?,
        &bulk(PIPELINE.to_string().as_bytes()),
        "pipeline counter over TCP",
    )?;
    expect_reply(
        &tcp_command(&[b"SET", b"lane:tcp", b"over-tcp"])?,
        b"+OK\r\n",
        "SET over TCP",
    )?;
    expect_reply(
        &c.command(&[b"GET", b"lane:tcp"])?,
        &bulk(b"over-tcp"),
        "GET over the fabric of a key set over TCP",
    )?;

    // Misbehaving peers are cut off; the well-behaved client is still served.
    bad_peer("a 7-byte control message", b"garbage")?;
    let mut unknown = [0u8; CONTROL_MSG_LEN];
    unknown[0..2].copy_from_slice(&0x00ffu16.to_be_bytes());
    bad_peer("an unknown opcode", &unknown)?;
    bad_peer(
        "a SEND larger than a control message",
        &[0x5a; 4 * CONTROL_MSG_LEN],
    )?;
    expect_reply(
        &c.command(&[b"PING"])?,
        b"+PONG\r\n",
        "PING after bad peers",
    )?;
    // ... and each one is counted (INFO fabric, read over TCP once the node has reaped them).
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let info = tcp_command(&[b"INFO", b"fabric"])?;
        let text = String::from_utf8_lossy(&info);
        if text.contains("fabric_protocol_errors:3\r\n") {
            break;
        }
        ensure(
            std::time::Instant::now() < deadline,
            format!("INFO fabric never counted 3 protocol errors: {text}"),
        )?;
        std::thread::sleep(std::time::Duration::from_millis(50));
    }

    idle_poller_blocks(&mut c)?;

    // SHUTDOWN over the fabric: no reply, the node exits by itself with status 0.
    c.exchange(&encode(&[b"SHUTDOWN", b"NOSAVE"]), 0)?;
    let status = node.wait_exit()?;
    ensure(status.success(), format!("node exited with {status}"))?;
    Ok(())
}

/// One counter of INFO fabric, read over TCP.
pub(crate) fn fabric_counter(name: &str) -> R<u64> {
    let info = tcp_command(&[b"INFO", b"fabric"])?;
    let text = String::from_utf8_lossy(&info);
    let prefix = format!("{name}:");
    let value = text
        .lines()
        .find_map(|l| l.strip_prefix(prefix.as_str()))
        .ok_or_else(|| format!("INFO fabric has no {name}"))?;
    Ok(value.trim().parse()?)
}

/// An idle poller serving a verbs client blocks on the client's completion channel instead
/// of sleeping in steps (a sleeping poller wakes ~1,000 times a second), the client's next
/// request wakes it, and a blocked command woken from TCP rings the poller's doorbell.
fn idle_poller_blocks(c: &mut Client) -> R {
    let blocks = fabric_counter("fabric_poller_blocks")?;
    let sleeps = fabric_counter("fabric_poller_sleeps")?;
    std::thread::sleep(Duration::from_secs(1));
    let blocks_after = fabric_counter("fabric_poller_blocks")?;
    let slept = fabric_counter("fabric_poller_sleeps")? - sleeps;
    println!(
        "idle second: {} blocks, {slept} sleeps",
        blocks_after - blocks
    );
    ensure(blocks_after > blocks, "the idle poller never blocked")?;
    ensure(
        slept < 20,
        format!("the idle poller slept {slept} times in a second instead of blocking"),
    )?;
    expect_reply(&c.command(&[b"PING"])?, b"+PONG\r\n", "PING after idling")?;
    // The doorbell: a BLPOP over the fabric, served by an RPUSH over TCP. Tried a few times,
    // since the poller may be polling rather than blocked when the push lands.
    for round in 0..5 {
        let rung = fabric_counter("fabric_poller_bell_wakes")?;
        c.exchange(&encode(&[b"BLPOP", b"lane:queue", b"0"]), 0)?;
        let deadline = Instant::now() + WAIT;
        while !String::from_utf8_lossy(&tcp_command(&[b"INFO", b"clients"])?)
            .contains("blocked_clients:1\r\n")
        {
            ensure(Instant::now() < deadline, "BLPOP never blocked")?;
            std::thread::sleep(Duration::from_millis(20));
        }
        std::thread::sleep(Duration::from_millis(200));
        expect_reply(
            &tcp_command(&[b"RPUSH", b"lane:queue", b"x"])?,
            b":1\r\n",
            "RPUSH over TCP",
        )?;
        let reply = c.exchange(&[], 1)?;
        expect_reply(
            &reply[0],
            b"*2\r\n$10\r\nlane:queue\r\n$1\r\nx\r\n",
            "BLPOP",
        )?;
        if fabric_counter("fabric_poller_bell_wakes")? > rung {
            println!("doorbell rang for the woken BLPOP (round {round})");
            return Ok(());
        }
    }
    Err("a BLPOP woken over TCP never rang the poller's doorbell".into())
}

pub fn test_node_stream() -> R {
    let mut node = Node::start()?;
    let result = checks(&mut node);
    drop(node);
    if result.is_err() {
        if let Ok(log) = std::fs::read_to_string(NODE_LOG) {
            eprintln!("--- node log (last 40 lines)");
            let lines: Vec<&str> = log.lines().collect();
            for l in &lines[lines.len().saturating_sub(40)..] {
                eprintln!("{l}");
            }
        }
    }
    result
}
