//! The consuming side of a ring: owns the registered `[header | data]` region, validates each
//! record by its own header and checksum, hands records out strictly in offset order, and
//! publishes its consumed offset with a one-sided WRITE into the writer's ack word.
//!
//! It looks at the record at its consumed offset on every `next`, whatever the doorbell says;
//! when one the doorbell announced stays invalid (a late duplicate WRITE overwrote it), it asks
//! the writer to WRITE everything unacknowledged again (see `layout`, "Duplicated WRITEs").

use crate::access::Access;
use crate::error::{BusError, Result};
use crate::provider::{Completion, Connection, LocalSlice, Region, RemoteRegion, RemoteSlice};

use super::layout::{
    check_data_len, max_payload, next_record_start, record_crc, record_total, ring_epoch,
    RecordHeader, ACK_CONSUMED_OFFSET, ACK_RESEND_OFFSET, ACK_WORDS_LEN, CLOSED_MARK,
    CLOSED_OFFSET, KIND_DATA, KIND_PAD, RECORD_HEADER_LEN, RING_HEADER_LEN, STALL_WAIT_MAX,
    STALL_WAIT_MIN, TAIL_OFFSET, WORD_REFRESH_INTERVAL,
};
use std::time::Duration;

const WR_ACK: u64 = 3;
const WR_PROGRESS: u64 = 4;
const WR_RESEND_ASK: u64 = 7;
/// Where each word's WRITE source sits in the ack source region.
const SRC_ACK: usize = 0;
const SRC_PROGRESS: usize = 8;
const SRC_RESEND: usize = 16;
/// Bytes of the ack source: the consumed offset, the caller's progress word, the resend counter.
pub const ACK_SRC_LEN: usize = 24;
/// Completions reaped per poll call.
const POLL_BATCH: usize = 16;

/// Reads records a [`super::RingWriter`] appended. Call [`next`](RingReader::next) to take
/// records and [`poll`](RingReader::poll) to publish progress (the writer can only reuse space
/// the reader has acknowledged).
#[derive(Debug)]
pub struct RingReader<C: Connection> {
    conn: C,
    ring: C::Region,
    /// Sources of the word WRITEs, one slot per word; a slot is rewritten only when no WRITE
    /// of it is in flight.
    ack_src: C::Region,
    data_len: usize,
    /// The ring's generation: records without it are not this session's.
    epoch: u64,
    consumed: u64,
    /// The consumed offset, published into the writer's ack region.
    ack: WordOut,
    /// The caller's second word (replication: the applied offset), published like the ack.
    progress: WordOut,
    /// The resend counter, published into the writer's ack region.
    resend: WordOut,
    /// The largest doorbell value read: evidence that records up to it were posted.
    tail_seen: u64,
    /// Since when (the caller's time) looks have found no valid record below `tail_seen`,
    /// or when the last resend request of this stall was made.
    stalled_since: Option<Duration>,
    /// How long a stall lasts before the next resend request (doubles while requests bring
    /// nothing).
    stall_wait: Duration,
    /// When (the caller's time) the published words were last WRITEn again (or the first
    /// poll): WORD_REFRESH_INTERVAL later they are WRITEn again.
    refreshed_at: Option<Duration>,
    broken: Option<String>,
    completions: Vec<Completion>,
    not_ready: u64,
}

