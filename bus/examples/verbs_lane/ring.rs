//! Goal: the bus Ring (`bus::ring`) works between two processes over verbs RC: the reader
//! process registers the ring and advertises it, the writer process appends records of random
//! sizes through many wrap-arounds, the reader hands them out in order and intact, and its
//! acknowledgements flow back (the writer can only finish once every record is acknowledged,
//! and it cannot get far ahead: the ring is a small fraction of what passes through it).
//!
//! Two connections: `ctl` carries the adverts and the writer's summary by SEND/RECV (in a real
//! deployment a replication command over a Stream does this); `ring` belongs to the
//! RingReader/RingWriter, which own their connection. The reader creates (and zeroes) its ring
//! before advertising it, so no record can land before the zeroing.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bus::ring::{decode_advert, encode_advert, RingReader, RingWriter, ADVERT_LEN};
use bus::{Access, BusError, Connection, Listener, Op, Provider, Region};

use crate::{
    completions, config, ensure, fresh_seed, provider, rxe_ip, slice, spawn_self, wait_child,
    SplitMix, R, WAIT,
};

const CTL_PORT: u16 = 20110;
const RING_PORT: u16 = 20111;
/// The ring's data area: small, so the records below wrap around it about a hundred times.
const DATA_LEN: usize = 8192;
const RECORDS: u64 = 400;
/// The writer's summary: records appended u64 | CRC-64 of all payloads u64 (little endian).
const SUMMARY_LEN: usize = 16;
const WR_CTL_RECV: u64 = 1;
const WR_CTL_SEND: u64 = 2;

/// The records, in order: sizes 1..=max_payload, each starting with its sequence number.
fn records(seed: u64, max_payload: usize) -> impl Iterator<Item = Vec<u8>> {
    let mut rng = SplitMix(seed);
    (0..RECORDS).map(move |seq| {
        let len = 1 + (rng.next_u64() % max_payload as u64) as usize;
        rng.payload(seq, len)
    })
}

/// Lets a busy loop give the emulated CPU to the peer without sleeping long.
fn backoff(idle: &mut u32) {
    *idle += 1;
    if *idle < 64 {
        std::thread::yield_now();
    } else {
        std::thread::sleep(Duration::from_micros(200));
    }
}

/// The reader side (this process); the writer is a child process.
pub fn test_ring_two_process() -> R {
    let seed = fresh_seed();
    println!("seed {seed}");
    let p = provider()?;
    let mut ctl_listener = p.listen(SocketAddr::new(rxe_ip(), CTL_PORT), &config())?;
    let mut ring_listener = p.listen(SocketAddr::new(rxe_ip(), RING_PORT), &config())?;
    let child = spawn_self(&["ring-writer", &CTL_PORT.to_string(), &seed.to_string()])?;
    let result = (|| -> R {
        let mut ctl = ctl_listener
            .accept(WAIT)?
            .ok_or("writer did not connect (ctl)")?;
        let ring_conn = ring_listener
            .accept(WAIT)?
            .ok_or("writer did not connect (ring)")?;
        let mut reader = RingReader::create(ring_conn, DATA_LEN)?;

        // Advertise the ring; learn the writer's ack word.
        let rx = ctl.register(64, Access::LOCAL_WRITE)?;
        let tx = ctl.register(64, Access::SEND)?;
        ctl.post_recv(WR_CTL_RECV, slice(&rx, 0, 64))?;
        tx.write(0, &encode_advert(&reader.advert()?))?;
        ctl.post_send(WR_CTL_SEND, slice(&tx, 0, ADVERT_LEN))?;
        let got = completions(&mut ctl, 2, false)?;
        let ack = got
            .iter()
            .find(|c| c.op == Op::Recv)
            .ok_or(format!("no ack advert: {got:?}"))?;
        let mut advert = vec![0; ack.byte_len as usize];
        rx.read(0, &mut advert)?;
        reader.set_writer_ack(decode_advert(&advert)?)?;
        ctl.post_recv(WR_CTL_RECV, slice(&rx, 0, 64))?;

        // Take every record, checking each against what the writer was to send.
        let mut expected = records(seed, reader.max_payload());
        let mut crc = crc64fast::Digest::new();
        let mut buf = Vec::new();
        let mut taken = 0u64;
        let mut summary = None;
        let mut ctl_done = Vec::new();
        let started = Instant::now();
        let deadline = started + WAIT;
        let mut idle = 0;
        while summary.is_none() {
            ensure(
                Instant::now() < deadline,
                format!("stalled after {taken} of {RECORDS} records"),
            )?;
            match reader.next(&mut buf, started.elapsed())? {
                Some(_) => {
                    idle = 0;
                    let want = expected.next().ok_or(format!(
                        "record {taken} is one more than the {RECORDS} sent"
                    ))?;
                    ensure(
                        buf == want,
                        format!(
                            "record {taken}: {} bytes, expected {}",
                            buf.len(),
                            want.len()
                        ),
                    )?;
                    crc.write(&buf);
                    taken += 1;
                }
                None => backoff(&mut idle),
            }
            // Publishes the consumed offset into the writer's ack word.
            reader.poll(started.elapsed())?;
            ctl.poll(&mut ctl_done, 1)?;
            if let Some(c) = ctl_done.pop() {
                ensure(c.status.is_ok(), format!("ctl receive failed: {c:?}"))?;
                ensure(
                    c.byte_len as usize == SUMMARY_LEN,
                    format!("summary of {} bytes", c.byte_len),
                )?;
                let mut s = [0u8; SUMMARY_LEN];
                rx.read(0, &mut s)?;
                summary = Some((
                    u64::from_le_bytes(s[0..8].try_into()?),
                    u64::from_le_bytes(s[8..16].try_into()?),
                ));
            }
        }
        let (sent, sent_crc) = summary.unwrap_or_default();
        // The writer sends its summary only once every record is acknowledged, so all arrived.
        ensure(
            sent == RECORDS && taken == RECORDS,
            format!("writer sent {sent}, reader took {taken}, expected {RECORDS}"),
        )?;
        ensure(sent_crc == crc.sum64(), "checksum of the payloads differs")?;
        ensure(
            reader.consumed() > 20 * DATA_LEN as u64,
            format!(
                "only {} bytes passed a {DATA_LEN}-byte ring",
                reader.consumed()
            ),
        )?;
        println!(
            "{taken} records, {} bytes through a {DATA_LEN}-byte ring; waited on {} not-yet-landed records",
            reader.consumed(),
            reader.not_ready()
        );
        Ok(())
    })();
    let child_result = wait_child(child);
    result.and(child_result)
}

