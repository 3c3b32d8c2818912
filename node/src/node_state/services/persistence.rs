//! Saves and the AOF, as SAVE, BGSAVE, BGREWRITEAOF, CONFIG SET, INFO and SHUTDOWN use them.

use crate::config::Config;
use crate::node_state::shutdown::ShutdownMode;
use crate::node_state::snapshot_state::{SaveError, SaveStats};

/// INFO persistence's AOF fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AofInfo {
    pub enabled: bool,
    pub rewrite_in_progress: bool,
    pub rewrite_scheduled: bool,
    pub last_rewrite_time_sec: i64,
    pub current_rewrite_time_sec: i64,
    pub last_bgrewrite_ok: bool,
    pub rewrites: u64,
    pub last_write_ok: bool,
    pub current_size: u64,
    pub base_size: u64,
    pub buffer_length: u64,
}

/// Why BGREWRITEAOF did not start a rewrite.
#[derive(Debug, thiserror::Error)]
pub enum AofRewriteError {
    #[error("Background append only file rewriting already in progress")]
    InProgress,
    /// Any other reason, as the AOF words it (logged; the client gets Redis's generic error).
    #[error("{0}")]
    Failed(String),
}

pub trait Persistence {
    /// SAVE: saves on the calling thread.
    fn save(&self) -> Result<SaveStats, SaveError>;
    /// BGSAVE: starts a save on a thread of its own and returns at once.
    fn bgsave(&self) -> Result<(), SaveError>;
    /// BGREWRITEAOF.
    fn bgrewrite_aof(&self, config: &Config) -> Result<(), AofRewriteError>;
    fn aof_info(&self) -> AofInfo;
    /// CONFIG SET: the AOF follows a changed config (turns on or off, fsync policy...).
    fn apply_config(&self, config: &Config);
    /// SHUTDOWN's final save (per `mode` and the `save` rules), before the node stops.
    fn prepare_shutdown(&self, mode: ShutdownMode) -> Result<(), SaveError>;
}
