//! How entries are written: each `[id, [field, value, ...]]`, the same in RESP2 and RESP3.

use crate::db::stream::{Fields, Stream, StreamId};
use proto::resp::Reply;

pub fn id(reply: &mut Reply<'_>, id: StreamId) {
    let mut buf = itoa::Buffer::new();
    let ms = buf.format(id.ms).as_bytes().to_vec();
    let seq = buf.format(id.seq).as_bytes();
    let mut text = Vec::with_capacity(ms.len() + 1 + seq.len());
    text.extend_from_slice(&ms);
    text.push(b'-');
    text.extend_from_slice(seq);
    reply.bulk(&text);
}

pub fn entry(reply: &mut Reply<'_>, at: StreamId, fields: Fields<'_>) {
    reply.array(2);
    id(reply, at);
    reply.array(fields.len() * 2);
    for (f, v) in fields.pairs() {
        reply.bulk(f);
        reply.bulk(v);
    }
}

/// The live entries of `start..=end` (descending when `rev`), at most `count` (0: all).
pub fn collect_range(
    s: &Stream,
    start: StreamId,
    end: StreamId,
    rev: bool,
    count: usize,
) -> Vec<StreamId> {
    let mut ids = Vec::new();
    s.for_each_in_range(start, end, rev, |id, _| {
        ids.push(id);
        count == 0 || ids.len() < count
    });
    ids
}

/// Writes the entries `ids` (all live in `s`) as an array.
pub fn entries(reply: &mut Reply<'_>, s: &Stream, ids: &[StreamId]) {
    reply.array(ids.len());
    for &at in ids {
        match s.get(at) {
            Some(f) => entry(reply, at, f),
            None => {
                // Callers pass IDs they just found live; never reached.
                reply.null_array();
            }
        }
    }
}
