//! Replication ids: which dataset history this node's offsets count (protocols.md §4).
//!
//! A history is `(replid, offset)`. A node that is promoted keeps its previous id as `replid2`,
//! valid up to `second_replid_offset`, so that replicas that followed the same old primary can
//! still resynchronise partially from it; then it picks a fresh `replid`, because from now on
//! its stream diverges from whatever the old primary may still have written.

use crate::cluster::id::HexId;
use rand::Rng;

/// A replication id: 40 lower-case hex characters (`CONFIG_RUN_ID_SIZE`), the same shape as a
/// node id.
pub type ReplId = HexId;

/// The text Redis prints for an unset `master_replid2`.
pub const NO_REPLID: &str = "0000000000000000000000000000000000000000";

/// This node's replication ids (Redis's `server.replid`, `replid2`, `second_replid_offset`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReplicationIds {
    replid: ReplId,
    /// The previous history and the first offset it is no longer valid for, set together.
    previous: Option<(ReplId, u64)>,
}

impl ReplicationIds {
    /// A fresh history (a node that starts without persisted replication state).
    pub fn new(rng: &mut impl Rng) -> Self {
        ReplicationIds {
            replid: ReplId::random(rng),
            previous: None,
        }
    }

    /// Ids with a known current id and no previous one (a replica after a full sync).
    pub fn with_replid(replid: ReplId) -> Self {
        ReplicationIds {
            replid,
            previous: None,
        }
    }

    /// Ids as persisted: the current id and, if any, the previous one with the first offset
    /// it is no longer valid for.
    pub fn from_parts(replid: ReplId, previous: Option<(ReplId, u64)>) -> Self {
        ReplicationIds { replid, previous }
    }

    pub fn replid(&self) -> ReplId {
        self.replid
    }

    /// The previous id, if this node's history continues another one.
    pub fn replid2(&self) -> Option<ReplId> {
        self.previous.map(|(id, _)| id)
    }

    /// The largest PSYNC offset (first byte wanted) still served under `replid2`.
    pub fn second_replid_offset(&self) -> Option<u64> {
        self.previous.map(|(_, offset)| offset)
    }

    /// `master_replid2` as INFO prints it: 40 zeros when unset.
    pub fn replid2_text(&self) -> String {
        self.replid2()
            .map_or_else(|| NO_REPLID.to_string(), |id| id.as_str().to_string())
    }

    /// `second_repl_offset` as INFO prints it: -1 when unset.
    pub fn second_replid_offset_info(&self) -> i64 {
        self.second_replid_offset()
            .map_or(-1, |o| i64::try_from(o).unwrap_or(i64::MAX))
    }

    /// A new current id with no link to the old one (Redis's `changeReplicationId` +
    /// `clearReplicationId2`): a history that nothing else may continue.
    pub fn restart(&mut self, rng: &mut impl Rng) {
        self.replid = ReplId::random(rng);
        self.previous = None;
    }

    /// Forgets the previous id (`clearReplicationId2`).
    pub fn clear_replid2(&mut self) {
        self.previous = None;
    }

    /// A replica becomes a primary at `master_repl_offset` (the last byte it processed):
    /// the old id stays valid for PSYNC offsets up to `master_repl_offset + 1` (a replica
    /// that has the same bytes asks for the next one), and a fresh id starts.
    pub fn shift_on_promotion(&mut self, master_repl_offset: u64, rng: &mut impl Rng) {
        self.shift_to(ReplId::random(rng), master_repl_offset);
    }

    /// The history continues under `new_replid` from `master_repl_offset + 1` on: promotion,
    /// or a replica told `+CONTINUE <new id>` by a primary that was promoted.
    pub fn shift_to(&mut self, new_replid: ReplId, master_repl_offset: u64) {
        if new_replid == self.replid {
            return;
        }
        self.previous = Some((self.replid, master_repl_offset.saturating_add(1)));
        self.replid = new_replid;
    }

    /// Whether a replica at history `(replid, psync_offset)` shares this node's history: the
    /// current id at any offset, the previous one only up to `second_replid_offset`.
    pub fn continues(&self, replid: &ReplId, psync_offset: u64) -> bool {
        *replid == self.replid
            || self
                .previous
                .is_some_and(|(old, until)| *replid == old && psync_offset <= until)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn rng(seed: u64) -> rand::rngs::StdRng {
        rand::rngs::StdRng::seed_from_u64(seed)
    }

    #[test]
    fn fresh_ids_follow_the_seed_and_have_no_previous_history() {
        let a = ReplicationIds::new(&mut rng(1));
        assert_eq!(a, ReplicationIds::new(&mut rng(1)));
        assert_ne!(a.replid(), ReplicationIds::new(&mut rng(2)).replid());
        assert_eq!(a.replid().as_str().len(), 40);
        assert_eq!(a.replid2(), None);
        assert_eq!(a.replid2_text(), NO_REPLID);
        assert_eq!(a.second_replid_offset_info(), -1);
    }

    #[test]
    fn promotion_keeps_the_old_id_up_to_the_next_offset() {
        let mut r = rng(3);
        let mut ids = ReplicationIds::new(&mut r);
        let old = ids.replid();
        ids.shift_on_promotion(50, &mut r);
        assert_ne!(ids.replid(), old);
        assert_eq!(ids.replid2(), Some(old));
        assert_eq!(ids.second_replid_offset(), Some(51));
        assert_eq!(ids.second_replid_offset_info(), 51);
        assert_eq!(ids.replid2_text(), old.as_str());
        // A replica with 50 bytes asks for byte 51: still the same history.
        assert!(ids.continues(&old, 51));
        assert!(ids.continues(&old, 10));
        // Byte 52 under the old id was never written by us: another history.
        assert!(!ids.continues(&old, 52));
        assert!(ids.continues(&ids.replid(), 1_000));
        let stranger = ReplId::random(&mut r);
        assert!(!ids.continues(&stranger, 1));
    }

    #[test]
    fn a_second_promotion_forgets_the_oldest_id() {
        let mut r = rng(4);
        let mut ids = ReplicationIds::new(&mut r);
        let first = ids.replid();
        ids.shift_on_promotion(10, &mut r);
        let second = ids.replid();
        ids.shift_on_promotion(20, &mut r);
        assert_eq!(ids.replid2(), Some(second));
        assert_eq!(ids.second_replid_offset(), Some(21));
        assert!(!ids.continues(&first, 5));
    }

    #[test]
    fn shifting_to_the_same_id_changes_nothing() {
        let mut ids = ReplicationIds::new(&mut rng(5));
        let before = ids;
        ids.shift_to(ids.replid(), 99);
        assert_eq!(ids, before);
    }

    #[test]
    fn restart_and_clear_drop_the_previous_history() {
        let mut r = rng(6);
        let mut ids = ReplicationIds::new(&mut r);
        ids.shift_on_promotion(7, &mut r);
        let mut cleared = ids;
        cleared.clear_replid2();
        assert_eq!(cleared.replid(), ids.replid());
        assert_eq!(cleared.replid2(), None);
        let current = ids.replid();
        ids.restart(&mut r);
        assert_ne!(ids.replid(), current);
        assert_eq!(ids.replid2(), None);
        assert!(!ids.continues(&current, 1));
    }
}
