//! PSYNC: whether a replica that names its history `(replid, offset)` can continue from the
//! primary's backlog or needs a full sync (Redis's `masterTryPartialResynchronization`,
//! protocols.md §4), and the replica's side of the exchange.
//!
//! Offsets here are PSYNC offsets: the number of the first byte the replica lacks, i.e. its
//! processed offset + 1.

use super::backlog::Backlog;
use super::ids::{ReplId, ReplicationIds};
use crate::cluster::id::NodeId;

/// What a replica asks for: its history, or `None` (`PSYNC ? -1`) to force a full sync.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PsyncRequest {
    pub history: Option<(ReplId, u64)>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PsyncError {
    #[error("ERR wrong number of arguments for 'psync' command")]
    Arity,
    #[error("ERR value is not an integer or out of range")]
    BadOffset,
    #[error("ERR invalid replication id")]
    BadReplid,
    #[error("unexpected PSYNC reply: {0}")]
    BadReply(String),
}

impl PsyncRequest {
    /// Parses `PSYNC <replid> <offset>` (`args[0]` is the command name). A replid that is not
    /// 40 hex digits (`?` included) asks for a full sync, as in Redis where it matches nothing.
    pub fn parse(args: &[&[u8]]) -> Result<Self, PsyncError> {
        let [_, replid, offset] = args else {
            return Err(PsyncError::Arity);
        };
        let offset: i64 = std::str::from_utf8(offset)
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or(PsyncError::BadOffset)?;
        let history = match (ReplId::parse(replid), u64::try_from(offset)) {
            (Some(id), Ok(offset)) => Some((id, offset)),
            _ => None,
        };
        Ok(PsyncRequest { history })
    }

    /// The replica's request given what it holds: `processed` is the last byte it applied
    /// under `replid` (Redis's cached master `reploff`); with no history, `PSYNC ? -1`.
    pub fn from_replica(history: Option<(ReplId, u64)>) -> Self {
        PsyncRequest {
            history: history.map(|(id, processed)| (id, processed + 1)),
        }
    }

    /// The command a replica sends.
    pub fn to_args(&self) -> Vec<Vec<u8>> {
        match self.history {
            Some((id, offset)) => vec![
                b"PSYNC".to_vec(),
                id.as_bytes().to_vec(),
                offset.to_string().into_bytes(),
            ],
            None => vec![b"PSYNC".to_vec(), b"?".to_vec(), b"-1".to_vec()],
        }
    }
}

/// Why a partial resync was refused: for the log line, as Redis logs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FullResyncReason {
    /// `PSYNC ? -1`.
    Requested,
    /// The replid is neither ours nor our previous one.
    ReplidMismatch,
    /// The previous id, but past the offset where our history left it.
    PastSecondReplidOffset { requested: u64, max: u64 },
    /// No backlog yet (nothing was ever replicated from here).
    NoBacklog,
    /// Same history, but the bytes are no longer (or not yet) in the backlog.
    OutOfBacklog {
        requested: u64,
        start: u64,
        end: u64,
    },
}

/// The primary's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PsyncDecision {
    /// `+CONTINUE [<replid>]`, then the backlog from `from` on. `new_replid` is set when the
    /// replica named our previous id: it must switch to the current one.
    Continue {
        from: u64,
        new_replid: Option<ReplId>,
    },
    /// `+FULLRESYNC <replid> <offset>`: a snapshot taken at `offset` (the current
    /// `master_repl_offset`), then the stream from `offset + 1`. The caller creates the
    /// backlog if there is none.
    FullResync {
        replid: ReplId,
        offset: u64,
        reason: FullResyncReason,
    },
}

impl PsyncDecision {
    /// The status line the primary replies with (without `\r\n`).
    pub fn reply_line(&self) -> String {
        match self {
            PsyncDecision::Continue {
                new_replid: Some(id),
                ..
            } => format!("+CONTINUE {id}"),
            PsyncDecision::Continue { .. } => "+CONTINUE".to_string(),
            PsyncDecision::FullResync { replid, offset, .. } => {
                format!("+FULLRESYNC {replid} {offset}")
            }
        }
    }
}

