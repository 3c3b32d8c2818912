//! Client-side caching (CLIENT TRACKING) against a real node. Goal: tracking clients are told
//! of changes exactly as Redis 7.0 tells them: RESP3 pushes `invalidate [keys]` on their own
//! connection, RESP2 pub/sub messages on `__redis__:invalidate` to a REDIRECT client, BCAST
//! messages per prefix, OPTIN/OPTOUT with CLIENT CACHING, NOLOOP, a null invalidation on
//! FLUSHALL, the table's size limit, and Redis's error texts; and that redis-py's
//! client-side cache works against a node. Method: real node processes over TCP, raw RESP
//! connections for the tracking clients (to see every frame), the `redis` crate or a second
//! raw connection for the writes; "nothing more was sent" is checked by the next reply being
//! the answer to a PING.

use integration::raw::{bulk, Frame, RawClient};
use integration::{cmd, Node};
use std::process::Command;

fn ok() -> Frame {
    Frame::simple("OK")
}

fn pong() -> Frame {
    Frame::simple("PONG")
}

/// A RESP3 connection.
fn resp3(node: &Node) -> RawClient {
    let mut c = RawClient::connect(node.port);
    assert!(matches!(c.call(&["HELLO", "3"]), Frame::Map(_)));
    c
}

/// A RESP3 connection with tracking on with `options`.
fn tracking(node: &Node, options: &[&str]) -> RawClient {
    let mut c = resp3(node);
    let mut args = vec!["CLIENT", "TRACKING", "on"];
    args.extend_from_slice(options);
    assert_eq!(c.call(&args), ok());
    c
}

/// The push a RESP3 client gets for `keys`.
fn invalidate(keys: &[&str]) -> Frame {
    Frame::Push(vec![
        bulk("invalidate"),
        Frame::Array(keys.iter().map(|k| bulk(k)).collect()),
    ])
}

/// The pub/sub message a RESP2 redirect client gets for `keys` (None: a flush).
fn invalidate_message(keys: Option<&[&str]>) -> Frame {
    Frame::Array(vec![
        bulk("message"),
        bulk("__redis__:invalidate"),
        match keys {
            Some(keys) => Frame::Array(keys.iter().map(|k| bulk(k)).collect()),
            None => Frame::NullBulk,
        },
    ])
}

fn write(node: &Node, args: &[&str]) {
    cmd(&mut node.client(), args).unwrap_or_else(|e| panic!("{args:?}: {e}"));
}

fn info_field(node: &Node, field: &str) -> String {
    let info = node.cli(&["INFO", "everything"]);
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .unwrap_or_else(|| panic!("INFO has no {field}"))
        .trim()
        .to_string()
}

fn client_id(c: &mut RawClient) -> i64 {
    match c.call(&["CLIENT", "ID"]) {
        Frame::Integer(id) => id,
        other => panic!("CLIENT ID answered {other:?}"),
    }
}

fn error(c: &mut RawClient, args: &[&str]) -> String {
    match c.call(args) {
        Frame::Error(e) => String::from_utf8_lossy(&e).into_owned(),
        other => panic!("{args:?} answered {other:?}, not an error"),
    }
}

#[test]
fn a_resp3_client_is_told_once_when_another_client_changes_a_key_it_read() {
    let node = Node::start(&[]);
    write(&node, &["SET", "k", "1"]);
    let mut t = tracking(&node, &[]);
    assert_eq!(t.call(&["GET", "k"]), bulk("1"));
    write(&node, &["SET", "unread", "1"]);
    write(&node, &["SET", "k", "2"]);
    assert_eq!(
        t.read(),
        invalidate(&["k"]),
        "no message for a key it did not read"
    );
    // Forgotten once invalidated: the next change is not told until it reads again.
    write(&node, &["DEL", "k"]);
    assert_eq!(t.call(&["PING"]), pong());
    assert_eq!(info_field(&node, "tracking_clients"), "1");
    assert_eq!(info_field(&node, "tracking_total_keys"), "0");
    // A read inside a transaction is tracked too, and the change's push follows EXEC's reply.
    t.send_batch(&[&["MULTI"], &["GET", "k"], &["SET", "k", "own"], &["EXEC"]]);
    assert_eq!(t.read(), ok());
    assert_eq!(t.read(), Frame::simple("QUEUED"));
    assert_eq!(t.read(), Frame::simple("QUEUED"));
    assert_eq!(t.read(), Frame::Array(vec![Frame::Null, ok()]));
    assert_eq!(
        t.read(),
        invalidate(&["k"]),
        "its own write, after the reply"
    );
}

