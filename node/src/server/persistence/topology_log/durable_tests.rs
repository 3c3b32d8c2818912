//! Tests of the durable topology log: the file's replay rules (truncation, torn tails,
//! corruption), and groups whose members restart from their files: they keep their term and
//! vote, rejoin and keep committing, restore their topology after compaction, and no crash
//! point (even mid-write) loses a committed entry.

use super::durable::{file_header, DurableLog, TopologyLogFile, FILE_HEADER_LEN};
use super::durable_load::load;
use super::durable_record::{encode, RecordKind};
use crate::cluster::consensus::command::TopologyCommand;
use crate::cluster::consensus::durable_error::DurableError;
use crate::cluster::consensus::log::TopologyLog;
use crate::cluster::consensus::log_error::LogError;
use crate::cluster::consensus::log_store::{self, Persist};
use crate::cluster::consensus::raft_id::raft_id;
use crate::cluster::consensus::sim::{add_node, node_id, SimNet};
use crate::cluster::consensus::storage::StoredState;
use crate::cluster::consensus::TopologyImage;
use crate::cluster::id::{HexId, NodeId};
use crate::cluster::node::ClusterNode;
use crate::cluster::topology::Topology;
use protobuf::Message as _;
use raft::prelude::{Entry, HardState, Message, MessageType, Snapshot};
use std::path::{Path, PathBuf};

const ELECTION_TICKS_MAX: usize = 200;

/// The log file at `path`.
fn at(path: &Path) -> TopologyLogFile {
    TopologyLogFile::new(path)
}

fn entry(index: u64, term: u64, data: &[u8]) -> Entry {
    Entry {
        index,
        term,
        data: data.to_vec().into(),
        ..Entry::default()
    }
}

fn hard_state(term: u64, vote: u64, commit: u64) -> HardState {
    HardState {
        term,
        vote,
        commit,
        ..HardState::default()
    }
}

/// A file written record by record, as the log would; returns each record's offset.
fn write_file(path: &Path, records: &[(RecordKind, Vec<u8>)]) -> Vec<u64> {
    let mut bytes = file_header(&node_id(0));
    let mut offsets = Vec::new();
    for (kind, payload) in records {
        offsets.push(bytes.len() as u64);
        encode(*kind, payload, &mut bytes).unwrap();
    }
    std::fs::write(path, bytes).unwrap();
    offsets
}

fn e(index: u64, term: u64, data: &[u8]) -> (RecordKind, Vec<u8>) {
    (
        RecordKind::Entry,
        entry(index, term, data).write_to_bytes().unwrap(),
    )
}

fn hs(term: u64, vote: u64, commit: u64) -> (RecordKind, Vec<u8>) {
    (
        RecordKind::HardState,
        hard_state(term, vote, commit).write_to_bytes().unwrap(),
    )
}

/// The file's inode: a rewrite renames a new file over the old one, an append keeps it.
fn inode(path: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt as _;
    std::fs::metadata(path).unwrap().ino()
}

fn file_len(path: &Path) -> u64 {
    std::fs::metadata(path).unwrap().len()
}

#[test]
fn replay_follows_raft_append_rules() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("log");
    assert!(load(&path).unwrap().is_none(), "no file, nothing to load");
    write_file(
        &path,
        &[
            hs(1, 0, 0),
            e(1, 1, b"a"),
            e(2, 1, b"b"),
            e(3, 1, b"c"),
            hs(2, 7, 2),
            // A new leader overwrites the uncommitted suffix from index 3 on.
            e(3, 2, b"C"),
            hs(2, 7, 3),
        ],
    );
    let state = load(&path).unwrap().unwrap().state;
    let got: Vec<(u64, u64, Vec<u8>)> = state
        .entries
        .iter()
        .map(|e| (e.index, e.term, e.data.to_vec()))
        .collect();
    assert_eq!(
        got,
        vec![
            (1, 1, b"a".to_vec()),
            (2, 1, b"b".to_vec()),
            (3, 2, b"C".to_vec())
        ]
    );
    assert_eq!(state.hard_state, hard_state(2, 7, 3));
    // A commit noted past the log (its entries torn away) is brought back inside it.
    write_file(&path, &[e(1, 1, b"a"), hs(1, 1, 9)]);
    assert_eq!(load(&path).unwrap().unwrap().state.hard_state.commit, 1);
}

