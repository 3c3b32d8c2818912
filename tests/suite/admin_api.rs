//! The admin gRPC API (issue 17): its port, bind and token rules, GetCluster and
//! WatchCluster on a real cluster, Failover through the API with request_id idempotency,
//! AddNode. Method: real node processes (cluster bus on `ofi:tcp`, formed by
//! `redis-cli --cluster create`), driven by the `operator` binary as the gRPC client;
//! the outcome is checked through redis-cli's view (CLUSTER NODES / MYID), not the API's own.

use integration::cluster::{addr, cluster_node_with, form_cluster, wait_until};
use integration::{free_port, operator, Node};
use std::io::{BufRead, BufReader};
use std::process::{Output, Stdio};

const SECRET: &str = "admin-api-secret";
const TOKEN: &str = "admin-api-token";

pub(crate) fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// `operator ARGS --admin 127.0.0.1:PORT [--token TOKEN]`.
fn admin(port: u16, token: Option<&str>, args: &[&str]) -> Output {
    let at = format!("127.0.0.1:{port}");
    let mut cmd = operator(args);
    cmd.args(["--admin", &at]);
    if let Some(t) = token {
        cmd.args(["--token", t]);
    }
    cmd.output().expect("running operator")
}

fn id(n: &Node) -> String {
    n.cli(&["CLUSTER", "MYID"])
}

/// A JSON string field's value in one line of `--json` output.
fn field(line: &str, name: &str) -> String {
    let key = format!("\"{name}\":\"");
    line.split_once(&key)
        .and_then(|(_, rest)| rest.split_once('"'))
        .map(|(v, _)| v.to_string())
        .unwrap_or_default()
}

#[test]
fn the_admin_api_wants_the_token_and_binds_loopback_by_default() {
    let port = free_port();
    let p = port.to_string();
    let node = Node::start(&["--admin-port", &p, "--admin-token", TOKEN]);
    assert_eq!(
        node.cli(&["CONFIG", "GET", "admin-bind"]),
        "admin-bind\n127.0.0.1"
    );
    let log = node.log();
    let listening: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("admin API (gRPC) ready"))
        .collect();
    assert_eq!(listening.len(), 1, "one admin listener: {log}");
    assert!(
        listening[0].contains(&format!("127.0.0.1:{port}")),
        "the admin listener is on loopback only: {log}"
    );
    for token in [None, Some("wrong-token")] {
        let out = admin(port, token, &["ops", "list"]);
        assert!(!out.status.success(), "token {token:?} was let in");
        assert!(text(&out).contains("Unauthenticated"), "{}", text(&out));
    }
    let out = admin(port, Some(TOKEN), &["ops", "list"]);
    assert!(out.status.success(), "{}", text(&out));
    let file = node.dir.path().join("admin-token");
    std::fs::write(&file, format!("{TOKEN}\n")).unwrap();
    let out = admin(
        port,
        None,
        &["ops", "list", "--token-file", file.to_str().unwrap()],
    );
    assert!(out.status.success(), "{}", text(&out));
    // Not in cluster mode: the cluster RPCs say so rather than answer something empty.
    let out = admin(port, Some(TOKEN), &["cluster", "show"]);
    assert!(!out.status.success());
    assert!(text(&out).contains("not in cluster mode"), "{}", text(&out));
}

#[test]
fn a_non_loopback_admin_bind_without_a_token_refuses_to_start() {
    let dir = tempfile::tempdir().unwrap();
    let p = free_port().to_string();
    let (status, log) =
        Node::start_expecting_exit(dir.path(), &["--admin-port", &p, "--admin-bind", "0.0.0.0"]);
    assert!(!status.success());
    assert!(
        log.contains("admin-token is empty") && log.contains("refusing to start"),
        "{log}"
    );
}