#[test]
fn a_resp2_client_redirects_to_a_subscribed_client_and_learns_when_it_is_gone() {
    let node = Node::start(&[]);
    let mut redir = RawClient::connect(node.port);
    let redir_id = client_id(&mut redir);
    redir.send(&["SUBSCRIBE", "__redis__:invalidate"]);
    redir.read();
    let mut t = RawClient::connect(node.port);
    let t_id = client_id(&mut t);
    let id = redir_id.to_string();
    assert_eq!(t.call(&["CLIENT", "TRACKING", "on", "REDIRECT", &id]), ok());
    assert_eq!(t.call(&["CLIENT", "GETREDIR"]), Frame::Integer(redir_id));
    let line = node.cli(&["CLIENT", "LIST", "ID", &t_id.to_string()]);
    assert!(
        line.contains(" flags=t ") && line.contains(&format!(" redir={id} ")),
        "{line}"
    );

    t.call(&["MGET", "a", "b"]);
    write(&node, &["MSET", "a", "1", "b", "2"]);
    assert_eq!(redir.read(), invalidate_message(Some(&["a"])));
    assert_eq!(redir.read(), invalidate_message(Some(&["b"])));
    write(&node, &["FLUSHALL"]);
    assert_eq!(redir.read(), invalidate_message(None));

    // The redirect client leaves: a RESP3 tracking client is told at the next invalidation.
    let mut t3 = tracking(&node, &["REDIRECT", &id]);
    t3.call(&["GET", "c"]);
    redir.send(&["QUIT"]);
    assert!(redir.closed_within(std::time::Duration::from_secs(10)));
    write(&node, &["SET", "c", "1"]);
    assert_eq!(
        t3.read(),
        Frame::Push(vec![
            bulk("tracking-redir-broken"),
            Frame::Integer(redir_id)
        ])
    );
    match t3.call(&["CLIENT", "TRACKINGINFO"]) {
        Frame::Map(fields) => {
            assert_eq!(fields[0].0, bulk("flags"));
            assert_eq!(
                fields[0].1,
                Frame::Set(vec![bulk("on"), bulk("broken_redirect")])
            );
            assert_eq!(fields[1], (bulk("redirect"), Frame::Integer(redir_id)));
            assert_eq!(fields[2], (bulk("prefixes"), Frame::Array(vec![])));
        }
        other => panic!("TRACKINGINFO answered {other:?}"),
    }
    assert_eq!(t.call(&["CLIENT", "TRACKING", "off"]), ok());
    assert_eq!(t.call(&["CLIENT", "GETREDIR"]), Frame::Integer(-1));
}

