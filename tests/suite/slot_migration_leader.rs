//! The topology leader killed (-9) while slots move between two other primaries: the
//! migration commits or aborts (never stays half), no key is lost, no slot has two owners,
//! the cluster comes back to `cluster_state:ok` once the killed node restarts, and the same
//! slots then move again.

use super::slot_migration::{
    claims, field, first_range_of, id, info, keys_in, migration, owners, set_all, start_migration,
    three_primaries, wait_for_end, wait_for_start,
};
use integration::cluster::{cluster_node_in, wait_until};
use integration::Node;
use std::collections::HashMap;

const SECRET: &str = "migrate-leader";

/// Every node sees every slot owned by exactly one node, and all see the same owner.
fn single_owners_agreed(nodes: &[Node]) -> bool {
    let views: Vec<Vec<Vec<String>>> = nodes.iter().map(claims).collect();
    (0..16384).all(|slot| {
        views
            .iter()
            .all(|v| v[slot].len() == 1 && v[slot] == views[0][slot])
    })
}

/// Every key of `keys` reads back "v" from the owner of its slot.
fn assert_every_key_at_its_owner(nodes: &[Node], keys: &[String], when: &str) {
    let owner_now = owners(&nodes[0]);
    let mut clients: HashMap<String, redis::Connection> =
        nodes.iter().map(|n| (id(n), n.client())).collect();
    for k in keys {
        let slot = proto::slot::key_slot(k.as_bytes());
        let owner = owner_now[slot as usize].clone().expect("assigned");
        let con = clients.get_mut(&owner).expect("a live owner");
        let v: Option<String> = redis::cmd("GET").arg(k).query(con).unwrap();
        assert_eq!(v.as_deref(), Some("v"), "{when}: {k} (slot {slot})");
    }
}

#[test]
fn a_killed_topology_leader_leaves_the_migration_whole_and_the_slots_move_again() {
    let mut nodes = three_primaries(SECRET);
    let leader_id = info(&nodes[0], "cluster_topology_leader");
    let leader_at = nodes
        .iter()
        .position(|n| id(n) == leader_id)
        .expect("the leader is one of the three");
    let others: Vec<usize> = (0..3).filter(|&i| i != leader_at).collect();
    let (source_at, target_at) = (others[0], others[1]);
    let (source_id, target_id) = (id(&nodes[source_at]), id(&nodes[target_at]));
    let (lo, hi) = first_range_of(&nodes[source_at]);
    let keys = keys_in(lo, hi, 20000);
    set_all(&mut nodes[source_at].client(), &keys);
    // The source gives away its only range: it stays a primary (not a replica of the
    // target, `cluster-allow-replica-migration`), so that the slots can come back to it.
    assert_eq!(
        nodes[source_at].cli(&["CONFIG", "SET", "cluster-allow-replica-migration", "no"]),
        "OK"
    );
    // Small batches: many Begin/Commit pairs, so the kill lands between or inside them.
    assert_eq!(
        nodes[source_at].cli(&["CONFIG", "SET", "cluster-migration-slots-per-batch", "64"]),
        "OK"
    );
    start_migration(&nodes[source_at], lo, hi, &target_id, "leader-dies");
    wait_for_start(&nodes[source_at], "leader-dies");
    let port = nodes[leader_at].port;
    let dir = nodes.remove(leader_at).into_dir();

    // The two left elect a leader between them and the migration ends one way or the other.
    let source_at = nodes.iter().position(|n| id(n) == source_id).unwrap();
    let m = wait_for_end(&nodes[source_at], "leader-dies");
    let state = field(&m, "state");
    assert!(
        state == "success" || state == "failed",
        "the migration ended {m:?}"
    );
    nodes.insert(leader_at, cluster_node_in(dir, port, SECRET, &[]));
    // The restarted node is back at its old place: the indices after it moved up by one.
    let at = |id_wanted: &str| nodes.iter().position(|n| id(n) == id_wanted).unwrap();
    let (source_at, target_at) = (at(&source_id), at(&target_id));
    let refs: Vec<&Node> = nodes.iter().collect();
    wait_until("cluster_state:ok after the leader's restart", &refs, || {
        nodes
            .iter()
            .all(|n| n.cli(&["CLUSTER", "INFO"]).contains("cluster_state:ok"))
    });
    wait_until(
        "every slot has one owner, the same on every node",
        &refs,
        || single_owners_agreed(&nodes),
    );
    for n in &nodes {
        let m = migration(n, "leader-dies").expect("the log remembers it");
        assert_eq!(field(&m, "state"), state, "{m:?} on {}", id(n));
    }
    assert_every_key_at_its_owner(&nodes, &keys, "after the leader's death");

    // The same slots again, from wherever they are now to the other end.
    let owner_now = owners(&nodes[0]);
    let holders: Vec<usize> = (lo..=hi)
        .map(|s| {
            let owner = owner_now[s as usize].clone().unwrap();
            nodes.iter().position(|n| id(n) == owner).unwrap()
        })
        .collect();
    for (from, to) in [(source_at, target_at), (target_at, source_at)] {
        let slots: Vec<u16> = (lo..=hi)
            .zip(&holders)
            .filter(|(_, &h)| h == from)
            .map(|(s, _)| s)
            .collect();
        let (Some(&first), Some(&last)) = (slots.first(), slots.last()) else {
            continue;
        };
        // A batch commits slots in order, so each end holds one contiguous run.
        assert_eq!(usize::from(last - first) + 1, slots.len(), "{slots:?}");
        let request_id = format!("again-{first}");
        start_migration(&nodes[from], first, last, &id(&nodes[to]), &request_id);
        let m = wait_for_end(&nodes[from], &request_id);
        assert_eq!(field(&m, "state"), "success", "{m:?}");
    }
    let refs: Vec<&Node> = nodes.iter().collect();
    wait_until("every node sees the second move", &refs, || {
        single_owners_agreed(&nodes)
            && nodes.iter().all(|n| {
                let o = owners(n);
                (lo..=hi).all(|s| o[s as usize] != owner_now[s as usize])
            })
    });
    assert_every_key_at_its_owner(&nodes, &keys, "after the second move");
}
