//! RESTORE of payloads redis-server 7.0.15 DUMPed (captured from Debian's build), one per
//! type and encoding, checked value by value; and hostile payloads, which must end in an
//! error, never a panic.

use crate::db::packing::Packing;
use crate::db::stream::StreamId;
use crate::db::Value;
use crate::snapshot_format::dump::{self, PayloadError};
use proptest::prelude::*;

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// `redis-cli DUMP key` of the values `fixture` names, from redis-server 7.0.15.
const FIXTURES: &[(&str, &str)] = &[
    ("h_ht", "040201660176016ec07b0a005e021ca330da7cc7"),
    ("h_lp", "101c1c0000000600816602817602816e027b01836e656704f290eefe04ff0a00ab0df77a310e4120"),
    ("l_lp", "120102c3406d5400140014000008008161027f01dc1802f270110104f4ff8000037f09f4008000048009e04678e03c000648f08813000079e0ff00e0ff00e0ff00e0ff00e0ff00e0ff00e0ff00e0ff00e0ff00e0ff00e0ff00e0ff00e0ff00e0ff00e0ff00e0ff00e0ff00e0ff00e0ee0002278dff0a0066ab17f9a684bc21"),
    ("l_plain", "1203020e0e000000010085736d616c6c06ff01147a7a7a7a7a7a7a7a7a7a7a7a7a7a7a7a7a7a7a7a02090900000001000101ff0a00756a42dcc99446d1"),
    ("s_bigint", "0013393232333337323033363835343737353830370a003a657e9481e85f22"),
    ("s_empty", "00000a005d9b5c400f7fa2da"),
    ("s_int", "00c139300a009d94ea2793fc08b9"),
    ("s_lzf", "00c3094064016161e057000161610a00e8a3b507b06df271"),
    ("s_raw", "000568656c6c6f0a006372df766534200a"),
    ("set_ht", "0203c001016101620a00cfda4c60572a4c33"),
    ("set_int", "0bc32028040800000004200301fbff80000001200b4000017011a00902f2052a200900000a0092628c140d00ba67"),
    ("st", "130110000000000000000100000000000000014052520000001f000301010102018166028167020001020100010001817602010105010301000101018177020201050100010401dfff020101856f7468657206817802060102010501dfff02817a0203010501ff030600010101020402026731050081ffffffffffffffff0200000000000000010000000000000001e1035f45a20100000100000000000000050000000000000000e1035f45a20100000101026331e1035f45a2010000020000000000000001000000000000000100000000000000050000000000000000026732060081ffffffffffffffff00000a00aa19bc9520019391"),
    ("z_lp", "11c3333d1e3d0000000a00816202dffe020701000181610283312e350481630297322e39e006000e652b3130301881640283696e6604ff0a00a88b9bc92df05feb"),
    ("z_sk", "05030161000000000000f83f016200000000000000c00163000000000000f0ff0a000ed0718a3c539c31"),
];

