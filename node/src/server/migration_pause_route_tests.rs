//! A migration's source that applied a batch's commit keeps the batch's slots paused until the
//! target confirms it applied the commit too. A command to such a slot waits for the pause
//! to end and is then MOVED, once, to the target: MOVED at once, it would reach a target a
//! step behind the log that MOVEs it straight back (the flaky suite test
//! `slot_migration::slots_move_with_their_keys_under_writes_and_clients_see_only_moved`).
//! Real `Connection`s over in-memory streams; the topology and the pause set by hand as the
//! source's applied commit and driver leave them.

use super::lease_wait_tests::{
    cluster_node_owning_every_slot, connect, expect, lease, send, silence,
};
use crate::cluster::id::HexId;
use crate::cluster::migration::SlotRanges;
use crate::cluster::node::ClusterNode;

#[tokio::test(flavor = "current_thread")]
async fn a_command_moved_by_a_commit_waits_for_the_pause_and_is_moved_once() {
    let (server, _dir) = cluster_node_owning_every_slot();
    lease(&server, true);
    let cluster = server.cluster.as_ref().expect("cluster mode");
    let slot = proto::slot::key_slot(b"k");
    let batch = SlotRanges::new(&[(slot, slot)]).expect("ranges");
    // The commit as the source applied it: the slot is the target's.
    {
        let mut t = cluster.topology.write();
        let mut target = ClusterNode::new(
            HexId::parse(&[b'a'; 40]).expect("id"),
            HexId::parse(&[b'b'; 40]).expect("shard"),
        );
        target.ip = "10.9.9.9".into();
        target.port = 7001;
        let index = t.add_node(target).expect("node");
        t.slots.set_owner(slot, Some(index));
    }
    let moved = format!("-MOVED {slot} 10.9.9.9:7001\r\n");
    // Without a pause: MOVED at once (the slot is simply the other node's).
    let mut c = connect(&server);
    send(&mut c, &["SET", "k", "v"]).await;
    expect(&mut c, moved.as_bytes()).await;
    // The pause holds (the target's commit not confirmed): a write and a read both wait.
    cluster.migration_gate.pause(&batch);
    send(&mut c, &["SET", "k", "v"]).await;
    let mut reader = connect(&server);
    send(&mut reader, &["GET", "k"]).await;
    silence(&mut c).await;
    silence(&mut reader).await;
    // Another slot is not held up meanwhile.
    let mut other = connect(&server);
    send(&mut other, &["SET", "elsewhere", "v"]).await;
    expect(&mut other, b"+OK\r\n").await;
    // The target confirmed: both are MOVED, once.
    cluster.migration_gate.resume(&batch);
    expect(&mut c, moved.as_bytes()).await;
    expect(&mut reader, moved.as_bytes()).await;
}
