//! In cluster mode the topology, not REPLICAOF, says whom this node follows: after every
//! change the bus thread calls [`follow_topology`], which starts the link to the primary the
//! topology names (CLUSTER REPLICATE, `redis-cli --cluster create --cluster-replicas`, a
//! sibling's promotion) or, when the node became a primary (a failover), ends the link and
//! shifts its replication id so that the old primary's other replicas continue from it.

use crate::server::Server;

/// What the topology asks of this node's replication.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Wanted {
    /// Serve as a primary: follow nobody. `epoch`: this node's config epoch, the one its
    /// promotion was granted when it was one.
    Primary { epoch: u64 },
    /// Follow the primary `id` at this client address.
    Follow {
        host: String,
        port: u16,
        id: crate::cluster::NodeId,
    },
    /// A replica whose primary's address is not known yet: leave things as they are.
    Unknown,
}

fn wanted(server: &Server) -> Option<Wanted> {
    let cluster = server.cluster.as_ref()?;
    let t = cluster.topology.read();
    let me = t.myself();
    if !me.is_replica() {
        return Some(Wanted::Primary {
            epoch: t.node_epoch(me),
        });
    }
    let primary = me
        .primary
        .and_then(|id| t.index_of(&id))
        .and_then(|i| t.node(i));
    Some(match primary {
        Some(p) if !p.ip.is_empty() && p.port != 0 => Wanted::Follow {
            host: p.ip.clone(),
            port: p.port,
            id: p.id,
        },
        _ => Wanted::Unknown,
    })
}

/// Brings replication in line with this node's role in the topology. Cheap when nothing
/// changed (one read lock and a comparison); the bus thread calls it after each turn.
pub fn follow_topology(server: &Server) {
    match wanted(server) {
        None | Some(Wanted::Unknown) => {}
        Some(Wanted::Primary { epoch }) => {
            if server.replica_of.is_replica() && server.replica_of.stop() {
                server.replication.promote(epoch, &mut rand::thread_rng());
                tracing::info!("MASTER MODE enabled (the topology made this node a primary)");
            }
        }
        Some(Wanted::Follow { host, port, id }) => {
            let same = server
                .replica_of
                .current_target()
                .is_some_and(|(h, p)| p == port && h.eq_ignore_ascii_case(&host))
                && server.replica_of.current_node() == Some(id);
            if same {
                return;
            }
            match super::follow_node(server, &host, port, Some(id)) {
                Ok(_) => tracing::info!(host, port, "following the primary the topology names"),
                Err(e) => tracing::warn!(error = %e, "cannot follow the topology's primary"),
            }
        }
    }
}
