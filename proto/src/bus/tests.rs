//! Round trips, a byte fixture of the envelope, every rejection path, and fragmentation under
//! loss, duplication and reordering.

use super::envelope::{ENVELOPE_HEADER_LEN, ENVELOPE_MAX, MAGIC};
use super::fragment::{message_id, FRAGMENTS_MAX, FRAGMENT_HEADER_LEN};
use super::limits::*;
use super::*;
use proptest::prelude::*;
use prost::Message as _;

const SECRET: &[u8] = b"cluster-secret";

fn id(c: char) -> String {
    std::iter::repeat_n(c, NODE_ID_LEN).collect()
}

fn header(sender: &str) -> Header {
    Header {
        sender: sender.to_string(),
        current_epoch: 7,
        config_epoch: 3,
        topology_version: 11,
        flags: 1,
        primary: String::new(),
        slots: vec![SlotRange {
            start: 0,
            end: 5460,
        }],
        record: Some(NodeRecord {
            bus_addr: b"sim:1".to_vec(),
            ip: "10.0.0.1".into(),
            port: 7000,
            rdma_port: 7100,
            hostname: "a.example".into(),
            shard_id: id('5'),
            repl_offset: 99,
            cport: 17000,
            incarnation: 0x1234_5678_9abc,
            repl_id: id('e'),
            fenced: true,
        }),
        state_ok: true,
    }
}

fn ping(sender: &str) -> BusMessage {
    BusMessage {
        header: Some(header(sender)),
        body: Some(Body::Ping(Gossip {
            entries: vec![GossipEntry {
                node_id: id('b'),
                ping_sent: 1,
                pong_received: 2,
                ip: "10.0.0.2".into(),
                port: 7001,
                cport: 17001,
                flags: 1 | 4,
                bus_addr: b"sim:2".to_vec(),
            }],
            stamp_ms: 1_700_000_000_123,
            echo_ms: 1_700_000_000_100,
            old_echo_age_ms: 250,
        })),
    }
}

#[test]
fn every_kind_round_trips_through_the_envelope() {
    let bodies = vec![
        ping(&id('a')).body.unwrap(),
        Body::Pong(Gossip::default()),
        Body::Meet(Gossip::default()),
        Body::Fail(Fail { node_id: id('c') }),
        Body::Update(Update {
            node_id: id('d'),
            config_epoch: 9,
            slots: vec![
                SlotRange { start: 1, end: 1 },
                SlotRange {
                    start: 3,
                    end: 16383,
                },
            ],
        }),
        Body::Publish(Publish {
            channel: b"news".to_vec(),
            message: b"hello".to_vec(),
        }),
        Body::PublishShard(Publish {
            channel: b"{s}x".to_vec(),
            message: vec![0; 3000],
        }),
        Body::Raft(Raft {
            data: vec![1, 2, 3],
            group: id('f'),
        }),
        Body::RaftPropose(RaftPropose {
            group: id('f'),
            seq: 9,
            command: vec![1, 4],
        }),
    ];
    for body in bodies {
        let msg = BusMessage {
            header: Some(header(&id('a'))),
            body: Some(body),
        };
        let sealed = seal(&msg, SECRET).unwrap();
        assert_eq!(open(&sealed, SECRET).unwrap(), msg);
    }
}

/// `NodeRecord` as it was before tags 9-11 (incarnation, repl_id, fenced).
#[derive(Clone, PartialEq, Eq, prost::Message)]
struct NodeRecordBefore9 {
    #[prost(bytes = "vec", tag = "1")]
    bus_addr: Vec<u8>,
    #[prost(string, tag = "2")]
    ip: String,
    #[prost(uint32, tag = "3")]
    port: u32,
    #[prost(uint64, tag = "7")]
    repl_offset: u64,
}

/// Goal: the fields added to `NodeRecord` keep the wire compatible both ways: an older
/// node's record decodes with them unset (0, empty, false), and a newer record decodes on an
/// older node, which skips them.
#[test]
fn node_record_fields_added_later_are_compatible_both_ways() {
    let old = NodeRecordBefore9 {
        bus_addr: b"sim:1".to_vec(),
        ip: "10.0.0.1".into(),
        port: 7000,
        repl_offset: 42,
    };
    let new = NodeRecord::decode(old.encode_to_vec().as_slice()).unwrap();
    assert_eq!(
        (new.incarnation, new.repl_id.as_str(), new.fenced),
        (0, "", false)
    );
    assert_eq!((new.port, new.repl_offset), (7000, 42));
    let full = header(&id('a')).record.unwrap();
    assert!(full.incarnation != 0 && full.fenced && !full.repl_id.is_empty());
    let seen_by_old = NodeRecordBefore9::decode(full.encode_to_vec().as_slice()).unwrap();
    assert_eq!(seen_by_old.repl_offset, full.repl_offset);
    assert_eq!(seen_by_old.bus_addr, full.bus_addr);
}

