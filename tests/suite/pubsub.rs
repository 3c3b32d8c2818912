//! Pub/sub against a real node: RESP2 confirmations and messages, subscribed mode, RESP3
//! push frames (read raw, decoded by proto's decoder), patterns, shard channels, PUBSUB
//! introspection, and a real client library's pub/sub API.

use integration::raw::{bulk, bulks, Frame, RawClient};
use integration::{cmd, Node};
use redis::Value;
use std::collections::HashSet;
use std::time::{Duration, Instant};

/// A confirmation such as `[subscribe, ch, 1]`, as an array (RESP2) or a push (RESP3).
fn confirm(kind: &str, name: Option<&str>, count: i64, resp3: bool) -> Frame {
    let name = match (name, resp3) {
        (Some(n), _) => bulk(n),
        (None, false) => Frame::NullBulk,
        (None, true) => Frame::Null,
    };
    let items = vec![bulk(kind), name, Frame::Integer(count)];
    if resp3 {
        Frame::Push(items)
    } else {
        Frame::Array(items)
    }
}

fn push(items: &[&str]) -> Frame {
    Frame::Push(items.iter().map(|s| bulk(s)).collect())
}

/// Time to conclude that no further frame is coming.
const QUIET: Duration = Duration::from_millis(200);

fn int(node: &Node, args: &[&str]) -> i64 {
    match cmd(&mut node.client(), args).unwrap() {
        Value::Int(n) => n,
        other => panic!("expected an integer from {args:?}, got {other:?}"),
    }
}

#[test]
fn resp2_confirmations_messages_and_subscribed_mode() {
    let node = Node::start(&[]);
    let mut sub = RawClient::connect(node.port);
    sub.send(&["SUBSCRIBE", "ch1", "ch2", "ch1"]);
    assert_eq!(sub.read(), confirm("subscribe", Some("ch1"), 1, false));
    assert_eq!(sub.read(), confirm("subscribe", Some("ch2"), 2, false));
    assert_eq!(sub.read(), confirm("subscribe", Some("ch1"), 2, false));
    sub.send(&["PSUBSCRIBE", "ch*", "h?llo"]);
    assert_eq!(sub.read(), confirm("psubscribe", Some("ch*"), 3, false));
    assert_eq!(sub.read(), confirm("psubscribe", Some("h?llo"), 4, false));

    // Subscribed mode: only (un)subscribe, PING, QUIT and RESET.
    assert_eq!(
        sub.call(&["GET", "x"]),
        Frame::error("ERR Can't execute 'get': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context")
    );
    assert_eq!(sub.call(&["PING"]), bulks(&["pong", ""]));
    assert_eq!(sub.call(&["PING", "hi"]), bulks(&["pong", "hi"]));

    // PUBLISH counts channel and pattern receivers.
    assert_eq!(int(&node, &["PUBLISH", "ch1", "hello"]), 2);
    assert_eq!(sub.read(), bulks(&["message", "ch1", "hello"]));
    assert_eq!(sub.read(), bulks(&["pmessage", "ch*", "ch1", "hello"]));
    assert_eq!(int(&node, &["PUBLISH", "hello", "w"]), 1);
    assert_eq!(sub.read(), bulks(&["pmessage", "h?llo", "hello", "w"]));
    assert_eq!(int(&node, &["PUBLISH", "nobody", "z"]), 0);
    assert_eq!(node.cli(&["PUBLISH", "ch2", "via cli"]), "2");
    assert_eq!(sub.read(), bulks(&["message", "ch2", "via cli"]));
    assert_eq!(sub.read(), bulks(&["pmessage", "ch*", "ch2", "via cli"]));
    assert_eq!(sub.read_within(QUIET), None);

    // UNSUBSCRIBE without arguments drops every channel (in no set order); patterns stay.
    sub.send(&["UNSUBSCRIBE"]);
    let mut names = HashSet::new();
    for expected_count in [3, 2] {
        let Frame::Array(items) = sub.read() else {
            panic!("confirmation expected")
        };
        assert_eq!(items[0], bulk("unsubscribe"));
        assert_eq!(items[2], Frame::Integer(expected_count));
        names.insert(items[1].as_bytes().unwrap().to_vec());
    }
    assert_eq!(names, HashSet::from([b"ch1".to_vec(), b"ch2".to_vec()]));
    sub.send(&["PUNSUBSCRIBE", "ch*", "nope"]);
    assert_eq!(sub.read(), confirm("punsubscribe", Some("ch*"), 1, false));
    assert_eq!(sub.read(), confirm("punsubscribe", Some("nope"), 1, false));
    assert_eq!(
        sub.call(&["PUNSUBSCRIBE"]),
        confirm("punsubscribe", Some("h?llo"), 0, false)
    );
    // Out of subscribed mode.
    assert_eq!(sub.call(&["GET", "x"]), Frame::NullBulk);
    assert_eq!(sub.call(&["PING"]), Frame::simple("PONG"));
    // Nothing to drop: a nil name and the count.
    assert_eq!(
        sub.call(&["UNSUBSCRIBE"]),
        confirm("unsubscribe", None, 0, false)
    );
    assert_eq!(
        sub.call(&["PUNSUBSCRIBE"]),
        confirm("punsubscribe", None, 0, false)
    );
    assert_eq!(
        sub.call(&["SUNSUBSCRIBE"]),
        confirm("sunsubscribe", None, 0, false)
    );
    assert_eq!(
        sub.call(&["UNSUBSCRIBE", "x"]),
        confirm("unsubscribe", Some("x"), 0, false)
    );
}

