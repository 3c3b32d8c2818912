//! Goal: a shared receive queue serves several RC connections from one small pool. This process
//! accepts `CONNS` connections attached to one SRQ holding `POOL` receives; a peer process sends
//! `MESSAGES` SENDs of random sizes on each. Every message must complete on the connection it
//! was sent on, in order and intact, carrying the id of the SRQ receive it landed in; each
//! receive is re-posted to the SRQ at once, and the SRQ never has more than `POOL` outstanding.
//! `CONNS * MESSAGES` is far above `POOL`, and the connections have no receive queue of their
//! own (their `post_recv` is refused), so the pool is shared and recycled. The sender is never
//! told to slow down: an empty pool is RNR back-pressure, retried by the hardware.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bus::verbs::VerbsConnection;
use bus::{Access, BusError, Completion, Connection, Listener, Op, Provider, Region};

use crate::{
    completions, config, ensure, fresh_seed, provider, rxe_ip, slice, spawn_self, wait_child,
    SplitMix, R, WAIT,
};

const PORT: u16 = 20120;
const CONNS: usize = 2;
const MESSAGES: u64 = 100;
/// Receives in the shared pool (far fewer than the messages, fewer than the connections' sum).
const POOL: u32 = 8;
/// Largest message: the tag (8 bytes) plus a payload of up to `PAYLOAD_MAX`.
const PAYLOAD_MAX: usize = 200;
const SLOT_LEN: usize = 256;
/// The sender's in-flight SENDs per connection (its send buffers are reused round-robin).
const WINDOW: u64 = 16;

/// Message `seq` of connection `tag`: the tag (u64 LE) then a payload of random size that
/// starts with `seq`. `rng` is the connection's generator, advanced in message order.
fn message(rng: &mut SplitMix, tag: u64, seq: u64) -> Vec<u8> {
    let len = 8 + (rng.next_u64() % (PAYLOAD_MAX as u64 - 7)) as usize;
    let mut out = tag.to_le_bytes().to_vec();
    out.extend(rng.payload(seq, len));
    out
}

fn generator(seed: u64, tag: u64) -> SplitMix {
    SplitMix(seed ^ tag.wrapping_mul(0x9e37_79b9))
}

/// What the receiver knows about one accepted connection.
struct Peer {
    conn: VerbsConnection,
    /// The sender's tag for this connection, learned from its first message.
    tag: Option<u64>,
    received: u64,
    /// Which SRQ receives (by id) this connection's messages landed in.
    slots_used: u64,
}

/// The receiving side (this process); the sender is a child process.
pub fn test_srq_shared_receives() -> R {
    let seed = fresh_seed();
    println!("seed {seed}");
    let p = provider()?;
    let srq = p.create_srq(POOL)?;
    let mut listener = p.listen_with_srq(SocketAddr::new(rxe_ip(), PORT), &config(), &srq)?;
    let child = spawn_self(&["srq-sender", &PORT.to_string(), &seed.to_string()])?;
    let result = (|| -> R {
        let rx = p.register(POOL as usize * SLOT_LEN, Access::LOCAL_WRITE)?;
        for id in 0..u64::from(POOL) {
            let at = id as usize * SLOT_LEN;
            srq.post_recv(id, slice(&rx, at, SLOT_LEN))?;
        }
        // The pool is bounded: one more is refused.
        match srq.post_recv(99, slice(&rx, 0, SLOT_LEN)) {
            Err(BusError::Full { .. }) => {}
            other => return Err(format!("a post past the pool: {other:?}").into()),
        }
        let mut peers = Vec::new();
        while peers.len() < CONNS {
            let conn = listener.accept(WAIT)?.ok_or("sender did not connect")?;
            ensure(conn.uses_srq(), "accepted connection is not on the SRQ")?;
            peers.push(Peer {
                conn,
                tag: None,
                received: 0,
                slots_used: 0,
            });
        }
        // An SRQ-attached connection has no receive queue of its own.
        match peers[0].conn.post_recv(1, slice(&rx, 0, SLOT_LEN)) {
            Err(BusError::Invalid {
                what: "receive", ..
            }) => {}
            other => return Err(format!("post_recv on an SRQ connection: {other:?}").into()),
        }
        let mut gens: Vec<SplitMix> = (0..CONNS as u64).map(|t| generator(seed, t)).collect();
        let total = CONNS as u64 * MESSAGES;
        let mut done = 0u64;
        let mut max_outstanding = 0usize;
        let deadline = Instant::now() + WAIT;
        let mut out: Vec<Completion> = Vec::new();
        while done < total {
            ensure(
                Instant::now() < deadline,
                format!("only {done} of {total} messages arrived"),
            )?;
            let mut got = 0;
            for (i, peer) in peers.iter_mut().enumerate() {
                out.clear();
                got += peer.conn.poll(&mut out, POOL as usize)?;
                for c in &out {
                    receive(c, i, peer, &rx, &mut gens, &srq)?;
                    done += 1;
                    max_outstanding = max_outstanding.max(srq.outstanding());
                }
            }
            if got == 0 {
                // Either connection may be next; wait briefly on one, then poll both.
                peers[0].conn.wait(Duration::from_millis(20))?;
            }
        }
        ensure(max_outstanding <= POOL as usize, "SRQ exceeded its pool")?;
        ensure(
            srq.outstanding() == POOL as usize,
            format!("{} receives outstanding at the end", srq.outstanding()),
        )?;
        for (i, peer) in peers.iter().enumerate() {
            ensure(
                peer.received == MESSAGES,
                format!("connection {i} received {}", peer.received),
            )?;
            println!(
                "connection {i} (tag {:?}): {} messages through SRQ receives {:#010b}",
                peer.tag, peer.received, peer.slots_used
            );
        }
        println!(
            "{total} messages through a pool of {POOL} shared by {CONNS} connections \
             (max outstanding {max_outstanding})"
        );
        // The SRQ handle may go before the connections: they keep it until their QPs are gone.
        drop(srq);
        drop(peers);
        Ok(())
    })();
    let waited = wait_child(child);
    result?;
    waited
}

