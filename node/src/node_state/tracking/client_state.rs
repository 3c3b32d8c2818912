//! One client's CLIENT TRACKING settings: the part other connections read when they deliver
//! its invalidations or list it ([`SharedTracking`], atomics in its `ClientShared`), and the
//! part only its own connection touches ([`LocalTracking`], in its `Client`).

use crate::db::Key;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering::Relaxed};

/// Tracking is on.
pub const ON: u8 = 1 << 0;
/// BCAST: invalidations for every key under its prefixes, not only for keys it read.
pub const BCAST: u8 = 1 << 1;
/// OPTIN: keys are remembered only for a command after CLIENT CACHING yes.
pub const OPTIN: u8 = 1 << 2;
/// OPTOUT: keys are remembered except for a command after CLIENT CACHING no.
pub const OPTOUT: u8 = 1 << 3;
/// NOLOOP: no invalidations for changes the client made itself.
pub const NOLOOP: u8 = 1 << 4;
/// The redirect client was gone when an invalidation was due (Redis's `broken_redirect`).
pub const BROKEN_REDIRECT: u8 = 1 << 5;

#[derive(Default)]
pub struct SharedTracking {
    flags: AtomicU8,
    /// The client invalidations go to (REDIRECT), 0 for the client itself.
    redirect: AtomicU64,
}

impl SharedTracking {
    pub fn flags(&self) -> u8 {
        self.flags.load(Relaxed)
    }

    pub fn has(&self, flag: u8) -> bool {
        self.flags() & flag != 0
    }

    pub fn is_on(&self) -> bool {
        self.has(ON)
    }

    pub fn redirect(&self) -> u64 {
        self.redirect.load(Relaxed)
    }

    /// Turns tracking on with exactly these options (a broken redirect is forgotten).
    pub fn set(&self, options: u8, redirect: u64) {
        self.redirect.store(redirect, Relaxed);
        self.flags
            .store(ON | (options & !(ON | BROKEN_REDIRECT)), Relaxed);
    }

    pub fn clear(&self) {
        self.flags.store(0, Relaxed);
        self.redirect.store(0, Relaxed);
    }

    pub fn note_broken_redirect(&self) {
        self.flags.fetch_or(BROKEN_REDIRECT, Relaxed);
    }

    /// CLIENT GETREDIR and CLIENT LIST `redir`: the redirect id while on, else -1.
    pub fn redirect_shown(&self) -> i64 {
        if self.is_on() {
            self.redirect() as i64
        } else {
            -1
        }
    }
}

/// What only the client's own connection reads.
#[derive(Default)]
pub struct LocalTracking {
    /// CLIENT CACHING yes|no applies to the next command (or the next transaction).
    pub caching: bool,
    /// Its BCAST prefixes (the empty prefix when BCAST named none).
    pub prefixes: Vec<Key>,
    /// Bytes of queued pushes the dispatcher moved into the output ahead of the running
    /// command's reply (kept when CLIENT REPLY drops the reply).
    pub pushed_ahead: usize,
    /// While a script of this client runs (and the client remembers reads): the keys it
    /// declared. A read command inside it remembers these, not its own keys, as Redis
    /// tracks a script's caller by the script's keys.
    pub script_keys: Vec<Key>,
}

impl LocalTracking {
    /// Whether the keys a read command names are remembered for this client, given its
    /// flags: OPTIN needs CACHING yes, OPTOUT is off after CACHING no.
    pub fn remembers(&self, flags: u8) -> bool {
        if flags & ON == 0 || flags & BCAST != 0 {
            return false;
        }
        !((flags & OPTIN != 0 && !self.caching) || (flags & OPTOUT != 0 && self.caching))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn optin_and_optout_follow_client_caching() {
        let mut local = LocalTracking::default();
        assert!(!local.remembers(0));
        assert!(local.remembers(ON));
        assert!(!local.remembers(ON | BCAST), "BCAST keeps no table");
        assert!(!local.remembers(ON | OPTIN));
        assert!(local.remembers(ON | OPTOUT));
        local.caching = true;
        assert!(local.remembers(ON | OPTIN));
        assert!(!local.remembers(ON | OPTOUT));
    }

    #[test]
    fn turning_on_again_forgets_a_broken_redirect() {
        let s = SharedTracking::default();
        assert_eq!(s.redirect_shown(), -1);
        s.set(NOLOOP, 9);
        s.note_broken_redirect();
        assert!(s.has(BROKEN_REDIRECT) && s.has(NOLOOP));
        assert_eq!(s.redirect_shown(), 9);
        s.set(0, 0);
        assert_eq!(s.flags(), ON);
        s.clear();
        assert_eq!((s.flags(), s.redirect_shown()), (0, -1));
    }
}