/// The primary's decision for `req`, given its ids, its backlog (`None` if it has none) and
/// its `master_repl_offset` (the backlog's when there is one).
pub fn decide(
    ids: &ReplicationIds,
    backlog: Option<&Backlog>,
    master_repl_offset: u64,
    req: &PsyncRequest,
) -> PsyncDecision {
    let full = |reason| PsyncDecision::FullResync {
        replid: ids.replid(),
        offset: backlog.map_or(master_repl_offset, Backlog::master_repl_offset),
        reason,
    };
    let Some((replid, offset)) = req.history else {
        return full(FullResyncReason::Requested);
    };
    if !ids.continues(&replid, offset) {
        return full(match ids.second_replid_offset() {
            Some(max) if ids.replid2() == Some(replid) => {
                FullResyncReason::PastSecondReplidOffset {
                    requested: offset,
                    max,
                }
            }
            _ => FullResyncReason::ReplidMismatch,
        });
    }
    let Some(backlog) = backlog else {
        return full(FullResyncReason::NoBacklog);
    };
    if backlog.range(offset).is_none() {
        return full(FullResyncReason::OutOfBacklog {
            requested: offset,
            start: backlog.start_offset(),
            end: backlog.master_repl_offset() + 1,
        });
    }
    PsyncDecision::Continue {
        from: offset,
        new_replid: (replid != ids.replid()).then_some(ids.replid()),
    }
}

/// Why a replica refused a primary's full sync (INFO `master_sync_refused`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SyncRefused {
    /// The primary whose stream this history is offers a history of another id: it
    /// restarted without what it had (the replica may hold the only copy).
    #[error("primary-lost-history")]
    PrimaryLostHistory,
    /// The same history, but the primary is behind the replica: it lost a tail.
    #[error("primary-behind")]
    PrimaryBehind,
}

/// The history a replica holds, as its full-sync check needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeldHistory {
    pub replid: ReplId,
    /// The last byte held.
    pub offset: u64,
    /// The node whose stream this history is (None: nobody's known).
    pub primary: Option<NodeId>,
    /// That primary's config epoch when this replica took the history from it.
    pub epoch: u64,
}

/// What a primary's full sync says of the history it offers, beyond its id: why a replica
/// that holds another history of the same primary may take it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HistoryClaim {
    /// The config epoch of the decision that made the history authoritative (the primary's
    /// promotion), 0 if none did.
    pub promoted_in: u64,
    /// The history a complete replay of which began this one (an `appendfsync always` AOF
    /// read to its end after a crash): this one holds everything that one acknowledged.
    pub succeeds: Option<ReplId>,
}

/// A primary's `+FULLRESYNC`, as the replica's full-sync check needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SyncOffer {
    /// The node the replica is linked to (None outside cluster mode).
    pub by: Option<NodeId>,
    pub replid: ReplId,
    pub offset: u64,
    pub claim: HistoryClaim,
}

/// The replica's check before it lets a full sync replace its dataset.
///
/// - No history claimed (offset 0, or nobody's stream): nothing to lose.
/// - Outside cluster mode, or another node than the history's primary: the topology
///   decided since (a promotion, CLUSTER REPLICATE), and with synchronous acks the node
///   promoted holds every acknowledged write; what this replica holds beyond it was never
///   acknowledged.
/// - The same primary, the same id, at or past this replica's offset: it merely fell out
///   of the backlog.
/// - The same primary under a new id that a topology decision newer than this replica's
///   history made authoritative (it failed over away and was promoted back, say): as for
///   another node, the topology decided since. Without this the replica would refuse its
///   primary forever.
/// - Otherwise refused: the same primary under a new id no decision made (it restarted
///   without its history) or behind this replica (it lost a tail); the replica keeps its
///   data.
pub fn full_sync_allowed(mine: HeldHistory, offer: SyncOffer) -> Result<(), SyncRefused> {
    let Some(history_primary) = mine.primary.filter(|_| mine.offset > 0) else {
        return Ok(());
    };
    match offer.by {
        Some(by) if by == history_primary => {}
        _ => return Ok(()),
    }
    if offer.replid != mine.replid {
        let decided_since = offer.claim.promoted_in > mine.epoch;
        let replayed_mine = offer.claim.succeeds == Some(mine.replid);
        if decided_since || replayed_mine {
            return Ok(());
        }
        return Err(SyncRefused::PrimaryLostHistory);
    }
    if offer.offset < mine.offset {
        return Err(SyncRefused::PrimaryBehind);
    }
    Ok(())
}

