//! A packed list of byte strings: every item's length (LEB128) then its bytes, back to back
//! in one allocation. Small hashes keep their fields and values in one (Redis's listpack
//! idea; our own layout): per item 1-2 bytes of overhead instead of a boxed slice (16 bytes
//! plus its allocation) and a table slot. Lookups walk the items, so a packed value stays
//! small (the thresholds in `config::encodings` bound it).

/// Longest item a packed list holds: its length must fit the 2-byte LEB128 prefix callers
/// budget for, and no threshold allows more (`hash-max-listpack-value` is capped below it).
pub const ITEM_MAX: usize = 16_383;

/// Most elements a packed value holds whatever the thresholds say: every lookup walks it, so
/// a threshold of millions would make each write cost millions of comparisons (Redis bounds
/// its listpacks by bytes instead, at 1 GB).
pub const PACKED_ENTRIES_MAX: usize = 8192;

/// When a packed aggregate must become a table (`hash-max-listpack-entries` and
/// `hash-max-listpack-value`, or their set and sorted-set counterparts).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PackLimits {
    /// Most elements (fields, members) a packed value holds.
    pub entries: usize,
    /// Longest element (field, value, member) it holds, in bytes.
    pub value: usize,
}

impl PackLimits {
    /// Redis 7.0's defaults for hashes: what values loaded from a file are packed by (the
    /// configured thresholds apply from their next write).
    pub const HASH_DEFAULT: PackLimits = PackLimits {
        entries: 128,
        value: 64,
    };

    /// Redis 7.0's defaults for sorted sets (`zset-max-listpack-*`), the same numbers.
    pub const ZSET_DEFAULT: PackLimits = PackLimits::HASH_DEFAULT;

    /// Thresholds as configured, capped at [`PACKED_ENTRIES_MAX`] and where the packed
    /// layout stops (a 0 keeps every value a table, as Redis).
    pub fn new(entries: u64, value: u64) -> PackLimits {
        PackLimits {
            entries: entries.min(PACKED_ENTRIES_MAX as u64) as usize,
            value: value.min(ITEM_MAX as u64) as usize,
        }
    }

    /// Whether `item` is short enough to be packed.
    pub fn fits(&self, item: &[u8]) -> bool {
        item.len() <= self.value
    }
}

/// Unused capacity a shrinking packed list gives back (smaller slack stays: a reallocation
/// per removal would cost more than it saves).
const SLACK_MAX: usize = 32;

/// The items, in insertion order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Packed {
    bytes: Vec<u8>,
    items: u32,
}

/// Where one item sits: its prefix starts at `at`, its bytes are `body`.
#[derive(Clone, Debug)]
struct Slot {
    at: usize,
    body: std::ops::Range<usize>,
}

fn put_len(out: &mut Vec<u8>, len: usize) {
    debug_assert!(len <= ITEM_MAX);
    if len < 0x80 {
        out.push(len as u8);
    } else {
        out.push((len & 0x7f) as u8 | 0x80);
        out.push((len >> 7) as u8);
    }
}

/// The LEB128 prefix of `len` in a stack buffer, and how many of its bytes it takes.
fn encode_len(len: usize) -> ([u8; 2], usize) {
    debug_assert!(len <= ITEM_MAX);
    if len < 0x80 {
        ([len as u8, 0], 1)
    } else {
        ([(len & 0x7f) as u8 | 0x80, (len >> 7) as u8], 2)
    }
}

/// Writes `item` with its length prefix at the front of `room` and returns the room after it.
fn write_item<'a>(room: &'a mut [u8], item: &[u8]) -> &'a mut [u8] {
    let (header, header_len) = encode_len(item.len());
    // The prefix byte by byte: a copy of a length unknown when compiling calls `memcpy`.
    room[0] = header[0];
    if header_len == 2 {
        room[1] = header[1];
    }
    let (body, rest) = room[header_len..].split_at_mut(item.len());
    body.copy_from_slice(item);
    rest
}

