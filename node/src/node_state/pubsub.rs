//! The pub/sub registry: which clients listen to which channels, patterns and shard channels,
//! and delivery of published messages into the subscribers' push queues.
//!
//! Concurrency: channels are spread over [`STRIPES`] read-write locks, and each channel's
//! subscribers are an immutable snapshot (`Arc`) replaced copy-on-write by (un)subscribes. A
//! publisher takes a read lock only long enough to clone the snapshot's `Arc`, then encodes
//! and queues the message with no registry lock held, so a channel with thousands of
//! subscribers delays neither other publishers nor subscribers. Patterns sit behind one lock:
//! every publish must try every pattern anyway; matching runs under a read lock, delivery not.
//!
//! A publisher may still hold a snapshot naming a client that has just unsubscribed. Each
//! subscription therefore carries an `active` flag, cleared when it ends and checked under the
//! subscriber's push-queue lock: a message is either queued before the unsubscribe drains the
//! queue (and reaches the client ahead of the confirmation) or dropped, never queued after.

use super::client::ClientShared;
use crate::node_state::glob;
use bytes::BytesMut;
use indexmap::IndexMap;
use parking_lot::RwLock;
use proto::resp::{ProtocolVersion, Reply};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;

/// Most subscriptions (channels + patterns + shard channels) one client may hold. Each costs
/// registry memory and, for patterns, a glob match on every publish; Redis has no limit, but
/// a client needing more than this is almost certainly leaking subscriptions.
pub const MAX_SUBSCRIPTIONS_PER_CLIENT: usize = 100_000;
/// Lock stripes of a channel map: enough that concurrent (un)subscribes and publishes on
/// different channels rarely meet, few enough that PUBSUB CHANNELS walks them cheaply.
pub const STRIPES: usize = 16;

/// A channel's (or pattern's) subscribers by client id, shared with in-flight publishes.
pub type Subscribers = Arc<IndexMap<u64, Subscriber>>;

/// One client's subscription to one channel, pattern or shard channel.
#[derive(Clone)]
pub struct Subscriber {
    pub client: Arc<ClientShared>,
    /// Cleared when this subscription ends (see the module comment).
    active: Arc<AtomicBool>,
}

impl Subscriber {
    fn new(client: &Arc<ClientShared>) -> Self {
        Subscriber {
            client: client.clone(),
            active: Arc::new(AtomicBool::new(true)),
        }
    }

    /// Queues an encoded message for the client unless the subscription has ended.
    pub fn deliver(&self, encoded: &[u8]) {
        self.client.push_if(&self.active, encoded);
    }
}

/// Adds a subscription to a map entry, creating it (and counting it in `active`) if new.
fn add_to(
    map: &mut HashMap<Box<[u8]>, Subscribers>,
    active: &AtomicUsize,
    name: &[u8],
    client: &Arc<ClientShared>,
) {
    let subs = map.entry(name.into()).or_insert_with(|| {
        active.fetch_add(1, Relaxed);
        Arc::default()
    });
    // Clones the set only if a publish is iterating over it right now.
    Arc::make_mut(subs).insert(client.id, Subscriber::new(client));
}

/// Ends a subscription: out of the map (dropping an emptied entry), and its flag cleared.
fn remove_from(
    map: &mut HashMap<Box<[u8]>, Subscribers>,
    active: &AtomicUsize,
    name: &[u8],
    client_id: u64,
) {
    if let Some(subs) = map.get_mut(name) {
        if let Some(sub) = Arc::make_mut(subs).swap_remove(&client_id) {
            sub.active.store(false, Relaxed);
        }
        if subs.is_empty() {
            map.remove(name);
            active.fetch_sub(1, Relaxed);
        }
    }
}

/// The three namespaces a subscription lives in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// SUBSCRIBE / PUBLISH: delivered as `message`.
    Channel,
    /// PSUBSCRIBE: delivered as `pmessage` for channels matching the pattern.
    Pattern,
    /// SSUBSCRIBE / SPUBLISH: delivered as `smessage`; a namespace apart from channels.
    Shard,
}

/// Channel name -> subscribers, striped by hash.
struct ChannelMap {
    stripes: [RwLock<HashMap<Box<[u8]>, Subscribers>>; STRIPES],
    hasher: ahash::RandomState,
    /// Channels with at least one subscriber (INFO pubsub_channels), kept without locks.
    active: AtomicUsize,
}

