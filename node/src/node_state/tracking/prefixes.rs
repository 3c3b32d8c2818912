//! The prefixes of BCAST-mode CLIENT TRACKING: which clients hear about changes to keys
//! starting with which prefix (the empty prefix: every key). A changed key is matched by
//! looking up its own leading bytes at each distinct prefix length in use, so the cost of a
//! write is a few map lookups however many clients and prefixes there are.

use crate::db::Key;
use smallvec::SmallVec;
use std::collections::BTreeMap;

/// Most prefixes one client may register: each is a lookup on every write while BCAST
/// clients exist, and memory the client makes the node hold (Redis has no limit).
pub const MAX_PREFIXES_PER_CLIENT: usize = 1000;

/// Clients registered on one prefix, sorted by id.
pub type Listeners = SmallVec<[u64; 2]>;

#[derive(Default)]
pub struct PrefixTable {
    by_prefix: BTreeMap<Key, Listeners>,
    /// Distinct prefix lengths in use, with how many prefixes have each.
    lengths: BTreeMap<usize, usize>,
}

impl PrefixTable {
    pub fn add(&mut self, prefix: &[u8], client: u64) {
        let listeners = match self.by_prefix.get_mut(prefix) {
            Some(l) => l,
            None => {
                *self.lengths.entry(prefix.len()).or_default() += 1;
                self.by_prefix.entry(prefix.into()).or_default()
            }
        };
        if let Err(at) = listeners.binary_search(&client) {
            listeners.insert(at, client);
        }
    }

    pub fn remove(&mut self, prefix: &[u8], client: u64) {
        let Some(listeners) = self.by_prefix.get_mut(prefix) else {
            return;
        };
        if let Ok(at) = listeners.binary_search(&client) {
            listeners.remove(at);
        }
        if listeners.is_empty() {
            self.by_prefix.remove(prefix);
            if let Some(n) = self.lengths.get_mut(&prefix.len()) {
                *n -= 1;
                if *n == 0 {
                    self.lengths.remove(&prefix.len());
                }
            }
        }
    }

    /// Distinct prefixes registered (INFO `tracking_total_prefixes`).
    pub fn count(&self) -> usize {
        self.by_prefix.len()
    }

    /// Calls `found` with each registered prefix `key` starts with, and its listeners.
    pub fn each_match(&self, key: &[u8], mut found: impl FnMut(&Key, &Listeners)) {
        for &len in self.lengths.keys() {
            if len > key.len() {
                break;
            }
            if let Some((prefix, listeners)) = self.by_prefix.get_key_value(&key[..len]) {
                found(prefix, listeners);
            }
        }
    }
}

/// Why a client's new prefixes were refused: one overlaps (is a prefix of, or starts with)
/// another of the same client's, which would send it each change twice.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PrefixError {
    #[error("ERR Prefix '{new}' overlaps with an existing prefix '{existing}'. Prefixes for a single client must not overlap.")]
    OverlapsExisting { new: String, existing: String },
    #[error("ERR Prefix '{new}' overlaps with another provided prefix '{other}'. Prefixes for a single client must not overlap.")]
    OverlapsProvided { new: String, other: String },
    #[error("ERR too many tracking prefixes for one client (at most {MAX_PREFIXES_PER_CLIENT})")]
    TooMany,
}

fn overlap(a: &[u8], b: &[u8]) -> bool {
    let n = a.len().min(b.len());
    a[..n] == b[..n]
}

/// Checks the prefixes a client asks for against the ones it has and against each other,
/// in Redis's order (each new prefix: first the existing ones, then the later new ones).
pub fn check_new(existing: &[Key], new: &[&[u8]]) -> Result<(), PrefixError> {
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    for (i, p) in new.iter().enumerate() {
        if let Some(e) = existing.iter().find(|e| overlap(e, p)) {
            return Err(PrefixError::OverlapsExisting {
                new: text(p),
                existing: text(e),
            });
        }
        if let Some(o) = new[i + 1..].iter().find(|o| overlap(o, p)) {
            return Err(PrefixError::OverlapsProvided {
                new: text(p),
                other: text(o),
            });
        }
    }
    // The empty prefix stands in when none is given.
    if existing.len() + new.len().max(1) > MAX_PREFIXES_PER_CLIENT {
        return Err(PrefixError::TooMany);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matches(t: &PrefixTable, key: &[u8]) -> Vec<(Vec<u8>, Vec<u64>)> {
        let mut out = Vec::new();
        t.each_match(key, |p, l| out.push((p.to_vec(), l.to_vec())));
        out
    }

    #[test]
    fn a_key_matches_every_prefix_it_starts_with() {
        let mut t = PrefixTable::default();
        t.add(b"", 1);
        t.add(b"user:", 2);
        t.add(b"user:", 3);
        t.add(b"user:1", 4);
        t.add(b"order:", 5);
        assert_eq!(t.count(), 4);
        assert_eq!(
            matches(&t, b"user:17"),
            vec![
                (b"".to_vec(), vec![1]),
                (b"user:".to_vec(), vec![2, 3]),
                (b"user:1".to_vec(), vec![4]),
            ]
        );
        assert_eq!(matches(&t, b"us"), vec![(b"".to_vec(), vec![1])]);
        t.remove(b"user:", 2);
        t.remove(b"user:", 3);
        t.remove(b"", 1);
        assert_eq!(t.count(), 2);
        assert_eq!(matches(&t, b"user:17"), vec![(b"user:1".to_vec(), vec![4])]);
        assert_eq!(matches(&t, b"x"), vec![]);
    }

    #[test]
    fn overlapping_prefixes_are_refused_with_redis_words() {
        let e = |s: &str| -> Key { s.as_bytes().into() };
        assert_eq!(
            check_new(&[], &[b"FOOBAR", b"FOO"]).unwrap_err().to_string(),
            "ERR Prefix 'FOOBAR' overlaps with another provided prefix 'FOO'. Prefixes for a single client must not overlap."
        );
        assert_eq!(
            check_new(&[e("FOO"), e("BAR")], &[b"FO"])
                .unwrap_err()
                .to_string(),
            "ERR Prefix 'FO' overlaps with an existing prefix 'FOO'. Prefixes for a single client must not overlap."
        );
        assert!(check_new(&[e("FOO")], &[b"BAR", b"BAZ"]).is_ok());
        assert!(
            check_new(&[e("")], &[b"a"]).is_err(),
            "the empty prefix covers all"
        );
        let many: Vec<Key> = (0..MAX_PREFIXES_PER_CLIENT)
            .map(|i| format!("p{i}:").into_bytes().into())
            .collect();
        assert_eq!(check_new(&many, &[b"q"]), Err(PrefixError::TooMany));
    }
}
