//! Our values in RDB, in the simplest encodings Redis 7.0 loads (`rdbLoadObject`): strings
//! integer-encoded when they are small canonical integers (as Redis writes them), lists as
//! plain RDB_TYPE_LIST, sets as RDB_TYPE_SET, sorted sets as ZSET_2 (binary doubles),
//! hashes as RDB_TYPE_HASH, streams as STREAM_LISTPACKS_2. Redis converts each to its own
//! encoding by its thresholds as it loads it.

use super::input::{ENC_INT16, ENC_INT32, ENC_INT8};
use super::listpack::canonical_int;
use super::{rdb_type, stream_write};
use crate::db::Value;

const ENCVAL: u8 = 0xC0;

/// `rdbSaveLen`.
pub fn put_len(out: &mut Vec<u8>, n: u64) {
    if n < 1 << 6 {
        out.push(n as u8);
    } else if n < 1 << 14 {
        out.push(0x40 | (n >> 8) as u8);
        out.push(n as u8);
    } else if n <= u64::from(u32::MAX) {
        out.push(0x80);
        out.extend_from_slice(&(n as u32).to_be_bytes());
    } else {
        out.push(0x81);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

/// An integer in RDB's special string encodings, if it fits one (`rdbEncodeInteger`).
fn put_encoded_int(out: &mut Vec<u8>, v: i64) -> bool {
    if let Ok(b) = i8::try_from(v) {
        out.extend_from_slice(&[ENCVAL | ENC_INT8, b as u8]);
    } else if let Ok(h) = i16::try_from(v) {
        out.push(ENCVAL | ENC_INT16);
        out.extend_from_slice(&h.to_le_bytes());
    } else if let Ok(w) = i32::try_from(v) {
        out.push(ENCVAL | ENC_INT32);
        out.extend_from_slice(&w.to_le_bytes());
    } else {
        return false;
    }
    true
}

/// `rdbSaveRawString` without compression: integer-encoded when it can be, else verbatim.
pub fn put_string(out: &mut Vec<u8>, s: &[u8]) {
    if s.len() <= 11 {
        if let Some(v) = canonical_int(s) {
            if put_encoded_int(out, v) {
                return;
            }
        }
    }
    put_len(out, s.len() as u64);
    out.extend_from_slice(s);
}

fn put_int_string(out: &mut Vec<u8>, v: i64) {
    if !put_encoded_int(out, v) {
        put_string(out, itoa::Buffer::new().format(v).as_bytes());
    }
}

/// Appends `value`'s type byte and body.
pub fn put_value(out: &mut Vec<u8>, value: &Value) {
    match value {
        Value::Str(s) => {
            out.push(rdb_type::STRING);
            put_string(out, s);
        }
        Value::Int(n) => {
            out.push(rdb_type::STRING);
            put_int_string(out, *n);
        }
        Value::List(list) => {
            out.push(rdb_type::LIST);
            put_len(out, list.len() as u64);
            for e in list.iter() {
                put_string(out, e);
            }
        }
        Value::Set(set) => {
            out.push(rdb_type::SET);
            put_len(out, set.len() as u64);
            for m in set.iter() {
                put_string(out, m);
            }
        }
        Value::ZSet(zset) => {
            out.push(rdb_type::ZSET_2);
            put_len(out, zset.len() as u64);
            // Highest first, as Redis writes them (its loader inserts each at the head).
            let pairs: Vec<(&[u8], f64)> = zset.iter().collect();
            for (member, score) in pairs.into_iter().rev() {
                put_string(out, member);
                out.extend_from_slice(&score.to_le_bytes());
            }
        }
        Value::Hash(hash) => {
            out.push(rdb_type::HASH);
            put_len(out, hash.len() as u64);
            for (f, v) in hash.iter() {
                put_string(out, f);
                put_string(out, v);
            }
        }
        Value::Stream(stream) => {
            out.push(rdb_type::STREAM_LISTPACKS_2);
            stream_write::put_stream(out, stream);
        }
    }
}