impl Default for ChannelMap {
    fn default() -> Self {
        ChannelMap {
            stripes: std::array::from_fn(|_| RwLock::new(HashMap::new())),
            hasher: ahash::RandomState::new(),
            active: AtomicUsize::new(0),
        }
    }
}

impl ChannelMap {
    fn stripe(&self, channel: &[u8]) -> &RwLock<HashMap<Box<[u8]>, Subscribers>> {
        &self.stripes[(self.hasher.hash_one(channel) as usize) % STRIPES]
    }

    fn add(&self, channel: &[u8], client: &Arc<ClientShared>) {
        add_to(
            &mut self.stripe(channel).write(),
            &self.active,
            channel,
            client,
        );
    }

    fn remove(&self, channel: &[u8], client_id: u64) {
        remove_from(
            &mut self.stripe(channel).write(),
            &self.active,
            channel,
            client_id,
        );
    }

    fn subscribers(&self, channel: &[u8]) -> Option<Subscribers> {
        self.stripe(channel).read().get(channel).cloned()
    }

    fn count(&self, channel: &[u8]) -> usize {
        self.stripe(channel)
            .read()
            .get(channel)
            .map_or(0, |s| s.len())
    }

    fn matching(&self, pattern: Option<&[u8]>) -> Vec<Box<[u8]>> {
        let mut out = Vec::new();
        for stripe in &self.stripes {
            let map = stripe.read();
            out.extend(
                map.keys()
                    .filter(|c| pattern.is_none_or(|p| glob::matches(p, c, false)))
                    .cloned(),
            );
        }
        out
    }
}

#[derive(Default)]
pub struct PubSub {
    channels: ChannelMap,
    shard_channels: ChannelMap,
    patterns: RwLock<HashMap<Box<[u8]>, Subscribers>>,
    /// Distinct patterns with a subscriber: lets a publish skip the pattern lock when zero.
    pattern_count: AtomicUsize,
}

impl PubSub {
    /// The clients among `of` subscribed to a channel, pattern or shard channel that
    /// `allowed(kind, name)` refuses (ACL SETUSER disconnects them when a user loses a
    /// channel, as Redis does). Walks every subscription: an admin operation's cost.
    pub fn subscribers_refused(
        &self,
        of: &dyn Fn(&ClientShared) -> bool,
        allowed: &dyn Fn(Kind, &[u8]) -> bool,
    ) -> Vec<Arc<ClientShared>> {
        let mut out: IndexMap<u64, Arc<ClientShared>> = IndexMap::new();
        let mut visit = |kind: Kind, map: &HashMap<Box<[u8]>, Subscribers>| {
            for (name, subs) in map {
                for sub in subs.values() {
                    if of(&sub.client) && !allowed(kind, name) {
                        out.insert(sub.client.id, sub.client.clone());
                    }
                }
            }
        };
        for stripe in &self.channels.stripes {
            visit(Kind::Channel, &stripe.read());
        }
        for stripe in &self.shard_channels.stripes {
            visit(Kind::Shard, &stripe.read());
        }
        visit(Kind::Pattern, &self.patterns.read());
        out.into_values().collect()
    }

    /// Registers `client` on `name` in the namespace of `kind`. The caller keeps the client's
    /// own set of subscriptions and calls this only for names new to the client.
    pub fn subscribe(&self, kind: Kind, name: &[u8], client: &Arc<ClientShared>) {
        match kind {
            Kind::Channel => self.channels.add(name, client),
            Kind::Shard => self.shard_channels.add(name, client),
            Kind::Pattern => add_to(
                &mut self.patterns.write(),
                &self.pattern_count,
                name,
                client,
            ),
        }
    }

    pub fn unsubscribe(&self, kind: Kind, name: &[u8], client_id: u64) {
        match kind {
            Kind::Channel => self.channels.remove(name, client_id),
            Kind::Shard => self.shard_channels.remove(name, client_id),
            Kind::Pattern => remove_from(
                &mut self.patterns.write(),
                &self.pattern_count,
                name,
                client_id,
            ),
        }
    }

