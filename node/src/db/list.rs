//! A list value: packed while small (elements behind 1-2 byte lengths in one [`Packed`], as
//! Redis 7.2 keeps a small list in one listpack), a deque of packed nodes once a write takes
//! it past `list-max-listpack-size` (by default 8 KiB of packed bytes per node: Redis's
//! quicklist; see [`chunks`]). Never one packed run again once chunked.
//!
//! Every packed operation walks or moves the packed bytes, which the threshold keeps to a few
//! KiB (at most 64 KiB, Redis's own bound for the setting, and [`PACKED_ENTRIES_MAX`]
//! elements), as pushing into a listpack moves its bytes in Redis.

pub mod chunks;

use super::packed::{Items, Packed, ITEM_MAX, PACKED_ENTRIES_MAX};
use chunks::{ChunkIter, ChunkIterRev, Chunks};

/// When a packed list must become a deque (`list-max-listpack-size`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ListLimits {
    /// Most elements a packed list holds.
    pub entries: usize,
    /// Most bytes its elements take with their length prefixes.
    pub bytes: usize,
}

/// The byte bound Redis puts on a count-limited listpack (its `SIZE_SAFETY_LIMIT`).
const COUNT_LIMITED_BYTES: usize = 8192;

impl ListLimits {
    /// Redis's default, `list-max-listpack-size -2`: 8 KiB. What lists loaded from a file
    /// are packed by (a configured size applies from a list's next write).
    pub const DEFAULT: ListLimits = ListLimits::from_size(-2);

    /// Reads `list-max-listpack-size` as Redis does: -1 to -5 bound the bytes (4, 8, 16, 32
    /// or 64 KiB; below -5 counts as -5), a positive number the elements (with an 8 KiB byte
    /// bound besides). 0 keeps one element at most, as Redis's fill of 0 does per listpack.
    pub const fn from_size(size: i64) -> ListLimits {
        if size < 0 {
            let level = if size < -5 { 5 } else { -size } as u32;
            ListLimits {
                entries: PACKED_ENTRIES_MAX,
                bytes: 4096 << (level - 1),
            }
        } else {
            let entries = if size < 1 {
                1
            } else if size as u64 > PACKED_ENTRIES_MAX as u64 {
                PACKED_ENTRIES_MAX
            } else {
                size as usize
            };
            ListLimits {
                entries,
                bytes: COUNT_LIMITED_BYTES,
            }
        }
    }

    /// Whether `packed` may take one more element of `len` bytes in place of one of
    /// `replacing` bytes (0: none replaced).
    fn admits(&self, packed: &Packed, len: usize, replacing: Option<usize>) -> bool {
        let count = packed.len() + usize::from(replacing.is_none());
        let bytes =
            packed.byte_len() + Packed::item_bytes(len) - replacing.map_or(0, Packed::item_bytes);
        len <= ITEM_MAX && count <= self.entries && bytes <= self.bytes
    }

    /// Whether an empty packed node may take an element of `len` bytes.
    fn admits_alone(&self, len: usize) -> bool {
        len <= ITEM_MAX && self.entries >= 1 && Packed::item_bytes(len) <= self.bytes
    }
}

#[derive(Clone, Debug)]
pub enum ListValue {
    Packed(Packed),
    /// Boxed so that the enum stays small: most lists are small.
    Chunked(Box<Chunks>),
}

const _: () = assert!(std::mem::size_of::<ListValue>() <= 40);

impl Default for ListValue {
    fn default() -> Self {
        ListValue::Packed(Packed::default())
    }
}