#[test]
fn a_snapshot_record_replaces_the_entries_before_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("log");
    let mut snapshot = Snapshot::default();
    snapshot.mut_metadata().index = 5;
    snapshot.mut_metadata().term = 3;
    snapshot.data = b"image".to_vec().into();
    let snap = (RecordKind::Snapshot, snapshot.write_to_bytes().unwrap());
    write_file(
        &path,
        &[e(1, 1, b"a"), hs(2, 0, 1), snap.clone(), e(6, 3, b"f")],
    );
    let state = load(&path).unwrap().unwrap().state;
    assert_eq!(state.snapshot, snapshot);
    assert_eq!(state.entries, vec![entry(6, 3, b"f")]);
    assert_eq!((state.hard_state.term, state.hard_state.commit), (3, 5));
    // Entries must continue the log: one at or before the snapshot, or past a gap, is damage.
    for bad in [e(5, 3, b"x"), e(8, 3, b"x")] {
        let offsets = write_file(&path, &[snap.clone(), e(6, 3, b"f"), bad]);
        match load(&path).unwrap_err() {
            DurableError::Corrupt { offset, .. } => assert_eq!(offset, offsets[2]),
            other => panic!("{other:?}"),
        }
    }
}

#[test]
fn a_torn_tail_is_dropped_and_the_file_truncated() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("log");
    let records = [e(1, 1, b"a"), e(2, 1, b"b"), hs(1, 1, 2)];
    let offsets = write_file(&path, &records);
    let whole = file_len(&path);
    let last = offsets[2];
    // Cut inside the last record's header, inside its payload, and its checksum wrong.
    for cut in [last + 3, whole - 1] {
        write_file(&path, &records);
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(cut)
            .unwrap();
        let loaded = load(&path).unwrap().unwrap();
        assert_eq!(loaded.dropped, cut - last);
        assert_eq!(loaded.state.entries.len(), 2);
        assert_eq!(loaded.state.hard_state, HardState::default());
        assert_eq!(file_len(&path), last, "the torn record is cut off");
    }
    write_file(&path, &records);
    let mut bytes = std::fs::read(&path).unwrap();
    *bytes.last_mut().unwrap() ^= 0xff;
    std::fs::write(&path, &bytes).unwrap();
    assert_eq!(load(&path).unwrap().unwrap().dropped, whole - last);
    // A file system may leave zeros past the last write: dropped too.
    write_file(&path, &records);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes.extend_from_slice(&[0u8; 300]);
    std::fs::write(&path, &bytes).unwrap();
    let loaded = load(&path).unwrap().unwrap();
    assert_eq!(loaded.dropped, 300);
    assert_eq!(loaded.state.hard_state, hard_state(1, 1, 2));
}

#[test]
fn damage_before_the_tail_is_a_typed_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("log");
    let records = [e(1, 1, b"a"), e(2, 1, b"bbbb"), hs(1, 1, 2)];
    let offsets = write_file(&path, &records);
    let pristine = std::fs::read(&path).unwrap();
    // Any flipped byte of the middle record (header or payload).
    for at in offsets[1]..offsets[2] {
        let mut bytes = pristine.clone();
        bytes[at as usize] ^= 0x40;
        std::fs::write(&path, &bytes).unwrap();
        match load(&path) {
            Err(DurableError::Corrupt { offset, .. }) => assert_eq!(offset, offsets[1]),
            other => panic!("byte {at}: {other:?}"),
        }
        assert_eq!(file_len(&path), pristine.len() as u64, "nothing truncated");
    }
    // A checksummed record of a kind this code does not know.
    let mut bytes = file_header(&node_id(0));
    encode(
        RecordKind::Entry,
        &entry(1, 1, b"a").write_to_bytes().unwrap(),
        &mut bytes,
    )
    .unwrap();
    bytes[FILE_HEADER_LEN] = 9;
    std::fs::write(&path, &bytes).unwrap();
    assert!(matches!(load(&path), Err(DurableError::Corrupt { .. })));
    // Not a log file at all.
    std::fs::write(&path, b"hello world, not a raft log").unwrap();
    assert!(matches!(
        load(&path),
        Err(DurableError::Corrupt { offset: 0, .. })
    ));
    // Opened as a topology log, the error is typed too (never a panic).
    write_file(&path, &records);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[offsets[1] as usize + 20] ^= 1;
    std::fs::write(&path, &bytes).unwrap();
    assert!(matches!(
        TopologyLog::open(node_id(0), &at(&path), 0),
        Err(LogError::Durable(DurableError::Corrupt { .. }))
    ));
}

