//! A key as the keyspace's tables store it: up to [`INLINE_MAX`] bytes inside the table's
//! entry itself, longer ones on the heap.
//!
//! Most keys are short (`user:1234`, `key:000000123456`). Kept inline they cost no allocation
//! of their own (16 bytes of a size class for a 10-byte key, plus the allocator's bookkeeping)
//! and a lookup compares them where it already reads the entry, instead of following a
//! pointer to another cache line (perf, a million keys: the key comparison's miss was the
//! second largest stall of a pipelined GET).

use std::borrow::Borrow;
use std::hash::{Hash, Hasher};

/// Longest key kept inline: the size of the heap form (a boxed slice), less the length byte
/// and the enum's tag, so that both forms take the same 24 bytes.
pub const INLINE_MAX: usize = 22;

#[derive(Clone)]
pub enum StoredKey {
    Inline { len: u8, bytes: [u8; INLINE_MAX] },
    Heap(Box<[u8]>),
}

const _: () = assert!(std::mem::size_of::<StoredKey>() == 24);

impl StoredKey {
    pub fn new(key: &[u8]) -> Self {
        if key.len() <= INLINE_MAX {
            let mut bytes = [0u8; INLINE_MAX];
            bytes[..key.len()].copy_from_slice(key);
            StoredKey::Inline {
                len: key.len() as u8,
                bytes,
            }
        } else {
            StoredKey::Heap(key.into())
        }
    }

    #[inline]
    pub fn as_bytes(&self) -> &[u8] {
        match self {
            StoredKey::Inline { len, bytes } => &bytes[..*len as usize],
            StoredKey::Heap(b) => b,
        }
    }

    /// The key as the rest of the node passes keys around.
    pub fn to_key(&self) -> super::Key {
        self.as_bytes().into()
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

impl From<&[u8]> for StoredKey {
    fn from(key: &[u8]) -> Self {
        StoredKey::new(key)
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
            let stored = StoredKey::new(key);
            assert_eq!(stored.as_bytes(), key);
            assert_eq!(
                matches!(stored, StoredKey::Inline { .. }),
                key.len() <= INLINE_MAX
            );
            assert_eq!(hasher.hash_one(&stored), hasher.hash_one(key));
        }
    }

    #[test]
    fn keys_differing_only_in_trailing_zero_bytes_are_different() {
        // The inline form pads with zeros; the length keeps "a" and "a\0" apart.
        assert_ne!(StoredKey::new(b"a"), StoredKey::new(b"a\0"));
        assert_ne!(StoredKey::new(b""), StoredKey::new(b"\0"));
    }
}