impl PartialEq for ListValue {
    /// Equal elements in the same order, whatever the forms.
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

/// The elements of a [`ListValue`] front to back (or a range of them).
pub enum Iter<'a> {
    Packed(std::iter::Take<std::iter::Skip<Items<'a>>>),
    Chunked(ChunkIter<'a>),
}

impl<'a> Iterator for Iter<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        match self {
            Iter::Packed(items) => items.next(),
            Iter::Chunked(it) => it.next(),
        }
    }

    /// The form is matched once, not per element (`for_each` runs this).
    fn fold<B, F>(self, init: B, f: F) -> B
    where
        F: FnMut(B, &'a [u8]) -> B,
    {
        match self {
            Iter::Packed(items) => items.fold(init, f),
            Iter::Chunked(it) => it.fold(init, f),
        }
    }
}

/// The elements of a [`ListValue`] back to front.
pub enum IterRev<'a> {
    /// Packed items only walk forward: they are listed, then handed out backwards.
    Packed(std::iter::Rev<std::vec::IntoIter<&'a [u8]>>),
    Chunked(ChunkIterRev<'a>),
}

impl<'a> Iterator for IterRev<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        match self {
            IterRev::Packed(items) => items.next(),
            IterRev::Chunked(it) => it.next(),
        }
    }
}

impl ListValue {
    pub fn new() -> ListValue {
        ListValue::default()
    }

    pub fn len(&self) -> usize {
        match self {
            ListValue::Packed(p) => p.len(),
            ListValue::Chunked(c) => c.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether the value is in its packed form.
    pub fn is_packed(&self) -> bool {
        matches!(self, ListValue::Packed(_))
    }

    /// The packed form's heap bytes (None when chunked).
    pub fn packed_bytes(&self) -> Option<usize> {
        match self {
            ListValue::Packed(p) => Some(p.heap_bytes()),
            ListValue::Chunked(_) => None,
        }
    }

    /// The chunked form (None while packed), for MEMORY USAGE.
    pub fn chunks(&self) -> Option<&Chunks> {
        match self {
            ListValue::Packed(_) => None,
            ListValue::Chunked(c) => Some(c),
        }
    }

    /// The chunked form, converting a packed list first (its run becomes the first node).
    fn make_chunked(&mut self) -> &mut Chunks {
        if let ListValue::Packed(p) = self {
            let chunks = Chunks::from_packed(std::mem::take(p));
            *self = ListValue::Chunked(Box::new(chunks));
        }
        match self {
            ListValue::Chunked(c) => c,
            ListValue::Packed(_) => unreachable!("made chunked above"),
        }
    }

    pub fn push_back(&mut self, element: &[u8], limits: ListLimits) {
        match self {
            ListValue::Packed(p) if limits.admits(p, element.len(), None) => p.push(element),
            _ => self.make_chunked().push_back(element, limits),
        }
    }

    pub fn push_front(&mut self, element: &[u8], limits: ListLimits) {
        match self {
            ListValue::Packed(p) if limits.admits(p, element.len(), None) => {
                p.insert(0, &[element])
            }
            _ => self.make_chunked().push_front(element, limits),
        }
    }

    /// Inserts `element` before position `at` (`at` the length: appends it).
    pub fn insert(&mut self, at: usize, element: &[u8], limits: ListLimits) {
        assert!(at <= self.len(), "insert at {at} of {}", self.len());
        match self {
            ListValue::Packed(p) if limits.admits(p, element.len(), None) => {
                p.insert(at, &[element])
            }
            _ => self.make_chunked().insert(at, element, limits),
        }
    }

    /// Replaces the element at `at` (which must exist).
    pub fn set(&mut self, at: usize, element: &[u8], limits: ListLimits) {
        match self {
            ListValue::Packed(p) => {
                let old = p.get(at).expect("set within the list").len();
                if limits.admits(p, element.len(), Some(old)) {
                    p.replace(at, element);
                } else {
                    self.make_chunked().set(at, element, limits);
                }
            }
            ListValue::Chunked(c) => c.set(at, element, limits),
        }
    }

    pub fn get(&self, at: usize) -> Option<&[u8]> {
        match self {
            ListValue::Packed(p) => p.get(at),
            ListValue::Chunked(c) => c.get(at),
        }
    }

    pub fn pop_front(&mut self) -> Option<Box<[u8]>> {
        self.pop_front_n(1).pop()
    }

    pub fn pop_back(&mut self) -> Option<Box<[u8]>> {
        self.pop_back_n(1).pop()
    }

    /// Removes up to `n` elements from the back, last first (one walk of a packed list, not
    /// one per element).
    pub fn pop_back_n(&mut self, n: usize) -> Vec<Box<[u8]>> {
        let n = n.min(self.len());
        match self {
            ListValue::Packed(p) => {
                let start = p.len() - n;
                let mut taken: Vec<Box<[u8]>> = p.iter().skip(start).map(Box::from).collect();
                p.remove(start, n);
                taken.reverse();
                taken
            }
            ListValue::Chunked(c) => c.pop_back_n(n),
        }
    }

    /// Removes up to `n` elements from the front, in order.
    pub fn pop_front_n(&mut self, n: usize) -> Vec<Box<[u8]>> {
        let n = n.min(self.len());
        match self {
            ListValue::Packed(p) => {
                let taken = p.iter().take(n).map(Box::from).collect();
                p.remove(0, n);
                taken
            }
            ListValue::Chunked(c) => c.pop_front_n(n),
        }
    }

    /// Every element front to back.
    pub fn iter(&self) -> Iter<'_> {
        self.range(0, self.len())
    }

    /// Up to `count` elements from position `first` on.
    pub fn range(&self, first: usize, count: usize) -> Iter<'_> {
        match self {
            ListValue::Packed(p) => Iter::Packed(p.iter().skip(first).take(count)),
            ListValue::Chunked(c) => Iter::Chunked(c.range(first, count)),
        }
    }