    /// Delivers `message` on `channel` to its subscribers and, for [`Kind::Channel`], to the
    /// subscribers of every matching pattern. Each encoded message goes to `deliver`, which
    /// queues it ([`Subscriber::deliver`]) or writes it straight to the publisher's own reply.
    /// Returns the number of deliveries, which is what PUBLISH answers.
    pub fn publish(
        &self,
        kind: Kind,
        channel: &[u8],
        message: &[u8],
        deliver: &mut dyn FnMut(&Subscriber, &[u8]),
    ) -> usize {
        let (map, label): (&ChannelMap, &[u8]) = match kind {
            Kind::Shard => (&self.shard_channels, b"smessage"),
            _ => (&self.channels, b"message"),
        };
        let mut delivered = 0;
        if let Some(subs) = map.subscribers(channel) {
            let mut encoded = Encoded::new(|reply| {
                reply.push(3);
                reply.bulk(label);
                reply.bulk(channel);
                reply.bulk(message);
            });
            for sub in subs.values() {
                deliver(sub, encoded.get(sub.client.protocol()));
                delivered += 1;
            }
        }
        if kind == Kind::Channel && self.pattern_count.load(Relaxed) > 0 {
            let matches: Vec<(Box<[u8]>, Subscribers)> = self
                .patterns
                .read()
                .iter()
                .filter(|(p, _)| glob::matches(p, channel, false))
                .map(|(p, s)| (p.clone(), s.clone()))
                .collect();
            for (pattern, subs) in matches {
                let mut encoded = Encoded::new(|reply| {
                    reply.push(4);
                    reply.bulk(b"pmessage");
                    reply.bulk(&pattern);
                    reply.bulk(channel);
                    reply.bulk(message);
                });
                for sub in subs.values() {
                    deliver(sub, encoded.get(sub.client.protocol()));
                    delivered += 1;
                }
            }
        }
        delivered
    }

    /// Active channels (or shard channels) whose name matches `pattern` (all if None).
    pub fn channels(&self, kind: Kind, pattern: Option<&[u8]>) -> Vec<Box<[u8]>> {
        match kind {
            Kind::Shard => self.shard_channels.matching(pattern),
            _ => self.channels.matching(pattern),
        }
    }

    /// Subscribers of one channel (or shard channel), patterns not counted.
    pub fn subscriber_count(&self, kind: Kind, channel: &[u8]) -> usize {
        match kind {
            Kind::Shard => self.shard_channels.count(channel),
            _ => self.channels.count(channel),
        }
    }

    /// Channels with at least one subscriber (INFO `pubsub_channels`).
    pub fn channel_count(&self) -> usize {
        self.channels.active.load(Relaxed)
    }

    /// Shard channels with at least one subscriber (INFO `pubsub_shardchannels`).
    pub fn shard_channel_count(&self) -> usize {
        self.shard_channels.active.load(Relaxed)
    }

    /// Distinct patterns with at least one subscriber (PUBSUB NUMPAT, INFO `pubsub_patterns`).
    pub fn pattern_count(&self) -> usize {
        self.pattern_count.load(Relaxed)
    }
}

/// One message encoded at most once per protocol version: RESP2 subscribers get an array,
/// RESP3 subscribers a push, and the bytes are otherwise the same for all of them.
struct Encoded<F: Fn(&mut Reply<'_>)> {
    write: F,
    resp2: Option<BytesMut>,
    resp3: Option<BytesMut>,
}

