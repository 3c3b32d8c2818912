//! Kills in the streaming phase of a batch (issue 17: "tests kill source, target and leader
//! in each phase"): the source holds its batch once copied (`cluster-migration-debug-hold`:
//! the copy is on the target, writes to the moving slots stream down the link, no pause, no
//! commit) while the test writes to the moving slots and kills one node with -9. The other
//! phases are covered elsewhere: kills during the copy in `slot_migration` (target, source)
//! and `slot_migration_leader`, a cancel in `slot_migration`, a target out of memory in
//! `slot_migration_fabric`. Each link here runs over the fabric (`ofi:tcp`).
//!
//! What must hold: the migration ends (failed, or success where the kill did not stop it),
//! every slot has one owner, and every key and every acknowledged write reads back there.

use super::slot_migration::{
    field, first_range_of, held_in, id, info, keys_in, node_owning, owners, wait_for_end,
};
use integration::cluster::wait_until;
use integration::Node;

/// Slots the held batch moves: the first this many of the source's first range.
const MOVING_SLOTS: u16 = 100;

/// Three primaries serving clients on the fabric (`ofi:tcp`), with a topology leader; the
/// slots of a dead node stay unserved without putting the whole cluster down.
fn cluster(secret: &str) -> Vec<Node> {
    super::slot_migration_fabric::three_primaries(
        secret,
        [true; 3],
        &["--cluster-require-full-coverage", "no"],
    )
}

/// On `source`: holds its batches once copied, loads keys in the first slots of its first
/// range, starts moving those slots to `target` and waits until the copy is on the target
/// (the batch is held, streaming); then writes each key once more ("after") through the
/// source, which streams it. Returns the keys and the moving slots.
fn copy_then_stream(
    source: &Node,
    target: &Node,
    request_id: &str,
) -> (Vec<String>, std::ops::RangeInclusive<u16>) {
    assert_eq!(
        source.cli(&["CONFIG", "SET", "cluster-migration-debug-hold", "yes"]),
        "OK"
    );
    let (lo, _) = first_range_of(source);
    let hi = lo + MOVING_SLOTS - 1;
    let keys = keys_in(lo, hi, 300);
    let mut src = source.client();
    set_every(&mut src, &keys, "before");
    let target_id = id(target);
    let started = source.cli(&[
        "CLUSTER",
        "MIGRATESLOTS",
        "SLOTSRANGE",
        &lo.to_string(),
        &hi.to_string(),
        "NODE",
        &target_id,
        "REQUESTID",
        request_id,
    ]);
    assert_eq!(started, "OK");
    wait_until("the target holds the copy", &[source, target], || {
        held_in(target, lo..=hi) == keys.len()
    });
    // Acknowledged by the source while the batch streams: these must survive any kill.
    set_every(&mut src, &keys, "after");
    (keys, lo..=hi)
}

/// SETs every key to `value`, each acknowledged before the next.
fn set_every(con: &mut redis::Connection, keys: &[String], value: &str) {
    for k in keys {
        let _: () = redis::cmd("SET").arg(k).arg(value).query(con).unwrap();
    }
}

/// Every key reads "after" at its slot's owner as `survivor` sees the owners.
fn assert_every_write_at_its_owner(survivor: &Node, nodes: &[&Node], keys: &[String], when: &str) {
    let owner_now = owners(survivor);
    for k in keys {
        let slot = proto::slot::key_slot(k.as_bytes());
        let owner = owner_now[slot as usize]
            .clone()
            .unwrap_or_else(|| panic!("slot {slot} has no owner {when}"));
        let at = nodes
            .iter()
            .find(|n| id(n) == owner)
            .unwrap_or_else(|| panic!("slot {slot}'s owner {owner} is not alive {when}"));
        let v: Option<String> = redis::cmd("GET").arg(k).query(&mut at.client()).unwrap();
        assert_eq!(v.as_deref(), Some("after"), "{k} (slot {slot}) {when}");
    }
}

