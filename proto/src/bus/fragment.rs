//! Cutting a sealed message into datagrams no larger than the fabric's MTU, and putting
//! them back together on the receiver.
//!
//! A datagram (verbs UD, libfabric RDM) has a maximum payload, about 1000 bytes on some verbs
//! UD paths, while a PING with gossip or an UPDATE can be larger. Each fragment carries:
//!
//! ```text
//! 0..2    magic "Rf"
//! 2..10   message id, u64 big-endian: the first 8 bytes of SHA-256(message)
//! 10..12  fragment index, u16 big-endian
//! 12..14  fragment count, u16 big-endian (1..=FRAGMENTS_MAX)
//! 14..18  message length, u32 big-endian
//! 18..    fragment payload
//! ```
//!
//! The id is derived from the content and the sender's send number ([`fragment_as`]): the
//! network's duplicates of one send are recognised, but a message sent again with the same
//! bytes (Raft resends an unanswered append exactly) is a new message, which the
//! receiver's memory of completed ids must not swallow. Two different messages colliding
//! on 64 bits is negligible, and the envelope's MAC rejects a wrongly assembled message
//! anyway. Duplicates of a one-fragment message are delivered twice: the gossip protocol
//! tolerates duplicated datagrams.
//!
//! The reassembler keeps a bounded amount of state: at most [`ReassemblyLimits::per_sender_max`]
//! partial messages per sender and [`ReassemblyLimits::bytes_max`] bytes in all (the oldest
//! partial is dropped to make room), and partials older than [`ReassemblyLimits::age_max_ms`]
//! are dropped, since a lost fragment is never resent.

use super::envelope::ENVELOPE_MAX;
use super::error::FragmentError;
use sha2::{Digest, Sha256};
use std::collections::{HashMap, VecDeque};
use std::hash::Hash;

pub const FRAGMENT_MAGIC: [u8; 2] = *b"Rf";
pub const FRAGMENT_HEADER_LEN: usize = 18;
/// Most fragments of one message; with a 1 KB MTU this still carries [`ENVELOPE_MAX`].
pub const FRAGMENTS_MAX: usize = 4096;
const _: () = assert!(FRAGMENTS_MAX <= u16::MAX as usize);
/// Messages remembered as complete, so that a late duplicate fragment does not open a
/// partial that can only age out; a few hundred covers the messages of one age window.
pub const COMPLETED_MEMORY_MAX: usize = 256;

/// The id a message's fragments carry.
pub fn message_id(msg: &[u8]) -> u64 {
    let digest = Sha256::digest(msg);
    let mut id = [0u8; 8];
    id.copy_from_slice(&digest[..8]);
    u64::from_be_bytes(id)
}

/// Cuts `msg` into datagrams of at most `mtu` bytes each (header included), as send 0.
pub fn fragment(msg: &[u8], mtu: usize) -> Result<Vec<Vec<u8>>, FragmentError> {
    fragment_as(msg, mtu, 0)
}

/// Cuts `msg` into datagrams of at most `mtu` bytes each (header included); `send` (the
/// sender's count of messages sent) goes into the id, so equal messages sent twice are
/// told apart.
pub fn fragment_as(msg: &[u8], mtu: usize, send: u64) -> Result<Vec<Vec<u8>>, FragmentError> {
    if mtu <= FRAGMENT_HEADER_LEN {
        return Err(FragmentError::MtuTooSmall {
            mtu,
            header: FRAGMENT_HEADER_LEN,
        });
    }
    if msg.len() > ENVELOPE_MAX {
        return Err(FragmentError::Oversized {
            len: msg.len(),
            max: ENVELOPE_MAX,
        });
    }
    let chunk = mtu - FRAGMENT_HEADER_LEN;
    let count = msg.len().div_ceil(chunk).max(1);
    if count > FRAGMENTS_MAX {
        return Err(FragmentError::TooManyFragments {
            count,
            max: FRAGMENTS_MAX,
        });
    }
    let id = message_id(msg) ^ send.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    let mut out = Vec::with_capacity(count);
    for index in 0..count {
        let part = msg
            .get(index * chunk..((index + 1) * chunk).min(msg.len()))
            .unwrap_or_default();
        let mut d = Vec::with_capacity(FRAGMENT_HEADER_LEN + part.len());
        d.extend_from_slice(&FRAGMENT_MAGIC);
        d.extend_from_slice(&id.to_be_bytes());
        d.extend_from_slice(&(index as u16).to_be_bytes());
        d.extend_from_slice(&(count as u16).to_be_bytes());
        d.extend_from_slice(&(msg.len() as u32).to_be_bytes());
        d.extend_from_slice(part);
        out.push(d);
    }
    Ok(out)
}

