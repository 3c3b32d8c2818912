//! The routing decision over a table of cases, each observed on redis-server 7.0.15: the
//! `three` fixture is node 31001's view (owns 0-5460; slot 100 migrating to 31002, 101 to
//! 31003; importing 6000 from 31002). Key slots: foo 12182, bar 5061, k2136 100, k279 6000.

use super::config_file;
use super::routing::{route, DownKind, Endpoint, Request, Route};
use super::topology::Topology;
use rand::SeedableRng;

fn view(nodes: &[u8]) -> Topology {
    let file = format!(
        "{}vars currentEpoch 3 lastVoteEpoch 0\n",
        String::from_utf8_lossy(nodes)
    );
    config_file::parse(&file, &mut rand::rngs::StdRng::seed_from_u64(1)).unwrap()
}

fn three() -> Topology {
    view(include_bytes!("fixtures/three.nodes.txt"))
}

fn at(port: u16, slot: u16, ask: bool) -> Route {
    let e = Endpoint {
        host: "127.0.0.1".into(),
        port,
    };
    if ask {
        Route::Ask(slot, e)
    } else {
        Route::Moved(slot, e)
    }
}

/// Routes `keys` with the flags given; `present` are the keys this node holds.
fn go(
    t: &Topology,
    keys: &[&str],
    write: bool,
    asking: bool,
    readonly: bool,
    present: &[&str],
) -> Route {
    let keys: Vec<&[u8]> = keys.iter().map(|k| k.as_bytes()).collect();
    let req = Request {
        keys: &keys,
        write,
        asking,
        readonly,
        migrate: false,
    };
    route(t, &req, &mut |k: &[u8]| {
        present.iter().any(|p| p.as_bytes() == k)
    })
}

