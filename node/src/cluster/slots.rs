//! The 16384-slot map: who owns each slot, and the open-slot markers of a migration
//! (`MIGRATING` on the source, `IMPORTING` on the target).

use super::id::NodeId;
use proto::slot::SLOT_COUNT;
use std::collections::BTreeMap;

/// Index of a node in its topology's node table, or [`NO_OWNER`].
pub type NodeIndex = u16;
/// Marks an unassigned slot.
pub const NO_OWNER: NodeIndex = NodeIndex::MAX;

/// Highest slot number, as u16.
pub const SLOT_MAX: u16 = (SLOT_COUNT - 1) as u16;

#[derive(Clone, PartialEq, Eq)]
pub struct SlotMap {
    /// Owner of every slot, by node index; a fixed table so routing is one load.
    owners: Box<[NodeIndex]>,
    /// Slots this node is migrating away, with the target (ordered: CLUSTER NODES prints
    /// the markers in slot order).
    pub migrating: BTreeMap<u16, NodeId>,
    /// Slots this node is importing, with the source.
    pub importing: BTreeMap<u16, NodeId>,
}

impl Default for SlotMap {
    fn default() -> Self {
        SlotMap {
            owners: vec![NO_OWNER; SLOT_COUNT].into_boxed_slice(),
            migrating: BTreeMap::new(),
            importing: BTreeMap::new(),
        }
    }
}

/// Owners as runs (`start-end:owner`), not 16384 numbers.
impl std::fmt::Debug for SlotMap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SlotMap")
            .field("owners", &self.runs())
            .field("migrating", &self.migrating)
            .field("importing", &self.importing)
            .finish()
    }
}

impl SlotMap {
    pub fn owner(&self, slot: u16) -> Option<NodeIndex> {
        match self.owners.get(slot as usize) {
            Some(&o) if o != NO_OWNER => Some(o),
            _ => None,
        }
    }

    pub fn set_owner(&mut self, slot: u16, owner: Option<NodeIndex>) {
        if let Some(o) = self.owners.get_mut(slot as usize) {
            *o = owner.unwrap_or(NO_OWNER);
        }
    }

    /// Number of assigned slots.
    pub fn assigned(&self) -> usize {
        self.owners.iter().filter(|&&o| o != NO_OWNER).count()
    }

    /// Slots owned by `node`, as inclusive ranges in slot order.
    pub fn ranges_of(&self, node: NodeIndex) -> Vec<(u16, u16)> {
        // Skips to each run with `position` (a tight scan): every bus message sent or
        // received asks this once.
        let mut out: Vec<(u16, u16)> = Vec::new();
        let mut at = 0;
        while let Some(skip) = self.owners[at..].iter().position(|&o| o == node) {
            let start = at + skip;
            let len = self.owners[start..]
                .iter()
                .position(|&o| o != node)
                .unwrap_or(self.owners.len() - start);
            out.push((start as u16, (start + len - 1) as u16));
            at = start + len;
        }
        out
    }

    /// Whether each of `nodes` node indexes owns at least one slot, and how many slots have
    /// no owner in the table: one pass over the table, no allocation per run (the cluster state is
    /// recomputed after every bus message).
    pub fn census(&self, nodes: usize) -> (Vec<bool>, usize) {
        let mut owns = vec![false; nodes];
        let mut unassigned = 0;
        for &o in self.owners.iter() {
            match owns.get_mut(o as usize) {
                Some(flag) => *flag = true,
                None => unassigned += 1,
            }
        }
        (owns, unassigned)
    }

    /// Whether `node` owns at least one slot (stops at the first).
    pub fn owns_any(&self, node: NodeIndex) -> bool {
        self.owners.contains(&node)
    }

    /// Every maximal run of slots with one owner, in slot order: (start, end, owner).
    pub fn runs(&self) -> Vec<(u16, u16, NodeIndex)> {
        let mut out: Vec<(u16, u16, NodeIndex)> = Vec::new();
        for (slot, &o) in self.owners.iter().enumerate() {
            if o == NO_OWNER {
                continue;
            }
            let slot = slot as u16;
            match out.last_mut() {
                Some(last) if last.2 == o && last.1 + 1 == slot => last.1 = slot,
                _ => out.push((slot, slot, o)),
            }
        }
        out
    }

    /// Renumbers owners after node `removed` left the node table (indexes above it shift).
    pub fn forget_index(&mut self, removed: NodeIndex) {
        for o in self.owners.iter_mut() {
            if *o == removed {
                *o = NO_OWNER;
            } else if *o != NO_OWNER && *o > removed {
                *o -= 1;
            }
        }
    }
}

/// Parses a slot number as Redis's `getSlotOrReply`: a strict decimal in 0..=16383
/// (no sign, spaces or leading zeros).
pub fn parse_slot(arg: &[u8]) -> Option<u16> {
    let v = proto::resp::request::parse_i64(arg)?;
    // Redis also refuses "-0", which parse_i64 reads as 0: a slot starts with a digit.
    if (0..=SLOT_MAX as i64).contains(&v) && arg.first().is_some_and(u8::is_ascii_digit) {
        Some(v as u16)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_and_runs() {
        let mut m = SlotMap::default();
        for s in [0, 1, 2, 5, 16383] {
            m.set_owner(s, Some(3));
        }
        m.set_owner(3, Some(1));
        assert_eq!(m.ranges_of(3), vec![(0, 2), (5, 5), (16383, 16383)]);
        assert_eq!(
            m.runs(),
            vec![(0, 2, 3), (3, 3, 1), (5, 5, 3), (16383, 16383, 3)]
        );
        assert_eq!(m.assigned(), 6);
        assert_eq!(m.ranges_of(1), vec![(3, 3)]);
        assert_eq!(m.ranges_of(7), vec![]);
        assert!(m.owns_any(1) && m.owns_any(3) && !m.owns_any(0));
        // Node 7 is past a 4-node table: its (none) slots count with the unassigned.
        assert_eq!(m.census(4), (vec![false, true, false, true], 16384 - 6));
        m.set_owner(9, Some(7));
        assert_eq!(m.census(4).1, 16384 - 6);
        m.set_owner(9, None);
        m.forget_index(1);
        assert_eq!(m.owner(3), None);
        assert_eq!(m.owner(0), Some(2));
    }

    #[test]
    fn slot_parsing_is_strict() {
        assert_eq!(parse_slot(b"0"), Some(0));
        assert_eq!(parse_slot(b"16383"), Some(16383));
        for bad in [
            &b"16384"[..],
            b"-1",
            b"abc",
            b"00012",
            b"+12",
            b" 12",
            b"1.0",
            b"",
            b"-0",
        ] {
            assert_eq!(parse_slot(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
    }
}
