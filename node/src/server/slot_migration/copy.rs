//! A slot's copy into its migration link: RESTORE (REPLACE ABSTTL) of every live key, taken
//! under the slot's shard lock, after which the slot streams its writes down the same link.
//! The lock makes the pair atomic: no write to the slot falls between its copy and its
//! stream.
//!
//! Backpressure: the copy goes at the target's pace. Before it takes the shard, and before
//! each chunk it hands over, it waits while the link's unsent bytes are above the queue's
//! high-water mark (woken when the sender drains them), so copying alone never overflows
//! the queue; the room above the mark is left to client writes. A wait inside a slot holds
//! its shard (the slot's copy and stream must stay one step): writes to that shard wait
//! with it, at most as long as the target takes to read one chunk.

use crate::clock::unix_millis;
use crate::cluster::migration::{LinkQueue, MigrationGate, MigrationId, NoRoom};
use crate::db::keyspace::shard_of_slot;
use crate::replication::propagate::encode_into;
use crate::server::Server;
use crate::snapshot_format::dump;
use std::time::Duration;

/// Most bytes gathered before they are handed to the link (one append per chunk); less
/// when the queue's high-water mark is lower, so a chunk fits under it.
const CHUNK_BYTES: usize = 1 << 20;

/// What one slot's copy put on the link.
#[derive(Clone, Copy, Debug, Default)]
pub struct Copied {
    pub keys: u64,
    pub bytes: u64,
}

/// How a slot's copy ended.
#[derive(Clone, Copy, Debug)]
pub enum SlotCopy {
    /// Every live key is on the link and the slot streams its writes.
    Done(Copied),
    /// The queue broke or closed first: part of the slot never reached the link, so the
    /// batch must fail (reporting it copied would let a commit hand over missing keys).
    Stopped(Copied),
}

/// Copies `slot` into `queue` and streams its writes there from then on. `stall_max` bounds
/// a wait for room during which the sender drains nothing: past it the queue breaks (the
/// target stopped reading) and the migration fails on it. A queue that broke or closed
/// ends the copy early: [`SlotCopy::Stopped`].
pub fn copy_slot(
    server: &Server,
    gate: &MigrationGate,
    slot: u16,
    id: MigrationId,
    queue: &LinkQueue,
    stall_max: Duration,
) -> SlotCopy {
    let chunk_max = CHUNK_BYTES.min(queue.bounds().high_water).max(1);
    let mut copied = Copied::default();
    if !room(queue, chunk_max, stall_max) {
        return SlotCopy::Stopped(copied);
    }
    let now = unix_millis();
    let shard = server.keyspace.lock_shard(shard_of_slot(slot));
    let mut bytes = Vec::new();
    let mut commands = 0u32;
    for (key, entry) in shard.table(slot).iter() {
        if entry.is_expired(now) {
            continue;
        }
        let restore = vec![
            b"RESTORE".to_vec(),
            key.as_bytes().to_vec(),
            entry.expires_at.to_string().into_bytes(),
            // Our own format, not Redis's: the target may be a node of the previous
            // version (rolling upgrade), which reads only ours.
            dump::node_payload(&entry.value),
            b"REPLACE".to_vec(),
            b"ABSTTL".to_vec(),
        ];
        encode_into(std::slice::from_ref(&restore), &mut bytes);
        commands += 1;
        copied.keys += 1;
        if bytes.len() >= chunk_max {
            if !room(queue, bytes.len(), stall_max) {
                return SlotCopy::Stopped(copied);
            }
            copied.bytes += bytes.len() as u64;
            queue.append(&bytes, commands);
            bytes.clear();
            commands = 0;
        }
    }
    if commands > 0 {
        if !room(queue, bytes.len(), stall_max) {
            return SlotCopy::Stopped(copied);
        }
        copied.bytes += bytes.len() as u64;
        queue.append(&bytes, commands);
    }
    // Set with the shard held: a write to the slot that locks it next encodes its stream
    // and finds the slot streaming.
    server.replication.set_migration_consumer(true);
    gate.stream_slot(slot, id);
    drop(shard);
    SlotCopy::Done(copied)
}

/// Waits for room for `bytes` under the high-water mark; false when the copy must stop
/// (the queue ended, or stalled and is broken now).
fn room(queue: &LinkQueue, bytes: usize, stall_max: Duration) -> bool {
    match queue.wait_for_room(bytes, stall_max) {
        Ok(()) => true,
        Err(NoRoom::Ended) => false,
        Err(NoRoom::Stalled) => {
            queue.break_with(&format!(
                "the target read nothing of the slot copy for {} ms",
                stall_max.as_millis()
            ));
            false
        }
    }
}
