//! Certificates made at test time with rcgen: a CA, a server certificate and a client
//! certificate it signed, and a second CA with a client certificate of its own (the stranger
//! a node must refuse). All files go to one temporary directory.

use rcgen::{
    BasicConstraints, Certificate, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};
use std::path::PathBuf;

pub struct Pki {
    pub dir: tempfile::TempDir,
}

struct Authority {
    cert: Certificate,
    key: KeyPair,
}

impl Authority {
    fn new(name: &str) -> Authority {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("ca params");
        params.distinguished_name.push(DnType::CommonName, name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let key = KeyPair::generate().expect("ca key");
        let cert = params.self_signed(&key).expect("ca certificate");
        Authority { cert, key }
    }

    /// A leaf certificate for `names` (subject alternative names), for `usage`.
    fn issue(
        &self,
        common_name: &str,
        names: &[&str],
        usage: ExtendedKeyUsagePurpose,
    ) -> (String, String) {
        let names: Vec<String> = names.iter().map(|s| s.to_string()).collect();
        let mut params = CertificateParams::new(names).expect("leaf params");
        params
            .distinguished_name
            .push(DnType::CommonName, common_name);
        params.extended_key_usages = vec![usage];
        let key = KeyPair::generate().expect("leaf key");
        let cert = params
            .signed_by(&key, &self.cert, &self.key)
            .expect("leaf certificate");
        (cert.pem(), key.serialize_pem())
    }
}

impl Pki {
    /// Writes `ca.crt`, `server.crt`/`.key`, `client.crt`/`.key` (signed by the CA),
    /// `cadir/ca.pem` (the CA again, for `tls-ca-cert-dir`), `other-ca.crt` and
    /// `stranger.crt`/`.key` (a client certificate with the same name, signed by the other
    /// CA), and `spare.key` (a key that belongs to no certificate).
    pub fn new() -> Pki {
        let dir = tempfile::Builder::new()
            .prefix("tls-pki-")
            .tempdir()
            .expect("temp dir");
        let write = |name: &str, text: &str| {
            std::fs::write(dir.path().join(name), text).expect("writing a PEM file")
        };
        let ca = Authority::new("test CA");
        write("ca.crt", &ca.cert.pem());
        std::fs::create_dir(dir.path().join("cadir")).expect("cadir");
        write("cadir/ca.pem", &ca.cert.pem());
        let (cert, key) = ca.issue(
            "localhost",
            &["localhost", "127.0.0.1"],
            ExtendedKeyUsagePurpose::ServerAuth,
        );
        write("server.crt", &cert);
        write("server.key", &key);
        let (cert, key) = ca.issue("client", &["client"], ExtendedKeyUsagePurpose::ClientAuth);
        write("client.crt", &cert);
        write("client.key", &key);
        let other = Authority::new("other CA");
        write("other-ca.crt", &other.cert.pem());
        let (cert, key) = other.issue("client", &["client"], ExtendedKeyUsagePurpose::ClientAuth);
        write("stranger.crt", &cert);
        write("stranger.key", &key);
        write(
            "spare.key",
            &KeyPair::generate().expect("spare key").serialize_pem(),
        );
        Pki { dir }
    }

    pub fn path(&self, name: &str) -> String {
        let path: PathBuf = self.dir.path().join(name);
        path.display().to_string()
    }

    /// The node's flags for a TLS port with this PKI's server certificate and CA.
    pub fn server_flags(&self, tls_port: u16) -> Vec<String> {
        vec![
            "--tls-port".into(),
            tls_port.to_string(),
            "--tls-cert-file".into(),
            self.path("server.crt"),
            "--tls-key-file".into(),
            self.path("server.key"),
            "--tls-ca-cert-file".into(),
            self.path("ca.crt"),
        ]
    }

    /// redis-cli's flags: trust the CA and present `who`'s certificate ("client",
    /// "stranger"), or none when `who` is None.
    pub fn client_flags(&self, who: Option<&str>) -> Vec<String> {
        let mut flags = vec!["--cacert".into(), self.path("ca.crt")];
        if let Some(who) = who {
            flags.extend([
                "--cert".into(),
                self.path(&format!("{who}.crt")),
                "--key".into(),
                self.path(&format!("{who}.key")),
            ]);
        }
        flags
    }
}
