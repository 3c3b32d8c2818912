//! SHUTDOWN without NOW: the wait for replicas and the final save run on a thread of their
//! own (`server::shutdown_replicas`), never on the connection's; the client parks until
//! that thread is done.

use crate::node_state::shutdown::ShutdownMode;
use crate::node_state::ClientShared;
use std::sync::mpsc::Receiver;
use std::sync::Arc;

/// How SHUTDOWN's own thread ended: Ok once the node stops; Err with the error to answer
/// when the final save failed without FORCE (the node keeps running, writes resume).
pub type ShutdownOutcome = Result<(), String>;

#[derive(Debug, thiserror::Error)]
pub enum ShutdownStartError {
    #[error("the node is not started yet")]
    NotStarted,
    #[error("cannot start the shutdown thread: {0}")]
    Thread(#[from] std::io::Error),
}

pub trait ShutdownSteps {
    /// Starts SHUTDOWN's last steps on a thread of their own: pause writes and wait up to
    /// `shutdown-timeout` for the online replicas to acknowledge the last write, then the
    /// final save (`mode`), then stop the node (also after a failed save if `force`).
    /// `client` is woken when the outcome is in the returned channel.
    fn start(
        &self,
        mode: ShutdownMode,
        force: bool,
        client: Arc<ClientShared>,
    ) -> Result<Receiver<ShutdownOutcome>, ShutdownStartError>;
}