/// A monotone u64 the reader WRITEs into a region of the writer's side: the consumed offset,
/// the resend counter, or the owner's progress word (e.g. a replica's applied replication
/// offset). One WRITE in flight at a time, so two of them never land in the wrong order; a
/// late duplicate still can move it back, hence the periodic refresh.
#[derive(Debug, Default)]
struct WordOut {
    /// The region and the byte offset in it.
    target: Option<(RemoteRegion, u64)>,
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
    /// minus the header is the data area), `ack_src` of at least [`ACK_SRC_LEN`] bytes. The
    /// ring is zeroed; no writer may be writing into it yet.
    pub fn new(conn: C, ring: C::Region, ack_src: C::Region) -> Result<Self> {
        let data_len = ring.len().saturating_sub(RING_HEADER_LEN);
        check_data_len(data_len)?;
        if !ring.access().contains(Access::REMOTE_WRITE) || ack_src.len() < ACK_SRC_LEN {
            return Err(BusError::Invalid {
                what: "ring regions",
                reason: format!(
                    "the ring needs REMOTE_WRITE and the ack source {ACK_SRC_LEN} bytes"
                ),
            });
        }
        // Zero all of it: a record left by an earlier session at the same position carries the
        // same offset as the one this session will write there, and would validate.
        let zeros = [0u8; 4096];
        for at in (0..ring.len()).step_by(zeros.len()) {
            ring.write(at, &zeros[..zeros.len().min(ring.len() - at)])?;
        }
        let epoch = ring_epoch(&ring.remote()?);
        Ok(RingReader {
            conn,
            ring,
            ack_src,
            data_len,
            epoch,
            consumed: 0,
            ack: WordOut::default(),
            progress: WordOut::default(),
            resend: WordOut::default(),
            tail_seen: 0,
            stalled_since: None,
            stall_wait: STALL_WAIT_MIN,
            refreshed_at: None,
            broken: None,
            completions: Vec::with_capacity(POLL_BATCH),
            not_ready: 0,
        })
    }

    /// What the writer needs: the ring's address, length and key.
    pub fn advert(&self) -> Result<RemoteRegion> {
        self.ring.remote()
    }

