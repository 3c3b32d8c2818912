//! The two messages that turn connectionless RDM endpoints into a connection.
//!
//! ```text
//! offset 0  magic "OFIB" | 4 version (1) | 5 kind (1 hello, 2 accept) | 6 name length (u16 LE)
//!        8  nonce (u64 LE, chosen by the connector, echoed in the accept) | 16 name bytes
//! ```
//! The connector sends HELLO (with its endpoint's `fi_getname` bytes) to the listener; the
//! listener opens a fresh endpoint for the connection and, from it, sends ACCEPT carrying that
//! endpoint's name. Both sides then know each other's address.

use crate::addr::OFI_ADDR_MAX;
use crate::error::BusError;

const MAGIC: [u8; 4] = *b"OFIB";
/// 2: a WRITE's completion note travels as `fi_injectdata` after the WRITE (the hub), where
/// version 1 used `fi_writedata`; the two cannot talk, so they refuse each other here.
const VERSION: u8 = 2;
const HEADER: usize = 16;
/// Longest handshake message.
pub const HANDSHAKE_MAX: usize = HEADER + OFI_ADDR_MAX;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Hello,
    Accept,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Handshake {
    pub kind: Kind,
    pub nonce: u64,
    /// The sender's endpoint name (`fi_getname` bytes).
    pub name: Vec<u8>,
}

impl Handshake {
    pub fn encode(&self) -> Vec<u8> {
        debug_assert!(!self.name.is_empty() && self.name.len() <= OFI_ADDR_MAX);
        let mut out = Vec::with_capacity(HEADER + self.name.len());
        out.extend_from_slice(&MAGIC);
        out.push(VERSION);
        out.push(match self.kind {
            Kind::Hello => 1,
            Kind::Accept => 2,
        });
        out.extend_from_slice(&(self.name.len() as u16).to_le_bytes());
        out.extend_from_slice(&self.nonce.to_le_bytes());
        out.extend_from_slice(&self.name);
        out
    }

    /// Parses a message from a peer; anything malformed is a `Protocol` error, never a panic.
    pub fn decode(bytes: &[u8]) -> Result<Handshake, BusError> {
        let bad = |why: &str| BusError::Protocol(format!("ofi handshake: {why}"));
        if bytes.len() < HEADER || bytes[..4] != MAGIC {
            return Err(bad("not a handshake message"));
        }
        if bytes[4] != VERSION {
            return Err(bad(&format!("version {} (we speak {VERSION})", bytes[4])));
        }
        let kind = match bytes[5] {
            1 => Kind::Hello,
            2 => Kind::Accept,
            k => return Err(bad(&format!("unknown kind {k}"))),
        };
        let name_len = u16::from_le_bytes([bytes[6], bytes[7]]) as usize;
        if name_len == 0 || name_len > OFI_ADDR_MAX || bytes.len() != HEADER + name_len {
            return Err(bad(&format!(
                "name length {name_len} does not fit the {}-byte message",
                bytes.len()
            )));
        }
        let mut nonce = [0u8; 8];
        nonce.copy_from_slice(&bytes[8..16]);
        Ok(Handshake {
            kind,
            nonce: u64::from_le_bytes(nonce),
            name: bytes[HEADER..].to_vec(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn round_trips_and_rejects_damage() {
        let h = Handshake {
            kind: Kind::Accept,
            nonce: 0x0102_0304_0506_0708,
            name: vec![9; 16],
        };
        let bytes = h.encode();
        assert_eq!(Handshake::decode(&bytes).unwrap(), h);
        assert!(Handshake::decode(&bytes[..bytes.len() - 1]).is_err());
        let mut wrong = bytes.clone();
        wrong[4] = 9;
        assert!(Handshake::decode(&wrong).is_err());
        let mut wrong = bytes;
        wrong[5] = 7;
        assert!(Handshake::decode(&wrong).is_err());
    }

    proptest! {
        #[test]
        fn never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = Handshake::decode(&bytes);
        }
    }
}