/// What the replica reads back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PsyncReply {
    FullResync {
        replid: ReplId,
        offset: u64,
    },
    /// Continue; `Some` when the primary's history has a new id.
    Continue {
        new_replid: Option<ReplId>,
    },
    /// `-NOMASTERLINK` / `-LOADING`: the primary cannot serve yet; retry later.
    TryLater(String),
    /// Any other error: the primary does not do PSYNC.
    Error(String),
}

/// Parses the primary's status line (without `\r\n`).
pub fn parse_reply(line: &[u8]) -> Result<PsyncReply, PsyncError> {
    let text = String::from_utf8_lossy(line);
    let bad = || PsyncError::BadReply(text.chars().take(128).collect());
    let mut words = text.split(' ');
    match words.next() {
        Some("+FULLRESYNC") => {
            let replid = words
                .next()
                .and_then(|w| ReplId::parse(w.as_bytes()))
                .ok_or_else(bad)?;
            let offset = words.next().and_then(|w| w.parse().ok()).ok_or_else(bad)?;
            Ok(PsyncReply::FullResync { replid, offset })
        }
        Some("+CONTINUE") => match words.next() {
            None | Some("") => Ok(PsyncReply::Continue { new_replid: None }),
            Some(w) => Ok(PsyncReply::Continue {
                new_replid: Some(ReplId::parse(w.as_bytes()).ok_or_else(bad)?),
            }),
        },
        Some(w) if w.starts_with("-NOMASTERLINK") || w.starts_with("-LOADING") => {
            Ok(PsyncReply::TryLater(text[1..].to_string()))
        }
        Some(w) if w.starts_with('-') => Ok(PsyncReply::Error(text[1..].to_string())),
        _ => Err(bad()),
    }
}

/// The replica's ids after `+CONTINUE`: a new id means the primary was promoted; our old id
/// becomes the previous one up to what we processed, so our own replicas can still follow us
/// (Redis's `slaveTryPartialResynchronization`).
pub fn on_continue(ids: &mut ReplicationIds, new_replid: Option<ReplId>, processed: u64) {
    if let Some(id) = new_replid {
        ids.shift_to(id, processed);
    }
}

