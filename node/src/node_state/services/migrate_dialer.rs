//! MIGRATE's connects: the command opens a connection to its target through this handle,
//! which the layer owning sockets implements (`server::migrate_link`, blocking TCP with the
//! command's timeout), and caches it in `node_state::migrate_links`.

use crate::node_state::migrate_links::{LinkError, LinkIo};
use std::time::Duration;

pub trait MigrateDialer {
    /// Connects to `host:port` within `timeout` (each resolved address in turn).
    fn connect(
        &self,
        host: &str,
        port: u16,
        timeout: Duration,
    ) -> Result<Box<dyn LinkIo>, LinkError>;
}
