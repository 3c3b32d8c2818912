//! A point-in-time image of the keyspace without a fork: the copy-on-write that Redis gets
//! from the kernel, done per hash slot.
//!
//! [`Keyspace::begin_image`](super::Keyspace::begin_image) marks every slot of every shard
//! pending while all shards are held, so the image's instant is one moment for the whole
//! keyspace. From then on, a slot is handed to the image's sink exactly once, as it was at
//! that instant: by whoever is about to change it first (every mutable access to a slot's
//! table goes through [`Shard::table_mut`](super::Shard::table_mut) or
//! [`Shard::clear`](super::Shard::clear), which capture it before the change), or by the
//! image's own walk ([`Keyspace::capture_pending`](super::Keyspace::capture_pending)),
//! whichever comes first. A writer pays for one slot's serialization at most once per image.
//!
//! What the sink does with a slot (serialize it into a buffer, for the AOF's base) is not
//! this layer's business; the sink must not lock shards (it runs with one held).

use super::keyspace::{SlotTable, SLOTS_PER_SHARD};
use std::sync::Arc;

/// Receives each slot of an image once, with its shard locked.
pub trait ImageSink: Send + Sync {
    /// Table of `slot` in database `db`.
    fn capture(&self, db: usize, slot: u16, table: &SlotTable);
}

const WORDS: usize = SLOTS_PER_SHARD.div_ceil(64);

/// The slots of one shard still to be captured for the running image.
pub struct PendingImage {
    sink: Arc<dyn ImageSink>,
    /// The database of the shard (see `databases.rs`).
    db: usize,
    /// Bit `i`: the shard's table `i` is not captured yet.
    pending: [u64; WORDS],
    remaining: usize,
}

impl PendingImage {
    pub fn all(sink: Arc<dyn ImageSink>, db: usize) -> Self {
        let mut pending = [u64::MAX; WORDS];
        let spare = WORDS * 64 - SLOTS_PER_SHARD;
        if spare > 0 {
            pending[WORDS - 1] = u64::MAX >> spare;
        }
        PendingImage {
            sink,
            db,
            pending,
            remaining: SLOTS_PER_SHARD,
        }
    }

    /// Hands table `i` (slot `slot`) to the sink if it is still pending. Returns true when
    /// no table of the shard is pending any more.
    pub fn capture(&mut self, i: usize, slot: u16, table: &SlotTable) -> bool {
        let (word, bit) = (i / 64, 1u64 << (i % 64));
        if self.pending[word] & bit != 0 {
            self.pending[word] &= !bit;
            self.remaining -= 1;
            self.sink.capture(self.db, slot, table);
        }
        self.remaining == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::keyspace::{shard_of_slot, Keyspace, SHARD_COUNT};
    use crate::db::{Entry, Locked, Value};
    use parking_lot::Mutex;
    use std::collections::BTreeMap;

    /// A key and its value, shown as bytes.
    type Row = (Vec<u8>, Vec<u8>);

    /// Records what each slot held when it was captured.
    #[derive(Default)]
    struct Recorder {
        slots: Mutex<BTreeMap<u16, Vec<Row>>>,
    }

    impl ImageSink for Recorder {
        fn capture(&self, _db: usize, slot: u16, table: &SlotTable) {
            let mut rows: Vec<Row> = table
                .iter()
                .map(|(k, e)| match &e.value {
                    Value::Str(v) => (k.to_vec(), v.to_vec()),
                    other => (k.to_vec(), format!("{other:?}").into_bytes()),
                })
                .collect();
            rows.sort();
            let before = self.slots.lock().insert(slot, rows);
            assert!(before.is_none(), "slot {slot} captured twice");
        }
    }

    fn set(keyspace: &Keyspace, key: &[u8], value: &[u8]) {
        let slot = proto::slot::key_slot(key);
        let mut db = Locked::lock(keyspace, &[shard_of_slot(slot)], 0, 0);
        db.insert(key, Entry::new(Value::Str(value.into())));
    }

    /// Goal: the image holds every key as it was at `begin_image`, whoever captured its slot,
    /// and each slot exactly once. Method: keys written before, changed and added after the
    /// instant (some slots then captured by the writes, the rest by the walk), one FLUSH-like
    /// clear of a shard in between; the recorder refuses a second capture of a slot.
    #[test]
    fn an_image_is_the_keyspace_at_its_instant() {
        let keyspace = Keyspace::new();
        for i in 0..200 {
            set(&keyspace, format!("k{i}").as_bytes(), b"old");
        }
        let sink = Arc::new(Recorder::default());
        let mut instant_ran = false;
        keyspace
            .begin_image(sink.clone(), || instant_ran = true)
            .unwrap();
        assert!(instant_ran);
        assert!(
            keyspace.begin_image(sink.clone(), || {}).is_err(),
            "one image at a time"
        );
        for i in 0..100 {
            set(&keyspace, format!("k{i}").as_bytes(), b"new");
            set(&keyspace, format!("added{i}").as_bytes(), b"new");
        }
        {
            let mut shard = keyspace.lock_shard(5);
            shard.clear();
        }
        for shard in 0..SHARD_COUNT {
            for table in 0..SLOTS_PER_SHARD {
                keyspace.capture_pending(shard, table);
            }
        }
        let slots = sink.slots.lock();
        assert_eq!(slots.len(), SHARD_COUNT * SLOTS_PER_SHARD);
        let mut rows: Vec<_> = slots.values().flatten().cloned().collect();
        rows.sort();
        let mut expected: Vec<_> = (0..200)
            .map(|i| (format!("k{i}").into_bytes(), b"old".to_vec()))
            .collect();
        expected.sort();
        assert_eq!(rows, expected);
        // The image is over: a new one may begin, and writes capture nothing any more.
        drop(slots);
        set(&keyspace, b"after", b"x");
        assert!(keyspace.begin_image(sink, || {}).is_ok());
    }
}