/// A fragment's header, parsed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct FragmentHeader {
    id: u64,
    index: usize,
    count: usize,
    total: usize,
}

fn parse_header(d: &[u8]) -> Result<(FragmentHeader, &[u8]), FragmentError> {
    if d.len() < FRAGMENT_HEADER_LEN {
        return Err(FragmentError::Truncated(d.len()));
    }
    if d[..2] != FRAGMENT_MAGIC {
        return Err(FragmentError::BadMagic);
    }
    let mut id = [0u8; 8];
    id.copy_from_slice(&d[2..10]);
    let h = FragmentHeader {
        id: u64::from_be_bytes(id),
        index: u16::from_be_bytes([d[10], d[11]]) as usize,
        count: u16::from_be_bytes([d[12], d[13]]) as usize,
        total: u32::from_be_bytes([d[14], d[15], d[16], d[17]]) as usize,
    };
    if h.count == 0 || h.count > FRAGMENTS_MAX {
        return Err(FragmentError::Inconsistent("fragment count out of range"));
    }
    if h.index >= h.count {
        return Err(FragmentError::Inconsistent("index beyond count"));
    }
    if h.total > ENVELOPE_MAX {
        return Err(FragmentError::Oversized {
            len: h.total,
            max: ENVELOPE_MAX,
        });
    }
    let payload = &d[FRAGMENT_HEADER_LEN..];
    if payload.len() > h.total || (h.count == 1 && payload.len() != h.total) {
        return Err(FragmentError::Inconsistent("payload length"));
    }
    Ok((h, payload))
}

/// How much a [`Reassembler`] may hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReassemblyLimits {
    /// Partial messages per sender: a node sends a handful at once (PING, UPDATE, FAIL...).
    pub per_sender_max: usize,
    /// Partial messages across all senders (each costs a slot table besides its bytes).
    pub partials_max: usize,
    /// Bytes buffered across all partials.
    pub bytes_max: usize,
    /// A partial not completed within this is dropped (its missing fragment is lost).
    pub age_max_ms: u64,
}

impl Default for ReassemblyLimits {
    fn default() -> Self {
        ReassemblyLimits {
            per_sender_max: 8,
            partials_max: 1024,
            bytes_max: 16 * 1024 * 1024,
            age_max_ms: 5_000,
        }
    }
}

struct Partial {
    count: usize,
    total: usize,
    parts: Vec<Option<Vec<u8>>>,
    received: usize,
    bytes: usize,
    started_ms: u64,
}

/// Puts fragments back together, per sender `S` (a bus address).
pub struct Reassembler<S> {
    limits: ReassemblyLimits,
    partials: HashMap<(S, u64), Partial>,
    bytes: usize,
    completed: VecDeque<(S, u64)>,
}

impl<S: Eq + Hash + Clone> Reassembler<S> {
    pub fn new(limits: ReassemblyLimits) -> Self {
        Reassembler {
            limits,
            partials: HashMap::new(),
            bytes: 0,
            completed: VecDeque::new(),
        }
    }

    /// Partial messages held.
    pub fn in_flight(&self) -> usize {
        self.partials.len()
    }