#[test]
fn resp3_subscribers_get_push_frames_and_keep_all_commands() {
    let node = Node::start(&[]);
    let mut sub = RawClient::connect(node.port);
    assert!(matches!(sub.call(&["HELLO", "3"]), Frame::Map(_)));
    assert_eq!(
        sub.call(&["SUBSCRIBE", "r1"]),
        confirm("subscribe", Some("r1"), 1, true)
    );
    assert_eq!(
        sub.call(&["PSUBSCRIBE", "r*"]),
        confirm("psubscribe", Some("r*"), 2, true)
    );
    // RESP3 has no subscribed mode.
    assert_eq!(sub.call(&["GET", "x"]), Frame::Null);
    assert_eq!(sub.call(&["PING"]), Frame::simple("PONG"));

    assert_eq!(int(&node, &["PUBLISH", "r1", "m"]), 2);
    assert_eq!(sub.read(), push(&["message", "r1", "m"]));
    assert_eq!(sub.read(), push(&["pmessage", "r*", "r1", "m"]));

    // Publishing to itself: the messages come ahead of PUBLISH's own reply, as in Redis.
    sub.send(&["PUBLISH", "r1", "self"]);
    assert_eq!(sub.read(), push(&["message", "r1", "self"]));
    assert_eq!(sub.read(), push(&["pmessage", "r*", "r1", "self"]));
    assert_eq!(sub.read(), Frame::Integer(2));

    assert_eq!(
        sub.call(&["UNSUBSCRIBE"]),
        confirm("unsubscribe", Some("r1"), 1, true)
    );
    assert_eq!(
        sub.call(&["UNSUBSCRIBE"]),
        confirm("unsubscribe", None, 1, true)
    );
    assert_eq!(
        sub.call(&["PUNSUBSCRIBE"]),
        confirm("punsubscribe", Some("r*"), 0, true)
    );
    assert_eq!(int(&node, &["PUBLISH", "r1", "gone"]), 0);
    assert_eq!(sub.read_within(QUIET), None);
}

#[test]
fn shard_channels_are_a_namespace_of_their_own() {
    let node = Node::start(&[]);
    let mut sub = RawClient::connect(node.port);
    assert_eq!(
        sub.call(&["SUBSCRIBE", "plain"]),
        confirm("subscribe", Some("plain"), 1, false)
    );
    // The shard count is separate from the channel and pattern count.
    assert_eq!(
        sub.call(&["SSUBSCRIBE", "sch"]),
        confirm("ssubscribe", Some("sch"), 1, false)
    );
    assert_eq!(int(&node, &["PUBLISH", "sch", "x"]), 0);
    assert_eq!(int(&node, &["SPUBLISH", "plain", "x"]), 0);
    assert_eq!(int(&node, &["SPUBLISH", "sch", "y"]), 1);
    assert_eq!(sub.read(), bulks(&["smessage", "sch", "y"]));
    assert_eq!(
        sub.call(&["SUNSUBSCRIBE"]),
        confirm("sunsubscribe", Some("sch"), 0, false)
    );
    // Still subscribed to "plain": still in subscribed mode.
    assert!(sub.call(&["GET", "x"]).is_error());
}

