//! Redis's RDB value encodings into our values (`rdbLoadObject`): every type redis-server
//! 7.0 writes (strings, QUICKLIST_2 lists with packed and plain nodes, intset and hashtable
//! sets, listpack and skiplist sorted sets, listpack and hashtable hashes, streams) and the
//! older ones it still loads (plain lists, quicklists and ziplists of Redis 3.2-6.2, text
//! double sorted sets). Zipmaps (Redis 2.4) and module values are refused.
//!
//! Redis's own rules are kept: no empty aggregate, no duplicate member or field, no NaN
//! score; a payload that breaks one is refused whole.

use super::input::{parse_double, Input};
use super::listpack::{self, Entry};
use super::{intset, rdb_type as t, stream_read, ziplist, RdbError};
use crate::db::packing::Packing;
use crate::db::value::{HashValue, ListValue, SetValue};
use crate::db::zset::ZSet;
use crate::db::Value;

/// Quicklist node containers (`QUICKLIST_NODE_CONTAINER_*`).
const CONTAINER_PLAIN: u64 = 1;
const CONTAINER_PACKED: u64 = 2;

/// One value: its type byte, then its body, which must use all of `bytes`; aggregates
/// packed by `packing`.
pub fn value(bytes: &[u8], packing: Packing) -> Result<Value, RdbError> {
    let mut input = Input::with_packing(bytes, packing);
    let kind = input.u8()?;
    let v = body(kind, &mut input)?;
    if input.left() != 0 {
        return Err(input.corrupt("bytes after the value"));
    }
    Ok(v)
}

fn body(kind: u8, input: &mut Input<'_>) -> Result<Value, RdbError> {
    Ok(match kind {
        t::STRING => match input.string_or_int()? {
            Ok(n) => Value::Int(n),
            Err(bytes) => Value::string(&bytes),
        },
        t::LIST => {
            let n = input.count(1)?;
            let mut list = ListValue::new();
            for _ in 0..n {
                let limits = input.packing().list;
                list.push_back(&input.string()?, limits);
            }
            list_value(list, input)?
        }
        t::SET => {
            let n = input.count(1)?;
            let mut set = Builder::set(n);
            for _ in 0..n {
                set.member(input.string()?.into_owned().into(), input)?;
            }
            set.finish(input)?
        }
        t::ZSET | t::ZSET_2 => {
            let min_each = if kind == t::ZSET_2 { 9 } else { 2 };
            let n = input.count(min_each)?;
            let mut zset = ZSet::default();
            for _ in 0..n {
                let member = input.string()?;
                let score = if kind == t::ZSET_2 {
                    input.binary_double()?
                } else {
                    input.text_double()?
                };
                zset_add(&mut zset, &member, score, input)?;
            }
            zset_value(zset, input)?
        }
        t::HASH => {
            let n = input.count(2)?;
            let mut hash = Builder::hash(n);
            for _ in 0..n {
                let field = input.string()?.into_owned().into();
                let value = input.string()?.into_owned().into();
                hash.field(field, value, input)?;
            }
            hash.finish(input)?
        }
        t::LIST_QUICKLIST | t::LIST_QUICKLIST_2 => quicklist(kind, input)?,
        t::LIST_ZIPLIST => {
            let blob = input.string()?;
            let mut list = ListValue::new();
            for e in ziplist::entries(&blob)? {
                list.push_back(&e.to_bytes(), input.packing().list);
            }
            list_value(list, input)?
        }
        t::SET_INTSET => {
            let blob = input.string()?;
            let members = intset::members(&blob)?;
            let mut set = Builder::set(members.len());
            for m in members {
                set.member(itoa::Buffer::new().format(m).as_bytes().into(), input)?;
            }
            set.finish(input)?
        }
        t::ZSET_ZIPLIST | t::ZSET_LISTPACK => {
            let blob = input.string()?;
            let entries = if kind == t::ZSET_LISTPACK {
                listpack::entries(&blob)?
            } else {
                ziplist::entries(&blob)?
            };
            zset_from_pairs(&entries, input)?
        }
        t::HASH_ZIPLIST | t::HASH_LISTPACK => {
            let blob = input.string()?;
            let entries = if kind == t::HASH_LISTPACK {
                listpack::entries(&blob)?
            } else {
                ziplist::entries(&blob)?
            };
            if !entries.len().is_multiple_of(2) {
                return Err(input.corrupt("hash with an odd number of entries"));
            }
            let mut hash = Builder::hash(entries.len() / 2);
            for pair in entries.chunks_exact(2) {
                hash.field(pair[0].to_bytes(), pair[1].to_bytes(), input)?;
            }
            hash.finish(input)?
        }
        t::STREAM_LISTPACKS | t::STREAM_LISTPACKS_2 => {
            Value::Stream(Box::new(stream_read::stream(kind, input)?))
        }
        other => return Err(RdbError::Unsupported(other)),
    })
}

