//! `purge_slots` never sends a DEL down a migration link: a slot that still streams to one
//! (the source's batch whose commit it applied before the target did) keeps its keys until
//! the link closes, and `may_drop` is asked before each DEL.

use super::purge::purge_slots;
use crate::cluster::migration::{LinkQueue, MigrationId, QueueBounds};
use crate::server::session::Session;
use crate::server::{ClientShared, Server};
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

/// A cluster-mode node owning every slot. Keeps the config dir alive.
fn node() -> (Arc<Server>, tempfile::TempDir) {
    crate::server::lease_wait_tests::cluster_node_owning_every_slot()
}

/// Runs `args` as the primary's own client (not redirected).
fn run(server: &Arc<Server>, args: &[&str]) {
    let any = SocketAddr::new(Ipv4Addr::LOCALHOST.into(), 1);
    let shared = Arc::new(ClientShared::new(server.clients.next_id(), any, any));
    shared.primary_link.store(true, Relaxed);
    let mut session = Session::new(server.clone(), shared);
    session.client.authenticated = true;
    session.client.primary_link = true;
    let mut bytes = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        bytes.extend_from_slice(format!("${}\r\n{a}\r\n", a.len()).as_bytes());
    }
    session.input.extend_from_slice(&bytes);
    session.process_input();
    session.cleanup();
}

/// Two keys of one slot ("{a}" hashes to slot 15495).
fn two_keys(server: &Arc<Server>) -> u16 {
    run(server, &["SET", "{a}1", "v"]);
    run(server, &["SET", "{a}2", "v"]);
    let slot = proto::slot::key_slot(b"{a}1");
    assert_eq!(server.keyspace.count_in_slot(slot), 2);
    slot
}

#[test]
fn a_slot_streaming_to_a_link_keeps_its_keys_and_the_link_gets_no_del() {
    let (server, _dir) = node();
    let slot = two_keys(&server);
    let gate = &server.cluster.as_ref().expect("cluster").migration_gate;
    let id = MigrationId(7);
    let queue = Arc::new(LinkQueue::new(QueueBounds::with_hard(1 << 20), 0));
    gate.install_link(id, queue.clone());
    gate.stream_slot(slot, id);

    assert_eq!(purge_slots(&server, std::iter::once(slot), |_| true), 0);
    assert_eq!(server.keyspace.count_in_slot(slot), 2);
    assert_eq!(queue.appended(), 0, "a DEL went down the link");

    // Once the link is closed (the driver closes it before it drops a batch's keys).
    gate.close_link(id);
    assert_eq!(purge_slots(&server, std::iter::once(slot), |_| true), 2);
    assert_eq!(server.keyspace.count_in_slot(slot), 0);
}

#[test]
fn a_slot_that_may_no_longer_be_dropped_keeps_its_keys() {
    let (server, _dir) = node();
    let slot = two_keys(&server);
    assert_eq!(
        purge_slots(&server, std::iter::once(slot), |s| s != slot),
        0
    );
    assert_eq!(server.keyspace.count_in_slot(slot), 2);
}
