//! Why the TLS listener could not be set up. Every file problem names the setting and the
//! file, so a refused start says which one to fix.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum TlsSetupError {
    #[error("tls-port is set but {0} is not")]
    Missing(&'static str),
    #[error("either tls-ca-cert-file or tls-ca-cert-dir must be specified when tls-auth-clients is yes or optional")]
    NoCa,
    // The io error is part of this message rather than its `source`, so that `{:#}` does
    // not print it twice.
    #[error("cannot read {setting} '{}': {reason}", .path.display())]
    Read {
        setting: &'static str,
        path: PathBuf,
        reason: std::io::Error,
    },
    #[error("{setting} '{}' is larger than {limit} bytes", .path.display())]
    TooLarge {
        setting: &'static str,
        path: PathBuf,
        limit: u64,
    },
    #[error("tls-ca-cert-dir '{}' holds more than {limit} files", .path.display())]
    TooManyFiles { path: PathBuf, limit: usize },
    #[error("{setting} '{}' is not valid PEM: {reason}", .path.display())]
    BadPem {
        setting: &'static str,
        path: PathBuf,
        reason: String,
    },
    #[error("{setting} '{}' holds no {what}", .path.display())]
    Nothing {
        setting: &'static str,
        path: PathBuf,
        what: &'static str,
    },
    #[error("tls-key-file '{}' holds an encrypted private key; tls-key-file-pass is not supported: give an unencrypted key (openssl pkey -in enc.key -out plain.key)", .path.display())]
    EncryptedKey { path: PathBuf },
    #[error("tls-key-file '{}' holds a key that cannot be used: {reason}", .path.display())]
    BadKey { path: PathBuf, reason: String },
    #[error("tls-cert-file '{}' holds a certificate that cannot be used: {reason}", .path.display())]
    BadCert { path: PathBuf, reason: String },
    #[error("tls-key-file '{}' does not match the certificate in tls-cert-file '{}'", .key.display(), .cert.display())]
    KeyMismatch { cert: PathBuf, key: PathBuf },
    #[error("{setting} '{}' holds a certificate that cannot be a CA: {reason}", .path.display())]
    BadCa {
        setting: &'static str,
        path: PathBuf,
        reason: String,
    },
    #[error("the client certificate verifier cannot be built: {0}")]
    Verifier(String),
    #[error("tls-protocols and tls-ciphersuites leave nothing to use: {0}")]
    Protocols(String),
}