#[test]
fn a_new_log_never_overwrites_an_existing_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("log");
    let ids = [node_id(0)];
    let log = TopologyLog::new(ids[0], &ids, &[], 0)
        .unwrap()
        .with_file(&at(&path))
        .unwrap();
    drop(log);
    assert_eq!(
        TopologyLog::new(ids[0], &ids, &[], 0)
            .unwrap()
            .with_file(&at(&path))
            .unwrap_err(),
        LogError::Durable(DurableError::Exists(path.clone()))
    );
    assert_eq!(
        DurableLog::create(&path, &ids[0], &StoredState::default()).unwrap_err(),
        DurableError::Exists(path.clone())
    );
    assert!(TopologyLog::open(ids[0], &at(&dir.path().join("none")), 0)
        .unwrap()
        .is_none());
    // Another node (a new node id, a copied directory) does not take it up.
    assert_eq!(
        TopologyLog::open(node_id(1), &at(&path), 0).unwrap_err(),
        LogError::Durable(DurableError::OtherNode {
            path: path.clone(),
            owner: ids[0]
        })
    );
    assert!(TopologyLog::open(ids[0], &at(&path), 0).unwrap().is_some());
}

/// A request for `to`'s vote from `from` in `term`, with a log as long as the bootstrap one.
fn vote_request(from: &NodeId, to: &NodeId, term: u64) -> Vec<u8> {
    let mut m = Message::default();
    m.set_msg_type(MessageType::MsgRequestVote);
    m.from = raft_id(from);
    m.to = raft_id(to);
    m.term = term;
    m.index = 1;
    m.log_term = 1;
    m.write_to_bytes().unwrap()
}

/// Whether the turn's output grants `to` its vote (None: no answer to `to`); the turn is
/// saved into `file` first, as a driver does.
fn vote_granted(log: &mut TopologyLog, file: Option<&mut DurableLog>, to: &NodeId) -> Option<bool> {
    let out = log.ready().unwrap();
    if let (Some(persist), Some(file)) = (&out.persist, file) {
        log_store::save(log, file, persist).unwrap();
    }
    out.messages
        .iter()
        .filter(|(n, _)| n == to)
        .map(|(_, b)| Message::parse_from_bytes(b).unwrap())
        .find(|m| m.get_msg_type() == MessageType::MsgRequestVoteResponse)
        .map(|m| !m.reject)
}

