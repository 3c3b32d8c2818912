//! A hash value: packed while small (fields and values alternate in one [`Packed`]), a table
//! once a write takes it past `hash-max-listpack-entries` fields or puts a field or value
//! longer than `hash-max-listpack-value` in it. Like Redis, a table is never packed again when
//! it shrinks, so OBJECT ENCODING answers what the value is (`listpack` or `hashtable`).
//!
//! Packed, 1,000,000 hashes of 10 short fields take a quarter of the table form's memory
//! (BENCHMARKS.md "Memory per key"); lookups walk at most the threshold's 128 fields.

use super::packed::{Items, PackLimits, Packed};
use super::value::Hasher;

/// The table form: fields in insertion order (removal swaps the last one in).
pub type HashTable = indexmap::IndexMap<Box<[u8]>, Box<[u8]>, Hasher>;

const _: () = assert!(std::mem::size_of::<HashValue>() <= 32);

#[derive(Clone, Debug)]
pub enum HashValue {
    Packed(Packed),
    /// Boxed so that the enum is a packed list's size: most hashes are small.
    Table(Box<HashTable>),
}

impl Default for HashValue {
    fn default() -> Self {
        HashValue::Packed(Packed::default())
    }
}

/// Field/value pairs of a [`HashValue`], in its order.
pub enum Pairs<'a> {
    Packed(Items<'a>),
    Table(indexmap::map::Iter<'a, Box<[u8]>, Box<[u8]>>),
}

impl<'a> Iterator for Pairs<'a> {
    type Item = (&'a [u8], &'a [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        match self {
            Pairs::Packed(items) => Some((items.next()?, items.next()?)),
            Pairs::Table(it) => it.next().map(|(f, v)| (&**f, &**v)),
        }
    }
}

impl HashValue {
    pub fn len(&self) -> usize {
        match self {
            HashValue::Packed(p) => p.len() / 2,
            HashValue::Table(t) => t.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether the value is in its packed form (OBJECT ENCODING `listpack`).
    pub fn is_packed(&self) -> bool {
        matches!(self, HashValue::Packed(_))
    }

    pub fn get(&self, field: &[u8]) -> Option<&[u8]> {
        match self {
            HashValue::Packed(p) => p.position(field, 2).and_then(|i| p.get(i + 1)),
            HashValue::Table(t) => t.get(field).map(|v| &**v),
        }
    }

    pub fn contains_key(&self, field: &[u8]) -> bool {
        match self {
            HashValue::Packed(p) => p.position(field, 2).is_some(),
            HashValue::Table(t) => t.contains_key(field),
        }
    }

    /// Sets `field` to `value`; true when the field is new. A packed value that would break
    /// `limits` becomes a table first.
    pub fn insert(&mut self, field: &[u8], value: &[u8], limits: PackLimits) -> bool {
        if let HashValue::Packed(p) = self {
            let at = p.position(field, 2);
            let grows = at.is_none() && p.len() / 2 >= limits.entries;
            if !grows && limits.fits(field) && limits.fits(value) {
                match at {
                    Some(i) => p.replace(i + 1, value),
                    None => {
                        p.push(field);
                        p.push(value);
                    }
                }
                return at.is_none();
            }
            self.make_table();
        }
        let HashValue::Table(t) = self else {
            unreachable!("made a table above");
        };
        // One lookup, as the table form always took.
        t.insert(field.into(), value.into()).is_none()
    }

    /// Removes `field`; true when it was there.
    pub fn remove(&mut self, field: &[u8]) -> bool {
        match self {
            HashValue::Packed(p) => match p.position(field, 2) {
                Some(i) => {
                    p.remove(i, 2);
                    true
                }
                None => false,
            },
            HashValue::Table(t) => t.swap_remove(field).is_some(),
        }
    }

    pub fn iter(&self) -> Pairs<'_> {
        match self {
            HashValue::Packed(p) => Pairs::Packed(p.iter()),
            HashValue::Table(t) => Pairs::Table(t.iter()),
        }
    }

    pub fn keys(&self) -> impl Iterator<Item = &[u8]> + '_ {
        self.iter().map(|(f, _)| f)
    }

    pub fn values(&self) -> impl Iterator<Item = &[u8]> + '_ {
        self.iter().map(|(_, v)| v)
    }

    /// The pair at position `i` (packed: a walk of `i` pairs).
    pub fn get_index(&self, i: usize) -> Option<(&[u8], &[u8])> {
        match self {
            HashValue::Packed(_) => self.iter().nth(i),
            HashValue::Table(t) => t.get_index(i).map(|(f, v)| (&**f, &**v)),
        }
    }

    /// Heap bytes beyond the pairs' own bytes for a table (slots, hashes, boxes), or the
    /// whole packed allocation (MEMORY USAGE; see `footprint.rs`).
    pub fn table(&self) -> Option<&HashTable> {
        match self {
            HashValue::Packed(_) => None,
            HashValue::Table(t) => Some(t),
        }
    }

    /// The packed allocation's size, when packed.
    pub fn packed_bytes(&self) -> Option<usize> {
        match self {
            HashValue::Packed(p) => Some(p.heap_bytes()),
            HashValue::Table(_) => None,
        }
    }

    fn make_table(&mut self) {
        if let HashValue::Packed(p) = self {
            let mut t = HashTable::with_capacity_and_hasher(p.len() / 2 + 1, Hasher::default());
            let mut items = p.iter();
            while let (Some(f), Some(v)) = (items.next(), items.next()) {
                t.insert(f.into(), v.into());
            }
            *self = HashValue::Table(Box::new(t));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::packed::ITEM_MAX;
    use super::*;

    const SMALL: PackLimits = PackLimits {
        entries: 3,
        value: 8,
    };

    fn pairs(h: &HashValue) -> Vec<(Vec<u8>, Vec<u8>)> {
        h.iter().map(|(f, v)| (f.to_vec(), v.to_vec())).collect()
    }

    #[test]
    fn stays_packed_within_the_limits_and_reads_like_a_table() {
        let mut h = HashValue::default();
        assert!(h.insert(b"a", b"1", SMALL));
        assert!(h.insert(b"b", b"2", SMALL));
        assert!(!h.insert(b"a", b"one", SMALL));
        assert!(h.is_packed());
        assert_eq!(h.len(), 2);
        assert_eq!(h.get(b"a"), Some(&b"one"[..]));
        // A value equal to a field name is not found as a field.
        assert!(h.insert(b"c", b"a", SMALL));
        assert!(!h.contains_key(b"one"));
        assert_eq!(h.get_index(2), Some((&b"c"[..], &b"a"[..])));
        assert!(h.remove(b"a"));
        assert!(!h.remove(b"a"));
        assert_eq!(
            pairs(&h),
            [
                (b"b".to_vec(), b"2".to_vec()),
                (b"c".to_vec(), b"a".to_vec())
            ]
        );
        assert_eq!(h.keys().collect::<Vec<_>>(), [&b"b"[..], b"c"]);
        assert_eq!(h.values().collect::<Vec<_>>(), [&b"2"[..], b"a"]);
    }

    #[test]
    fn becomes_a_table_past_either_limit_and_stays_one() {
        let mut by_count = HashValue::default();
        for f in [&b"a"[..], b"b", b"c"] {
            by_count.insert(f, b"v", SMALL);
        }
        assert!(by_count.is_packed());
        // Overwriting at the limit keeps it packed; a fourth field does not.
        by_count.insert(b"c", b"w", SMALL);
        assert!(by_count.is_packed());
        by_count.insert(b"d", b"v", SMALL);
        assert!(!by_count.is_packed());
        assert_eq!(by_count.len(), 4);
        assert_eq!(by_count.get(b"c"), Some(&b"w"[..]));
        by_count.remove(b"d");
        by_count.remove(b"c");
        assert!(!by_count.is_packed(), "a table is not packed again");

        let mut by_length = HashValue::default();
        by_length.insert(b"f", b"12345678", SMALL);
        assert!(by_length.is_packed());
        by_length.insert(b"f", b"123456789", SMALL);
        assert!(!by_length.is_packed());
        assert_eq!(by_length.get(b"f"), Some(&b"123456789"[..]));

        let mut by_field = HashValue::default();
        by_field.insert(b"a-long-field", b"v", SMALL);
        assert!(!by_field.is_packed());
    }

    proptest::proptest! {
        /// Goal: whatever the writes, the hash reads as a map would, in either form, and
        /// is packed exactly while no write took it past the limits.
        #[test]
        fn reads_as_a_map_under_any_writes(
            ops in proptest::collection::vec(
                (0u8..3, 0u8..6, proptest::collection::vec(proptest::prelude::any::<u8>(), 0..10)),
                0..60,
            )
        ) {
            let mut h = HashValue::default();
            let mut model = std::collections::HashMap::<Vec<u8>, Vec<u8>>::new();
            let mut outgrown = false;
            for (op, field, value) in ops {
                let field = vec![b'f', field];
                match op {
                    0 | 1 => {
                        let new = !model.contains_key(&field);
                        outgrown |= value.len() > SMALL.value
                            || (new && model.len() >= SMALL.entries);
                        proptest::prop_assert_eq!(h.insert(&field, &value, SMALL), new);
                        model.insert(field, value);
                    }
                    _ => {
                        proptest::prop_assert_eq!(h.remove(&field), model.remove(&field).is_some());
                    }
                }
                proptest::prop_assert_eq!(h.is_packed(), !outgrown);
                proptest::prop_assert_eq!(h.len(), model.len());
                for (f, v) in &model {
                    proptest::prop_assert_eq!(h.get(f), Some(&v[..]));
                }
                let mut pairs = pairs(&h);
                pairs.sort();
                let mut want: Vec<_> = model.clone().into_iter().collect();
                want.sort();
                proptest::prop_assert_eq!(pairs, want);
            }
        }
    }

    #[test]
    fn zero_entries_keeps_every_hash_a_table() {
        let mut h = HashValue::default();
        h.insert(b"a", b"1", PackLimits::new(0, 64));
        assert!(!h.is_packed());
        assert_eq!(PackLimits::new(1, 1 << 40).value, ITEM_MAX);
    }
}
