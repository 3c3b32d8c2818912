//! One node of a stream: a run of consecutive entries, as Redis keeps one listpack per radix
//! tree node. The first entry's field names are the node's "master fields": an entry with the
//! same field names stores only its values. Deleted entries stay in the node as tombstones
//! (their data dropped) until the whole node goes, as in Redis, because the node's fullness
//! (`stream-node-max-entries`) counts them and approximate trimming (`~`) removes whole nodes.

use super::id::StreamId;

pub type Bytes = Box<[u8]>;

/// An entry inside a node.
#[derive(Debug, Clone)]
pub struct Item {
    pub id: StreamId,
    pub deleted: bool,
    /// True when the entry's fields are the node's master fields (only values stored).
    pub same_fields: bool,
    /// Values only when `same_fields`, else field, value, field, value...
    pub data: Box<[Bytes]>,
}

#[derive(Debug, Clone)]
pub struct Node {
    pub master_fields: Box<[Bytes]>,
    pub items: Vec<Item>,
    /// Entries not deleted.
    pub live: u64,
    /// Estimated bytes of the listpack Redis would hold for this node (for
    /// `stream-node-max-bytes`).
    pub bytes: u64,
}

/// The fields of one entry, as stored.
#[derive(Clone, Copy)]
pub struct Fields<'a> {
    master: &'a [Bytes],
    item: &'a Item,
}

impl<'a> Fields<'a> {
    /// Number of field-value pairs.
    pub fn len(&self) -> usize {
        if self.item.same_fields {
            self.item.data.len()
        } else {
            self.item.data.len() / 2
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The pairs in order.
    pub fn pairs(&self) -> impl Iterator<Item = (&'a [u8], &'a [u8])> + 'a {
        let item = self.item;
        let master = self.master;
        (0..self.len()).map(move |i| {
            if item.same_fields {
                (&*master[i], &*item.data[i])
            } else {
                (&*item.data[2 * i], &*item.data[2 * i + 1])
            }
        })
    }
}

/// Bytes of a listpack element holding `s` (Redis stores integer-looking strings as
/// integers), header and back-length included.
pub fn lp_string_bytes(s: &[u8]) -> u64 {
    if s.len() <= 20 {
        if let Some(n) = proto::resp::request::parse_i64(s) {
            return lp_int_bytes(n);
        }
    }
    let len = s.len() as u64;
    let header = if len < 64 {
        1
    } else if len < 4096 {
        2
    } else {
        5
    };
    let total = header + len;
    total + backlen_bytes(total)
}

pub fn lp_int_bytes(n: i64) -> u64 {
    let body = if (0..=127).contains(&n) {
        1
    } else if (-4096..4096).contains(&n) {
        2
    } else if (-32768..32768).contains(&n) {
        3
    } else if (-8_388_608..8_388_608).contains(&n) {
        4
    } else if (i32::MIN as i64..=i32::MAX as i64).contains(&n) {
        5
    } else {
        9
    };
    body + 1
}

/// How many bytes a listpack entry of `total` bytes (encoding and data) takes to say its
/// length (its "backlen"), with Redis's boundaries (`lpEncodeBacklen`: 2 bytes below 16,383,
/// 3 below 2,097,151, 4 below 268,435,455). The RDB listpack writer uses it too.
pub fn backlen_bytes(total: u64) -> u64 {
    match total {
        0..=127 => 1,
        128..=16382 => 2,
        16383..=2_097_150 => 3,
        2_097_151..=268_435_454 => 4,
        _ => 5,
    }
}

/// Listpack header (6) and end byte (1).
const LP_OVERHEAD: u64 = 7;

impl Node {
    /// A node whose first entry is `id` with `pairs` (field, value, ...).
    pub fn new(id: StreamId, pairs: &[&[u8]]) -> Node {
        let master_fields: Box<[Bytes]> =
            pairs.iter().step_by(2).map(|f| Bytes::from(*f)).collect();
        // count, deleted, master field count, the fields, the master terminator.
        let mut bytes = LP_OVERHEAD + lp_int_bytes(1) + lp_int_bytes(0);
        bytes += lp_int_bytes(master_fields.len() as i64);
        bytes += master_fields
            .iter()
            .map(|f| lp_string_bytes(f))
            .sum::<u64>();
        bytes += lp_int_bytes(0);
        let mut node = Node {
            master_fields,
            items: Vec::new(),
            live: 0,
            bytes,
        };
        node.push(id, id, pairs);
        node
    }

    /// Appends an entry (its ID above every ID in the node); `master_id` is the node's key.
    pub fn push(&mut self, master_id: StreamId, id: StreamId, pairs: &[&[u8]]) {
        let n = pairs.len() / 2;
        let same = n == self.master_fields.len()
            && pairs
                .iter()
                .step_by(2)
                .zip(self.master_fields.iter())
                .all(|(f, m)| **f == **m);
        let data: Box<[Bytes]> = if same {
            pairs
                .iter()
                .skip(1)
                .step_by(2)
                .map(|v| Bytes::from(*v))
                .collect()
        } else {
            pairs.iter().map(|x| Bytes::from(*x)).collect()
        };
        // flags, ms delta, seq delta, [field count], the strings, lp-count.
        let ms_delta = id.ms.wrapping_sub(master_id.ms) as i64;
        let seq_delta = id.seq.wrapping_sub(master_id.seq) as i64;
        let mut bytes = lp_int_bytes(2) + lp_int_bytes(ms_delta) + lp_int_bytes(seq_delta);
        if !same {
            bytes += lp_int_bytes(n as i64);
        }
        bytes += data.iter().map(|s| lp_string_bytes(s)).sum::<u64>();
        bytes += lp_int_bytes(data.len() as i64 + 3);
        self.bytes += bytes;
        self.items.push(Item {
            id,
            deleted: false,
            same_fields: same,
            data,
        });
        self.live += 1;
    }

    /// Live and deleted entries together (what `stream-node-max-entries` counts).
    pub fn count_with_deleted(&self) -> u64 {
        self.items.len() as u64
    }

    pub fn fields<'a>(&'a self, item: &'a Item) -> Fields<'a> {
        Fields {
            master: &self.master_fields,
            item,
        }
    }

    /// Index of the entry `id`, live or deleted.
    pub fn find(&self, id: StreamId) -> Option<usize> {
        self.items.binary_search_by(|i| i.id.cmp(&id)).ok()
    }

    /// Marks entry `i` deleted and drops its data. False if it already was.
    pub fn delete_at(&mut self, i: usize) -> bool {
        let item = &mut self.items[i];
        if item.deleted {
            return false;
        }
        item.deleted = true;
        item.data = Box::new([]);
        self.live -= 1;
        true
    }

    /// The last entry's ID, deleted or not (Redis's `lpGetEdgeStreamID`).
    pub fn last_id(&self) -> StreamId {
        self.items.last().map(|i| i.id).unwrap_or_default()
    }

    /// Payload bytes (fields and values of live entries).
    pub fn payload_bytes(&self) -> u64 {
        self.items
            .iter()
            .filter(|i| !i.deleted)
            .map(|i| {
                let f = self.fields(i);
                f.pairs()
                    .map(|(a, b)| (a.len() + b.len()) as u64)
                    .sum::<u64>()
            })
            .sum()
    }
}
