//! TLS for clients (`tls-port`), driven by Debian's redis-cli (`--tls`) against real node
//! processes, with certificates made at test time (`tls/pki.rs`).

pub mod pki;

use integration::{free_port, Node};
use pki::Pki;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// `redis-cli --tls -p PORT <tls flags> args...` with `stdin` as its input: whether it exited
/// 0, and its stdout and stderr together without trailing newlines.
fn tls_cli_with_input(port: u16, tls: &[String], args: &[&str], stdin: &[u8]) -> (bool, String) {
    let mut child = Command::new("redis-cli")
        .arg("--tls")
        .arg("-p")
        .arg(port.to_string())
        .args(tls)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("running redis-cli (scripts/install-deps.sh installs it)");
    let mut input = child.stdin.take().expect("stdin");
    input.write_all(stdin).expect("writing redis-cli's input");
    drop(input);
    let out = child.wait_with_output().expect("redis-cli output");
    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&out.stderr));
    (
        out.status.success(),
        text.trim_end_matches('\n').to_string(),
    )
}

fn tls_cli(port: u16, tls: &[String], args: &[&str]) -> (bool, String) {
    tls_cli_with_input(port, tls, args, b"")
}

/// A node with a plain port (for the harness and for looking behind the TLS port) and a TLS
/// port using `pki`, plus `extra` flags. Returns the node and its TLS port.
fn start_tls_node(pki: &Pki, extra: &[&str]) -> (Node, u16) {
    let tls_port = free_port();
    let mut flags = pki.server_flags(tls_port);
    flags.extend(extra.iter().map(|s| s.to_string()));
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    (Node::start(&flags), tls_port)
}

/// Sends `bytes` on a plain TCP connection to `port` and reads until the node closes it or
/// 5 s pass: what came back, and whether the connection was closed.
fn send_raw(port: u16, bytes: &[u8]) -> (Vec<u8>, bool) {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connecting");
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    stream.write_all(bytes).expect("sending");
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let closed = loop {
        match stream.read(&mut buf) {
            Ok(0) => break true,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                break false
            }
            // A reset is a close too.
            Err(_) => break true,
        }
    };
    (got, closed)
}

