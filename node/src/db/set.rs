//! A set value: packed while small (members behind 1-2 byte lengths in one [`Packed`]), a
//! table once a write takes it past `set-max-listpack-entries` members or puts a member
//! longer than `set-max-listpack-value` bytes in it (Redis 7.2's thresholds and listpack
//! sets; our layout). Never packed again once a table.
//!
//! OBJECT ENCODING answers Redis 7.0's names, which has intsets and hash tables only: a set
//! that has only ever held integers, and no more than `set-max-intset-entries` at once, is an
//! intset there, anything else a hash table (7.0 never converts back either). The set keeps
//! that history in one sticky flag, so the answer is exact for every sequence of writes.

use super::packed::{Items, PackLimits, Packed};
use super::value::Hasher;

/// The table form: members in insertion order (removal swaps the last one in).
pub type SetTable = indexmap::IndexSet<Box<[u8]>, Hasher>;

/// When a set changes form: the packing thresholds and Redis 7.0's intset bound (for the
/// encoding it answers, not for the layout).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SetLimits {
    pub packed: PackLimits,
    /// `set-max-intset-entries`.
    pub intset_entries: usize,
}

impl SetLimits {
    /// Redis's defaults (7.2's listpack thresholds, 7.0's intset bound): what sets loaded
    /// from a file are packed by (the configured thresholds apply from their next write).
    pub const DEFAULT: SetLimits = SetLimits {
        packed: PackLimits {
            entries: 128,
            value: 64,
        },
        intset_entries: 512,
    };
}

const _: () = assert!(std::mem::size_of::<SetValue>() <= 40);

#[derive(Clone, Debug)]
pub enum SetValue {
    /// `only_integers`: every member ever added was an integer and the set never held more
    /// than the intset bound (Redis 7.0 would hold it as an intset).
    Packed {
        members: Packed,
        only_integers: bool,
    },
    /// Boxed so that the enum stays small: most sets are small.
    Table {
        members: Box<SetTable>,
        only_integers: bool,
    },
}

impl Default for SetValue {
    fn default() -> Self {
        SetValue::Packed {
            members: Packed::default(),
            only_integers: true,
        }
    }
}

/// The members of a [`SetValue`], in its order.
pub enum Members<'a> {
    Packed(Items<'a>),
    Table(indexmap::set::Iter<'a, Box<[u8]>>),
}

impl<'a> Iterator for Members<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        match self {
            Members::Packed(items) => items.next(),
            Members::Table(it) => it.next().map(|m| &**m),
        }
    }
}

/// Whether Redis would store `member` in an intset: the canonical decimal form of an i64.
fn is_integer(member: &[u8]) -> bool {
    member.len() <= 20
        && proto::resp::request::parse_i64(member)
            .is_some_and(|n| itoa::Buffer::new().format(n).as_bytes() == member)
}

