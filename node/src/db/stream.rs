//! The stream type: entries by ID in nodes of consecutive entries (Redis keeps a radix tree
//! of listpacks; here a BTreeMap of [`node::Node`] keyed by each node's first ID), plus the
//! stream's counters and its consumer groups.
//!
//! Nodes fill up to `stream-node-max-entries` entries (deleted ones included) or an
//! estimate of `stream-node-max-bytes` listpack bytes, as in Redis, because approximate
//! trimming (`MAXLEN ~`, `MINID ~`) removes whole nodes only and clients and Redis's tests
//! see the resulting lengths.

pub mod group;
pub mod id;
pub mod node;
#[cfg(test)]
mod tests;
mod trim;

pub use group::{ConsumerName, Group};
pub use id::StreamId;
pub use node::Fields;
pub use trim::{Trim, TrimStrategy};

use node::Node;
use std::collections::BTreeMap;
use std::ops::Bound;

/// Redis caps a node at 1 GiB whatever `stream-node-max-bytes` says.
pub const NODE_BYTES_CAP: u64 = 1 << 30;

/// How big a node may grow (from `stream-node-max-entries` and `stream-node-max-bytes`;
/// 0 means no limit of that kind).
#[derive(Clone, Copy, Debug)]
pub struct NodeLimits {
    pub max_entries: u64,
    pub max_bytes: u64,
}

impl Default for NodeLimits {
    fn default() -> Self {
        NodeLimits {
            max_entries: 100,
            max_bytes: 4096,
        }
    }
}

#[derive(Debug, Clone, Default)]
pub struct Stream {
    nodes: BTreeMap<StreamId, Node>,
    length: u64,
    /// The last ID ever generated (XADD, XSETID).
    pub last_id: StreamId,
    /// The first live entry's ID, 0-0 when empty (XINFO `recorded-first-entry-id`).
    pub first_id: StreamId,
    /// The largest ID ever deleted (XDEL) (XINFO `max-deleted-entry-id`).
    pub max_deleted_id: StreamId,
    /// Entries ever added.
    pub entries_added: u64,
    pub groups: BTreeMap<Box<[u8]>, Group>,
}

/// Why an ID cannot be added.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddIdError {
    /// Not above the last ID.
    NotGreater,
    /// The stream used up every ID.
    Exhausted,
}

impl Stream {
    pub fn new() -> Stream {
        Stream::default()
    }

    pub fn len(&self) -> u64 {
        self.length
    }

    pub fn is_empty(&self) -> bool {
        self.length == 0
    }

    /// Number of nodes (XINFO `radix-tree-keys`).
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// The ID an XADD would use: `requested` with `seq_given` as parsed, or None for `*`.
    pub fn next_id(
        &self,
        requested: Option<id::ParsedId>,
        now_ms: u64,
    ) -> Result<StreamId, AddIdError> {
        let id = match requested {
            Some(p) if p.seq_given => p.id,
            Some(p) => {
                if p.id.ms == self.last_id.ms {
                    if self.last_id.seq == u64::MAX {
                        return Err(AddIdError::NotGreater);
                    }
                    StreamId::new(p.id.ms, self.last_id.seq + 1)
                } else {
                    p.id
                }
            }
            None => {
                if now_ms > self.last_id.ms {
                    StreamId::new(now_ms, 0)
                } else {
                    self.last_id.incr().ok_or(AddIdError::Exhausted)?
                }
            }
        };
        if id <= self.last_id {
            return Err(AddIdError::NotGreater);
        }
        Ok(id)
    }

