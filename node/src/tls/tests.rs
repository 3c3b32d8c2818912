//! The TLS context and handshake against rustls clients over in-memory pipes: time limits,
//! plaintext, and what `tls-protocols` / `tls-ciphersuites` let through.

use super::{acceptor, handshake, HandshakeError, TlsSetupError};
use crate::tls::settings::{Tls13Suite, TlsAuthClients, TlsConfig, TlsProtocol};
use rustls::pki_types::ServerName;
use rustls::{ClientConfig, RootCertStore, SupportedCipherSuite};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_rustls::TlsConnector;

/// A CA and a server certificate for "localhost", written to a temporary directory.
struct Files {
    dir: tempfile::TempDir,
    ca_der: Vec<u8>,
}

impl Files {
    fn new() -> Files {
        use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
        let dir = tempfile::tempdir().unwrap();
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca_key = KeyPair::generate().unwrap();
        let ca = ca_params.self_signed(&ca_key).unwrap();
        let key = KeyPair::generate().unwrap();
        let cert = CertificateParams::new(vec!["localhost".to_string()])
            .unwrap()
            .signed_by(&key, &ca, &ca_key)
            .unwrap();
        std::fs::write(dir.path().join("ca.crt"), ca.pem()).unwrap();
        std::fs::write(dir.path().join("server.crt"), cert.pem()).unwrap();
        std::fs::write(dir.path().join("server.key"), key.serialize_pem()).unwrap();
        Files {
            dir,
            ca_der: ca.der().to_vec(),
        }
    }

    fn path(&self, name: &str) -> String {
        self.dir.path().join(name).display().to_string()
    }

    /// A TLS config serving this certificate, not asking clients for theirs.
    fn config(&self) -> TlsConfig {
        TlsConfig {
            port: 1,
            cert_file: self.path("server.crt"),
            key_file: self.path("server.key"),
            auth_clients: TlsAuthClients::No,
            ..TlsConfig::default()
        }
    }

