//! The primary's end of one replication link: ships the backlog into the replica's ring with
//! one-sided WRITEs ([`bus::ring::RingWriter`]) and reads back what the replica has applied.
//!
//! Two words come back by one-sided WRITE from the replica: the ring's own consumed offset
//! (ring space, inside the RingWriter) and the replica's applied replication offset, written
//! into a small region this side registers and advertises (the ring's progress word). Only
//! the second is an acknowledgement for WAIT and `min-replicas`: consumed is not executed.
//!
//! No thread, no clock: the node calls [`Shipper::pump`] whenever the backlog grew or time
//! passed (acks arrive without any event on this side).

use bus::ring::layout::RING_HEADER_LEN;
use bus::ring::RingWriter;
use bus::{Access, BusError, Connection, EndpointConfig, Region, RemoteRegion};
use std::time::Duration;

use super::backlog::Backlog;
use super::fullsync::{SnapshotSender, SnapshotStep};
use super::link_frame::{encode_frame, max_frame_bytes, Frame};

/// Records one `pump` posts at most, so one replica's link cannot keep its thread from the
/// others' for long: a pump costs at most this many WRITE posts.
pub const PUMP_RECORDS_MAX: usize = 1024;

/// Bytes of the applied-offset region the replica writes into.
const APPLIED_WORD_LEN: usize = 8;

#[derive(Debug, thiserror::Error)]
pub enum ShipError {
    /// The replica needs bytes the backlog no longer (or not yet) holds: drop the link and do
    /// a full sync.
    #[error("replica needs offset {wanted}, the backlog holds {start}..={end}: full sync needed")]
    OutOfBacklog { wanted: u64, start: u64, end: u64 },
    /// The replica claims to have applied bytes never shipped: a broken or foreign replica.
    #[error("replica acknowledged offset {acked}, past the last byte shipped {shipped}")]
    AckPastShipped { acked: u64, shipped: u64 },
    #[error("replication ring with {max_payload}-byte records cannot carry a stream byte")]
    RingTooSmall { max_payload: usize },
    #[error("replication ring: {0}")]
    Bus(#[from] BusError),
}

/// Where a link starts (the PSYNC decision).
#[derive(Debug)]
pub enum ShipStart {
    /// `+CONTINUE`: the stream from byte `from`; the replica applied everything before it.
    Continue { from: u64 },
    /// `+FULLRESYNC`: `snapshot` (the node's snapshot bytes) taken at replication `offset`,
    /// then the stream from `offset + 1`.
    FullSync { offset: u64, snapshot: Vec<u8> },
}

/// What one pump did and where the link stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShipProgress {
    /// Stream bytes posted by this pump.
    pub shipped_bytes: u64,
    /// The next stream byte to ship.
    pub next_offset: u64,
    /// The replica's applied offset, as last read.
    pub acked_offset: u64,
    /// The ring (or the provider's queue) refused a record: the replica has to catch up.
    pub ring_full: bool,
    /// Snapshot bytes of a full sync still to ship before the stream.
    pub snapshot_remaining: usize,
}

/// Counters over the link's life, for INFO and tests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ShipCounters {
    /// Ring records posted (stream and snapshot).
    pub records: u64,
    /// Stream bytes posted.
    pub stream_bytes: u64,
    /// Snapshot bytes posted.
    pub snapshot_bytes: u64,
    /// Times a record was refused because the ring held unacknowledged bytes where it would go.
    pub ring_full: u64,
    /// The most ring bytes ever unacknowledged at once (never above the ring's data length).
    pub ring_in_use_max: u64,
}

/// Ships one replica's stream.
pub struct Shipper<C: Connection> {
    writer: RingWriter<C>,
    /// The replica WRITEs its applied offset here.
    applied: C::Region,
    ring_data_len: u64,
    next: u64,
    acked: u64,
    snapshot: Option<SnapshotSender>,
    frame: Vec<u8>,
    counters: ShipCounters,
}

impl<C: Connection> Shipper<C> {
    /// A link into the replica's `ring` (its advert) over `conn`, starting as the PSYNC
    /// decision said.
    pub fn create(
        conn: C,
        ring: RemoteRegion,
        config: &EndpointConfig,
        start: ShipStart,
    ) -> Result<Self, ShipError> {
        // The applied word is this link's own region, registered before the connection
        // moves into the writer: only this replica's connection can reach it.
        let applied =
            conn.register(APPLIED_WORD_LEN, Access::LOCAL_WRITE | Access::REMOTE_WRITE)?;
        let writer = RingWriter::create(conn, ring, config)?;
        if max_frame_bytes(writer.max_payload()) == 0 {
            return Err(ShipError::RingTooSmall {
                max_payload: writer.max_payload(),
            });
        }
        let (next, acked, snapshot) = match start {
            ShipStart::Continue { from } => (from.max(1), from.max(1) - 1, None),
            // The replica has applied nothing of this history until it loads the snapshot.
            ShipStart::FullSync { offset, snapshot } => {
                (offset + 1, 0, Some(SnapshotSender::new(offset, snapshot)))
            }
        };
        Ok(Shipper {
            writer,
            applied,
            ring_data_len: ring.len.saturating_sub(RING_HEADER_LEN as u64),
            next,
            acked,
            snapshot,
            frame: Vec::new(),
            counters: ShipCounters::default(),
        })
    }

    /// What the replica needs: the ring's ack word (ring space) and the applied-offset word.
    pub fn adverts(&self) -> Result<(RemoteRegion, RemoteRegion), ShipError> {
        Ok((self.writer.ack_advert()?, self.applied.remote()?))
    }