#[test]
fn a_restarted_voter_keeps_its_term_and_never_votes_twice_in_one() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("log");
    let ids = [node_id(0), node_id(1), node_id(2)];
    let (a, b, me) = (ids[0], ids[1], ids[2]);
    let (mut log, mut file) = TopologyLog::new(me, &ids, &[], 5)
        .unwrap()
        .with_file(&at(&path))
        .unwrap();
    assert_eq!(vote_granted(&mut log, Some(&mut file), &a), None);
    let before = file.len();
    log.step(&a, &vote_request(&a, &me, 5)).unwrap();
    let out = log.ready().unwrap();
    assert!(
        matches!(&out.persist, Some(Persist::Turn { hard_state: Some(hs), .. }) if hs.vote == raft_id(&a)),
        "the turn that grants the vote hands the vote out to be persisted"
    );
    log_store::save(&mut log, &mut file, out.persist.as_ref().unwrap()).unwrap();
    assert!(
        file.len() > before,
        "the vote was on disk before its answer was sent"
    );
    let granted = out
        .messages
        .iter()
        .filter(|(n, _)| *n == a)
        .map(|(_, b)| Message::parse_from_bytes(b).unwrap())
        .any(|m| m.get_msg_type() == MessageType::MsgRequestVoteResponse && !m.reject);
    assert!(granted, "a's vote granted");
    drop((log, file));

    let (mut log, mut file) = TopologyLog::open(me, &at(&path), 6).unwrap().unwrap();
    assert_eq!(log.term(), 5);
    log.step(&b, &vote_request(&b, &me, 5)).unwrap();
    assert_eq!(
        vote_granted(&mut log, Some(&mut file), &b),
        Some(false),
        "voted twice in term 5"
    );
    // The candidate it voted for may ask again (a lost answer) and is granted again.
    log.step(&a, &vote_request(&a, &me, 5)).unwrap();
    assert_eq!(vote_granted(&mut log, Some(&mut file), &a), Some(true));
    // A later term is a new vote.
    log.step(&b, &vote_request(&b, &me, 6)).unwrap();
    assert_eq!(vote_granted(&mut log, Some(&mut file), &b), Some(true));
    drop((log, file));
    assert_eq!(
        TopologyLog::open(me, &at(&path), 7)
            .unwrap()
            .unwrap()
            .0
            .term(),
        6
    );

    // The check can fail: a log without its file would have voted for b in term 5.
    let mut forgetful = TopologyLog::new(me, &ids, &[], 5).unwrap();
    forgetful.step(&b, &vote_request(&b, &me, 5)).unwrap();
    assert_eq!(vote_granted(&mut forgetful, None, &b), Some(true));
}

fn log_path(dir: &Path, i: usize) -> PathBuf {
    dir.join(format!("node-{i}.log"))
}

fn fresh_topology(id: NodeId) -> Topology {
    Topology::new(ClusterNode::new(id, HexId::parse(&[b'f'; 40]).unwrap()))
}

/// A group of `voters` whose members all write their files under `dir`.
fn durable_net(voters: usize, seed: u64, dir: &Path) -> SimNet {
    let mut net = SimNet::new(voters, 0, seed);
    for i in 0..voters {
        net.attach_file(i, &at(&log_path(dir, i)));
    }
    net
}

/// Node `i` restarts: its log comes back from its file, its topology starts empty.
fn restart(net: &mut SimNet, dir: &Path, i: usize, seed: u64) {
    net.crash(i);
    let (log, file) = TopologyLog::open(node_id(i), &at(&log_path(dir, i)), seed)
        .unwrap()
        .expect("the file is there");
    assert_eq!(log.applied(), log.snapshot_index());
    let node = &mut net.nodes[i];
    node.log = Some(log);
    node.file = Some(Box::new(file));
    node.topology = fresh_topology(node_id(i));
    node.applied.clear();
    node.restores = 0;
}

fn commit(net: &mut SimNet, command: &TopologyCommand) {
    let leader = net.elect(ELECTION_TICKS_MAX);
    net.log(leader).propose(command).unwrap();
    net.settle();
}

fn assign(n: usize, start: u16, end: u16) -> TopologyCommand {
    TopologyCommand::AssignSlots {
        node: node_id(n),
        ranges: vec![(start, end)],
    }
}