/// Checks one completion of connection `index` and re-posts its SRQ receive.
fn receive(
    c: &Completion,
    index: usize,
    peer: &mut Peer,
    rx: &bus::verbs::VerbsRegion,
    gens: &mut [SplitMix],
    srq: &bus::verbs::VerbsSrq,
) -> R {
    ensure(
        c.status.is_ok() && c.op == Op::Recv && c.wr_id < u64::from(POOL),
        format!("connection {index}: {c:?}"),
    )?;
    let at = c.wr_id as usize * SLOT_LEN;
    let mut buf = vec![0; c.byte_len as usize];
    rx.read(at, &mut buf)?;
    ensure(
        buf.len() >= 16,
        format!("connection {index}: short message"),
    )?;
    let tag = u64::from_le_bytes(buf[..8].try_into()?);
    ensure(tag < CONNS as u64, format!("bad tag {tag}"))?;
    match peer.tag {
        None => peer.tag = Some(tag),
        Some(t) => ensure(
            t == tag,
            format!("connection {index} (tag {t}) got a message of tag {tag}"),
        )?,
    }
    let want = message(&mut gens[tag as usize], tag, peer.received);
    ensure(
        buf == want,
        format!(
            "connection {index}: message {} differs (got seq {:?})",
            peer.received,
            buf.get(8..16)
        ),
    )?;
    peer.received += 1;
    peer.slots_used |= 1 << c.wr_id;
    srq.post_recv(c.wr_id, slice(rx, at, SLOT_LEN))?;
    Ok(())
}

/// The sending side: `CONNS` plain connections, `MESSAGES` SENDs on each, interleaved, at most
/// `WINDOW` in flight per connection.
pub fn srq_sender(port: u16, seed: u64) -> R {
    let p = provider()?;
    let addr = SocketAddr::new(rxe_ip(), port);
    let mut conns = Vec::new();
    for _ in 0..CONNS {
        conns.push(p.connect(addr, &config(), WAIT)?);
    }
    // Plain connections: each has its own protection domain, so its own send buffer.
    let mut txs = Vec::new();
    for conn in &conns {
        txs.push(conn.register(WINDOW as usize * SLOT_LEN, Access::SEND)?);
    }
    let mut gens: Vec<SplitMix> = (0..CONNS as u64).map(|t| generator(seed, t)).collect();
    let mut in_flight = [0u64; CONNS];
    for seq in 0..MESSAGES {
        for (tag, conn) in conns.iter_mut().enumerate() {
            if in_flight[tag] == WINDOW {
                let done = completions(conn, 1, false)?;
                ensure(done[0].op == Op::Send, format!("{done:?}"))?;
                in_flight[tag] -= 1;
            }
            let msg = message(&mut gens[tag], tag as u64, seq);
            let at = (seq % WINDOW) as usize * SLOT_LEN;
            txs[tag].write(at, &msg)?;
            conn.post_send(seq, slice(&txs[tag], at, msg.len()))?;
            in_flight[tag] += 1;
        }
    }
    for (tag, conn) in conns.iter_mut().enumerate() {
        completions(conn, in_flight[tag] as usize, false)?;
    }
    Ok(())
}