    /// Appends an entry; `id` must be above `last_id` ([`Stream::next_id`]) and `pairs`
    /// hold field, value, ... (at least one pair).
    pub fn append(&mut self, id: StreamId, pairs: &[&[u8]], limits: NodeLimits) {
        debug_assert!(id > self.last_id && !pairs.is_empty() && pairs.len().is_multiple_of(2));
        let max_bytes = match limits.max_bytes {
            0 => NODE_BYTES_CAP,
            n => n.min(NODE_BYTES_CAP),
        };
        let new_bytes: u64 = pairs.iter().map(|p| p.len() as u64).sum();
        let full = match self.nodes.last_key_value() {
            None => true,
            Some((_, node)) => {
                node.bytes + new_bytes >= max_bytes
                    || (limits.max_entries != 0 && node.count_with_deleted() >= limits.max_entries)
            }
        };
        if full {
            self.nodes.insert(id, Node::new(id, pairs));
        } else if let Some(mut last) = self.nodes.last_entry() {
            let master = *last.key();
            last.get_mut().push(master, id, pairs);
        }
        self.length += 1;
        self.entries_added += 1;
        self.last_id = id;
        if self.length == 1 {
            self.first_id = id;
        }
    }

    /// The key of the node that would hold `id`.
    fn node_key_for(&self, id: StreamId) -> Option<StreamId> {
        self.nodes.range(..=id).next_back().map(|(k, _)| *k)
    }

    /// Whether a live entry `id` exists.
    pub fn contains(&self, id: StreamId) -> bool {
        self.get(id).is_some()
    }

