//! Keeps the keyspace's hidden slots (`db::hidden_slots`) in step with the topology: after
//! every step of the cluster core, still under the topology's write lock, so a slot's keys
//! show exactly when the entry that gives this node's shard the slot is applied, and hide
//! from the entry that begins its import. Recomputed only when something it depends on
//! moved (an applied log entry, this node's role or primary): a gossip step costs a compare.

use crate::cluster::migration::visibility::hidden_slots_here;
use crate::cluster::topology::Topology;
use crate::cluster::NodeId;
use crate::db::Keyspace;

/// What the hidden set was last computed from.
#[derive(Default)]
pub struct HiddenSync {
    seen: Option<(u64, Option<NodeId>, bool)>,
}

impl HiddenSync {
    pub fn after_step(&mut self, t: &Topology, keyspace: &Keyspace) {
        let me = t.myself();
        let now = (t.consensus.version, me.primary, me.is_primary());
        if self.seen == Some(now) {
            return;
        }
        self.seen = Some(now);
        let hidden = keyspace.hidden();
        let was = hidden.count();
        if hidden.replace(hidden_slots_here(t)) {
            tracing::info!(
                hidden = hidden.count(),
                was,
                "slots being imported hidden from the keyspace's walks"
            );
        }
    }
}
