//! The messages that set a replication link up, before any ring WRITE (no I/O: the node
//! carries the bytes over the fabric Stream or as REPLCONF/PSYNC arguments over TCP).
//!
//! replica → primary, [`LinkRequest`]: the ring advert (addr, len, rkey) and the PSYNC
//! request (history or none). primary → replica, [`LinkAccept`]: the ring's ack word, the
//! applied-offset word, and the decision (`+CONTINUE [replid]` / `+FULLRESYNC replid offset`).
//!
//! Layout, little-endian: `version u8 | tag u8 | body`; a region is its 24-byte advert
//! (`bus::ring::encode_advert`); a replid is its 40 hex characters; flags are 0 or 1.

use bus::ring::{decode_advert, encode_advert, ADVERT_LEN};
use bus::RemoteRegion;

use super::ids::ReplId;
use super::psync::{HistoryClaim, PsyncDecision, PsyncRequest};
use crate::cluster::id::ID_LEN;

/// 2: ring records carry the ring's epoch (a 32-byte header) and the reader asks for resends
/// through the writer's ack region (`bus::ring::layout`); a version-1 peer would write records
/// this side never validates, so the link is refused at the handshake instead.
/// 3: a full-sync decision carries what the primary claims of its history (the epoch of the
/// promotion that made it, the history whose complete replay began it), which a version-2
/// replica would not read.
pub const HANDSHAKE_VERSION: u8 = 3;
/// Longest handshake message: both messages are fixed-size but for optional fields, far below
/// this; a longer input is garbage and is refused before it is looked at.
pub const HANDSHAKE_MSG_MAX: usize = 256;

const TAG_REQUEST: u8 = 1;
const TAG_ACCEPT: u8 = 2;
const DECISION_CONTINUE: u8 = 1;
const DECISION_FULL: u8 = 2;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HandshakeError {
    #[error("replication handshake message of {0} bytes exceeds {HANDSHAKE_MSG_MAX}")]
    TooLong(usize),
    #[error("replication handshake message ends early")]
    Short,
    #[error("replication handshake message has {0} bytes after its end")]
    Trailing(usize),
    #[error("replication handshake version {0}, expected {HANDSHAKE_VERSION}")]
    Version(u8),
    #[error("replication handshake message tag {got}, expected {expected}")]
    Tag { got: u8, expected: u8 },
    #[error("replication handshake field {0} has a bad value")]
    BadField(&'static str),
}

/// replica → primary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinkRequest {
    /// The ring the primary will WRITE into.
    pub ring: RemoteRegion,
    pub psync: PsyncRequest,
}

/// How the link starts, as the replica needs to know it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkDecision {
    /// `+CONTINUE`: the stream follows from the requested offset; `Some` when the primary's
    /// history has a new id.
    Continue { new_replid: Option<ReplId> },
    /// `+FULLRESYNC`: a snapshot at `offset` comes first. `claim` says why the history may
    /// replace a replica's other history of the same primary (`psync::full_sync_allowed`).
    FullResync {
        replid: ReplId,
        offset: u64,
        claim: HistoryClaim,
    },
}

impl LinkDecision {
    /// The link decision for a PSYNC decision; `claim` as in [`LinkDecision::FullResync`].
    pub fn from_psync(d: &PsyncDecision, claim: HistoryClaim) -> Self {
        match *d {
            PsyncDecision::Continue { new_replid, .. } => LinkDecision::Continue { new_replid },
            PsyncDecision::FullResync { replid, offset, .. } => LinkDecision::FullResync {
                replid,
                offset,
                claim,
            },
        }
    }
}

/// primary → replica.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinkAccept {
    /// The ring writer's ack word (ring space).
    pub ring_ack: RemoteRegion,
    /// Where the replica publishes its applied offset.
    pub applied_word: RemoteRegion,
    pub decision: LinkDecision,
}

