//! Keyspace notifications (`notify-keyspace-events`): a command records the events of its
//! changes while it runs ([`KeyEvent`], in its effects), and the dispatcher publishes them
//! through the node's pub/sub once the keys' locks are released. As in Redis Cluster they
//! go to this node's subscribers only, never over the cluster bus: a key lives on one node,
//! and so do its events.

use super::pubsub::Kind;
use super::NodeState;
use crate::config::keyspace_events::{publishes, KEYEVENT, KEYSPACE};
use crate::db::Key;
use std::sync::atomic::Ordering::Relaxed;

/// The channels of database 0 (the only one in cluster mode), built once.
const DB_PREFIX_KEYSPACE: &[u8] = b"__keyspace@0__:";
const DB_PREFIX_KEYEVENT: &[u8] = b"__keyevent@0__:";

/// `__keyspace@<db>__:` or `__keyevent@<db>__:` followed by `tail`.
fn channel(kind: &str, db: usize, tail: &[u8]) -> Vec<u8> {
    let mut c = format!("__{kind}@{db}__:").into_bytes();
    c.extend_from_slice(tail);
    c
}

/// Most events one request may record. A command touching more keys than this (a huge
/// DEL, an EXEC of many writes) publishes the first ones and logs the rest as dropped:
/// the list is memory a client's single request makes the node hold.
pub const EVENTS_PER_REQUEST_MAX: usize = 100_000;

/// One change to one key, as Redis names it (`set`, `lpush`, `expired`...).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyEvent {
    /// The database of the key.
    pub db: usize,
    /// Its class bit (`config::keyspace_events::STRING`...).
    pub class: u32,
    pub event: &'static str,
    pub key: Key,
}

/// The events a request recorded, bounded by [`EVENTS_PER_REQUEST_MAX`].
#[derive(Default)]
pub struct KeyEvents {
    pub list: Vec<KeyEvent>,
    pub dropped: usize,
}

impl KeyEvents {
    pub fn push(&mut self, db: usize, class: u32, event: &'static str, key: &[u8]) {
        if self.list.len() >= EVENTS_PER_REQUEST_MAX {
            self.dropped += 1;
            return;
        }
        self.list.push(KeyEvent {
            db,
            class,
            event,
            key: key.into(),
        });
    }

    pub fn is_empty(&self) -> bool {
        self.list.is_empty() && self.dropped == 0
    }
}

/// Whether an event of `class` would be published now (one relaxed load): callers skip
/// recording it otherwise, so notifications cost nothing while off (the default).
pub fn wanted(server: &NodeState, class: u32) -> bool {
    publishes(server.hot.notify_keyspace_events.load(Relaxed), class)
}

/// Publishes `events` on their keyspace and keyevent channels, as the config now says.
pub fn publish(server: &NodeState, events: &KeyEvents) {
    if events.dropped > 0 {
        tracing::warn!(
            dropped = events.dropped,
            "a request changed more than {EVENTS_PER_REQUEST_MAX} keys; their keyspace events were not published"
        );
    }
    for e in &events.list {
        publish_one(server, e.db, e.class, e.event, &e.key);
    }
}

/// Publishes one event (active expiry and eviction, which run outside any command, call
/// this directly).
pub fn publish_one(server: &NodeState, db: usize, class: u32, event: &str, key: &[u8]) {
    let flags = server.hot.notify_keyspace_events.load(Relaxed);
    if !publishes(flags, class) {
        return;
    }
    let mut deliver = |sub: &super::pubsub::Subscriber, bytes: &[u8]| {
        if !sub.client.is_killed() {
            sub.deliver(bytes);
        }
    };
    if flags & KEYSPACE != 0 {
        let channel = if db == 0 {
            [DB_PREFIX_KEYSPACE, key].concat()
        } else {
            channel("keyspace", db, key)
        };
        server
            .pubsub
            .publish(Kind::Channel, &channel, event.as_bytes(), &mut deliver);
    }
    if flags & KEYEVENT != 0 {
        let channel = if db == 0 {
            [DB_PREFIX_KEYEVENT, event.as_bytes()].concat()
        } else {
            channel("keyevent", db, event.as_bytes())
        };
        server
            .pubsub
            .publish(Kind::Channel, &channel, key, &mut deliver);
    }
}
