//! The datagram frame: a 16-byte header in front of the payload, so a corrupt or foreign
//! datagram is recognised and dropped. Pure functions, no I/O.
//!
//! Big-endian (network order):
//! - `0..4`  magic `RBUS`
//! - `4`     version (1)
//! - `5`     flags (0; ignored on receipt, for later use)
//! - `6..8`  payload length u16
//! - `8..16` CRC-64 (crc64fast, XZ variant) over bytes `0..8` and the payload

pub const MAGIC: [u8; 4] = *b"RBUS";
pub const VERSION: u8 = 1;
pub const FRAME_HEADER_LEN: usize = 16;
/// The length field is 16 bits.
pub const FRAME_PAYLOAD_MAX: usize = u16::MAX as usize;

/// Why a received datagram was dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reject {
    Short,
    Magic,
    Version,
    Length,
    Checksum,
}

fn crc(head: &[u8], payload: &[u8]) -> u64 {
    let mut d = crc64fast::Digest::new();
    d.write(head);
    d.write(payload);
    d.sum64()
}

/// Writes header + payload into `out` (cleared first). The caller checked the length.
pub fn encode(payload: &[u8], out: &mut Vec<u8>) {
    out.clear();
    out.extend_from_slice(&MAGIC);
    out.push(VERSION);
    out.push(0);
    out.extend_from_slice(&(payload.len().min(FRAME_PAYLOAD_MAX) as u16).to_be_bytes());
    let sum = crc(&out[0..8], payload);
    out.extend_from_slice(&sum.to_be_bytes());
    out.extend_from_slice(payload);
}

/// Validates a received frame; returns its payload.
pub fn decode(frame: &[u8]) -> Result<&[u8], Reject> {
    if frame.len() < FRAME_HEADER_LEN {
        return Err(Reject::Short);
    }
    if frame[0..4] != MAGIC {
        return Err(Reject::Magic);
    }
    if frame[4] != VERSION {
        return Err(Reject::Version);
    }
    let len = u16::from_be_bytes([frame[6], frame[7]]) as usize;
    if frame.len() != FRAME_HEADER_LEN + len {
        return Err(Reject::Length);
    }
    let mut sum = [0u8; 8];
    sum.copy_from_slice(&frame[8..16]);
    let payload = &frame[FRAME_HEADER_LEN..];
    if u64::from_be_bytes(sum) != crc(&frame[0..8], payload) {
        return Err(Reject::Checksum);
    }
    Ok(payload)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frame_layout_and_round_trip() {
        let mut f = Vec::new();
        encode(b"gossip", &mut f);
        assert_eq!(&f[0..8], &[b'R', b'B', b'U', b'S', 1, 0, 0, 6]);
        assert_eq!(f.len(), FRAME_HEADER_LEN + 6);
        assert_eq!(decode(&f), Ok(&b"gossip"[..]));
    }

    #[test]
    fn every_kind_of_damage_is_rejected() {
        let mut f = Vec::new();
        encode(b"payload", &mut f);
        assert_eq!(decode(&f[..10]), Err(Reject::Short));
        assert_eq!(decode(&f[..f.len() - 1]), Err(Reject::Length));
        let mut g = f.clone();
        g[0] = b'X';
        assert_eq!(decode(&g), Err(Reject::Magic));
        let mut g = f.clone();
        g[4] = 2;
        assert_eq!(decode(&g), Err(Reject::Version));
        let mut g = f.clone();
        *g.last_mut().unwrap() ^= 1;
        assert_eq!(decode(&g), Err(Reject::Checksum));
        let mut g = f.clone();
        g[5] = 7; // flags are covered by the checksum
        assert_eq!(decode(&g), Err(Reject::Checksum));
    }
}