    /// Bytes held by partial messages.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Takes one datagram from `sender`; returns the whole message once its last fragment is
    /// in. A malformed fragment is an error and changes nothing.
    pub fn push(
        &mut self,
        sender: &S,
        datagram: &[u8],
        now_ms: u64,
    ) -> Result<Option<Vec<u8>>, FragmentError> {
        let (h, payload) = parse_header(datagram)?;
        self.expire(now_ms);
        if h.count == 1 {
            return Ok(Some(payload.to_vec()));
        }
        let key = (sender.clone(), h.id);
        if self.completed.contains(&key) {
            return Ok(None); // a late duplicate of a delivered message
        }
        if let Some(p) = self.partials.get(&key) {
            if p.count != h.count || p.total != h.total {
                return Err(FragmentError::Inconsistent("fragments disagree"));
            }
            if p.parts[h.index].is_some() {
                return Ok(None); // a duplicate
            }
            if p.bytes + payload.len() > p.total {
                return Err(FragmentError::Inconsistent("more bytes than the message"));
            }
        } else {
            self.make_room_for(sender);
            self.partials.insert(
                key.clone(),
                Partial {
                    count: h.count,
                    total: h.total,
                    parts: vec![None; h.count],
                    received: 0,
                    bytes: 0,
                    started_ms: now_ms,
                },
            );
        }
        while self.bytes + payload.len() > self.limits.bytes_max {
            if !self.drop_oldest(|k| *k != key) {
                break;
            }
        }
        if self.bytes + payload.len() > self.limits.bytes_max {
            self.remove(&key);
            return Ok(None);
        }
        let Some(p) = self.partials.get_mut(&key) else {
            return Ok(None);
        };
        p.parts[h.index] = Some(payload.to_vec());
        p.received += 1;
        p.bytes += payload.len();
        self.bytes += payload.len();
        if p.received < p.count {
            return Ok(None);
        }
        let complete = p.bytes == p.total;
        let p = self.remove(&key);
        if self.completed.len() >= COMPLETED_MEMORY_MAX {
            self.completed.pop_front();
        }
        self.completed.push_back(key);
        if !complete {
            return Err(FragmentError::Inconsistent("fragments do not add up"));
        }
        let mut msg = Vec::with_capacity(h.total);
        for part in p.into_iter().flat_map(|p| p.parts).flatten() {
            msg.extend_from_slice(&part);
        }
        Ok(Some(msg))
    }

    /// Drops partials older than the age limit.
    pub fn expire(&mut self, now_ms: u64) {
        let age_max = self.limits.age_max_ms;
        let stale: Vec<(S, u64)> = self
            .partials
            .iter()
            .filter(|(_, p)| now_ms.saturating_sub(p.started_ms) > age_max)
            .map(|(k, _)| k.clone())
            .collect();
        for k in stale {
            self.remove(&k);
        }
    }

    fn make_room_for(&mut self, sender: &S) {
        while self.partials.keys().filter(|(s, _)| s == sender).count()
            >= self.limits.per_sender_max.max(1)
        {
            if !self.drop_oldest(|(s, _)| s == sender) {
                break;
            }
        }
        while self.partials.len() >= self.limits.partials_max.max(1) {
            if !self.drop_oldest(|_| true) {
                break;
            }
        }
    }

    /// Drops the oldest partial whose key passes `which`; false if none did.
    fn drop_oldest(&mut self, which: impl Fn(&(S, u64)) -> bool) -> bool {
        let oldest = self
            .partials
            .iter()
            .filter(|(k, _)| which(k))
            .min_by_key(|(_, p)| p.started_ms)
            .map(|(k, _)| k.clone());
        match oldest {
            Some(k) => {
                self.remove(&k);
                true
            }
            None => false,
        }
    }

    fn remove(&mut self, key: &(S, u64)) -> Option<Partial> {
        let p = self.partials.remove(key)?;
        self.bytes -= p.bytes;
        Some(p)
    }
}
