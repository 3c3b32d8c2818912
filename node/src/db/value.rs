//! The six data types, as stored.
//!
//! Aggregates are boxed so that a string entry, by far the most common, stays small: the
//! enum is 24 bytes (a tag and a boxed slice).

use super::stream::Stream;
use super::zset::ZSet;

/// A key or element as stored: exactly its bytes, no spare capacity.
pub type Key = Box<[u8]>;
/// The hasher for every table in the keyspace: keyed per process so that hostile keys cannot
/// be chosen to collide.
pub type Hasher = ahash::RandomState;
pub use super::hash::HashValue;
pub use super::list::ListValue;
pub use super::set::SetValue;

#[derive(Debug, Clone)]
pub enum Value {
    /// A string stored as bytes.
    Str(Box<[u8]>),
    /// A string that is the decimal form of an i64, stored as the number (Redis's `int`
    /// encoding): INCR and friends skip parsing, and it takes no heap.
    Int(i64),
    List(Box<ListValue>),
    Hash(Box<HashValue>),
    Set(Box<SetValue>),
    ZSet(Box<ZSet>),
    Stream(Box<Stream>),
}

const _: () = assert!(std::mem::size_of::<Value>() <= 24);

/// The name `TYPE` answers for each kind of value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    String,
    List,
    Hash,
    Set,
    ZSet,
    Stream,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::String => "string",
            Kind::List => "list",
            Kind::Hash => "hash",
            Kind::Set => "set",
            Kind::ZSet => "zset",
            Kind::Stream => "stream",
        }
    }

    /// Parses a `SCAN ... TYPE name` argument (case-insensitive, as Redis).
    pub fn from_name(name: &[u8]) -> Option<Kind> {
        let lower = name.to_ascii_lowercase();
        Some(match lower.as_slice() {
            b"string" => Kind::String,
            b"list" => Kind::List,
            b"hash" => Kind::Hash,
            b"set" => Kind::Set,
            b"zset" => Kind::ZSet,
            b"stream" => Kind::Stream,
            _ => return None,
        })
    }
}

impl Value {
    pub fn kind(&self) -> Kind {
        match self {
            Value::Str(_) | Value::Int(_) => Kind::String,
            Value::List(_) => Kind::List,
            Value::Hash(_) => Kind::Hash,
            Value::Set(_) => Kind::Set,
            Value::ZSet(_) => Kind::ZSet,
            Value::Stream(_) => Kind::Stream,
        }
    }

    /// A string value from bytes, stored as an integer when the bytes are the canonical
    /// decimal form of one (so it reads back byte for byte).
    pub fn string(bytes: &[u8]) -> Value {
        if bytes.len() <= 20 {
            if let Some(n) = proto::resp::request::parse_i64(bytes) {
                return Value::Int(n);
            }
        }
        Value::Str(bytes.into())
    }

    /// The bytes of a string value (integers are formatted into `buf`).
    pub fn as_bytes<'a>(&'a self, buf: &'a mut itoa::Buffer) -> Option<&'a [u8]> {
        match self {
            Value::Str(s) => Some(s),
            Value::Int(n) => Some(buf.format(*n).as_bytes()),
            _ => None,
        }
    }

    /// The bytes of data the value holds (a string's bytes, 8 for an integer, every element
    /// and field of an aggregate, 8 per sorted-set score), without allocator or table
    /// overhead: what moving it to another node would carry. O(elements).
    pub fn payload_bytes(&self) -> u64 {
        let sum = |it: &mut dyn Iterator<Item = usize>| it.map(|n| n as u64).sum::<u64>();
        match self {
            Value::Str(s) => s.len() as u64,
            Value::Int(_) => 8,
            Value::List(l) => sum(&mut l.iter().map(|e| e.len())),
            Value::Hash(h) => sum(&mut h.iter().map(|(k, v)| k.len() + v.len())),
            Value::Set(s) => sum(&mut s.iter().map(|m| m.len())),
            Value::ZSet(z) => sum(&mut z.iter_unordered().map(|(m, _)| m.len() + 8)),
            Value::Stream(s) => s.payload_bytes(),
        }
    }

    /// True for an aggregate with no elements; Redis deletes such keys.
    pub fn is_empty_aggregate(&self) -> bool {
        match self {
            Value::Str(_) | Value::Int(_) => false,
            Value::List(l) => l.is_empty(),
            Value::Hash(h) => h.is_empty(),
            Value::Set(s) => s.is_empty(),
            Value::ZSet(z) => z.is_empty(),
            // An empty stream is kept (it still has its last ID and groups), as in Redis.
            Value::Stream(_) => false,
        }
    }
}
