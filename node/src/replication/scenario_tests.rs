//! The pieces together, as the runtime will drive them: a primary propagates writes into its
//! backlog, replicas receive the backlog as records delivered out of order and twice, apply
//! whole commands in offset order, acknowledge, reconnect with PSYNC, and follow a promoted
//! sibling with a partial resync. Each test checks that every replica's stream is exactly the
//! primary's, byte for byte, over several seeds.

use super::ack::{ReplicaAcks, ReplicaProgress};
use super::apply_order::ApplyOrder;
use super::backlog::Backlog;
use super::ids::{ReplId, ReplicationIds};
use super::propagate::{encode_stream, propagate, WriteEffect};
use super::psync::{self, PsyncDecision, PsyncRequest};
use super::record::{decode_record, encode_record};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

const BACKLOG: usize = 4096;
const RECORD_BYTES: usize = 37; // small, so commands split across records

struct Node {
    ids: ReplicationIds,
    backlog: Backlog,
    /// Every stream byte this node has (the primary's writes, or what a replica applied).
    stream: Vec<u8>,
}

struct Replica {
    node: Node,
    order: ApplyOrder,
    progress: ReplicaProgress,
    /// Released bytes not yet forming a whole command.
    pending: Vec<u8>,
}

impl Replica {
    /// A replica that loaded a full sync at `offset` of `replid`'s history.
    fn full_synced(replid: ReplId, offset: u64, stream_so_far: &[u8]) -> Self {
        Replica {
            node: Node {
                ids: psync::on_full_resync(replid),
                backlog: Backlog::new(BACKLOG, offset).unwrap(),
                stream: stream_so_far.to_vec(),
            },
            order: ApplyOrder::new(offset, 1 << 20),
            progress: ReplicaProgress::new(offset),
            pending: Vec::new(),
        }
    }

    fn processed(&self) -> u64 {
        self.progress.processed()
    }

    /// Takes one ring record: orders it, then applies every whole command now available.
    fn receive(&mut self, payload: &[u8]) {
        let (offset, bytes) = decode_record(payload).unwrap();
        self.order.push(offset, bytes, &mut self.pending).unwrap();
        let mut used = 0;
        while let Some((_, n)) = proto::resp::decode(&self.pending[used..]).unwrap() {
            used += n;
        }
        let applied: Vec<u8> = self.pending.drain(..used).collect();
        self.node.stream.extend_from_slice(&applied);
        let offset = self.node.backlog.append(&applied);
        self.progress.advance(offset);
    }
}

/// A primary serving writes.
fn write(primary: &mut Node, rng: &mut StdRng, n: usize) {
    for _ in 0..n {
        let key = format!("k{}", rng.gen_range(0..50));
        let (argv, effect): (Vec<String>, WriteEffect) = match rng.gen_range(0..3) {
            0 => (
                vec!["SET".into(), key, "v".repeat(rng.gen_range(0..30))],
                WriteEffect::None,
            ),
            1 => (
                vec!["EXPIRE".into(), key, "100".into()],
                WriteEffect::ExpiresAtMs(rng.gen_range(1..1 << 40)),
            ),
            _ => (
                vec!["INCRBYFLOAT".into(), key, "0.5".into()],
                WriteEffect::NewValue(format!("{}", rng.gen_range(0..1000)).into_bytes()),
            ),
        };
        let argv: Vec<&[u8]> = argv.iter().map(|a| a.as_bytes()).collect();
        let bytes = encode_stream(&propagate(&argv, &effect).unwrap());
        primary.backlog.append(&bytes);
        primary.stream.extend_from_slice(&bytes);
    }
}

/// Ships the primary's backlog from `from` as records: shuffled, some twice, some held back
/// (`lose_tail`: the link drops before the last few arrive).
fn ship(primary: &Node, replica: &mut Replica, from: u64, rng: &mut StdRng, lose_tail: usize) {
    let range = primary
        .backlog
        .range(from)
        .expect("offset inside the backlog");
    let mut records: Vec<Vec<u8>> = range
        .records(RECORD_BYTES)
        .map(|(offset, bytes)| {
            let mut p = Vec::new();
            encode_record(offset, bytes, &mut p);
            p
        })
        .collect();
    records.truncate(records.len().saturating_sub(lose_tail));
    let dups: Vec<Vec<u8>> = records
        .iter()
        .filter(|_| rng.gen_bool(0.2))
        .cloned()
        .collect();
    records.extend(dups);
    records.shuffle(rng);
    for r in &records {
        replica.receive(r);
    }
}

/// The replica reconnects: PSYNC, and the records the answer calls for.
fn reconnect(primary: &Node, replica: &mut Replica, rng: &mut StdRng) -> PsyncDecision {
    let req = PsyncRequest::from_replica(Some((replica.node.ids.replid(), replica.processed())));
    let decision = psync::decide(
        &primary.ids,
        Some(&primary.backlog),
        primary.backlog.master_repl_offset(),
        &req,
    );
    if let PsyncDecision::Continue { from, new_replid } = decision {
        let processed = replica.processed();
        psync::on_continue(&mut replica.node.ids, new_replid, processed);
        // A new link: whatever was held from the old one is resent anyway.
        replica.order.reset(processed);
        replica.pending.clear();
        ship(primary, replica, from, rng, 0);
    }
    decision
}

