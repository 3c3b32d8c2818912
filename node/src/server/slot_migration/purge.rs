//! Deleting a slot's keys through the command path (DEL, as the primary's own client, so
//! the slot map does not redirect it): replicas and the AOF drop them too. The source drops
//! what it handed over; a target drops what an aborted batch had copied to it.
//!
//! A DEL here is a write like any other, so it would also go down a migration link that
//! the slot still streams to: the source's link of a batch whose commit this node applied
//! while the target had not yet, where it would delete the target's fresh copy (the keys
//! then lost everywhere). A slot that streams to a link is therefore never purged; the
//! driver closes a batch's link before it drops the batch's keys.

use crate::node_state::client::ClientShared;
use crate::replication::propagate::encode_into;
use crate::server::session::Session;
use crate::server::Server;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

/// Keys deleted per DEL.
const KEYS_PER_DEL: usize = 256;

/// Deletes every key of `slots` while `may_drop(slot)` holds (asked again before each DEL,
/// so a slot that became this node's or began moving into it meanwhile keeps its keys);
/// returns how many were deleted.
pub fn purge_slots(
    server: &Arc<Server>,
    slots: impl Iterator<Item = u16>,
    may_drop: impl Fn(u16) -> bool,
) -> u64 {
    let unspecified = SocketAddr::new(Ipv4Addr::UNSPECIFIED.into(), 0);
    let shared = Arc::new(ClientShared::new(
        server.clients.next_id(),
        unspecified,
        unspecified,
    ));
    shared.primary_link.store(true, Relaxed);
    let mut session = Session::new(server.clone(), shared);
    session.client.authenticated = true;
    session.client.primary_link = true;
    let streams = |slot: u16| {
        server
            .cluster
            .as_ref()
            .is_some_and(|c| c.migration_gate.link_of(slot).is_some())
    };
    let mut deleted = 0u64;
    for slot in slots {
        // Bounded: each round deletes what it listed (a key that cannot be deleted ends
        // the slot's loop at this count).
        let rounds = server.keyspace.count_in_slot(slot) / KEYS_PER_DEL + 2;
        for _ in 0..rounds {
            if streams(slot) || !may_drop(slot) {
                tracing::debug!(
                    slot,
                    "slot kept: it streams to a migration or is wanted here"
                );
                break;
            }
            let keys = server.keyspace.keys_in_slot(slot, KEYS_PER_DEL);
            if keys.is_empty() {
                break;
            }
            let mut del: Vec<Vec<u8>> = Vec::with_capacity(keys.len() + 1);
            del.push(b"DEL".to_vec());
            del.extend(keys.iter().map(|k| k.to_vec()));
            let mut bytes = Vec::new();
            encode_into(std::slice::from_ref(&del), &mut bytes);
            session.input.extend_from_slice(&bytes);
            session.process_input();
            session.output.clear();
            deleted += keys.len() as u64;
        }
    }
    session.cleanup();
    deleted
}
