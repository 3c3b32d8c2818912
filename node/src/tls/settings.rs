//! The `tls-*` settings (redis.conf names) of the TLS listener for clients. Files are only
//! named here; they are read, and a bad one refuses the start, when the listener is set up
//! ([`super::context`]).

/// `tls-auth-clients`: whether a client must present a certificate signed by the CA.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlsAuthClients {
    /// Required and verified (Redis's default).
    Yes,
    /// Not asked for.
    No,
    /// Asked for; verified when given, but a client may present none.
    Optional,
}

impl TlsAuthClients {
    pub fn name(self) -> &'static str {
        match self {
            TlsAuthClients::Yes => "yes",
            TlsAuthClients::No => "no",
            TlsAuthClients::Optional => "optional",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s.to_ascii_lowercase().as_str() {
            "yes" => Some(TlsAuthClients::Yes),
            "no" => Some(TlsAuthClients::No),
            "optional" => Some(TlsAuthClients::Optional),
            _ => None,
        }
    }
}

/// A TLS protocol version `tls-protocols` may name. rustls implements 1.2 and 1.3 only;
/// the older names Redis accepts are refused with a reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlsProtocol {
    Tls12,
    Tls13,
}

impl TlsProtocol {
    pub fn name(self) -> &'static str {
        match self {
            TlsProtocol::Tls12 => "TLSv1.2",
            TlsProtocol::Tls13 => "TLSv1.3",
        }
    }
}

/// Parses `tls-protocols` ("TLSv1.2 TLSv1.3", case-insensitive as in Redis). Empty means
/// both.
pub fn parse_protocols(v: &str) -> Result<Vec<TlsProtocol>, String> {
    let mut protocols = Vec::new();
    for word in v.split_whitespace() {
        let protocol = match word.to_ascii_lowercase().as_str() {
            "tlsv1.2" => TlsProtocol::Tls12,
            "tlsv1.3" => TlsProtocol::Tls13,
            "tlsv1" | "tlsv1.1" => {
                return Err(format!(
                    "tls-protocols: {word} is not supported (TLSv1.2 and TLSv1.3 are)"
                ))
            }
            _ => return Err(format!("tls-protocols: unknown protocol '{word}'")),
        };
        if !protocols.contains(&protocol) {
            protocols.push(protocol);
        }
    }
    Ok(protocols)
}

/// A TLSv1.3 cipher suite `tls-ciphersuites` may name (OpenSSL's names): the three rustls
/// offers with the ring provider. OpenSSL's CCM suites are refused with a reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tls13Suite {
    Aes128GcmSha256,
    Aes256GcmSha384,
    Chacha20Poly1305Sha256,
}

impl Tls13Suite {
    const NAMES: [(Tls13Suite, &'static str); 3] = [
        (Tls13Suite::Aes128GcmSha256, "TLS_AES_128_GCM_SHA256"),
        (Tls13Suite::Aes256GcmSha384, "TLS_AES_256_GCM_SHA384"),
        (
            Tls13Suite::Chacha20Poly1305Sha256,
            "TLS_CHACHA20_POLY1305_SHA256",
        ),
    ];

    pub fn name(self) -> &'static str {
        Self::NAMES
            .iter()
            .find(|(s, _)| *s == self)
            .map(|(_, n)| *n)
            .unwrap_or("TLS_AES_128_GCM_SHA256")
    }
}

/// Parses `tls-ciphersuites`: OpenSSL's colon-separated TLSv1.3 suite names, in order of
/// preference. Empty means rustls's own list.
pub fn parse_tls13_suites(v: &str) -> Result<Vec<Tls13Suite>, String> {
    let mut suites = Vec::new();
    for word in v.split(':').map(str::trim).filter(|w| !w.is_empty()) {
        let suite = Tls13Suite::NAMES
            .iter()
            .find(|(_, n)| n.eq_ignore_ascii_case(word))
            .map(|(s, _)| *s)
            .ok_or_else(|| {
                format!(
                    "tls-ciphersuites: '{word}' is not supported (TLS_AES_128_GCM_SHA256, TLS_AES_256_GCM_SHA384 and TLS_CHACHA20_POLY1305_SHA256 are)"
                )
            })?;
        if !suites.contains(&suite) {
            suites.push(suite);
        }
    }
    Ok(suites)
}