/// Polls `check` every 50 ms for up to 5 s.
fn eventually(what: &str, check: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting for: {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Goal: `redis-cli --tls` with a CA-signed client certificate is served like a plain
/// client. Method: SET/GET over TLS, read the key back over the plain port, write and read
/// a 2 MB value (replies larger than a socket buffer, so TLS writes have to wait and
/// flush), and look at CLIENT INFO and the TLS settings as CONFIG shows them.
#[test]
fn tls_client_with_certificate_is_served() {
    let pki = Pki::new();
    let (node, tls_port) = start_tls_node(&pki, &[]);
    let client = pki.client_flags(Some("client"));
    assert_eq!(
        tls_cli(tls_port, &client, &["SET", "k", "v"]),
        (true, "OK".into())
    );
    assert_eq!(
        tls_cli(tls_port, &client, &["GET", "k"]),
        (true, "v".into())
    );
    assert_eq!(node.cli(&["GET", "k"]), "v");

    let big = vec![b'x'; 2 << 20];
    let (ok, out) = tls_cli_with_input(tls_port, &client, &["-x", "SET", "big"], &big);
    assert!(ok && out == "OK", "{out}");
    let (ok, out) = tls_cli(tls_port, &client, &["GET", "big"]);
    assert!(ok, "{out}");
    assert_eq!(out.len(), big.len(), "the whole value came back over TLS");
    assert!(out.bytes().all(|b| b == b'x'));

    let (ok, info) = tls_cli(tls_port, &client, &["CLIENT", "INFO"]);
    assert!(ok, "{info}");
    assert!(
        info.contains(&format!("laddr=127.0.0.1:{tls_port}")),
        "{info}"
    );
    assert!(info.contains("addr=127.0.0.1:"), "{info}");
    let (_, list) = tls_cli(tls_port, &client, &["CLIENT", "LIST"]);
    assert!(
        list.contains(&format!("laddr=127.0.0.1:{tls_port}")),
        "{list}"
    );

    assert_eq!(
        node.cli(&["CONFIG", "GET", "tls-port"]),
        format!("tls-port\n{tls_port}")
    );
    assert_eq!(
        node.cli(&["CONFIG", "GET", "tls-auth-clients"]),
        "tls-auth-clients\nyes"
    );
    let refused = node.cli(&["CONFIG", "SET", "tls-cert-file", "/tmp/other.crt"]);
    assert!(refused.contains("immutable"), "{refused}");
    // INFO's tcp_port stays the plain port while there is one (Redis has no tls_port field).
    let info = node.cli(&["INFO", "server"]);
    assert!(info.contains(&format!("tcp_port:{}", node.port)), "{info}");
}

/// Goal: `tls-auth-clients` as in Redis. Method: `yes` (the default) refuses a client with no
/// certificate (its SET never lands) and serves one with; `no` serves a client without a
/// certificate; `optional` serves one without but still refuses a certificate from another
/// CA; a CA given by `tls-ca-cert-dir` verifies like the file.
#[test]
fn tls_auth_clients_yes_no_optional() {
    let pki = Pki::new();
    let anonymous = pki.client_flags(None);
    let client = pki.client_flags(Some("client"));
    let stranger = pki.client_flags(Some("stranger"));

    let (node, tls_port) = start_tls_node(&pki, &[]);
    let (ok, out) = tls_cli(tls_port, &anonymous, &["SET", "anon", "1"]);
    assert!(
        !ok && !out.contains("OK"),
        "served without a certificate: {out}"
    );
    assert_eq!(node.cli(&["EXISTS", "anon"]), "0");
    eventually("the refusal in the log", || {
        node.log().contains("peer sent no certificates")
    });
    assert_eq!(tls_cli(tls_port, &client, &["PING"]), (true, "PONG".into()));
    drop(node);

    let (_node, tls_port) = start_tls_node(&pki, &["--tls-auth-clients", "no"]);
    assert_eq!(
        tls_cli(tls_port, &anonymous, &["PING"]),
        (true, "PONG".into())
    );

    let (node, tls_port) = start_tls_node(&pki, &["--tls-auth-clients", "optional"]);
    assert_eq!(
        tls_cli(tls_port, &anonymous, &["PING"]),
        (true, "PONG".into())
    );
    assert_eq!(tls_cli(tls_port, &client, &["PING"]), (true, "PONG".into()));
    let (ok, out) = tls_cli(tls_port, &stranger, &["SET", "stranger", "1"]);
    assert!(
        !ok && !out.contains("OK"),
        "foreign certificate served: {out}"
    );
    assert_eq!(node.cli(&["EXISTS", "stranger"]), "0");
    drop(node);

    let tls_port = free_port();
    let flags = [
        "--tls-port".to_string(),
        tls_port.to_string(),
        "--tls-cert-file".into(),
        pki.path("server.crt"),
        "--tls-key-file".into(),
        pki.path("server.key"),
        "--tls-ca-cert-dir".into(),
        pki.path("cadir"),
    ];
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let _node = Node::start(&flags);
    assert_eq!(tls_cli(tls_port, &client, &["PING"]), (true, "PONG".into()));
    let (ok, out) = tls_cli(tls_port, &stranger, &["PING"]);
    assert!(!ok && !out.contains("PONG"), "{out}");
    let (ok, out) = tls_cli(tls_port, &anonymous, &["PING"]);
    assert!(!ok && !out.contains("PONG"), "{out}");
}

/// Goal: what an attacker sends to the TLS port gets nothing but a closed connection, and
/// the node goes on serving. Method: plaintext RESP (inline and multibulk) and a TLS
/// record header claiming an oversized record get no RESP reply (at most a TLS alert,
/// whose record type is 0x15) and a closed connection; a client certificate with the right
/// name from another CA is refused and its command never runs; then a good client is served
/// on the TLS port and the plain port still answers.
#[test]
fn tls_port_refuses_plaintext_and_foreign_certificates() {
    let pki = Pki::new();
    let (node, tls_port) = start_tls_node(&pki, &[]);
    for attack in [
        &b"PING\r\n"[..],
        &b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n"[..],
        &[0x16, 0x03, 0x01, 0xff, 0xff, 1, 2, 3, 4][..],
    ] {
        let (reply, closed) = send_raw(tls_port, attack);
        assert!(closed, "connection left open after {attack:?}");
        assert!(
            reply.is_empty() || reply[0] == 0x15,
            "a reply that is not a TLS alert to {attack:?}: {reply:?}"
        );
        assert!(!reply.windows(4).any(|w| w == b"PONG"));
    }
    assert_eq!(node.cli(&["EXISTS", "k"]), "0", "plaintext SET ran");

    let stranger = pki.client_flags(Some("stranger"));
    let (ok, out) = tls_cli(tls_port, &stranger, &["SET", "stranger", "1"]);
    assert!(
        !ok && !out.contains("OK"),
        "foreign certificate served: {out}"
    );
    assert_eq!(node.cli(&["EXISTS", "stranger"]), "0");

    let client = pki.client_flags(Some("client"));
    assert_eq!(
        tls_cli(tls_port, &client, &["SET", "k", "v"]),
        (true, "OK".into())
    );
    assert_eq!(node.cli(&["GET", "k"]), "v");
    assert!(node.log().contains("TLS client refused"));
}

/// Goal: handshakes in flight count against `maxclients`, so silent connections to the TLS
/// port cannot hold more sockets than the limit, and their slots come back when they go.
/// Method: with `maxclients 2`, two TCP connections to the TLS port that never say hello
/// make a plain client get Redis's maxclients error and a TLS client get refused; once they
/// close, both are served again.
#[test]
fn tls_handshakes_in_flight_count_against_maxclients() {
    let pki = Pki::new();
    let (node, tls_port) = start_tls_node(&pki, &[]);
    assert_eq!(node.cli(&["CONFIG", "SET", "maxclients", "2"]), "OK");
    let silent: Vec<TcpStream> = (0..2)
        .map(|_| TcpStream::connect(("127.0.0.1", tls_port)).expect("connecting"))
        .collect();
    eventually("the plain port refusing a third client", || {
        node.cli(&["PING"])
            .contains("max number of clients reached")
    });
    let client = pki.client_flags(Some("client"));
    let (ok, out) = tls_cli(tls_port, &client, &["PING"]);
    assert!(
        !ok && !out.contains("PONG"),
        "TLS client served past maxclients: {out}"
    );
    drop(silent);
    eventually("the plain port serving again", || {
        node.cli(&["PING"]) == "PONG"
    });
    assert_eq!(tls_cli(tls_port, &client, &["PING"]), (true, "PONG".into()));
}

/// Goal: a node may listen on TLS only. Method: `--port 0` with a TLS port: redis-cli over
/// TLS sets and gets, INFO server's tcp_port shows the TLS port (as Redis does when port is
/// 0), and CONFIG GET port says 0.
#[test]
fn tls_only_node_with_port_zero() {
    let pki = Pki::new();
    let tls_port = free_port();
    let client = pki.client_flags(Some("client"));
    let mut flags = vec!["--port".to_string(), "0".into()];
    flags.extend(pki.server_flags(tls_port));
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let _node = Node::start_on_port_waiting_for(tls_port, &flags, |port| {
        tls_cli(port, &client, &["PING"]) == (true, "PONG".into())
    });
    assert_eq!(
        tls_cli(tls_port, &client, &["SET", "k", "v"]),
        (true, "OK".into())
    );
    assert_eq!(
        tls_cli(tls_port, &client, &["GET", "k"]),
        (true, "v".into())
    );
    let (_, info) = tls_cli(tls_port, &client, &["INFO", "server"]);
    assert!(info.contains(&format!("tcp_port:{tls_port}")), "{info}");
    assert_eq!(
        tls_cli(tls_port, &client, &["CONFIG", "GET", "port"]),
        (true, "port\n0".into())
    );
}

/// Goal: a TLS misconfiguration refuses the start and the message names the file (or the
/// setting) to fix. Method: start nodes with a missing setting, a file that does not exist,
/// a file without PEM, broken PEM, a key that is not the certificate's, an encrypted key,
/// `tls-key-file-pass`, client authentication without a CA, a CA file without certificates,
/// and an unsupported protocol; each exits non-zero with that name in its log. Then `port 0`
/// without a TLS port, and in cluster mode.
#[test]
fn tls_misconfiguration_refuses_to_start() {
    let pki = Pki::new();
    let port = free_port().to_string();
    let missing = pki.path("nowhere/server.crt");
    let not_pem = pki.path("not-pem.crt");
    std::fs::write(&not_pem, "this is not a certificate\n").unwrap();
    let broken_pem = pki.path("broken.crt");
    std::fs::write(
        &broken_pem,
        "-----BEGIN CERTIFICATE-----\n!!!! not base64 !!!!\n-----END CERTIFICATE-----\n",
    )
    .unwrap();
    let encrypted = pki.path("encrypted.key");
    std::fs::write(
        &encrypted,
        "-----BEGIN ENCRYPTED PRIVATE KEY-----\nMIIBvTBXBgkqhkiG9w0BBQ0wSjApBgkqhkiG9w0BBQwwHAQI\n-----END ENCRYPTED PRIVATE KEY-----\n",
    )
    .unwrap();
    let (cert, key, ca) = (
        pki.path("server.crt"),
        pki.path("server.key"),
        pki.path("ca.crt"),
    );
    let spare_key = pki.path("spare.key");
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["--tls-key-file", &key, "--tls-ca-cert-file", &ca],
            "tls-cert-file",
        ),
        (
            vec!["--tls-cert-file", &cert, "--tls-ca-cert-file", &ca],
            "tls-key-file",
        ),
        (
            vec![
                "--tls-cert-file",
                &missing,
                "--tls-key-file",
                &key,
                "--tls-ca-cert-file",
                &ca,
            ],
            &missing,
        ),
        (
            vec![
                "--tls-cert-file",
                &not_pem,
                "--tls-key-file",
                &key,
                "--tls-ca-cert-file",
                &ca,
            ],
            &not_pem,
        ),
        (
            vec![
                "--tls-cert-file",
                &broken_pem,
                "--tls-key-file",
                &key,
                "--tls-ca-cert-file",
                &ca,
            ],
            &broken_pem,
        ),
        (
            vec![
                "--tls-cert-file",
                &cert,
                "--tls-key-file",
                &spare_key,
                "--tls-ca-cert-file",
                &ca,
            ],
            "does not match",
        ),
        (
            vec![
                "--tls-cert-file",
                &cert,
                "--tls-key-file",
                &encrypted,
                "--tls-ca-cert-file",
                &ca,
            ],
            &encrypted,
        ),
        (
            vec![
                "--tls-cert-file",
                &cert,
                "--tls-key-file",
                &key,
                "--tls-ca-cert-file",
                &ca,
                "--tls-key-file-pass",
                "secret",
            ],
            "tls-key-file-pass",
        ),
        (
            vec!["--tls-cert-file", &cert, "--tls-key-file", &key],
            "tls-ca-cert-file",
        ),
        (
            vec![
                "--tls-cert-file",
                &cert,
                "--tls-key-file",
                &key,
                "--tls-ca-cert-file",
                &key,
            ],
            &key,
        ),
        (
            vec![
                "--tls-cert-file",
                &cert,
                "--tls-key-file",
                &key,
                "--tls-ca-cert-file",
                &ca,
                "--tls-protocols",
                "TLSv1.1",
            ],
            "TLSv1.1",
        ),
    ];
    for (settings, named) in cases {
        let dir = tempfile::tempdir().unwrap();
        let mut flags = vec!["--tls-port", port.as_str()];
        flags.extend(settings.iter().copied());
        let (status, log) = Node::start_expecting_exit(dir.path(), &flags);
        assert!(!status.success(), "started with {settings:?}");
        assert!(
            log.contains(named),
            "{settings:?}: the log does not name {named}: {log}"
        );
    }
    // Port 0 leaves a node without a plain port: with nothing else to listen on, or in
    // cluster mode (whose bus port derives from it), it does not start either.
    let tls_port = free_port();
    let mut cluster_tls_only = vec!["--port".to_string(), "0".into()];
    cluster_tls_only.extend(pki.server_flags(tls_port));
    cluster_tls_only.extend(["--cluster-enabled".into(), "yes".into()]);
    let cluster_tls_only: Vec<&str> = cluster_tls_only.iter().map(String::as_str).collect();
    for (flags, named) in [
        (vec!["--port", "0"], "not listen anywhere"),
        (cluster_tls_only, "cluster mode needs a TCP port"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let (status, log) = Node::start_expecting_exit(dir.path(), &flags);
        assert!(!status.success(), "started with {flags:?}");
        assert!(log.contains(named), "{flags:?}: {log}");
    }
}
