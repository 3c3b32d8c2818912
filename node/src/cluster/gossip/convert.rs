//! Between the topology's types and the wire's.

use crate::cluster::id::NodeId;
use crate::cluster::slots::{NodeIndex, SLOT_MAX};
use crate::cluster::topology::Topology;
use proto::bus::SlotRange;

pub fn parse_id(text: &str) -> Option<NodeId> {
    NodeId::parse(text.as_bytes())
}

pub fn ranges_to_wire(ranges: &[(u16, u16)]) -> Vec<SlotRange> {
    ranges
        .iter()
        .map(|&(start, end)| SlotRange {
            start: start as u32,
            end: end as u32,
        })
        .collect()
}

/// The slots a node serves as wire ranges.
pub fn slots_of(t: &Topology, index: NodeIndex) -> Vec<SlotRange> {
    ranges_to_wire(&t.slots.ranges_of(index))
}

/// Every slot of wire ranges. `open` has validated them; a range that is not within
/// 0..=16383 (a message built by hand) is skipped rather than wrapped.
pub fn each_slot(ranges: &[SlotRange]) -> impl Iterator<Item = u16> + '_ {
    ranges
        .iter()
        .filter(|r| r.start <= r.end && r.end <= SLOT_MAX as u32)
        .flat_map(|r| (r.start as u16)..=(r.end as u16))
}

/// Whether two range lists name the same slots (senders always send maximal runs, but a
/// peer may not: compare slot by slot when the lists differ).
pub fn same_slots(a: &[SlotRange], b: &[SlotRange]) -> bool {
    a == b || {
        let mut x: Vec<u16> = each_slot(a).collect();
        let mut y: Vec<u16> = each_slot(b).collect();
        x.sort_unstable();
        x.dedup();
        y.sort_unstable();
        y.dedup();
        x == y
    }
}

/// Whether each node owns at least one slot, by index.
pub fn owners(t: &Topology) -> Vec<bool> {
    t.slots.census(t.nodes.len()).0
}

/// A primary owning slots: its failure reports count (Redis's voting primary).
pub fn is_voting(t: &Topology, index: NodeIndex) -> bool {
    t.node(index).is_some_and(|n| n.is_primary()) && t.slots.owns_any(index)
}