impl<F: Fn(&mut Reply<'_>)> Encoded<F> {
    fn new(write: F) -> Self {
        Encoded {
            write,
            resp2: None,
            resp3: None,
        }
    }

    fn get(&mut self, version: ProtocolVersion) -> &[u8] {
        let slot = match version {
            ProtocolVersion::Resp2 => &mut self.resp2,
            ProtocolVersion::Resp3 => &mut self.resp3,
        };
        slot.get_or_insert_with(|| {
            let mut buf = BytesMut::new();
            (self.write)(&mut Reply::new(&mut buf, version));
            buf
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::SocketAddr;

    fn client(id: u64, resp3: bool) -> Arc<ClientShared> {
        let addr: SocketAddr = "127.0.0.1:1".parse().unwrap();
        let c = Arc::new(ClientShared::new(id, addr, addr));
        if resp3 {
            c.protocol.store(3, Relaxed);
        }
        c
    }

    fn publish_collect(ps: &PubSub, kind: Kind, ch: &[u8], msg: &[u8]) -> Vec<(u64, Vec<u8>)> {
        let mut out = Vec::new();
        let n = ps.publish(kind, ch, msg, &mut |c, bytes| {
            out.push((c.client.id, bytes.to_vec()))
        });
        assert_eq!(n, out.len());
        out.sort();
        out
    }

    #[test]
    fn channels_patterns_and_shards_are_separate_namespaces() {
        let ps = PubSub::default();
        let (a, b) = (client(1, false), client(2, true));
        ps.subscribe(Kind::Channel, b"news", &a);
        ps.subscribe(Kind::Pattern, b"n*", &b);
        ps.subscribe(Kind::Shard, b"news", &b);
        let got = publish_collect(&ps, Kind::Channel, b"news", b"hi");
        assert_eq!(
            got,
            vec![
                (
                    1,
                    b"*3\r\n$7\r\nmessage\r\n$4\r\nnews\r\n$2\r\nhi\r\n".to_vec()
                ),
                (
                    2,
                    b">4\r\n$8\r\npmessage\r\n$2\r\nn*\r\n$4\r\nnews\r\n$2\r\nhi\r\n".to_vec()
                ),
            ]
        );
        let got = publish_collect(&ps, Kind::Shard, b"news", b"x");
        assert_eq!(
            got,
            vec![(
                2,
                b">3\r\n$8\r\nsmessage\r\n$4\r\nnews\r\n$1\r\nx\r\n".to_vec()
            )]
        );
        assert_eq!(ps.channel_count(), 1);
        assert_eq!(ps.shard_channel_count(), 1);
        assert_eq!(ps.pattern_count(), 1);
    }

    #[test]
    fn unsubscribing_the_last_client_drops_the_channel() {
        let ps = PubSub::default();
        let (a, b) = (client(1, false), client(2, false));
        ps.subscribe(Kind::Channel, b"c", &a);
        ps.subscribe(Kind::Channel, b"c", &b);
        ps.subscribe(Kind::Pattern, b"*", &a);
        ps.subscribe(Kind::Pattern, b"*", &b);
        assert_eq!(ps.subscriber_count(Kind::Channel, b"c"), 2);
        assert_eq!(ps.pattern_count(), 1, "NUMPAT counts distinct patterns");
        ps.unsubscribe(Kind::Channel, b"c", 1);
        assert_eq!(ps.channels(Kind::Channel, None).len(), 1);
        ps.unsubscribe(Kind::Channel, b"c", 2);
        ps.unsubscribe(Kind::Pattern, b"*", 1);
        ps.unsubscribe(Kind::Pattern, b"*", 2);
        assert!(ps.channels(Kind::Channel, None).is_empty());
        assert_eq!(ps.channel_count(), 0);
        assert_eq!(ps.pattern_count(), 0);
        assert_eq!(publish_collect(&ps, Kind::Channel, b"c", b"m"), vec![]);
    }

    #[test]
    fn a_publish_in_flight_keeps_its_snapshot() {
        let ps = PubSub::default();
        let a = client(1, false);
        ps.subscribe(Kind::Channel, b"c", &a);
        let snapshot = ps.channels.subscribers(b"c").unwrap();
        ps.subscribe(Kind::Channel, b"c", &client(2, false));
        assert_eq!(snapshot.len(), 1, "copy-on-write left the snapshot alone");
        assert_eq!(ps.subscriber_count(Kind::Channel, b"c"), 2);
    }

    #[test]
    fn a_late_delivery_to_an_ended_subscription_is_dropped() {
        let ps = PubSub::default();
        let a = client(1, false);
        ps.subscribe(Kind::Channel, b"c", &a);
        let snapshot = ps.channels.subscribers(b"c").unwrap();
        ps.unsubscribe(Kind::Channel, b"c", 1);
        // A publisher that took its snapshot before the unsubscribe delivers now.
        snapshot[&1].deliver(b"late");
        assert!(a.pushes.lock().is_empty());
        ps.subscribe(Kind::Channel, b"c", &a);
        ps.channels.subscribers(b"c").unwrap()[&1].deliver(b"on time");
        assert_eq!(&a.pushes.lock()[..], b"on time");
    }

    #[test]
    fn channel_listing_filters_by_glob() {
        let ps = PubSub::default();
        let a = client(1, false);
        for ch in [&b"user:1"[..], b"user:2", b"news"] {
            ps.subscribe(Kind::Channel, ch, &a);
        }
        let mut got = ps.channels(Kind::Channel, Some(b"user:*"));
        got.sort();
        assert_eq!(
            got,
            vec![b"user:1".to_vec().into(), b"user:2".to_vec().into()]
        );
        assert!(ps.channels(Kind::Shard, None).is_empty());
    }
}
