//! `cluster-allow-replica-migration` (Redis 7 semantics) across real nodes: a primary that
//! an atomic slot migration empties of its last slot becomes, through the topology log, a
//! replica of the node that took it, and replicates it; with `no` it stays an empty
//! primary.

use super::slot_migration::{
    field, first_range_of, id, keys_in, set_all, start_migration, three_primaries, wait_for_end,
};
use integration::cluster::{cluster_node_in, wait_until};
use integration::Node;

const SECRET: &str = "replica-migration";

/// `who`'s role ("master" or "slave") and primary id ("-" for none) in `n`'s CLUSTER NODES.
fn role_in(n: &Node, who: &str) -> (String, String) {
    let nodes = n.cli(&["CLUSTER", "NODES"]);
    let Some(line) = nodes.lines().find(|l| l.starts_with(who)) else {
        return ("unlisted".into(), "-".into());
    };
    let f: Vec<&str> = line.split_whitespace().collect();
    let role = ["master", "slave"]
        .into_iter()
        .find(|r| f[2].split(',').any(|flag| flag == *r))
        .unwrap_or("?");
    (role.to_string(), f[3].to_string())
}

/// Moves every slot of `from` (a fresh cluster's primary holds one range) to `to_id`.
fn move_all_slots(from: &Node, to_id: &str, request_id: &str) {
    let (lo, hi) = first_range_of(from);
    start_migration(from, lo, hi, to_id, request_id);
    let m = wait_for_end(from, request_id);
    assert_eq!(field(&m, "state"), "success", "{m:?}");
}

#[test]
fn a_primary_emptied_by_a_migration_follows_the_taker_unless_told_not_to() {
    let mut nodes = three_primaries(SECRET);
    let ids: Vec<String> = nodes.iter().map(id).collect();
    let refs: Vec<&Node> = nodes.iter().collect();
    assert_eq!(
        nodes[1].cli(&["CONFIG", "GET", "cluster-allow-replica-migration"]),
        "cluster-allow-replica-migration\nyes"
    );
    assert_eq!(
        nodes[1].cli(&["CONFIG", "SET", "cluster-allow-replica-migration", "no"]),
        "OK"
    );
    assert_eq!(
        nodes[1].cli(&["CONFIG", "GET", "cluster-allow-replica-migration"]),
        "cluster-allow-replica-migration\nno"
    );
    assert!(nodes[1]
        .cli(&["CONFIG", "SET", "cluster-allow-replica-migration", "maybe"])
        .starts_with("ERR"));
    let (lo, hi) = first_range_of(&nodes[2]);
    let keys = keys_in(lo, hi, 300);
    set_all(&mut nodes[2].client(), &keys);

    // `no`: node 1 gives away every slot and stays a primary.
    move_all_slots(&nodes[1], &ids[0], "emptied-stays");
    // `yes` (the default): node 2 gives away every slot and follows node 0.
    move_all_slots(&nodes[2], &ids[0], "emptied-follows");
    wait_until("every node sees node 2 as node 0's replica", &refs, || {
        nodes
            .iter()
            .all(|n| role_in(n, &ids[2]) == ("slave".into(), ids[0].clone()))
    });
    wait_until("node 2 replicates node 0", &refs, || {
        let i = nodes[2].cli(&["INFO", "replication"]);
        i.contains("role:slave")
            && i.contains(&format!("master_port:{}", nodes[0].port))
            && i.contains("master_link_status:up")
    });
    // Node 1's migration ended before node 2's began: its choice is made by now.
    for n in &nodes {
        assert_eq!(
            role_in(n, &ids[1]),
            ("master".into(), "-".into()),
            "node 1 as {} sees it",
            id(n)
        );
    }
    // Every key moved reads back at its new owner, and from node 2 as its replica.
    let mut at_owner = nodes[0].client();
    let mut at_replica = nodes[2].client();
    let _: () = redis::cmd("READONLY").query(&mut at_replica).unwrap();
    wait_until("node 2 holds node 0's data", &refs, || {
        nodes[2].cli(&["DBSIZE"]) == nodes[0].cli(&["DBSIZE"])
    });
    for k in &keys {
        let v: Option<String> = redis::cmd("GET").arg(k).query(&mut at_owner).unwrap();
        assert_eq!(v.as_deref(), Some("v"), "{k} at node 0");
        let v: Option<String> = redis::cmd("GET").arg(k).query(&mut at_replica).unwrap();
        assert_eq!(v.as_deref(), Some("v"), "{k} at node 2, node 0's replica");
    }
    drop((at_owner, at_replica));

    // Node 1 made no role change when its migration ended (`no`): as a source that died
    // between its last commit and its role change would not have. Restarted with the
    // default (`yes`), it finds that migration in the log and follows its taker, node 0.
    let port = nodes[1].port;
    let dir = nodes.remove(1).into_dir();
    nodes.insert(1, cluster_node_in(dir, port, SECRET, &[]));
    let refs: Vec<&Node> = nodes.iter().collect();
    wait_until(
        "every node sees node 1 as node 0's replica after its restart",
        &refs,
        || {
            nodes
                .iter()
                .all(|n| role_in(n, &ids[1]) == ("slave".into(), ids[0].clone()))
        },
    );
}
