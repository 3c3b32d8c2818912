//! Admin operations in the topology log (`cluster::op_journal`): every node knows every
//! operation (GetOperation, ListOperations, WatchOperation answer on any node), a
//! request_id names one operation across the cluster, and an operation whose coordinator
//! fails is adopted and finished by the topology group's leader.

use crate::admin_api::text;
use crate::slot_migration::{id, info, keys_in, owner_of};
use integration::cluster::{addr, cluster_node_with, form_cluster, wait_until};
use integration::{free_port, operator_binary, Node};
use std::process::Output;

const SECRET: &str = "admin-journal";
const TOKEN: &str = "admin-journal-token";

/// `operator ARGS --admin 127.0.0.1:PORT --token TOKEN`, given at most two minutes (a
/// watch of an operation that never ends would otherwise hang the suite).
fn admin(port: u16, args: &[&str]) -> Output {
    let at = format!("127.0.0.1:{port}");
    let mut cmd = std::process::Command::new("timeout");
    cmd.arg("120").arg(operator_binary()).args(args);
    cmd.args(["--admin", &at, "--token", TOKEN]);
    cmd.output().expect("running operator")
}

/// The text value of `"name"` in the last JSON object of `out` that has one.
fn field(out: &str, name: &str) -> Option<String> {
    let key = format!("\"{name}\"");
    let at = out.rfind(&key)? + key.len();
    let rest = &out[at..];
    let start = rest.find('"')? + 1;
    let end = rest[start..].find('"')?;
    Some(rest[start..start + end].to_string())
}

fn wait_for_group(nodes: &[&Node]) {
    wait_until(
        "one topology group with a leader, every node at one version",
        nodes,
        || {
            nodes
                .iter()
                .all(|n| info(n, "cluster_topology_leader") != "-")
                && nodes.iter().all(|n| {
                    info(n, "cluster_topology_version")
                        == info(nodes[0], "cluster_topology_version")
                })
        },
    );
}

/// Goal: an operation taken by one node is every node's: another node lists it and
/// follows it to its end, the same request_id sent to another node answers the same
/// operation, and a different request under that request_id is refused there.
/// Method: three primaries, admin ports on two; `operator slots migrate` of 100 slots asked
/// of the first, then the same request (and a different one under its request_id) of the
/// second; `operator ops watch` and `ops list` on the second.
#[test]
fn every_node_knows_every_operation_and_its_request_id() {
    let (p0, p1) = (free_port(), free_port());
    let (a0, a1) = (p0.to_string(), p1.to_string());
    let nodes = vec![
        cluster_node_with(SECRET, &["--admin-port", &a0, "--admin-token", TOKEN]),
        cluster_node_with(SECRET, &["--admin-port", &a1, "--admin-token", TOKEN]),
        cluster_node_with(SECRET, &[]),
    ];
    form_cluster(&nodes, 0);
    let refs: Vec<&Node> = nodes.iter().collect();
    wait_for_group(&refs);
    let target = id(&nodes[1]);
    let source_slots = owner_of(&nodes[0], 0).expect("slot 0 is owned");
    assert_ne!(source_slots, target);

    let ask = |port: u16, slots: &str| {
        admin(
            port,
            &[
                "slots",
                "migrate",
                "--slots",
                slots,
                "--to",
                &target,
                "--request-id",
                "move-1",
                "--no-wait",
                "--json",
            ],
        )
    };
    let first = ask(p0, "0-99");
    assert!(first.status.success(), "{}", text(&first));
    let op = field(&text(&first), "id").expect("an operation id");
    assert_eq!(field(&text(&first), "coordinator_id"), Some(id(&nodes[0])));

    // The same request of another node: the same operation.
    let again = ask(p1, "0-99");
    assert!(again.status.success(), "{}", text(&again));
    assert_eq!(
        field(&text(&again), "id"),
        Some(op.clone()),
        "{}",
        text(&again)
    );
    // Another request under that request_id: refused, naming the operation.
    let other = ask(p1, "100-199");
    assert!(!other.status.success(), "{}", text(&other));
    assert!(text(&other).contains("already names"), "{}", text(&other));
    assert!(text(&other).contains(&op), "{}", text(&other));

    // Followed to its end from the node that does not coordinate it.
    let watched = admin(p1, &["ops", "watch", &op, "--json"]);
    assert!(watched.status.success(), "{}", text(&watched));
    assert_eq!(
        field(&text(&watched), "state").as_deref(),
        Some("SUCCEEDED")
    );
    let listed = admin(p1, &["ops", "list", "--json"]);
    assert!(listed.status.success(), "{}", text(&listed));
    assert!(text(&listed).contains(&op), "{}", text(&listed));
    assert_eq!(owner_of(&nodes[2], 50), Some(target.clone()));
    assert_eq!(owner_of(&nodes[2], 100), Some(source_slots));
}

