//! The replica's end of one replication link: owns the ring the primary WRITEs into
//! ([`bus::ring::RingReader`]), turns its records back into stream bytes released strictly in
//! offset order ([`ApplyOrder`]) or into a full sync's snapshot, and publishes the applied
//! offset into the primary's applied word by one-sided WRITE (the ring's progress word).
//!
//! The caller executes what `poll` released and only then calls `publish_applied`: the
//! acknowledgement a WAIT counts is for executed commands, not for bytes read off the ring.

use bus::ring::RingReader;
use bus::{BusError, Connection, RemoteRegion};
use std::time::Duration;

use super::apply_order::{ApplyOrder, ApplyOrderError};
use super::fullsync::{FullSyncError, Snapshot, SnapshotAssembler};
use super::link_frame::{decode_frame, Frame, FrameError};

/// Ring records one `poll` takes at most, so a fast primary cannot keep the replica's thread
/// (and its command execution) waiting behind an endless poll.
pub const POLL_RECORDS_MAX: usize = 1024;

#[derive(Debug, thiserror::Error)]
pub enum LinkError {
    #[error("replication ring: {0}")]
    Bus(#[from] BusError),
    #[error("replication frame: {0}")]
    Frame(#[from] FrameError),
    /// The replica lost track of its primary: it needs a full sync.
    #[error("replication stream: {0}")]
    Order(#[from] ApplyOrderError),
    #[error("full sync: {0}")]
    FullSync(#[from] FullSyncError),
    #[error("stream record at {0} while a snapshot is arriving")]
    StreamDuringSnapshot(u64),
    #[error("applied offset {applied} is past the released offset {released}")]
    AppliedPastReleased { applied: u64, released: u64 },
}

/// Bounds of one link, from the node's configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinkLimits {
    /// The ring's data length (`repl-ring-size`).
    pub ring_data_len: usize,
    /// Stream bytes held behind a gap (see [`ApplyOrder`]).
    pub reorder_bytes_max: usize,
    /// The largest snapshot accepted (see [`super::fullsync::SNAPSHOT_BYTES_MAX_DEFAULT`]).
    pub snapshot_bytes_max: u64,
}

/// What one `poll` produced. Execute the released bytes (already in `out`) first, then load
/// the snapshot if there is one: stream bytes after it come in later polls.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct LinkPoll {
    /// Stream bytes appended to `out`.
    pub released: u64,
    /// Ring records read, pings included: the primary was heard from.
    pub records: u64,
    /// A full sync's snapshot, complete and checked.
    pub snapshot: Option<Snapshot>,
}

/// Receives one primary's stream.
pub struct ReplicaLink<C: Connection> {
    reader: RingReader<C>,
    order: ApplyOrder,
    snapshot: SnapshotAssembler,
    payload: Vec<u8>,
    applied: u64,
}

impl<C: Connection> ReplicaLink<C> {
    /// Registers the ring over `conn`. `processed`: the last stream byte this replica applied
    /// (the offset its PSYNC continues from, minus one); a full sync moves it.
    pub fn create(conn: C, limits: LinkLimits, processed: u64) -> Result<Self, LinkError> {
        let reader = RingReader::create(conn, limits.ring_data_len)?;
        Ok(ReplicaLink {
            reader,
            order: ApplyOrder::new(processed, limits.reorder_bytes_max),
            snapshot: SnapshotAssembler::new(limits.snapshot_bytes_max),
            payload: Vec::new(),
            applied: processed,
        })
    }

    /// The ring's advert, for the primary.
    pub fn ring_advert(&self) -> Result<RemoteRegion, LinkError> {
        Ok(self.reader.advert()?)
    }

    /// Where to publish: the primary's ring ack word and its applied-offset word.
    pub fn connect_primary(
        &mut self,
        ring_ack: RemoteRegion,
        applied_word: RemoteRegion,
    ) -> Result<(), LinkError> {
        self.reader.set_writer_ack(ring_ack)?;
        self.reader.set_progress_target(applied_word)?;
        Ok(())
    }

    /// The last stream byte released to the caller.
    pub fn released_offset(&self) -> u64 {
        self.order.released_offset()
    }

    /// The last stream byte the caller said it applied.
    pub fn applied_offset(&self) -> u64 {
        self.applied
    }

    /// Times the ring's doorbell announced records that had not validly landed yet (WRITEs
    /// placed out of order or still in flight): the link waited rather than read them.
    pub fn ring_not_ready(&self) -> u64 {
        self.reader.not_ready()
    }

    /// Times a record the ring's doorbell announced stayed invalid (a late duplicate WRITE
    /// overwrote it, or it was slow) and the link asked the primary to WRITE it again.
    pub fn ring_resend_requests(&self) -> u64 {
        self.reader.resend_requests()
    }

    /// Whether a full sync's snapshot is arriving (stream bytes wait behind it).
    pub fn loading(&self) -> bool {
        self.snapshot.in_progress()
    }

    /// Reads up to [`POLL_RECORDS_MAX`] records: stream bytes now in order are appended to
    /// `out`; a completed snapshot ends the poll. Publishes ring consumption and the applied
    /// offset. Any error means the link is unusable: reconnect, and full-sync on `Order`.
    /// `now` is the caller's monotonic time since any fixed origin (the ring asks for a
    /// resend when a record it was told of stays missing long enough).
    pub fn poll(&mut self, out: &mut Vec<u8>, now: Duration) -> Result<LinkPoll, LinkError> {
        self.reader.poll(now)?;
        let mut result = LinkPoll::default();
        for _ in 0..POLL_RECORDS_MAX {
            if self.reader.next(&mut self.payload, now)?.is_none() {
                break;
            }
            result.records += 1;
            match decode_frame(&self.payload)? {
                Frame::Ping => {}
                Frame::Stream { first_byte, bytes } => {
                    if self.snapshot.in_progress() {
                        return Err(LinkError::StreamDuringSnapshot(first_byte));
                    }
                    result.released += self.order.push(first_byte, bytes, out)? as u64;
                }
                Frame::SnapshotBegin {
                    offset,
                    total_len,
                    crc,
                } => result.snapshot = self.snapshot.begin(offset, total_len, crc)?,
                Frame::SnapshotChunk { at, bytes } => {
                    result.snapshot = self.snapshot.chunk(at, bytes)?
                }
            }
            if let Some(s) = &result.snapshot {
                // The stream after the snapshot continues from its offset; whatever this
                // replica had applied before is replaced by it.
                self.order.reset(s.offset);
                self.applied = self.applied.min(s.offset);
                break;
            }
        }
        self.reader.poll(now)?;
        Ok(result)
    }

    /// Whether acknowledgements are in flight or still to be posted: poll again soon rather
    /// than sleep (on manual-progress providers they move only during calls into it).
    pub fn busy(&self) -> bool {
        self.reader.in_flight()
    }

    /// The caller executed the stream up to `offset` (a whole-command boundary, or a loaded
    /// snapshot's offset): tells the primary, by the next `poll` at the latest. `now` as
    /// `poll`'s.
    pub fn publish_applied(&mut self, offset: u64, now: Duration) -> Result<(), LinkError> {
        let released = self.order.released_offset();
        if offset > released {
            return Err(LinkError::AppliedPastReleased {
                applied: offset,
                released,
            });
        }
        self.applied = self.applied.max(offset);
        self.reader.publish_progress(self.applied);
        self.reader.poll(now)?;
        Ok(())
    }
}