/// Migration requests the API can refuse at once are refused at once, with the reason.
#[test]
fn bad_migration_requests_are_refused_before_they_become_operations() {
    let (nodes, port) = three_primaries();
    let unknown = "0123456789012345678901234567890123456789";
    let owner_of_0 = nodes
        .iter()
        .find(|n| {
            let me = id(n);
            n.cli(&["CLUSTER", "NODES"])
                .lines()
                .any(|l| l.starts_with(&me) && l.contains(" 0-"))
        })
        .map(id)
        .unwrap();
    for (args, wanted) in [
        (
            vec!["slots", "migrate", "--slots", "0-9", "--to", unknown],
            "unknown node",
        ),
        (
            vec!["slots", "migrate", "--slots", "0-9", "--to", &owner_of_0],
            "already belong",
        ),
        (
            vec![
                "slots",
                "migrate",
                "--slots",
                "0-16383",
                "--to",
                &owner_of_0,
            ],
            "more than one node",
        ),
        (vec!["node", "drain", unknown], "unknown node"),
        (vec!["rebalance", "--threshold", "7"], "threshold"),
    ] {
        let out = admin(port, Some(TOKEN), &args);
        assert!(!out.status.success(), "{args:?}");
        assert!(text(&out).contains(wanted), "{args:?}: {}", text(&out));
    }
    let out = admin(port, Some(TOKEN), &["ops", "list"]);
    assert!(out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stdout).trim().is_empty(),
        "{}",
        text(&out)
    );
}

/// Three primaries, the first with the admin API on.
fn three_primaries() -> (Vec<Node>, u16) {
    let port = free_port();
    let p = port.to_string();
    let first = cluster_node_with(SECRET, &["--admin-port", &p, "--admin-token", TOKEN]);
    let nodes = vec![
        first,
        cluster_node_with(SECRET, &[]),
        cluster_node_with(SECRET, &[]),
    ];
    form_cluster(&nodes, 0);
    (nodes, port)
}

#[test]
fn get_cluster_tells_the_three_primaries_and_watch_cluster_sees_a_node_join() {
    let (nodes, port) = three_primaries();
    let wait_for_fabric = || {
        let out = admin(port, Some(TOKEN), &["cluster", "show", "--json"]);
        let json = String::from_utf8_lossy(&out.stdout).to_string();
        (!json.contains("\"fabric_address\":\"\"")).then_some(json)
    };
    let mut json = None;
    wait_until(
        "every node's fabric address to be known",
        &[&nodes[0]],
        || {
            json = wait_for_fabric();
            json.is_some()
        },
    );
    let json = json.unwrap();
    assert!(json.contains("\"state\":\"ok\""), "{json}");
    assert_eq!(json.matches("\"role\":\"primary\"").count(), 3, "{json}");
    assert_eq!(json.matches("\"health\":\"ok\"").count(), 3, "{json}");
    for n in &nodes {
        assert!(json.contains(&format!("\"id\":\"{}\"", id(n))), "{json}");
        assert!(json.contains(&format!("\"port\":{}", n.port)), "{json}");
    }
    let out = admin(port, Some(TOKEN), &["cluster", "show"]);
    let shown = String::from_utf8_lossy(&out.stdout).to_string();
    for (slots, n) in ["slots=0-5460", "slots=5461-10922", "slots=10923-16383"]
        .iter()
        .zip(&nodes)
    {
        let line = shown.lines().find(|l| l.starts_with(&id(n))).unwrap_or("");
        assert!(line.contains(slots), "{shown}");
    }

    // A watcher gets the topology now, then each change: among them a fourth node met.
    let at = format!("127.0.0.1:{port}");
    let mut watcher = operator(&[
        "cluster", "watch", "--json", "--admin", &at, "--token", TOKEN,
    ])
    .stdout(Stdio::piped())
    .spawn()
    .expect("starting operator cluster watch");
    let stdout = watcher.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    let next = || {
        rx.recv_timeout(integration::cluster::CONVERGE_DEADLINE)
            .expect("a WatchCluster message in time")
    };
    let version = |line: &str| -> u64 {
        line.split_once("\"version\":")
            .and_then(|(_, r)| r.split(|c: char| !c.is_ascii_digit()).next())
            .and_then(|v| v.parse().ok())
            .expect("a version")
    };
    let first = next();
    assert!(
        version(&first) > 0,
        "formed through the topology log: {first}"
    );
    let newcomer = cluster_node_with(SECRET, &[]);
    let np = newcomer.port.to_string();
    assert_eq!(nodes[0].cli(&["CLUSTER", "MEET", "127.0.0.1", &np]), "OK");
    let mut last_version = version(&first);
    let mut changes = 0;
    loop {
        let line = next();
        changes += 1;
        assert!(version(&line) >= last_version, "versions only grow: {line}");
        last_version = version(&line);
        if line.contains(&id(&newcomer)) {
            break;
        }
        assert!(changes < 100, "no message with the new node in 100 changes");
    }
    let _ = watcher.kill();
    let _ = watcher.wait();
}