/// The names of the settings a TLS context is built from, so that an error names the setting
/// to fix: `tls-*` for the client port, `admin-tls-*` for the admin API.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SettingNames {
    pub port: &'static str,
    pub cert_file: &'static str,
    pub key_file: &'static str,
    pub ca_cert_file: &'static str,
    pub ca_cert_dir: &'static str,
}

/// The client port's settings (Redis's names).
pub const CLIENT_TLS_SETTINGS: SettingNames = SettingNames {
    port: "tls-port",
    cert_file: "tls-cert-file",
    key_file: "tls-key-file",
    ca_cert_file: "tls-ca-cert-file",
    ca_cert_dir: "tls-ca-cert-dir",
};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsConfig {
    /// `tls-port`: 0 (the default) opens no TLS listener.
    pub port: u16,
    pub cert_file: String,
    pub key_file: String,
    pub ca_cert_file: String,
    pub ca_cert_dir: String,
    pub auth_clients: TlsAuthClients,
    /// `tls-protocols`; empty: TLSv1.2 and TLSv1.3.
    pub protocols: Vec<TlsProtocol>,
    /// `tls-ciphersuites` (TLSv1.3), in order of preference; empty: rustls's.
    pub ciphersuites: Vec<Tls13Suite>,
    /// `tls-ciphers` (TLSv1.2, an OpenSSL cipher string): accepted and not applied; rustls's
    /// TLSv1.2 suites are its fixed set of ECDHE with AEAD ciphers.
    pub ciphers: String,
    /// `tls-prefer-server-ciphers`: pick the cipher suite by the server's order.
    pub prefer_server_ciphers: bool,
}

impl Default for TlsConfig {
    fn default() -> Self {
        TlsConfig {
            port: 0,
            cert_file: String::new(),
            key_file: String::new(),
            ca_cert_file: String::new(),
            ca_cert_dir: String::new(),
            auth_clients: TlsAuthClients::Yes,
            protocols: Vec::new(),
            ciphersuites: Vec::new(),
            ciphers: String::new(),
            prefer_server_ciphers: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protocols_parse_as_redis_names_them() {
        assert_eq!(parse_protocols(""), Ok(vec![]));
        assert_eq!(
            parse_protocols("TLSv1.2 tlsv1.3 TLSv1.2"),
            Ok(vec![TlsProtocol::Tls12, TlsProtocol::Tls13])
        );
        assert!(parse_protocols("TLSv1.1")
            .unwrap_err()
            .contains("not supported"));
        assert!(parse_protocols("SSLv3").unwrap_err().contains("unknown"));
    }

    #[test]
    fn ciphersuites_take_openssl_names() {
        assert_eq!(
            parse_tls13_suites("TLS_CHACHA20_POLY1305_SHA256:TLS_AES_256_GCM_SHA384"),
            Ok(vec![
                Tls13Suite::Chacha20Poly1305Sha256,
                Tls13Suite::Aes256GcmSha384
            ])
        );
        assert_eq!(parse_tls13_suites(""), Ok(vec![]));
        assert!(parse_tls13_suites("TLS_AES_128_CCM_SHA256").is_err());
    }

    #[test]
    fn auth_clients_takes_three_values() {
        for v in ["yes", "no", "optional"] {
            assert_eq!(TlsAuthClients::parse(v).map(|a| a.name()), Some(v));
        }
        assert_eq!(TlsAuthClients::parse("maybe"), None);
    }
}