/// Three primaries (the first with an admin port) and a fourth member without slots, with
/// an admin port too, all in one topology group, `--cluster-node-timeout 1000` (a stopped
/// or forgotten coordinator is found failed fast). Returns the three, the first's admin
/// port, the fourth and its admin port.
fn three_primaries_and_a_fourth() -> (Vec<Node>, u16, Node, u16) {
    let (p0, p4) = (free_port(), free_port());
    let timeout = ["--cluster-node-timeout", "1000"];
    let with = |admin: u16| {
        let admin = admin.to_string();
        let mut args = vec!["--admin-port", &admin, "--admin-token", TOKEN];
        args.extend_from_slice(&timeout);
        cluster_node_with(SECRET, &args)
    };
    let nodes = vec![
        with(p0),
        cluster_node_with(SECRET, &timeout),
        cluster_node_with(SECRET, &timeout),
    ];
    form_cluster(&nodes, 0);
    let fourth = with(p4);
    let added = admin(p0, &["node", "add", &addr(&fourth)]);
    assert!(added.status.success(), "{}", text(&added));
    let all: Vec<&Node> = nodes.iter().chain([&fourth]).collect();
    wait_for_group(&all);
    (nodes, p0, fourth, p4)
}

/// Goal: an operation whose coordinator fails before it ends is adopted by the topology
/// group's leader, which resumes it from the plan the log recorded and ends it: the slots
/// move, every key moves with them, and every node then shows the operation SUCCEEDED,
/// coordinated by the leader.
/// Method: three primaries and a fourth member without slots (the coordinator, with an
/// admin port), `--cluster-node-timeout 1000`; 30,000 keys in the first primary's slots;
/// `slots migrate` of all of them to the second primary asked of the fourth node with
/// `--no-wait`, and the fourth node stopped (SIGSTOP) as soon as it answers; then
/// `ops watch` on the first primary's admin port.
#[test]
fn an_operation_whose_coordinator_fails_is_finished_by_the_leader() {
    let (nodes, p0, coordinator, pc) = three_primaries_and_a_fourth();
    let source = id(&nodes[0]);
    let target = id(&nodes[1]);
    assert_eq!(owner_of(&nodes[0], 0), Some(source.clone()));

    // Keys in the source's slots (0-5460, as redis-cli --cluster create assigns them).
    let mut con = nodes[0].client();
    let keys = keys_in(0, 5460, 30_000);
    for chunk in keys.chunks(1000) {
        let mut pipe = redis::pipe();
        for k in chunk {
            pipe.cmd("SET").arg(k).arg(format!("v-{k}")).ignore();
        }
        pipe.query::<()>(&mut con).unwrap();
    }

    // Asked before the coordinator stops (a stopped node answers nothing).
    let coordinator_id = id(&coordinator);
    let asked = admin(
        pc,
        &[
            "slots",
            "migrate",
            "--slots",
            "0-5460",
            "--to",
            &target,
            "--request-id",
            "orphaned",
            "--no-wait",
            "--json",
        ],
    );
    coordinator.signal("STOP");
    assert!(asked.status.success(), "{}", text(&asked));
    let op = field(&text(&asked), "id").expect("an operation id");
    assert_eq!(
        field(&text(&asked), "coordinator_id"),
        Some(coordinator_id.clone())
    );

    let watched = admin(p0, &["ops", "watch", &op, "--json"]);
    coordinator.signal("CONT");
    assert!(
        watched.status.success(),
        "{}\n{}",
        text(&watched),
        nodes
            .iter()
            .map(|n| n.log())
            .collect::<Vec<_>>()
            .join("\n----\n")
    );
    let out = text(&watched);
    assert_eq!(field(&out, "state").as_deref(), Some("SUCCEEDED"), "{out}");
    let adopter = field(&out, "coordinator_id").expect("a coordinator");
    assert_ne!(adopter, coordinator_id, "{out}");
    assert!(
        nodes.iter().any(|n| n
            .log()
            .contains("adopted an operation whose coordinator failed")),
        "no node adopted it"
    );
    for slot in [0, 2_000, 5_460] {
        assert_eq!(
            owner_of(&nodes[2], slot),
            Some(target.clone()),
            "slot {slot}"
        );
    }
    let mut moved = nodes[1].client();
    for k in keys.iter().step_by(97) {
        let v: Option<String> = redis::cmd("GET").arg(k).query(&mut moved).unwrap();
        assert_eq!(v, Some(format!("v-{k}")), "{k}");
    }
    let count: i64 = redis::cmd("DBSIZE").query(&mut moved).unwrap();
    assert!(count >= keys.len() as i64, "{count}");
    // The coordinator, running again, shows the log's view (the adopter's), not its own
    // worker's, once it has caught up with the log; its worker stood down or finished.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let seen = admin(pc, &["ops", "watch", &op, "--json"]);
        let out = text(&seen);
        if seen.status.success()
            && field(&out, "coordinator_id").as_deref() == Some(adopter.as_str())
        {
            assert_eq!(field(&out, "state").as_deref(), Some("SUCCEEDED"), "{out}");
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the coordinator, back, still shows: {out}"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}

/// Goal: a node asked to drain itself coordinates its own DrainNode: once it has forgotten
/// itself it is outside the log and cannot record the end, so the leader adopts the
/// operation, finds every move and the forget done, and ends it SUCCEEDED (not FAILED for
/// forgetting a node the log no longer has).
/// Method: three primaries and a fourth with an admin port and a few slots; `node drain`
/// of the fourth asked of the fourth itself (`--no-wait`), then `ops watch` on the first.
#[test]
fn a_node_that_drains_itself_ends_its_operation_through_the_leader() {
    let (nodes, p0, drained, pd) = three_primaries_and_a_fourth();
    let drained_id = id(&drained);
    let given = admin(
        p0,
        &["slots", "migrate", "--slots", "0-9", "--to", &drained_id],
    );
    assert!(given.status.success(), "{}", text(&given));

    let asked = admin(pd, &["node", "drain", &drained_id, "--no-wait", "--json"]);
    assert!(asked.status.success(), "{}", text(&asked));
    let op = field(&text(&asked), "id").expect("an operation id");
    let watched = admin(p0, &["ops", "watch", &op, "--json"]);
    let out = text(&watched);
    assert!(watched.status.success(), "{out}");
    assert_eq!(field(&out, "state").as_deref(), Some("SUCCEEDED"), "{out}");
    let refs: Vec<&Node> = nodes.iter().collect();
    wait_until("the others to forget the drained node", &refs, || {
        nodes
            .iter()
            .all(|n| !n.cli(&["CLUSTER", "NODES"]).contains(&drained_id))
    });
    let owner = owner_of(&nodes[1], 5).expect("slot 5 is owned");
    assert!(nodes.iter().any(|n| id(n) == owner), "{owner}");
}