fn len_bytes(len: usize) -> usize {
    if len < 0x80 {
        1
    } else {
        2
    }
}

impl Packed {
    /// Items held.
    pub fn len(&self) -> usize {
        self.items as usize
    }

    pub fn is_empty(&self) -> bool {
        self.items == 0
    }

    /// An empty list with room for `bytes` of items (prefixes included).
    pub fn with_capacity(bytes: usize) -> Packed {
        Packed {
            bytes: Vec::with_capacity(bytes),
            items: 0,
        }
    }

    /// Gives back unused capacity.
    pub fn shrink_to_fit(&mut self) {
        self.bytes.shrink_to_fit();
    }

    /// Bytes the items take with their length prefixes (what a byte threshold bounds).
    pub fn byte_len(&self) -> usize {
        self.bytes.len()
    }

    /// Heap bytes an item of `len` bytes adds: its length prefix and its bytes.
    pub fn item_bytes(len: usize) -> usize {
        len_bytes(len) + len
    }

    /// Heap bytes held (for MEMORY USAGE).
    pub fn heap_bytes(&self) -> usize {
        self.bytes.capacity()
    }

    /// The slot at byte offset `at` (which must start an item).
    fn slot_at(&self, at: usize) -> Slot {
        let first = self.bytes[at] as usize;
        let (len, prefix) = if first & 0x80 == 0 {
            (first, 1)
        } else {
            ((first & 0x7f) | (self.bytes[at + 1] as usize) << 7, 2)
        };
        let start = at + prefix;
        Slot {
            at,
            body: start..start + len,
        }
    }

