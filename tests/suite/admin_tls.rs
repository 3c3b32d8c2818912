//! The admin API over TLS (`admin-tls-cert-file`, `admin-tls-key-file`,
//! `admin-tls-ca-cert-file`; issue 17), against real node processes with certificates made at
//! test time (`tls/pki.rs`), driven by the `operator` binary and by Python's grpcio (which
//! demands ALPN `h2`). The attacker here is a local process without the CA's certificate, or
//! speaking plain HTTP/2, or holding sockets half-open.

use crate::tls::pki::Pki;
use integration::{free_port, operator, Node};
use std::net::TcpStream;
use std::process::Output;

const TOKEN: &str = "admin-tls-token";

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// A node whose admin API serves TLS with the PKI's server certificate; `mutual` also asks
/// callers for a certificate the PKI's CA signed.
fn tls_admin_node(pki: &Pki, mutual: bool) -> (Node, u16) {
    let port = free_port();
    let mut flags = vec![
        "--admin-port".to_string(),
        port.to_string(),
        "--admin-token".into(),
        TOKEN.into(),
        "--admin-tls-cert-file".into(),
        pki.path("server.crt"),
        "--admin-tls-key-file".into(),
        pki.path("server.key"),
    ];
    if mutual {
        flags.extend(["--admin-tls-ca-cert-file".into(), pki.path("ca.crt")]);
    }
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    (Node::start(&flags), port)
}

/// `operator ops list` against the admin port, with `tls` flags (none: plain HTTP/2).
fn list_operations(port: u16, token: &str, tls: &[String]) -> Output {
    let at = format!("127.0.0.1:{port}");
    let mut cmd = operator(&["ops", "list", "--admin", &at, "--token", token]);
    cmd.args(tls);
    cmd.output().expect("running operator")
}

fn tls_flags(pki: &Pki, who: Option<&str>) -> Vec<String> {
    let mut flags = vec!["--tls-ca".to_string(), pki.path("ca.crt")];
    if let Some(who) = who {
        flags.extend([
            "--tls-cert".into(),
            pki.path(&format!("{who}.crt")),
            "--tls-key".into(),
            pki.path(&format!("{who}.key")),
        ]);
    }
    flags
}

/// Python's grpcio over TLS: `operations N` or `refused CODE`.
fn python_list_operations(port: u16, pki: &Pki, who: Option<&str>) -> String {
    let proto_dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../proto");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/py/admin_tls_client.py");
    let mut cmd = std::process::Command::new("/usr/bin/python3");
    cmd.args([
        script,
        proto_dir,
        &format!("localhost:{port}"),
        TOKEN,
        &pki.path("ca.crt"),
    ]);
    if let Some(who) = who {
        cmd.args([
            pki.path(&format!("{who}.crt")),
            pki.path(&format!("{who}.key")),
        ]);
    }
    let out = cmd
        .output()
        .expect("/usr/bin/python3 (scripts/install-deps.sh installs python3-grpc-tools)");
    assert!(out.status.success(), "{}", text(&out));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[test]
fn mutual_tls_admits_only_callers_with_a_certificate_of_the_ca() {
    let pki = Pki::new();
    let (node, port) = tls_admin_node(&pki, true);
    assert!(
        node.log()
            .lines()
            // The log's fields are coloured: `tls` and `true` apart.
            .any(|l| l.contains("admin API (gRPC) ready")
                && l.contains("tls")
                && l.contains("true")),
        "{}",
        node.log()
    );
    // Sockets that connect and say nothing hold a handshake each, in its own task: a
    // certified caller is served beside them.
    let idle: Vec<TcpStream> = (0..8)
        .map(|_| TcpStream::connect(("127.0.0.1", port)).expect("connecting"))
        .collect();
    let out = list_operations(port, TOKEN, &tls_flags(&pki, Some("client")));
    assert!(out.status.success(), "{}", text(&out));
    drop(idle);

    // The certificate opens the TLS session; the token is still asked after it.
    let out = list_operations(port, "wrong", &tls_flags(&pki, Some("client")));
    assert!(!out.status.success());
    assert!(text(&out).contains("Unauthenticated"), "{}", text(&out));

    let refused = [
        ("no client certificate", tls_flags(&pki, None)),
        (
            "a certificate of another CA",
            tls_flags(&pki, Some("stranger")),
        ),
        ("plain HTTP/2", Vec::new()),
    ];
    for (what, flags) in refused {
        let out = list_operations(port, TOKEN, &flags);
        assert!(!out.status.success(), "{what} was let in: {}", text(&out));
    }

    assert_eq!(
        python_list_operations(port, &pki, Some("client")),
        "operations 0"
    );
    assert_eq!(
        python_list_operations(port, &pki, Some("stranger")),
        "refused UNAVAILABLE"
    );
}

