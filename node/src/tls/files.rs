//! Reading the PEM files the `tls-*` settings name: the certificate chain, the private key,
//! and the CA certificates client certificates are verified against. Every file is read
//! whole, within a size limit.

use super::error::TlsSetupError;
use super::settings::SettingNames;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::RootCertStore;
use std::io::Read;
use std::path::{Path, PathBuf};

/// Largest certificate, key or CA file read. A bundle of every public root CA is about
/// 200 KiB; a file far larger than that is not one of these.
pub const MAX_PEM_FILE_BYTES: u64 = 4 * 1024 * 1024;
/// Most files read from `tls-ca-cert-dir` (an OpenSSL hashed directory holds one file or
/// link per CA).
pub const MAX_CA_DIR_FILES: usize = 4096;

/// The certificates of a PEM file, in file order; a file with none is an error.
pub fn certificates(
    setting: &'static str,
    path: &Path,
) -> Result<Vec<CertificateDer<'static>>, TlsSetupError> {
    let bytes = read_limited(setting, path)?;
    let certs = parse_certificates(setting, path, &bytes)?;
    if certs.is_empty() {
        return Err(TlsSetupError::Nothing {
            setting,
            path: path.into(),
            what: "PEM certificate",
        });
    }
    Ok(certs)
}

/// The first private key (PKCS#8, PKCS#1 or SEC1) of the key file `setting` names.
pub fn private_key(
    setting: &'static str,
    path: &Path,
) -> Result<PrivateKeyDer<'static>, TlsSetupError> {
    let bytes = read_limited(setting, path)?;
    if is_encrypted_key(&bytes) {
        return Err(TlsSetupError::EncryptedKey {
            setting,
            path: path.into(),
        });
    }
    match PrivateKeyDer::from_pem_slice(&bytes) {
        Ok(key) => Ok(key),
        Err(rustls::pki_types::pem::Error::NoItemsFound) => Err(TlsSetupError::Nothing {
            setting,
            path: path.into(),
            what: "PEM private key",
        }),
        Err(e) => Err(TlsSetupError::BadPem {
            setting,
            path: path.into(),
            reason: e.to_string(),
        }),
    }
}

/// The CA certificates of the CA file and of every file in the CA directory (either may be
/// empty: not set; `names` says which settings they came from). Files in the directory that
/// hold no certificate (CRLs, notes) are passed over; a malformed one is an error.
pub fn ca_roots(
    names: &SettingNames,
    file: &str,
    dir: &str,
) -> Result<RootCertStore, TlsSetupError> {
    let mut roots = RootCertStore::empty();
    if !file.is_empty() {
        let setting = names.ca_cert_file;
        let path = Path::new(file);
        add_roots(&mut roots, setting, path, certificates(setting, path)?)?;
    }
    if !dir.is_empty() {
        let setting = names.ca_cert_dir;
        let before = roots.len();
        for path in dir_files(setting, Path::new(dir))? {
            let bytes = read_limited(setting, &path)?;
            let certs = parse_certificates(setting, &path, &bytes)?;
            add_roots(&mut roots, setting, &path, certs)?;
        }
        if roots.len() == before {
            return Err(TlsSetupError::Nothing {
                setting,
                path: dir.into(),
                what: "PEM certificate",
            });
        }
    }
    Ok(roots)
}

fn add_roots(
    roots: &mut RootCertStore,
    setting: &'static str,
    path: &Path,
    certs: Vec<CertificateDer<'static>>,
) -> Result<(), TlsSetupError> {
    for cert in certs {
        roots.add(cert).map_err(|e| TlsSetupError::BadCa {
            setting,
            path: path.into(),
            reason: e.to_string(),
        })?;
    }
    Ok(())
}

/// The regular files of `dir` (following links, as OpenSSL's hashed names are links), in
/// name order.
fn dir_files(setting: &'static str, dir: &Path) -> Result<Vec<PathBuf>, TlsSetupError> {
    let read_error = |reason| TlsSetupError::Read {
        setting,
        path: dir.into(),
        reason,
    };
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(read_error)? {
        let path = entry.map_err(read_error)?.path();
        if !path.is_file() {
            continue;
        }
        if files.len() == MAX_CA_DIR_FILES {
            return Err(TlsSetupError::TooManyFiles {
                setting,
                path: dir.into(),
                limit: MAX_CA_DIR_FILES,
            });
        }
        files.push(path);
    }
    files.sort();
    Ok(files)
}

fn parse_certificates(
    setting: &'static str,
    path: &Path,
    bytes: &[u8],
) -> Result<Vec<CertificateDer<'static>>, TlsSetupError> {
    CertificateDer::pem_slice_iter(bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsSetupError::BadPem {
            setting,
            path: path.into(),
            reason: e.to_string(),
        })
}

/// PKCS#8 encrypted keys and OpenSSL's legacy encrypted PEM both say so in the text.
fn is_encrypted_key(pem: &[u8]) -> bool {
    let contains = |needle: &[u8]| pem.windows(needle.len()).any(|w| w == needle);
    contains(b"-----BEGIN ENCRYPTED PRIVATE KEY-----") || contains(b"Proc-Type: 4,ENCRYPTED")
}

fn read_limited(setting: &'static str, path: &Path) -> Result<Vec<u8>, TlsSetupError> {
    let read_error = |reason| TlsSetupError::Read {
        setting,
        path: path.into(),
        reason,
    };
    let file = std::fs::File::open(path).map_err(read_error)?;
    let mut bytes = Vec::new();
    file.take(MAX_PEM_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(read_error)?;
    if bytes.len() as u64 > MAX_PEM_FILE_BYTES {
        return Err(TlsSetupError::TooLarge {
            setting,
            path: path.into(),
            limit: MAX_PEM_FILE_BYTES,
        });
    }
    Ok(bytes)
}
