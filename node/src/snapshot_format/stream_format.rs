//! The snapshot format's stream value (tag `STREAM`, format version 2): the whole logical
//! stream, not its node layout (nodes are rebuilt on load under the default node limits).
//!
//! ```text
//! STREAM last_id first_id max_deleted_id entries_added:varint
//!        n:varint (id pairs:varint (field value)*pairs)*n          IDs ascending, pairs >= 1
//!        groups:varint (name:bytes last_id entries_read:varint      (0: unknown, else n+1)
//!                       consumers:varint (name:bytes seen_time:varint)*
//!                       pel:varint (id consumer:bytes delivery_time:varint count:varint)*)*
//! id = ms:varint seq:varint
//! ```
//!
//! Every pending entry names a consumer of its group, IDs of entries and of each PEL are
//! strictly ascending, group and consumer names unique: a file that breaks one of these is
//! refused, so a loaded stream always satisfies the invariants the commands rely on.

use super::format::{put_bytes, put_varint, Decoder, FormatError, MAX_ELEMENTS};
use crate::db::stream::group::{Consumer, Pending};
use crate::db::stream::{Group, NodeLimits, Stream, StreamId};
use std::io::Read;
use std::sync::Arc;

fn put_id(out: &mut Vec<u8>, id: StreamId) {
    put_varint(out, id.ms);
    put_varint(out, id.seq);
}

/// Appends a stream's body (after its tag).
pub fn put_stream(out: &mut Vec<u8>, s: &Stream) {
    put_id(out, s.last_id);
    put_id(out, s.first_id);
    put_id(out, s.max_deleted_id);
    put_varint(out, s.entries_added);
    put_varint(out, s.len());
    let mut written = 0u64;
    for (id, fields) in s.entries() {
        put_id(out, id);
        put_varint(out, fields.len() as u64);
        for (f, v) in fields.pairs() {
            put_bytes(out, f);
            put_bytes(out, v);
        }
        written += 1;
    }
    debug_assert_eq!(written, s.len(), "stream length and entries disagree");
    put_varint(out, s.groups.len() as u64);
    for (name, g) in &s.groups {
        put_bytes(out, name);
        put_id(out, g.last_id);
        put_varint(out, g.entries_read.map_or(0, |n| n.saturating_add(1)));
        put_varint(out, g.consumers.len() as u64);
        for (cname, c) in &g.consumers {
            put_bytes(out, cname);
            put_varint(out, c.seen_time);
        }
        put_varint(out, g.pel.len() as u64);
        for (id, p) in &g.pel {
            put_id(out, *id);
            put_bytes(out, &p.consumer);
            put_varint(out, p.delivery_time);
            put_varint(out, p.delivery_count);
        }
    }
}

impl<R: Read> Decoder<R> {
    fn stream_id(&mut self) -> Result<StreamId, FormatError> {
        Ok(StreamId::new(self.varint()?, self.varint()?))
    }

    /// A stream's body (after its tag).
    pub fn stream(&mut self) -> Result<Stream, FormatError> {
        let last_id = self.stream_id()?;
        let first_id = self.stream_id()?;
        let max_deleted_id = self.stream_id()?;
        let entries_added = self.varint()?;
        // Each entry: an ID (2), a pair count (1) and one pair (2) at least.
        let n = self.length_of("stream entries", MAX_ELEMENTS, 5)?;
        let mut s = Stream::new();
        let mut pairs: Vec<Box<[u8]>> = Vec::new();
        for _ in 0..n {
            let at = self.offset();
            let id = self.stream_id()?;
            let count = self.length_of("stream entry fields", MAX_ELEMENTS, 2)?;
            if count == 0 {
                return Err(FormatError::Empty {
                    what: "stream entry",
                    offset: at,
                });
            }
            pairs.clear();
            for _ in 0..count * 2 {
                pairs.push(self.bytes()?);
            }
            let refs: Vec<&[u8]> = pairs.iter().map(|p| &**p).collect();
            if !s.load_entry(id, &refs, NodeLimits::default()) {
                return Err(FormatError::Duplicate {
                    what: "stream entry ID (or one out of order)",
                    offset: at,
                });
            }
        }
        let at = self.offset();
        if s.last_entry_id().is_some_and(|top| top > last_id) {
            return Err(FormatError::Duplicate {
                what: "stream last ID below an entry",
                offset: at,
            });
        }
        s.last_id = last_id;
        s.first_id = if s.is_empty() {
            StreamId::ZERO
        } else {
            first_id
        };
        s.max_deleted_id = max_deleted_id;
        s.entries_added = entries_added.max(s.len());
        // Each group: a name (1), last ID (2), counter (1), two counts (2).
        let groups = self.length_of("stream groups", MAX_ELEMENTS, 6)?;
        for _ in 0..groups {
            let at = self.offset();
            let name = self.bytes()?;
            let group = self.group()?;
            if s.groups.insert(name, group).is_some() {
                return Err(FormatError::Duplicate {
                    what: "consumer group",
                    offset: at,
                });
            }
        }
        Ok(s)
    }