#[test]
fn bcast_sends_one_message_per_prefix_and_noloop_hides_own_changes() {
    let node = Node::start(&[]);
    let mut t = tracking(&node, &["BCAST", "PREFIX", "a:", "PREFIX", "b:"]);
    let mut own = tracking(&node, &["BCAST", "NOLOOP"]);
    assert_eq!(info_field(&node, "tracking_total_prefixes"), "3");
    let mut con = node.client();
    let _: () = redis::pipe()
        .atomic()
        .cmd("INCR")
        .arg("a:1")
        .cmd("INCR")
        .arg("a:2")
        .cmd("INCR")
        .arg("b:1")
        .cmd("INCR")
        .arg("c:1")
        .query(&mut con)
        .unwrap();
    assert_eq!(t.read(), invalidate(&["a:1", "a:2"]));
    assert_eq!(t.read(), invalidate(&["b:1"]));
    assert_eq!(t.call(&["PING"]), pong(), "nothing for c:1");
    assert_eq!(own.read(), invalidate(&["a:1", "a:2", "b:1", "c:1"]));
    // NOLOOP: its own change is not told back; another client's is.
    assert_eq!(own.call(&["SET", "mine", "1"]), ok());
    write(&node, &["SET", "theirs", "1"]);
    assert_eq!(own.read(), invalidate(&["theirs"]));
    match t.call(&["CLIENT", "TRACKINGINFO"]) {
        Frame::Map(fields) => {
            assert_eq!(fields[0].1, Frame::Set(vec![bulk("on"), bulk("bcast")]));
            assert_eq!(fields[2].1, Frame::Array(vec![bulk("a:"), bulk("b:")]));
        }
        other => panic!("TRACKINGINFO answered {other:?}"),
    }
    // Prefixes add up while BCAST stays on; they go with the client.
    assert_eq!(
        t.call(&["CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "c:"]),
        ok()
    );
    write(&node, &["SET", "c:2", "1"]);
    assert_eq!(t.read(), invalidate(&["c:2"]));
    drop(t);
    drop(own);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while info_field(&node, "tracking_total_prefixes") != "0" {
        assert!(
            std::time::Instant::now() < deadline,
            "prefixes outlived their clients"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[test]
fn optin_tracks_after_caching_yes_and_optout_until_caching_no() {
    let node = Node::start(&[]);
    let mut optin = tracking(&node, &["OPTIN"]);
    optin.call(&["GET", "x"]);
    assert_eq!(optin.call(&["CLIENT", "CACHING", "yes"]), ok());
    optin.call(&["GET", "y"]);
    optin.call(&["GET", "z"]);
    let mut optout = tracking(&node, &["OPTOUT"]);
    assert_eq!(optout.call(&["CLIENT", "CACHING", "no"]), ok());
    optout.call(&["GET", "x"]);
    optout.call(&["GET", "y"]);
    write(&node, &["SET", "x", "1"]);
    write(&node, &["SET", "z", "1"]);
    write(&node, &["SET", "y", "1"]);
    assert_eq!(
        optin.read(),
        invalidate(&["y"]),
        "x was read before CACHING yes, z after its command"
    );
    assert_eq!(optin.call(&["PING"]), pong());
    assert_eq!(
        optout.read(),
        invalidate(&["y"]),
        "x was read right after CACHING no"
    );
    assert_eq!(optout.call(&["PING"]), pong());
}

#[test]
fn noloop_hides_the_clients_own_writes_in_default_mode() {
    let node = Node::start(&[]);
    let mut t = tracking(&node, &["NOLOOP"]);
    t.call(&["MGET", "mine", "theirs"]);
    assert_eq!(t.call(&["SET", "mine", "1"]), ok());
    write(&node, &["SET", "theirs", "1"]);
    assert_eq!(t.read(), invalidate(&["theirs"]));
}

#[test]
fn flushall_sends_every_tracking_client_a_null_invalidation() {
    let node = Node::start(&[]);
    let mut default = tracking(&node, &[]);
    let mut bcast = tracking(&node, &["BCAST"]);
    default.call(&["GET", "k"]);
    write(&node, &["FLUSHALL"]);
    let all = Frame::Push(vec![bulk("invalidate"), Frame::Null]);
    assert_eq!(default.read(), all);
    assert_eq!(bcast.read(), all);
    assert_eq!(info_field(&node, "tracking_total_keys"), "0");
    write(&node, &["FLUSHDB"]);
    assert_eq!(
        default.read(),
        all,
        "FLUSHDB too, even with nothing to flush"
    );
}

#[test]
fn the_table_limit_evicts_keys_and_invalidates_their_readers() {
    let node = Node::start(&[]);
    let mut t = tracking(&node, &[]);
    let keys: Vec<String> = (0..10).map(|i| format!("k{i}")).collect();
    let mut mget = vec!["MGET"];
    mget.extend(keys.iter().map(String::as_str));
    t.call(&mget);
    assert_eq!(info_field(&node, "tracking_total_keys"), "10");
    write(&node, &["CONFIG", "SET", "tracking-table-max-keys", "3"]);
    write(&node, &["PING"]);
    let mut evicted = std::collections::BTreeSet::new();
    for _ in 0..7 {
        match t.read() {
            Frame::Push(items) if items[0] == bulk("invalidate") => match &items[1] {
                Frame::Array(k) if k.len() == 1 => assert!(evicted.insert(format!("{:?}", k[0]))),
                other => panic!("unexpected key list {other:?}"),
            },
            other => panic!("expected an invalidation, got {other:?}"),
        }
    }
    assert_eq!(t.call(&["PING"]), pong(), "exactly 7 evicted");
    assert_eq!(info_field(&node, "tracking_total_keys"), "3");
}

#[test]
fn bad_combinations_answer_redis_errors() {
    let node = Node::start(&[]);
    let mut c = RawClient::connect(node.port);
    let me = client_id(&mut c).to_string();
    let cases: &[(&[&str], &str)] = &[
        (&["CLIENT", "TRACKING", "on", "PREFIX", "a"], "ERR PREFIX option requires BCAST mode to be enabled"),
        (&["CLIENT", "TRACKING", "on", "BCAST", "OPTIN"], "ERR OPTIN and OPTOUT are not compatible with BCAST"),
        (&["CLIENT", "TRACKING", "on", "OPTIN", "OPTOUT"], "ERR You can't use both OPTIN and OPTOUT"),
        (&["CLIENT", "TRACKING", "on", "REDIRECT", "999999"], "ERR The client ID you want redirect to does not exist"),
        (&["CLIENT", "TRACKING", "on", "REDIRECT", &me, "REDIRECT", &me], "ERR A client can only redirect to a single other client"),
        (&["CLIENT", "TRACKING", "on", "REDIRECT", "x"], "ERR value is not an integer or out of range"),
        (&["CLIENT", "TRACKING", "maybe"], "ERR syntax error"),
        (&["CLIENT", "TRACKING", "on", "FOO"], "ERR syntax error"),
        (&["CLIENT", "CACHING", "yes"], "ERR CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode enabled"),
        (&["CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "FOOBAR", "PREFIX", "FOO"], "ERR Prefix 'FOOBAR' overlaps with another provided prefix 'FOO'. Prefixes for a single client must not overlap."),
    ];
    for (args, expected) in cases {
        assert_eq!(error(&mut c, args), *expected, "{args:?}");
    }
    assert_eq!(c.call(&["CLIENT", "TRACKING", "on", "OPTIN"]), ok());
    assert_eq!(
        error(&mut c, &["CLIENT", "CACHING", "no"]),
        "ERR CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode."
    );
    assert_eq!(
        error(&mut c, &["CLIENT", "TRACKING", "on", "OPTOUT"]),
        "ERR You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, and then re-enabling it with a different mode."
    );
    assert_eq!(
        error(&mut c, &["CLIENT", "TRACKING", "on", "BCAST"]),
        "ERR You can't switch BCAST mode on/off before disabling tracking for this client, and then re-enabling it with a different mode."
    );
    assert_eq!(c.call(&["CLIENT", "TRACKING", "off"]), ok());
    assert_eq!(
        c.call(&["CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "FOO"]),
        ok()
    );
    assert_eq!(
        error(&mut c, &["CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "FO"]),
        "ERR Prefix 'FO' overlaps with an existing prefix 'FOO'. Prefixes for a single client must not overlap."
    );
    assert_eq!(
        error(&mut c, &["CLIENT", "CACHING", "yes"]),
        "ERR CLIENT CACHING YES is only valid when tracking is enabled in OPTIN mode."
    );
}

#[test]
fn redis_py_client_side_caching_drops_a_read_another_client_changed() {
    let node = Node::start(&[]);
    run_client_side_caching(node.port, &[]);
}

/// The same through redis-py's `RedisCluster` (a cache per node) against three nodes.
#[test]
fn redis_py_client_side_caching_works_against_a_cluster() {
    let nodes = integration::cluster::create_cluster_with("csc", 0, &[]);
    run_client_side_caching(nodes[0].port, &["--cluster"]);
}

fn run_client_side_caching(port: u16, extra: &[&str]) {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/py/client_side_caching.py");
    // python3 and its redis package: scripts/install-deps.sh.
    let (ok, text) = integration::cluster::run(
        Command::new("python3")
            .arg(script)
            .arg(port.to_string())
            .args(extra),
    );
    assert!(ok, "{text}");
    assert!(
        text.contains("ok: another client's write invalidates the cached read"),
        "{text}"
    );
    assert!(text.trim_end().ends_with("done"), "{text}");
}

#[test]
fn client_list_shows_tracking_and_no_evict_flags() {
    let node = Node::start(&[]);
    let mut c = RawClient::connect(node.port);
    let info = |c: &mut RawClient| match c.call(&["CLIENT", "INFO"]) {
        Frame::Bulk(b) => String::from_utf8_lossy(&b).into_owned(),
        other => panic!("CLIENT INFO answered {other:?}"),
    };
    assert!(info(&mut c).contains(" flags=N ") && info(&mut c).contains(" redir=-1 "));
    assert_eq!(c.call(&["CLIENT", "TRACKING", "on", "BCAST"]), ok());
    assert_eq!(c.call(&["CLIENT", "NO-EVICT", "on"]), ok());
    let line = info(&mut c);
    assert!(
        line.contains(" flags=tBe ") && line.contains(" redir=0 "),
        "{line}"
    );
    assert_eq!(c.call(&["CLIENT", "NO-EVICT", "off"]), ok());
    assert_eq!(c.call(&["CLIENT", "TRACKING", "off"]), ok());
    assert!(info(&mut c).contains(" flags=N "));
}

/// Goal: a script's reads make its caller track the keys the script declared, as Redis
/// does (not the keys the reads name); a script that reads nothing, or EVAL_RO/FCALL-style
/// read-only scripts by themselves, track nothing. The suite's "Tracking only occurs for
/// scripts when a command calls a read-only command".
#[test]
fn a_script_that_reads_tracks_its_declared_keys() {
    let node = Node::start(&[]);
    let mut t = tracking(&node, &[]);
    // No read: nothing tracked.
    assert_eq!(
        t.call(&[
            "EVAL",
            "redis.call('set', 'key3{t}', 'bar')",
            "2",
            "key1{t}",
            "key2{t}"
        ]),
        Frame::Null
    );
    write(&node, &["MSET", "key2{t}", "1", "key1{t}", "1"]);
    // A read of an undeclared key: the declared keys are tracked, not key3.
    assert_eq!(
        t.call(&[
            "EVAL",
            "redis.call('get', 'key3{t}')",
            "2",
            "key1{t}",
            "key2{t}"
        ]),
        Frame::Null
    );
    write(&node, &["SET", "key3{t}", "x"]);
    write(&node, &["MSET", "key2{t}", "2", "key1{t}", "2"]);
    assert_eq!(t.read(), invalidate(&["key2{t}"]));
    assert_eq!(t.read(), invalidate(&["key1{t}"]));
    // EVAL_RO that reads nothing: nothing tracked.
    assert_eq!(
        t.call(&["EVAL_RO", "redis.call('ping')", "2", "key1{t}", "key2{t}"]),
        Frame::Null
    );
    write(&node, &["MSET", "key2{t}", "3", "key1{t}", "3"]);
    assert_eq!(t.call(&["PING"]), pong(), "nothing more was sent");
}