/// The envelope byte for byte: a FAIL from node "aaa…" naming "ccc…" with a bare header.
/// The MAC was computed independently (Python's `hmac` module over bytes 0..10 ++ body).
#[test]
fn envelope_bytes_fixture() {
    let msg = BusMessage {
        header: Some(Header {
            sender: id('a'),
            current_epoch: 1,
            ..Header::default()
        }),
        body: Some(Body::Fail(Fail { node_id: id('c') })),
    };
    let sealed = seal(&msg, b"k").unwrap();
    // header: field 1 (len 44) { sender: field 1 (len 40) "a"*40, current_epoch: field 2 = 1 }
    let mut body = vec![0x0a, 44, 0x0a, 40];
    body.extend_from_slice(&[b'a'; 40]);
    body.extend_from_slice(&[0x10, 1]);
    // fail: field 5 (len 42) { node_id: field 1 (len 40) "c"*40 }
    body.extend_from_slice(&[0x2a, 42, 0x0a, 40]);
    body.extend_from_slice(&[b'c'; 40]);
    let mut expected = b"RCbp\x00\x01".to_vec();
    expected.extend_from_slice(&(body.len() as u32).to_be_bytes());
    expected.extend_from_slice(&hex(FIXTURE_MAC));
    expected.extend_from_slice(&body);
    assert_eq!(sealed, expected);
    assert_eq!(open(&expected, b"k").unwrap(), msg);
}

const FIXTURE_MAC: &str = "1a92c4e4adfc9889b8690adfa4cb1ea3865f48b45ba2ce8859c262b056b01364";

fn hex(s: &str) -> Vec<u8> {
    (0..s.len() / 2)
        .map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).unwrap())
        .collect()
}

#[test]
fn rejections_are_typed() {
    let good = seal(&ping(&id('a')), SECRET).unwrap();
    assert!(matches!(
        open(&good[..10], SECRET),
        Err(WireError::Truncated { .. })
    ));
    assert!(matches!(
        open(&good[..good.len() - 1], SECRET),
        Err(WireError::Truncated { .. })
    ));
    let mut longer = good.clone();
    longer.push(0);
    assert!(matches!(
        open(&longer, SECRET),
        Err(WireError::LengthMismatch { .. })
    ));
    let mut bad = good.clone();
    bad[0] = b'X';
    assert_eq!(open(&bad, SECRET), Err(WireError::BadMagic));
    let mut bad = good.clone();
    bad[5] = 2;
    assert_eq!(open(&bad, SECRET), Err(WireError::BadVersion(2)));
    let mut bad = good.clone();
    bad[6..10].copy_from_slice(&u32::MAX.to_be_bytes());
    assert!(matches!(
        open(&bad, SECRET),
        Err(WireError::Oversized { .. })
    ));
    let huge = vec![0u8; ENVELOPE_MAX + 1];
    assert!(matches!(
        open(&huge, SECRET),
        Err(WireError::Oversized { .. })
    ));
    assert_eq!(open(&good, b"other secret"), Err(WireError::BadMac));
    for at in [ENVELOPE_HEADER_LEN, good.len() - 1, 12] {
        let mut bad = good.clone();
        bad[at] ^= 0x40;
        assert_eq!(open(&bad, SECRET), Err(WireError::BadMac), "flip at {at}");
    }
    assert_eq!(&good[..4], &MAGIC);
}