#[test]
fn slot_stats_count_keys_bytes_and_ops() {
    let (nodes, port) = three_primaries();
    // Slot 0-5460 belongs to the first node. "{a}" hashes to slot 15495, "{b}" to 3300.
    let mut con = nodes[0].client();
    for i in 0..10 {
        let _: () = redis::cmd("SET")
            .arg(format!("{{b}}k{i}"))
            .arg("0123456789")
            .query(&mut con)
            .unwrap();
    }
    let mut last = String::new();
    wait_until("slot 3300's ops/s to show", &[&nodes[0]], || {
        let _: Option<String> = redis::cmd("GET").arg("{b}k0").query(&mut con).unwrap();
        let out = admin(
            port,
            Some(TOKEN),
            &["slots", "stats", "--slots", "3300", "--json"],
        );
        last = String::from_utf8_lossy(&out.stdout).to_string();
        !last.contains("\"ops_per_sec\":0,") && !last.contains("\"ops_per_sec\":0}")
    });
    // Ten keys of 5 bytes ("{b}k" + digit) and ten values of 10 bytes.
    assert!(last.contains("\"keys\":10,"), "{last}");
    assert!(last.contains("\"bytes\":150,"), "{last}");
    assert!(
        last.contains(&format!("\"owner_id\":\"{}\"", id(&nodes[0]))),
        "{last}"
    );
    let out = admin(
        port,
        Some(TOKEN),
        &["slots", "stats", "--slots", "3301", "--json"],
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("\"keys\":0,"));
}

#[test]
fn failover_through_the_api_promotes_the_replica_once_per_request_id() {
    let port = free_port();
    let p = port.to_string();
    let mut nodes = vec![cluster_node_with(
        SECRET,
        &["--admin-port", &p, "--admin-token", TOKEN],
    )];
    nodes.extend((0..5).map(|_| cluster_node_with(SECRET, &[])));
    form_cluster(&nodes, 1);
    let view = nodes[0].cli(&["CLUSTER", "NODES"]);
    let replica_line = view
        .lines()
        .find(|l| l.contains("slave"))
        .expect("a replica")
        .to_string();
    let replica = replica_line.split(' ').next().unwrap().to_string();
    let old_primary = replica_line.split(' ').nth(3).unwrap().to_string();
    let failover = |extra: &[&str]| {
        let mut args = vec![
            "failover",
            replica.as_str(),
            "--json",
            "--request-id",
            "r-1",
        ];
        args.extend_from_slice(extra);
        admin(port, Some(TOKEN), &args)
    };
    let out = failover(&[]);
    assert!(out.status.success(), "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let last = stdout.lines().last().unwrap_or("");
    assert_eq!(field(last, "state"), "SUCCEEDED", "{stdout}");
    let op_id = field(last, "id");
    let is_primary = |n: &Node, who: &str| {
        n.cli(&["CLUSTER", "NODES"])
            .lines()
            .any(|l| l.starts_with(who) && l.contains("master"))
    };
    wait_until("every node to see the promotion", &[&nodes[0]], || {
        nodes.iter().all(|n| is_primary(n, &replica))
    });

    // The same request again: the same operation, and no second failover (which would
    // have to be refused: the node is no longer a replica).
    let out = failover(&[]);
    assert!(out.status.success(), "{}", text(&out));
    let again = String::from_utf8_lossy(&out.stdout).to_string();
    assert_eq!(field(again.lines().last().unwrap(), "id"), op_id, "{again}");
    assert!(!is_primary(&nodes[0], &old_primary));
    let out = admin(port, Some(TOKEN), &["ops", "list", "--json"]);
    let list = String::from_utf8_lossy(&out.stdout).to_string();
    assert_eq!(list.lines().count(), 1, "{list}");
    // The same request_id for a different request is refused.
    let out = failover(&["--force"]);
    assert!(!out.status.success());
    assert!(text(&out).contains("AlreadyExists"), "{}", text(&out));
    // Without a request_id of its own, a failover of what is now a primary is refused.
    let out = admin(port, Some(TOKEN), &["failover", &replica]);
    assert!(text(&out).contains("is not a replica"), "{}", text(&out));
}

#[test]
fn add_node_brings_in_a_replica() {
    let (nodes, port) = three_primaries();
    let newcomer = cluster_node_with(SECRET, &[]);
    let primary = id(&nodes[1]);
    let out = admin(
        port,
        Some(TOKEN),
        &["node", "add", &addr(&newcomer), "--replica-of", &primary],
    );
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("SUCCEEDED"),
        "{}",
        text(&out)
    );
    let new_id = id(&newcomer);
    wait_until("every node to list the replica", &[&newcomer], || {
        nodes.iter().chain([&newcomer]).all(|n| {
            n.cli(&["CLUSTER", "NODES"])
                .lines()
                .any(|l| l.starts_with(&new_id) && l.contains(&format!("slave {primary}")))
        })
    });
    // A node that knows another node is not empty: the operation FAILED, nothing met.
    let (a, b) = (
        cluster_node_with(SECRET, &[]),
        cluster_node_with(SECRET, &[]),
    );
    assert_eq!(
        a.cli(&["CLUSTER", "MEET", "127.0.0.1", &b.port.to_string()]),
        "OK"
    );
    wait_until("the two strays to know each other", &[&a], || {
        a.cli(&["CLUSTER", "INFO"])
            .contains("cluster_known_nodes:2")
    });
    let out = admin(port, Some(TOKEN), &["node", "add", &addr(&a)]);
    assert!(!out.status.success());
    assert!(
        text(&out).contains("FAILED") && text(&out).contains("is not empty"),
        "{}",
        text(&out)
    );
    assert!(!nodes[0].cli(&["CLUSTER", "NODES"]).contains(&id(&a)));
}

