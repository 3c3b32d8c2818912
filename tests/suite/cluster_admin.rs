//! The CLUSTER subcommands that change membership and epochs, and those that read the bus's
//! state: REPLICATE, REPLICAS/SLAVES, FORGET (with its one-minute blacklist), RESET,
//! BUMPEPOCH, SET-CONFIG-EPOCH, COUNT-FAILURE-REPORTS, LINKS. Method: real node processes
//! whose bus runs on `ofi:tcp`, formed by `redis-cli --cluster create`; error texts are
//! compared with redis-server 7.0.15 in cluster mode where the situation is the same on both.

use integration::cluster::{create_cluster as create_with, wait_until, CONVERGE_DEADLINE};
use integration::reference::RedisServer;
use integration::{cmd, Node};
use redis::Value;
use std::time::{Duration, Instant};

fn create_cluster(extra: usize) -> Vec<Node> {
    create_with("admin-secret", extra)
}

fn id(n: &Node) -> String {
    n.cli(&["CLUSTER", "MYID"])
}

/// The CLUSTER NODES line for `id` on `n`, if it has one.
fn line_of(n: &Node, id: &str) -> Option<String> {
    n.cli(&["CLUSTER", "NODES"])
        .lines()
        .find(|l| l.starts_with(id))
        .map(str::to_string)
}

#[test]
fn replicate_makes_a_replica_that_every_node_lists() {
    let nodes = create_cluster(1);
    let (primary, replica) = (id(&nodes[0]), id(&nodes[3]));
    assert_eq!(nodes[3].cli(&["CLUSTER", "REPLICATE", &primary]), "OK");
    // Saved before the reply.
    let conf = std::fs::read_to_string(nodes[3].dir.path().join("nodes.conf")).unwrap();
    assert!(
        conf.lines()
            .any(|l| l.starts_with(&replica) && l.contains(&format!("myself,slave {primary} "))),
        "{conf}"
    );
    let refs: Vec<&Node> = nodes.iter().collect();
    wait_until("every node to see the replica", &refs, || {
        nodes
            .iter()
            .all(|n| line_of(n, &replica).is_some_and(|l| l.contains(&format!("slave {primary} "))))
    });
    for n in &nodes {
        for sub in ["REPLICAS", "SLAVES"] {
            let listed = n.cli(&["CLUSTER", sub, &primary]);
            assert_eq!(listed.lines().count(), 1, "{sub} on {}: {listed}", n.port);
            assert!(listed.starts_with(&replica), "{listed}");
            assert!(listed.contains(&format!("slave {primary} ")), "{listed}");
        }
        assert_eq!(n.cli(&["CLUSTER", "REPLICAS", &id(&nodes[1])]), "");
        assert_eq!(
            n.cli(&["CLUSTER", "REPLICAS", &replica]),
            "ERR The specified node is not a master"
        );
    }
    // A replica's shard is its primary's, and its epoch shown is the primary's.
    assert_eq!(
        nodes[3].cli(&["CLUSTER", "MYSHARDID"]),
        nodes[0].cli(&["CLUSTER", "MYSHARDID"])
    );
    // Redis's refusals.
    assert_eq!(
        nodes[1].cli(&["CLUSTER", "REPLICATE", &replica]),
        "ERR I can only replicate a master, not a replica."
    );
    assert_eq!(
        nodes[1].cli(&["CLUSTER", "REPLICATE", &primary]),
        "ERR To set a master the node must be empty and without assigned slots."
    );
    assert_eq!(
        nodes[3].cli(&["CLUSTER", "FORGET", &primary]),
        "ERR Can't forget my master!"
    );
    // A replica may change primaries.
    let other = id(&nodes[1]);
    assert_eq!(nodes[3].cli(&["CLUSTER", "REPLICATE", &other]), "OK");
    wait_until("the new primary to list the replica", &refs, || {
        nodes[1]
            .cli(&["CLUSTER", "REPLICAS", &other])
            .starts_with(&replica)
    });
}

