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

use super::identity_file::IdentityFile;
use crate::cluster::agent::restart_fence::Fence;
use crate::node_state::identity::{LoadedHistory, Succession};
use crate::replication::ids::ReplicationIds;
use crate::server::{unix_millis, Server};
use anyhow::Context;

/// Restores the ids from `loaded` (see the module comment), records it in the server, and
/// writes the identity file (`running`) before any client is served.
pub fn take_over(server: &Server, loaded: LoadedHistory) -> anyhow::Result<()> {
    let (node, role_primary) = match &server.cluster {
        Some(c) => {
            let t = c.topology.read();
            let me = t.myself();
            (Some(me.id), me.is_primary())
        }
        None => (None, false),
    };
    match loaded.loaded {
        Some((replid, offset)) => {
            let same = loaded.identity.filter(|i| i.ids.replid() == replid);
            let previous = same.and_then(|i| i.ids.replid2().zip(i.ids.second_replid_offset()));
            server
                .replication
                .restore(
                    ReplicationIds::from_parts(replid, previous),
                    offset,
                    loaded.stream_db,
                )
                .context("restoring the replication backlog")?;
            match same {
                Some(i) => {
                    server.replication.set_history_primary(i.primary, i.epoch);
                    server.replication.set_succession(i.succeeds);
                }
                // An exact snapshot without its identity (removed, or an older node's):
                // whose stream it was is not known.
                None => server.replication.set_history_primary(None, 0),
            }
        }
        None => {
            // Fresh ids: a new history, this node's own if it serves as a primary, made so by
            // no promotion (epoch 0): a replica that holds more of this node's previous
            // history must not take it for a newer topology decision.
            let mine = node.filter(|_| role_primary);
            server.replication.set_history_primary(mine, 0);
            // A complete replay of the history this node served as its primary holds
            // everything that history acknowledged: its replicas may take the new one.
            if let Some(old) = loaded
                .identity
                .filter(|_| loaded.complete && loaded.was_primary())
            {
                let succession = Succession {
                    old: old.ids.replid(),
                    new: server.replication.history().0,
                };
                tracing::info!(
                    old = %succession.old,
                    new = %succession.new,
                    "the new history holds everything the previous one acknowledged (complete AOF replay)"
                );
                server.replication.set_succession(Some(succession));
            }
        }
    }
    let covered = loaded.covered();
    let standalone_primary =
        server.cluster.is_none() && server.config.read().replicaof.trim().is_empty();
    if loaded.loaded.is_some() && !covered && standalone_primary {
        server.replication.shift_id(&mut rand::thread_rng());
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
    let path = super::identity_file::path_in(&server.config.read().dir);
    let fence = restart_fence(&loaded, node);
    let written = match (&server.cluster, fence, loaded.identity) {
        (Some(cluster), Some(fence), Some(previous)) => {
            tracing::warn!(
                replid = %fence.replid,
                loaded_offset = fence.offset,
                acknowledged_up_to = previous.offset,
                "restarted without everything acknowledged as a primary: fenced (no keyed \
                 command, no replica sync) until the topology decides"
            );
            cluster.set_restart_fence(Some(fence));
            server.replication.persist_identity_held(
                Box::new(IdentityFile(path.clone())),
                node,
                &previous,
            )
        }
        _ => server
            .replication
            .persist_identity(Box::new(IdentityFile(path.clone())), node),
    };
    written.with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

/// The restart fence a cluster node starts with: it was this history's primary (the
/// identity says so, under the same node id) and the dataset is not covered. The fence
/// names that history and the offset of it the node loaded (0 if none).
fn restart_fence(loaded: &LoadedHistory, node: Option<crate::cluster::NodeId>) -> Option<Fence> {
    let identity = loaded.identity?;
    if node.is_none() || identity.node != node || !loaded.was_primary() || loaded.covered() {
        return None;
    }
    let replid = identity.ids.replid();
    let offset = match loaded.loaded {
        Some((id, offset)) if id == replid => offset,
        _ => 0,
    };
    Some(Fence {
        replid,
        offset,
        since_ms: unix_millis(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node_state::identity::{Identity, RunState};

    fn id(c: u8) -> crate::cluster::NodeId {
        crate::cluster::NodeId::parse(&[c; 40]).unwrap()
    }

    /// Goal: a cluster node is fenced exactly when it was this history's primary under the
    /// same id and is not covered; the fence names the identity's history and the offset of
    /// it that was loaded.
    #[test]
    fn the_fence_is_for_an_uncovered_primary_of_its_own_history() {
        let me = id(b'a');
        let previous = Identity {
            node: Some(me),
            ids: ReplicationIds::with_replid(id(b'b')),
            offset: 900,
            primary: Some(me),
            epoch: 3,
            succeeds: None,
            state: RunState::Running,
            stream_db: 0,
        };
        let loaded = |identity: Identity, loaded| LoadedHistory {
            identity: Some(identity),
            loaded,
            complete: false,
            stream_db: 0,
        };
        let fenced = |l: LoadedHistory, node| restart_fence(&l, node).map(|f| (f.replid, f.offset));
        assert_eq!(
            fenced(loaded(previous, None), Some(me)),
            Some((id(b'b'), 0))
        );
        assert_eq!(
            fenced(loaded(previous, Some((id(b'b'), 700))), Some(me)),
            Some((id(b'b'), 700)),
            "an exact snapshot of the history, older than what was acknowledged"
        );
        assert_eq!(
            fenced(loaded(previous, Some((id(b'c'), 700))), Some(me)),
            Some((id(b'b'), 0)),
            "a snapshot of another history holds none of it"
        );
        let stopped = Identity {
            state: RunState::Stopped,
            ..previous
        };
        assert_eq!(
            fenced(loaded(stopped, Some((id(b'b'), 900))), Some(me)),
            None,
            "covered"
        );
        let replica = Identity {
            primary: Some(id(b'd')),
            ..previous
        };
        assert_eq!(
            fenced(loaded(replica, None), Some(me)),
            None,
            "was a replica"
        );
        assert_eq!(
            fenced(loaded(previous, None), Some(id(b'e'))),
            None,
            "another node id"
        );
        assert_eq!(fenced(loaded(previous, None), None), None, "standalone");
        assert_eq!(
            fenced(LoadedHistory::default(), Some(me)),
            None,
            "no identity"
        );
    }
}
