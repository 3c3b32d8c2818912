//! CLUSTER FAILOVER's background run.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailoverMode {
    Default,
    Force,
    Takeover,
}

#[derive(Debug, thiserror::Error)]
pub enum FailoverStartError {
    #[error("the node is not started yet")]
    NotStarted,
    #[error("cannot start the failover: {0}")]
    Thread(#[from] std::io::Error),
}

pub trait ManualFailover {
    /// Starts the failover of `mode` on a thread of its own; its outcome is logged.
    fn start(&self, mode: FailoverMode) -> Result<(), FailoverStartError>;
}