const CONNECT_SIDE_PORT: u16 = 20121;
const CONNECT_SIDE_POOL: u32 = 4;
const CONNECT_SIDE_MESSAGES: u64 = 12;

/// Goal: the connecting side can take its receives from an SRQ too (`connect_with_srq`): SENDs
/// through a pool smaller than their number, and a WRITE WITH IMM whose notice consumes an SRQ
/// receive and is reported as `RecvWriteImm` with the immediate and the posted id. A CQ too
/// small for the SRQ is refused up front with a typed error.
pub fn test_srq_connect_side() -> R {
    let p = provider()?;
    let srq = p.create_srq(CONNECT_SIDE_POOL)?;
    let addr = SocketAddr::new(rxe_ip(), CONNECT_SIDE_PORT);
    let small_cq = bus::EndpointConfig {
        cq_size: 2 * bus::config::WR_MIN,
        send_wr: bus::config::WR_MIN,
        recv_wr: bus::config::WR_MIN,
        ..config()
    };
    let big_srq = p.create_srq(bus::config::WR_MIN + 1)?;
    match p.connect_with_srq(addr, &small_cq, WAIT, &big_srq) {
        Err(BusError::Invalid {
            what: "rdma-cq-size",
            ..
        }) => {}
        other => return Err(format!("a CQ too small for the SRQ: {other:?}").into()),
    }
    let mut listener = p.listen(addr, &config())?;
    let server = std::thread::spawn(move || listener.accept(WAIT));
    let mut client = p.connect_with_srq(addr, &config(), WAIT, &srq)?;
    let mut server = server
        .join()
        .map_err(|_| "accept thread panicked")??
        .ok_or("no connection accepted")?;
    ensure(
        client.uses_srq() && !server.uses_srq(),
        "which side is on the SRQ",
    )?;
    let rx = p.register(
        CONNECT_SIDE_POOL as usize * SLOT_LEN,
        Access::LOCAL_WRITE | Access::REMOTE_WRITE,
    )?;
    for id in 0..u64::from(CONNECT_SIDE_POOL) {
        srq.post_recv(id, slice(&rx, id as usize * SLOT_LEN, SLOT_LEN))?;
    }
    // The accepted side is a plain connection (its own protection domain).
    let tx = server.register(SLOT_LEN, Access::SEND)?;
    for seq in 0..CONNECT_SIDE_MESSAGES {
        tx.write(0, &seq.to_le_bytes())?;
        server.post_send(seq, slice(&tx, 0, 8))?;
        completions(&mut server, 1, false)?;
        let got = completions(&mut client, 1, false)?;
        let c = &got[0];
        ensure(
            c.op == Op::Recv && c.byte_len == 8 && c.wr_id < u64::from(CONNECT_SIDE_POOL),
            format!("message {seq}: {c:?}"),
        )?;
        let at = c.wr_id as usize * SLOT_LEN;
        let mut buf = [0u8; 8];
        rx.read(at, &mut buf)?;
        ensure(
            u64::from_le_bytes(buf) == seq,
            format!("message {seq} differs"),
        )?;
        srq.post_recv(c.wr_id, slice(&rx, at, SLOT_LEN))?;
    }
    // A WRITE WITH IMM into the last slot: its notice takes an SRQ receive.
    let dst = bus::RemoteSlice {
        region: rx.remote()?,
        offset: u64::from(CONNECT_SIDE_POOL - 1) * SLOT_LEN as u64,
        len: 8,
    };
    tx.write(0, &0xfeed_u64.to_le_bytes())?;
    server.post_write(100, slice(&tx, 0, 8), dst, Some(0x0bad_cafe))?;
    completions(&mut server, 1, false)?;
    let got = completions(&mut client, 1, false)?;
    ensure(
        got[0].op == Op::RecvWriteImm
            && got[0].imm == Some(0x0bad_cafe)
            && got[0].wr_id < u64::from(CONNECT_SIDE_POOL),
        format!("write with imm: {:?}", got[0]),
    )?;
    ensure(
        srq.outstanding() == CONNECT_SIDE_POOL as usize - 1,
        format!("{} outstanding after the notice", srq.outstanding()),
    )?;
    println!(
        "{CONNECT_SIDE_MESSAGES} SENDs and a WRITE WITH IMM through a pool of \
         {CONNECT_SIDE_POOL} on the connecting side"
    );
    Ok(())
}