#[test]
fn pubsub_introspection_and_its_errors() {
    let node = Node::start(&[]);
    let mut a = RawClient::connect(node.port);
    let mut b = RawClient::connect(node.port);
    a.send(&["SUBSCRIBE", "news", "user:1"]);
    a.read();
    a.read();
    a.call(&["PSUBSCRIBE", "n*"]);
    b.call(&["SUBSCRIBE", "news"]);
    b.call(&["PSUBSCRIBE", "n*"]);
    b.call(&["PSUBSCRIBE", "q"]);
    b.call(&["SSUBSCRIBE", "s1"]);

    let mut q = RawClient::connect(node.port);
    let Frame::Array(channels) = q.call(&["PUBSUB", "CHANNELS"]) else {
        panic!("array expected")
    };
    let names: HashSet<Vec<u8>> = channels
        .iter()
        .map(|c| c.as_bytes().unwrap().to_vec())
        .collect();
    assert_eq!(names, HashSet::from([b"news".to_vec(), b"user:1".to_vec()]));
    assert_eq!(
        q.call(&["PUBSUB", "CHANNELS", "user:*"]),
        bulks(&["user:1"])
    );
    assert_eq!(
        q.call(&["PUBSUB", "NUMSUB", "news", "user:1", "none"]),
        Frame::Array(vec![
            bulk("news"),
            Frame::Integer(2),
            bulk("user:1"),
            Frame::Integer(1),
            bulk("none"),
            Frame::Integer(0),
        ])
    );
    assert_eq!(q.call(&["PUBSUB", "NUMSUB"]), Frame::Array(vec![]));
    // Distinct patterns, not subscriptions.
    assert_eq!(q.call(&["PUBSUB", "NUMPAT"]), Frame::Integer(2));
    // INFO stats counts the same: channels, patterns and shard channels with a subscriber.
    let stats = node.cli(&["INFO", "stats"]);
    for field in [
        "pubsub_channels:2",
        "pubsub_patterns:2",
        "pubsubshard_channels:1",
    ] {
        assert!(stats.lines().any(|l| l.trim() == field), "{field}: {stats}");
    }
    assert_eq!(q.call(&["PUBSUB", "SHARDCHANNELS"]), bulks(&["s1"]));
    assert_eq!(q.call(&["PUBSUB", "SHARDCHANNELS", "x*"]), bulks(&[]));
    assert_eq!(
        q.call(&["PUBSUB", "SHARDNUMSUB", "s1", "news"]),
        Frame::Array(vec![
            bulk("s1"),
            Frame::Integer(1),
            bulk("news"),
            Frame::Integer(0)
        ])
    );

    assert_eq!(
        q.call(&["PUBSUB"]),
        Frame::error("ERR wrong number of arguments for 'pubsub' command")
    );
    assert_eq!(
        q.call(&["PUBSUB", "FOO"]),
        Frame::error("ERR unknown subcommand 'FOO'. Try PUBSUB HELP.")
    );
    assert_eq!(
        q.call(&["PUBSUB", "NUMPAT", "x"]),
        Frame::error("ERR wrong number of arguments for 'pubsub|numpat' command")
    );
    assert_eq!(
        q.call(&["pubsub", "channels", "a", "b"]),
        Frame::error(
            "ERR unknown subcommand or wrong number of arguments for 'channels'. Try PUBSUB HELP."
        )
    );
    let Frame::Array(help) = q.call(&["PUBSUB", "HELP"]) else {
        panic!("array expected")
    };
    assert_eq!(help.len(), 14);
    assert_eq!(
        help[0],
        Frame::simple("PUBSUB <subcommand> [<arg> [value] [opt] ...]. Subcommands are:")
    );
    assert_eq!(
        q.call(&["PUBLISH", "a"]),
        Frame::error("ERR wrong number of arguments for 'publish' command")
    );
    assert_eq!(
        q.call(&["SUBSCRIBE"]),
        Frame::error("ERR wrong number of arguments for 'subscribe' command")
    );

    // RESET drops a client's subscriptions at once; a disconnect soon after.
    assert_eq!(b.call(&["RESET"]), Frame::simple("RESET"));
    assert_eq!(b.call(&["GET", "x"]), Frame::NullBulk);
    assert_eq!(int(&node, &["PUBSUB", "NUMPAT"]), 1);
    assert_eq!(int(&node, &["PUBLISH", "news", "m"]), 2);
    drop(a);
    let deadline = Instant::now() + Duration::from_secs(10);
    while int(&node, &["PUBLISH", "news", "m"]) != 0 {
        assert!(Instant::now() < deadline, "subscriber not removed");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(q.call(&["PUBSUB", "CHANNELS"]), Frame::Array(vec![]));
    assert_eq!(q.call(&["PUBSUB", "NUMPAT"]), Frame::Integer(0));
}

#[test]
fn leaving_subscribed_mode_leaves_no_message_behind() {
    // Goal: a RESP2 client that unsubscribes receives every message ahead of the confirmation
    // and none after it (it would read a late one as the reply to its next command). Method:
    // a publisher floods the channel while the subscriber, many times over, subscribes, then
    // sends UNSUBSCRIBE and GET in one write; after the confirmation comes GET's reply, then
    // silence.
    let node = Node::start(&[]);
    cmd(&mut node.client(), &["SET", "k", "v"]).unwrap();
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            let mut publisher = node.client();
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                cmd(&mut publisher, &["PUBLISH", "flood", "m"]).unwrap();
            }
        });
        let mut sub = RawClient::connect(node.port);
        let mut messages = 0;
        for _ in 0..40 {
            assert_eq!(
                sub.call(&["SUBSCRIBE", "flood"]),
                confirm("subscribe", Some("flood"), 1, false)
            );
            std::thread::sleep(Duration::from_millis(5));
            sub.send_batch(&[&["UNSUBSCRIBE", "flood"], &["GET", "k"]]);
            loop {
                let frame = sub.read();
                if frame == bulks(&["message", "flood", "m"]) {
                    messages += 1;
                    continue;
                }
                assert_eq!(frame, confirm("unsubscribe", Some("flood"), 0, false));
                break;
            }
            assert_eq!(sub.read(), bulk("v"));
            assert_eq!(sub.read_within(Duration::from_millis(20)), None);
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        assert!(messages > 0, "the publisher never reached the subscriber");
    });
}