#[test]
fn a_member_restarted_from_its_file_rejoins_and_the_group_keeps_committing() {
    let dir = tempfile::tempdir().unwrap();
    let mut net = durable_net(3, 21, dir.path());
    for c in [add_node(0), add_node(1), add_node(2), assign(0, 0, 99)] {
        commit(&mut net, &c);
    }
    let leader = net.elect(ELECTION_TICKS_MAX);
    let follower = (leader + 1) % 3;
    let term = net.log(follower).term();
    net.crash(follower);
    // Two of three still commit while it is down.
    commit(&mut net, &assign(1, 100, 199));
    restart(&mut net, dir.path(), follower, 99);
    assert!(net.log(follower).term() >= term);
    commit(&mut net, &assign(2, 200, 299));
    let expected = net.commands(leader);
    assert_eq!(expected.len(), 6);
    assert_eq!(
        net.commands(follower),
        expected,
        "re-applied from its own file and the leader"
    );
    // Now the leader restarts: the other two elect, and it comes back as a member.
    restart(&mut net, dir.path(), leader, 98);
    commit(&mut net, &assign(0, 300, 399));
    net.run(30);
    let image = TopologyImage::capture(&net.nodes[0].topology);
    for i in 0..3 {
        assert_eq!(
            TopologyImage::capture(&net.nodes[i].topology),
            image,
            "node {i}"
        );
        assert_eq!(net.nodes[i].topology.owner(350).unwrap().id, node_id(0));
    }
    assert!(net.step_errors.is_empty(), "{:?}", net.step_errors);
}

#[test]
fn the_whole_group_restarts_from_its_files_and_keeps_every_committed_entry() {
    let dir = tempfile::tempdir().unwrap();
    let mut net = durable_net(3, 22, dir.path());
    for c in [
        add_node(0),
        add_node(1),
        assign(0, 0, 999),
        assign(1, 1000, 1999),
    ] {
        commit(&mut net, &c);
    }
    let before = net.commands(0);
    let image = TopologyImage::capture(&net.nodes[0].topology);
    for i in 0..3 {
        restart(&mut net, dir.path(), i, 50 + i as u64);
    }
    // Nothing new is committed before the group has a leader again; then every node
    // re-applies what was committed before, from its own file.
    net.elect(ELECTION_TICKS_MAX);
    net.run(5);
    for i in 0..3 {
        assert_eq!(net.commands(i), before, "node {i}");
        assert_eq!(
            TopologyImage::capture(&net.nodes[i].topology).slots,
            image.slots
        );
    }
    commit(&mut net, &assign(0, 2000, 2999));
    for i in 0..3 {
        assert_eq!(net.commands(i).len(), before.len() + 1);
    }
}

#[test]
fn compaction_shrinks_the_file_and_a_reopen_restores_the_same_image() {
    let dir = tempfile::tempdir().unwrap();
    let mut net = durable_net(3, 23, dir.path());
    for n in 0..3 {
        commit(&mut net, &add_node(n));
    }
    for k in 0..30u16 {
        commit(&mut net, &assign(k as usize % 3, k * 10, k * 10 + 9));
    }
    let node = 1;
    let path = log_path(dir.path(), node);
    let before = file_len(&path);
    let inode_before = inode(&path);
    let topology = net.nodes[node].topology.clone();
    let image = TopologyImage::capture(&topology);
    net.compact(node, &topology).unwrap();
    assert_eq!(net.log(node).snapshot_index(), image.version);
    let after = file_len(&path);
    assert!(after < before, "compaction left {after} of {before} bytes");
    assert_ne!(
        inode(&path),
        inode_before,
        "the compaction rewrote the file"
    );

    // Reopened with an empty topology: the first turn restores the snapshot's image.
    net.crash(node);
    let (mut log, mut file) = TopologyLog::open(node_id(node), &at(&path), 7)
        .unwrap()
        .unwrap();
    assert_eq!(log.applied(), image.version);
    assert_eq!(log.snapshot_index(), image.version);
    let out = log.ready().unwrap();
    if let Some(persist) = &out.persist {
        log_store::save(&mut log, &mut file, persist).unwrap();
    }
    assert_eq!(out.restore.as_ref(), Some(&image));
    let mut restored = fresh_topology(node_id(node));
    out.apply_to(&mut restored);
    assert_eq!(TopologyImage::capture(&restored), image);
    // Applied to the topology it already had, the same output changes nothing.
    let mut kept = topology.clone();
    out.apply_to(&mut kept);
    assert_eq!(TopologyImage::capture(&kept), image);
    // Back in the group, it follows what commits next.
    net.nodes[node].log = Some(log);
    net.nodes[node].file = Some(Box::new(file));
    net.nodes[node].topology = restored;
    commit(&mut net, &assign(0, 5000, 5100));
    let leader = net.elect(ELECTION_TICKS_MAX);
    assert_eq!(
        TopologyImage::capture(&net.nodes[node].topology),
        TopologyImage::capture(&net.nodes[leader].topology)
    );
}