/// A validly MACed body that is not protobuf, or breaks a limit, is refused after the MAC.
#[test]
fn bad_bodies_are_refused_after_the_mac() {
    let reseal = |body: &[u8]| {
        use hmac::{Hmac, Mac};
        let mut out = b"RCbp\x00\x01".to_vec();
        out.extend_from_slice(&(body.len() as u32).to_be_bytes());
        let mut mac = <Hmac<sha2::Sha256> as Mac>::new_from_slice(SECRET).unwrap();
        mac.update(&out);
        mac.update(body);
        out.extend_from_slice(&mac.finalize().into_bytes());
        out.extend_from_slice(body);
        out
    };
    assert!(matches!(
        open(&reseal(&[0x0a, 0xff]), SECRET),
        Err(WireError::Decode(_))
    ));
    let cases: Vec<(&str, BusMessage)> = vec![
        (
            "no header",
            BusMessage {
                header: None,
                ..ping(&id('a'))
            },
        ),
        (
            "no body",
            BusMessage {
                body: None,
                ..ping(&id('a'))
            },
        ),
        ("short sender", ping("abc")),
        ("non-hex sender", ping(&id('g'))),
        ("slot beyond 16383", {
            let mut m = ping(&id('a'));
            m.header.as_mut().unwrap().slots = vec![SlotRange {
                start: 0,
                end: 16384,
            }];
            m
        }),
        ("reversed range", {
            let mut m = ping(&id('a'));
            m.header.as_mut().unwrap().slots = vec![SlotRange { start: 9, end: 8 }];
            m
        }),
        ("too many ranges", {
            let mut m = ping(&id('a'));
            m.header.as_mut().unwrap().slots =
                vec![SlotRange { start: 1, end: 1 }; SLOT_RANGES_MAX + 1];
            m
        }),
        ("long hostname", {
            let mut m = ping(&id('a'));
            m.header.as_mut().unwrap().record.as_mut().unwrap().hostname =
                "h".repeat(HOSTNAME_MAX + 1);
            m
        }),
        ("port beyond u16", {
            let mut m = ping(&id('a'));
            m.header.as_mut().unwrap().record.as_mut().unwrap().port = 70000;
            m
        }),
        ("replication id not 40 hex", {
            let mut m = ping(&id('a'));
            m.header.as_mut().unwrap().record.as_mut().unwrap().repl_id = "x".repeat(40);
            m
        }),
        ("too many gossip entries", {
            let mut m = ping(&id('a'));
            let Some(Body::Ping(g)) = m.body.as_mut() else {
                unreachable!()
            };
            let e = g.entries[0].clone();
            g.entries = vec![e; GOSSIP_ENTRIES_MAX + 1];
            m
        }),
        ("long gossip bus address", {
            let mut m = ping(&id('a'));
            let Some(Body::Ping(g)) = m.body.as_mut() else {
                unreachable!()
            };
            g.entries[0].bus_addr = vec![b'x'; BUS_ADDR_MAX + 1];
            m
        }),
        (
            "bad fail id",
            BusMessage {
                body: Some(Body::Fail(Fail {
                    node_id: "x".into(),
                })),
                ..ping(&id('a'))
            },
        ),
    ];
    for (what, msg) in cases {
        let body = msg.encode_to_vec();
        assert!(
            matches!(open(&reseal(&body), SECRET), Err(WireError::Invalid(_))),
            "{what}"
        );
        assert!(seal(&msg, SECRET).is_err(), "seal refuses {what}");
    }
}

#[test]
fn fragments_survive_loss_duplication_and_reordering() {
    let msg: Vec<u8> = (0..5000u32).map(|i| (i * 7) as u8).collect();
    let frags = fragment(&msg, 1000).unwrap();
    assert_eq!(frags.len(), 5000usize.div_ceil(1000 - FRAGMENT_HEADER_LEN));
    assert!(frags.iter().all(|f| f.len() <= 1000));

    // Reordered and duplicated: exactly one delivery.
    let mut r = Reassembler::new(ReassemblyLimits::default());
    let mut order: Vec<usize> = (0..frags.len()).rev().collect();
    order.insert(2, 0);
    order.push(3);
    let mut delivered = Vec::new();
    for i in order {
        if let Some(m) = r.push(&"a", &frags[i], 0).unwrap() {
            delivered.push(m);
        }
    }
    assert_eq!(delivered, vec![msg.clone()]);
    assert_eq!((r.in_flight(), r.bytes()), (0, 0));

    // One lost: nothing delivered; the partial ages out.
    let mut r = Reassembler::new(ReassemblyLimits::default());
    for f in frags.iter().skip(1) {
        assert_eq!(r.push(&"a", f, 0).unwrap(), None);
    }
    assert_eq!(r.in_flight(), 1);
    r.expire(ReassemblyLimits::default().age_max_ms + 1);
    assert_eq!((r.in_flight(), r.bytes()), (0, 0));

    // The same message id from two senders is two partials.
    let mut r = Reassembler::new(ReassemblyLimits::default());
    r.push(&"a", &frags[0], 0).unwrap();
    r.push(&"b", &frags[1], 0).unwrap();
    assert_eq!(r.in_flight(), 2);
}

