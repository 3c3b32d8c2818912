//! The consuming side of a ring: owns the registered `[header | data]` region, validates each
//! record by its own header and checksum, hands records out strictly in offset order, and
//! publishes its consumed offset with a one-sided WRITE into the writer's ack word.

use crate::access::Access;
use crate::error::{BusError, Result};
use crate::provider::{Completion, Connection, LocalSlice, Region, RemoteRegion, RemoteSlice};

use super::layout::{
    check_data_len, max_payload, next_record_start, record_crc, record_total, RecordHeader,
    CLOSED_MARK, CLOSED_OFFSET, KIND_DATA, KIND_PAD, RECORD_HEADER_LEN, RING_HEADER_LEN,
    TAIL_OFFSET,
};

const WR_ACK: u64 = 3;
const WR_PROGRESS: u64 = 4;
/// Bytes of the ack source: the consumed offset at 0, the caller's progress word at 8.
const ACK_SRC_LEN: usize = 16;
/// Completions reaped per poll call.
const POLL_BATCH: usize = 16;

/// Reads records a [`super::RingWriter`] appended. Call [`next`](RingReader::next) to take
/// records and [`poll`](RingReader::poll) to publish progress (the writer can only reuse space
/// the reader has acknowledged).
#[derive(Debug)]
pub struct RingReader<C: Connection> {
    conn: C,
    ring: C::Region,
    /// Source of the ack WRITE. Rewritten only when no ack is in flight.
    ack_src: C::Region,
    writer_ack: Option<RemoteRegion>,
    data_len: usize,
    consumed: u64,
    ack_posted: u64,
    ack_in_flight: bool,
    /// The caller's second word (replication: the applied offset), published like the ack.
    progress: ProgressWord,
    broken: Option<String>,
    completions: Vec<Completion>,
    not_ready: u64,
}

/// A monotone u64 the reader's owner wants in a region of the writer's side, beyond the
/// ring's own consumed offset (which only frees ring space): e.g. a replica's applied
/// replication offset. Published with one WRITE in flight at a time, as the ack.
#[derive(Debug, Default)]
struct ProgressWord {
    target: Option<RemoteRegion>,
    wanted: u64,
    posted: u64,
    in_flight: bool,
}

impl<C: Connection> RingReader<C> {
    /// Registers a ring with a data area of `data_len` bytes (see `layout` for the limits) on
    /// `conn` (only its peer may write it, see [`Connection::register`]).
    pub fn create(conn: C, data_len: usize) -> Result<Self> {
        check_data_len(data_len)?;
        let ring = conn.register(
            RING_HEADER_LEN + data_len,
            Access::LOCAL_WRITE | Access::REMOTE_WRITE,
        )?;
        let ack_src = conn.register(ACK_SRC_LEN, Access::NONE)?;
        Self::new(conn, ring, ack_src)
    }

    /// As `create`, with regions the caller registered: `ring` with REMOTE_WRITE (its length
    /// minus the header is the data area), `ack_src` of at least 8 bytes (16 to publish a
    /// progress word, see [`set_progress_target`](Self::set_progress_target)). The ring is zeroed;
    /// no writer may be writing into it yet.
    pub fn new(conn: C, ring: C::Region, ack_src: C::Region) -> Result<Self> {
        let data_len = ring.len().saturating_sub(RING_HEADER_LEN);
        check_data_len(data_len)?;
        if !ring.access().contains(Access::REMOTE_WRITE) || ack_src.len() < 8 {
            return Err(BusError::Invalid {
                what: "ring regions",
                reason: "the ring needs REMOTE_WRITE and the ack source 8 bytes".into(),
            });
        }
        // Zero all of it: a record left by an earlier session at the same position carries the
        // same offset as the one this session will write there, and would validate.
        let zeros = [0u8; 4096];
        for at in (0..ring.len()).step_by(zeros.len()) {
            ring.write(at, &zeros[..zeros.len().min(ring.len() - at)])?;
        }
        Ok(RingReader {
            conn,
            ring,
            ack_src,
            writer_ack: None,
            data_len,
            consumed: 0,
            ack_posted: 0,
            ack_in_flight: false,
            progress: ProgressWord::default(),
            broken: None,
            completions: Vec::with_capacity(POLL_BATCH),
            not_ready: 0,
        })
    }

