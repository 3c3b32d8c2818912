//! The producing side of a ring: appends records with one-sided WRITEs into the reader's
//! region, rings the tail doorbell, and reads the reader's consumed offset from its own ack word.
//!
//! A provider may refuse a post with `Full` even below `send_wr` (shm's own queues toward a
//! slow peer, tcp;ofi_rxm while connecting): that is back-pressure, not failure. A record the
//! provider refused stays staged and is posted, in order, by a later `append` or `poll`; a
//! refused doorbell is rung again by `poll`.
//!
//! Record WRITEs are posted covered (`Connection::post_write_covered`): on verbs they ask
//! for no completion entry, and a later signaled WRITE reports them: the doorbell that always
//! follows them, or the close mark, a resend, or the provider's own periodic signal.
//!
//! Resends (see `layout`, "Duplicated WRITEs"): when the reader's resend counter grows, every
//! byte from the acknowledged offset to the posted end is WRITEn again from the staging mirror,
//! and that space is not reused until those WRITEs complete (else one landing late would
//! clobber the newer records itself).

use std::collections::VecDeque;
use std::time::Duration;

use crate::access::Access;
use crate::config::EndpointConfig;
use crate::error::{BusError, Result};
use crate::provider::{Completion, Connection, LocalSlice, Region, RemoteRegion, RemoteSlice};

use super::layout::{
    check_data_len, encode_header, max_payload, record_total, ring_epoch, ACK_CONSUMED_OFFSET,
    ACK_REGION_LEN, ACK_RESEND_OFFSET, ACK_WORDS_LEN, CLOSED_MARK, CLOSED_OFFSET, KIND_DATA,
    KIND_PAD, RECORD_HEADER_LEN, RING_HEADER_LEN, TAIL_OFFSET, WORD_REFRESH_INTERVAL,
};

const WR_RECORD: u64 = 1;
const WR_TAIL: u64 = 2;
const WR_CLOSE: u64 = 5;
const WR_RESEND: u64 = 6;
/// Work requests one append may post: a padding record, the record, the doorbell.
const WRS_PER_APPEND: usize = 3;
/// Completions reaped per poll call.
const POLL_BATCH: usize = 64;
/// Most bytes of queued records one WRITE carries (see `post_unposted`): large enough that a
/// burst needs few WRITEs, small enough that one WRITE does not hold a provider's bounce
/// buffers (shm's segmented copies) for long.
pub const WRITE_COALESCE_MAX: usize = 256 * 1024;

/// Appends records to a reader's ring. Generic over the connection, so every provider runs the
/// same code. Call [`poll`](RingWriter::poll) regularly: it reaps completions, refreshes the
/// reader's acknowledged offset and re-rings the doorbell.
#[derive(Debug)]
pub struct RingWriter<C: Connection> {
    conn: C,
    /// A mirror of the data area (record at data position p is staged at p) plus the 8-byte
    /// source of the doorbell at `data_len`. A position is restaged only once the reader has
    /// acknowledged past it, so no WRITE still reads it.
    staging: C::Region,
    /// The word the reader WRITEs its consumed offset into.
    ack: C::Region,
    ring: RemoteRegion,
    data_len: usize,
    head: u64,
    /// The ring's generation, in every record header.
    epoch: u64,
    /// WRITEs staged but not yet accepted by the provider (`Full`), oldest first: records, and
    /// resent ranges (which come first). Bounded by the ring itself: each record covers at
    /// least a record header of unacknowledged bytes, so at most data_len / RECORD_HEADER_LEN
    /// wait, plus one resend's ranges (data_len / WRITE_COALESCE_MAX + 2; a new resend replaces
    /// the ranges of one not yet posted).
    unposted: VecDeque<Pending>,
    /// The largest resend counter read from the ack region.
    resend_seen: u64,
    /// Start of the last resent range while any of its WRITEs is queued or in flight: space
    /// from here on is not reused until then.
    resend_floor: Option<u64>,
    resend_outstanding: usize,
    /// Resends made (each: everything unacknowledged WRITEn again).
    resends: u64,
    /// Since when (the caller's time) the acknowledged offset has not moved while everything
    /// posted had completed, or when the doorbell was last rung again in that wait: after
    /// WORD_REFRESH_INTERVAL it is rung again (a late duplicate may have moved the reader's
    /// tail word back before it read it).
    waiting_since: Option<Duration>,
    /// Absolute end of the last record WRITE the provider accepted: what the doorbell announces.
    posted_end: u64,
    /// Posts the provider refused with `Full` (retried later).
    provider_full: u64,
    acked: u64,
    tail_posted: u64,
    tail_in_flight: bool,
    /// `close` was called: nothing more is appended or announced; the closed mark is written
    /// once the doorbell's source word is free.
    close: CloseState,
    outstanding: usize,
    send_wr: usize,
    broken: Option<String>,
    completions: Vec<Completion>,
}

