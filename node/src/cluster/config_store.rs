//! Where the cluster state keeps its config file (nodes.conf), as this layer sees it: a
//! narrow store that reads and replaces the whole text, implemented over the file by the
//! server layer (`server::persistence::nodes_conf_file`: atomic writes, fsync of the file
//! and its directory). The text is `config_file`'s; no I/O here.

use super::config_file::{self, ParseError};
use super::topology::Topology;
use rand::Rng;
use std::path::{Path, PathBuf};

/// The config file's storage.
pub trait ConfigStore: Send + Sync {
    /// The whole text; `Ok(None)` when there is no file. A text longer than
    /// `config_file::CONFIG_FILE_MAX` may be cut one byte past it (parsing refuses it).
    fn read(&self) -> std::io::Result<Option<String>>;
    /// Replaces the text so that a crash leaves the old one or the new one.
    fn write(&self, text: &str) -> std::io::Result<()>;
    /// Where it is, for messages.
    fn path(&self) -> &Path;
}

#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("cluster config file {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cluster config file {path} is corrupt at {source}")]
    Corrupt { path: PathBuf, source: ParseError },
}

/// Loads the topology; `Ok(None)` when there is no file or it is empty (a new node), as
/// Redis does.
pub fn load(store: &dyn ConfigStore, rng: &mut impl Rng) -> Result<Option<Topology>, LoadError> {
    let path = || store.path().to_path_buf();
    let text = match store.read() {
        Ok(Some(text)) if !text.trim().is_empty() => text,
        Ok(_) => return Ok(None),
        Err(source) => {
            return Err(LoadError::Io {
                path: path(),
                source,
            })
        }
    };
    config_file::parse(&text, rng)
        .map(Some)
        .map_err(|source| LoadError::Corrupt {
            path: path(),
            source,
        })
}

/// Saves the topology.
pub fn save(store: &dyn ConfigStore, t: &Topology) -> std::io::Result<()> {
    store.write(&config_file::render(t))
}