    fn client(
        &self,
        versions: &[&'static rustls::SupportedProtocolVersion],
        suites: &[SupportedCipherSuite],
    ) -> TlsConnector {
        let mut provider = rustls::crypto::ring::default_provider();
        if !suites.is_empty() {
            provider.cipher_suites = suites.to_vec();
        }
        let mut roots = RootCertStore::empty();
        roots.add(self.ca_der.clone().into()).unwrap();
        let config = ClientConfig::builder_with_provider(Arc::new(provider))
            .with_protocol_versions(versions)
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        TlsConnector::from(Arc::new(config))
    }
}

/// Runs a handshake between the node's acceptor for `config` and `client`; on success,
/// the suite they agreed on.
async fn try_handshake(
    config: &TlsConfig,
    client: TlsConnector,
) -> Result<rustls::CipherSuite, HandshakeError> {
    let acceptor = acceptor(config).unwrap().unwrap();
    let (client_end, server_end) = tokio::io::duplex(64 * 1024);
    let name = ServerName::try_from("localhost").unwrap();
    let (server, client) = tokio::join!(
        handshake(&acceptor, server_end, Duration::from_secs(5)),
        client.connect(name, client_end)
    );
    // A refused client may finish its side first (TLS 1.3); the server's verdict counts.
    let server = server?;
    let _ = client;
    Ok(server
        .get_ref()
        .1
        .negotiated_cipher_suite()
        .expect("a suite after the handshake")
        .suite())
}

/// Goal: a peer that connects and says nothing is let go at the time limit. Method: a pipe
/// whose other end stays silent, a 100 ms limit.
#[tokio::test]
async fn silent_peer_times_out() {
    let files = Files::new();
    let acceptor = acceptor(&files.config()).unwrap().unwrap();
    let (_silent, server_end) = tokio::io::duplex(1024);
    let started = Instant::now();
    let result = handshake(&acceptor, server_end, Duration::from_millis(100)).await;
    assert!(matches!(result, Err(HandshakeError::TimedOut(_))));
    assert!(started.elapsed() < Duration::from_secs(2));
}

/// Goal: plaintext RESP ends the handshake at once with an error, not at the time limit and
/// not with a panic. Method: write `PING\r\n` into the pipe; the server side fails within a
/// second of a 10 s limit, and what it sent back (if anything) is a TLS alert, not RESP.
#[tokio::test]
async fn plaintext_peer_fails_at_once() {
    let files = Files::new();
    let acceptor = acceptor(&files.config()).unwrap().unwrap();
    let (mut peer, server_end) = tokio::io::duplex(1024);
    peer.write_all(b"PING\r\n").await.unwrap();
    let started = Instant::now();
    let result = handshake(&acceptor, server_end, Duration::from_secs(10)).await;
    assert!(matches!(result, Err(HandshakeError::Failed(_))));
    assert!(started.elapsed() < Duration::from_secs(1));
    let mut reply = Vec::new();
    peer.read_to_end(&mut reply).await.unwrap();
    assert!(reply.is_empty() || reply[0] == 0x15, "{reply:?}");
}

/// Goal: `tls-protocols` limits the versions. Method: a TLSv1.2-only node refuses a
/// TLSv1.3-only client and serves a TLSv1.2 one.
#[tokio::test]
async fn protocols_limit_versions() {
    let files = Files::new();
    let mut config = files.config();
    config.protocols = vec![TlsProtocol::Tls12];
    let tls13_only = files.client(&[&rustls::version::TLS13], &[]);
    assert!(try_handshake(&config, tls13_only).await.is_err());
    let tls12 = files.client(&[&rustls::version::TLS12], &[]);
    assert!(try_handshake(&config, tls12).await.is_ok());
}

/// Goal: `tls-ciphersuites` limits the TLSv1.3 suites. Method: a node limited to ChaCha20
/// refuses a client offering only AES-128-GCM and agrees on ChaCha20 with one offering
/// both.
#[tokio::test]
async fn ciphersuites_limit_tls13_suites() {
    use rustls::crypto::ring::cipher_suite::{
        TLS13_AES_128_GCM_SHA256, TLS13_CHACHA20_POLY1305_SHA256,
    };
    let files = Files::new();
    let mut config = files.config();
    config.ciphersuites = vec![Tls13Suite::Chacha20Poly1305Sha256];
    let tls13 = [&rustls::version::TLS13];
    let aes_only = files.client(&tls13, &[TLS13_AES_128_GCM_SHA256]);
    assert!(try_handshake(&config, aes_only).await.is_err());
    let both = files.client(
        &tls13,
        &[TLS13_AES_128_GCM_SHA256, TLS13_CHACHA20_POLY1305_SHA256],
    );
    assert_eq!(
        try_handshake(&config, both).await.unwrap(),
        rustls::CipherSuite::TLS13_CHACHA20_POLY1305_SHA256
    );
}

/// Goal: the CA settings are checked at start. Method: client authentication without a CA,
/// a CA directory without certificates, and a directory that does not exist are refused,
/// each naming what to fix; a directory holding the CA is taken.
#[test]
fn ca_settings_are_checked() {
    let files = Files::new();
    let mut config = files.config();
    config.auth_clients = TlsAuthClients::Yes;
    assert!(matches!(acceptor(&config), Err(TlsSetupError::NoCa)));
    let empty = files.dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    std::fs::write(empty.join("README"), "no certificates here\n").unwrap();
    config.ca_cert_dir = empty.display().to_string();
    let err = acceptor(&config).err().expect("an empty CA dir refused");
    assert!(err.to_string().contains(&config.ca_cert_dir), "{err}");
    config.ca_cert_dir = files.path("nowhere");
    let err = acceptor(&config).err().expect("a missing CA dir refused");
    assert!(err.to_string().contains("nowhere"), "{err}");
    config.ca_cert_dir = empty.display().to_string();
    std::fs::copy(files.path("ca.crt"), empty.join("ca.pem")).unwrap();
    assert!(acceptor(&config).is_ok());
}