    /// The replica's applied offset, as last read (never moves back).
    pub fn acked_offset(&self) -> u64 {
        self.acked
    }

    /// The next stream byte to ship.
    pub fn next_offset(&self) -> u64 {
        self.next
    }

    pub fn counters(&self) -> ShipCounters {
        self.counters
    }

    /// Ring bytes written but not yet consumed by the replica.
    pub fn ring_in_use(&self) -> u64 {
        self.writer.head() - self.writer.acked()
    }

    /// The ring's data length: `ring_in_use` never exceeds it.
    pub fn ring_data_len(&self) -> u64 {
        self.ring_data_len
    }

    /// Reaps completions, reads the replica's acknowledgements, then posts what the ring has
    /// room for: the rest of a full sync's snapshot, then the backlog from the next offset.
    /// `now` is the caller's monotonic time since any fixed origin (it paces the ring's
    /// doorbell refresh).
    pub fn pump(&mut self, backlog: &Backlog, now: Duration) -> Result<ShipProgress, ShipError> {
        self.writer.poll(now)?;
        self.read_applied()?;
        let max_chunk = max_frame_bytes(self.writer.max_payload());
        let mut posts = 0;
        let mut ring_full = self.ship_snapshot(max_chunk, &mut posts)?;
        let mut shipped = 0u64;
        if !ring_full && self.snapshot.is_none() {
            let Some(range) = backlog.range(self.next) else {
                return Err(ShipError::OutOfBacklog {
                    wanted: self.next,
                    start: backlog.start_offset(),
                    end: backlog.master_repl_offset(),
                });
            };
            for (first_byte, bytes) in range.records(max_chunk) {
                if posts == PUMP_RECORDS_MAX {
                    break;
                }
                self.frame.clear();
                encode_frame(&Frame::Stream { first_byte, bytes }, &mut self.frame);
                if !self.post_frame()? {
                    ring_full = true;
                    break;
                }
                posts += 1;
                self.next = first_byte + bytes.len() as u64;
                shipped += bytes.len() as u64;
            }
            self.counters.stream_bytes += shipped;
        }
        Ok(ShipProgress {
            shipped_bytes: shipped,
            next_offset: self.next,
            acked_offset: self.acked,
            ring_full,
            snapshot_remaining: self.snapshot.as_ref().map_or(0, |s| s.remaining()),
        })
    }

    /// Posts a ping frame (the replica's sign of a live primary when the stream is idle);
    /// `false` when the ring has no room (then the replica has records to read anyway).
    pub fn ping(&mut self) -> Result<bool, ShipError> {
        self.frame.clear();
        encode_frame(&Frame::Ping, &mut self.frame);
        self.post_frame()
    }

    /// Whether WRITEs are in flight or bytes are unacknowledged: the caller should pump again
    /// soon rather than sleep (on manual-progress providers, shm and tcp, acks and WRITEs
    /// move only while this side calls into the provider).
    pub fn busy(&self) -> bool {
        self.writer.in_flight() || self.ring_in_use() > 0 || self.acked + 1 < self.next
    }

    /// Ends the link on purpose: the replica is told through the ring's closed mark (it would
    /// otherwise wait for records forever). Pump `poll_close` until `close_delivered`.
    pub fn close(&mut self) -> Result<(), ShipError> {
        Ok(self.writer.close()?)
    }

    /// Drives the closed mark's WRITE (`now` as `pump`'s).
    pub fn poll_close(&mut self, now: Duration) -> Result<(), ShipError> {
        Ok(self.writer.poll(now)?)
    }

    /// Whether the replica's ring has the closed mark.
    pub fn close_delivered(&self) -> bool {
        self.writer.close_delivered()
    }

    /// Posts snapshot frames while the ring takes them; returns whether it refused one.
    fn ship_snapshot(&mut self, max_chunk: usize, posts: &mut usize) -> Result<bool, ShipError> {
        while let Some(sender) = self.snapshot.as_ref() {
            if *posts == PUMP_RECORDS_MAX {
                return Ok(false);
            }
            let Some(step) = sender.next_frame(max_chunk, &mut self.frame) else {
                self.snapshot = None;
                break;
            };
            if !self.post_frame()? {
                return Ok(true);
            }
            *posts += 1;
            if let SnapshotStep::Chunk { len } = step {
                self.counters.snapshot_bytes += len as u64;
            }
            if let Some(sender) = self.snapshot.as_mut() {
                sender.sent(step);
            }
        }
        Ok(false)
    }

    /// Appends the staged frame; `false` when the ring or the send queue is full.
    fn post_frame(&mut self) -> Result<bool, ShipError> {
        match self.writer.append(&self.frame) {
            Ok(_) => {
                self.counters.records += 1;
                let in_use = self.ring_in_use();
                self.counters.ring_in_use_max = self.counters.ring_in_use_max.max(in_use);
                Ok(true)
            }
            Err(BusError::Full { .. }) => {
                self.counters.ring_full += 1;
                Ok(false)
            }
            Err(e) => Err(e.into()),
        }
    }

    fn read_applied(&mut self) -> Result<(), ShipError> {
        let seen = self.applied.load_u64(0)?;
        let shipped = self.next - 1;
        if seen > shipped {
            return Err(ShipError::AckPastShipped {
                acked: seen,
                shipped,
            });
        }
        self.acked = self.acked.max(seen);
        Ok(())
    }
}
