//! Prometheus metrics on `metrics-port` (issue 17): the scrape parsed by Prometheus's own
//! parser (python3-prometheus-client) shows what the node did; the bind and token rules; a
//! scraper that misbehaves (wrong method, path, token, oversized or slow request, too many
//! at once) is answered with an HTTP error and never stalls the others.

use integration::cluster::cluster_node_with;
use integration::{free_port, Node};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::Duration;

const TOKEN: &str = "metrics-test-token";

/// One raw HTTP exchange: the status line and the body.
fn http(port: u16, request: &str) -> (String, String) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    let (head, body) = out.split_once("\r\n\r\n").unwrap_or((&out, ""));
    (
        head.lines().next().unwrap_or("").to_string(),
        body.to_string(),
    )
}

pub(crate) fn scrape(port: u16, token: Option<&str>) -> (String, String) {
    let auth = token.map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
    http(
        port,
        &format!("GET /metrics HTTP/1.1\r\nHost: x\r\n{auth}\r\n"),
    )
}

/// The samples as Prometheus's parser reads them (`type name{labels} value` lines).
pub(crate) fn parsed(body: &str) -> Vec<String> {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/py/parse_metrics.py");
    let mut child = Command::new("/usr/bin/python3")
        .arg(script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("/usr/bin/python3 (scripts/install-deps.sh installs python3-prometheus-client)");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(body.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "not valid exposition text: {}\n{body}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

pub(crate) fn has(samples: &[String], line: &str) -> bool {
    samples.iter().any(|s| s == line)
}

#[test]
fn a_scrape_shows_what_the_node_did_in_valid_exposition_format() {
    let port = free_port();
    let node = Node::start(&["--metrics-port", &port.to_string()]);
    assert!(
        node.log()
            .lines()
            .any(|l| l.contains("metrics (Prometheus) ready")
                && l.contains(&format!("127.0.0.1:{port}"))),
        "{}",
        node.log()
    );
    node.cli(&["SET", "a", "1"]);
    node.cli(&["SET", "b", "2"]);
    node.cli(&["GET", "a"]);
    node.cli(&["GET", "missing"]);
    node.cli(&["EXPIRE", "b", "100"]);
    let (status, body) = scrape(port, None);
    assert_eq!(status, "HTTP/1.1 200 OK", "{body}");
    let samples = parsed(&body);
    for line in [
        "gauge redis_up{} 1.0",
        "counter redis_commands_total{cmd=set} 2.0",
        "counter redis_commands_total{cmd=get} 2.0",
        "gauge redis_db_keys{db=db0} 2.0",
        "gauge redis_db_keys_expiring{db=db0} 1.0",
        "counter redis_keyspace_hits_total{} 1.0",
        "counter redis_keyspace_misses_total{} 1.0",
        "histogram rdma_store_command_latency_seconds_count{cmd=set} 2.0",
        "histogram rdma_store_command_latency_seconds_bucket{cmd=set,le=+Inf} 2.0",
        "gauge redis_cluster_enabled{} 0.0",
        "gauge redis_connected_slaves{} 0.0",
    ] {
        assert!(
            has(&samples, line),
            "no `{line}` in:\n{}",
            samples.join("\n")
        );
    }
    // Buckets are cumulative: never decreasing along `le`.
    let set_buckets: Vec<f64> = samples
        .iter()
        .filter(|s| s.contains("latency_seconds_bucket{cmd=set,"))
        .map(|s| s.rsplit(' ').next().unwrap().parse().unwrap())
        .collect();
    assert!(set_buckets.len() > 10, "{samples:?}");
    assert!(
        set_buckets.windows(2).all(|w| w[0] <= w[1]),
        "{set_buckets:?}"
    );
}

#[test]
fn the_token_the_method_the_path_and_the_request_size_are_enforced() {
    let port = free_port();
    let _node = Node::start(&[
        "--metrics-port",
        &port.to_string(),
        "--metrics-token",
        TOKEN,
    ]);
    for token in [None, Some("wrong")] {
        let (status, _) = scrape(port, token);
        assert_eq!(status, "HTTP/1.1 401 Unauthorized", "token {token:?}");
    }
    assert_eq!(scrape(port, Some(TOKEN)).0, "HTTP/1.1 200 OK");
    let (status, _) = http(port, "POST /metrics HTTP/1.1\r\n\r\n");
    assert_eq!(status, "HTTP/1.1 405 Method Not Allowed");
    let (status, _) = http(
        port,
        &format!("GET /admin HTTP/1.1\r\nAuthorization: Bearer {TOKEN}\r\n\r\n"),
    );
    assert_eq!(status, "HTTP/1.1 404 Not Found");
    let (status, _) = http(port, "GARBAGE\r\n\r\n");
    assert_eq!(status, "HTTP/1.1 400 Bad Request");
    // A head that never ends: refused once past the limit, not buffered without bound.
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let _ =
        s.write_all(format!("GET /metrics HTTP/1.1\r\nX: {}", "a".repeat(64 * 1024)).as_bytes());
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    assert!(out.starts_with("HTTP/1.1 400 Bad Request"), "{out:.200}");
}

#[test]
fn idle_connections_cannot_starve_scrapes_for_long() {
    let port = free_port();
    let _node = Node::start(&["--metrics-port", &port.to_string()]);
    // Hold every scrape place with connections that send nothing.
    let idle: Vec<TcpStream> = (0..8)
        .map(|_| TcpStream::connect(("127.0.0.1", port)).unwrap())
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    let (status, _) = scrape(port, None);
    assert_eq!(status, "HTTP/1.1 503 Service Unavailable");
    // The idle ones are dropped after the request timeout (5 s); then scrapes work again.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let (status, _) = scrape(port, None);
        if status == "HTTP/1.1 200 OK" {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "still {status}");
        std::thread::sleep(Duration::from_millis(500));
    }
    drop(idle);
}

#[test]
fn a_non_loopback_metrics_bind_without_a_token_refuses_to_start() {
    let dir = tempfile::tempdir().unwrap();
    let p = free_port().to_string();
    let (status, log) = Node::start_expecting_exit(
        dir.path(),
        &["--metrics-port", &p, "--metrics-bind", "0.0.0.0"],
    );
    assert!(!status.success());
    assert!(
        log.contains("metrics-token is empty") && log.contains("refusing to start"),
        "{log}"
    );
}

#[test]
fn a_cluster_node_shows_its_slots_and_per_slot_detail_on_request() {
    let port = free_port();
    let node = cluster_node_with(
        "metrics-secret",
        &[
            "--metrics-port",
            &port.to_string(),
            "--metrics-slot-detail",
            "yes",
        ],
    );
    assert_eq!(node.cli(&["CLUSTER", "ADDSLOTSRANGE", "0", "16383"]), "OK");
    integration::cluster::wait_until("the cluster state to be ok", &[&node], || {
        node.cli(&["CLUSTER", "INFO"]).contains("cluster_state:ok")
    });
    node.cli(&["SET", "foo", "bar"]); // slot 12182
    let samples = parsed(&scrape(port, None).1);
    for line in [
        "gauge redis_cluster_enabled{} 1.0",
        "gauge redis_cluster_state{} 1.0",
        "gauge redis_cluster_slots_assigned{} 16384.0",
        "gauge rdma_store_cluster_slots_owned{} 16384.0",
        "gauge rdma_store_slot_keys{slot=12182} 1.0",
    ] {
        assert!(
            has(&samples, line),
            "no `{line}` in:\n{}",
            samples.join("\n")
        );
    }
    let slot_series = samples
        .iter()
        .filter(|s| s.starts_with("gauge rdma_store_slot_keys{"))
        .count();
    assert_eq!(slot_series, 1, "only slots holding keys get a series");
    assert!(samples
        .iter()
        .any(|s| s.starts_with("counter rdma_store_bus_messages_sent_total{type=ping}")));
}