#[test]
fn small_messages_are_one_fragment_and_empty_ones_work() {
    for msg in [&b""[..], b"x", &[9u8; 982]] {
        let frags = fragment(msg, 1000).unwrap();
        assert_eq!(frags.len(), 1);
        let mut r = Reassembler::new(ReassemblyLimits::default());
        assert_eq!(r.push(&1, &frags[0], 0).unwrap().as_deref(), Some(msg));
    }
}

#[test]
fn fragment_rejections() {
    assert!(matches!(
        fragment(b"abc", FRAGMENT_HEADER_LEN),
        Err(FragmentError::MtuTooSmall { .. })
    ));
    assert!(matches!(
        fragment(&vec![0; ENVELOPE_MAX + 1], 9000),
        Err(FragmentError::Oversized { .. })
    ));
    assert!(matches!(
        fragment(&vec![0; FRAGMENTS_MAX + 1], FRAGMENT_HEADER_LEN + 1),
        Err(FragmentError::TooManyFragments { .. })
    ));
    let mut r = Reassembler::new(ReassemblyLimits::default());
    assert_eq!(r.push(&0, b"Rf", 0), Err(FragmentError::Truncated(2)));
    let good = fragment(&[1u8; 3000], 1000).unwrap();
    let mut bad = good[0].clone();
    bad[0] = b'X';
    assert_eq!(r.push(&0, &bad, 0), Err(FragmentError::BadMagic));
    let mut bad = good[0].clone();
    bad[10..12].copy_from_slice(&9u16.to_be_bytes());
    assert!(matches!(
        r.push(&0, &bad, 0),
        Err(FragmentError::Inconsistent(_))
    ));
    let mut bad = good[0].clone();
    bad[12..14].copy_from_slice(&0u16.to_be_bytes());
    assert!(matches!(
        r.push(&0, &bad, 0),
        Err(FragmentError::Inconsistent(_))
    ));
    let mut bad = good[0].clone();
    bad[14..18].copy_from_slice(&u32::MAX.to_be_bytes());
    assert!(matches!(
        r.push(&0, &bad, 0),
        Err(FragmentError::Oversized { .. })
    ));
    // A fragment disagreeing with its siblings on the count.
    r.push(&0, &good[0], 0).unwrap();
    let mut bad = good[1].clone();
    bad[12..14].copy_from_slice(&5u16.to_be_bytes());
    assert!(matches!(
        r.push(&0, &bad, 0),
        Err(FragmentError::Inconsistent(_))
    ));
    // Fragments whose sizes do not add up to the declared length.
    let mut r = Reassembler::new(ReassemblyLimits::default());
    let mut short = good.clone();
    let last = short.len() - 1;
    short[last].truncate(FRAGMENT_HEADER_LEN + 1);
    for f in &short[..last] {
        assert_eq!(r.push(&0, f, 0).unwrap(), None);
    }
    assert!(r.push(&0, &short[last], 0).is_err());
    assert_eq!((r.in_flight(), r.bytes()), (0, 0));
    assert_eq!(message_id(b"a"), message_id(b"a"));
    assert_ne!(message_id(b"a"), message_id(b"b"));
}

#[test]
fn reassembler_stays_within_its_limits() {
    let limits = ReassemblyLimits {
        per_sender_max: 2,
        partials_max: 3,
        bytes_max: 3500,
        age_max_ms: 100,
    };
    let mut r = Reassembler::new(limits);
    // Many senders, each starting several messages and never finishing one.
    for sender in 0..5u32 {
        for m in 0..4u32 {
            let msg = vec![(sender * 4 + m) as u8; 3000];
            let frags = fragment(&msg, 1000).unwrap();
            assert_eq!(r.push(&sender, &frags[0], 0).unwrap(), None);
            assert!(r.in_flight() <= limits.partials_max);
            assert!(r.bytes() <= limits.bytes_max);
        }
    }
    // The newest message still completes.
    let msg = vec![77u8; 3000];
    let mut out = None;
    for f in fragment(&msg, 1000).unwrap() {
        out = r.push(&9, &f, 1).unwrap();
    }
    assert_eq!(out, Some(msg));
}

