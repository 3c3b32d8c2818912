//! What can go wrong talking to a node. Callers branch on these: the CLI prints them and picks
//! an exit code, the benchmark aborts a run on any of them.

use std::time::Duration;

/// An error from the client library. A server's error *reply* is not one of these unless the
/// caller asked for it to be ([`crate::client::Client::call`]): the CLI prints error replies.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("Could not connect to {target}: {source}")]
    Connect {
        target: String,
        source: std::io::Error,
    },
    #[error("Could not connect to {target}: timed out after {after:?}")]
    ConnectTimeout { target: String, after: Duration },
    /// `--fabric`/`--rdma`: the provider is unavailable on this host (the text says why), or the
    /// fabric connection could not be set up.
    #[error("Could not connect to {target} over fabric {provider}: {source}")]
    Fabric {
        target: String,
        provider: String,
        source: Box<bus::BusError>,
    },
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
    #[error("Server closed the connection")]
    Closed,
    #[error("Protocol error in reply: {0}")]
    Protocol(#[from] proto::resp::DecodeError),
    #[error("Reply larger than the limit of {max} bytes (a partial reply of {buffered} bytes)")]
    ReplyTooLarge { buffered: usize, max: usize },
    #[error("Request buffer of {len} bytes would exceed the limit of {max} bytes; flush first")]
    RequestTooLarge { len: usize, max: usize },
    #[error("AUTH failed: {0}")]
    Auth(String),
    #[error("HELLO failed: {0}")]
    Hello(String),
    /// An error reply, turned into an error by [`crate::client::Client::call`].
    #[error("{0}")]
    Server(String),
}

impl ClientError {
    /// Whether the connection is unusable after this error (the CLI reconnects on the next
    /// command; the benchmark aborts).
    pub fn is_fatal(&self) -> bool {
        !matches!(
            self,
            ClientError::Server(_) | ClientError::RequestTooLarge { .. }
        )
    }
}