    /// The fields of the live entry `id`.
    pub fn get(&self, id: StreamId) -> Option<Fields<'_>> {
        let node = &self.nodes[&self.node_key_for(id)?];
        let item = &node.items[node.find(id)?];
        (!item.deleted).then(|| node.fields(item))
    }

    /// Deletes the live entry `id` (XDEL); false if there is none. Updates the length and
    /// the deleted-ID high mark, not `first_id` (see [`Stream::refresh_first_id`]).
    pub fn delete(&mut self, id: StreamId) -> bool {
        let Some(key) = self.node_key_for(id) else {
            return false;
        };
        let Some(node) = self.nodes.get_mut(&key) else {
            return false;
        };
        let Some(i) = node.find(id) else {
            return false;
        };
        if !node.delete_at(i) {
            return false;
        }
        if node.live == 0 {
            self.nodes.remove(&key);
        }
        self.length -= 1;
        if id > self.max_deleted_id {
            self.max_deleted_id = id;
        }
        true
    }

    /// Sets `first_id` to the first live entry (0-0 when empty).
    pub fn refresh_first_id(&mut self) {
        self.first_id = self.first_entry_id().unwrap_or_default();
    }

    pub fn first_entry_id(&self) -> Option<StreamId> {
        self.nodes
            .values()
            .flat_map(|n| n.items.iter())
            .find(|i| !i.deleted)
            .map(|i| i.id)
    }

    /// The last live entry's ID.
    pub fn last_entry_id(&self) -> Option<StreamId> {
        self.nodes
            .values()
            .rev()
            .flat_map(|n| n.items.iter().rev())
            .find(|i| !i.deleted)
            .map(|i| i.id)
    }

    /// Calls `f` with each live entry whose ID is in `start..=end`, ascending (or descending
    /// when `rev`), until `f` returns false.
    pub fn for_each_in_range(
        &self,
        start: StreamId,
        end: StreamId,
        rev: bool,
        mut f: impl FnMut(StreamId, Fields<'_>) -> bool,
    ) {
        if start > end {
            return;
        }
        if !rev {
            let from = self.node_key_for(start).unwrap_or(start);
            for node in self.nodes.range(from..).map(|(_, n)| n) {
                let skip = node.items.partition_point(|i| i.id < start);
                for item in &node.items[skip..] {
                    if item.id > end {
                        return;
                    }
                    if !item.deleted && !f(item.id, node.fields(item)) {
                        return;
                    }
                }
            }
        } else {
            for node in self
                .nodes
                .range((Bound::Unbounded, Bound::Included(end)))
                .rev()
                .map(|(_, n)| n)
            {
                let take = node.items.partition_point(|i| i.id <= end);
                for item in node.items[..take].iter().rev() {
                    if item.id < start {
                        return;
                    }
                    if !item.deleted && !f(item.id, node.fields(item)) {
                        return;
                    }
                }
            }
        }
    }

    /// Whether some live entry has an ID above `id`.
    pub fn has_entry_after(&self, id: StreamId) -> bool {
        self.length > 0 && self.last_entry_id().is_some_and(|last| last > id)
    }

    /// Payload bytes: every live field and value (for slot statistics).
    pub fn payload_bytes(&self) -> u64 {
        self.nodes.values().map(Node::payload_bytes).sum()
    }

    /// Redis's `streamRangeHasTombstones`: whether a deleted entry may lie in
    /// `start..=end` (None: unbounded).
    pub fn range_has_tombstones(&self, start: Option<StreamId>, end: Option<StreamId>) -> bool {
        if self.length == 0 || self.max_deleted_id.is_zero() {
            return false;
        }
        if self.first_id > self.max_deleted_id {
            return false;
        }
        let start = start.unwrap_or(StreamId::ZERO);
        let end = end.unwrap_or(StreamId::MAX);
        start <= self.max_deleted_id && self.max_deleted_id <= end
    }

    /// Redis's `streamEstimateDistanceFromFirstEverEntry`: the logical read counter of
    /// `id`, when it can be known.
    pub fn estimate_distance(&self, id: StreamId) -> Option<u64> {
        if self.entries_added == 0 {
            return Some(0);
        }
        if self.length == 0 && id <= self.last_id {
            return Some(self.entries_added);
        }
        match id.cmp(&self.last_id) {
            std::cmp::Ordering::Equal => return Some(self.entries_added),
            std::cmp::Ordering::Greater => return None,
            std::cmp::Ordering::Less => {}
        }
        if self.max_deleted_id.is_zero() || self.max_deleted_id < self.first_id {
            match id.cmp(&self.first_id) {
                std::cmp::Ordering::Less => return Some(self.entries_added - self.length),
                std::cmp::Ordering::Equal => return Some(self.entries_added - self.length + 1),
                std::cmp::Ordering::Greater => {}
            }
        }
        None
    }

    /// A group's lag (entries not yet delivered), when it can be known.
    pub fn group_lag(&self, group: &Group) -> Option<u64> {
        if self.entries_added == 0 {
            return Some(0);
        }
        if let Some(read) = group.entries_read {
            if !self.range_has_tombstones(Some(group.last_id), None) {
                return Some(self.entries_added.saturating_sub(read));
            }
        }
        self.estimate_distance(group.last_id)
            .map(|read| self.entries_added.saturating_sub(read))
    }

    /// Moves a group's last delivered ID forward to `id` (XREADGROUP), keeping its read
    /// counter as Redis does.
    pub fn advance_group(&mut self, name: &[u8], id: StreamId) {
        let tombstones = self.range_has_tombstones(Some(id), None);
        let estimate = self.estimate_distance(id);
        let entries_added = self.entries_added;
        let Some(g) = self.groups.get_mut(name) else {
            return;
        };
        if id <= g.last_id {
            return;
        }
        match g.entries_read {
            Some(n) if !tombstones => g.entries_read = Some(n + 1),
            _ if entries_added != 0 => g.entries_read = estimate,
            _ => {}
        }
        g.last_id = id;
    }

    /// Every live entry, first to last (persistence, tests).
    pub fn entries(&self) -> impl Iterator<Item = (StreamId, Fields<'_>)> + '_ {
        self.nodes.values().flat_map(|n| {
            n.items
                .iter()
                .filter(|i| !i.deleted)
                .map(move |i| (i.id, n.fields(i)))
        })
    }

    /// Puts an entry back as it was persisted: IDs ascending, above every entry already
    /// loaded, counters restored separately.
    pub fn load_entry(&mut self, id: StreamId, pairs: &[&[u8]], limits: NodeLimits) -> bool {
        if pairs.is_empty() || !pairs.len().is_multiple_of(2) {
            return false;
        }
        if id.is_zero() || self.last_entry_id().is_some_and(|last| id <= last) {
            return false;
        }
        let (last_id, added, first) = (self.last_id, self.entries_added, self.first_id);
        // `append` expects an ID above `last_id`; the loaded counters are put back after.
        self.last_id = id.decr().unwrap_or_default();
        self.append(id, pairs, limits);
        self.last_id = last_id.max(id);
        self.entries_added = added + 1;
        self.first_id = if self.length == 1 { id } else { first };
        true
    }
}