impl<C: Connection> RingWriter<C> {
    /// Registers its staging and ack regions on `conn` (only its peer may write the ack
    /// word) and writes into `ring`, the reader's advertised region. `config` must be the
    /// one the connection was made with.
    pub fn create(conn: C, ring: RemoteRegion, config: &EndpointConfig) -> Result<Self> {
        let data_len = data_len_of(&ring)?;
        let staging = conn.register(data_len + 8, Access::NONE)?;
        let ack = conn.register(ACK_REGION_LEN, Access::LOCAL_WRITE | Access::REMOTE_WRITE)?;
        Self::new(conn, staging, ack, ring, config)
    }

    /// As `create`, with regions the caller registered: `staging` of at least data_len + 8
    /// bytes, `ack` of at least 8 bytes with REMOTE_WRITE.
    pub fn new(
        conn: C,
        staging: C::Region,
        ack: C::Region,
        ring: RemoteRegion,
        config: &EndpointConfig,
    ) -> Result<Self> {
        let data_len = data_len_of(&ring)?;
        if staging.len() < data_len + 8 {
            return Err(BusError::Invalid {
                what: "ring staging region",
                reason: format!("{} bytes < data length {data_len} + 8", staging.len()),
            });
        }
        if ack.len() < ACK_WORDS_LEN || !ack.access().contains(Access::REMOTE_WRITE) {
            return Err(BusError::Invalid {
                what: "ring ack region",
                reason: format!("needs {ACK_WORDS_LEN} bytes with REMOTE_WRITE"),
            });
        }
        ack.store_u64(ACK_CONSUMED_OFFSET, 0)?;
        ack.store_u64(ACK_RESEND_OFFSET, 0)?;
        Ok(RingWriter {
            conn,
            staging,
            ack,
            ring,
            data_len,
            head: 0,
            epoch: ring_epoch(&ring),
            unposted: VecDeque::new(),
            resend_seen: 0,
            resend_floor: None,
            resend_outstanding: 0,
            resends: 0,
            waiting_since: None,
            posted_end: 0,
            provider_full: 0,
            acked: 0,
            tail_posted: 0,
            tail_in_flight: false,
            close: CloseState::Open,
            outstanding: 0,
            send_wr: config.send_wr as usize,
            broken: None,
            completions: Vec::with_capacity(POLL_BATCH),
        })
    }

    /// What the reader needs to publish its consumed offset: the writer's ack word.
    pub fn ack_advert(&self) -> Result<RemoteRegion> {
        self.ack.remote()
    }

    /// Largest payload `append` accepts.
    pub fn max_payload(&self) -> usize {
        max_payload(self.data_len)
    }

    /// Absolute offset just past the last appended record.
    pub fn head(&self) -> u64 {
        self.head
    }

    /// The reader's consumed offset as last read from the ack word.
    pub fn acked(&self) -> u64 {
        self.acked
    }

    /// Times the reader asked for everything unacknowledged to be WRITEn again and it was.
    pub fn resends(&self) -> u64 {
        self.resends
    }

