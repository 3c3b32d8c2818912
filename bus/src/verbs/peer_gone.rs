//! Whether a connection's peer is gone, shared between the connection and the thread that
//! reads its rdma_cm events (the listener's, for an accepted connection).
//!
//! Why a doorbell: a disconnect completes nothing on the connection's CQ until the connection
//! moves its QP to the error state, and only the connection's own poller does that (at its
//! next look). A poller blocked on the CQ's channel would notice the peer gone only at its
//! wait's bound (100 ms); the thread that reads the event rings the poller's doorbell instead.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::idle::Doorbell;

#[derive(Default)]
pub(crate) struct PeerGone {
    gone: AtomicBool,
    /// The doorbell of the thread that polls the connection, once it has one.
    bell: Mutex<Option<Arc<Doorbell>>>,
}

impl PeerGone {
    /// The peer is gone: its connection's poller is woken to flush the QP.
    pub(crate) fn mark(&self) {
        self.gone.store(true, Ordering::Release);
        if let Some(bell) = &*self.bell.lock() {
            bell.ring();
        }
    }

    pub(crate) fn is_gone(&self) -> bool {
        self.gone.load(Ordering::Acquire)
    }

    /// A mark after this rings `bell`; one before it is seen by the poller's next look
    /// (`arm_idle_wait` looks before it arms).
    pub(crate) fn attach_bell(&self, bell: Arc<Doorbell>) {
        *self.bell.lock() = Some(bell);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mark_rings_the_attached_bell_and_is_seen() {
        let gone = PeerGone::default();
        assert!(!gone.is_gone());
        let bell = Arc::new(Doorbell::new().unwrap());
        gone.attach_bell(bell.clone());
        gone.mark();
        assert!(gone.is_gone());
        assert!(bell.drain(), "the poller's bell rang");
    }
}