#[test]
fn forget_on_every_node_keeps_the_node_out_for_the_blacklist() {
    let nodes = create_cluster(1);
    let gone = id(&nodes[3]);
    assert_eq!(nodes[0].cli(&["CLUSTER", "FORGET", &gone]), "OK");
    assert!(line_of(&nodes[0], &gone).is_none());
    // Nodes 1 and 2 still gossip about it to node 0 meanwhile: without the blacklist
    // node 0 would meet it again (pings go out every second with a 2 s node timeout).
    std::thread::sleep(Duration::from_secs(4));
    assert!(line_of(&nodes[0], &gone).is_none(), "came back on node 0");
    for n in &nodes[1..3] {
        assert_eq!(n.cli(&["CLUSTER", "FORGET", &gone]), "OK");
    }
    // As `redis-cli --cluster del-node` does, the removed node forgets the others.
    assert_eq!(nodes[3].cli(&["CLUSTER", "RESET", "SOFT"]), "OK");
    assert_eq!(nodes[3].cli(&["CLUSTER", "NODES"]).lines().count(), 1);
    assert_eq!(id(&nodes[3]), gone, "a soft reset keeps the id");
    let until = Instant::now() + Duration::from_secs(6);
    while Instant::now() < until {
        for n in &nodes[0..3] {
            let view = n.cli(&["CLUSTER", "NODES"]);
            assert!(!view.contains(&gone), "came back on {}: {view}", n.port);
            assert_eq!(view.lines().count(), 3, "{view}");
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    // The forgotten node saved without them, and FORGET again says it is unknown.
    assert_eq!(
        nodes[0].cli(&["CLUSTER", "FORGET", &gone]),
        format!("ERR Unknown node {gone}")
    );
    let conf = std::fs::read_to_string(nodes[0].dir.path().join("nodes.conf")).unwrap();
    assert!(!conf.contains(&gone), "{conf}");
}

/// A RESP2 map (flattened) as (field, value) text pairs.
fn pairs(v: &Value) -> Vec<(String, String)> {
    let Value::Array(items) = v else {
        panic!("not an array: {v:?}")
    };
    let text = |v: &Value| match v {
        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        Value::Int(i) => i.to_string(),
        other => panic!("unexpected {other:?}"),
    };
    items
        .chunks(2)
        .map(|c| (text(&c[0]), text(&c[1])))
        .collect()
}

fn links(n: &Node) -> Vec<Vec<(String, String)>> {
    match cmd(&mut n.client(), &["CLUSTER", "LINKS"]).unwrap() {
        Value::Array(links) => links.iter().map(pairs).collect(),
        other => panic!("LINKS gave {other:?}"),
    }
}

#[test]
fn links_and_failure_reports_follow_the_bus() {
    let mut nodes = create_cluster(0);
    let ids: Vec<String> = nodes.iter().map(id).collect();
    let refs: Vec<&Node> = nodes.iter().collect();
    wait_until("a link each way to each peer", &refs, || {
        links(&nodes[0]).len() == 4
    });
    let fields = [
        "direction",
        "node",
        "create-time",
        "events",
        "send-buffer-allocated",
        "send-buffer-used",
    ];
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let mut seen = Vec::new();
    for link in links(&nodes[0]) {
        let names: Vec<&str> = link.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(names, fields);
        let (direction, node) = (link[0].1.clone(), link[1].1.clone());
        assert!(direction == "to" || direction == "from", "{link:?}");
        assert!(ids[1..].contains(&node), "{link:?}");
        let created: u64 = link[2].1.parse().unwrap();
        assert!(created > 0 && created <= now_ms, "{link:?}");
        assert_eq!(link[3].1, "r");
        seen.push((direction, node));
    }
    seen.sort();
    let mut expected: Vec<(String, String)> = ids[1..]
        .iter()
        .flat_map(|i| {
            [
                ("from".to_string(), i.clone()),
                ("to".to_string(), i.clone()),
            ]
        })
        .collect();
    expected.sort();
    assert_eq!(seen, expected);
    for n in &nodes {
        for i in &ids {
            assert_eq!(n.cli(&["CLUSTER", "COUNT-FAILURE-REPORTS", i]), "0");
        }
    }
    // Killed: each survivor hears about it from the other (a voting primary).
    let victim = nodes.pop().unwrap();
    drop(victim);
    let refs: Vec<&Node> = nodes.iter().collect();
    wait_until(
        "a failure report about the killed node on both survivors",
        &refs,
        || {
            nodes.iter().all(|n| {
                n.cli(&["CLUSTER", "COUNT-FAILURE-REPORTS", &ids[2]])
                    .parse::<u64>()
                    .is_ok_and(|c| c >= 1)
            })
        },
    );
    for n in &nodes {
        let c: u64 = n
            .cli(&["CLUSTER", "COUNT-FAILURE-REPORTS", &ids[2]])
            .parse()
            .unwrap();
        assert!(c <= 1, "only one other node can report it: {c}");
    }
    wait_until("the inbound link from the killed node to go", &refs, || {
        !links(&nodes[0])
            .iter()
            .any(|l| l[0].1 == "from" && l[1].1 == ids[2])
    });
}

/// Runs the same commands on a lone node of ours and a lone redis-server in cluster mode,
/// with each one's own id put where `{me}` is, and compares every reply.
#[test]
fn lone_node_errors_match_redis() {
    let node = Node::start(&["--cluster-enabled", "yes"]);
    let redis = RedisServer::start(&["--cluster-enabled", "yes"]);
    let script: &[&[&str]] = &[
        &[
            "CLUSTER",
            "REPLICATE",
            "0000000000000000000000000000000000000000",
        ],
        &["CLUSTER", "REPLICATE", "abc"],
        &["CLUSTER", "REPLICATE", "{me}"],
        &["CLUSTER", "REPLICATE", "{ME}"],
        &["CLUSTER", "REPLICATE"],
        &["CLUSTER", "REPLICAS", "nope"],
        &["CLUSTER", "REPLICAS", "{me}"],
        &["CLUSTER", "SLAVES", "{me}", "x"],
        &["CLUSTER", "FORGET", "{me}"],
        &["CLUSTER", "FORGET", "nope"],
        &["CLUSTER", "COUNT-FAILURE-REPORTS", "nope"],
        &["CLUSTER", "COUNT-FAILURE-REPORTS", "{me}"],
        &["CLUSTER", "LINKS"],
        &["CLUSTER", "LINKS", "x"],
        &["CLUSTER", "SET-CONFIG-EPOCH", "-1"],
        &["CLUSTER", "SET-CONFIG-EPOCH", "x"],
        &["CLUSTER", "SET-CONFIG-EPOCH", "0"],
        &["CLUSTER", "SET-CONFIG-EPOCH", "7"],
        &["CLUSTER", "SET-CONFIG-EPOCH", "8"],
        &["CLUSTER", "BUMPEPOCH"],
        &["CLUSTER", "BUMPEPOCH", "x"],
        &["CLUSTER", "INFO"],
        &["CLUSTER", "RESET", "bogus"],
        &["CLUSTER", "RESET", "SOFT", "extra"],
        &["CLUSTER", "ADDSLOTSRANGE", "0", "16383"],
        // Redis turns the state ok up to 2 s after its start: both wait for it here.
        &["WAIT-OK"],
        &["SET", "foo", "bar"],
        &["CLUSTER", "RESET"],
        &["CLUSTER", "RESET", "HARD"],
        &["DEL", "foo"],
        &["CLUSTER", "RESET", "HARD"],
        &["CLUSTER", "BUMPEPOCH"],
        &["CLUSTER", "BUMPEPOCH"],
        &["CLUSTER", "NODES"],
    ];
    let run = |cli: &dyn Fn(&[&str]) -> String, me: &str| -> Vec<String> {
        script
            .iter()
            .map(|args| {
                let args: Vec<String> = args
                    .iter()
                    .map(|a| {
                        a.replace("{me}", me)
                            .replace("{ME}", &me.to_ascii_uppercase())
                    })
                    .collect();
                let refs: Vec<&str> = args.iter().map(String::as_str).collect();
                if refs == ["WAIT-OK"] {
                    let deadline = Instant::now() + CONVERGE_DEADLINE;
                    while !cli(&["CLUSTER", "INFO"]).contains("cluster_state:ok") {
                        assert!(Instant::now() < deadline, "cluster_state:ok never came");
                        std::thread::sleep(Duration::from_millis(100));
                    }
                    return String::new();
                }
                // Replies quoting the id compare with the id put back as `{me}`.
                let out = cli(&refs)
                    .replace(me, "{me}")
                    .replace(&me.to_ascii_uppercase(), "{ME}");
                // Only what both can agree on: the epochs of CLUSTER INFO, and NODES
                // without the id and port.
                if refs[1] == "INFO" {
                    out.lines()
                        .filter(|l| l.contains("epoch"))
                        .collect::<Vec<_>>()
                        .join("\n")
                } else if refs[1] == "NODES" {
                    out.split(' ').skip(2).collect::<Vec<_>>().join(" ")
                } else {
                    out
                }
            })
            .collect()
    };
    let ours = run(&|a| node.cli(a), &id(&node));
    let theirs = run(&|a| redis.cli(a), &redis.cli(&["CLUSTER", "MYID"]));
    for ((args, o), t) in script.iter().zip(&ours).zip(&theirs) {
        assert_eq!(o, t, "{args:?}");
    }
    // A hard reset took a new id on both; the script compared the rest.
    assert_ne!(ours.len(), 0);
}

#[test]
fn help_lists_the_new_subcommands() {
    let node = Node::start(&["--cluster-enabled", "yes"]);
    let help = node.cli(&["CLUSTER", "HELP"]);
    for line in [
        "BUMPEPOCH",
        "COUNT-FAILURE-REPORTS <node-id>",
        "FORGET <node-id>",
        "REPLICATE <node-id>",
        "RESET [HARD|SOFT]",
        "SET-CONFIG-EPOCH <epoch>",
        "REPLICAS <node-id>",
        "LINKS",
    ] {
        assert!(help.lines().any(|l| l == line), "{line} missing:\n{help}");
    }
}
