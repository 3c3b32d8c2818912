//! DUMP/RESTORE payloads, in two formats laid out alike: the serialized value, then a
//! 2-byte version, then an 8-byte CRC-64 of everything before it (little-endian).
//!
//! - Redis's: the value RDB-encoded (`rdb`), RDB version 10, CRC-64/Jones. RESTORE reads
//!   what redis-server 7.0 (and older Redis) DUMPs.
//! - Ours (`format`), versions 1 and 2, CRC-64/XZ: what nodes of previous versions wrote
//!   and still read, so a RESTORE from one during a rolling upgrade keeps working.
//!
//! The checksums differ, so a payload is tried as Redis's first (its versions 1 to 10
//! overlap ours) and as ours when the Jones CRC does not match.

use super::format::{
    crc64, put_value, value_from_slice_packed, FormatError, STREAM_VERSION, VERSION,
};
use super::rdb::{self, crc64::crc64_jones, RdbError, RDB_VERSION};
use crate::db::packing::Packing;
use crate::db::Value;

/// Bytes after the value: version (2) and checksum (8).
pub const TRAILER_LEN: usize = 10;

#[derive(Debug, thiserror::Error)]
pub enum PayloadError {
    /// Too short, a version this node does not read, or a checksum that does not match.
    #[error("DUMP payload version or checksum are wrong")]
    VersionOrChecksum,
    /// Checksum right, content wrong: a payload built by something that is not a node.
    #[error("Bad data format: {0}")]
    BadData(FormatError),
    /// A Redis payload whose checksum is right and whose value is not valid RDB (or is of
    /// a type this node does not hold: modules).
    #[error("Bad data format: {0}")]
    BadRdb(RdbError),
}

/// The oldest format version that holds `value`: streams came with version 2, and a
/// payload without one keeps version 1 so that nodes of the previous version still
/// RESTORE it (MIGRATE during a rolling upgrade).
fn payload_version(value: &Value) -> u16 {
    match value {
        Value::Stream(_) => STREAM_VERSION,
        _ => 1,
    }
}

/// The DUMP payload of `value` in Redis 7.0's format: what DUMP answers and MIGRATE sends,
/// so that redis-server and tools built for it read it.
pub fn payload(value: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    rdb::write::put_value(&mut out, value);
    out.extend_from_slice(&RDB_VERSION.to_le_bytes());
    let crc = crc64_jones(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// The payload of `value` in our own format, which nodes of every version read: what a
/// slot copy sends to another node, which may not read Redis's format yet during a rolling
/// upgrade.
pub fn node_payload(value: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    put_value(&mut out, value);
    out.extend_from_slice(&payload_version(value).to_le_bytes());
    let crc = crc64(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// The value of a RESTORE payload in either format, its version and checksum verified
/// before decoding; aggregates packed by `packing`.
pub fn value(payload: &[u8], packing: Packing) -> Result<Value, PayloadError> {
    let Some(body_len) = payload.len().checked_sub(TRAILER_LEN) else {
        return Err(PayloadError::VersionOrChecksum);
    };
    let (body, trailer) = payload.split_at(body_len);
    let version = u16::from_le_bytes([trailer[0], trailer[1]]);
    let mut stored = [0u8; 8];
    stored.copy_from_slice(&trailer[2..]);
    let stored = u64::from_le_bytes(stored);
    let covered = &payload[..body_len + 2];
    if version <= RDB_VERSION && stored == crc64_jones(covered) {
        return rdb::read::value(body, packing).map_err(PayloadError::BadRdb);
    }
    if (1..=VERSION).contains(&version) && stored == crc64(covered) {
        return value_from_slice_packed(body, packing).map_err(PayloadError::BadData);
    }
    Err(PayloadError::VersionOrChecksum)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot_format::format::tests::{same, value as any_value};
    use proptest::prelude::*;

    /// `v` as a string of its bytes would be stored (`Value::string`); other values as they are.
    fn as_loaded(v: Value) -> Value {
        match v {
            Value::Str(bytes) => Value::string(&bytes),
            other => other,
        }
    }

    proptest! {
        #[test]
        fn payloads_round_trip(v in any_value()) {
            prop_assert!(same(&value(&node_payload(&v), Packing::DEFAULT).unwrap(), &v));
            // Redis's format keeps a string's bytes, not our Str/Int choice: a Str spelling
            // a canonical integer comes back as the Int (as it does in Redis).
            prop_assert!(same(&value(&payload(&v), Packing::DEFAULT).unwrap(), &as_loaded(v)));
        }

        #[test]
        fn any_flipped_bit_is_caught(v in any_value(), at in any::<prop::sample::Index>(), bit in 0u8..8) {
            for mut p in [payload(&v), node_payload(&v)] {
                let i = at.index(p.len());
                p[i] ^= 1 << bit;
                prop_assert!(value(&p, Packing::DEFAULT).is_err());
            }
        }

        /// A hostile payload: random bytes, given a valid trailer (anyone can compute the
        /// CRC), so the decoder sees them. It must answer an error or a value, never panic,
        /// and never build more than the payload's size can describe.
        #[test]
        fn random_bodies_with_a_valid_trailer_never_panic(body in prop::collection::vec(any::<u8>(), 0..512)) {
            let mut p = body.clone();
            p.extend_from_slice(&VERSION.to_le_bytes());
            let crc = crc64(&p);
            p.extend_from_slice(&crc.to_le_bytes());
            match value(&p, Packing::DEFAULT) {
                Ok(v) => prop_assert!(node_payload(&v).len() <= p.len() + 16 * body.len() + 16),
                Err(e) => prop_assert!(matches!(e, PayloadError::BadData(_)), "{e}"),
            }
        }

        #[test]
        fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
            let _ = value(&bytes, Packing::DEFAULT);
        }

        #[test]
        fn any_truncation_is_caught(v in any_value(), at in any::<prop::sample::Index>()) {
            for p in [payload(&v), node_payload(&v)] {
                let cut = at.index(p.len());
                prop_assert!(matches!(value(&p[..cut], Packing::DEFAULT), Err(PayloadError::VersionOrChecksum)));
            }
        }
    }

    #[test]
    fn only_streams_need_format_version_2() {
        let version = |p: &[u8]| u16::from_le_bytes([p[p.len() - 10], p[p.len() - 9]]);
        assert_eq!(version(&node_payload(&Value::Int(7))), 1);
        assert_eq!(version(&payload(&Value::Int(7))), RDB_VERSION);
        let stream = Value::Stream(Box::default());
        let p = node_payload(&stream);
        assert_eq!(version(&p), 2);
        assert!(matches!(value(&p, Packing::DEFAULT), Ok(Value::Stream(_))));
    }

    #[test]
    fn bad_content_with_a_right_checksum_is_bad_data() {
        let mut p = vec![9u8];
        p.extend_from_slice(&VERSION.to_le_bytes());
        let crc = crc64(&p);
        p.extend_from_slice(&crc.to_le_bytes());
        assert!(matches!(
            value(&p, Packing::DEFAULT),
            Err(PayloadError::BadData(_))
        ));
        assert!(matches!(
            value(b"", Packing::DEFAULT),
            Err(PayloadError::VersionOrChecksum)
        ));
    }
}
