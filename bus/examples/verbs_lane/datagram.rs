//! Goal: the bus Datagram primitive (`bus::datagram`, checked frames over any datagram
//! endpoint) works over verbs UD between two processes, addressed by GID + QPN: the peer learns
//! the receiver's address in its text form (as config files and `CLUSTER NODES` carry it),
//! sends framed messages of random sizes up to the frame's limit plus a foreign datagram and a
//! corrupted frame; the receiver gets every message intact, drops and counts the bad ones, and
//! answers to the sender address UD reported (the GRH's GID and the source QPN).
//!
//! Datagrams may be lost, so the peer repeats its batch every second until the answer comes.

use std::time::{Duration, Instant};

use bus::datagram::{frame, DatagramSocket};
use bus::verbs::VerbsDatagram;
use bus::{BusError, DatagramEndpoint, EndpointAddr, Provider};

use crate::{config, ensure, fresh_seed, provider, spawn_self, wait_child, SplitMix, R, WAIT};

const MESSAGES: u64 = 40;
const DONE: &[u8] = b"done";
/// How often the peer repeats its batch while no answer has come.
const RESEND_EVERY: Duration = Duration::from_secs(1);

/// Message `seq` of the batch: 8..=max_payload bytes, starting with `seq`.
fn message(seed: u64, seq: u64, max_payload: usize) -> Vec<u8> {
    let mut rng = SplitMix(seed ^ seq.wrapping_mul(0x9e37_79b9_7f4a_7c15));
    let len = 8 + (rng.next_u64() % (max_payload as u64 - 7)) as usize;
    // The last message is exactly the largest payload.
    let len = if seq == MESSAGES - 1 {
        max_payload
    } else {
        len
    };
    rng.payload(seq, len)
}

fn send_retrying(sock: &mut DatagramSocket<VerbsDatagram>, to: &EndpointAddr, msg: &[u8]) -> R {
    let deadline = Instant::now() + WAIT;
    loop {
        match sock.send_to(to, msg) {
            Err(BusError::Full { .. }) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(5))
            }
            other => return Ok(other?),
        }
    }
}

fn gid_qpn(addr: &EndpointAddr) -> R<([u8; 16], u32)> {
    match addr {
        EndpointAddr::Verbs { gid, qpn, .. } => Ok((*gid, *qpn)),
        other => Err(format!("{other} is not a verbs address").into()),
    }
}

/// The receiver (this process); the sender is a child process.
pub fn test_datagram_two_process() -> R {
    let seed = fresh_seed();
    let p = provider()?;
    let mut sock = DatagramSocket::new(p.datagram(&config())?)?;
    let me = sock.local().clone();
    let (my_gid, my_qpn) = gid_qpn(&me)?;
    println!(
        "seed {seed}, receiver {me}, max payload {}",
        sock.max_payload()
    );
    let mut child = Some(spawn_self(&[
        "dgram-peer",
        &me.to_string(),
        &seed.to_string(),
    ])?);
    let mut seen = vec![false; MESSAGES as usize];
    let mut buf = vec![0u8; sock.max_payload()];
    let deadline = Instant::now() + WAIT;
    let result = (|| -> R {
        loop {
            ensure(
                Instant::now() < deadline,
                format!(
                    "{} of {MESSAGES} messages, stats {:?}",
                    seen.iter().filter(|s| **s).count(),
                    sock.stats()
                ),
            )?;
            if let Some(c) = child.as_mut() {
                if c.try_wait()?.is_some() {
                    wait_child(child.take().ok_or("no child")?)?;
                    return ensure(seen.iter().all(|s| *s), "peer finished before all arrived");
                }
            }
            let Some((from, len)) = sock.recv(&mut buf)? else {
                sock.wait(Duration::from_millis(100))?;
                continue;
            };
            let (gid, qpn) = gid_qpn(&from)?;
            // Same guest, same rxe device: the sender's GID is ours; its QP is its own.
            ensure(gid == my_gid, format!("sender {from} has a foreign GID"))?;
            ensure(qpn != my_qpn, format!("sender {from} claims our QPN"))?;
            ensure(len >= 8, format!("message of {len} bytes"))?;
            let seq = u64::from_le_bytes(buf[..8].try_into()?);
            ensure(seq < MESSAGES, format!("sequence {seq} out of range"))?;
            ensure(
                buf[..len] == message(seed, seq, sock.max_payload()),
                format!("message {seq} ({len} bytes) differs"),
            )?;
            seen[seq as usize] = true;
            let stats = sock.stats();
            // Answer (again, for every repeat) once everything, bad datagrams included, arrived.
            if seen.iter().all(|s| *s) && stats.dropped_magic > 0 && stats.dropped_checksum > 0 {
                send_retrying(&mut sock, &from, DONE)?;
            }
        }
    })();
    if let Some(mut c) = child {
        let _ = c.kill();
        let _ = c.wait();
    }
    println!("receiver stats {:?}", sock.stats());
    result
}

/// The sender process: sends the batch plus two bad datagrams every second until the receiver
/// answers from the address it was given.
pub fn dgram_peer(to: EndpointAddr, seed: u64) -> R {
    let p = provider()?;
    let mut sock = DatagramSocket::new(p.datagram(&config())?)?;
    let max = sock.max_payload();
    let too_big = vec![0u8; max + 1];
    ensure(
        matches!(sock.send_to(&to, &too_big), Err(BusError::Invalid { .. })),
        "a payload over the limit was accepted",
    )?;
    let mut corrupt = Vec::new();
    frame::encode(b"corrupted in flight", &mut corrupt);
    *corrupt.last_mut().ok_or("empty frame")? ^= 0x40;
    let deadline = Instant::now() + WAIT;
    let mut buf = vec![0u8; max];
    let mut rounds = 0;
    loop {
        ensure(Instant::now() < deadline, "no answer from the receiver")?;
        rounds += 1;
        for bad in [&b"not a frame at all"[..], &corrupt] {
            match sock.endpoint_mut().send_to(&to, bad) {
                // A full send queue only delays the bad datagram to the next round.
                Ok(()) | Err(BusError::Full { .. }) => {}
                Err(e) => return Err(e.into()),
            }
        }
        for seq in 0..MESSAGES {
            send_retrying(&mut sock, &to, &message(seed, seq, max))?;
        }
        let round_end = Instant::now() + RESEND_EVERY;
        while Instant::now() < round_end {
            match sock.recv(&mut buf)? {
                Some((from, len)) => {
                    ensure(buf[..len] == *DONE, "answer is not `done`")?;
                    ensure(from == to, format!("answer from {from} instead of {to}"))?;
                    println!("peer: answered after {rounds} round(s)");
                    return Ok(());
                }
                None => sock.wait(Duration::from_millis(100))?,
            }
        }
    }
}