#[test]
fn a_target_killed_while_its_batch_streams_rolls_the_batch_back() {
    let mut nodes = cluster("phase-target");
    let source_id = id(node_owning(&nodes, 0));
    let source_at = nodes.iter().position(|n| id(n) == source_id).unwrap();
    let target_at = (source_at + 1) % 3;
    let (keys, moving) = copy_then_stream(&nodes[source_at], &nodes[target_at], "streaming-target");
    nodes[target_at].signal("KILL");
    let _ = nodes[target_at].wait_exit();
    let m = wait_for_end(&nodes[source_at], "streaming-target");
    // Held: no pause, no commit, so the batch cannot have committed.
    assert_eq!(field(&m, "state"), "failed", "{m:?}");
    let source = &nodes[source_at];
    let owner_now = owners(source);
    for slot in moving {
        assert_eq!(
            owner_now[slot as usize].as_deref(),
            Some(source_id.as_str())
        );
    }
    assert_every_write_at_its_owner(source, &[source], &keys, "after the target's death");
}

#[test]
fn a_leader_killed_while_a_batch_streams_leaves_the_move_whole() {
    let mut nodes = cluster("phase-leader");
    let leader_id = info(&nodes[0], "cluster_topology_leader");
    let leader_at = nodes.iter().position(|n| id(n) == leader_id).unwrap();
    let source_at = (leader_at + 1) % 3;
    let target_at = (leader_at + 2) % 3;
    let (keys, moving) = copy_then_stream(&nodes[source_at], &nodes[target_at], "streaming-leader");
    nodes[leader_at].signal("KILL");
    let _ = nodes[leader_at].wait_exit();
    // The two left elect a leader between them; released, the batch pauses and commits
    // through it (or fails: either way whole).
    assert_eq!(
        nodes[source_at].cli(&["CONFIG", "SET", "cluster-migration-debug-hold", "no"]),
        "OK"
    );
    let m = wait_for_end(&nodes[source_at], "streaming-leader");
    let state = field(&m, "state");
    assert!(state == "success" || state == "failed", "{m:?}");
    let alive = [&nodes[source_at], &nodes[target_at]];
    wait_until("one owner per moving slot on the survivors", &alive, || {
        let views: Vec<Vec<Option<String>>> = alive.iter().map(|n| owners(n)).collect();
        moving.clone().all(|s| {
            let s = s as usize;
            views[0][s].is_some() && views.iter().all(|v| v[s] == views[0][s])
        })
    });
    assert_every_write_at_its_owner(&nodes[source_at], &alive, &keys, "after the leader's death");
}

/// The source killed while its batch streams: its replica (every write acknowledged only
/// once the replica has it, `repl-sync-acks 1`) takes its slots over, the leader aborts the
/// migration (its source failed), and every acknowledged write reads back at the owner.
/// This cluster's links run over TCP (its six nodes share one argument list).
#[test]
fn a_source_killed_while_its_batch_streams_fails_over_and_loses_nothing() {
    let mut nodes = integration::cluster::create_cluster_with_replicas(
        "phase-source",
        &["--repl-sync-acks", "1"],
    );
    let source_id = id(node_owning(&nodes, 0));
    let target_id = id(node_owning(&nodes, 16383));
    let source_at = nodes.iter().position(|n| id(n) == source_id).unwrap();
    let target_at = nodes.iter().position(|n| id(n) == target_id).unwrap();
    let (keys, _) = copy_then_stream(&nodes[source_at], &nodes[target_at], "streaming-source");
    nodes[source_at].signal("KILL");
    let _ = nodes[source_at].wait_exit();
    drop(nodes.remove(source_at));
    let watcher = nodes.iter().find(|n| id(n) == target_id).unwrap();
    let m = wait_for_end(watcher, "streaming-source");
    assert_eq!(field(&m, "state"), "failed", "{m:?}");
    let refs: Vec<&Node> = nodes.iter().collect();
    wait_until("cluster_state:ok after the failover", &refs, || {
        nodes
            .iter()
            .all(|n| n.cli(&["CLUSTER", "INFO"]).contains("cluster_state:ok"))
    });
    let owner_now = owners(watcher);
    assert!(
        owner_now
            .iter()
            .all(|o| o.as_deref() != Some(source_id.as_str())),
        "the dead source still owns slots"
    );
    assert_every_write_at_its_owner(watcher, &refs, &keys, "after the source's death");
}