/// A client generated from `proto/admin.proto` by Python's grpcio-tools (Debian's packages,
/// hence `/usr/bin/python3`) reads the cluster, is refused without the token, and drives a
/// migration of slots 0-99 to its end (then checked through CLUSTER NODES).
#[test]
fn a_python_client_generated_from_the_proto_drives_a_migration() {
    let (nodes, port) = three_primaries();
    let proto_dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../proto");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/py/admin_client.py");
    let out = std::process::Command::new("/usr/bin/python3")
        .args([script, proto_dir, &format!("127.0.0.1:{port}"), TOKEN])
        .output()
        .expect("/usr/bin/python3 (scripts/install-deps.sh installs python3-grpc-tools)");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.success(), "{}", text(&out));
    let cluster = stdout
        .lines()
        .find(|l| l.starts_with("cluster "))
        .unwrap_or("");
    assert!(cluster.starts_with("cluster CLUSTER_STATE_OK "), "{stdout}");
    for n in &nodes {
        assert!(cluster.contains(&id(n)), "{stdout}");
    }
    assert!(
        stdout.contains("unauthenticated UNAUTHENTICATED"),
        "{stdout}"
    );
    let migrated = stdout
        .lines()
        .find(|l| l.starts_with("migrate "))
        .unwrap_or("");
    assert!(
        migrated.starts_with("migrate OPERATION_STATE_SUCCEEDED 100/100 "),
        "{stdout}"
    );
    let target = migrated.split_whitespace().nth(3).unwrap_or("");
    for n in &nodes {
        let view = n.cli(&["CLUSTER", "NODES"]);
        let line = view.lines().find(|l| l.starts_with(target)).unwrap_or("");
        assert!(line.contains(" 0-99"), "{view}");
    }
    assert!(stdout.contains("again same"), "{stdout}");
    assert!(stdout.contains("operations 1"), "{stdout}");
}

/// The attacker: any local process may call an admin API that has no token. AddNode logs in
/// to the address it is given with this node's `masterauth`, so such a caller could name a
/// listener of its own and collect the password. Refused, and the listener hears nothing.
#[test]
fn add_node_without_a_token_never_sends_masterauth_to_the_address_given() {
    let port = free_port();
    let p = port.to_string();
    let node = cluster_node_with(
        SECRET,
        &[
            "--admin-port",
            &p,
            "--masterauth",
            "the-replication-password",
        ],
    );
    let trap = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    trap.set_nonblocking(true).unwrap();
    let trap_at = trap.local_addr().unwrap().to_string();
    let out = admin(port, None, &["node", "add", &trap_at]);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("PermissionDenied") && text(&out).contains("set admin-token"),
        "{}",
        text(&out)
    );
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert!(
        matches!(trap.accept(), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "the node connected to the caller's address"
    );
    // Without a masterauth there is nothing to give away: the request goes ahead (and fails
    // on the trap, which never answers CLUSTER MYID; what matters is it was not refused).
    node.cli(&["CONFIG", "SET", "masterauth", ""]);
    let out = admin(port, None, &["node", "add", &trap_at, "--no-wait"]);
    assert!(!text(&out).contains("PermissionDenied"), "{}", text(&out));
}
