//! Valkey-over-RDMA control messages (protocols.md §1.3): fixed 32-byte, big-endian messages sent
//! with SEND. Pure functions, no I/O.
//!
//! | message | 0..2 | 2..4 | 4..16 | 16..24 | 24..28 | 28..32 |
//! |---|---|---|---|---|---|---|
//! | GetServerFeature (0), SetClientFeature (1) | opcode | select (raw) | reserved | reserved | features u64 (24..32) ||
//! | Keepalive (2) | opcode | reserved ||||
//! | RegisterXferMemory (3) | opcode | reserved || addr u64 | length u32 | rkey u32 |
//! | Goodbye (0x100, ours) | opcode | reserved ||||
//!
//! `select` is copied raw by Valkey (never byte-swapped), so it is kept as two bytes here.
//! Reserved bytes are written as zero and ignored on receipt, as Valkey does.

use crate::error::{BusError, Result};

use super::RX_SIZE_MAX;

/// Every control message is exactly this long; a SEND of any other size is fatal.
pub const CONTROL_MSG_LEN: usize = 32;

pub const OP_GET_SERVER_FEATURE: u16 = 0;
pub const OP_SET_CLIENT_FEATURE: u16 = 1;
pub const OP_KEEPALIVE: u16 = 2;
pub const OP_REGISTER_XFER_MEMORY: u16 = 3;
/// Not Valkey's: our clients send it to our nodes as they leave (a Valkey server would close
/// the connection on an unknown opcode, which is what the sender is doing anyway). Far from
/// Valkey's numbers so that an opcode it adds cannot collide.
pub const OP_GOODBYE: u16 = 0x100;

/// One control message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ControlMsg {
    /// A client asks for the server's features; the server answers with the same opcode,
    /// `select` echoed and `features = 0` (none are defined).
    GetServerFeature { select: [u8; 2], features: u64 },
    /// A client enables features (only 0 is valid today). No reply.
    SetClientFeature { select: [u8; 2], features: u64 },
    /// Liveness probe, sent by the server every 3 s; no reply.
    Keepalive,
    /// "Write into this buffer": the sender's RX buffer, the receiver's TX target.
    RegisterXferMemory { addr: u64, length: u32, rkey: u32 },
    /// "I am leaving": a client's last message, so that the server closes its end at once.
    /// On libfabric's RDM endpoints nothing else tells a server that a client went away (it
    /// would notice only after its silence limit, sending keepalives into the void meanwhile).
    Goodbye,
}

impl ControlMsg {
    pub fn opcode(&self) -> u16 {
        match self {
            ControlMsg::GetServerFeature { .. } => OP_GET_SERVER_FEATURE,
            ControlMsg::SetClientFeature { .. } => OP_SET_CLIENT_FEATURE,
            ControlMsg::Keepalive => OP_KEEPALIVE,
            ControlMsg::RegisterXferMemory { .. } => OP_REGISTER_XFER_MEMORY,
            ControlMsg::Goodbye => OP_GOODBYE,
        }
    }

    pub fn encode(&self) -> [u8; CONTROL_MSG_LEN] {
        let mut b = [0u8; CONTROL_MSG_LEN];
        b[0..2].copy_from_slice(&self.opcode().to_be_bytes());
        match *self {
            ControlMsg::GetServerFeature { select, features }
            | ControlMsg::SetClientFeature { select, features } => {
                b[2..4].copy_from_slice(&select);
                b[24..32].copy_from_slice(&features.to_be_bytes());
            }
            ControlMsg::Keepalive | ControlMsg::Goodbye => {}
            ControlMsg::RegisterXferMemory { addr, length, rkey } => {
                b[16..24].copy_from_slice(&addr.to_be_bytes());
                b[24..28].copy_from_slice(&length.to_be_bytes());
                b[28..32].copy_from_slice(&rkey.to_be_bytes());
            }
        }
        b
    }

