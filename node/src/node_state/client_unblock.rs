//! CLIENT UNBLOCK's handshake with a blocked client's connection.
//!
//! The blocked client's connection runs on its own thread or task; CLIENT UNBLOCK only
//! leaves a request in the client's slot and wakes it. The slot's lock is held while the
//! connection looks again at its keys, so CLIENT UNBLOCK answers 1 exactly when the client
//! was still waiting, and then the client answers as the request says, never with data too.

use parking_lot::{Mutex, MutexGuard};

/// How CLIENT UNBLOCK ends a wait.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnblockHow {
    /// As if the timeout passed (the command's timeout reply).
    Timeout,
    /// With `-UNBLOCKED client unblocked via CLIENT UNBLOCK`.
    Error,
}

/// Redis's error for CLIENT UNBLOCK ... ERROR.
pub const UNBLOCKED_ERROR: &str = "UNBLOCKED client unblocked via CLIENT UNBLOCK";

#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
enum State {
    /// Not in a wait CLIENT UNBLOCK may end (running, or waiting for something else: a
    /// pause, a synchronous write's acknowledgements, a topology change).
    #[default]
    Idle,
    /// Blocked on keys or WAIT.
    Blocked,
    Requested(UnblockHow),
}

#[derive(Default)]
pub struct UnblockSlot(Mutex<State>);

impl UnblockSlot {
    /// The client starts a wait that CLIENT UNBLOCK may end.
    pub fn enter(&self) {
        *self.0.lock() = State::Blocked;
    }

    /// CLIENT UNBLOCK: true if the client was waiting (it must then be woken).
    pub fn request(&self, how: UnblockHow) -> bool {
        let mut state = self.0.lock();
        if *state != State::Blocked {
            return false;
        }
        *state = State::Requested(how);
        true
    }

    /// Holds the slot while the connection decides how the wait goes on.
    pub fn hold(&self) -> HeldSlot<'_> {
        HeldSlot(self.0.lock())
    }

    /// The wait is over, however it ended.
    pub fn leave(&self) {
        *self.0.lock() = State::Idle;
    }
}

pub struct HeldSlot<'a>(MutexGuard<'a, State>);

impl HeldSlot<'_> {
    /// The request CLIENT UNBLOCK left, if any; the wait is over either way once answered.
    pub fn requested(&self) -> Option<UnblockHow> {
        match *self.0 {
            State::Requested(how) => Some(how),
            _ => None,
        }
    }

    /// The client was served (or answered): CLIENT UNBLOCK finds nothing to end.
    pub fn leave(mut self) {
        *self.0 = State::Idle;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_waiting_client_takes_a_request() {
        let slot = UnblockSlot::default();
        assert!(!slot.request(UnblockHow::Timeout), "not waiting");
        slot.enter();
        assert_eq!(slot.hold().requested(), None);
        assert!(slot.request(UnblockHow::Error));
        assert!(!slot.request(UnblockHow::Timeout), "already asked");
        let held = slot.hold();
        assert_eq!(held.requested(), Some(UnblockHow::Error));
        held.leave();
        assert!(!slot.request(UnblockHow::Timeout), "answered");
    }
}
