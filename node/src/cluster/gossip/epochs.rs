//! Slot ownership by config epoch (§2.9): claims in headers and UPDATE messages rebind slots
//! to a claimer with a greater config epoch; a sender with a stale view gets an UPDATE; two
//! primaries with the same config epoch are told apart.

use super::convert::{each_slot, parse_id, same_slots, slots_of};
use super::{Event, Gossip};
use crate::cluster::flags::bit;
use crate::cluster::slots::NodeIndex;
use crate::cluster::topology::Topology;
use proto::bus::{Header, SlotRange, Update};

impl Gossip {
    /// The sender's slot claim, if it is a primary whose claim differs from what we know.
    pub(super) fn apply_claims(
        &mut self,
        t: &mut Topology,
        sender: NodeIndex,
        from: &str,
        h: &Header,
    ) {
        if h.flags & bit::MASTER as u32 == 0 || !t.nodes[sender as usize].is_primary() {
            return;
        }
        if same_slots(&slots_of(t, sender), &h.slots) {
            return;
        }
        self.bind_slots(t, sender, h.config_epoch, &h.slots);
        // Slots it claims that a node with a greater epoch owns: tell it (one UPDATE per
        // message, as Redis; the next ping brings the next one).
        let stale_owner = each_slot(&h.slots).find_map(|s| {
            let o = t.slots.owner(s)?;
            (o != sender && t.nodes[o as usize].config_epoch > h.config_epoch).then_some(o)
        });
        if let Some(owner) = stale_owner {
            let (to, about) = (t.nodes[sender as usize].id, t.nodes[owner as usize].id);
            self.send_update(t, from, owner);
            self.event(Event::UpdateSent { to, about });
        }
    }

    /// Redis's `clusterUpdateSlotsConfigWith`: each claimed slot that is free, or owned by a
    /// node with a smaller config epoch, goes to `claimer`. Slots being imported here are
    /// left alone. A primary left without slots follows the claimer.
    pub(super) fn bind_slots(
        &mut self,
        t: &mut Topology,
        claimer: NodeIndex,
        epoch: u64,
        ranges: &[SlotRange],
    ) {
        let me = t.myself_index();
        let i_had_slots = t.myself().is_primary() && t.slots.owns_any(me);
        let mut moved = 0usize;
        let mut took_mine = false;
        for slot in each_slot(ranges) {
            let owner = t.slots.owner(slot);
            if owner == Some(claimer) || t.slots.importing.contains_key(&slot) {
                continue;
            }
            let rebind = match owner {
                None => true,
                Some(o) => t.nodes[o as usize].config_epoch < epoch,
            };
            if rebind {
                took_mine |= owner == Some(me);
                t.slots.set_owner(slot, Some(claimer));
                moved += 1;
            }
        }
        if moved == 0 {
            return;
        }
        self.save = true;
        let owner = t.nodes[claimer as usize].id;
        self.event(Event::SlotsMoved {
            owner,
            count: moved,
        });
        if i_had_slots && took_mine && !t.slots.owns_any(me) {
            let myself = t.myself_mut();
            myself.flags.set(bit::MASTER, false);
            myself.flags.set(bit::SLAVE, true);
            myself.primary = Some(owner);
            self.event(Event::BecameReplica { primary: owner });
        }
    }

    /// An UPDATE: the named node owns these slots at this epoch, if that is news.
    pub(super) fn apply_update(&mut self, t: &mut Topology, u: &Update) {
        let Some(i) = parse_id(&u.node_id).and_then(|id| t.index_of(&id)) else {
            return;
        };
        let node = &mut t.nodes[i as usize];
        if node.config_epoch >= u.config_epoch {
            return;
        }
        if node.is_replica() {
            node.flags.set(bit::SLAVE, false);
            node.flags.set(bit::MASTER, true);
            node.primary = None;
        }
        node.config_epoch = u.config_epoch;
        self.save = true;
        self.bind_slots(t, i, u.config_epoch, &u.slots);
    }

    /// Redis's `clusterHandleConfigEpochCollision`: two primaries with one config epoch;
    /// the one with the smaller node id takes a new epoch.
    pub(super) fn handle_epoch_collision(&mut self, t: &mut Topology, sender: NodeIndex) {
        let s = &t.nodes[sender as usize];
        let me = t.myself();
        if !s.is_primary() || !me.is_primary() || s.config_epoch != me.config_epoch || s.id <= me.id
        {
            return;
        }
        t.current_epoch += 1;
        let epoch = t.current_epoch;
        t.myself_mut().config_epoch = epoch;
        self.save = true;
        self.event(Event::ConfigEpochCollision { new_epoch: epoch });
    }
}