/// Members crash at random points (a tenth of their turns, mid-write included, and between
/// turns), sometimes all at once, and restart from their files with empty topologies. No
/// committed entry is ever lost or replaced (checked on every report), the group keeps
/// committing, and in the end every member holds every committed entry.
#[test]
fn random_crash_points_never_lose_a_committed_entry() {
    use super::crash_sim::CrashNet;
    use raft::{GetEntriesContext, Storage};
    use rand::Rng;
    for seed in 0..4u64 {
        let dir = tempfile::tempdir().unwrap();
        let mut net = CrashNet::new(3, 1000 + seed, dir.path());
        for n in 0..3 {
            while !net.propose(&add_node(n)) {
                net.tick();
            }
            net.tick();
        }
        net.crash_percent = 10;
        for step in 0..400u32 {
            let roll = net.rng().gen_range(0..100);
            let who = net.rng().gen_range(0..3usize);
            match roll {
                0..=39 => {
                    let start = net.rng().gen_range(0..16000u16);
                    let end = start + net.rng().gen_range(0..200u16);
                    let owner = net.rng().gen_range(0..3usize);
                    let command = if roll < 30 {
                        assign(owner, start, end)
                    } else {
                        TopologyCommand::RemoveSlots {
                            ranges: vec![(start, end)],
                        }
                    };
                    net.propose(&command);
                }
                40..=44 => net.crash(who),
                45..=47 => net.compact(who),
                48 if step % 3 == 0 => (0..3).for_each(|i| net.crash(i)),
                _ => {}
            }
            for i in 0..3 {
                if !net.is_up(i) && net.rng().gen_range(0..100) < 30 {
                    net.restart(i);
                }
            }
            net.tick();
        }
        // Calm: everyone back, no more crashes; the group must still commit.
        net.crash_percent = 0;
        for i in 0..3 {
            if !net.is_up(i) {
                net.restart(i);
            }
        }
        let marker = assign(0, 16383, 16383);
        let mut proposed = false;
        for _ in 0..ELECTION_TICKS_MAX {
            if !proposed {
                proposed = net.propose(&TopologyCommand::RemoveSlots {
                    ranges: vec![(16383, 16383)],
                }) && net.propose(&marker);
            }
            net.tick();
            if net.committed.values().any(|c| *c == marker) {
                break;
            }
        }
        net.tick();
        let marker_index = net
            .committed
            .iter()
            .find(|(_, c)| **c == marker)
            .map(|(i, _)| *i)
            .unwrap_or_else(|| panic!("seed {seed}: the group no longer commits"));
        assert!(
            net.crashes > 20 && net.partial_writes > 0 && net.committed.len() > 15,
            "seed {seed}: {} crashes, {} partial writes, {} commits",
            net.crashes,
            net.partial_writes,
            net.committed.len()
        );
        let image = TopologyImage::capture(&net.members[0].topology);
        assert!(image.version >= marker_index);
        for (i, m) in net.members.iter().enumerate() {
            assert_eq!(
                TopologyImage::capture(&m.topology),
                image,
                "seed {seed} node {i}"
            );
            // Every committed entry past the member's snapshot is in its log, unchanged.
            let log = m.log.as_ref().unwrap();
            let store = log.storage();
            let first = log.snapshot_index() + 1;
            let last = store.last_index().unwrap();
            let entries = store
                .entries(first, last + 1, None, GetEntriesContext::empty(false))
                .unwrap();
            for (index, command) in net.committed.range(first..) {
                let e = &entries[(index - first) as usize];
                assert_eq!(
                    TopologyCommand::decode(&e.data).unwrap(),
                    *command,
                    "seed {seed} node {i} index {index}"
                );
            }
        }
        // A log that did not write its file would lose them all: the check would fail.
        assert!(
            net.restarts > 10,
            "seed {seed}: only {} restarts",
            net.restarts
        );
        eprintln!(
            "seed {seed}: {} crashes ({} mid-write), {} restarts, {} commits",
            net.crashes,
            net.partial_writes,
            net.restarts,
            net.committed.len()
        );
    }
}

