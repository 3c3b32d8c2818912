//! The replicated topology as one value: what a Raft snapshot carries so a lagging node
//! catches up without the compacted log. Only what the log decides is in it (nodes it added,
//! their addresses, roles and epochs, the slot map); liveness and links stay local.

use super::apply::{make_room, ApplyError, LOGGED_NODES_MAX};
use super::codec::{CodecError, Reader, Writer};
use super::command::{check_address, read_address, write_address, NodeAddress};
use super::log::BOOTSTRAP_INDEX;
use crate::cluster::error::ClusterError;
use crate::cluster::flags::bit;
use crate::cluster::id::{NodeId, ShardId};
use crate::cluster::node::ClusterNode;
use crate::cluster::topology::{Topology, NODES_MAX};
use proto::slot::SLOT_COUNT;
use std::collections::BTreeSet;

/// 2: the migration ledger follows the slot runs (format 1 images load with none).
/// 3: the operation journal follows the ledger (format 1 and 2 images load with none).
pub const IMAGE_FORMAT: u8 = 3;
const IMAGE_FORMAT_WITHOUT_MIGRATIONS: u8 = 1;
const IMAGE_FORMAT_WITHOUT_OPERATIONS: u8 = 2;

/// Largest encoded image. NODES_MAX nodes of at most ~440 bytes each (ids, address with the
/// longest hostname, epoch) plus one run per slot (6 bytes) fit well below it; it bounds what
/// a snapshot costs to hold and to send.
pub const IMAGE_BYTES_MAX: usize = 1024 * 1024;
const _: () = assert!(NODES_MAX * 450 + SLOT_COUNT * 6 + 64 < IMAGE_BYTES_MAX);

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeImage {
    pub id: NodeId,
    pub shard: ShardId,
    pub address: NodeAddress,
    /// Set for a replica.
    pub primary: Option<NodeId>,
    pub config_epoch: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TopologyImage {
    /// The topology version (log index) the image was taken at.
    pub version: u64,
    pub current_epoch: u64,
    /// Sorted by id, so every node takes the same image of the same state.
    pub nodes: Vec<NodeImage>,
    /// Slot runs in slot order: (start, end, index into `nodes`).
    pub slots: Vec<(u16, u16, u16)>,
    pub migrations: crate::cluster::migration::MigrationLedger,
    pub operations: crate::cluster::op_journal::OperationJournal,
}

impl TopologyImage {
    /// The replicated part of `t`.
    pub fn capture(t: &Topology) -> Self {
        let mut nodes: Vec<NodeImage> = t
            .nodes
            .iter()
            .filter(|n| t.consensus.nodes.contains(&n.id))
            .map(|n| NodeImage {
                id: n.id,
                shard: n.shard,
                address: NodeAddress {
                    ip: n.ip.clone(),
                    port: n.port,
                    cport: n.cport,
                    hostname: n.hostname.clone(),
                },
                primary: n.primary.filter(|_| n.is_replica()),
                config_epoch: n.config_epoch,
            })
            .collect();
        nodes.sort_by_key(|n| n.id);
        let position = |table_index: u16| {
            let id = t.nodes[table_index as usize].id;
            nodes.binary_search_by(|n| n.id.cmp(&id)).ok()
        };
        let mut slots: Vec<(u16, u16, u16)> = Vec::new();
        for (start, end, owner) in t.slots.runs() {
            let Some(p) = position(owner) else { continue };
            match slots.last_mut() {
                Some(last) if last.2 == p as u16 && last.1 + 1 == start => last.1 = end,
                _ => slots.push((start, end, p as u16)),
            }
        }
        TopologyImage {
            version: t.consensus.version,
            current_epoch: t.current_epoch,
            nodes,
            slots,
            migrations: t.consensus.migrations.clone(),
            operations: t.consensus.operations.clone(),
        }
    }

    /// Makes `t`'s replicated part equal to the image; local fields of nodes it already
    /// knew (liveness, links, offsets) are kept, and `myself` is never removed.
    pub fn restore(&self, t: &mut Topology) -> Result<(), ApplyError> {
        let version = t.consensus.version;
        if self.version <= version {
            return Err(ApplyError::AlreadyApplied {
                index: self.version,
                version,
            });
        }
        if self.nodes.len() > LOGGED_NODES_MAX {
            return Err(ClusterError::TooManyNodes(LOGGED_NODES_MAX).into());
        }
        let keep: BTreeSet<NodeId> = self.nodes.iter().map(|n| n.id).collect();
        let gone: Vec<NodeId> = t
            .consensus
            .nodes
            .iter()
            .filter(|id| !keep.contains(id))
            .copied()
            .collect();
        for id in gone {
            if let Some(i) = t.index_of(&id) {
                t.remove_node(i);
            }
        }
        let mut table = Vec::with_capacity(self.nodes.len());
        for n in &self.nodes {
            let i = match t.index_of(&n.id) {
                Some(i) => i,
                None => {
                    make_room(t);
                    t.add_node(ClusterNode::new(n.id, n.shard))?
                }
            };
            let node = &mut t.nodes[i as usize];
            node.shard = n.shard;
            node.ip.clone_from(&n.address.ip);
            node.port = n.address.port;
            node.cport = n.address.cport;
            node.hostname.clone_from(&n.address.hostname);
            node.flags.set(bit::MASTER, n.primary.is_none());
            node.flags.set(bit::SLAVE, n.primary.is_some());
            node.primary = n.primary;
            node.config_epoch = n.config_epoch;
            table.push(i);
        }
        for slot in 0..SLOT_COUNT as u16 {
            t.slots.set_owner(slot, None);
        }
        for &(start, end, owner) in &self.slots {
            for slot in start..=end {
                t.slots.set_owner(slot, Some(table[owner as usize]));
            }
        }
        t.consensus.nodes = keep;
        t.consensus.version = self.version;
        t.consensus.migrations = self.migrations.clone();
        t.consensus.operations = self.operations.clone();
        // Whether this node's role came from a promotion is not in the image: a primary
        // takes its grant (its config epoch, the index of the last change that gave it
        // slots) as if it had been, which only ever asks for a longer hand-off. An epoch
        // past the image's version, or any epoch in the bootstrap image, came from gossip
        // before the group (roles every member has held since it joined): none.
        let me = t.myself();
        t.consensus.promoted_at =
            if me.is_primary() && self.version > BOOTSTRAP_INDEX && me.config_epoch <= self.version
            {
                me.config_epoch
            } else {
                0
            };
        t.current_epoch = t.current_epoch.max(self.current_epoch);
        t.refresh_state();
        Ok(())
    }

    pub fn encode(&self) -> Result<Vec<u8>, CodecError> {
        if self.nodes.len() > NODES_MAX {
            return Err(CodecError::TooMany {
                what: "image nodes",
                count: self.nodes.len(),
                max: NODES_MAX,
            });
        }
        let mut w = Writer::default();
        w.u8(IMAGE_FORMAT);
        w.u64(self.version);
        w.u64(self.current_epoch);
        w.u32(self.nodes.len() as u32);
        for n in &self.nodes {
            check_address(&n.address)?;
            w.id(&n.id);
            w.id(&n.shard);
            write_address(&mut w, &n.address);
            match &n.primary {
                Some(p) => {
                    w.u8(1);
                    w.id(p);
                }
                None => w.u8(0),
            }
            w.u64(n.config_epoch);
        }
        w.u32(self.slots.len() as u32);
        for &(start, end, owner) in &self.slots {
            w.u16(start);
            w.u16(end);
            w.u16(owner);
        }
        self.migrations.encode_into(&mut w);
        self.operations.encode_into(&mut w);
        if w.buf.len() > IMAGE_BYTES_MAX {
            return Err(CodecError::TooLarge {
                len: w.buf.len(),
                max: IMAGE_BYTES_MAX,
            });
        }
        Ok(w.buf)
    }

    /// Decodes and checks an image: known format, unique nodes in id order, slot runs in
    /// order without overlap and naming nodes of the image.
    pub fn decode(bytes: &[u8]) -> Result<Self, CodecError> {
        let mut r = Reader::new(bytes, IMAGE_BYTES_MAX)?;
        let format = r.u8()?;
        if ![
            IMAGE_FORMAT,
            IMAGE_FORMAT_WITHOUT_OPERATIONS,
            IMAGE_FORMAT_WITHOUT_MIGRATIONS,
        ]
        .contains(&format)
        {
            return Err(CodecError::UnknownVersion(format));
        }
        let version = r.u64()?;
        let current_epoch = r.u64()?;
        let count = r.count("image nodes", NODES_MAX)?;
        let mut nodes: Vec<NodeImage> = Vec::with_capacity(count);
        for _ in 0..count {
            let id = r.id()?;
            if nodes.last().is_some_and(|prev| prev.id >= id) {
                return Err(CodecError::BadValue {
                    what: "node order",
                    value: nodes.len() as u64,
                });
            }
            let shard = r.id()?;
            let address = read_address(&mut r)?;
            let primary = if r.bool("has primary")? {
                Some(r.id()?)
            } else {
                None
            };
            let config_epoch = r.u64()?;
            nodes.push(NodeImage {
                id,
                shard,
                address,
                primary,
                config_epoch,
            });
        }
        let runs = r.count("slot runs", SLOT_COUNT)?;
        let mut slots: Vec<(u16, u16, u16)> = Vec::with_capacity(runs);
        for _ in 0..runs {
            let (start, end) = r.range()?;
            let owner = r.u16()?;
            if owner as usize >= nodes.len() {
                return Err(CodecError::BadValue {
                    what: "slot owner",
                    value: owner as u64,
                });
            }
            if slots.last().is_some_and(|prev| prev.1 >= start) {
                return Err(CodecError::BadValue {
                    what: "slot run order",
                    value: start as u64,
                });
            }
            slots.push((start, end, owner));
        }
        let migrations = match format {
            IMAGE_FORMAT_WITHOUT_MIGRATIONS => Default::default(),
            _ => crate::cluster::migration::MigrationLedger::decode_from(&mut r)?,
        };
        let operations = match format {
            IMAGE_FORMAT => crate::cluster::op_journal::OperationJournal::decode_from(&mut r)?,
            _ => Default::default(),
        };
        r.finish()?;
        Ok(TopologyImage {
            version,
            current_epoch,
            nodes,
            slots,
            migrations,
            operations,
        })
    }
}
