//! Whether this node follows a primary (REPLICAOF, `replicaof`), and how its link stands.
//!
//! Each REPLICAOF that names a new primary starts a new *generation*; the link thread of an
//! older generation sees it is stale at its next look and ends (it never touches the state
//! again). `REPLICAOF NO ONE` ends the current generation.

use crate::cluster::id::NodeId;
use crate::replication::ids::ReplId;
use crate::replication::psync::SyncRefused;
use crate::replication::report::{LinkState, PrimaryLink};
use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::Instant;

/// The primary this node follows and what its link last reported.
#[derive(Debug, Clone)]
struct Following {
    host: String,
    port: u16,
    /// The primary's cluster node id (None outside cluster mode): a full sync is checked
    /// against the node whose stream this node's history is.
    node: Option<NodeId>,
    /// Why the last full sync offered was refused, until a link is set up.
    sync_refused: Option<SyncRefused>,
    generation: u64,
    state: LinkState,
    last_io: Option<Instant>,
    down_since: Option<Instant>,
    read_offset: u64,
    /// The primary's history and the last byte of it executed here (the next PSYNC).
    history: Option<(ReplId, u64)>,
}

/// What `follow` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FollowOutcome {
    /// A new generation: start its link thread.
    Started(u64),
    /// Already following that primary (Redis: "+OK Already connected to specified master").
    AlreadyFollowing,
}

#[derive(Default)]
pub struct ReplicaOf {
    /// Set while a primary is followed: normal clients' writes are refused. One relaxed load
    /// on the write path.
    active: AtomicBool,
    /// The current link is streaming ([`LinkState::Connected`]): a copy of `following`'s
    /// state for the dispatcher's `replica-serve-stale-data` check, which takes no lock.
    link_up: AtomicBool,
    generation: AtomicU64,
    following: Mutex<Option<Following>>,
    /// Held by a link thread while it executes a batch of the stream, and taken by `follow`
    /// and `stop` before they change the generation: once they return, no command of the
    /// old link runs any more (a promoted node's own writes never interleave with its old
    /// primary's). Lock order: this gate, then `following`.
    apply_gate: Mutex<()>,
    /// A full sync's snapshot is being loaded: clients get `-LOADING` (the dataset is
    /// half-replaced).
    loading: AtomicBool,
}

impl ReplicaOf {
    #[inline]
    pub fn is_replica(&self) -> bool {
        self.active.load(Relaxed)
    }

    /// Follows `host:port`; a different primary than before ends the older link.
    pub fn follow(&self, host: &str, port: u16) -> FollowOutcome {
        self.follow_node(host, port, None)
    }

    /// Follows `host:port`, the cluster node `node`; a different primary than before (by
    /// address or id) ends the older link.
    pub fn follow_node(&self, host: &str, port: u16, node: Option<NodeId>) -> FollowOutcome {
        let _gate = self.apply_gate.lock();
        let mut f = self.following.lock();
        if let Some(cur) = f.as_ref() {
            if cur.host.eq_ignore_ascii_case(host) && cur.port == port && cur.node == node {
                return FollowOutcome::AlreadyFollowing;
            }
        }
        let generation = self.generation.fetch_add(1, Relaxed) + 1;
        // A new primary's history is not ours: the next PSYNC asks for a full sync.
        *f = Some(Following {
            host: host.to_string(),
            port,
            node,
            sync_refused: None,
            generation,
            state: LinkState::Connect,
            last_io: None,
            down_since: Some(Instant::now()),
            read_offset: 0,
            history: None,
        });
        self.link_up.store(false, Relaxed);
        self.active.store(true, Relaxed);
        FollowOutcome::Started(generation)
    }

    /// `REPLICAOF NO ONE`: stops following; returns whether a primary was followed.
    pub fn stop(&self) -> bool {
        let _gate = self.apply_gate.lock();
        let mut f = self.following.lock();
        self.generation.fetch_add(1, Relaxed);
        self.active.store(false, Relaxed);
        self.link_up.store(false, Relaxed);
        f.take().is_some()
    }

    /// Whether this node follows a primary whose link is not streaming (connecting,
    /// syncing, or lost): what `replica-serve-stale-data no` refuses commands for.
    #[inline]
    pub fn is_stale(&self) -> bool {
        self.active.load(Relaxed) && !self.link_up.load(Relaxed)
    }

    /// Whether a full sync's snapshot is being loaded now.
    #[inline]
    pub fn is_loading(&self) -> bool {
        self.loading.load(Relaxed)
    }

    pub fn set_loading(&self, loading: bool) {
        self.loading.store(loading, Relaxed);
    }

