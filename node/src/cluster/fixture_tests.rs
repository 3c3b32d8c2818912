//! Formatting against byte fixtures captured from redis-server 7.0.15 cluster nodes:
//! `single.*` is a lone node after `CLUSTER ADDSLOTSRANGE 0 16383`; `three.*` is node
//! 127.0.0.1:31001 of a 3-primary cluster made by `redis-cli --cluster create`, with a
//! replica that then failed, a hostname announced by 31003, and open slots (100 and 101
//! migrating, 6000 importing); `hostname.*` and `replica.*` are the views of 31003 and of
//! the replica. Method: rebuild the topology (by hand, or by parsing the captured text as a
//! config file), format it, compare bytes.

use super::config_file;
use super::id::HexId;
use super::node::{ClusterNode, LinkState};
use super::nodes_text::cluster_nodes;
use super::replies;
use super::topology::Topology;
use bytes::BytesMut;
use proto::resp::{ProtocolVersion, Reply};
use rand::SeedableRng;

fn rng() -> rand::rngs::StdRng {
    rand::rngs::StdRng::seed_from_u64(42)
}

fn reply_bytes(version: ProtocolVersion, f: impl FnOnce(&mut Reply<'_>)) -> Vec<u8> {
    let mut buf = BytesMut::new();
    let mut r = Reply::new(&mut buf, version);
    f(&mut r);
    buf.to_vec()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Parses CLUSTER NODES text as a config file (the file is those lines plus `vars`).
fn from_nodes_text(nodes: &[u8], vars: &str) -> Topology {
    let file = format!("{}{vars}\n", text(nodes));
    config_file::parse(&file, &mut rng()).unwrap()
}

fn single() -> Topology {
    let id = HexId::parse(b"5187408b16c15713e621dd37318680fb46497361").unwrap();
    let mut node = ClusterNode::new(id, HexId::random(&mut rng()));
    node.port = 31005;
    node.cport = 41005;
    node.link = LinkState::Connected;
    let mut t = Topology::new(node);
    t.add_slots(&[(0, 16383)]).unwrap();
    t
}

#[test]
fn single_node_replies_match_redis() {
    let t = single();
    assert_eq!(
        cluster_nodes(&t),
        text(include_bytes!("fixtures/single.nodes.txt"))
    );
    assert_eq!(
        replies::info(&t),
        text(include_bytes!("fixtures/single.info.txt"))
    );
    for (version, slots, shards) in [
        (
            ProtocolVersion::Resp2,
            &include_bytes!("fixtures/single.slots.resp2")[..],
            &include_bytes!("fixtures/single.shards.resp2")[..],
        ),
        (
            ProtocolVersion::Resp3,
            &include_bytes!("fixtures/single.slots.resp3")[..],
            &include_bytes!("fixtures/single.shards.resp3")[..],
        ),
    ] {
        assert_eq!(
            text(&reply_bytes(version, |r| replies::slots(&t, r))),
            text(slots)
        );
        assert_eq!(
            text(&reply_bytes(version, |r| replies::shards(&t, r))),
            text(shards)
        );
    }
}

#[test]
fn a_redis_7_config_file_loads() {
    let conf = include_bytes!("fixtures/single.nodes.conf");
    let t = config_file::parse(&text(conf), &mut rng()).unwrap();
    assert_eq!(
        cluster_nodes(&t),
        text(include_bytes!("fixtures/single.nodes.txt"))
    );
    assert_eq!(
        t.myself().id.as_str(),
        "5187408b16c15713e621dd37318680fb46497361"
    );

    let conf = text(include_bytes!("fixtures/three.nodes.conf"));
    let t = config_file::parse(&conf, &mut rng()).unwrap();
    assert_eq!(t.current_epoch, 3);
    let lines: String = conf
        .lines()
        .filter(|l| !l.starts_with("vars"))
        .map(|l| format!("{l}\n"))
        .collect();
    assert_eq!(cluster_nodes(&t), lines);
    // A replica without a saved shard id joins its primary's shard.
    let replica = &t.nodes[0];
    let primary = t
        .node(t.index_of(&replica.primary.unwrap()).unwrap())
        .unwrap();
    assert_eq!(replica.shard, primary.shard);
    // Round trip through our own format (which adds shard ids).
    let again = config_file::parse(&config_file::render(&t), &mut rng()).unwrap();
    assert_eq!(again, t);
}

/// The topology log version a member applied is saved, and saved again by a start that
/// has not reopened its log yet, without being taken as applied by the topology itself.
#[test]
fn the_applied_log_version_survives_a_load_and_a_save() {
    let conf = text(include_bytes!("fixtures/three.nodes.conf"));
    let mut t = config_file::parse(&conf, &mut rng()).unwrap();
    assert_eq!(t.consensus.saved_version, 0);
    assert!(!config_file::render(&t).contains("topologyVersion"));
    t.consensus.version = 42;
    let text = config_file::render(&t);
    assert!(text.ends_with(" topologyVersion 42\n"), "{text}");
    let back = config_file::parse(&text, &mut rng()).unwrap();
    assert_eq!(
        (back.consensus.version, back.consensus.saved_version),
        (0, 42)
    );
    assert!(config_file::render(&back).ends_with(" topologyVersion 42\n"));
}

fn three() -> Topology {
    let mut t = from_nodes_text(
        include_bytes!("fixtures/three.nodes.txt"),
        "vars currentEpoch 3 lastVoteEpoch 0",
    );
    // Replication offsets are not in CLUSTER NODES; these are the captured ones.
    for n in t.nodes.iter_mut() {
        if n.port == 31001 || n.port == 31004 {
            n.repl_offset = 42;
        }
    }
    t
}

#[test]
fn three_node_views_match_redis() {
    let mut t = three();
    assert_eq!(
        cluster_nodes(&t),
        text(include_bytes!("fixtures/three.nodes.txt"))
    );
    for (version, slots, shards) in [
        (
            ProtocolVersion::Resp2,
            &include_bytes!("fixtures/three.slots.resp2")[..],
            &include_bytes!("fixtures/three.shards.resp2")[..],
        ),
        (
            ProtocolVersion::Resp3,
            &include_bytes!("fixtures/three.slots.resp3")[..],
            &include_bytes!("fixtures/three.shards.resp3")[..],
        ),
    ] {
        assert_eq!(
            text(&reply_bytes(version, |r| replies::slots(&t, r))),
            text(slots)
        );
        assert_eq!(
            text(&reply_bytes(version, |r| replies::shards(&t, r))),
            text(shards)
        );
    }
    // Message counters as captured: ping, pong, meet, fail by type code.
    t.stats.sent = [83, 94, 0, 2, 0, 0, 0, 0, 0, 0, 0];
    t.stats.received = [91, 82, 3, 1, 0, 0, 0, 0, 0, 0, 0];
    assert_eq!(
        replies::info(&t),
        text(include_bytes!("fixtures/three.info.txt"))
    );
}

#[test]
fn other_views_round_trip() {
    for nodes in [
        &include_bytes!("fixtures/hostname.nodes.txt")[..],
        &include_bytes!("fixtures/replica.nodes.txt")[..],
    ] {
        let t = from_nodes_text(nodes, "vars currentEpoch 3 lastVoteEpoch 0");
        assert_eq!(cluster_nodes(&t), text(nodes));
    }
}

#[test]
fn corrupt_files_are_refused_with_their_line() {
    let good = text(include_bytes!("fixtures/single.nodes.conf"));
    let cases = [
        ("garbage\n", 1),
        ("vars currentEpoch x\n", 1),
        (&*good.replace("myself,master", "master"), 0),
        (&*good.replace("myself,master", "myself,bogus"), 1),
        (&*good.replace("0-16383", "0-16384"), 1),
        (&*good.replace("0-16383", "0-100 50"), 1),
        (&*good.replace(":31005@41005", "31005"), 1),
        (&*format!("{good}{good}"), 3),
    ];
    for (file, line) in cases {
        let e = config_file::parse(file, &mut rng()).unwrap_err();
        assert_eq!(e.line, line, "{file:?}: {e}");
    }
}

mod round_trip {
    use super::*;
    use crate::cluster::flags::{bit, NodeFlags};
    use proptest::prelude::*;

    /// Builds a topology from generated parts: node 0 is myself; replicas follow a primary
    /// of the table and advertise its epoch (what CLUSTER NODES prints for them).
    fn build(
        seed: u64,
        n: usize,
        owners: Vec<u8>,
        open: Vec<(u16, bool, u8)>,
        epochs: (u64, u64),
    ) -> Topology {
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let mut nodes: Vec<ClusterNode> = Vec::new();
        for i in 0..n {
            let mut node = ClusterNode::new(HexId::random(&mut rng), HexId::random(&mut rng));
            node.ip = if i % 3 == 0 {
                String::new()
            } else {
                format!("10.0.0.{i}")
            };
            node.port = 7000 + i as u16;
            node.cport = 17000 + i as u16;
            node.hostname = if i % 2 == 0 {
                format!("h{i}.example")
            } else {
                String::new()
            };
            node.ping_sent = seed % 1000 * i as u64;
            node.pong_received = seed % 7777 + i as u64;
            node.config_epoch = (seed >> 8) % 50 + i as u64;
            node.link = if i % 2 == 0 {
                LinkState::Connected
            } else {
                LinkState::Disconnected
            };
            if i % 4 == 3 {
                node.flags.set(bit::PFAIL, true);
            }
            // The fabric address travels in the config file's link field (nodes_text.rs),
            // so a node with one loads as disconnected (myself is always connected).
            if (i % 2 == 1 || i == 0) && seed.is_multiple_of(3) {
                node.bus_addr = format!("verbs:gid=fe80::1,qpn={i},qkey=0x11111111,lid=0");
            }
            if i >= 2 && seed.is_multiple_of(i as u64) {
                let p = nodes[(seed as usize) % i].clone();
                if p.is_primary() {
                    node.flags = NodeFlags(bit::SLAVE);
                    node.primary = Some(p.id);
                    node.shard = p.shard;
                    node.config_epoch = p.config_epoch;
                }
            }
            nodes.push(node);
        }
        let mut t = Topology::new(nodes[0].clone());
        for node in nodes.into_iter().skip(1) {
            t.add_node(node).unwrap();
        }
        // Slot s is owned per the generated byte (primaries only; values past n: none).
        for (chunk, owner) in owners.iter().enumerate() {
            let o = *owner as usize;
            if o < t.nodes.len() && t.nodes[o].is_primary() {
                for s in chunk * 256..(chunk + 1) * 256 {
                    t.slots.set_owner(s as u16, Some(o as u16));
                }
            }
        }
        for (slot, migrating, who) in open {
            let id = t.nodes[who as usize % t.nodes.len()].id;
            // A slot both migrating and importing prints as migrating only (as Redis prints
            // it), so it cannot round-trip; no node holds one (SETSLOT MIGRATING wants the
            // slot owned, IMPORTING not owned).
            if t.slots.migrating.contains_key(&slot) || t.slots.importing.contains_key(&slot) {
                continue;
            }
            if migrating {
                t.slots.migrating.insert(slot, id);
            } else {
                t.slots.importing.insert(slot, id);
            }
        }
        t.current_epoch = epochs.0;
        t.last_vote_epoch = epochs.1;
        t.refresh_state();
        t
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]
        #[test]
        fn config_file_text_round_trips(
            seed in any::<u64>(),
            n in 1usize..8,
            owners in proptest::collection::vec(0u8..10, 64),
            open in proptest::collection::vec((0u16..16384, any::<bool>(), any::<u8>()), 0..5),
            epochs in (0u64..1_000_000, 0u64..1_000_000),
        ) {
            let t = build(seed, n, owners, open, epochs);
            let text = config_file::render(&t);
            let back = config_file::parse(&text, &mut rng()).unwrap();
            prop_assert_eq!(config_file::render(&back), text);
            prop_assert_eq!(back, t);
        }
    }
}