    /// Every element back to front.
    pub fn iter_rev(&self) -> IterRev<'_> {
        match self {
            ListValue::Packed(p) => IterRev::Packed(p.iter().collect::<Vec<_>>().into_iter().rev()),
            ListValue::Chunked(c) => IterRev::Chunked(c.iter_rev()),
        }
    }

    /// Keeps the elements for which `keep` holds, in order.
    pub fn retain(&mut self, mut keep: impl FnMut(&[u8]) -> bool) {
        match self {
            ListValue::Packed(p) => retain_packed(p, &mut keep),
            ListValue::Chunked(c) => c.retain(keep),
        }
    }

    /// Keeps only positions `first..=last` (both within the list).
    pub fn keep_range(&mut self, first: usize, last: usize) {
        let len = self.len();
        assert!(
            first <= last && last < len,
            "keep {first}..={last} of {len}"
        );
        match self {
            ListValue::Packed(p) => {
                p.remove(last + 1, len - last - 1);
                p.remove(0, first);
            }
            ListValue::Chunked(c) => c.keep_range(first, last),
        }
    }

    pub fn clear(&mut self) {
        *self = ListValue::default();
    }
}

/// Keeps the items of `p` for which `keep` holds, in order: rebuilt only from the first item
/// that goes (LREM often removes nothing).
fn retain_packed(p: &mut Packed, keep: &mut impl FnMut(&[u8]) -> bool) {
    let Some(first_gone) = p.iter().position(|e| !keep(e)) else {
        return;
    };
    let mut kept = Packed::with_capacity(p.byte_len());
    for element in p.iter().take(first_gone) {
        kept.push(element);
    }
    for element in p.iter().skip(first_gone + 1) {
        if keep(element) {
            kept.push(element);
        }
    }
    kept.shrink_to_fit();
    *p = kept;
}

impl<'a> FromIterator<&'a [u8]> for ListValue {
    /// A list of `elements`, packed by the default limits while they fit.
    fn from_iter<I: IntoIterator<Item = &'a [u8]>>(elements: I) -> ListValue {
        let mut list = ListValue::new();
        for element in elements {
            list.push_back(element, ListLimits::DEFAULT);
        }
        list
    }
}

#[cfg(test)]
mod tests;
