//! The cluster secret a node was given at run time (`CLUSTER SET-SECRET`, which
//! `operator cluster create` sends to nodes started without one), kept in a file in the
//! node's `dir` so that a restart keeps talking to its cluster: the file's text, its
//! errors, and which secret a start takes. No I/O here: the file is read and written
//! (0600, atomically) by `server::persistence::cluster_secret_file`, which refuses a file
//! other users may read: the secret is what keeps a local process off the bus.

use crate::config::Config;
use std::path::{Path, PathBuf};

/// Shortest secret a node takes at run time (bytes of text): an operator's typo or a
/// placeholder must not become the cluster's only protection.
pub const SECRET_MIN: usize = 16;

#[derive(Debug, thiserror::Error)]
pub enum SecretFileError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} may be read by other users (mode {mode:o}); chmod 600 it")]
    Readable { path: PathBuf, mode: u32 },
    #[error("{path} does not hold a usable secret (empty, too long or not one line)")]
    Malformed { path: PathBuf },
}

/// The file's text for `secret`.
pub fn render(secret: &str) -> String {
    format!("{secret}\n")
}

/// The secret a file's text holds: one line of 1 to `max_len` bytes; None when it holds
/// anything else.
pub fn parse(text: &str, max_len: usize) -> Option<&str> {
    let secret = text.strip_suffix('\n').unwrap_or(text);
    let usable = !secret.is_empty() && secret.len() <= max_len && !secret.contains(['\n', '\r']);
    usable.then_some(secret)
}

/// At start: a node whose config names no secret takes the one saved (in the file at
/// `path`); a config that names one wins (a saved one that differs is reported).
pub fn adopt(config: &mut Config, saved: Option<String>, path: &Path) {
    match saved {
        Some(saved) if config.cluster.secret.is_empty() => {
            tracing::info!(path = %path.display(), "cluster secret loaded");
            config.cluster.secret = saved;
        }
        Some(saved) if saved != config.cluster.secret => tracing::warn!(
            path = %path.display(),
            "the config's cluster-secret differs from the one saved in dir; the config's is used"
        ),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Goal: a rendered secret parses back; anything but one short line does not.
    #[test]
    fn the_text_holds_one_line() {
        assert_eq!(
            parse(&render("0123456789abcdef"), 256),
            Some("0123456789abcdef")
        );
        assert_eq!(parse("no-newline-secret", 256), Some("no-newline-secret"));
        for bad in ["", "\n", "a\nb\n", "a\r\n", &"x".repeat(257)] {
            assert_eq!(parse(bad, 256), None, "{bad:?}");
        }
    }

    /// Goal: the config's secret wins over the saved one; a config without one takes it.
    #[test]
    fn a_start_takes_the_saved_secret_only_without_its_own() {
        let path = Path::new("/d/cluster-secret");
        let mut config = Config::default();
        adopt(&mut config, Some("saved-secret-0123".into()), path);
        assert_eq!(config.cluster.secret, "saved-secret-0123");
        config.cluster.secret = "config-secret-0123".into();
        adopt(&mut config, Some("saved-secret-0123".into()), path);
        assert_eq!(config.cluster.secret, "config-secret-0123");
        adopt(&mut config, None, path);
        assert_eq!(config.cluster.secret, "config-secret-0123");
    }
}
