//! A slot's copy into its migration link: RESTORE (REPLACE ABSTTL) of every live key, taken
//! under the slot's shard lock, after which the slot streams its writes down the same link.
//! The lock makes the pair atomic: no write to the slot falls between its copy and its
//! stream.

use crate::clock::unix_millis;
use crate::cluster::migration::{LinkQueue, MigrationGate, MigrationId};
use crate::db::keyspace::shard_of_slot;
use crate::replication::propagate::encode_into;
use crate::server::Server;
use crate::snapshot_format::dump;

/// Bytes gathered before they are handed to the link (one append per chunk).
const CHUNK_BYTES: usize = 1 << 20;

/// What one slot's copy put on the link.
#[derive(Clone, Copy, Debug, Default)]
pub struct Copied {
    pub keys: u64,
    pub bytes: u64,
}

pub fn copy_slot(
    server: &Server,
    gate: &MigrationGate,
    slot: u16,
    id: MigrationId,
    queue: &LinkQueue,
) -> Copied {
    let now = unix_millis();
    let shard = server.keyspace.lock_shard(shard_of_slot(slot));
    let mut copied = Copied::default();
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
            dump::payload(&entry.value),
            b"REPLACE".to_vec(),
            b"ABSTTL".to_vec(),
        ];
        encode_into(std::slice::from_ref(&restore), &mut bytes);
        commands += 1;
        copied.keys += 1;
        if bytes.len() >= CHUNK_BYTES {
            copied.bytes += bytes.len() as u64;
            queue.append(&bytes, commands);
            bytes.clear();
            commands = 0;
        }
    }
    if commands > 0 {
        copied.bytes += bytes.len() as u64;
        queue.append(&bytes, commands);
    }
    // Set with the shard held: a write to the slot that locks it next encodes its stream
    // and finds the slot streaming.
    server.replication.set_migration_consumer(true);
    gate.stream_slot(slot, id);
    drop(shard);
    copied
}