    /// Decodes one received SEND. Wrong size, unknown opcode, or a RegisterXferMemory whose
    /// length is 0 or above [`RX_SIZE_MAX`] is a protocol error.
    pub fn decode(b: &[u8]) -> Result<ControlMsg> {
        let b: &[u8; CONTROL_MSG_LEN] = b.try_into().map_err(|_| {
            BusError::Protocol(format!(
                "control message of {} bytes (must be {CONTROL_MSG_LEN})",
                b.len()
            ))
        })?;
        let u64_at = |i: usize| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&b[i..i + 8]);
            u64::from_be_bytes(w)
        };
        let u32_at = |i: usize| {
            let mut w = [0u8; 4];
            w.copy_from_slice(&b[i..i + 4]);
            u32::from_be_bytes(w)
        };
        let select = [b[2], b[3]];
        match u16::from_be_bytes([b[0], b[1]]) {
            OP_GET_SERVER_FEATURE => Ok(ControlMsg::GetServerFeature {
                select,
                features: u64_at(24),
            }),
            OP_SET_CLIENT_FEATURE => Ok(ControlMsg::SetClientFeature {
                select,
                features: u64_at(24),
            }),
            OP_KEEPALIVE => Ok(ControlMsg::Keepalive),
            OP_GOODBYE => Ok(ControlMsg::Goodbye),
            OP_REGISTER_XFER_MEMORY => {
                let length = u32_at(24);
                if length == 0 || length as usize > RX_SIZE_MAX {
                    return Err(BusError::Protocol(format!(
                        "RegisterXferMemory length {length} is outside 1..={RX_SIZE_MAX}"
                    )));
                }
                Ok(ControlMsg::RegisterXferMemory {
                    addr: u64_at(16),
                    length,
                    rkey: u32_at(28),
                })
            }
            op => Err(BusError::Protocol(format!("unknown control opcode {op}"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Goal: pin the wire layout byte for byte (protocols.md §1.3).
    /// Goal: the goodbye is ours, far from Valkey's opcodes, and round-trips.
    #[test]
    fn goodbye_round_trips_with_its_own_opcode() {
        let b = ControlMsg::Goodbye.encode();
        assert_eq!(&b[..2], &[0x01, 0x00]);
        assert!(b[2..].iter().all(|&x| x == 0));
        assert_eq!(ControlMsg::decode(&b).unwrap(), ControlMsg::Goodbye);
    }

    #[test]
    fn register_xfer_memory_fixture() {
        let m = ControlMsg::RegisterXferMemory {
            addr: 0x0001_0203_0405_0607,
            length: 0x0010_0000,
            rkey: 0xa1b2_c3d4,
        };
        let expect: [u8; 32] = [
            0x00, 0x03, // opcode 3, big-endian
            0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, // reserved 2..16
            0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, // addr @16
            0x00, 0x10, 0x00, 0x00, // length @24 (1 MiB)
            0xa1, 0xb2, 0xc3, 0xd4, // rkey @28
        ];
        assert_eq!(m.encode(), expect);
        assert_eq!(ControlMsg::decode(&expect).unwrap(), m);
    }

    #[test]
    fn feature_and_keepalive_fixtures() {
        let m = ControlMsg::GetServerFeature {
            select: [0x12, 0x34],
            features: 0x0102_0304_0506_0708,
        };
        let mut expect = [0u8; 32];
        expect[2] = 0x12;
        expect[3] = 0x34;
        expect[24..32].copy_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(m.encode(), expect);
        assert_eq!(ControlMsg::decode(&expect).unwrap(), m);

        let m = ControlMsg::SetClientFeature {
            select: [0, 1],
            features: 0,
        };
        let mut expect = [0u8; 32];
        expect[1] = 1;
        expect[3] = 1;
        assert_eq!(m.encode(), expect);
        assert_eq!(ControlMsg::decode(&expect).unwrap(), m);

        let mut expect = [0u8; 32];
        expect[1] = 2;
        assert_eq!(ControlMsg::Keepalive.encode(), expect);
        // Reserved bytes are ignored on receipt.
        expect[31] = 0xff;
        assert_eq!(ControlMsg::decode(&expect).unwrap(), ControlMsg::Keepalive);
    }

    #[test]
    fn malformed_messages_are_protocol_errors() {
        let good = ControlMsg::Keepalive.encode();
        for bad_len in [0usize, 1, 31, 33, 64] {
            let mut v = vec![0u8; bad_len];
            v[..bad_len.min(32)].copy_from_slice(&good[..bad_len.min(32)]);
            assert!(matches!(ControlMsg::decode(&v), Err(BusError::Protocol(_))));
        }
        let mut unknown = good;
        unknown[1] = 4;
        assert!(matches!(
            ControlMsg::decode(&unknown),
            Err(BusError::Protocol(_))
        ));
        unknown[0] = 0xff;
        unknown[1] = 0xff;
        assert!(ControlMsg::decode(&unknown).is_err());
        for length in [0u32, RX_SIZE_MAX as u32 + 1, u32::MAX] {
            let mut m = ControlMsg::RegisterXferMemory {
                addr: 0,
                length: 1,
                rkey: 1,
            }
            .encode();
            m[24..28].copy_from_slice(&length.to_be_bytes());
            assert!(matches!(ControlMsg::decode(&m), Err(BusError::Protocol(_))));
        }
    }
}