fn any_id() -> impl Strategy<Value = String> {
    "[0-9a-f]{40}"
}

fn any_ranges() -> impl Strategy<Value = Vec<SlotRange>> {
    prop::collection::vec((0u32..=SLOT_MAX, 0u32..=SLOT_MAX), 0..20).prop_map(|v| {
        v.into_iter()
            .map(|(a, b)| SlotRange {
                start: a.min(b),
                end: a.max(b),
            })
            .collect()
    })
}

fn any_header() -> impl Strategy<Value = Header> {
    (
        any_id(),
        any::<[u64; 3]>(),
        0u32..1024,
        prop::option::of(any_id()),
        any_ranges(),
        prop::option::of((
            "[a-z:0-9=,.]{0,60}",
            "[0-9.]{0,15}",
            any::<[u16; 3]>(),
            "[a-z.]{0,30}",
            any::<u64>(),
        )),
        any::<bool>(),
    )
        .prop_map(
            |(sender, e, flags, primary, slots, record, state_ok)| Header {
                sender,
                current_epoch: e[0],
                config_epoch: e[1],
                topology_version: e[2],
                flags,
                primary: primary.unwrap_or_default(),
                slots,
                record: record.map(|(bus, ip, ports, hostname, off)| NodeRecord {
                    bus_addr: bus.into_bytes(),
                    ip,
                    port: ports[0] as u32,
                    rdma_port: ports[1] as u32,
                    hostname,
                    shard_id: String::new(),
                    repl_offset: off,
                    cport: ports[2] as u32,
                    incarnation: off.rotate_left(7),
                    repl_id: String::new(),
                    fenced: off % 2 == 1,
                }),
                state_ok,
            },
        )
}

fn any_gossip() -> impl Strategy<Value = Gossip> {
    prop::collection::vec(
        (
            any_id(),
            any::<[u64; 2]>(),
            "[0-9.]{0,15}",
            any::<[u16; 3]>(),
            "[a-z:0-9]{0,20}",
        ),
        0..12,
    )
    .prop_flat_map(|v| (Just(v), any::<[u64; 3]>()))
    .prop_map(|(v, [stamp_ms, echo_ms, old_echo_age_ms])| Gossip {
        entries: v
            .into_iter()
            .map(|(node_id, t, ip, p, bus)| GossipEntry {
                node_id,
                ping_sent: t[0],
                pong_received: t[1],
                ip,
                port: p[0] as u32,
                cport: p[1] as u32,
                flags: p[2] as u32,
                bus_addr: bus.into_bytes(),
            })
            .collect(),
        stamp_ms,
        echo_ms,
        old_echo_age_ms,
    })
}

fn any_body() -> impl Strategy<Value = Body> {
    prop_oneof![
        any_gossip().prop_map(Body::Ping),
        any_gossip().prop_map(Body::Pong),
        any_gossip().prop_map(Body::Meet),
        any_id().prop_map(|node_id| Body::Fail(Fail { node_id })),
        (any_id(), any::<u64>(), any_ranges()).prop_map(|(node_id, config_epoch, slots)| {
            Body::Update(Update {
                node_id,
                config_epoch,
                slots,
            })
        }),
        (any::<Vec<u8>>(), any::<Vec<u8>>())
            .prop_map(|(channel, message)| Body::Publish(Publish { channel, message })),
        (any::<Vec<u8>>(), any::<Vec<u8>>())
            .prop_map(|(channel, message)| Body::PublishShard(Publish { channel, message })),
        (any::<Vec<u8>>(), any_id()).prop_map(|(data, group)| Body::Raft(Raft { data, group })),
        (any_id(), any::<u64>(), any::<Vec<u8>>()).prop_map(|(group, seq, command)| {
            Body::RaftPropose(RaftPropose {
                group,
                seq,
                command,
            })
        }),
    ]
}