#[test]
fn redirects_as_redis() {
    let t = three();
    let none: &[&str] = &[];
    // (keys, write, asking, keys present here, expected route)
    type Case<'a> = (&'a [&'a str], bool, bool, &'a [&'a str], Route);
    let cases: Vec<Case<'_>> = vec![
        (&[], false, false, none, Route::Serve),
        (&["bar"], false, false, none, Route::Serve),
        (&["foo"], false, false, none, at(31003, 12182, false)),
        (&["foo"], true, false, none, at(31003, 12182, false)),
        (&["foo", "bar"], false, false, none, Route::CrossSlot),
        // Migrating slot 100: all keys missing -> ASK; some -> TRYAGAIN; all present -> serve.
        (&["k2136"], false, false, none, at(31002, 100, true)),
        (&["{k2136}a"], true, false, none, at(31002, 100, true)),
        (
            &["{k2136}a", "{k2136}b"],
            false,
            false,
            &["{k2136}a"],
            Route::TryAgain,
        ),
        (
            &["{k2136}a", "{k2136}a"],
            false,
            false,
            none,
            at(31002, 100, true),
        ),
        (
            &["{k2136}a", "{k2136}b"],
            false,
            false,
            &["{k2136}a", "{k2136}b"],
            Route::Serve,
        ),
        // Importing slot 6000: MOVED to the owner unless ASKING.
        (&["k279"], false, false, none, at(31002, 6000, false)),
        (&["k279"], false, true, none, Route::Serve),
        (
            &["{k279}a", "{k279}b"],
            true,
            true,
            &["{k279}a"],
            Route::TryAgain,
        ),
        (&["{k279}a", "{k279}a"], true, true, none, Route::Serve),
        (
            &["{k279}a", "{k279}b"],
            true,
            true,
            &["{k279}a", "{k279}b"],
            Route::Serve,
        ),
        // ASKING does not matter where we neither import nor own.
        (&["foo"], false, true, none, at(31003, 12182, false)),
    ];
    for (keys, write, asking, present, want) in cases {
        assert_eq!(
            go(&t, keys, write, asking, false, present),
            want,
            "{keys:?} asking={asking}"
        );
    }
}

#[test]
fn cluster_down_as_redis() {
    let mut t = three();
    t.del_slots(&[(12182, 12182)]).unwrap();
    let none: &[&str] = &[];
    assert_eq!(
        go(&t, &["foo"], false, false, false, none),
        Route::ClusterDown(DownKind::Unbound)
    );
    assert_eq!(
        go(&t, &["bar"], false, false, false, none),
        Route::ClusterDown(DownKind::State)
    );
    assert_eq!(
        go(&t, &["foo", "bar"], true, false, false, none),
        Route::ClusterDown(DownKind::Unbound)
    );
    assert_eq!(
        go(&t, &["bar", "foo"], true, false, false, none),
        Route::CrossSlot
    );
    assert_eq!(go(&t, &[], true, false, false, none), Route::Serve);
    t.settings.allow_reads_when_down = true;
    assert_eq!(go(&t, &["bar"], false, false, false, none), Route::Serve);
    assert_eq!(
        go(&t, &["bar"], true, false, false, none),
        Route::ClusterDown(DownKind::ReadOnlyState)
    );
    let texts: Vec<String> = [
        Route::ClusterDown(DownKind::Unbound),
        Route::ClusterDown(DownKind::State),
        Route::ClusterDown(DownKind::ReadOnlyState),
        Route::CrossSlot,
        Route::TryAgain,
        at(31003, 12182, false),
        at(31002, 100, true),
    ]
    .iter()
    .filter_map(Route::error_text)
    .collect();
    assert_eq!(
        texts,
        [
            "CLUSTERDOWN Hash slot not served",
            "CLUSTERDOWN The cluster is down",
            "CLUSTERDOWN The cluster is down and only accepts read commands",
            "CROSSSLOT Keys in request don't hash to the same slot",
            "TRYAGAIN Multiple keys request during rehashing of slot",
            "MOVED 12182 127.0.0.1:31003",
            "ASK 100 127.0.0.1:31002",
        ]
    );
}

#[test]
fn replicas_serve_reads_after_readonly() {
    // 31004's view: a replica of 31001, which owns slot 5061 (bar).
    let t = view(include_bytes!("fixtures/replica.nodes.txt"));
    let none: &[&str] = &[];
    assert_eq!(
        go(&t, &["bar"], false, false, false, none),
        at(31001, 5061, false)
    );
    assert_eq!(go(&t, &["bar"], false, false, true, none), Route::Serve);
    assert_eq!(
        go(&t, &["bar"], true, false, true, none),
        at(31001, 5061, false)
    );
    // Slots of another primary still move.
    assert_eq!(
        go(&t, &["foo"], false, false, true, none),
        at(31003, 12182, false)
    );
}

#[test]
fn an_unknown_ip_prints_empty() {
    let t = view(include_bytes!("fixtures/single.nodes.txt"));
    let mut other = t.clone();
    // Hand slot 5 to a second node whose ip is not known yet.
    let id = super::id::HexId::parse(&[b'a'; 40]).unwrap();
    let mut node = super::node::ClusterNode::new(id, id);
    node.port = 6380;
    let index = other.add_node(node).unwrap();
    other
        .slots
        .set_owner(proto::slot::key_slot(b"{06S}"), Some(index));
    other.refresh_state();
    let r = go(&other, &["{06S}"], false, false, false, &[]);
    let text = r.error_text().unwrap();
    assert!(
        text.starts_with("MOVED ") && text.ends_with(" :6380"),
        "{text}"
    );
}

#[test]
fn migrate_runs_here_on_an_open_slot_whatever_keys_are_present() {
    let t = three();
    let run = |keys: &[&str]| {
        let keys: Vec<&[u8]> = keys.iter().map(|k| k.as_bytes()).collect();
        let req = Request {
            keys: &keys,
            write: true,
            asking: false,
            readonly: false,
            migrate: true,
        };
        route(&t, &req, &mut |_: &[u8]| false)
    };
    // Migrating slot 100 with the keys gone, importing slot 6000: served here (Redis's
    // getNodeByQuery returns myself for MIGRATE on an open slot).
    assert_eq!(run(&["k2136"]), Route::Serve);
    assert_eq!(run(&["{k2136}a", "{k2136}b"]), Route::Serve);
    assert_eq!(run(&["k279"]), Route::Serve);
    // A slot that is not open routes as any command.
    assert_eq!(run(&["foo"]), at(31003, 12182, false));
    assert_eq!(run(&["bar"]), Route::Serve);
}