#[test]
fn server_only_tls_serves_callers_that_trust_its_ca() {
    let pki = Pki::new();
    let (_node, port) = tls_admin_node(&pki, false);
    let out = list_operations(port, TOKEN, &tls_flags(&pki, None));
    assert!(out.status.success(), "{}", text(&out));
    let out = list_operations(port, TOKEN, &[]);
    assert!(!out.status.success(), "plain HTTP/2 was served");
    // A caller that trusts another CA does not take the node's certificate.
    let other_ca = vec!["--tls-ca".to_string(), pki.path("other-ca.crt")];
    let out = list_operations(port, TOKEN, &other_ca);
    assert!(!out.status.success(), "{}", text(&out));
    assert_eq!(python_list_operations(port, &pki, None), "operations 0");
}

#[test]
fn bad_admin_tls_settings_refuse_the_start_naming_the_setting() {
    let pki = Pki::new();
    let port = free_port().to_string();
    let (cert, key, ca, spare) = (
        pki.path("server.crt"),
        pki.path("server.key"),
        pki.path("ca.crt"),
        pki.path("spare.key"),
    );
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["--admin-tls-cert-file", &cert],
            "admin-port is set but admin-tls-key-file is not",
        ),
        (
            vec!["--admin-tls-ca-cert-file", &ca],
            "admin-tls-ca-cert-file is set but admin-tls-cert-file",
        ),
        (
            vec![
                "--admin-tls-cert-file",
                &cert,
                "--admin-tls-key-file",
                &key,
                "--admin-tls-ca-cert-file",
                "/nonexistent/ca.crt",
            ],
            "cannot read admin-tls-ca-cert-file '/nonexistent/ca.crt'",
        ),
        (
            vec![
                "--admin-tls-cert-file",
                &cert,
                "--admin-tls-key-file",
                &spare,
            ],
            "admin-tls-key-file",
        ),
    ];
    for (flags, expected) in cases {
        let dir = tempfile::tempdir().unwrap();
        let mut all = vec!["--admin-port", port.as_str()];
        all.extend(flags.iter().copied());
        let (status, log) = Node::start_expecting_exit(dir.path(), &all);
        assert!(!status.success(), "{flags:?} started");
        assert!(log.contains(expected), "{flags:?}: {log}");
    }
}

/// Goal: sockets that connect to the TLS admin port and never handshake hold at most
/// `ADMIN_HANDSHAKES_MAX` handshakes (64, `node/src/server/admin/tls.rs`); a connection
/// beyond them is closed at once, neither queued nor left open, and once the holders go a
/// certified caller is served again. Without the bound the extra socket would wait for its
/// handshake like the others (the read below would time out).
#[test]
fn half_open_sockets_beyond_the_handshake_bound_are_closed_at_once() {
    const HANDSHAKES_MAX: usize = 64;
    let pki = Pki::new();
    let (_node, port) = tls_admin_node(&pki, false);
    let holders: Vec<TcpStream> = (0..HANDSHAKES_MAX)
        .map(|_| TcpStream::connect(("127.0.0.1", port)).expect("connecting"))
        .collect();
    // Accepted in the order they connected: the holders take every slot first.
    let mut extra = TcpStream::connect(("127.0.0.1", port)).expect("connecting");
    extra
        .set_read_timeout(Some(std::time::Duration::from_secs(5)))
        .unwrap();
    let mut byte = [0u8; 1];
    match std::io::Read::read(&mut extra, &mut byte) {
        Ok(0) => {}
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
        other => panic!("the connection beyond the bound was not closed: {other:?}"),
    }
    drop(holders);
    // The holders' handshakes end as their sockets close; then callers are served.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
    loop {
        let out = list_operations(port, TOKEN, &tls_flags(&pki, None));
        if out.status.success() {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "not served after the holders left: {}",
            text(&out)
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}
