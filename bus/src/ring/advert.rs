//! The out-of-band advertisement of a region (the reader's ring, the writer's ack word): 24 bytes,
//! little-endian `addr u64 | len u64 | rkey u64`, carried by whatever handshake sets the ring up
//! (a replication command over a Stream, a bus message).

use crate::error::{BusError, Result};
use crate::provider::RemoteRegion;

pub const ADVERT_LEN: usize = 24;

pub fn encode_advert(r: &RemoteRegion) -> [u8; ADVERT_LEN] {
    let mut b = [0u8; ADVERT_LEN];
    b[0..8].copy_from_slice(&r.addr.to_le_bytes());
    b[8..16].copy_from_slice(&r.len.to_le_bytes());
    b[16..24].copy_from_slice(&r.rkey.to_le_bytes());
    b
}

pub fn decode_advert(b: &[u8]) -> Result<RemoteRegion> {
    let b: &[u8; ADVERT_LEN] = b.try_into().map_err(|_| {
        BusError::Protocol(format!(
            "region advertisement is {} bytes, not {ADVERT_LEN}",
            b.len()
        ))
    })?;
    let word = |i: usize| {
        let mut w = [0u8; 8];
        w.copy_from_slice(&b[i..i + 8]);
        u64::from_le_bytes(w)
    };
    Ok(RemoteRegion {
        addr: word(0),
        len: word(8),
        rkey: word(16),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_rejects_wrong_sizes() {
        let r = RemoteRegion {
            addr: 0x1122_3344_5566_7788,
            len: 4160,
            rkey: 0xabcd,
        };
        let b = encode_advert(&r);
        assert_eq!(&b[0..8], &[0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11]);
        assert_eq!(decode_advert(&b).unwrap(), r);
        assert!(decode_advert(&b[..23]).is_err());
    }
}