impl LinkRequest {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = vec![HANDSHAKE_VERSION, TAG_REQUEST];
        out.extend_from_slice(&encode_advert(&self.ring));
        match self.psync.history {
            Some((replid, offset)) => {
                out.push(1);
                out.extend_from_slice(replid.as_bytes());
                out.extend_from_slice(&offset.to_le_bytes());
            }
            None => out.push(0),
        }
        out
    }

    pub fn decode(bytes: &[u8]) -> Result<Self, HandshakeError> {
        let mut r = Cursor::open(bytes, TAG_REQUEST)?;
        let ring = r.region("ring")?;
        let history = if r.flag("history")? {
            Some((r.replid("replid")?, r.u64()?))
        } else {
            None
        };
        r.finish()?;
        Ok(LinkRequest {
            ring,
            psync: PsyncRequest { history },
        })
    }
}

impl LinkAccept {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = vec![HANDSHAKE_VERSION, TAG_ACCEPT];
        out.extend_from_slice(&encode_advert(&self.ring_ack));
        out.extend_from_slice(&encode_advert(&self.applied_word));
        match self.decision {
            LinkDecision::Continue { new_replid } => {
                out.push(DECISION_CONTINUE);
                match new_replid {
                    Some(id) => {
                        out.push(1);
                        out.extend_from_slice(id.as_bytes());
                    }
                    None => out.push(0),
                }
            }
            LinkDecision::FullResync {
                replid,
                offset,
                claim,
            } => {
                out.push(DECISION_FULL);
                out.extend_from_slice(replid.as_bytes());
                out.extend_from_slice(&offset.to_le_bytes());
                out.extend_from_slice(&claim.promoted_in.to_le_bytes());
                match claim.succeeds {
                    Some(id) => {
                        out.push(1);
                        out.extend_from_slice(id.as_bytes());
                    }
                    None => out.push(0),
                }
            }
        }
        out
    }

    pub fn decode(bytes: &[u8]) -> Result<Self, HandshakeError> {
        let mut r = Cursor::open(bytes, TAG_ACCEPT)?;
        let ring_ack = r.region("ring_ack")?;
        let applied_word = r.region("applied_word")?;
        let decision = match r.byte()? {
            DECISION_CONTINUE => LinkDecision::Continue {
                new_replid: if r.flag("new_replid")? {
                    Some(r.replid("new_replid")?)
                } else {
                    None
                },
            },
            DECISION_FULL => LinkDecision::FullResync {
                replid: r.replid("replid")?,
                offset: r.u64()?,
                claim: HistoryClaim {
                    promoted_in: r.u64()?,
                    succeeds: if r.flag("succeeds")? {
                        Some(r.replid("succeeds")?)
                    } else {
                        None
                    },
                },
            },
            _ => return Err(HandshakeError::BadField("decision")),
        };
        r.finish()?;
        Ok(LinkAccept {
            ring_ack,
            applied_word,
            decision,
        })
    }
}

/// Reads fields front to back; every read checks the length left.
struct Cursor<'a> {
    rest: &'a [u8],
}

impl<'a> Cursor<'a> {
    fn open(bytes: &'a [u8], tag: u8) -> Result<Self, HandshakeError> {
        if bytes.len() > HANDSHAKE_MSG_MAX {
            return Err(HandshakeError::TooLong(bytes.len()));
        }
        let mut c = Cursor { rest: bytes };
        let version = c.byte()?;
        if version != HANDSHAKE_VERSION {
            return Err(HandshakeError::Version(version));
        }
        let got = c.byte()?;
        if got != tag {
            return Err(HandshakeError::Tag { got, expected: tag });
        }
        Ok(c)
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], HandshakeError> {
        if self.rest.len() < n {
            return Err(HandshakeError::Short);
        }
        let (head, tail) = self.rest.split_at(n);
        self.rest = tail;
        Ok(head)
    }

    fn byte(&mut self) -> Result<u8, HandshakeError> {
        Ok(self.take(1)?[0])
    }