    /// What the writer needs: the ring's address, length and key.
    pub fn advert(&self) -> Result<RemoteRegion> {
        self.ring.remote()
    }

    /// Where to publish the consumed offset (the writer's `ack_advert`).
    pub fn set_writer_ack(&mut self, ack: RemoteRegion) -> Result<()> {
        if ack.len < 8 {
            return Err(BusError::Protocol(format!(
                "writer ack region of {} bytes cannot hold the offset",
                ack.len
            )));
        }
        self.writer_ack = Some(ack);
        Ok(())
    }

    /// Where to publish the caller's progress word (a region of at least 8 bytes the writer's
    /// side registered with REMOTE_WRITE and advertised). Needs a 16-byte ack source.
    pub fn set_progress_target(&mut self, target: RemoteRegion) -> Result<()> {
        if target.len < 8 || self.ack_src.len() < ACK_SRC_LEN {
            return Err(BusError::Invalid {
                what: "ring progress word",
                reason: format!(
                    "target of {} bytes (needs 8), ack source of {} bytes (needs {ACK_SRC_LEN})",
                    target.len,
                    self.ack_src.len()
                ),
            });
        }
        self.progress.target = Some(target);
        Ok(())
    }

    /// Asks `poll` to publish `value` into the progress target. Values never move back: a
    /// smaller one than already asked for is ignored.
    pub fn publish_progress(&mut self, value: u64) {
        self.progress.wanted = self.progress.wanted.max(value);
    }

    /// The last progress value whose WRITE was posted.
    pub fn progress_posted(&self) -> u64 {
        self.progress.posted
    }

    /// Whether an ack or progress WRITE is in flight or still to be posted: the owner should
    /// keep calling `poll` promptly (on manual-progress providers nothing moves between its
    /// calls).
    pub fn in_flight(&self) -> bool {
        let p = &self.progress;
        self.ack_in_flight
            || p.in_flight
            || (self.writer_ack.is_some() && self.consumed > self.ack_posted)
            || (p.target.is_some() && p.wanted > p.posted)
    }

    /// Absolute offset just past the last record handed out.
    pub fn consumed(&self) -> u64 {
        self.consumed
    }

    pub fn max_payload(&self) -> usize {
        max_payload(self.data_len)
    }

    /// Times the doorbell announced more than had validly landed (records still in flight or
    /// placed out of order): the reader waited instead of reading a half-written record.
    pub fn not_ready(&self) -> u64 {
        self.not_ready
    }

    pub fn conn(&self) -> &C {
        &self.conn
    }

    fn check_usable(&self) -> Result<()> {
        match &self.broken {
            Some(why) => Err(BusError::Closed(why.clone())),
            None => Ok(()),
        }
    }

    /// Copies the next record's payload into `buf` and returns its absolute offset, or `None`
    /// when the next record has not (entirely) landed yet. Never returns a record out of order.
    /// Once the writer closed the ring and every record that landed was taken, `Closed`.
    pub fn next(&mut self, buf: &mut Vec<u8>) -> Result<Option<u64>> {
        self.check_usable()?;
        let tail = self.ring.load_u64(TAIL_OFFSET)?;
        let got = if tail > self.consumed {
            let got = self.take_record(buf)?;
            if got.is_none() {
                self.not_ready += 1;
            }
            got
        } else if self.closed_by_writer()? {
            // The doorbell stops at close; records posted before it may still be valid.
            self.take_record(buf)?
        } else {
            None
        };
        if got.is_none() && self.closed_by_writer()? {
            return Err(self.break_with("the writer closed the ring".into()));
        }
        Ok(got)
    }

    /// Whether the writer wrote its closed mark into the header.
    fn closed_by_writer(&self) -> Result<bool> {
        Ok(self.ring.load_u64(CLOSED_OFFSET)? == CLOSED_MARK)
    }

