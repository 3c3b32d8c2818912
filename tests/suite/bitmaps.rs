//! Bitmaps (SETBIT GETBIT BITCOUNT BITPOS BITOP BITFIELD BITFIELD_RO). Method: real node
//! processes driven over RESP; exact answers are checked by running the same commands against
//! redis-server 7.0.15 and comparing the frames, the rest against values worked out by hand.

use crate::reply_compare::{assert_same_replies, script};
use integration::{cmd, Node};
use redis::Value;

#[test]
fn bitmap_replies_match_redis_server() {
    let node = Node::start(&[]);
    let commands = script(&[
        "SETBIT b 7 1",
        "SETBIT b 7 1",
        "SETBIT b 100 1",
        "GETBIT b 7",
        "GETBIT b 6",
        "GETBIT b 100000",
        "GETBIT nokey 3",
        "STRLEN b",
        "SET s foobar",
        "BITCOUNT s",
        "BITCOUNT s 1 1",
        "BITCOUNT s 1 1 BYTE",
        "BITCOUNT s 5 30 BIT",
        "BITCOUNT s -5 -1 BIT",
        "BITCOUNT s -1 -5",
        "BITCOUNT s 0",
        "BITCOUNT s 0 1 WORD",
        "BITCOUNT nokey 0 1 WORD",
        "BITCOUNT s x 1",
        "SET z \u{ff}\u{f0}\u{00}",
        "BITPOS z 0",
        "BITPOS z 1 2 -1 BYTE",
        "BITPOS z 1 7 15 BIT",
        "BITPOS z 0 0 0",
        "BITPOS z 0 8 -1 BIT",
        "BITPOS z 2",
        "BITPOS nokey 0",
        "BITPOS nokey 1",
        "SET empty \"\"",
        "BITOP AND dest s b",
        "GET dest",
        "BITOP OR dest s b nokey",
        "BITOP XOR dest s b",
        "BITOP NOT dest s",
        "GET dest",
        "BITOP NOT dest s b",
        "BITOP NAND dest s",
        "BITOP AND dest nokey nokey2",
        "EXISTS dest",
        "SET n 12345",
        "BITCOUNT n",
        "GETBIT n 2",
        "BITOP AND dest n s",
        "GET dest",
        "BITFIELD bf SET i8 0 100 GET u4 0 INCRBY i8 0 100",
        "BITFIELD bf OVERFLOW SAT INCRBY i8 0 100 OVERFLOW FAIL INCRBY i8 0 1",
        "BITFIELD bf SET u8 #1 255 OVERFLOW WRAP INCRBY u8 #1 10 GET u16 0",
        "BITFIELD bf SET i64 64 -1 INCRBY i64 64 -9223372036854775807 INCRBY i64 64 -2",
        "BITFIELD bf SET u63 128 9223372036854775807 INCRBY u63 128 1",
        "BITFIELD bf OVERFLOW FAIL SET u2 200 5 GET u2 200",
        "BITFIELD bf SET i5 3 -16 GET i5 3 GET u5 3",
        "GET bf",
        "BITFIELD bf",
        "BITFIELD bf GET u64 0",
        "BITFIELD bf GET i65 0",
        "BITFIELD bf GET x8 0",
        "BITFIELD bf OVERFLOW MAYBE GET i8 0",
        "BITFIELD bf SET i8 0",
        "BITFIELD bf GET i8 -1",
        "BITFIELD bf INCRBY i8 0 notanumber",
        "BITFIELD bf FOO",
        "BITFIELD_RO bf GET i8 0 GET u8 #3",
        "BITFIELD_RO bf SET i8 0 1",
        "BITFIELD_RO nokey GET i8 0",
        "LPUSH list a",
        "SETBIT list 1 1",
        "GETBIT list 1",
        "BITCOUNT list",
        "BITPOS list 1",
        "BITOP AND dest list",
        "BITFIELD list GET i8 0",
        "BITFIELD_RO list GET i8 0",
        "SETBIT b -1 1",
        "SETBIT b 4294967296 1",
        "SETBIT b 1 2",
        "SETBIT b 1 -1",
        "SETBIT b x 1",
        "GETBIT b 4294967296",
        "BITFIELD b SET u8 4294967296 1",
        "BITFIELD b SET u8 #536870912 1",
        "BITFIELD b GET u8 #9223372036854775807",
    ]);
    assert_same_replies("bitmap_replies_match_redis_server", &node, &commands);
}

