//! A key as the keyspace's tables store it, with its access stamps ([`Access`]): up to
//! [`INLINE_MAX`] bytes inside the table's record itself, longer ones on the heap.
//!
//! Most keys are short (`user:1234`, `key:000000123456`). Kept inline they cost no allocation
//! of their own (16 bytes of a size class for a 10-byte key, plus the allocator's bookkeeping)
//! and a lookup compares them where it already reads the entry, instead of following a
//! pointer to another cache line (perf, a million keys: the key comparison's miss was the
//! second largest stall of a pipelined GET).

use std::borrow::Borrow;
use std::hash::{Hash, Hasher};

/// Longest key kept inline: what is left of the heap form's 24 bytes (the enum's tag, a
/// boxed slice and the access stamps) after the tag, the length and the stamps.
pub const INLINE_MAX: usize = 16;

/// How a key was last used: what LRU/LFU eviction, OBJECT IDLETIME/FREQ and OBJECT ENCODING
/// read. Kept with the key rather than the entry because the key's 24 bytes had room for
/// them (the inline form's spare bytes, the heap form's padding), which takes the entry from
/// 40 bytes to 32 (8 bytes a key; `scripts/memory-per-key.sh`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Access {
    /// Last access, in seconds of the node's LRU clock.
    pub lru: u32,
    /// Access-frequency counter under an LFU policy (see [`super::frequency`]).
    pub freq: u8,
    /// The string was edited in place (SETRANGE, APPEND, SETBIT...): Redis keeps such
    /// strings in its `raw` encoding whatever their size, and OBJECT ENCODING says so.
    pub edited_in_place: bool,
}

impl Access {
    /// A key just written at `lru`.
    pub fn fresh(lru: u32) -> Self {
        Access {
            lru,
            freq: super::frequency::LFU_INIT_VAL,
            edited_in_place: false,
        }
    }
}

/// The stamps are flat fields of each form (not an [`Access`] inside it) so that the
/// compiler can place them in the bytes the forms leave free: both stay 24 bytes.
#[derive(Clone)]
pub enum StoredKey {
    Inline {
        len: u8,
        freq: u8,
        edited_in_place: bool,
        lru: u32,
        bytes: [u8; INLINE_MAX],
    },
    Heap {
        freq: u8,
        edited_in_place: bool,
        lru: u32,
        bytes: Box<[u8]>,
    },
}

const _: () = assert!(std::mem::size_of::<StoredKey>() == 24);

impl StoredKey {
    pub fn new(key: &[u8], access: Access) -> Self {
        let Access {
            lru,
            freq,
            edited_in_place,
        } = access;
        if key.len() <= INLINE_MAX {
            let mut bytes = [0u8; INLINE_MAX];
            bytes[..key.len()].copy_from_slice(key);
            StoredKey::Inline {
                len: key.len() as u8,
                freq,
                edited_in_place,
                lru,
                bytes,
            }
        } else {
            StoredKey::Heap {
                freq,
                edited_in_place,
                lru,
                bytes: key.into(),
            }
        }
    }

    #[inline]
    pub fn as_bytes(&self) -> &[u8] {
        match self {
            StoredKey::Inline { len, bytes, .. } => &bytes[..*len as usize],
            StoredKey::Heap { bytes, .. } => bytes,
        }
    }

    /// The key as the rest of the node passes keys around.
    pub fn to_key(&self) -> super::Key {
        self.as_bytes().into()
    }

    #[inline]
    pub fn access(&self) -> Access {
        match *self {
            StoredKey::Inline {
                lru,
                freq,
                edited_in_place,
                ..
            }
            | StoredKey::Heap {
                lru,
                freq,
                edited_in_place,
                ..
            } => Access {
                lru,
                freq,
                edited_in_place,
            },
        }
    }

    #[inline]
    pub fn set_access(&mut self, access: Access) {
        match self {
            StoredKey::Inline {
                lru,
                freq,
                edited_in_place,
                ..
            }
            | StoredKey::Heap {
                lru,
                freq,
                edited_in_place,
                ..
            } => {
                *lru = access.lru;
                *freq = access.freq;
                *edited_in_place = access.edited_in_place;
            }
        }
    }
}

impl std::ops::Deref for StoredKey {
    type Target = [u8];

    #[inline]
    fn deref(&self) -> &[u8] {
        self.as_bytes()
    }
}

impl AsRef<[u8]> for StoredKey {
    fn as_ref(&self) -> &[u8] {
        self.as_bytes()
    }
}

/// Lookups by `&[u8]` need the same hash and equality as the stored form: both are the
/// bytes', whichever form holds them.
impl Borrow<[u8]> for StoredKey {
    #[inline]
    fn borrow(&self) -> &[u8] {
        self.as_bytes()
    }
}

impl Hash for StoredKey {
    #[inline]
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_bytes().hash(state)
    }
}

impl PartialEq for StoredKey {
    #[inline]
    fn eq(&self, other: &Self) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl Eq for StoredKey {}

impl std::fmt::Debug for StoredKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", String::from_utf8_lossy(self.as_bytes()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_forms_hold_the_exact_bytes_and_hash_like_them() {
        let hasher = ahash::RandomState::new();
        let long = vec![b'k'; INLINE_MAX + 1];
        let at_limit = vec![b'x'; INLINE_MAX];
        for key in [
            &b""[..],
            b"a",
            b"key:000000123456",
            &at_limit,
            &long,
            b"a\0b",
        ] {
            let stored = StoredKey::new(key, Access::fresh(7));
            assert_eq!(stored.access(), Access::fresh(7));
            assert_eq!(stored.as_bytes(), key);
            assert_eq!(
                matches!(stored, StoredKey::Inline { .. }),
                key.len() <= INLINE_MAX
            );
            assert_eq!(hasher.hash_one(&stored), hasher.hash_one(key));
        }
    }

    #[test]
    fn access_stamps_change_without_touching_the_key() {
        for key in [&b"short"[..], &[b'k'; INLINE_MAX + 5]] {
            let mut stored = StoredKey::new(key, Access::fresh(1));
            let stamps = Access {
                lru: u32::MAX,
                freq: 200,
                edited_in_place: true,
            };
            stored.set_access(stamps);
            assert_eq!(stored.access(), stamps);
            assert_eq!(stored.as_bytes(), key);
        }
    }

    #[test]
    fn keys_differing_only_in_trailing_zero_bytes_are_different() {
        // The inline form pads with zeros; the length keeps "a" and "a\0" apart.
        let new = |k: &[u8]| StoredKey::new(k, Access::fresh(0));
        assert_ne!(new(b"a"), new(b"a\0"));
        assert_ne!(new(b""), new(b"\0"));
    }
}