    /// The record at the consumed offset, if it has validly landed.
    fn take_record(&mut self, buf: &mut Vec<u8>) -> Result<Option<u64>> {
        // At most a padding record, then the record after it.
        for _ in 0..2 {
            let start = next_record_start(self.consumed, self.data_len);
            let pos = (start % self.data_len as u64) as usize;
            let remaining = self.data_len - pos;
            let mut raw = [0u8; RECORD_HEADER_LEN];
            self.ring.read(RING_HEADER_LEN + pos, &mut raw)?;
            let h = RecordHeader::decode(&raw);
            // Anything that does not check out is a record still landing (its bytes may be
            // placed in any order), never an error: only a valid checksum makes it real.
            if h.offset != start {
                return Ok(None);
            }
            let len = h.len as usize;
            match h.kind {
                KIND_PAD => {
                    if RECORD_HEADER_LEN + len != remaining
                        || record_crc(h.offset, h.len, h.kind, &[]) != h.crc
                    {
                        return Ok(None);
                    }
                    self.consumed = start + remaining as u64;
                }
                KIND_DATA => {
                    if len > self.max_payload() || RECORD_HEADER_LEN + len > remaining {
                        return Ok(None);
                    }
                    buf.resize(len, 0);
                    self.ring
                        .read(RING_HEADER_LEN + pos + RECORD_HEADER_LEN, buf)?;
                    if record_crc(h.offset, h.len, h.kind, buf) != h.crc {
                        return Ok(None);
                    }
                    self.consumed = start + record_total(len) as u64;
                    return Ok(Some(start));
                }
                _ => return Ok(None),
            }
        }
        Ok(None)
    }

    /// Reaps ack completions and publishes the consumed offset if it moved and no ack WRITE is
    /// in flight (one at a time, so acks cannot land out of order and move backwards).
    pub fn poll(&mut self) -> Result<()> {
        self.check_usable()?;
        self.completions.clear();
        if let Err(e) = self.conn.poll(&mut self.completions, POLL_BATCH) {
            return Err(self.break_with(format!("polling the ring connection failed: {e}")));
        }
        let mut failure = None;
        for c in self.completions.drain(..) {
            match c.wr_id {
                WR_ACK => self.ack_in_flight = false,
                WR_PROGRESS => self.progress.in_flight = false,
                _ => {}
            }
            if let Err(e) = c.status {
                failure.get_or_insert(format!("ring ack write failed: {e:?}"));
            }
        }
        if let Some(why) = failure {
            return Err(self.break_with(why));
        }
        self.post_progress()?;
        self.post_ack()
    }

    /// WRITEs the consumed offset into the writer's ack word if it moved and none is in flight.
    fn post_ack(&mut self) -> Result<()> {
        let Some(target) = self.writer_ack else {
            return Ok(());
        };
        if self.ack_in_flight || self.consumed <= self.ack_posted {
            return Ok(());
        }
        let value = self.consumed;
        if self.post_word(WR_ACK, 0, value, target, "ring ack")? {
            self.ack_in_flight = true;
            self.ack_posted = value;
        }
        Ok(())
    }

    /// WRITEs the progress word if it moved and none is in flight.
    fn post_progress(&mut self) -> Result<()> {
        let p = &self.progress;
        let Some(target) = p.target else {
            return Ok(());
        };
        if p.in_flight || p.wanted <= p.posted {
            return Ok(());
        }
        let value = p.wanted;
        if self.post_word(WR_PROGRESS, 8, value, target, "ring progress word")? {
            self.progress.in_flight = true;
            self.progress.posted = value;
        }
        Ok(())
    }

    /// WRITEs `value`, staged at byte `at` of the write-source buffer, into the 8-byte word
    /// `target`; false under the provider's back-pressure (the next poll tries again).
    fn post_word(
        &mut self,
        wr_id: u64,
        at: usize,
        value: u64,
        target: RemoteRegion,
        what: &str,
    ) -> Result<bool> {
        self.ack_src.store_u64(at, value)?;
        let src = LocalSlice {
            region: self.ack_src.clone(),
            offset: at,
            len: 8,
        };
        let dst = RemoteSlice {
            region: target,
            offset: 0,
            len: 8,
        };
        match self.conn.post_write(wr_id, src, dst, None) {
            Ok(()) => Ok(true),
            Err(BusError::Full { .. }) => Ok(false),
            Err(e) => Err(self.break_with(format!("posting the {what} failed: {e}"))),
        }
    }

    fn break_with(&mut self, why: String) -> BusError {
        tracing::warn!(%why, "ring reader broken");
        self.broken = Some(why.clone());
        BusError::Closed(why)
    }
}
