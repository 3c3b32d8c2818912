//! Acknowledged offsets: the replica's processed offset it publishes (by one-sided WRITE into
//! its primary's ack word), the primary's view of every replica's acknowledgements, WAIT's
//! count and the `min-replicas-to-write` / `min-replicas-max-lag` gate (protocols.md §4).

use std::collections::BTreeMap;

/// The error a write gets when too few replicas are good (Redis's `noreplicaserr`).
pub const NOREPLICAS_ERROR: &str = "NOREPLICAS Not enough good replicas to write.";
/// Replicas a primary tracks: Redis has no limit, but every replica is a ring, an ack word and
/// a queue pair; far more than any shard has.
pub const REPLICAS_MAX: usize = 1024;

/// A replica's side: what it has processed and what its ack word last said.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplicaProgress {
    processed: u64,
    published: Option<u64>,
}

impl ReplicaProgress {
    /// Starts at `processed` (the offset of the snapshot loaded, or of the cached history),
    /// nothing published yet.
    pub fn new(processed: u64) -> Self {
        ReplicaProgress {
            processed,
            published: None,
        }
    }

    /// The last stream byte executed (Redis's master client `reploff`): the offset of the end
    /// of the last whole command applied, never of a partial one.
    pub fn processed(&self) -> u64 {
        self.processed
    }

    /// Records that commands up to `offset` were executed. Offsets never move back.
    pub fn advance(&mut self, offset: u64) {
        self.processed = self.processed.max(offset);
    }

    /// The offset to WRITE into the ack word now, if it changed since the last one.
    /// The caller calls `published` once that WRITE completed.
    pub fn to_publish(&self) -> Option<u64> {
        (self.published != Some(self.processed)).then_some(self.processed)
    }

    pub fn published(&mut self, offset: u64) {
        self.published = Some(self.published.map_or(offset, |p| p.max(offset)));
    }
}

/// The primary's view of one replica.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplicaAck {
    /// Streaming (Redis's `SLAVE_STATE_ONLINE`); a replica still loading a full sync counts
    /// neither for WAIT nor as good.
    pub online: bool,
    /// Highest offset acknowledged.
    pub offset: u64,
    /// When the replica last proved current: its ack advanced, or it had everything.
    pub last_ack_ms: u64,
    /// Gossip hears the replica (cluster mode; always true outside it). A replica that is
    /// not live counts for nothing: its ack word may look current only because it is idle
    /// and dead.
    pub live: bool,
}

impl ReplicaAck {
    /// Counts for WAIT, `min-replicas-*`, `repl-sync-acks` and the shutdown wait.
    pub fn counts(&self) -> bool {
        self.online && self.live
    }
}