/// QUICKLIST (ziplist nodes) and QUICKLIST_2 (each node a container kind, then a listpack
/// or, for PLAIN, one element as is).
fn quicklist(kind: u8, input: &mut Input<'_>) -> Result<Value, RdbError> {
    let nodes = input.count(2)?;
    let mut list = ListValue::new();
    for _ in 0..nodes {
        let container = if kind == t::LIST_QUICKLIST_2 {
            input.length()?
        } else {
            CONTAINER_PACKED
        };
        if container != CONTAINER_PLAIN && container != CONTAINER_PACKED {
            return Err(input.corrupt("quicklist node of an unknown container"));
        }
        let data = input.string()?;
        if data.is_empty() {
            return Err(input.corrupt("empty quicklist node"));
        }
        if container == CONTAINER_PLAIN {
            list.push_back(&data, input.packing().list);
            continue;
        }
        let entries = if kind == t::LIST_QUICKLIST_2 {
            listpack::entries(&data)?
        } else {
            ziplist::entries(&data)?
        };
        // Redis skips empty nodes and refuses the list only if nothing is left.
        for e in entries {
            list.push_back(&e.to_bytes(), input.packing().list);
        }
    }
    list_value(list, input)
}

fn list_value(list: ListValue, input: &Input<'_>) -> Result<Value, RdbError> {
    if list.is_empty() {
        return Err(input.corrupt("empty list"));
    }
    Ok(Value::List(Box::new(list)))
}

fn zset_add(zset: &mut ZSet, member: &[u8], score: f64, input: &Input<'_>) -> Result<(), RdbError> {
    if score.is_nan() {
        return Err(input.corrupt("NaN score"));
    }
    match zset.insert(member, score, input.packing().zset) {
        Ok(None) => Ok(()),
        Ok(Some(_)) => Err(input.corrupt("duplicate sorted set member")),
        Err(_) => Err(input.corrupt("sorted set over its size limit")),
    }
}

/// Member, score, member, score... with scores as listpacks and ziplists keep them.
fn zset_from_pairs(entries: &[Entry<'_>], input: &Input<'_>) -> Result<Value, RdbError> {
    if !entries.len().is_multiple_of(2) {
        return Err(input.corrupt("sorted set with an odd number of entries"));
    }
    let mut zset = ZSet::default();
    for pair in entries.chunks_exact(2) {
        let score = match pair[1] {
            Entry::Int(n) => n as f64,
            Entry::Str(s) => parse_double(s).ok_or_else(|| input.corrupt("unreadable score"))?,
        };
        zset_add(&mut zset, &pair[0].to_bytes(), score, input)?;
    }
    zset_value(zset, input)
}

fn zset_value(zset: ZSet, input: &Input<'_>) -> Result<Value, RdbError> {
    if zset.is_empty() {
        return Err(input.corrupt("empty sorted set"));
    }
    Ok(Value::ZSet(Box::new(zset)))
}

/// Builds a set or a hash, refusing duplicates and emptiness.
enum Builder {
    Set(SetValue),
    Hash(HashValue),
}

impl Builder {
    fn set(_n: usize) -> Builder {
        // Packed by the loader's thresholds until it outgrows them (`db::set`).
        Builder::Set(SetValue::default())
    }

    fn hash(_n: usize) -> Builder {
        // Packed by the loader's thresholds until it outgrows them (`db::hash`).
        Builder::Hash(HashValue::default())
    }

    fn member(&mut self, m: Box<[u8]>, input: &Input<'_>) -> Result<(), RdbError> {
        let inserted = match self {
            Builder::Set(s) => s.insert(&m, input.packing().set),
            Builder::Hash(_) => false,
        };
        if inserted {
            Ok(())
        } else {
            Err(input.corrupt("duplicate set member"))
        }
    }

    fn field(&mut self, f: Box<[u8]>, v: Box<[u8]>, input: &Input<'_>) -> Result<(), RdbError> {
        let inserted = match self {
            Builder::Hash(h) => h.insert(&f, &v, input.packing().hash),
            Builder::Set(_) => false,
        };
        if inserted {
            Ok(())
        } else {
            Err(input.corrupt("duplicate hash field"))
        }
    }

    fn finish(self, input: &Input<'_>) -> Result<Value, RdbError> {
        match self {
            Builder::Set(s) if !s.is_empty() => Ok(Value::Set(Box::new(s))),
            Builder::Hash(h) if !h.is_empty() => Ok(Value::Hash(Box::new(h))),
            _ => Err(input.corrupt("empty set or hash")),
        }
    }
}