#[test]
fn subscribe_inside_multi_runs_at_exec() {
    let node = Node::start(&[]);
    let mut c = RawClient::connect(node.port);
    assert_eq!(c.call(&["MULTI"]), Frame::simple("OK"));
    assert_eq!(c.call(&["SUBSCRIBE", "t"]), Frame::simple("QUEUED"));
    assert_eq!(c.call(&["SSUBSCRIBE", "s"]), Frame::simple("QUEUED"));
    assert_eq!(
        c.call(&["EXEC"]),
        Frame::Array(vec![
            confirm("subscribe", Some("t"), 1, false),
            Frame::error("ERR SSUBSCRIBE isn't allowed for a DENY BLOCKING client"),
        ])
    );
    assert_eq!(int(&node, &["PUBLISH", "t", "after"]), 1);
    assert_eq!(c.read(), bulks(&["message", "t", "after"]));
    assert!(c.call(&["MULTI"]).is_error(), "subscribed mode now");
}

#[test]
fn subscriptions_per_client_are_bounded() {
    let node = Node::start(&[]);
    let mut c = RawClient::connect(node.port);
    let names: Vec<String> = (0..100_001).map(|i| format!("c{i}")).collect();
    let mut args: Vec<&str> = vec!["SUBSCRIBE"];
    args.extend(names.iter().map(|s| s.as_str()));
    let reply = c.call(&args);
    assert!(
        reply.is_error()
            && reply
                .as_bytes()
                .is_some_and(|t| t.starts_with(b"ERR this client would exceed")),
        "{reply:?}"
    );
    assert_eq!(c.call(&["PUBSUB", "NUMSUB", "c0"]), bulk_count("c0", 0));
}

fn bulk_count(name: &str, n: i64) -> Frame {
    Frame::Array(vec![bulk(name), Frame::Integer(n)])
}

#[test]
fn a_client_library_subscribes_and_receives() {
    let node = Node::start(&[]);
    let mut con = node.client();
    let mut pubsub = con.as_pubsub();
    pubsub.subscribe("events").unwrap();
    pubsub.psubscribe("ev*").unwrap();
    pubsub
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    assert_eq!(int(&node, &["PUBLISH", "events", "payload"]), 2);
    let m = pubsub.get_message().unwrap();
    assert_eq!(m.get_channel_name(), "events");
    assert_eq!(m.get_payload::<String>().unwrap(), "payload");
    assert!(!m.from_pattern());
    let m = pubsub.get_message().unwrap();
    assert!(m.from_pattern());
    assert_eq!(m.get_pattern::<String>().unwrap(), "ev*");
    assert_eq!(m.get_payload::<String>().unwrap(), "payload");
    pubsub.unsubscribe("events").unwrap();
    pubsub.punsubscribe("ev*").unwrap();
    drop(pubsub);
    // Back to normal commands on the same connection.
    assert_eq!(cmd(&mut con, &["GET", "x"]).unwrap(), Value::Nil);
}