    /// Where to publish the consumed offset and the resend counter (the writer's
    /// `ack_advert`).
    pub fn set_writer_ack(&mut self, ack: RemoteRegion) -> Result<()> {
        if ack.len < ACK_WORDS_LEN as u64 {
            return Err(BusError::Protocol(format!(
                "writer ack region of {} bytes cannot hold its {ACK_WORDS_LEN} bytes of words",
                ack.len
            )));
        }
        self.ack.target = Some((ack, ACK_CONSUMED_OFFSET as u64));
        self.resend.target = Some((ack, ACK_RESEND_OFFSET as u64));
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
        self.progress.target = Some((target, 0));
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

    /// Whether a word WRITE is in flight or still to be posted, or records the doorbell
    /// announced have not been taken yet: the owner should keep calling `next` and `poll`
    /// promptly (on manual-progress providers nothing moves between its calls).
    pub fn in_flight(&self) -> bool {
        [&self.ack, &self.progress, &self.resend]
            .iter()
            .any(|w| w.in_flight || (w.target.is_some() && w.wanted > w.posted))
            || self.tail_seen > self.consumed
    }

    /// Resend requests made: times a record the doorbell announced stayed invalid (a late
    /// duplicate WRITE overwrote it, or it was slow) and the reader asked for it again.
    pub fn resend_requests(&self) -> u64 {
        self.resend.wanted
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

    /// The registered ring, for tests that place bytes as a misbehaving fabric would.
    #[cfg(test)]
    pub(crate) fn ring_region(&self) -> &C::Region {
        &self.ring
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
    /// `now` is the caller's monotonic time since any fixed origin: a record the doorbell
    /// announced that stays invalid for long enough is asked for again (see `layout`).
    pub fn next(&mut self, buf: &mut Vec<u8>, now: Duration) -> Result<Option<u64>> {
        self.check_usable()?;
        self.tail_seen = self.tail_seen.max(self.ring.load_u64(TAIL_OFFSET)?);
        // Looked at whatever the doorbell says: a record may be valid before its doorbell
        // lands, and a late duplicate may have moved the doorbell word back.
        let got = self.take_record(buf)?;
        match got {
            Some(_) => {
                self.stalled_since = None;
                self.stall_wait = STALL_WAIT_MIN;
            }
            None if self.tail_seen > self.consumed => {
                self.not_ready += 1;
                self.note_stall(now);
            }
            None => {}
        }
        if got.is_none() && self.closed_by_writer()? {
            return Err(self.break_with("the writer closed the ring".into()));
        }
        Ok(got)
    }

    /// A look at `now` found no valid record where the doorbell said one was posted: once
    /// that has lasted `stall_wait`, ask the writer to WRITE everything unacknowledged again.
    fn note_stall(&mut self, now: Duration) {
        let since = *self.stalled_since.get_or_insert(now);
        if now.saturating_sub(since) < self.stall_wait {
            return;
        }
        self.stalled_since = Some(now);
        self.stall_wait = (self.stall_wait * 2).min(STALL_WAIT_MAX);
        self.resend.wanted += 1;
        tracing::debug!(
            consumed = self.consumed,
            tail = self.tail_seen,
            request = self.resend.wanted,
            "ring reader stalled: asking for a resend"
        );
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
            if h.offset != start || h.epoch != self.epoch {
                return Ok(None);
            }
            let len = h.len as usize;
            match h.kind {
                KIND_PAD => {
                    if RECORD_HEADER_LEN + len != remaining
                        || record_crc(h.offset, h.len, h.kind, h.epoch, &[]) != h.crc
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
                    if record_crc(h.offset, h.len, h.kind, h.epoch, buf) != h.crc {
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

    /// Reaps word completions and publishes each word (consumed offset, progress, resend
    /// counter) that moved and has no WRITE in flight; every WORD_REFRESH_INTERVAL, the
    /// words already published again. `now` is the caller's monotonic time since any fixed
    /// origin (the same as `next`'s).
    pub fn poll(&mut self, now: Duration) -> Result<()> {
        self.check_usable()?;
        self.completions.clear();
        if let Err(e) = self.conn.poll(&mut self.completions, POLL_BATCH) {
            return Err(self.break_with(format!("polling the ring connection failed: {e}")));
        }
        let mut failure = None;
        for c in self.completions.drain(..) {
            match c.wr_id {
                WR_ACK => self.ack.in_flight = false,
                WR_PROGRESS => self.progress.in_flight = false,
                WR_RESEND_ASK => self.resend.in_flight = false,
                _ => {}
            }
            if let Err(e) = c.status {
                failure.get_or_insert(format!("ring ack write failed: {e:?}"));
            }
        }
        if let Some(why) = failure {
            return Err(self.break_with(why));
        }
        self.ack.wanted = self.consumed;
        let refresh = self.refresh_due(now);
        self.post_word(Word::Resend, refresh)?;
        self.post_word(Word::Progress, refresh)?;
        self.post_word(Word::Ack, refresh)
    }

    /// Whether the published words are due to be WRITEn again at `now` (then the interval
    /// starts again).
    fn refresh_due(&mut self, now: Duration) -> bool {
        let last = *self.refreshed_at.get_or_insert(now);
        if now.saturating_sub(last) < WORD_REFRESH_INTERVAL {
            return false;
        }
        self.refreshed_at = Some(now);
        true
    }

    /// WRITEs `which` if it moved (or `refresh` and it was published before) and none of its
    /// WRITEs is in flight; under the provider's back-pressure the next poll tries again.
    fn post_word(&mut self, which: Word, refresh: bool) -> Result<()> {
        let (wr_id, src_at, what) = match which {
            Word::Ack => (WR_ACK, SRC_ACK, "ring ack"),
            Word::Progress => (WR_PROGRESS, SRC_PROGRESS, "ring progress word"),
            Word::Resend => (WR_RESEND_ASK, SRC_RESEND, "ring resend request"),
        };
        let word = match which {
            Word::Ack => &self.ack,
            Word::Progress => &self.progress,
            Word::Resend => &self.resend,
        };
        let Some((target, offset)) = word.target else {
            return Ok(());
        };
        let due = word.wanted > word.posted || (refresh && word.posted > 0);
        if word.in_flight || !due {
            return Ok(());
        }
        let value = word.wanted;
        self.ack_src.store_u64(src_at, value)?;
        let src = LocalSlice {
            region: self.ack_src.clone(),
            offset: src_at,
            len: 8,
        };
        let dst = RemoteSlice {
            region: target,
            offset,
            len: 8,
        };
        match self.conn.post_write(wr_id, src, dst, None) {
            Ok(()) => {}
            Err(BusError::Full { .. }) => return Ok(()),
            Err(e) => return Err(self.break_with(format!("posting the {what} failed: {e}"))),
        }
        let word = match which {
            Word::Ack => &mut self.ack,
            Word::Progress => &mut self.progress,
            Word::Resend => &mut self.resend,
        };
        word.in_flight = true;
        word.posted = value;
        Ok(())
    }

    fn break_with(&mut self, why: String) -> BusError {
        tracing::warn!(%why, "ring reader broken");
        self.broken = Some(why.clone());
        BusError::Closed(why)
    }
}

/// The words the reader publishes.
#[derive(Debug, Clone, Copy)]
enum Word {
    Ack,
    Progress,
    Resend,
}