    fn slots(&self) -> impl Iterator<Item = Slot> + '_ {
        let mut at = 0;
        std::iter::from_fn(move || {
            (at < self.bytes.len()).then(|| {
                let slot = self.slot_at(at);
                at = slot.body.end;
                slot
            })
        })
    }

    /// The items in order.
    pub fn iter(&self) -> Items<'_> {
        Items { rest: &self.bytes }
    }

    /// The item at position `i`.
    pub fn get(&self, i: usize) -> Option<&[u8]> {
        self.slots().nth(i).map(|s| &self.bytes[s.body])
    }

    /// The position of the first item equal to `item` among positions `0, step, 2*step...`
    /// (a hash's fields sit at even positions, its values between them).
    pub fn position(&self, item: &[u8], step: usize) -> Option<usize> {
        self.slots()
            .step_by(step)
            .position(|s| &self.bytes[s.body] == item)
            .map(|i| i * step)
    }

    /// Appends an item (at most [`ITEM_MAX`] bytes).
    pub fn push(&mut self, item: &[u8]) {
        assert!(
            item.len() <= ITEM_MAX,
            "packed item of {} bytes",
            item.len()
        );
        // Exactly: a packed value is small and grows one item at a time, so the allocator's
        // size classes are all the slack it needs (doubling would leave up to half unused).
        self.bytes.reserve_exact(len_bytes(item.len()) + item.len());
        put_len(&mut self.bytes, item.len());
        self.bytes.extend_from_slice(item);
        self.items += 1;
    }

    /// Inserts `items` before position `i` (`i` the length: appends them), each at most
    /// [`ITEM_MAX`] bytes.
    pub fn insert(&mut self, i: usize, items: &[&[u8]]) {
        assert!(i <= self.len(), "insert at {i} of {} items", self.len());
        let at = if i == self.len() {
            self.bytes.len()
        } else {
            self.slots().nth(i).expect("i < len").at
        };
        for item in items {
            assert!(
                item.len() <= ITEM_MAX,
                "packed item of {} bytes",
                item.len()
            );
        }
        let size = items.iter().map(|x| len_bytes(x.len()) + x.len()).sum();
        // Exactly, as `push`.
        self.bytes.reserve_exact(size);
        let mut gap = self.open_gap(at, size);
        for item in items {
            gap = write_item(gap, item);
        }
        debug_assert!(gap.is_empty());
        self.items += items.len() as u32;
    }

    /// Inserts one item before position `i`, with no staging buffer (a list's LPUSH into a
    /// full-sized node: the bytes after it move once).
    pub fn insert_one(&mut self, i: usize, item: &[u8]) {
        assert!(i <= self.len(), "insert at {i} of {} items", self.len());
        assert!(
            item.len() <= ITEM_MAX,
            "packed item of {} bytes",
            item.len()
        );
        let at = if i == self.len() {
            self.bytes.len()
        } else {
            self.slots().nth(i).expect("i < len").at
        };
        let size = Packed::item_bytes(item.len());
        self.bytes.reserve_exact(size);
        let gap = self.open_gap(at, size);
        write_item(gap, item);
        self.items += 1;
    }

    /// Makes `n` bytes of room at byte offset `at`, the bytes after it moved up once, and
    /// returns the room, holding stale bytes, for the caller to overwrite. Why not
    /// `Vec::splice`: its general path (drain, refill from an iterator, move the tail) was
    /// ~200 instructions of each LPUSH (callgrind), for what is a resize and one `memmove`.
    fn open_gap(&mut self, at: usize, n: usize) -> &mut [u8] {
        let end = self.bytes.len();
        assert!(at <= end, "a gap at {at} of {end} bytes");
        self.bytes.resize(end + n, 0);
        self.bytes.copy_within(at..end, at + n);
        &mut self.bytes[at..at + n]
    }

    /// Makes room for `bytes` more bytes of items, growing the allocation geometrically
    /// rather than exactly (a list's node fills up push by push; `shrink_to_fit` once full).
    pub fn reserve(&mut self, bytes: usize) {
        self.bytes.reserve(bytes);
    }

    /// Replaces the item at position `i` with `item` (at most [`ITEM_MAX`] bytes).
    pub fn replace(&mut self, i: usize, item: &[u8]) {
        assert!(
            item.len() <= ITEM_MAX,
            "packed item of {} bytes",
            item.len()
        );
        let slot = self.slots().nth(i).expect("replace within the items");
        if slot.body.len() == item.len() {
            self.bytes[slot.body].copy_from_slice(item);
            return;
        }
        let mut encoded = Vec::with_capacity(len_bytes(item.len()) + item.len());
        put_len(&mut encoded, item.len());
        encoded.extend_from_slice(item);
        self.bytes.splice(slot.at..slot.body.end, encoded);
        if self.bytes.capacity() >= self.bytes.len() + SLACK_MAX {
            self.bytes.shrink_to_fit();
        }
    }

    /// Removes `count` items from position `i` on, or as many as there are (the later ones
    /// move up: order is kept).
    pub fn remove(&mut self, i: usize, count: usize) {
        self.remove_keeping_capacity(i, count);
        // Give back what a shrinking value no longer needs.
        if self.bytes.capacity() >= self.bytes.len() + SLACK_MAX {
            self.bytes.shrink_to_fit();
        }
    }

    /// Takes the last `n` items (or all there are), last first, in one walk of the items
    /// (they only walk forward), keeping the capacity.
    pub fn take_back(&mut self, n: usize) -> Vec<Box<[u8]>> {
        let n = n.min(self.len());
        if n == 0 {
            return Vec::new();
        }
        // The first item taken starts where the kept bytes end; the walk to it is the only
        // one (an RPOP of one item allocates only the item it returns).
        let first = self.slots().nth(self.len() - n).expect("n <= len").at;
        let mut taken: Vec<Box<[u8]>> = Items {
            rest: &self.bytes[first..],
        }
        .map(Box::from)
        .collect();
        taken.reverse();
        self.bytes.truncate(first);
        self.items -= n as u32;
        taken
    }

    /// [`Packed::remove`] without giving capacity back: a list's end node popped and pushed
    /// in turn (a queue, a stack) would otherwise reallocate, and copy its bytes, each time.
    pub fn remove_keeping_capacity(&mut self, i: usize, count: usize) {
        let mut slots = self.slots().skip(i).take(count);
        let Some(first) = slots.next() else {
            return;
        };
        let (removed, end) = slots.fold((1u32, first.body.end), |(n, _), s| (n + 1, s.body.end));
        self.bytes.drain(first.at..end);
        self.items -= removed;
    }
}