proptest! {
    #[test]
    fn messages_round_trip(header in any_header(), body in any_body()) {
        let msg = BusMessage { header: Some(header), body: Some(body) };
        let sealed = seal(&msg, SECRET).unwrap();
        prop_assert_eq!(open(&sealed, SECRET).unwrap(), msg);
    }

    #[test]
    fn fragments_reassemble_in_any_order(
        len in 0usize..6000,
        mtu in (FRAGMENT_HEADER_LEN + 2)..1500,
        seed in any::<u64>(),
    ) {
        let msg: Vec<u8> = (0..len).map(|i| (i as u64).wrapping_mul(seed | 1) as u8).collect();
        let mut frags = fragment(&msg, mtu).unwrap();
        // A seeded shuffle, with one fragment sent twice.
        let mut s = seed;
        for i in (1..frags.len()).rev() {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            frags.swap(i, (s >> 33) as usize % (i + 1));
        }
        let dup = frags[(s as usize) % frags.len()].clone();
        frags.insert(frags.len() / 2, dup);
        let mut r = Reassembler::new(ReassemblyLimits::default());
        let mut got = Vec::new();
        for f in &frags {
            if let Some(m) = r.push(&0u8, f, 0).unwrap() {
                got.push(m);
            }
        }
        // A one-fragment message is delivered once per copy.
        prop_assert!(!got.is_empty());
        prop_assert!(got.iter().all(|m| *m == msg));
    }

    #[test]
    fn opening_garbage_never_panics(data in prop::collection::vec(any::<u8>(), 0..300)) {
        fuzz_checks::bus_envelope(&data);
        let mut sealed = seal(&ping(&id('a')), SECRET).unwrap();
        let n = sealed.len();
        for (i, b) in data.iter().enumerate() {
            sealed[i % n] ^= b;
        }
        let _ = open(&sealed, SECRET);
    }
}

/// The fuzz seeds (written by hand, byte by byte) are valid messages, so the fuzzer starts
/// past the MAC and the decoder.
#[test]
fn fuzz_seeds_open() {
    use super::fuzz_checks::FUZZ_SECRET;
    let sealed: [&[u8]; 3] = [
        include_bytes!("../../../fuzz/seeds/bus_envelope/sealed_fail"),
        include_bytes!("../../../fuzz/seeds/bus_envelope/sealed_ping"),
        include_bytes!("../../../fuzz/seeds/bus_envelope/sealed_update"),
    ];
    let bodies: [&[u8]; 3] = [
        include_bytes!("../../../fuzz/seeds/bus_envelope/body_fail"),
        include_bytes!("../../../fuzz/seeds/bus_envelope/body_ping"),
        include_bytes!("../../../fuzz/seeds/bus_envelope/body_update"),
    ];
    for (s, b) in sealed.iter().zip(bodies) {
        let msg = open(s, FUZZ_SECRET).unwrap();
        assert_eq!(msg.encode_to_vec(), b);
        assert_eq!(seal(&msg, FUZZ_SECRET).unwrap(), *s);
    }
}

#[test]
fn datagrams_carry_a_message_and_refuse_a_wrong_secret() {
    let msg = ping(&id('a'));
    let mut r = Reassembler::new(ReassemblyLimits::default());
    let mut got = None;
    for d in to_datagrams(&msg, SECRET, 100, 1).unwrap() {
        assert!(d.len() <= 100);
        got = from_datagram(&mut r, &1, &d, SECRET, 0).unwrap();
    }
    assert_eq!(got, Some(msg.clone()));
    let mut r = Reassembler::new(ReassemblyLimits::default());
    let mut last = Ok(None);
    for d in to_datagrams(&msg, b"other", 100, 2).unwrap() {
        last = from_datagram(&mut r, &1, &d, SECRET, 0);
    }
    assert_eq!(last, Err(DatagramError::Wire(WireError::BadMac)));
    assert!(matches!(
        to_datagrams(&msg, SECRET, 5, 3),
        Err(DatagramError::Fragment(FragmentError::MtuTooSmall { .. }))
    ));
}

/// The same bytes sent twice (Raft resends an unanswered append exactly) are two messages
/// and both arrive; the network's duplicate of one send is still delivered only once.
#[test]
fn a_message_sent_again_is_delivered_again() {
    let msg = vec![5u8; 2500];
    let mut r = Reassembler::new(ReassemblyLimits::default());
    let deliver = |r: &mut Reassembler<u32>, frags: &[Vec<u8>]| {
        let mut out = None;
        for f in frags {
            if let Some(m) = r.push(&1, f, 0).unwrap() {
                out = Some(m);
            }
        }
        out
    };
    let first = fragment_as(&msg, 1000, 1).unwrap();
    assert_eq!(deliver(&mut r, &first), Some(msg.clone()));
    assert_eq!(deliver(&mut r, &first), None, "a duplicate of send 1");
    let again = fragment_as(&msg, 1000, 2).unwrap();
    assert_eq!(deliver(&mut r, &again), Some(msg));
}