/// The replica's ids after loading a full sync: the primary's id, no previous one.
pub fn on_full_resync(replid: ReplId) -> ReplicationIds {
    ReplicationIds::with_replid(replid)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn rng(seed: u64) -> rand::rngs::StdRng {
        rand::rngs::StdRng::seed_from_u64(seed)
    }

    /// A primary whose backlog of 10 bytes has seen 30 bytes: it holds 21..=30.
    fn primary() -> (ReplicationIds, Backlog) {
        let ids = ReplicationIds::new(&mut rng(1));
        let mut b = Backlog::new(10, 0).unwrap();
        b.append(&[b'x'; 30]);
        (ids, b)
    }

    fn ask(ids: &ReplicationIds, b: Option<&Backlog>, id: ReplId, off: u64) -> PsyncDecision {
        decide(
            ids,
            b,
            30,
            &PsyncRequest {
                history: Some((id, off)),
            },
        )
    }

    #[test]
    fn continues_inside_the_backlog_and_refuses_outside() {
        let (ids, b) = primary();
        let me = ids.replid();
        for off in [21, 25, 31] {
            assert_eq!(
                ask(&ids, Some(&b), me, off),
                PsyncDecision::Continue {
                    from: off,
                    new_replid: None
                }
            );
        }
        assert_eq!(
            ask(&ids, Some(&b), me, 20),
            PsyncDecision::FullResync {
                replid: me,
                offset: 30,
                reason: FullResyncReason::OutOfBacklog {
                    requested: 20,
                    start: 21,
                    end: 31
                }
            }
        );
        assert!(matches!(
            ask(&ids, Some(&b), me, 32),
            PsyncDecision::FullResync {
                reason: FullResyncReason::OutOfBacklog { .. },
                ..
            }
        ));
        assert!(matches!(
            ask(&ids, None, me, 25),
            PsyncDecision::FullResync {
                reason: FullResyncReason::NoBacklog,
                offset: 30,
                ..
            }
        ));
    }

    #[test]
    fn forced_and_foreign_requests_get_a_full_sync() {
        let (ids, b) = primary();
        let req = PsyncRequest::parse(&[b"PSYNC", b"?", b"-1"]).unwrap();
        assert_eq!(req, PsyncRequest { history: None });
        let d = decide(&ids, Some(&b), 30, &req);
        assert_eq!(d.reply_line(), format!("+FULLRESYNC {} 30", ids.replid()));
        let stranger = ReplId::random(&mut rng(9));
        assert!(matches!(
            ask(&ids, Some(&b), stranger, 25),
            PsyncDecision::FullResync {
                reason: FullResyncReason::ReplidMismatch,
                ..
            }
        ));
    }

    #[test]
    fn a_promoted_replica_serves_its_siblings_under_the_old_id() {
        // The old primary's replicas all processed 30 bytes; one of them is promoted.
        let (mut ids, mut b) = primary();
        let old = ids.replid();
        ids.shift_on_promotion(b.master_repl_offset(), &mut rng(2));
        let new = ids.replid();
        b.append(b"more");
        let d = ask(&ids, Some(&b), old, 31);
        assert_eq!(
            d,
            PsyncDecision::Continue {
                from: 31,
                new_replid: Some(new)
            }
        );
        assert_eq!(d.reply_line(), format!("+CONTINUE {new}"));
        // A sibling that claims bytes of the old history we never had.
        assert_eq!(
            ask(&ids, Some(&b), old, 33),
            PsyncDecision::FullResync {
                replid: new,
                offset: 34,
                reason: FullResyncReason::PastSecondReplidOffset {
                    requested: 33,
                    max: 31
                }
            }
        );
    }

    #[test]
    fn replica_request_and_parse_round_trip() {
        let id = ReplId::random(&mut rng(3));
        let req = PsyncRequest::from_replica(Some((id, 41)));
        let args = req.to_args();
        assert_eq!(args[2], b"42");
        let refs: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
        assert_eq!(PsyncRequest::parse(&refs).unwrap(), req);
        assert_eq!(
            PsyncRequest::from_replica(None).to_args(),
            vec![b"PSYNC".to_vec(), b"?".to_vec(), b"-1".to_vec()]
        );
        assert_eq!(
            PsyncRequest::parse(&[b"PSYNC", b"?"]),
            Err(PsyncError::Arity)
        );
        assert_eq!(
            PsyncRequest::parse(&[b"PSYNC", b"?", b"x"]),
            Err(PsyncError::BadOffset)
        );
    }

    /// Goal: the replica's full-sync check, case by case (see `full_sync_allowed`).
    #[test]
    fn a_replica_refuses_only_its_own_primary_without_its_history() {
        let mut r = rng(6);
        let (h, other_id) = (ReplId::random(&mut r), ReplId::random(&mut r));
        let (p, q) = (NodeId::random(&mut r), NodeId::random(&mut r));
        use SyncRefused::*;
        let held = |offset, primary| HeldHistory {
            replid: h,
            offset,
            primary,
            epoch: 8,
        };
        let offer = |by, replid, offset, promoted_in| SyncOffer {
            by,
            replid,
            offset,
            claim: HistoryClaim {
                promoted_in,
                succeeds: None,
            },
        };
        let replayed = |succeeds| SyncOffer {
            claim: HistoryClaim {
                promoted_in: 0,
                succeeds: Some(succeeds),
            },
            ..offer(Some(p), other_id, 0, 0)
        };
        let p_ = Some(p);
        let table = [
            // (mine, offer, verdict)
            (
                held(100, p_),
                offer(p_, other_id, 0, 0),
                Err(PrimaryLostHistory),
            ),
            (
                held(100, p_),
                offer(p_, other_id, 500, 0),
                Err(PrimaryLostHistory),
            ),
            // A promotion no newer than the history: the same era, a restart.
            (
                held(100, p_),
                offer(p_, other_id, 0, 8),
                Err(PrimaryLostHistory),
            ),
            (
                held(100, p_),
                offer(p_, other_id, 0, 3),
                Err(PrimaryLostHistory),
            ),
            // Promoted again after this replica took its history: the topology decided.
            (held(100, p_), offer(p_, other_id, 0, 9), Ok(())),
            // A complete replay of this replica's history began the offered one.
            (held(100, p_), replayed(h), Ok(())),
            (held(100, p_), replayed(other_id), Err(PrimaryLostHistory)),
            (held(100, p_), offer(p_, h, 99, 0), Err(PrimaryBehind)),
            // The same history behind: a newer promotion does not excuse a lost tail.
            (held(100, p_), offer(p_, h, 99, 9), Err(PrimaryBehind)),
            (held(100, p_), offer(p_, h, 100, 0), Ok(())),
            (held(100, p_), offer(p_, h, 5000, 0), Ok(())),
            (held(100, p_), offer(Some(q), other_id, 0, 0), Ok(())),
            (held(100, p_), offer(None, other_id, 0, 0), Ok(())),
            (held(100, None), offer(p_, other_id, 0, 0), Ok(())),
            (held(0, p_), offer(p_, other_id, 0, 0), Ok(())),
        ];
        for (mine, offer, verdict) in table {
            assert_eq!(
                full_sync_allowed(mine, offer),
                verdict,
                "{mine:?}, offered {offer:?}"
            );
        }
        assert_eq!(PrimaryLostHistory.to_string(), "primary-lost-history");
    }

    #[test]
    fn replica_reads_replies() {
        let id = ReplId::random(&mut rng(4));
        assert_eq!(
            parse_reply(format!("+FULLRESYNC {id} 77").as_bytes()).unwrap(),
            PsyncReply::FullResync {
                replid: id,
                offset: 77
            }
        );
        assert_eq!(
            parse_reply(b"+CONTINUE").unwrap(),
            PsyncReply::Continue { new_replid: None }
        );
        assert_eq!(
            parse_reply(format!("+CONTINUE {id}").as_bytes()).unwrap(),
            PsyncReply::Continue {
                new_replid: Some(id)
            }
        );
        assert!(matches!(
            parse_reply(b"-LOADING busy").unwrap(),
            PsyncReply::TryLater(_)
        ));
        assert!(matches!(
            parse_reply(b"-ERR unknown command").unwrap(),
            PsyncReply::Error(_)
        ));
        assert!(parse_reply(b"+FULLRESYNC nothex 1").is_err());
        assert!(parse_reply(b"+OK").is_err());
    }

    #[test]
    fn replica_ids_follow_the_replies() {
        let mut r = rng(5);
        let mut ids = on_full_resync(ReplId::random(&mut r));
        let before = ids.replid();
        on_continue(&mut ids, None, 100);
        assert_eq!(ids.replid(), before);
        let promoted = ReplId::random(&mut r);
        on_continue(&mut ids, Some(promoted), 100);
        assert_eq!(ids.replid(), promoted);
        assert_eq!(ids.replid2(), Some(before));
        // Our own replica at our 100 bytes asks for 101 under the old id: still served.
        assert!(ids.continues(&before, 101));
    }
}
