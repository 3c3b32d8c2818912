//! Ending a client's transaction: the framework's part of MULTI, because the dispatcher
//! itself discards a transaction whose EXEC it refuses (routing, memory, a queued error).

use crate::node_state::{Client, NodeState};
use std::sync::atomic::Ordering::Relaxed;

/// Ends the client's transaction without running it, and drops its watches (DISCARD, a
/// failed EXEC, EXEC refused for memory or by routing).
pub fn discard(server: &NodeState, client: &mut Client) {
    client.multi = None;
    client.shared.in_multi.store(false, Relaxed);
    if let Some(handle) = client.watch.take() {
        server.watches.unwatch_all(handle);
    }
}
