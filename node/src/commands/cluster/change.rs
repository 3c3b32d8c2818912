//! How a CLUSTER command changes the topology. While the node is in no topology group it
//! changes it by itself and saves, as Redis does. In a group the change is a Raft proposal:
//! Redis's checks run first on a copy (same errors, nothing changed), then the command is
//! proposed, and the reply waits until the change has applied on this node.

use crate::cluster::consensus::TopologyCommand;
use crate::cluster::{Cluster, ClusterError, Topology};

/// `local` is the Redis way (checks and change); `proposal` says what the group must commit
/// (None: nothing, the change is already in place).
pub fn change_topology<R>(
    c: &Cluster,
    local: impl Fn(&mut Topology) -> Result<R, ClusterError>,
    proposal: impl FnOnce(&Topology, R) -> Option<TopologyCommand>,
) -> Result<(), ClusterError> {
    if !c.in_group() {
        return c.change(|t| local(t).map(|_| ()));
    }
    let command = {
        let t = c.topology.read();
        let mut trial = t.clone();
        let checked = local(&mut trial)?;
        proposal(&t, checked)
    };
    match command {
        Some(command) => c.propose(command),
        None => Ok(()),
    }
}