    /// For a link thread about to execute stream bytes: holds off `follow` and `stop` until
    /// the returned guard drops. Check [`ReplicaOf::is_current`] after taking it.
    pub fn apply_gate(&self) -> parking_lot::MutexGuard<'_, ()> {
        self.apply_gate.lock()
    }

    /// The primary followed now, if any.
    pub fn current_target(&self) -> Option<(String, u16)> {
        self.following
            .lock()
            .as_ref()
            .map(|f| (f.host.clone(), f.port))
    }

    /// The cluster node id of the primary followed now, if known.
    pub fn current_node(&self) -> Option<NodeId> {
        self.following.lock().as_ref().and_then(|f| f.node)
    }

    /// The primary node of `generation`, if it is current and in a cluster.
    pub fn node(&self, generation: u64) -> Option<NodeId> {
        let f = self.following.lock();
        f.as_ref()
            .filter(|f| f.generation == generation)
            .and_then(|f| f.node)
    }

    /// Records why `generation`'s last full sync was refused (None: a link was set up).
    pub fn set_sync_refused(&self, generation: u64, reason: Option<SyncRefused>) {
        self.with_current(generation, |f| f.sync_refused = reason);
    }

    /// Whether `generation` is still the one in force (link threads check before each step).
    pub fn is_current(&self, generation: u64) -> bool {
        self.generation.load(Relaxed) == generation
    }

    /// The primary of `generation`, if it is current.
    pub fn target(&self, generation: u64) -> Option<(String, u16)> {
        let f = self.following.lock();
        f.as_ref()
            .filter(|f| f.generation == generation)
            .map(|f| (f.host.clone(), f.port))
    }

    fn with_current(&self, generation: u64, change: impl FnOnce(&mut Following)) {
        let mut f = self.following.lock();
        if let Some(f) = f.as_mut().filter(|f| f.generation == generation) {
            change(f);
        }
    }

    /// Whether `generation`'s link is streaming (set up and, after a full sync, loaded).
    pub fn is_connected(&self, generation: u64) -> bool {
        let mut up = false;
        self.with_current(generation, |f| up = f.state == LinkState::Connected);
        up
    }

    pub fn set_state(&self, generation: u64, state: LinkState) {
        self.with_current(generation, |f| {
            let was_up = f.state == LinkState::Connected;
            f.state = state;
            self.link_up.store(state == LinkState::Connected, Relaxed);
            match (was_up, state == LinkState::Connected) {
                (false, true) => f.down_since = None,
                (true, false) => f.down_since = Some(Instant::now()),
                _ => {}
            }
        });
    }

    /// The link read up to `read` and executed up to `applied` of the primary's `replid`.
    pub fn set_offsets(&self, generation: u64, replid: ReplId, read: u64, applied: u64) {
        self.with_current(generation, |f| {
            f.read_offset = read;
            f.history = Some((replid, applied));
        });
    }

    /// The primary was heard from (a ring record, a ping, the link's setup): INFO's
    /// `master_last_io_seconds_ago` counts from here.
    pub fn note_io(&self, generation: u64, at: Instant) {
        self.with_current(generation, |f| f.last_io = Some(at));
    }

    /// What the next PSYNC names: the primary's history and the last byte executed.
    pub fn history(&self, generation: u64) -> Option<(ReplId, u64)> {
        let f = self.following.lock();
        f.as_ref()
            .filter(|f| f.generation == generation)
            .and_then(|f| f.history)
    }

    /// The link as INFO and ROLE show it; `None` on a primary.
    pub fn primary_link(&self) -> Option<PrimaryLink> {
        let f = self.following.lock();
        f.as_ref().map(|f| PrimaryLink {
            host: f.host.clone(),
            port: f.port,
            state: f.state,
            last_io_secs: f.last_io.map(|t| t.elapsed().as_secs()),
            down_since_secs: f.down_since.map(|t| t.elapsed().as_secs()),
            read_offset: f.read_offset,
            processed_offset: f.history.map(|(_, o)| o),
            priority: 100,
            read_only: true,
            sync_refused: f.sync_refused.map(|r| r.to_string()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generations_end_older_links_and_the_same_primary_is_kept() {
        let r = ReplicaOf::default();
        assert!(!r.is_replica());
        let FollowOutcome::Started(g1) = r.follow("10.0.0.1", 7000) else {
            panic!("first follow must start");
        };
        assert!(r.is_replica() && r.is_current(g1));
        assert_eq!(r.follow("10.0.0.1", 7000), FollowOutcome::AlreadyFollowing);
        let FollowOutcome::Started(g2) = r.follow("10.0.0.1", 7001) else {
            panic!("a new primary must start a new link");
        };
        assert!(!r.is_current(g1) && r.is_current(g2));
        let id = ReplId::parse(&[b'a'; 40]).unwrap();
        r.set_offsets(g1, id, 5, 5);
        assert_eq!(r.history(g2), None, "a stale link changed the state");
        r.set_offsets(g2, id, 9, 7);
        r.set_state(g2, LinkState::Connected);
        let link = r.primary_link().unwrap();
        assert_eq!((link.read_offset, link.processed_offset), (9, Some(7)));
        assert!(r.stop());
        assert!(!r.is_replica() && !r.is_current(g2));
        assert!(r.primary_link().is_none());
    }
}
