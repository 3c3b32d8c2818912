//! What a start takes over from the previous run's replication: the identity file, the
//! history the loaded dataset is exactly, and from them the ids the node continues with.
//!
//! - The snapshot is exactly a history (`LoadStats::history`): the ids become that history's
//!   (with the identity's `replid2` when the identity names the same id) at the snapshot's
//!   offset, and the backlog starts there, so a replica at that offset continues.
//! - Otherwise the ids stay fresh (as `Server::new` drew them): the dataset claims no history
//!   and can never be continued wrongly.
//! - A standalone primary (no `replicaof`) that restored an exact snapshot without being
//!   covered (it crashed, or stopped without a final save) may have written past it under
//!   the same id: it shifts to a new id at the loaded offset (replicas behind it continue,
//!   one ahead gets no `+CONTINUE` into a diverging stream). In cluster mode the restart
//!   fence decides when such a node serves (`cluster::agent::restart_fence`).
//! - In cluster mode the backlog exists from the start either way: a write is fed, so its
//!   offset moves, and `repl-sync-acks` waits for it, from the first write on.

use super::identity::{self, LoadedHistory};
use crate::replication::ids::ReplicationIds;
use crate::server::Server;
use anyhow::Context;

/// Restores the ids from `loaded` (see the module comment), records it in the server, and
/// writes the identity file (`running`) before any client is served.
pub fn take_over(server: &Server, loaded: LoadedHistory) -> anyhow::Result<()> {
    let (node, role_primary, epoch) = match &server.cluster {
        Some(c) => {
            let t = c.topology.read();
            let me = t.myself();
            (Some(me.id), me.is_primary(), t.node_epoch(me))
        }
        None => (None, false, 0),
    };
    match loaded.loaded {
        Some((replid, offset)) => {
            let same = loaded.identity.filter(|i| i.ids.replid() == replid);
            let previous = same.and_then(|i| i.ids.replid2().zip(i.ids.second_replid_offset()));
            server
                .replication
                .restore(ReplicationIds::from_parts(replid, previous), offset)
                .context("restoring the replication backlog")?;
            match same {
                Some(i) => server.replication.set_history_primary(i.primary, i.epoch),
                // An exact snapshot without its identity (removed, or an older node's):
                // whose stream it was is not known.
                None => server.replication.set_history_primary(None, 0),
            }
        }
        None => {
            // Fresh ids: a new history, this node's own if it serves as a primary.
            let mine = node.filter(|_| role_primary);
            server.replication.set_history_primary(mine, epoch);
        }
    }
    let covered = loaded.covered();
    let standalone_primary =
        server.cluster.is_none() && server.config.read().replicaof.trim().is_empty();
    if loaded.loaded.is_some() && !covered && standalone_primary {
        server.replication.shift_id();
    }
    if server.cluster.is_some() {
        server
            .replication
            .ensure_backlog()
            .context("creating the replication backlog")?;
    }
    if let Some(i) = &loaded.identity {
        tracing::info!(
            replid = %i.ids.replid(),
            offset = i.offset,
            state = ?i.state,
            loaded = ?loaded.loaded,
            covered,
            "previous replication identity"
        );
    }
    *server.loaded_history.lock() = loaded;
    let path = identity::path_in(&server.config.read().dir);
    server
        .replication
        .persist_identity(path.clone(), node)
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}