    fn flag(&mut self, name: &'static str) -> Result<bool, HandshakeError> {
        match self.byte()? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(HandshakeError::BadField(name)),
        }
    }

    fn u64(&mut self) -> Result<u64, HandshakeError> {
        let mut w = [0u8; 8];
        w.copy_from_slice(self.take(8)?);
        Ok(u64::from_le_bytes(w))
    }

    fn region(&mut self, name: &'static str) -> Result<RemoteRegion, HandshakeError> {
        decode_advert(self.take(ADVERT_LEN)?).map_err(|_| HandshakeError::BadField(name))
    }

    fn replid(&mut self, name: &'static str) -> Result<ReplId, HandshakeError> {
        ReplId::parse(self.take(ID_LEN)?).ok_or(HandshakeError::BadField(name))
    }

    fn finish(self) -> Result<(), HandshakeError> {
        match self.rest.len() {
            0 => Ok(()),
            n => Err(HandshakeError::Trailing(n)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn region(n: u64) -> RemoteRegion {
        RemoteRegion {
            addr: 0x1000 * n,
            len: 4160 + n,
            rkey: 7 * n,
        }
    }

    fn id(c: u8) -> ReplId {
        ReplId::parse(&[c; ID_LEN]).unwrap()
    }

    #[test]
    fn requests_and_accepts_round_trip() {
        for psync in [
            PsyncRequest { history: None },
            PsyncRequest {
                history: Some((id(b'a'), 12345)),
            },
        ] {
            let req = LinkRequest {
                ring: region(1),
                psync,
            };
            assert_eq!(LinkRequest::decode(&req.encode()), Ok(req));
        }
        for decision in [
            LinkDecision::Continue { new_replid: None },
            LinkDecision::Continue {
                new_replid: Some(id(b'b')),
            },
            LinkDecision::FullResync {
                replid: id(b'c'),
                offset: 99,
                claim: HistoryClaim {
                    promoted_in: 7,
                    succeeds: None,
                },
            },
            LinkDecision::FullResync {
                replid: id(b'c'),
                offset: 99,
                claim: HistoryClaim {
                    promoted_in: 0,
                    succeeds: Some(id(b'9')),
                },
            },
        ] {
            let acc = LinkAccept {
                ring_ack: region(2),
                applied_word: region(3),
                decision,
            };
            assert_eq!(LinkAccept::decode(&acc.encode()), Ok(acc));
        }
    }

    #[test]
    fn the_decision_comes_from_psync() {
        let d = PsyncDecision::Continue {
            from: 10,
            new_replid: Some(id(b'd')),
        };
        let claim = HistoryClaim {
            promoted_in: 3,
            succeeds: None,
        };
        assert_eq!(
            LinkDecision::from_psync(&d, claim),
            LinkDecision::Continue {
                new_replid: Some(id(b'd'))
            }
        );
        let full = PsyncDecision::FullResync {
            replid: id(b'f'),
            offset: 40,
            reason: super::super::psync::FullResyncReason::Requested,
        };
        assert_eq!(
            LinkDecision::from_psync(&full, claim),
            LinkDecision::FullResync {
                replid: id(b'f'),
                offset: 40,
                claim,
            }
        );
    }

    #[test]
    fn malformed_messages_are_typed_errors() {
        let req = LinkRequest {
            ring: region(1),
            psync: PsyncRequest {
                history: Some((id(b'e'), 5)),
            },
        }
        .encode();
        for cut in 0..req.len() {
            assert!(LinkRequest::decode(&req[..cut]).is_err(), "cut at {cut}");
        }
        let mut long = req.clone();
        long.push(0);
        assert_eq!(LinkRequest::decode(&long), Err(HandshakeError::Trailing(1)));
        assert_eq!(
            LinkRequest::decode(&vec![0u8; HANDSHAKE_MSG_MAX + 1]),
            Err(HandshakeError::TooLong(HANDSHAKE_MSG_MAX + 1))
        );
        let mut v = req.clone();
        v[0] = 9;
        assert_eq!(LinkRequest::decode(&v), Err(HandshakeError::Version(9)));
        // A peer of the 24-byte ring header (version 1) is refused, not linked.
        v[0] = 1;
        assert_eq!(LinkRequest::decode(&v), Err(HandshakeError::Version(1)));
        assert_eq!(
            LinkAccept::decode(&req),
            Err(HandshakeError::Tag {
                got: TAG_REQUEST,
                expected: TAG_ACCEPT
            })
        );
        let mut flag = req.clone();
        flag[2 + ADVERT_LEN] = 2;
        assert_eq!(
            LinkRequest::decode(&flag),
            Err(HandshakeError::BadField("history"))
        );
        let mut replid = req;
        replid[3 + ADVERT_LEN] = b'z';
        assert_eq!(
            LinkRequest::decode(&replid),
            Err(HandshakeError::BadField("replid"))
        );
    }
}
