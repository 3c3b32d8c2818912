//! Streams as Redis 7.0 stores them (`STREAM_LISTPACKS_2`; `STREAM_LISTPACKS` from Redis 5
//! to 6.2): the entries in listpack nodes keyed by their master ID, then the stream's
//! counters, then the consumer groups with their pending entries and consumers.
//!
//! A node's listpack starts with a master entry (live count, deleted count, the master
//! fields, 0); each entry follows as flags, ID deltas from the node's key, the fields
//! (omitted when the SAMEFIELDS flag says they are the master's), the values, and the number
//! of listpack items the entry took. Deleted entries are skipped; everything is rebuilt in
//! our own stream, whose invariants (ascending IDs, each pending entry owned by a consumer
//! of its group) are checked as it is built.

use super::input::Input;
use super::listpack::{self, Entry};
use super::{rdb_type, RdbError};
use crate::db::stream::group::{Consumer, Pending};
use crate::db::stream::{Group, NodeLimits, Stream, StreamId};
use std::collections::BTreeMap;
use std::sync::Arc;

const FLAG_DELETED: i64 = 1;
const FLAG_SAMEFIELDS: i64 = 2;
/// `SCG_INVALID_ENTRIES_READ` (-1) as `rdbSaveLen` writes it.
const ENTRIES_READ_UNKNOWN: u64 = u64::MAX;

fn id_from_raw(raw: &[u8; 16]) -> StreamId {
    let mut ms = [0u8; 8];
    let mut seq = [0u8; 8];
    ms.copy_from_slice(&raw[..8]);
    seq.copy_from_slice(&raw[8..]);
    StreamId::new(u64::from_be_bytes(ms), u64::from_be_bytes(seq))
}

fn len_id(input: &mut Input<'_>) -> Result<StreamId, RdbError> {
    Ok(StreamId::new(input.length()?, input.length()?))
}

/// A stream's body after its type byte.
pub fn stream(kind: u8, input: &mut Input<'_>) -> Result<Stream, RdbError> {
    let mut s = Stream::new();
    // Each node: a 16-byte key string (17) and a listpack string (8) at least.
    let nodes = input.count(25)?;
    for _ in 0..nodes {
        let key = input.string()?;
        let Ok(key) = <[u8; 16]>::try_from(&*key) else {
            return Err(input.corrupt("stream node key is not a stream ID"));
        };
        let lp = input.string()?;
        let entries = listpack::entries(&lp)?;
        load_node(&mut s, id_from_raw(&key), &entries, input)?;
    }
    let length = input.length()?;
    if length != s.len() {
        return Err(input.corrupt("stream length differs from its entries"));
    }
    let last_id = len_id(input)?;
    if s.last_entry_id().is_some_and(|top| top > last_id) {
        return Err(input.corrupt("stream last ID below an entry"));
    }
    s.last_id = last_id;
    if kind == rdb_type::STREAM_LISTPACKS_2 {
        let first_id = len_id(input)?;
        s.first_id = if s.is_empty() {
            StreamId::ZERO
        } else {
            first_id
        };
        s.max_deleted_id = len_id(input)?;
        s.entries_added = input.length()?.max(s.len());
    } else {
        s.first_id = s.first_entry_id().unwrap_or(StreamId::ZERO);
        s.max_deleted_id = StreamId::ZERO;
        s.entries_added = s.len();
    }
    // Each group: a name (1), an ID (2), two counts (2).
    let groups = input.count(5)?;
    for _ in 0..groups {
        let name = input.string()?.into_owned().into_boxed_slice();
        let group = group(kind, &s, input)?;
        if s.groups.insert(name, group).is_some() {
            return Err(input.corrupt("duplicate consumer group"));
        }
    }
    Ok(s)
}