    fn group(&mut self) -> Result<Group, FormatError> {
        let last_id = self.stream_id()?;
        let entries_read = match self.varint()? {
            0 => None,
            n => Some(n - 1),
        };
        let mut g = Group::new(last_id, entries_read);
        let consumers = self.length_of("consumers", MAX_ELEMENTS, 2)?;
        for _ in 0..consumers {
            let at = self.offset();
            let name: Arc<[u8]> = Arc::from(self.bytes()?);
            let seen_time = self.varint()?;
            let consumer = Consumer {
                seen_time,
                ..Consumer::default()
            };
            if g.consumers.insert(name, consumer).is_some() {
                return Err(FormatError::Duplicate {
                    what: "consumer",
                    offset: at,
                });
            }
        }
        let pending = self.length_of("pending entries", MAX_ELEMENTS, 5)?;
        let mut previous: Option<StreamId> = None;
        for _ in 0..pending {
            let at = self.offset();
            let id = self.stream_id()?;
            if previous.is_some_and(|p| p >= id) {
                return Err(FormatError::Duplicate {
                    what: "pending entry (or one out of order)",
                    offset: at,
                });
            }
            previous = Some(id);
            let owner = self.bytes()?;
            let delivery_time = self.varint()?;
            let delivery_count = self.varint()?;
            let Some(name) = g.consumers.get_key_value(&*owner).map(|(n, _)| n.clone()) else {
                return Err(FormatError::Duplicate {
                    what: "pending entry of an unknown consumer",
                    offset: at,
                });
            };
            if let Some(c) = g.consumers.get_mut(&name) {
                c.pel.insert(id);
            }
            g.pel.insert(
                id,
                Pending {
                    consumer: name,
                    delivery_time,
                    delivery_count,
                },
            );
        }
        Ok(g)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::stream::group::DeliveryCount;
    use crate::db::Value;
    use crate::snapshot_format::format::{put_value, tag, value_from_slice};

    pub fn sample() -> Stream {
        let mut s = Stream::new();
        for i in 1..=250u64 {
            let v = i.to_string();
            let f: &[u8] = if i % 7 == 0 { b"other" } else { b"f" };
            s.append(
                StreamId::new(i, 1),
                &[f, v.as_bytes(), b"g", b"x"],
                NodeLimits::default(),
            );
        }
        s.delete(StreamId::new(3, 1));
        s.delete(StreamId::new(1, 1));
        s.refresh_first_id();
        s.last_id = StreamId::new(900, 0);
        let mut g = Group::new(StreamId::new(10, 1), Some(9));
        let (alice, _) = g.consumer_or_create(b"alice", 1234);
        g.consumer_or_create(b"idle", 99);
        g.deliver(StreamId::new(5, 1), &alice, 77);
        g.claim(StreamId::new(8, 1), &alice, 88, DeliveryCount::Set(4));
        s.groups.insert((*b"g1").into(), g);
        s.groups
            .insert((*b"g2").into(), Group::new(StreamId::ZERO, None));
        s
    }

    fn text(v: &Value) -> String {
        let Value::Stream(s) = v else {
            panic!("not a stream")
        };
        let entries: Vec<String> = s
            .entries()
            .map(|(id, f)| {
                let pairs: Vec<String> = f
                    .pairs()
                    .map(|(a, b)| {
                        format!(
                            "{}={}",
                            String::from_utf8_lossy(a),
                            String::from_utf8_lossy(b)
                        )
                    })
                    .collect();
                format!("{id}:{}", pairs.join(","))
            })
            .collect();
        let groups: Vec<String> = s
            .groups
            .iter()
            .map(|(n, g)| {
                format!(
                    "{}:{}:{:?}:{:?}:{:?}",
                    String::from_utf8_lossy(n),
                    g.last_id,
                    g.entries_read,
                    g.consumers
                        .iter()
                        .map(|(n, c)| (n.to_vec(), c.seen_time, c.pel.clone()))
                        .collect::<Vec<_>>(),
                    g.pel
                        .iter()
                        .map(|(i, p)| (*i, p.consumer.to_vec(), p.delivery_time, p.delivery_count))
                        .collect::<Vec<_>>()
                )
            })
            .collect();
        format!(
            "{} {} {} {} {} | {} | {}",
            s.len(),
            s.last_id,
            s.first_id,
            s.max_deleted_id,
            s.entries_added,
            entries.join(" "),
            groups.join(" ")
        )
    }

    #[test]
    fn streams_round_trip_with_groups_and_pels() {
        for s in [sample(), Stream::new()] {
            let v = Value::Stream(Box::new(s));
            let mut out = Vec::new();
            put_value(&mut out, &v);
            assert_eq!(out[0], tag::STREAM);
            let back = value_from_slice(&out).unwrap();
            assert_eq!(text(&back), text(&v));
            for cut in 0..out.len() {
                assert!(value_from_slice(&out[..cut]).is_err(), "cut at {cut}");
            }
        }
    }

    #[test]
    fn a_pending_entry_of_an_unknown_consumer_is_refused() {
        let mut s = Stream::new();
        let mut g = Group::new(StreamId::ZERO, None);
        let (bob, _) = g.consumer_or_create(b"bob", 0);
        g.deliver(StreamId::new(1, 0), &bob, 0);
        g.consumers.clear();
        s.groups.insert((*b"g").into(), g);
        let mut out = Vec::new();
        put_value(&mut out, &Value::Stream(Box::new(s)));
        let e = value_from_slice(&out).unwrap_err().to_string();
        assert!(e.contains("unknown consumer"), "{e}");
    }
}