#[test]
fn replicas_follow_reconnect_and_survive_a_promotion() {
    for seed in 0..20u64 {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut primary = Node {
            ids: ReplicationIds::new(&mut rng),
            backlog: Backlog::new(BACKLOG, 0).unwrap(),
            stream: Vec::new(),
        };
        let mut acks: ReplicaAcks<u8> = ReplicaAcks::default();
        // Both replicas attach before any write: a full sync of the empty dataset.
        let mut r1 = Replica::full_synced(primary.ids.replid(), 0, &[]);
        let mut r2 = Replica::full_synced(primary.ids.replid(), 0, &[]);
        for id in [1, 2] {
            acks.attach(id, 0, 0).unwrap();
            acks.set_online(&id, 0);
        }

        write(&mut primary, &mut rng, 40);
        ship(&primary, &mut r1, 1, &mut rng, 0);
        ship(&primary, &mut r2, 1, &mut rng, 3); // r2's link drops early
        let end = primary.backlog.master_repl_offset();
        assert_eq!(r1.node.stream, primary.stream, "seed {seed}");
        assert!(r2.processed() < end);
        assert_eq!(r2.node.stream[..], primary.stream[..r2.node.stream.len()]);

        // WAIT 2 for the last write: only r1 has it.
        acks.observe(&1, r1.processed(), end, 10);
        acks.observe(&2, r2.processed(), end, 10);
        assert_eq!(acks.count_acked(end), 1);

        // r2 reconnects and continues from its processed offset.
        let d = reconnect(&primary, &mut r2, &mut rng);
        assert!(
            matches!(
                d,
                PsyncDecision::Continue {
                    new_replid: None,
                    ..
                }
            ),
            "seed {seed}"
        );
        assert_eq!(r2.node.stream, primary.stream);
        acks.observe(&2, r2.processed(), end, 20);
        assert_eq!(acks.count_acked(end), 2);

        // More writes reach r1 only partly (r1 lags), then the primary dies.
        write(&mut primary, &mut rng, 20);
        let from = r1.processed() + 1;
        ship(&primary, &mut r1, from, &mut rng, 4);
        // r1 is the better replica, r2 stayed behind: r1 is promoted.
        assert!(r1.processed() > r2.processed());
        let old_replid = r1.node.ids.replid();
        let mut promoted = Node {
            ids: r1.node.ids,
            backlog: r1.node.backlog.clone(),
            stream: r1.node.stream.clone(),
        };
        promoted
            .ids
            .shift_on_promotion(promoted.backlog.master_repl_offset(), &mut rng);

        // r2 asks the new primary under the old id and continues from its own offset.
        let d = reconnect(&promoted, &mut r2, &mut rng);
        assert!(
            matches!(d, PsyncDecision::Continue { new_replid: Some(id), .. } if id == promoted.ids.replid()),
            "seed {seed}: {d:?}"
        );
        assert_eq!(r2.node.ids.replid2(), Some(old_replid));
        assert_eq!(r2.node.stream, promoted.stream);

        // The new primary writes; r2 follows; its stream is the new primary's.
        write(&mut promoted, &mut rng, 30);
        let from = r2.processed() + 1;
        ship(&promoted, &mut r2, from, &mut rng, 0);
        assert_eq!(r2.node.stream, promoted.stream, "seed {seed}");
        // Nothing the promoted node never had is in it: r1's stream is a prefix of the old
        // primary's, and the old primary's tail r1 missed is gone.
        assert_eq!(promoted.stream[..r1.node.stream.len()], r1.node.stream[..]);
    }
}

#[test]
fn a_replica_past_the_backlog_needs_a_full_sync() {
    let mut rng = StdRng::seed_from_u64(99);
    let mut primary = Node {
        ids: ReplicationIds::new(&mut rng),
        backlog: Backlog::new(BACKLOG, 0).unwrap(),
        stream: Vec::new(),
    };
    let mut r = Replica::full_synced(primary.ids.replid(), 0, &[]);
    write(&mut primary, &mut rng, 10);
    ship(&primary, &mut r, 1, &mut rng, 0);
    // Far more than the backlog holds happens while r is away.
    while primary.backlog.start_offset() <= r.processed() + 1 {
        write(&mut primary, &mut rng, 50);
    }
    let d = reconnect(&primary, &mut r, &mut rng);
    let PsyncDecision::FullResync { replid, offset, .. } = d else {
        panic!("expected a full sync, got {d:?}");
    };
    assert_eq!(
        (replid, offset),
        (primary.ids.replid(), primary.backlog.master_repl_offset())
    );
    // The snapshot brings it to `offset`; the stream continues from there.
    let mut r = Replica::full_synced(replid, offset, &primary.stream);
    write(&mut primary, &mut rng, 10);
    ship(&primary, &mut r, offset + 1, &mut rng, 0);
    assert_eq!(r.node.stream, primary.stream);
}
