//! Consumer groups: the last delivered ID, the read counter, the pending entries list (PEL)
//! and the consumers, each with its own PEL. The group's PEL owns each pending entry's
//! state; a consumer's PEL lists the IDs it holds, so that both views stay in step through
//! the methods here only.

use super::id::StreamId;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// A consumer's name, shared between its entry in the group and the PEL entries it holds.
pub type ConsumerName = Arc<[u8]>;

/// One delivered, unacknowledged entry.
#[derive(Debug, Clone)]
pub struct Pending {
    pub consumer: ConsumerName,
    /// Unix ms of the last delivery.
    pub delivery_time: u64,
    pub delivery_count: u64,
}

#[derive(Debug, Clone, Default)]
pub struct Consumer {
    /// Unix ms of the consumer's last read or claim attempt.
    pub seen_time: u64,
    pub pel: BTreeSet<StreamId>,
}

#[derive(Debug, Clone, Default)]
pub struct Group {
    pub last_id: StreamId,
    /// The logical read counter: how many entries were ever delivered up to `last_id`;
    /// None when it cannot be known (Redis's `SCG_INVALID_ENTRIES_READ`).
    pub entries_read: Option<u64>,
    pub pel: BTreeMap<StreamId, Pending>,
    pub consumers: BTreeMap<ConsumerName, Consumer>,
}

impl Group {
    pub fn new(last_id: StreamId, entries_read: Option<u64>) -> Group {
        Group {
            last_id,
            entries_read,
            ..Group::default()
        }
    }

    /// The consumer named `name`, created if absent (true when it was).
    pub fn consumer_or_create(&mut self, name: &[u8], now: u64) -> (ConsumerName, bool) {
        if let Some((key, _)) = self.consumers.get_key_value(name) {
            return (key.clone(), false);
        }
        let key: ConsumerName = Arc::from(name);
        self.consumers.insert(
            key.clone(),
            Consumer {
                seen_time: now,
                pel: BTreeSet::new(),
            },
        );
        (key, true)
    }

    /// Creates the consumer if absent; true if it was created.
    pub fn create_consumer(&mut self, name: &[u8], now: u64) -> bool {
        self.consumer_or_create(name, now).1
    }

    /// Deletes a consumer and its pending entries; returns how many it had, None if absent.
    pub fn delete_consumer(&mut self, name: &[u8]) -> Option<usize> {
        let consumer = self.consumers.remove(name)?;
        for id in &consumer.pel {
            self.pel.remove(id);
        }
        Some(consumer.pel.len())
    }

    /// Acknowledges `id`: true if it was pending.
    pub fn ack(&mut self, id: StreamId) -> bool {
        let Some(p) = self.pel.remove(&id) else {
            return false;
        };
        if let Some(c) = self.consumers.get_mut(&p.consumer) {
            c.pel.remove(&id);
        }
        true
    }

    /// Records a delivery of `id` to `consumer` (XREADGROUP): a new pending entry, or one
    /// that moves to this consumer with its count reset to 1, as Redis does.
    pub fn deliver(&mut self, id: StreamId, consumer: &ConsumerName, now: u64) {
        if let Some(old) = self.pel.get(&id) {
            let old_owner = old.consumer.clone();
            if let Some(c) = self.consumers.get_mut(&old_owner) {
                c.pel.remove(&id);
            }
        }
        self.pel.insert(
            id,
            Pending {
                consumer: consumer.clone(),
                delivery_time: now,
                delivery_count: 1,
            },
        );
        if let Some(c) = self.consumers.get_mut(consumer) {
            c.pel.insert(id);
        }
    }

    /// Hands the pending entry `id` to `consumer` (XCLAIM, XAUTOCLAIM), creating it when
    /// absent (XCLAIM FORCE). Sets its delivery time and count as given.
    pub fn claim(
        &mut self,
        id: StreamId,
        consumer: &ConsumerName,
        delivery_time: u64,
        delivery_count: DeliveryCount,
    ) -> &Pending {
        let previous = self
            .pel
            .get(&id)
            .map(|p| (p.consumer.clone(), p.delivery_count));
        if let Some((owner, _)) = &previous {
            if owner != consumer {
                if let Some(c) = self.consumers.get_mut(owner) {
                    c.pel.remove(&id);
                }
            }
        }
        let old_count = previous.as_ref().map_or(0, |p| p.1);
        let count = match delivery_count {
            DeliveryCount::Set(n) => n,
            DeliveryCount::Increment => old_count.saturating_add(1),
            DeliveryCount::Keep => old_count,
        };
        if let Some(c) = self.consumers.get_mut(consumer) {
            c.pel.insert(id);
        }
        self.pel.insert(
            id,
            Pending {
                consumer: consumer.clone(),
                delivery_time,
                delivery_count: count,
            },
        );
        &self.pel[&id]
    }
}

/// What a claim does to the delivery counter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeliveryCount {
    Set(u64),
    Increment,
    Keep,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(n: u64) -> StreamId {
        StreamId::new(n, 0)
    }

    /// Goal: the group PEL and the consumers' PELs always agree. Method: deliveries,
    /// re-deliveries to another consumer, claims, acks and a consumer deletion, checking both
    /// views after each step.
    #[test]
    fn group_and_consumer_pels_stay_in_step() {
        let mut g = Group::new(StreamId::ZERO, Some(0));
        let (alice, created) = g.consumer_or_create(b"alice", 10);
        assert!(created);
        let (bob, _) = g.consumer_or_create(b"bob", 10);
        assert!(!g.create_consumer(b"bob", 11));
        let check = |g: &Group| {
            let mut from_consumers: Vec<(StreamId, Vec<u8>)> = g
                .consumers
                .iter()
                .flat_map(|(n, c)| c.pel.iter().map(move |i| (*i, n.to_vec())))
                .collect();
            from_consumers.sort();
            let from_group: Vec<(StreamId, Vec<u8>)> = g
                .pel
                .iter()
                .map(|(i, p)| (*i, p.consumer.to_vec()))
                .collect();
            assert_eq!(from_consumers, from_group);
        };
        for n in 1..=4 {
            g.deliver(id(n), &alice, 100);
        }
        check(&g);
        g.deliver(id(2), &bob, 200);
        assert_eq!(g.pel[&id(2)].delivery_count, 1);
        check(&g);
        let p = g.claim(id(3), &bob, 300, DeliveryCount::Increment);
        assert_eq!((p.delivery_count, p.delivery_time), (2, 300));
        g.claim(id(4), &alice, 300, DeliveryCount::Set(7));
        assert_eq!(g.pel[&id(4)].delivery_count, 7);
        g.claim(id(9), &bob, 5, DeliveryCount::Keep);
        assert_eq!(g.pel[&id(9)].delivery_count, 0, "FORCE-created");
        check(&g);
        assert!(g.ack(id(1)));
        assert!(!g.ack(id(1)));
        check(&g);
        assert_eq!(g.delete_consumer(b"bob"), Some(3));
        assert_eq!(g.delete_consumer(b"bob"), None);
        check(&g);
        assert_eq!(g.pel.len(), 1);
    }
}
