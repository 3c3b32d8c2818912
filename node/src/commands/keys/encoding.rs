//! OBJECT ENCODING's answer: the name Redis 7.0 gives the representation it would hold this
//! value in, from the value's size and the encoding thresholds in the config
//! (`hash-max-listpack-entries` and the rest). The node itself keeps one representation per
//! type. Redis converts a value to its general encoding when it outgrows the compact one and
//! does not convert it back when it shrinks; this answer is computed from the value as it is
//! now, as Redis would choose when loading it.

use crate::config::encodings::EncodingLimits;
use crate::db::Value;

/// Longest string Redis 7.0 stores embedded in its object header.
const EMBSTR_SIZE_LIMIT: usize = 44;

/// `edited_in_place`: a string changed in place (SETRANGE, APPEND...), which Redis holds
/// `raw` whatever its size.
pub fn redis_encoding(
    value: &Value,
    edited_in_place: bool,
    limits: &EncodingLimits,
) -> &'static str {
    match value {
        Value::Int(_) => "int",
        Value::Str(s) if s.len() <= EMBSTR_SIZE_LIMIT && !edited_in_place => "embstr",
        Value::Str(_) => "raw",
        // Redis 7.0 keeps every list in a quicklist (listpack lists came with 7.2).
        Value::List(_) => "quicklist",
        Value::Hash(h)
            if h.len() as u64 <= limits.hash_max_listpack_entries
                && h.iter().all(|(k, v)| {
                    k.len() as u64 <= limits.hash_max_listpack_value
                        && v.len() as u64 <= limits.hash_max_listpack_value
                }) =>
        {
            "listpack"
        }
        Value::Hash(_) => "hashtable",
        // Redis 7.0 sets are intsets or hash tables (listpack sets came with 7.2).
        Value::Set(s)
            if s.len() as u64 <= limits.set_max_intset_entries
                && s.iter()
                    .all(|m| proto::resp::request::parse_i64(m).is_some()) =>
        {
            "intset"
        }
        Value::Set(_) => "hashtable",
        Value::ZSet(z)
            if z.len() as u64 <= limits.zset_max_listpack_entries
                && z.max_member_len() as u64 <= limits.zset_max_listpack_value =>
        {
            "listpack"
        }
        Value::ZSet(_) => "skiplist",
        Value::Stream(_) => "stream",
    }
}