    /// Times the provider refused a record or doorbell WRITE with `Full` below the configured
    /// depth; each was retried by a later `append` or `poll`.
    pub fn provider_full(&self) -> u64 {
        self.provider_full
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

    fn break_with(&mut self, why: String) -> BusError {
        tracing::warn!(%why, "ring writer broken");
        self.broken = Some(why.clone());
        BusError::Closed(why)
    }

    /// Reads the ack word (a late duplicate may have moved it back: the largest value read
    /// counts). An offset past what was written means a broken reader.
    fn refresh_acked(&mut self) -> Result<()> {
        let seen = self.ack.load_u64(ACK_CONSUMED_OFFSET)?;
        if seen > self.head {
            let why = format!("reader acknowledged {seen}, past the head {}", self.head);
            self.broken = Some(why.clone());
            return Err(BusError::Protocol(why));
        }
        self.acked = self.acked.max(seen);
        Ok(())
    }

    /// Appends one record; returns its absolute offset. `Full { what: "ring" }` when the reader
    /// has not acknowledged enough room (poll and retry); the ring is then unchanged.
    pub fn append(&mut self, payload: &[u8]) -> Result<u64> {
        self.check_usable()?;
        if self.close != CloseState::Open {
            return Err(BusError::Closed("the ring was closed by its writer".into()));
        }
        if payload.len() > self.max_payload() {
            return Err(BusError::Invalid {
                what: "ring record",
                reason: format!(
                    "{} bytes exceed the limit {}",
                    payload.len(),
                    self.max_payload()
                ),
            });
        }
        self.refresh_acked()?;
        let total = record_total(payload.len());
        let pos = (self.head % self.data_len as u64) as usize;
        let remaining = self.data_len - pos;
        let gap = if total <= remaining { 0 } else { remaining };
        let reusable_from = self.resend_floor.map_or(self.acked, |f| f.min(self.acked));
        let in_use = self.head - reusable_from;
        if in_use + (gap + total) as u64 > self.data_len as u64 {
            return Err(BusError::Full { what: "ring" });
        }
        if self.outstanding + WRS_PER_APPEND > self.send_wr {
            return Err(BusError::Full {
                what: "ring send queue",
            });
        }
        if gap >= RECORD_HEADER_LEN {
            let pad_len = (gap - RECORD_HEADER_LEN) as u32;
            let header = encode_header(self.head, pad_len, KIND_PAD, self.epoch, &[]);
            self.stage_record(self.head, &header, &[])?;
        }
        self.head += gap as u64;
        let at = self.head;
        let header = encode_header(at, payload.len() as u32, KIND_DATA, self.epoch, payload);
        self.stage_record(at, &header, payload)?;
        self.head += total as u64;
        self.post_unposted()?;
        self.ring_doorbell()?;
        Ok(at)
    }

    /// Stages `header + payload` (zero-padded to alignment) for absolute offset `at` and queues
    /// its WRITE.
    fn stage_record(&mut self, at: u64, header: &[u8], payload: &[u8]) -> Result<()> {
        let pos = (at % self.data_len as u64) as usize;
        let total = record_total(payload.len());
        let pad = total - RECORD_HEADER_LEN - payload.len();
        self.staging.write(pos, header)?;
        self.staging.write(pos + RECORD_HEADER_LEN, payload)?;
        self.staging
            .write(pos + RECORD_HEADER_LEN + payload.len(), &[0u8; 8][..pad])?;
        self.unposted.push_back(Pending {
            at,
            total,
            resend: false,
        });
        Ok(())
    }

    /// Queues WRITEs of every byte from the acknowledged offset to the posted end, ahead of
    /// the records not yet posted, replacing the ranges of an earlier resend still queued.
    /// The staging mirror holds those bytes: positions are restaged only past `acked`.
    fn queue_resend(&mut self) {
        self.unposted.retain(|p| !p.resend);
        let (from, end) = (self.acked, self.posted_end);
        let mut ranges = Vec::new();
        let mut at = from;
        while at < end {
            let pos = (at % self.data_len as u64) as usize;
            let len = ((end - at) as usize)
                .min(self.data_len - pos)
                .min(WRITE_COALESCE_MAX);
            ranges.push(Pending {
                at,
                total: len,
                resend: true,
            });
            at += len as u64;
        }
        if ranges.is_empty() {
            return;
        }
        self.resends += 1;
        self.resend_floor = Some(self.resend_floor.map_or(from, |f| f.min(from)));
        for r in ranges.into_iter().rev() {
            self.unposted.push_front(r);
        }
    }

    /// Posts queued record WRITEs, oldest first, until the provider says `Full` (they wait for
    /// the next call). One send slot stays free for the doorbell. Records queued back to back
    /// in the data area go out as one WRITE (up to [`WRITE_COALESCE_MAX`]): some providers
    /// carry one WRITE per round trip of both processes' progress (shm with delivery
    /// complete), so a backlog of small records would otherwise cost one round trip each.
    fn post_unposted(&mut self) -> Result<()> {
        while let Some(&first) = self.unposted.front() {
            if self.outstanding + 1 >= self.send_wr {
                return Ok(());
            }
            let at = first.at;
            let pos = (at % self.data_len as u64) as usize;
            let (records, total) = self.coalescible(first, pos);
            let src = LocalSlice {
                region: self.staging.clone(),
                offset: pos,
                len: total,
            };
            let dst = RemoteSlice {
                region: self.ring,
                offset: (RING_HEADER_LEN + pos) as u64,
                len: total as u64,
            };
            // A record's WRITE asks for no completion of its own (the doorbell's, always
            // posted after it, reports it); a resend's is counted by itself.
            let posted = if first.resend {
                self.conn.post_write(WR_RESEND, src, dst, None)
            } else {
                self.conn.post_write_covered(WR_RECORD, src, dst)
            };
            match posted {
                Ok(()) => {}
                Err(BusError::Full { .. }) => {
                    self.provider_full += 1;
                    return Ok(());
                }
                Err(e) => {
                    let why = format!("posting a ring record failed: {e}");
                    return Err(self.break_with(why));
                }
            }
            self.outstanding += 1;
            if first.resend {
                self.resend_outstanding += 1;
            }
            self.posted_end = self.posted_end.max(at + total as u64);
            self.unposted.drain(..records);
        }
        Ok(())
    }

    /// How many queued WRITEs from the front (`first`, at data position `pos`) one WRITE can
    /// carry, and their bytes: each must start where the previous ended (a padding record's
    /// WRITE covers only its header), without wrapping, and be of the same sort (record or
    /// resend: they complete under different ids).
    fn coalescible(&self, first: Pending, pos: usize) -> (usize, usize) {
        let mut records = 1;
        let mut total = first.total;
        for next in self.unposted.iter().skip(1) {
            if next.at != first.at + total as u64
                || next.resend != first.resend
                || pos + total + next.total > self.data_len
                || total + next.total > WRITE_COALESCE_MAX
            {
                break;
            }
            records += 1;
            total += next.total;
        }
        (records, total)
    }

    /// WRITEs the end of the posted records into the reader's tail word unless one such write
    /// is still in flight. One at a time: with unordered placement two tail writes could land
    /// in either order. A `Full` provider leaves it for the next `poll`.
    fn ring_doorbell(&mut self) -> Result<()> {
        if self.close != CloseState::Open
            || self.tail_in_flight
            || self.tail_posted >= self.posted_end
            || self.outstanding >= self.send_wr
        {
            return Ok(());
        }
        if !self.post_word(WR_TAIL, self.posted_end, TAIL_OFFSET, "the ring doorbell")? {
            return Ok(());
        }
        self.tail_in_flight = true;
        self.tail_posted = self.posted_end;
        Ok(())
    }

    /// WRITEs `value` from the staging word (after the data) into the reader's header word
    /// at `offset`; the doorbell and the closed mark share that source word, which is why
    /// only one of them is ever in flight. False if the provider is full (try again at the
    /// next `poll`); an error breaks the writer.
    fn post_word(&mut self, wr_id: u64, value: u64, offset: usize, what: &str) -> Result<bool> {
        self.staging.store_u64(self.data_len, value)?;
        let src = LocalSlice {
            region: self.staging.clone(),
            offset: self.data_len,
            len: 8,
        };
        let dst = RemoteSlice {
            region: self.ring,
            offset: offset as u64,
            len: 8,
        };
        match self.conn.post_write(wr_id, src, dst, None) {
            Ok(()) => {
                self.outstanding += 1;
                Ok(true)
            }
            Err(BusError::Full { .. }) => {
                self.provider_full += 1;
                Ok(false)
            }
            Err(e) => Err(self.break_with(format!("posting {what} failed: {e}"))),
        }
    }

    /// Reaps completions, refreshes the acknowledged offset, posts records the provider
    /// refused earlier and re-rings the doorbell.
    /// A failed work request breaks the writer: the ring is unusable, the error says why.
    /// `now` is the caller's monotonic time since any fixed origin (it paces the doorbell's
    /// refresh).
    pub fn poll(&mut self, now: Duration) -> Result<()> {
        self.check_usable()?;
        self.completions.clear();
        if let Err(e) = self.conn.poll(&mut self.completions, POLL_BATCH) {
            return Err(self.break_with(format!("polling the ring connection failed: {e}")));
        }
        let mut failure = None;
        for c in self.completions.drain(..) {
            // Covered record WRITEs completed before this one (see `post_unposted`).
            self.outstanding = self.outstanding.saturating_sub(1 + c.covers as usize);
            if c.wr_id == WR_TAIL {
                self.tail_in_flight = false;
            }
            if c.wr_id == WR_RESEND {
                self.resend_outstanding = self.resend_outstanding.saturating_sub(1);
            }
            if c.wr_id == WR_CLOSE && c.status.is_ok() {
                self.close = CloseState::Delivered;
            }
            if let Err(e) = c.status {
                failure.get_or_insert(format!("ring write failed: {e:?}"));
            }
        }
        if let Some(why) = failure {
            return Err(self.break_with(why));
        }
        let acked_before = self.acked;
        self.refresh_acked()?;
        if self.close != CloseState::Open {
            return self.post_close();
        }
        let resend = self.ack.load_u64(ACK_RESEND_OFFSET)?;
        if resend > self.resend_seen {
            self.resend_seen = resend;
            self.queue_resend();
        }
        self.post_unposted()?;
        if self.resend_outstanding == 0 && !self.unposted.iter().any(|p| p.resend) {
            self.resend_floor = None;
        }
        self.note_waiting(acked_before, now);
        self.ring_doorbell()
    }

    /// Times a wait for an acknowledgement with everything posted and completed; after
    /// WORD_REFRESH_INTERVAL of it the doorbell is rung again.
    fn note_waiting(&mut self, acked_before: u64, now: Duration) {
        let waiting = self.acked == acked_before
            && self.acked < self.posted_end
            && self.outstanding == 0
            && self.unposted.is_empty();
        if !waiting {
            self.waiting_since = None;
            return;
        }
        let since = *self.waiting_since.get_or_insert(now);
        if now.saturating_sub(since) >= WORD_REFRESH_INTERVAL {
            self.waiting_since = Some(now);
            // Rung again with the same value by `ring_doorbell`.
            self.tail_posted = self.tail_posted.min(self.acked);
        }
    }

    /// Ends the ring on purpose: records not yet posted are dropped, no more doorbells are
    /// rung, and the header's closed word is WRITEn so the reader stops waiting (it still takes
    /// every record that landed before). Call `poll` until [`close_delivered`]
    /// (Self::close_delivered), within a deadline of the caller's: the mark lands only with
    /// both sides' progress.
    pub fn close(&mut self) -> Result<()> {
        self.check_usable()?;
        if self.close == CloseState::Open {
            self.close = CloseState::Closing;
            self.unposted.clear();
        }
        self.post_close()
    }

    /// Whether the closed mark's WRITE completed.
    pub fn close_delivered(&self) -> bool {
        self.close == CloseState::Delivered
    }

    /// Posts the closed mark once the doorbell's source word is free (a doorbell in flight may
    /// still read it) and a send slot is.
    fn post_close(&mut self) -> Result<()> {
        if self.close != CloseState::Closing
            || self.tail_in_flight
            || self.outstanding >= self.send_wr
        {
            return Ok(());
        }
        if !self.post_word(WR_CLOSE, CLOSED_MARK, CLOSED_OFFSET, "the closed mark")? {
            return Ok(());
        }
        // The doorbell's source now holds the mark: never ring it again.
        self.tail_in_flight = true;
        self.close = CloseState::Posted;
        Ok(())
    }

    /// Whether WRITEs are in flight or waiting to be posted: the owner should keep calling
    /// `poll` promptly (on manual-progress providers nothing moves between its calls).
    pub fn in_flight(&self) -> bool {
        self.outstanding > 0
            || !self.unposted.is_empty()
            || (self.close == CloseState::Open && self.tail_posted < self.posted_end)
    }

    /// Whether every appended record has been acknowledged by the reader.
    pub fn is_drained(&self) -> bool {
        self.acked == self.head
    }
}

/// A WRITE waiting to be posted: `total` bytes of the staging mirror from absolute offset `at`.
#[derive(Debug, Clone, Copy)]
struct Pending {
    at: u64,
    total: usize,
    /// Part of a resend (bytes posted before), not a new record.
    resend: bool,
}

/// Where `close` stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CloseState {
    Open,
    /// Waiting for the doorbell's source word or a send slot.
    Closing,
    Posted,
    Delivered,
}

fn data_len_of(ring: &RemoteRegion) -> Result<usize> {
    let data_len = (ring.len as usize)
        .checked_sub(RING_HEADER_LEN)
        .ok_or(BusError::Invalid {
            what: "ring advertisement",
            reason: format!("{} bytes cannot hold the ring header", ring.len),
        })?;
    check_data_len(data_len)?;
    Ok(data_len)
}
