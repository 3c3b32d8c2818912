//! Our streams as STREAM_LISTPACKS_2: the live entries cut into listpack nodes (at most
//! 100 entries or about 4 KB each, Redis's default node limits), each node's first entry
//! giving the master fields that later entries with the same fields omit (SAMEFIELDS); then
//! the counters, then the groups and consumers in name order, as Redis's radix trees list
//! them.

use super::listpack;
use super::write::{put_len, put_string};
use crate::db::stream::{Stream, StreamId};

const NODE_MAX_ENTRIES: usize = 100;
const NODE_MAX_BYTES: usize = 4096;
const FLAG_NONE: i64 = 0;
const FLAG_SAMEFIELDS: i64 = 2;
/// `SCG_INVALID_ENTRIES_READ` as `rdbSaveLen` writes it.
const ENTRIES_READ_UNKNOWN: u64 = u64::MAX;

fn raw_id(id: StreamId) -> [u8; 16] {
    let mut out = [0u8; 16];
    out[..8].copy_from_slice(&id.ms.to_be_bytes());
    out[8..].copy_from_slice(&id.seq.to_be_bytes());
    out
}

fn put_len_id(out: &mut Vec<u8>, id: StreamId) {
    put_len(out, id.ms);
    put_len(out, id.seq);
}

/// One listpack node being filled.
struct Node {
    master: StreamId,
    master_fields: Vec<Box<[u8]>>,
    entries: usize,
    lp: listpack::Writer,
}

impl Node {
    fn start(master: StreamId, fields: Vec<Box<[u8]>>) -> Node {
        let lp = listpack::Writer::new();
        Node {
            master,
            master_fields: fields,
            entries: 0,
            lp,
        }
    }

    fn full(&self) -> bool {
        self.entries >= NODE_MAX_ENTRIES || self.lp.len() >= NODE_MAX_BYTES
    }

    fn push(&mut self, id: StreamId, pairs: &[(&[u8], &[u8])]) {
        let same = pairs.len() == self.master_fields.len()
            && pairs
                .iter()
                .zip(&self.master_fields)
                .all(|((f, _), m)| *f == &**m);
        let lp = &mut self.lp;
        lp.int(if same { FLAG_SAMEFIELDS } else { FLAG_NONE });
        lp.int(id.ms.wrapping_sub(self.master.ms) as i64);
        lp.int(id.seq.wrapping_sub(self.master.seq) as i64);
        if same {
            for (_, v) in pairs {
                lp.string(v);
            }
            lp.int(pairs.len() as i64 + 3);
        } else {
            lp.int(pairs.len() as i64);
            for (f, v) in pairs {
                lp.string(f);
                lp.string(v);
            }
            lp.int(2 * pairs.len() as i64 + 4);
        }
        self.entries += 1;
    }

    /// The node's key and its listpack, the master entry in front.
    fn finish(self, out: &mut Vec<u8>) {
        let mut head = listpack::Writer::new();
        head.int(self.entries as i64);
        head.int(0);
        head.int(self.master_fields.len() as i64);
        for f in &self.master_fields {
            head.string(f);
        }
        head.int(0);
        put_string(out, &raw_id(self.master));
        put_string(out, &head.append(self.lp).finish());
    }
}

/// A stream's body after its type byte.
pub fn put_stream(out: &mut Vec<u8>, s: &Stream) {
    let mut nodes: Vec<u8> = Vec::new();
    let mut count = 0u64;
    let mut node: Option<Node> = None;
    for (id, fields) in s.entries() {
        let pairs: Vec<(&[u8], &[u8])> = fields.pairs().collect();
        if node.as_ref().is_some_and(Node::full) {
            if let Some(done) = node.take() {
                done.finish(&mut nodes);
                count += 1;
            }
        }
        let n = node.get_or_insert_with(|| {
            Node::start(
                id,
                pairs.iter().map(|(f, _)| Box::<[u8]>::from(*f)).collect(),
            )
        });
        n.push(id, &pairs);
    }
    if let Some(done) = node.take() {
        done.finish(&mut nodes);
        count += 1;
    }
    put_len(out, count);
    out.extend_from_slice(&nodes);
    put_len(out, s.len());
    put_len_id(out, s.last_id);
    put_len_id(out, s.first_id);
    put_len_id(out, s.max_deleted_id);
    put_len(out, s.entries_added);
    put_len(out, s.groups.len() as u64);
    for (name, g) in &s.groups {
        put_string(out, name);
        put_len_id(out, g.last_id);
        put_len(out, g.entries_read.unwrap_or(ENTRIES_READ_UNKNOWN));
        put_len(out, g.pel.len() as u64);
        for (id, p) in &g.pel {
            out.extend_from_slice(&raw_id(*id));
            out.extend_from_slice(&p.delivery_time.to_le_bytes());
            put_len(out, p.delivery_count);
        }
        put_len(out, g.consumers.len() as u64);
        for (cname, c) in &g.consumers {
            put_string(out, cname);
            out.extend_from_slice(&c.seen_time.to_le_bytes());
            put_len(out, c.pel.len() as u64);
            for id in &c.pel {
                out.extend_from_slice(&raw_id(*id));
            }
        }
    }
}