/// One node's entries, appended to `s`.
fn load_node(
    s: &mut Stream,
    master: StreamId,
    lp: &[Entry<'_>],
    input: &Input<'_>,
) -> Result<(), RdbError> {
    let bad = || input.corrupt("stream listpack malformed");
    let mut items = lp.iter().copied();
    let int = |items: &mut dyn Iterator<Item = Entry<'_>>| {
        items.next().and_then(Entry::as_int).ok_or_else(bad)
    };
    let live = int(&mut items)?;
    let deleted = int(&mut items)?;
    let master_count = usize::try_from(int(&mut items)?).map_err(|_| bad())?;
    if master_count > lp.len() {
        return Err(bad());
    }
    let master_fields: Vec<Entry<'_>> = items.by_ref().take(master_count).collect();
    if master_fields.len() != master_count || int(&mut items)? != 0 {
        return Err(bad());
    }
    let total = live
        .checked_add(deleted)
        .filter(|&n| n >= 1)
        .ok_or_else(bad)?;
    let mut pairs: Vec<Box<[u8]>> = Vec::new();
    let mut seen_live = 0i64;
    for _ in 0..total {
        let flags = int(&mut items)?;
        let ms = master.ms.wrapping_add(int(&mut items)? as u64);
        let seq = master.seq.wrapping_add(int(&mut items)? as u64);
        let (count, fields): (usize, Option<Vec<Entry<'_>>>) = if flags & FLAG_SAMEFIELDS != 0 {
            (master_count, None)
        } else {
            let n = usize::try_from(int(&mut items)?).map_err(|_| bad())?;
            if n > lp.len() {
                return Err(bad());
            }
            (n, Some(Vec::with_capacity(n)))
        };
        pairs.clear();
        if let Some(mut own) = fields {
            for _ in 0..count {
                own.push(items.next().ok_or_else(bad)?);
                own.push(items.next().ok_or_else(bad)?);
            }
            pairs.extend(own.into_iter().map(Entry::to_bytes));
        } else {
            for field in &master_fields {
                pairs.push(field.to_bytes());
                pairs.push(items.next().ok_or_else(bad)?.to_bytes());
            }
        }
        let expected_items = if flags & FLAG_SAMEFIELDS != 0 {
            count + 3
        } else {
            2 * count + 4
        };
        if usize::try_from(int(&mut items)?).ok() != Some(expected_items) {
            return Err(bad());
        }
        if flags & FLAG_DELETED != 0 {
            continue;
        }
        seen_live += 1;
        let refs: Vec<&[u8]> = pairs.iter().map(|p| &**p).collect();
        if !s.load_entry(StreamId::new(ms, seq), &refs, NodeLimits::default()) {
            return Err(input.corrupt("stream entry out of order, duplicate or empty"));
        }
    }
    if items.next().is_some() || seen_live != live {
        return Err(bad());
    }
    Ok(())
}

fn group(kind: u8, s: &Stream, input: &mut Input<'_>) -> Result<Group, RdbError> {
    let last_id = len_id(input)?;
    let entries_read = if kind == rdb_type::STREAM_LISTPACKS_2 {
        match input.length()? {
            ENTRIES_READ_UNKNOWN => None,
            n => Some(n),
        }
    } else {
        s.estimate_distance(last_id)
    };
    let mut g = Group::new(last_id, entries_read);
    // Each pending entry: a 16-byte ID, an 8-byte time, a count (1).
    let pending = input.count(25)?;
    let mut unowned: BTreeMap<StreamId, (u64, u64)> = BTreeMap::new();
    for _ in 0..pending {
        let id = id_from_raw(&input.raw::<16>()?);
        let delivery_time = input.millis()?;
        let delivery_count = input.length()?;
        if unowned
            .insert(id, (delivery_time, delivery_count))
            .is_some()
        {
            return Err(input.corrupt("duplicate pending entry"));
        }
    }
    // Each consumer: a name (1), an 8-byte time, a count (1).
    let consumers = input.count(10)?;
    for _ in 0..consumers {
        let name: Arc<[u8]> = Arc::from(input.string()?.into_owned());
        let seen_time = input.millis()?;
        let mut consumer = Consumer {
            seen_time,
            ..Consumer::default()
        };
        let owned = input.count(16)?;
        for _ in 0..owned {
            let id = id_from_raw(&input.raw::<16>()?);
            let Some((delivery_time, delivery_count)) = unowned.remove(&id) else {
                return Err(input.corrupt("consumer pending entry not in its group's"));
            };
            consumer.pel.insert(id);
            g.pel.insert(
                id,
                Pending {
                    consumer: name.clone(),
                    delivery_time,
                    delivery_count,
                },
            );
        }
        if g.consumers.insert(name, consumer).is_some() {
            return Err(input.corrupt("duplicate consumer"));
        }
    }
    if !unowned.is_empty() {
        return Err(input.corrupt("pending entry without a consumer"));
    }
    Ok(g)
}
