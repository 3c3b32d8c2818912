//! OBJECT ENCODING's answer: the name Redis 7.0 gives the representation it would hold this
//! value in. Hashes and sorted sets answer what they are (packed `listpack` until a write
//! takes them past their `*-max-listpack-*` thresholds, then `hashtable` or `skiplist` for
//! good, as Redis). Sets answer from their history (`db::set`: 7.0 has intsets and hash
//! tables only), lists `quicklist` (7.0 keeps every list in one), strings by their form.

use crate::db::Value;

/// Longest string Redis 7.0 stores embedded in its object header.
const EMBSTR_SIZE_LIMIT: usize = 44;

/// `edited_in_place`: a string changed in place (SETRANGE, APPEND...), which Redis holds
/// `raw` whatever its size.
pub fn redis_encoding(value: &Value, edited_in_place: bool) -> &'static str {
    match value {
        Value::Int(_) => "int",
        Value::Str(s) if s.len() <= EMBSTR_SIZE_LIMIT && !edited_in_place => "embstr",
        Value::Str(_) => "raw",
        // Redis 7.0 keeps every list in a quicklist (listpack lists came with 7.2).
        Value::List(_) => "quicklist",
        // What the hash is: packed until a write took it past the thresholds (`db::hash`).
        Value::Hash(h) if h.is_packed() => "listpack",
        Value::Hash(_) => "hashtable",
        // Redis 7.0 sets are intsets or hash tables (listpack sets came with 7.2).
        // Redis 7.0 has intsets and hash tables only: the set's history says which it would
        // hold (`db::set`), whatever the set is packed as here.
        Value::Set(s) if s.is_intset_in_redis_7_0() => "intset",
        Value::Set(_) => "hashtable",
        // What the sorted set is: packed until a write took it past the thresholds.
        Value::ZSet(z) if z.is_packed() => "listpack",
        Value::ZSet(_) => "skiplist",
        Value::Stream(_) => "stream",
    }
}
