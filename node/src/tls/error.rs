//! Why the TLS listener could not be set up. Every file problem names the setting and the
//! file, so a refused start says which one to fix.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum TlsSetupError {
    #[error("{port} is set but {setting} is not")]
    Missing {
        port: &'static str,
        setting: &'static str,
    },
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
    #[error("{setting} '{}' holds more than {limit} files", .path.display())]
    TooManyFiles {
        setting: &'static str,
        path: PathBuf,
        limit: usize,
    },
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
    #[error("{setting} '{}' holds an encrypted private key; tls-key-file-pass is not supported: give an unencrypted key (openssl pkey -in enc.key -out plain.key)", .path.display())]
    EncryptedKey {
        setting: &'static str,
        path: PathBuf,
    },
    #[error("{setting} '{}' holds a key that cannot be used: {reason}", .path.display())]
    BadKey {
        setting: &'static str,
        path: PathBuf,
        reason: String,
    },
    #[error("{setting} '{}' holds a certificate that cannot be used: {reason}", .path.display())]
    BadCert {
        setting: &'static str,
        path: PathBuf,
        reason: String,
    },
    #[error("{key_setting} '{}' does not match the certificate in {cert_setting} '{}'", .key.display(), .cert.display())]
    KeyMismatch {
        cert_setting: &'static str,
        key_setting: &'static str,
        cert: PathBuf,
        key: PathBuf,
    },
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
