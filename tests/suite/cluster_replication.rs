//! Replication in cluster mode (issue 5): the topology says who follows whom, and the link
//! runs on the fabric (`ofi:tcp` here) exactly as REPLICAOF's does.

use integration::cluster::{create_cluster_with_replicas, info_field, wait_until};
use integration::Node;

/// `(node index, its id)` of the primaries and the replica's index of each primary.
fn shards(nodes: &[Node]) -> Vec<(usize, usize)> {
    let ids: Vec<String> = nodes.iter().map(|n| n.cli(&["CLUSTER", "MYID"])).collect();
    let view = nodes[0].cli(&["CLUSTER", "NODES"]);
    let mut pairs = Vec::new();
    for line in view.lines() {
        let f: Vec<&str> = line.split(' ').collect();
        if f[2].contains("slave") {
            let replica = ids
                .iter()
                .position(|id| id == f[0])
                .expect("a known replica");
            let primary = ids
                .iter()
                .position(|id| id == f[3])
                .expect("a known primary");
            pairs.push((primary, replica));
        }
    }
    pairs.sort();
    pairs
}

/// Writes `count` keys, following MOVED to the owner as a cluster client does.
fn write_keys(entry: &Node, prefix: &str, count: usize) {
    let mut cons: std::collections::HashMap<u16, redis::Connection> = Default::default();
    for i in 0..count {
        let key = format!("{prefix}:{i}");
        let mut port = entry.port;
        for _hop in 0..3 {
            let con = cons.entry(port).or_insert_with(|| {
                redis::Client::open(format!("redis://127.0.0.1:{port}/"))
                    .unwrap()
                    .get_connection()
                    .unwrap()
            });
            let reply: redis::RedisResult<String> =
                redis::cmd("SET").arg(&key).arg(format!("v{i}")).query(con);
            match reply {
                Ok(ok) => {
                    assert_eq!(ok, "OK");
                    break;
                }
                Err(e) if e.kind() == redis::ErrorKind::Moved => {
                    // (owner "host:port", slot)
                    let (owner, _) = e.redirect_node().expect("a MOVED target");
                    port = owner.rsplit(':').next().unwrap().parse().unwrap();
                }
                Err(e) => panic!("SET {key}: {e}"),
            }
        }
    }
}

/// Goal: `redis-cli --cluster create --cluster-replicas 1` on six nodes gives three primaries
/// each with a replica whose link is up and which holds every acknowledged write. Method:
/// keys in every shard, WAIT 1 on each primary, then the replicas' offsets and their
/// READONLY reads.
#[test]
fn create_with_replicas_gives_every_primary_a_replica_in_sync() {
    let nodes = create_cluster_with_replicas("replicas", &[]);
    let refs: Vec<&Node> = nodes.iter().collect();
    wait_until("three primaries with a replica each", &refs, || {
        shards(&nodes).len() == 3
    });
    let pairs = shards(&nodes);
    wait_until("every replica's link up", &refs, || {
        pairs
            .iter()
            .all(|&(_, r)| info_field(&nodes[r], "master_link_status") == "up")
    });
    write_keys(&nodes[0], "k", 60);
    for &(p, r) in &pairs {
        assert_eq!(nodes[p].cli(&["WAIT", "1", "5000"]), "1");
        assert_eq!(info_field(&nodes[p], "connected_slaves"), "1");
        let primary_offset = info_field(&nodes[p], "master_repl_offset");
        wait_until("the replica at the primary's offset", &refs, || {
            info_field(&nodes[r], "master_repl_offset") == primary_offset
        });
        assert_eq!(info_field(&nodes[r], "role"), "slave");
        let primary_id = nodes[p].cli(&["CLUSTER", "MYID"]);
        let replicas = nodes[p].cli(&["CLUSTER", "REPLICAS", &primary_id]);
        assert!(
            replicas.contains(&nodes[r].cli(&["CLUSTER", "MYID"])),
            "{replicas}"
        );
    }
    // Every key is on its shard's replica (read after READONLY) and on no other node.
    let mut primaries: Vec<_> = pairs.iter().map(|&(p, _)| nodes[p].client()).collect();
    let mut replicas: Vec<_> = pairs
        .iter()
        .map(|&(_, r)| {
            let mut con = nodes[r].client();
            let _: () = redis::cmd("READONLY").query(&mut con).unwrap();
            con
        })
        .collect();
    for i in 0..60 {
        let key = format!("k:{i}");
        let mut holders = Vec::new();
        for (shard, con) in primaries.iter_mut().enumerate() {
            let n: i64 = redis::cmd("CLUSTER")
                .arg("COUNTKEYSINSLOT")
                .arg(slot_of(&key))
                .query(con)
                .unwrap();
            if n > 0 {
                holders.push(shard);
            }
        }
        assert_eq!(holders.len(), 1, "{key} held by one shard");
        let v: Option<String> = redis::cmd("GET")
            .arg(&key)
            .query(&mut replicas[holders[0]])
            .unwrap();
        assert_eq!(
            v.as_deref(),
            Some(format!("v{i}").as_str()),
            "{key} on its replica"
        );
    }
}

/// Redis's key slot (CRC16 of the key or its hash tag, mod 16384).
fn slot_of(key: &str) -> u16 {
    proto::slot::key_slot(key.as_bytes())
}