/// The writer process: connects both connections, appends every record (retrying while the
/// reader has not acknowledged room), waits until all are acknowledged, sends the summary.
pub fn ring_writer(ctl_port: u16, seed: u64) -> R {
    let p = provider()?;
    let mut ctl = p.connect(SocketAddr::new(rxe_ip(), ctl_port), &config(), WAIT)?;
    let ring_conn = p.connect(SocketAddr::new(rxe_ip(), RING_PORT), &config(), WAIT)?;
    let rx = ctl.register(64, Access::LOCAL_WRITE)?;
    let tx = ctl.register(64, Access::SEND)?;
    ctl.post_recv(WR_CTL_RECV, slice(&rx, 0, 64))?;
    let got = completions(&mut ctl, 1, false)?;
    let mut advert = vec![0; got[0].byte_len as usize];
    rx.read(0, &mut advert)?;
    let mut writer = RingWriter::create(ring_conn, decode_advert(&advert)?, &config())?;
    tx.write(0, &encode_advert(&writer.ack_advert()?))?;
    ctl.post_send(WR_CTL_SEND, slice(&tx, 0, ADVERT_LEN))?;
    completions(&mut ctl, 1, false)?;

    let started = Instant::now();
    let deadline = started + WAIT;
    let mut crc = crc64fast::Digest::new();
    let mut full = 0u64;
    let mut idle = 0;
    for (seq, payload) in records(seed, writer.max_payload()).enumerate() {
        loop {
            ensure(
                Instant::now() < deadline,
                format!(
                    "record {seq} never fit (acked {}, head {})",
                    writer.acked(),
                    writer.head()
                ),
            )?;
            match writer.append(&payload) {
                Ok(_) => break,
                Err(BusError::Full { .. }) => {
                    full += 1;
                    writer.poll(started.elapsed())?;
                    backoff(&mut idle);
                }
                Err(e) => return Err(e.into()),
            }
        }
        idle = 0;
        crc.write(&payload);
        writer.poll(started.elapsed())?;
    }
    while !writer.is_drained() {
        ensure(
            Instant::now() < deadline,
            format!("acks stopped at {} of {}", writer.acked(), writer.head()),
        )?;
        writer.poll(started.elapsed())?;
        backoff(&mut idle);
    }
    println!(
        "writer: {RECORDS} records, {} bytes, waited for room {full} times",
        writer.head()
    );
    tx.write(0, &RECORDS.to_le_bytes())?;
    tx.write(8, &crc.sum64().to_le_bytes())?;
    ctl.post_send(WR_CTL_SEND, slice(&tx, 0, SUMMARY_LEN))?;
    completions(&mut ctl, 1, false)?;
    Ok(())
}