impl ReplicaAck {
    /// INFO's `lag`: whole seconds since the last acknowledgement.
    pub fn lag_secs(&self, now_ms: u64) -> u64 {
        now_ms.saturating_sub(self.last_ack_ms) / 1000
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AckError {
    #[error("too many replicas: {REPLICAS_MAX} at most")]
    TooManyReplicas,
}

/// Every replica's acknowledgements, by a key the caller chooses (node id, link id).
#[derive(Debug, Clone)]
pub struct ReplicaAcks<K: Ord> {
    replicas: BTreeMap<K, ReplicaAck>,
}

impl<K: Ord> Default for ReplicaAcks<K> {
    fn default() -> Self {
        ReplicaAcks {
            replicas: BTreeMap::new(),
        }
    }
}

impl<K: Ord> ReplicaAcks<K> {
    /// A replica attached and is being synced from `offset` (not yet online).
    pub fn attach(&mut self, key: K, offset: u64, now_ms: u64) -> Result<(), AckError> {
        if !self.replicas.contains_key(&key) && self.replicas.len() >= REPLICAS_MAX {
            return Err(AckError::TooManyReplicas);
        }
        self.replicas.insert(
            key,
            ReplicaAck {
                online: false,
                offset,
                last_ack_ms: now_ms,
                live: true,
            },
        );
        Ok(())
    }

    pub fn detach(&mut self, key: &K) -> Option<ReplicaAck> {
        self.replicas.remove(key)
    }

    /// The replica finished its sync and now streams.
    pub fn set_online(&mut self, key: &K, now_ms: u64) {
        if let Some(r) = self.replicas.get_mut(key) {
            r.online = true;
            r.last_ack_ms = now_ms;
        }
    }

    /// Gossip hears the replica again (`true`), or suspects it (`false`). Returns whether
    /// that changed anything.
    pub fn set_live(&mut self, key: &K, live: bool) -> bool {
        match self.replicas.get_mut(key) {
            Some(r) if r.live != live => {
                r.live = live;
                true
            }
            _ => false,
        }
    }

    /// The caller read `acked` from the replica's ack word while the primary was at
    /// `master_repl_offset`. A one-sided ack word carries no timestamp, so freshness is
    /// inferred: an ack that advanced is fresh, and so is one that covers everything written
    /// (an idle link has nothing newer to acknowledge). Offsets never move back.
    pub fn observe(&mut self, key: &K, acked: u64, master_repl_offset: u64, now_ms: u64) {
        let Some(r) = self.replicas.get_mut(key) else {
            return;
        };
        // An ack past what was written cannot be true (a stale word from another history):
        // it must not make WAIT count bytes nobody has.
        let acked = acked.min(master_repl_offset);
        if acked > r.offset || acked >= master_repl_offset {
            r.last_ack_ms = now_ms;
        }
        r.offset = r.offset.max(acked);
    }

    pub fn get(&self, key: &K) -> Option<&ReplicaAck> {
        self.replicas.get(key)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&K, &ReplicaAck)> {
        self.replicas.iter()
    }

    pub fn len(&self) -> usize {
        self.replicas.len()
    }

    pub fn is_empty(&self) -> bool {
        self.replicas.is_empty()
    }

    /// WAIT's answer: online, live replicas that acknowledged `offset` (Redis's
    /// `replicationCountAcksByOffset`).
    pub fn count_acked(&self, offset: u64) -> usize {
        self.replicas
            .values()
            .filter(|r| r.counts() && r.offset >= offset)
            .count()
    }

    /// Replicas streaming now (not loading a full sync) and live.
    pub fn online_count(&self) -> usize {
        self.replicas.values().filter(|r| r.counts()).count()
    }

    /// The highest offset acknowledged by an online, live replica: the one failover prefers.
    pub fn best_offset(&self) -> Option<u64> {
        self.replicas
            .values()
            .filter(|r| r.counts())
            .map(|r| r.offset)
            .max()
    }

    /// Whether writes may proceed under `min-replicas-to-write` / `min-replicas-max-lag`.
    pub fn writes_allowed(&self, now_ms: u64, min_to_write: usize, max_lag_secs: u64) -> bool {
        min_replicas_ok(
            now_ms,
            min_to_write,
            max_lag_secs,
            self.replicas
                .values()
                .filter(|r| r.counts())
                .map(|r| r.last_ack_ms),
        )
    }
}

/// Redis's `checkGoodReplicasCount` as a pure function: with `min_to_write` and `max_lag_secs`
/// both non-zero, at least `min_to_write` of the online replicas (given by their last ack
/// times) must have acknowledged within `max_lag_secs`. Either one zero disables the check.
pub fn min_replicas_ok(
    now_ms: u64,
    min_to_write: usize,
    max_lag_secs: u64,
    last_acks_ms: impl IntoIterator<Item = u64>,
) -> bool {
    if min_to_write == 0 || max_lag_secs == 0 {
        return true;
    }
    let good = last_acks_ms
        .into_iter()
        .filter(|&t| now_ms.saturating_sub(t) / 1000 <= max_lag_secs)
        .take(min_to_write)
        .count();
    good >= min_to_write
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replica_publishes_only_changes() {
        let mut p = ReplicaProgress::new(10);
        assert_eq!(p.to_publish(), Some(10));
        p.published(10);
        assert_eq!(p.to_publish(), None);
        p.advance(25);
        p.advance(20); // never backwards
        assert_eq!(p.processed(), 25);
        assert_eq!(p.to_publish(), Some(25));
        p.published(25);
        assert_eq!(p.to_publish(), None);
    }

    #[test]
    fn wait_counts_online_replicas_at_or_past_the_offset() {
        let mut acks = ReplicaAcks::default();
        acks.attach("a", 0, 0).unwrap();
        acks.attach("b", 0, 0).unwrap();
        acks.attach("c", 0, 0).unwrap();
        acks.set_online(&"a", 0);
        acks.set_online(&"b", 0);
        acks.observe(&"a", 100, 150, 10);
        acks.observe(&"b", 150, 150, 10);
        acks.observe(&"c", 200, 200, 10); // still syncing: never counts
        assert_eq!(acks.count_acked(100), 2);
        assert_eq!(acks.count_acked(101), 1);
        assert_eq!(acks.count_acked(151), 0);
        assert_eq!(acks.count_acked(0), 2);
        assert_eq!(acks.best_offset(), Some(150));
        acks.observe(&"b", 90, 150, 20); // a stale read never moves back
        assert_eq!(acks.get(&"b").unwrap().offset, 150);
        acks.observe(&"a", 900, 150, 20); // nor past what was written
        assert_eq!(acks.get(&"a").unwrap().offset, 150);
        assert!(acks.detach(&"b").is_some());
        assert_eq!(acks.count_acked(150), 1);
    }

    #[test]
    fn freshness_comes_from_progress_or_being_caught_up() {
        let mut acks = ReplicaAcks::default();
        acks.attach(1u32, 0, 0).unwrap();
        acks.set_online(&1, 0);
        acks.observe(&1, 50, 100, 1_000);
        assert_eq!(acks.get(&1).unwrap().last_ack_ms, 1_000);
        // Stuck at 50 while the primary is at 100: not fresh.
        acks.observe(&1, 50, 100, 5_000);
        assert_eq!(acks.get(&1).unwrap().lag_secs(5_000), 4);
        // Caught up with an idle primary: fresh although the word did not change.
        acks.observe(&1, 100, 100, 6_000);
        acks.observe(&1, 100, 100, 9_000);
        assert_eq!(acks.get(&1).unwrap().lag_secs(9_500), 0);
    }

    #[test]
    fn min_replicas_gate() {
        // Disabled when either setting is zero.
        assert!(min_replicas_ok(100_000, 0, 10, []));
        assert!(min_replicas_ok(100_000, 2, 0, []));
        // Lag 10 s counts with max-lag 10 (Redis compares whole seconds with <=), 11 s not.
        assert!(min_replicas_ok(20_000, 1, 10, [10_000]));
        assert!(min_replicas_ok(20_999, 1, 10, [10_000]));
        assert!(!min_replicas_ok(21_000, 1, 10, [10_000]));
        assert!(!min_replicas_ok(20_000, 2, 10, [10_000, 1_000]));
        assert!(min_replicas_ok(20_000, 2, 10, [10_000, 15_000, 1_000]));
    }

    #[test]
    fn writes_allowed_ignores_replicas_not_online() {
        let mut acks = ReplicaAcks::default();
        acks.attach("a", 0, 1_000).unwrap();
        assert!(!acks.writes_allowed(1_000, 1, 10));
        acks.set_online(&"a", 1_000);
        assert!(acks.writes_allowed(1_000, 1, 10));
        assert!(!acks.writes_allowed(12_000, 1, 10));
    }

    /// Goal: a replica gossip suspects counts for nothing (WAIT, `min-replicas-*`, the
    /// best offset) until it is heard again, though its ack word looks current.
    #[test]
    fn a_replica_that_is_not_live_counts_for_nothing() {
        let mut acks = ReplicaAcks::default();
        acks.attach("a", 0, 0).unwrap();
        acks.set_online(&"a", 0);
        acks.observe(&"a", 100, 100, 1_000);
        assert_eq!((acks.count_acked(100), acks.online_count()), (1, 1));
        assert!(acks.set_live(&"a", false));
        assert!(!acks.set_live(&"a", false), "no change");
        assert_eq!((acks.count_acked(100), acks.online_count()), (0, 0));
        assert_eq!(acks.best_offset(), None);
        assert!(!acks.writes_allowed(1_000, 1, 10));
        assert!(acks.set_live(&"a", true));
        assert_eq!(acks.count_acked(100), 1);
        assert!(acks.writes_allowed(1_000, 1, 10));
        assert!(!acks.set_live(&"b", false), "unknown replica");
    }

    #[test]
    fn replica_count_is_bounded() {
        let mut acks = ReplicaAcks::default();
        for i in 0..REPLICAS_MAX {
            acks.attach(i, 0, 0).unwrap();
        }
        assert_eq!(
            acks.attach(REPLICAS_MAX, 0, 0),
            Err(AckError::TooManyReplicas)
        );
        // Re-attaching a known replica is not a new one.
        assert!(acks.attach(0, 5, 0).is_ok());
    }
}
