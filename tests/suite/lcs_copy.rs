//! LCS and COPY. Method: the same commands against a node and redis-server 7.0.15, replies
//! compared frame by frame in RESP2 and RESP3.

use crate::reply_compare::{assert_same_replies, script};
use integration::Node;

#[test]
fn lcs_replies_match_redis_server() {
    let node = Node::start(&[]);
    let commands = script(&[
        "MSET a ohmytext b mynewtext c rororo d ororor",
        "LCS a b",
        "LCS a b LEN",
        "LCS a b IDX",
        "LCS a b IDX MINMATCHLEN 4",
        "LCS a b IDX MINMATCHLEN 2 WITHMATCHLEN",
        "LCS c d IDX WITHMATCHLEN",
        "LCS c nokey",
        "LCS nokey nokey2 IDX",
        "LCS a b LEN IDX",
        "LCS a b MINMATCHLEN x",
        "LCS a b MINMATCHLEN -3 IDX",
        "LCS a b BOGUS",
        "SET n 1234512345",
        "SET m 54321",
        "LCS n m IDX WITHMATCHLEN",
        "LPUSH l x",
        "LCS a l",
    ]);
    assert_same_replies("lcs_replies_match_redis_server", &node, &commands);
}

#[test]
fn copy_replies_match_redis_server() {
    let node = Node::start(&[]);
    let commands = script(&[
        "SET s hello",
        "COPY s s2",
        "GET s2",
        "COPY s s2",
        "COPY s s2 REPLACE",
        "COPY nokey s3",
        "COPY s s",
        "COPY s s4 DB 0",
        "COPY s s4 DB 0 REPLACE",
        // Databases 1-15 exist on a standalone redis-server, not here (one database, as a
        // cluster node): DB 1 is checked in cluster mode below, against Redis's answer there.
        "COPY s s5 DB 16",
        "COPY s s5 DB -1",
        "COPY s s5 DB x",
        "COPY s s5 BOGUS",
        "RPUSH l a b c",
        "COPY l l2",
        "LRANGE l2 0 -1",
        "ZADD z 1 a 2 b",
        "COPY z z2",
        "ZRANGE z2 0 -1 WITHSCORES",
        "HSET h f v",
        "COPY h h2",
        "HGETALL h2",
        "SADD st m",
        "COPY st st2",
        "SMEMBERS st2",
        "SET t v EX 100",
        "COPY t t2",
        "TTL t2",
        "LPUSH l2 new",
        "LRANGE l 0 -1",
    ]);
    assert_same_replies("copy_replies_match_redis_server", &node, &commands);
}

#[test]
fn copy_needs_one_slot_in_cluster_mode() {
    let node = Node::start(&["--cluster-enabled", "yes"]);
    assert_eq!(node.cli(&["CLUSTER", "ADDSLOTSRANGE", "0", "16383"]), "OK");
    assert_eq!(node.cli(&["SET", "{k}a", "v"]), "OK");
    assert_eq!(
        node.cli(&["COPY", "{k}a", "b"]),
        "CROSSSLOT Keys in request don't hash to the same slot"
    );
    assert_eq!(node.cli(&["COPY", "{k}a", "{k}b"]), "1");
    // Redis 7.0 in cluster mode (selectDb refuses every database but 0).
    assert_eq!(
        node.cli(&["COPY", "{k}a", "{k}c", "DB", "1"]),
        "ERR DB index is out of range"
    );
    assert_eq!(node.cli(&["GET", "{k}b"]), "v");
    assert_eq!(
        node.cli(&["LCS", "{k}a", "x"]),
        "CROSSSLOT Keys in request don't hash to the same slot"
    );
}