fn fixture(name: &str) -> Value {
    let (_, h) = FIXTURES.iter().find(|(n, _)| *n == name).unwrap();
    dump::value(&hex(h), Packing::DEFAULT).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn strings(items: impl Iterator<Item = Vec<u8>>) -> Vec<String> {
    items.map(|b| String::from_utf8(b).unwrap()).collect()
}

#[test]
fn strings_of_every_encoding() {
    assert!(matches!(fixture("s_raw"), Value::Str(s) if &*s == b"hello"));
    assert!(matches!(fixture("s_int"), Value::Int(12345)));
    assert!(matches!(fixture("s_bigint"), Value::Int(i64::MAX)));
    assert!(matches!(fixture("s_empty"), Value::Str(s) if s.is_empty()));
    assert!(matches!(fixture("s_lzf"), Value::Str(s) if &*s == [b'a'; 100].as_slice()));
}

#[test]
fn lists_of_listpack_and_plain_nodes() {
    let Value::List(l) = fixture("l_lp") else {
        panic!("not a list")
    };
    let got = strings(l.iter().map(|e| e.to_vec()));
    let mut want: Vec<String> = [
        "a",
        "127",
        "-1000",
        "70000",
        "9223372036854775807",
        "-9223372036854775808",
    ]
    .map(String::from)
    .to_vec();
    want.push("x".repeat(70));
    want.push("y".repeat(5000));
    assert_eq!(got, want);
    let Value::List(l) = fixture("l_plain") else {
        panic!("not a list")
    };
    let got = strings(l.iter().map(|e| e.to_vec()));
    assert_eq!(got, ["small".to_string(), "z".repeat(20), "1".to_string()]);
}

#[test]
fn sets_of_intset_and_hashtable() {
    let Value::Set(s) = fixture("set_int") else {
        panic!("not a set")
    };
    let mut got = strings(s.iter().map(|e| e.to_vec()));
    got.sort();
    assert_eq!(got, ["-5", "1", "5000000000", "70000"]);
    let Value::Set(s) = fixture("set_ht") else {
        panic!("not a set")
    };
    let mut got = strings(s.iter().map(|e| e.to_vec()));
    got.sort();
    assert_eq!(got, ["1", "a", "b"]);
}

#[test]
fn sorted_sets_of_listpack_and_skiplist() {
    let Value::ZSet(z) = fixture("z_lp") else {
        panic!("not a zset")
    };
    let got: Vec<(Vec<u8>, f64)> = z.iter().map(|(m, s)| (m.to_vec(), s)).collect();
    assert_eq!(
        got,
        [
            (b"b".to_vec(), -2.0),
            (b"7".to_vec(), 0.0),
            (b"a".to_vec(), 1.5),
            (b"c".to_vec(), 3e100),
            (b"d".to_vec(), f64::INFINITY)
        ]
    );
    let Value::ZSet(z) = fixture("z_sk") else {
        panic!("not a zset")
    };
    let got: Vec<(Vec<u8>, f64)> = z.iter().map(|(m, s)| (m.to_vec(), s)).collect();
    assert_eq!(
        got,
        [
            (b"c".to_vec(), f64::NEG_INFINITY),
            (b"b".to_vec(), -2.0),
            (b"a".to_vec(), 1.5)
        ]
    );
}

#[test]
fn hashes_of_listpack_and_hashtable() {
    for (name, want) in [
        ("h_lp", vec![("f", "v"), ("n", "123"), ("neg", "-70000")]),
        ("h_ht", vec![("f", "v"), ("n", "123")]),
    ] {
        let Value::Hash(h) = fixture(name) else {
            panic!("not a hash")
        };
        let mut got: Vec<(String, String)> = h
            .iter()
            .map(|(f, v)| {
                (
                    String::from_utf8(f.to_vec()).unwrap(),
                    String::from_utf8(v.to_vec()).unwrap(),
                )
            })
            .collect();
        got.sort();
        let want: Vec<(String, String)> = want
            .into_iter()
            .map(|(f, v)| (f.to_string(), v.to_string()))
            .collect();
        assert_eq!(got, want, "{name}");
    }
}

#[test]
fn a_stream_with_tombstones_groups_and_pending_entries() {
    // XADD 1-1 f v g 1; 1-2 f w g 2; 5-0 other x; 6-0 f z g 3; XDEL 1-2; group g1 at 0
    // read 2 by c1; group g2 at $.
    let Value::Stream(s) = fixture("st") else {
        panic!("not a stream")
    };
    let ids: Vec<StreamId> = s.entries().map(|(id, _)| id).collect();
    assert_eq!(
        ids,
        [
            StreamId::new(1, 1),
            StreamId::new(5, 0),
            StreamId::new(6, 0)
        ]
    );
    let (_, fields) = s.entries().nth(1).unwrap();
    let pairs: Vec<(Vec<u8>, Vec<u8>)> = fields
        .pairs()
        .map(|(f, v)| (f.to_vec(), v.to_vec()))
        .collect();
    assert_eq!(pairs, [(b"other".to_vec(), b"x".to_vec())]);
    assert_eq!(s.last_id, StreamId::new(6, 0));
    assert_eq!(s.max_deleted_id, StreamId::new(1, 2));
    assert_eq!(s.entries_added, 4);
    let g1 = &s.groups[&b"g1"[..]];
    assert_eq!(g1.last_id, StreamId::new(5, 0));
    assert_eq!(g1.entries_read, None);
    let pending: Vec<StreamId> = g1.pel.keys().copied().collect();
    assert_eq!(pending, [StreamId::new(1, 1), StreamId::new(5, 0)]);
    assert!(g1
        .pel
        .values()
        .all(|p| &*p.consumer == b"c1" && p.delivery_count == 1));
    let g2 = &s.groups[&b"g2"[..]];
    assert_eq!(g2.last_id, StreamId::new(6, 0));
    assert!(g2.pel.is_empty() && g2.consumers.is_empty());
}

#[test]
fn a_redis_5_stream_gets_its_counters_estimated() {
    // The payload of Redis's own test "Loading from legacy (Redis <= v6.2.x, rdb_ver < 10)
    // persistence" (stream-cgroups.tcl): STREAM_LISTPACKS, RDB version 9.
    let payload = hex(concat!(
        "0f011000000000000000010000000000000000c3404a405716570000002300020104010101846461",
        "746105000103010020010381610204200a0001400a0062600a0002400a0063600a4022018164200a",
        "4039200a0065600a0005400a0066200a00ff02060002026731050004000000000000000100000000",
        "000000003ef783437a01000001000000000000000200000000000000003ef783437a010000010000",
        "00000000000400000000000000003ef783437a01000001000000000000000500000000000000003e",
        "f783437a0100000101036331313ef783437a01000004000000000000000100000000000000000000",
        "00000000000200000000000000000000000000000004000000000000000000000000000000050000",
        "0000000000000267320000000009003d52ef6867521dfa"
    ));
    let Ok(Value::Stream(s)) = dump::value(&payload, Packing::DEFAULT) else {
        panic!(
            "not a stream: {:?}",
            dump::value(&payload, Packing::DEFAULT).err()
        )
    };
    assert_eq!(s.len(), 2);
    assert_eq!(s.entries_added, 2);
    assert_eq!(s.max_deleted_id, StreamId::ZERO);
    assert_eq!(s.groups[&b"g1"[..]].entries_read, Some(1));
    assert_eq!(s.groups[&b"g2"[..]].entries_read, Some(0));
}

#[test]
fn modules_and_unknown_types_are_bad_data() {
    for body in [
        vec![6u8, 1],
        vec![9, 0],
        vec![42, 0],
        vec![1, 0],
        vec![2, 0],
    ] {
        let p = with_trailer(body.clone());
        assert!(
            matches!(
                dump::value(&p, Packing::DEFAULT),
                Err(PayloadError::BadRdb(_))
            ),
            "{body:?}"
        );
    }
}

/// `body` with RDB version 10 and Redis's checksum, as anyone can build.
fn with_trailer(mut body: Vec<u8>) -> Vec<u8> {
    body.extend_from_slice(&10u16.to_le_bytes());
    let crc = super::crc64::crc64_jones(&body);
    body.extend_from_slice(&crc.to_le_bytes());
    body
}

proptest! {
    /// Real payloads of every encoding with one byte changed and the checksum made right
    /// again: an error or a value, never a panic.
    #[test]
    fn mutated_redis_payloads_never_panic(
        which in 0..FIXTURES.len(),
        at in any::<prop::sample::Index>(),
        byte in any::<u8>(),
    ) {
        let full = hex(FIXTURES[which].1);
        let mut body = full[..full.len() - 10].to_vec();
        let i = at.index(body.len());
        body[i] = byte;
        let _ = dump::value(&with_trailer(body), Packing::DEFAULT);
    }

    /// Random bodies behind a valid trailer.
    #[test]
    fn random_rdb_bodies_never_panic(kind in 0u8..24, rest in prop::collection::vec(any::<u8>(), 0..300)) {
        let mut body = vec![kind];
        body.extend(rest);
        match dump::value(&with_trailer(body), Packing::DEFAULT) {
            Ok(_) => {}
            Err(e) => prop_assert!(matches!(e, PayloadError::BadRdb(_)), "{e}"),
        }
    }

    /// Any cut of a real payload is refused.
    #[test]
    fn truncated_redis_payloads_are_refused(which in 0..FIXTURES.len(), at in any::<prop::sample::Index>()) {
        let full = hex(FIXTURES[which].1);
        let cut = at.index(full.len());
        prop_assert!(dump::value(&full[..cut], Packing::DEFAULT).is_err());
    }
}