impl SetValue {
    pub fn len(&self) -> usize {
        match self {
            SetValue::Packed { members, .. } => members.len(),
            SetValue::Table { members, .. } => members.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether the value is in its packed form.
    pub fn is_packed(&self) -> bool {
        matches!(self, SetValue::Packed { .. })
    }

    /// Whether Redis 7.0 would hold this set as an intset (see the module doc).
    pub fn is_intset_in_redis_7_0(&self) -> bool {
        match self {
            SetValue::Packed { only_integers, .. } | SetValue::Table { only_integers, .. } => {
                *only_integers
            }
        }
    }

    pub fn contains(&self, member: &[u8]) -> bool {
        match self {
            SetValue::Packed { members, .. } => members.position(member, 1).is_some(),
            SetValue::Table { members, .. } => members.contains(member),
        }
    }

    /// Adds `member`; true when it is new. A packed set that would break `limits` becomes a
    /// table first.
    pub fn insert(&mut self, member: &[u8], limits: SetLimits) -> bool {
        let grown = self.len() + 1;
        // Parsed only while the history is all integers (a table of strings pays nothing).
        let still_integers =
            |was: bool| was && grown <= limits.intset_entries && is_integer(member);
        match self {
            SetValue::Packed {
                members,
                only_integers,
            } => {
                if members.position(member, 1).is_some() {
                    return false;
                }
                *only_integers = still_integers(*only_integers);
                if grown <= limits.packed.entries && limits.packed.fits(member) {
                    members.push(member);
                    return true;
                }
                self.make_table();
                let SetValue::Table { members, .. } = self else {
                    unreachable!("made a table above");
                };
                members.insert(member.into())
            }
            // One lookup, as the table form always took.
            SetValue::Table {
                members,
                only_integers,
            } => {
                let added = members.insert(member.into());
                if added {
                    *only_integers = still_integers(*only_integers);
                }
                added
            }
        }
    }

    /// Removes `member`; true when it was there.
    pub fn remove(&mut self, member: &[u8]) -> bool {
        match self {
            SetValue::Packed { members, .. } => match members.position(member, 1) {
                Some(i) => {
                    members.remove(i, 1);
                    true
                }
                None => false,
            },
            SetValue::Table { members, .. } => members.swap_remove(member),
        }
    }

    pub fn iter(&self) -> Members<'_> {
        match self {
            SetValue::Packed { members, .. } => Members::Packed(members.iter()),
            SetValue::Table { members, .. } => Members::Table(members.iter()),
        }
    }

    /// The member at position `i` (packed: a walk of `i` members).
    pub fn get_index(&self, i: usize) -> Option<&[u8]> {
        match self {
            SetValue::Packed { members, .. } => members.get(i),
            SetValue::Table { members, .. } => members.get_index(i).map(|m| &**m),
        }
    }

    /// Removes and returns the member at position `i` (SPOP's draw; a table swaps its last
    /// member in).
    pub fn swap_remove_index(&mut self, i: usize) -> Option<Box<[u8]>> {
        match self {
            SetValue::Packed { members, .. } => {
                let member: Box<[u8]> = members.get(i)?.into();
                members.remove(i, 1);
                Some(member)
            }
            SetValue::Table { members, .. } => members.swap_remove_index(i),
        }
    }

    /// The table, when the set is one (MEMORY USAGE; see `footprint.rs`).
    pub fn table(&self) -> Option<&SetTable> {
        match self {
            SetValue::Packed { .. } => None,
            SetValue::Table { members, .. } => Some(members),
        }
    }

    /// The packed allocation's size, when packed.
    pub fn packed_bytes(&self) -> Option<usize> {
        match self {
            SetValue::Packed { members, .. } => Some(members.heap_bytes()),
            SetValue::Table { .. } => None,
        }
    }

    fn make_table(&mut self) {
        if let SetValue::Packed {
            members,
            only_integers,
        } = self
        {
            let mut t = SetTable::with_capacity_and_hasher(members.len() + 1, Hasher::default());
            t.extend(members.iter().map(Box::from));
            *self = SetValue::Table {
                members: Box::new(t),
                only_integers: *only_integers,
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMALL: SetLimits = SetLimits {
        packed: PackLimits {
            entries: 3,
            value: 8,
        },
        intset_entries: 4,
    };

    fn members(s: &SetValue) -> Vec<Vec<u8>> {
        s.iter().map(<[u8]>::to_vec).collect()
    }

    #[test]
    fn stays_packed_within_the_limits_and_reads_like_a_table() {
        let mut s = SetValue::default();
        assert!(s.insert(b"a", SMALL));
        assert!(!s.insert(b"a", SMALL));
        assert!(s.insert(b"b", SMALL));
        assert!(s.is_packed());
        assert!(s.contains(b"b") && !s.contains(b"c"));
        assert_eq!(s.get_index(1), Some(&b"b"[..]));
        assert!(s.remove(b"a"));
        assert!(!s.remove(b"a"));
        assert_eq!(members(&s), [b"b".to_vec()]);
        assert_eq!(s.swap_remove_index(0).as_deref(), Some(&b"b"[..]));
        assert!(s.is_empty());
    }

    #[test]
    fn becomes_a_table_past_either_limit_and_stays_one() {
        let mut by_count = SetValue::default();
        for m in [&b"a"[..], b"b", b"c", b"d"] {
            by_count.insert(m, SMALL);
        }
        assert!(!by_count.is_packed());
        assert_eq!(by_count.len(), 4);
        by_count.remove(b"d");
        by_count.remove(b"c");
        assert!(!by_count.is_packed(), "a table is not packed again");
        assert!(by_count.contains(b"a"));

        let mut by_length = SetValue::default();
        by_length.insert(b"123456789", SMALL);
        assert!(!by_length.is_packed());
    }

    #[test]
    fn the_redis_7_0_intset_answer_follows_the_history() {
        let mut ints = SetValue::default();
        for m in [&b"1"[..], b"-2", b"30"] {
            ints.insert(m, SMALL);
        }
        assert!(ints.is_intset_in_redis_7_0());
        // Past the packing bound but within the intset bound: a table here, an intset there.
        ints.insert(b"4", SMALL);
        assert!(!ints.is_packed() && ints.is_intset_in_redis_7_0());
        // Past the intset bound: a hash table for good, even after shrinking.
        ints.insert(b"5", SMALL);
        assert!(!ints.is_intset_in_redis_7_0());
        ints.remove(b"5");
        assert!(!ints.is_intset_in_redis_7_0());

        let mut mixed = SetValue::default();
        mixed.insert(b"1", SMALL);
        mixed.insert(b"x", SMALL);
        mixed.remove(b"x");
        assert!(mixed.is_packed() && !mixed.is_intset_in_redis_7_0());

        for not_canonical in [
            &b"01"[..],
            b"+1",
            b"1.0",
            b" 1",
            b"-0",
            b"99999999999999999999",
        ] {
            let mut s = SetValue::default();
            s.insert(not_canonical, SMALL);
            assert!(!s.is_intset_in_redis_7_0(), "{not_canonical:?}");
        }
    }

    proptest::proptest! {
        /// Goal: whatever the writes, the set reads as a set would, in either form.
        #[test]
        fn reads_as_a_set_under_any_writes(
            ops in proptest::collection::vec((proptest::prelude::any::<bool>(), 0u8..8), 0..60)
        ) {
            let mut s = SetValue::default();
            let mut model = std::collections::BTreeSet::<Vec<u8>>::new();
            let mut outgrown = false;
            for (add, m) in ops {
                let m = vec![b'm', m];
                if add {
                    outgrown |= !model.contains(&m) && model.len() >= SMALL.packed.entries;
                    proptest::prop_assert_eq!(s.insert(&m, SMALL), model.insert(m.clone()));
                } else {
                    proptest::prop_assert_eq!(s.remove(&m), model.remove(&m));
                }
                proptest::prop_assert_eq!(s.len(), model.len());
                proptest::prop_assert_eq!(s.is_packed(), !outgrown);
                let got: std::collections::BTreeSet<Vec<u8>> = members(&s).into_iter().collect();
                proptest::prop_assert_eq!(&got, &model);
                for m in &model {
                    proptest::prop_assert!(s.contains(m));
                }
            }
        }
    }
}