/// A node that joins with a file gets the group's snapshot by message; the install rewrites
/// its file, and after a restart it comes back from that snapshot, able to address the
/// members it learned from it.
#[test]
fn a_joiner_keeps_the_snapshot_it_was_sent_across_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let mut net = durable_net(3, 24, dir.path());
    for c in [add_node(0), add_node(1), add_node(3), assign(0, 0, 8000)] {
        commit(&mut net, &c);
    }
    for i in 0..3 {
        let topology = net.nodes[i].topology.clone();
        net.compact(i, &topology).unwrap();
    }
    let path = log_path(dir.path(), 3);
    let (joiner_log, joiner_file) = TopologyLog::new(node_id(3), &[], &[], 31)
        .unwrap()
        .with_file(&at(&path))
        .unwrap();
    let joiner_inode = inode(&path);
    let joiner = net.push(joiner_log);
    net.nodes[joiner].file = Some(Box::new(joiner_file));
    let leader = net.elect(ELECTION_TICKS_MAX);
    net.log(leader).propose_add_learner(&node_id(3)).unwrap();
    net.run(20);
    assert_eq!(net.nodes[joiner].restores, 1);
    assert_ne!(inode(&path), joiner_inode, "the install rewrote the file");
    let snapshot_index = net.log(joiner).snapshot_index();
    assert!(snapshot_index > 1);

    restart(&mut net, dir.path(), joiner, 32);
    assert_eq!(net.log(joiner).snapshot_index(), snapshot_index);
    assert_eq!(
        net.log(joiner).members().0.len(),
        3,
        "voters addressable again"
    );
    commit(&mut net, &assign(1, 8001, 9000));
    net.run(5);
    assert_eq!(
        TopologyImage::capture(&net.nodes[joiner].topology),
        TopologyImage::capture(&net.nodes[leader].topology)
    );
    assert_eq!(
        net.nodes[joiner].topology.owner(8500).unwrap().id,
        node_id(1)
    );
}

/// A write that fails leaves the log poisoned: raft believes something is on disk that may
/// not be, so it must not go on answering peers.
#[test]
fn a_failed_write_poisons_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let sub = dir.path().join("node");
    std::fs::create_dir(&sub).unwrap();
    let mut net = durable_net(3, 25, &sub);
    commit(&mut net, &add_node(0));
    // The directory is gone: the compaction's rewrite cannot make its temp file.
    std::fs::remove_dir_all(&sub).unwrap();
    let topology = net.nodes[0].topology.clone();
    assert!(matches!(
        net.compact(0, &topology).unwrap_err(),
        LogError::Durable(DurableError::Io { .. })
    ));
    assert_eq!(net.log(0).tick().unwrap_err(), LogError::Poisoned);
    assert_eq!(net.log(0).ready().unwrap_err(), LogError::Poisoned);
}