#[test]
fn bitmaps_are_strings_for_every_string_command() {
    let node = Node::start(&[]);
    let mut c = node.client();
    // "A" is 0x41: bits 1 and 7 set.
    cmd(&mut c, &["SET", "k", "A"]).unwrap();
    assert_eq!(cmd(&mut c, &["GETBIT", "k", "1"]).unwrap(), Value::Int(1));
    assert_eq!(
        cmd(&mut c, &["SETBIT", "k", "6", "1"]).unwrap(),
        Value::Int(0)
    );
    assert_eq!(
        cmd(&mut c, &["GET", "k"]).unwrap(),
        Value::BulkString(b"C".to_vec())
    );
    cmd(&mut c, &["APPEND", "k", "\u{1}"]).unwrap();
    assert_eq!(cmd(&mut c, &["BITCOUNT", "k"]).unwrap(), Value::Int(4));
    assert_eq!(
        cmd(&mut c, &["BITPOS", "k", "1", "1"]).unwrap(),
        Value::Int(15)
    );
    // "0" is 0x30: bits 2 and 3 of its byte.
    cmd(&mut c, &["SETRANGE", "k", "3", "0"]).unwrap();
    assert_eq!(cmd(&mut c, &["GETBIT", "k", "26"]).unwrap(), Value::Int(1));
    assert_eq!(
        cmd(&mut c, &["GET", "k"]).unwrap(),
        Value::BulkString(b"C\x01\x000".to_vec())
    );
    // An integer value is read as its digits and becomes a plain string when bits change.
    cmd(&mut c, &["SET", "n", "1"]).unwrap();
    assert_eq!(
        cmd(&mut c, &["SETBIT", "n", "7", "0"]).unwrap(),
        Value::Int(1)
    );
    assert_eq!(
        cmd(&mut c, &["GET", "n"]).unwrap(),
        Value::BulkString(b"0".to_vec())
    );
    assert_eq!(cmd(&mut c, &["INCR", "n"]).unwrap(), Value::Int(1));
    // SETBIT keeps the TTL, as SETRANGE does; BITOP's destination is replaced like SET.
    cmd(&mut c, &["SET", "t", "x", "EX", "100"]).unwrap();
    cmd(&mut c, &["SETBIT", "t", "100", "1"]).unwrap();
    assert!(matches!(cmd(&mut c, &["TTL", "t"]).unwrap(), Value::Int(t) if t > 90));
    cmd(&mut c, &["BITOP", "NOT", "t", "k"]).unwrap();
    assert_eq!(cmd(&mut c, &["TTL", "t"]).unwrap(), Value::Int(-1));
    assert_eq!(
        cmd(&mut c, &["GET", "t"]).unwrap(),
        Value::BulkString(b"\xbc\xfe\xff\xcf".to_vec())
    );
}

#[test]
fn offsets_are_bounded_by_proto_max_bulk_len() {
    let node = Node::start(&[]);
    let bad = "ERR bit offset is not an integer or out of range";
    // 512 MB of bytes is the default bound: the last bit of the 512 MB is not allowed.
    assert_eq!(node.cli(&["SETBIT", "b", "4294967296", "1"]), bad);
    assert_eq!(
        node.cli(&["CONFIG", "SET", "proto-max-bulk-len", "1mb"]),
        "OK"
    );
    assert_eq!(node.cli(&["SETBIT", "b", "8388608", "1"]), bad);
    assert_eq!(
        node.cli(&["BITFIELD", "b", "SET", "u8", "#1048576", "1"]),
        bad
    );
    assert_eq!(node.cli(&["SETBIT", "b", "8388607", "1"]), "0");
    assert_eq!(node.cli(&["STRLEN", "b"]), "1048576");
    assert_eq!(node.cli(&["BITCOUNT", "b"]), "1");
    assert_eq!(node.cli(&["BITPOS", "b", "1"]), "8388607");
    // A field that ends past the last allowed byte still fits: only its start is bounded,
    // as in Redis.
    assert_eq!(
        node.cli(&["BITFIELD", "b", "SET", "u8", "8388600", "255"]),
        "1"
    );
    assert_eq!(node.cli(&["PING"]), "PONG");
}

#[test]
fn bitop_keys_must_share_a_slot_in_cluster_mode() {
    let node = Node::start(&["--cluster-enabled", "yes"]);
    assert_eq!(node.cli(&["CLUSTER", "ADDSLOTSRANGE", "0", "16383"]), "OK");
    assert_eq!(
        node.cli(&["BITOP", "AND", "dest", "a", "b"]),
        "CROSSSLOT Keys in request don't hash to the same slot"
    );
    assert_eq!(node.cli(&["SETBIT", "{t}a", "3", "1"]), "0");
    assert_eq!(node.cli(&["BITOP", "OR", "{t}dest", "{t}a", "{t}b"]), "1");
    assert_eq!(node.cli(&["GETBIT", "{t}dest", "3"]), "1");
}