/// The items of a [`Packed`], in order.
///
/// The iterator holds the bytes not yet read and splits each item off their front. Why not an
/// offset into the whole list: indexing it again per item cost two more bounds checks and
/// the slot arithmetic, ~30 instructions per element of an LRANGE where a deque of boxed
/// elements spent a few (callgrind, `-t lrange_100`).
#[derive(Clone, Debug)]
pub struct Items<'a> {
    rest: &'a [u8],
}

impl<'a> Iterator for Items<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        let (&first, after) = self.rest.split_first()?;
        let (len, body) = if first & 0x80 == 0 {
            (usize::from(first), after)
        } else {
            let Some((&second, after)) = after.split_first() else {
                debug_assert!(false, "a packed length prefix is cut short");
                return None;
            };
            (usize::from(first & 0x7f) | usize::from(second) << 7, after)
        };
        let Some((item, rest)) = body.split_at_checked(len) else {
            debug_assert!(false, "a packed item runs past the list's bytes");
            return None;
        };
        self.rest = rest;
        Some(item)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_round_trip_through_every_edit() {
        let mut p = Packed::default();
        let long = vec![b'x'; 300];
        p.push(b"a");
        p.push(&long);
        p.push(b"");
        p.push(b"tail");
        assert_eq!(p.len(), 4);
        assert_eq!(
            p.iter().collect::<Vec<_>>(),
            [&b"a"[..], &long, b"", b"tail"]
        );
        assert_eq!(p.get(1), Some(&long[..]));
        assert_eq!(p.get(4), None);
        assert_eq!(p.position(b"tail", 1), Some(3));
        assert_eq!(p.position(b"tail", 2), None);
        assert_eq!(p.position(b"", 2), Some(2));
        p.replace(1, b"short");
        p.replace(0, b"b");
        p.replace(2, &long);
        assert_eq!(
            p.iter().collect::<Vec<_>>(),
            [&b"b"[..], b"short", &long, b"tail"]
        );
        p.remove(1, 2);
        assert_eq!(p.iter().collect::<Vec<_>>(), [&b"b"[..], b"tail"]);
        p.insert(1, &[b"mid", &long]);
        p.insert(0, &[b"head"]);
        p.insert(5, &[b"end"]);
        assert_eq!(
            p.iter().collect::<Vec<_>>(),
            [&b"head"[..], b"b", b"mid", &long, b"tail", b"end"]
        );
        assert_eq!(p.len(), 6);
        p.remove(0, 1);
        p.remove(1, 2);
        p.remove(2, 1);
        p.remove(0, 2);
        assert!(p.is_empty());
        assert_eq!(p.iter().count(), 0);
    }

    #[test]
    fn a_removal_past_the_end_removes_what_there_is() {
        let mut p = Packed::default();
        for item in [&b"a"[..], b"b", b"c"] {
            p.push(item);
        }
        p.remove(1, 10);
        assert_eq!(p.len(), 1);
        assert_eq!(p.iter().collect::<Vec<_>>(), [&b"a"[..]]);
        p.remove(5, 1);
        assert_eq!(p.len(), 1);
    }

    #[test]
    fn lengths_at_the_prefix_boundaries() {
        for len in [0, 1, 127, 128, 129, ITEM_MAX] {
            let mut p = Packed::default();
            let item = vec![7u8; len];
            p.push(&item);
            p.push(b"z");
            assert_eq!(p.get(0), Some(&item[..]), "{len}");
            assert_eq!(p.get(1), Some(&b"z"[..]), "{len}");
        }
    }
}
