//! The envelope every bus message travels in: a magic, a version, the body length and an
//! HMAC-SHA256 with the cluster secret, then the protobuf body.
//!
//! ```text
//! 0..4    magic "RCbp"
//! 4..6    version, u16 big-endian (1)
//! 6..10   body length, u32 big-endian
//! 10..42  HMAC-SHA256(secret, bytes 0..10 ++ body)
//! 42..    body: a protobuf BusMessage
//! ```
//!
//! The MAC is checked (in constant time) before a byte of the body is decoded, so a node
//! that does not share the secret cannot make us parse anything; the fixed part is covered
//! too, so a body cannot be replayed under another version.

use super::error::WireError;
use super::limits::MESSAGE_MAX;
use super::message::BusMessage;
use super::validate::check_message;
use hmac::{Hmac, Mac};
use prost::Message as _;
use sha2::Sha256;

pub const MAGIC: [u8; 4] = *b"RCbp";
pub const VERSION: u16 = 1;
pub const MAC_LEN: usize = 32;
/// Bytes before the body.
pub const ENVELOPE_HEADER_LEN: usize = 4 + 2 + 4 + MAC_LEN;
/// Largest sealed message.
pub const ENVELOPE_MAX: usize = ENVELOPE_HEADER_LEN + MESSAGE_MAX;
const _: () = assert!(MESSAGE_MAX <= u32::MAX as usize);

type HmacSha256 = Hmac<Sha256>;

fn mac_over(secret: &[u8], fixed: &[u8], body: &[u8]) -> HmacSha256 {
    // HMAC takes keys of any length (longer ones are hashed), so this cannot fail.
    let mut mac = <HmacSha256 as Mac>::new_from_slice(secret).expect("hmac accepts any key");
    mac.update(fixed);
    mac.update(body);
    mac
}

/// Encodes, checks and seals `msg`. A message that breaks a limit is refused here as well,
/// so a bug on the sender shows up where it is made.
pub fn seal(msg: &BusMessage, secret: &[u8]) -> Result<Vec<u8>, WireError> {
    check_message(msg)?;
    let len = msg.encoded_len();
    if len > MESSAGE_MAX {
        return Err(WireError::Oversized {
            len,
            max: MESSAGE_MAX,
        });
    }
    let mut out = Vec::with_capacity(ENVELOPE_HEADER_LEN + len);
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&VERSION.to_be_bytes());
    out.extend_from_slice(&(len as u32).to_be_bytes());
    out.resize(ENVELOPE_HEADER_LEN, 0);
    // Encoding into a Vec cannot run out of room; the error path is only for the type.
    msg.encode(&mut out)
        .map_err(|e| WireError::Invalid(e.to_string()))?;
    let tag = mac_over(secret, &out[..10], &out[ENVELOPE_HEADER_LEN..]).finalize();
    out[10..ENVELOPE_HEADER_LEN].copy_from_slice(&tag.into_bytes());
    Ok(out)
}

/// Checks and opens a sealed message: length, magic, version, MAC, then decode and limits.
pub fn open(bytes: &[u8], secret: &[u8]) -> Result<BusMessage, WireError> {
    if bytes.len() < ENVELOPE_HEADER_LEN {
        return Err(WireError::Truncated {
            len: bytes.len(),
            need: ENVELOPE_HEADER_LEN,
        });
    }
    if bytes.len() > ENVELOPE_MAX {
        return Err(WireError::Oversized {
            len: bytes.len(),
            max: ENVELOPE_MAX,
        });
    }
    if bytes[..4] != MAGIC {
        return Err(WireError::BadMagic);
    }
    let version = u16::from_be_bytes([bytes[4], bytes[5]]);
    if version != VERSION {
        return Err(WireError::BadVersion(version));
    }
    let declared = u32::from_be_bytes([bytes[6], bytes[7], bytes[8], bytes[9]]) as usize;
    let body = &bytes[ENVELOPE_HEADER_LEN..];
    if declared > MESSAGE_MAX {
        return Err(WireError::Oversized {
            len: declared,
            max: MESSAGE_MAX,
        });
    }
    if declared > body.len() {
        return Err(WireError::Truncated {
            len: bytes.len(),
            need: ENVELOPE_HEADER_LEN + declared,
        });
    }
    if declared != body.len() {
        return Err(WireError::LengthMismatch {
            declared,
            actual: body.len(),
        });
    }
    mac_over(secret, &bytes[..10], body)
        .verify_slice(&bytes[10..ENVELOPE_HEADER_LEN])
        .map_err(|_| WireError::BadMac)?;
    let msg = BusMessage::decode(body).map_err(|e| WireError::Decode(e.to_string()))?;
    check_message(&msg)?;
    Ok(msg)
}