/// Records pile up (one hard state per vote or commit, entries replaced on conflicts); past
/// REWRITE_RECORDS_MAX of them the next turn rewrites the file down to the live state.
#[test]
fn a_file_full_of_old_records_is_rewritten_to_the_live_state() {
    use super::durable::REWRITE_RECORDS_MAX;
    use crate::cluster::consensus::storage::TopologyStorage;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("log");
    let state = StoredState {
        entries: vec![entry(1, 1, b"a")],
        hard_state: hard_state(1, 0, 1),
        ..StoredState::default()
    };
    let store = TopologyStorage::restored(state.clone()).unwrap();
    let mut file = DurableLog::create(&path, &node_id(0), &state).unwrap();
    let fresh = file.len();
    // Turns of 100 entries, each replacing the one before at index 2.
    let batch: Vec<Entry> = (0..100).map(|t| entry(2, t + 2, b"x")).collect();
    for _ in 0..REWRITE_RECORDS_MAX / batch.len() {
        file.save_turn(&store, false, &batch, None).unwrap();
    }
    assert_eq!(file.rewrites(), 0);
    assert!(file.len() > fresh + REWRITE_RECORDS_MAX as u64 * 4);
    file.save_turn(&store, false, &[], None).unwrap();
    assert_eq!(file.rewrites(), 1);
    assert_eq!(file.len(), fresh, "only the live state is left");
    assert_eq!(load(&path).unwrap().unwrap().state, state);
}

#[test]
fn storage_refuses_entries_that_do_not_follow_the_snapshot() {
    use crate::cluster::consensus::storage::TopologyStorage;
    let gap = StoredState {
        entries: vec![entry(1, 1, b"a"), entry(3, 1, b"c")],
        ..StoredState::default()
    };
    assert!(TopologyStorage::restored(gap).is_err());
    let ok = StoredState {
        entries: vec![entry(1, 1, b"a"), entry(2, 1, b"b")],
        hard_state: hard_state(1, 0, 2),
        ..StoredState::default()
    };
    let store = TopologyStorage::restored(ok.clone()).unwrap();
    assert_eq!(store.stored_state().unwrap(), ok);
}

mod replay_properties {
    use super::*;
    use proptest::prelude::*;

    fn records() -> Vec<(RecordKind, Vec<u8>)> {
        vec![
            hs(1, 0, 0),
            e(1, 1, b"first"),
            e(2, 1, b"second"),
            hs(2, 5, 2),
            e(3, 2, b"third"),
            hs(2, 5, 3),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// A crash may cut the file anywhere past its first bytes: the load keeps exactly
        /// the records wholly written and truncates the rest.
        #[test]
        fn any_cut_keeps_the_whole_records_before_it(cut_at in 0.0f64..1.0) {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("log");
            let recs = records();
            let offsets = write_file(&path, &recs);
            let whole = file_len(&path);
            let cut = FILE_HEADER_LEN as u64 + ((whole - FILE_HEADER_LEN as u64) as f64 * cut_at) as u64;
            std::fs::OpenOptions::new().write(true).open(&path).unwrap().set_len(cut).unwrap();
            // Where each record ends; the cut keeps those ending at or before it.
            let ends: Vec<u64> = offsets.iter().skip(1).copied().chain([whole]).collect();
            let kept = ends.iter().filter(|&&end| end <= cut).count();
            write_file(&dir.path().join("prefix"), &recs[..kept]);
            let expected = load(&dir.path().join("prefix")).unwrap().unwrap().state;
            let loaded = load(&path).unwrap().unwrap();
            prop_assert_eq!(loaded.state, expected);
            let kept_len = if kept == 0 { FILE_HEADER_LEN as u64 } else { ends[kept - 1] };
            prop_assert_eq!(file_len(&path), kept_len);
        }

        /// Whatever follows the magic, a load answers (a state or a typed error), never panics.
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("log");
            let mut file = file_header(&node_id(0));
            file.extend_from_slice(&bytes);
            std::fs::write(&path, &file).unwrap();
            let _ = load(&path);
        }

        /// Flipping bytes of a valid file never panics either, opened as a whole log included.
        #[test]
        fn damaged_files_never_panic(flips in proptest::collection::vec((any::<usize>(), 1u8..=255), 1..4)) {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("log");
            write_file(&path, &records());
            let mut bytes = std::fs::read(&path).unwrap();
            let n = bytes.len();
            for (at, x) in flips {
                bytes[at % n] ^= x;
            }
            std::fs::write(&path, &bytes).unwrap();
            let _ = TopologyLog::open(node_id(0), &at(&path), 0);
        }
    }
}
