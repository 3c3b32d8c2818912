//! The rustls server context of the TLS listener, built once at start from the `tls-*`
//! settings. Any problem refuses the start with the setting and file it comes from.

use super::error::TlsSetupError;
use super::files;
use crate::tls::settings::{
    SettingNames, Tls13Suite, TlsAuthClients, TlsConfig, TlsProtocol, CLIENT_TLS_SETTINGS,
};
use rustls::crypto::ring::{cipher_suite, default_provider};
use rustls::crypto::CryptoProvider;
use rustls::server::danger::ClientCertVerifier;
use rustls::server::{ServerConfig, WebPkiClientVerifier};
use rustls::SupportedProtocolVersion;
use std::path::Path;
use std::sync::Arc;
use tokio_rustls::TlsAcceptor;

/// The acceptor for `tls-port`, or None when `tls-port` is 0.
pub fn acceptor(config: &TlsConfig) -> Result<Option<TlsAcceptor>, TlsSetupError> {
    if config.port == 0 {
        return Ok(None);
    }
    Ok(Some(TlsAcceptor::from(Arc::new(server_config(
        config,
        &CLIENT_TLS_SETTINGS,
    )?))))
}

/// The rustls context `config` describes; `names` are the settings it was read from (errors
/// name them).
pub fn server_config(
    config: &TlsConfig,
    names: &SettingNames,
) -> Result<ServerConfig, TlsSetupError> {
    let missing = |setting| TlsSetupError::Missing {
        port: names.port,
        setting,
    };
    if config.cert_file.is_empty() {
        return Err(missing(names.cert_file));
    }
    if config.key_file.is_empty() {
        return Err(missing(names.key_file));
    }
    if !config.ciphers.is_empty() {
        tracing::warn!(
            "tls-ciphers is not applied: TLSv1.2 uses rustls's ECDHE suites with AES-GCM or ChaCha20-Poly1305"
        );
    }
    let provider = Arc::new(provider_with_suites(&config.ciphersuites));
    let cert_path = Path::new(&config.cert_file);
    let key_path = Path::new(&config.key_file);
    let key = files::private_key(names.key_file, key_path)?;
    // Loaded alone first, so that a key rustls cannot use is blamed on the key file.
    provider
        .key_provider
        .load_private_key(key.clone_key())
        .map_err(|e| TlsSetupError::BadKey {
            setting: names.key_file,
            path: key_path.into(),
            reason: e.to_string(),
        })?;
    let chain = files::certificates(names.cert_file, cert_path)?;
    let verifier = client_verifier(config, names, &provider)?;
    let mut server = ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&versions(&config.protocols))
        .map_err(|e| TlsSetupError::Protocols(e.to_string()))?
        .with_client_cert_verifier(verifier)
        .with_single_cert(chain, key)
        .map_err(|e| match e {
            rustls::Error::InconsistentKeys(rustls::InconsistentKeys::KeyMismatch) => {
                TlsSetupError::KeyMismatch {
                    cert_setting: names.cert_file,
                    key_setting: names.key_file,
                    cert: cert_path.into(),
                    key: key_path.into(),
                }
            }
            other => TlsSetupError::BadCert {
                setting: names.cert_file,
                path: cert_path.into(),
                reason: other.to_string(),
            },
        })?;
    server.ignore_client_order = config.prefer_server_ciphers;
    Ok(server)
}

/// ring's suites, with the TLSv1.3 ones limited to and ordered as `tls-ciphersuites` says
/// (when it says anything); the TLSv1.2 ones follow unchanged.
fn provider_with_suites(tls13: &[Tls13Suite]) -> CryptoProvider {
    let mut provider = default_provider();
    if tls13.is_empty() {
        return provider;
    }
    let tls12 = provider
        .cipher_suites
        .iter()
        .filter(|s| s.version() != &rustls::version::TLS13)
        .copied();
    provider.cipher_suites = tls13
        .iter()
        .map(|s| match s {
            Tls13Suite::Aes128GcmSha256 => cipher_suite::TLS13_AES_128_GCM_SHA256,
            Tls13Suite::Aes256GcmSha384 => cipher_suite::TLS13_AES_256_GCM_SHA384,
            Tls13Suite::Chacha20Poly1305Sha256 => cipher_suite::TLS13_CHACHA20_POLY1305_SHA256,
        })
        .chain(tls12)
        .collect();
    provider
}

fn versions(protocols: &[TlsProtocol]) -> Vec<&'static SupportedProtocolVersion> {
    if protocols.is_empty() {
        return vec![&rustls::version::TLS13, &rustls::version::TLS12];
    }
    protocols
        .iter()
        .map(|p| match p {
            TlsProtocol::Tls12 => &rustls::version::TLS12,
            TlsProtocol::Tls13 => &rustls::version::TLS13,
        })
        .collect()
}

/// `tls-auth-clients`: certificates required (yes) or verified when given (optional), against
/// the CA files; or not asked for (no). CA files given with `no` are still read, so a bad one
/// is reported at start rather than when the setting changes.
fn client_verifier(
    config: &TlsConfig,
    names: &SettingNames,
    provider: &Arc<CryptoProvider>,
) -> Result<Arc<dyn ClientCertVerifier>, TlsSetupError> {
    let has_ca = !config.ca_cert_file.is_empty() || !config.ca_cert_dir.is_empty();
    let roots = match has_ca {
        true => files::ca_roots(names, &config.ca_cert_file, &config.ca_cert_dir)?,
        false => rustls::RootCertStore::empty(),
    };
    if config.auth_clients == TlsAuthClients::No {
        return Ok(WebPkiClientVerifier::no_client_auth());
    }
    if !has_ca {
        return Err(TlsSetupError::NoCa);
    }
    let builder = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone());
    let builder = match config.auth_clients {
        TlsAuthClients::Optional => builder.allow_unauthenticated(),
        _ => builder,
    };
    // The roots are non-empty (files::ca_roots refuses files without certificates), so the
    // builder has nothing left to refuse; its error still gets a message, not a panic.
    builder
        .build()
        .map_err(|e| TlsSetupError::Verifier(e.to_string()))
}
