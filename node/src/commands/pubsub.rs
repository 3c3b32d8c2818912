//! Pub/sub: SUBSCRIBE UNSUBSCRIBE PSUBSCRIBE PUNSUBSCRIBE SSUBSCRIBE SUNSUBSCRIBE PUBLISH
//! SPUBLISH PUBSUB (CHANNELS NUMSUB NUMPAT SHARDCHANNELS SHARDNUMSUB HELP).
//!
//! A client's subscriptions live in two places kept in step: its own sets (`Client::channels`,
//! `patterns`, `shard_channels`), which answer the counts in confirmations, and the server's
//! registry ([`crate::node_state::pubsub`]), which publishers read. Confirmations are this command's
//! reply — one `[kind, name, count]` per name, as a push in RESP3 — while messages published
//! to a client reach it through its push queue.
//!
//! Shard channels behave as channels in standalone mode, in a namespace of their own.

use crate::command_framework::args;
use crate::command_framework::error::err;
use crate::command_framework::spec::{command, flags::*, KeySpec, KEY1};
use crate::command_framework::{CmdResult, CommandSpec, Ctx};
use crate::node_state::pubsub::{Kind, MAX_SUBSCRIPTIONS_PER_CLIENT};
use crate::node_state::stats::Stats;
use crate::node_state::{Client, NodeState};
use bytes::BytesMut;
use std::collections::HashSet;
use std::sync::atomic::Ordering::Relaxed;

/// Keys of SSUBSCRIBE / SUNSUBSCRIBE: every channel is a key (it picks the cluster slot).
const ALL_CHANNELS_KEYS: KeySpec = KeySpec::Range {
    first: 1,
    last: -1,
    step: 1,
};

const SUB_FLAGS: u32 = PUBSUB | NOSCRIPT | LOADING | STALE | SUBSCRIBED_OK;

pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        since: "2.0.0",
        ..command(
            "subscribe",
            -2,
            SUB_FLAGS,
            KeySpec::None,
            subscribe,
            "pubsub",
            "Listens for messages published to channels.",
        )
    },
    CommandSpec {
        since: "2.0.0",
        ..command(
            "unsubscribe",
            -1,
            SUB_FLAGS,
            KeySpec::None,
            unsubscribe,
            "pubsub",
            "Stops listening to messages posted to channels.",
        )
    },
    CommandSpec {
        since: "2.0.0",
        ..command(
            "psubscribe",
            -2,
            SUB_FLAGS,
            KeySpec::None,
            psubscribe,
            "pubsub",
            "Listens for messages published to channels that match one or more patterns.",
        )
    },
    CommandSpec {
        since: "2.0.0",
        ..command(
            "punsubscribe",
            -1,
            SUB_FLAGS,
            KeySpec::None,
            punsubscribe,
            "pubsub",
            "Stops listening to messages published to channels that match one or more patterns.",
        )
    },
    CommandSpec {
        since: "7.0.0",
        ..command(
            "ssubscribe",
            -2,
            SUB_FLAGS,
            ALL_CHANNELS_KEYS,
            ssubscribe,
            "pubsub",
            "Listens for messages published to shard channels.",
        )
    },
    CommandSpec {
        since: "7.0.0",
        ..command(
            "sunsubscribe",
            -1,
            SUB_FLAGS,
            ALL_CHANNELS_KEYS,
            sunsubscribe,
            "pubsub",
            "Stops listening to messages posted to shard channels.",
        )
    },
    CommandSpec {
        since: "2.0.0",
        ..command(
            "publish",
            3,
            PUBSUB | LOADING | STALE | FAST | MAY_REPLICATE,
            KeySpec::None,
            publish,
            "pubsub",
            "Posts a message to a channel.",
        )
    },
    CommandSpec {
        since: "7.0.0",
        ..command(
            "spublish",
            3,
            PUBSUB | LOADING | STALE | FAST | MAY_REPLICATE,
            KEY1,
            spublish,
            "pubsub",
            "Post a message to a shard channel",
        )
    },
    CommandSpec {
        since: "2.8.0",
        subcommands: PUBSUB_SUBCOMMANDS,
        ..command(
            "pubsub",
            -2,
            0,
            KeySpec::None,
            pubsub_help,
            "pubsub",
            "A container for Pub/Sub commands.",
        )
    },
];

const INTROSPECT_FLAGS: u32 = PUBSUB | LOADING | STALE;

static PUBSUB_SUBCOMMANDS: &[CommandSpec] = &[
    CommandSpec {
        since: "2.8.0",
        ..command(
            "pubsub|channels",
            -2,
            INTROSPECT_FLAGS,
            KeySpec::None,
            pubsub_channels,
            "pubsub",
            "Returns the active channels.",
        )
    },
    CommandSpec {
        since: "2.8.0",
        ..command(
            "pubsub|numsub",
            -2,
            INTROSPECT_FLAGS,
            KeySpec::None,
            pubsub_numsub,
            "pubsub",
            "Returns a count of subscribers to channels.",
        )
    },
    CommandSpec {
        since: "2.8.0",
        ..command(
            "pubsub|numpat",
            2,
            INTROSPECT_FLAGS,
            KeySpec::None,
            pubsub_numpat,
            "pubsub",
            "Returns a count of unique pattern subscriptions.",
        )
    },
    CommandSpec {
        since: "7.0.0",
        ..command(
            "pubsub|shardchannels",
            -2,
            INTROSPECT_FLAGS,
            KeySpec::None,
            pubsub_shardchannels,
            "pubsub",
            "Returns the active shard channels.",
        )
    },
    CommandSpec {
        since: "7.0.0",
        ..command(
            "pubsub|shardnumsub",
            -2,
            INTROSPECT_FLAGS,
            KeySpec::None,
            pubsub_shardnumsub,
            "pubsub",
            "Returns the count of subscribers of shard channels.",
        )
    },
    CommandSpec {
        since: "6.2.0",
        ..command(
            "pubsub|help",
            2,
            LOADING | STALE,
            KeySpec::None,
            pubsub_help,
            "pubsub",
            "Returns helpful text about the different subcommands.",
        )
    },
];

/// The client's own set of subscriptions of one kind.
fn set_of(client: &mut Client, kind: Kind) -> &mut HashSet<Box<[u8]>> {
    match kind {
        Kind::Channel => &mut client.channels,
        Kind::Pattern => &mut client.patterns,
        Kind::Shard => &mut client.shard_channels,
    }
}

/// The count a confirmation carries: channels and patterns together, shard channels apart
/// (as Redis 7.0 counts them).
fn confirm_count(client: &Client, kind: Kind) -> i64 {
    match kind {
        Kind::Shard => client.shard_channels.len() as i64,
        _ => (client.channels.len() + client.patterns.len()) as i64,
    }
}

fn total_subscriptions(client: &Client) -> usize {
    client.channels.len() + client.patterns.len() + client.shard_channels.len()
}

/// Mirrors the client's sets into what others read (CLIENT LIST, the idle timeout) and sets
/// subscribed mode, which restricts commands for RESP2 clients (the dispatcher checks it).
fn sync_counters(client: &mut Client) {
    let shared = &client.shared;
    shared.subscriptions.store(client.channels.len(), Relaxed);
    shared
        .pattern_subscriptions
        .store(client.patterns.len(), Relaxed);
    shared
        .shard_subscriptions
        .store(client.shard_channels.len(), Relaxed);
    client.subscribed = total_subscriptions(client) > 0;
}

/// Moves messages already queued for this client into its reply, where Redis would have
/// written them: ahead of the confirmation being written. Needed for order, not only for
/// looks: a RESP2 client leaving subscribed mode must find no message behind the last
/// confirmation. Not inside EXEC, whose array is being written; they follow it there.
fn take_pending(ctx: &mut Ctx<'_>) {
    if ctx.in_exec {
        return;
    }
    let shared = ctx.client.shared.clone();
    let mut pending = shared.pushes.lock();
    if !pending.is_empty() {
        ctx.reply.raw(&pending);
        pending.clear();
    }
}

fn confirm(ctx: &mut Ctx<'_>, verb: &[u8], name: Option<&[u8]>, kind: Kind) {
    let count = confirm_count(ctx.client, kind);
    let r = &mut ctx.reply;
    r.push(3);
    r.bulk(verb);
    match name {
        Some(n) => r.bulk(n),
        None => r.null(),
    }
    r.integer(count);
}

fn subscribe_to(ctx: &mut Ctx<'_>, args: &[&[u8]], kind: Kind, verb: &'static [u8]) -> CmdResult {
    let names = &args[1..];
    let set = set_of(ctx.client, kind);
    let new = names.iter().filter(|n| !set.contains(**n)).count();
    if total_subscriptions(ctx.client) + new > MAX_SUBSCRIPTIONS_PER_CLIENT {
        return err(format!(
            "ERR this client would exceed {MAX_SUBSCRIPTIONS_PER_CLIENT} subscriptions"
        ));
    }
    take_pending(ctx);
    for name in names {
        if set_of(ctx.client, kind).insert((*name).into()) {
            ctx.server.pubsub.subscribe(kind, name, &ctx.client.shared);
        }
        confirm(ctx, verb, Some(name), kind);
    }
    sync_counters(ctx.client);
    Ok(())
}

fn unsubscribe_from(
    ctx: &mut Ctx<'_>,
    args: &[&[u8]],
    kind: Kind,
    verb: &'static [u8],
) -> CmdResult {
    let id = ctx.client.id();
    if args.len() > 1 {
        for name in &args[1..] {
            if set_of(ctx.client, kind).remove(*name) {
                ctx.server.pubsub.unsubscribe(kind, name, id);
            }
            take_pending(ctx);
            confirm(ctx, verb, Some(name), kind);
        }
    } else {
        let all: Vec<Box<[u8]>> = set_of(ctx.client, kind).iter().cloned().collect();
        if all.is_empty() {
            confirm(ctx, verb, None, kind);
        }
        for name in all {
            set_of(ctx.client, kind).remove(&name);
            ctx.server.pubsub.unsubscribe(kind, &name, id);
            take_pending(ctx);
            confirm(ctx, verb, Some(&name), kind);
        }
    }
    sync_counters(ctx.client);
    Ok(())
}

fn subscribe(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    subscribe_to(ctx, args, Kind::Channel, b"subscribe")
}

fn unsubscribe(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    unsubscribe_from(ctx, args, Kind::Channel, b"unsubscribe")
}

fn psubscribe(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    subscribe_to(ctx, args, Kind::Pattern, b"psubscribe")
}

fn punsubscribe(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    unsubscribe_from(ctx, args, Kind::Pattern, b"punsubscribe")
}

fn ssubscribe(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    // Redis 7.0 refuses SSUBSCRIBE inside a transaction (SUBSCRIBE and PSUBSCRIBE pass).
    if ctx.in_exec {
        return err("ERR SSUBSCRIBE isn't allowed for a DENY BLOCKING client");
    }
    subscribe_to(ctx, args, Kind::Shard, b"ssubscribe")
}

fn sunsubscribe(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    unsubscribe_from(ctx, args, Kind::Shard, b"sunsubscribe")
}

/// Delivers a message and returns the number of receivers. A message to the publisher
/// itself (a RESP3 client may publish to its own channel) goes straight into its reply
/// ahead of the count, where Redis puts it; inside EXEC it is queued instead, so the
/// transaction's array stays whole.
fn deliver(ctx: &mut Ctx<'_>, kind: Kind, channel: &[u8], message: &[u8]) -> usize {
    let me = ctx.client.id();
    let direct = !ctx.in_exec;
    let mut own = BytesMut::new();
    let receivers = ctx
        .server
        .pubsub
        .publish(kind, channel, message, &mut |sub, bytes| {
            if direct && sub.client.id == me {
                own.extend_from_slice(bytes);
            } else if !sub.client.is_killed() {
                sub.deliver(bytes);
            }
        });
    if !own.is_empty() {
        ctx.reply.raw(&own);
    }
    Stats::add(&ctx.server.stats.pubsub_messages, 1);
    receivers
}

/// In cluster mode the other nodes' subscribers get it through the bus (PUBLISH to every
/// node, SPUBLISH to this node's shard), as Redis Cluster propagates it; the count is this
/// node's receivers, as in Redis. A message too large for one bus message is refused
/// before anything is delivered; one the bus is too far behind to take is counted
/// (INFO stats `cluster_publish_dropped`) and logged.
fn propagate(ctx: &Ctx<'_>, shard: bool, channel: &[u8], message: &[u8]) -> CmdResult {
    use crate::cluster::transport::{PublishRefused, PUBLISH_PAYLOAD_MAX};
    if let Some(bus) = ctx.server.cluster.as_ref().and_then(|c| c.bus.get()) {
        match bus.publish(shard, channel, message) {
            Ok(()) => {}
            Err(PublishRefused::TooLarge) => {
                return Err(crate::command_framework::CmdError::new(format!(
                    "ERR message too large for the cluster bus: the channel may be {} bytes \
                     and channel plus message {PUBLISH_PAYLOAD_MAX} bytes at most",
                    proto::bus::limits::CHANNEL_MAX
                )))
            }
            Err(PublishRefused::Behind) => {
                tracing::warn!("cluster bus behind: a PUBLISH was not propagated");
            }
        }
    }
    Ok(())
}

fn publish(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    propagate(ctx, false, args[1], args[2])?;
    let n = deliver(ctx, Kind::Channel, args[1], args[2]);
    ctx.reply.integer(n as i64);
    Ok(())
}

fn spublish(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    propagate(ctx, true, args[1], args[2])?;
    let n = deliver(ctx, Kind::Shard, args[1], args[2]);
    ctx.reply.integer(n as i64);
    Ok(())
}

/// CHANNELS / SHARDCHANNELS take at most one pattern; Redis answers more with this text.
fn at_most_one_pattern(args: &[&[u8]]) -> CmdResult {
    if args.len() > 3 {
        return err(format!(
            "ERR unknown subcommand or wrong number of arguments for '{}'. Try PUBSUB HELP.",
            args::text(args[1])
        ));
    }
    Ok(())
}

fn list_channels(ctx: &mut Ctx<'_>, args: &[&[u8]], kind: Kind) -> CmdResult {
    at_most_one_pattern(args)?;
    let names = ctx.server.pubsub.channels(kind, args.get(2).copied());
    ctx.reply.array(names.len());
    for n in &names {
        ctx.reply.bulk(n);
    }
    Ok(())
}

fn count_subscribers(ctx: &mut Ctx<'_>, args: &[&[u8]], kind: Kind) -> CmdResult {
    let channels = &args[2..];
    ctx.reply.array(channels.len() * 2);
    for ch in channels {
        let n = ctx.server.pubsub.subscriber_count(kind, ch);
        ctx.reply.bulk(ch);
        ctx.reply.integer(n as i64);
    }
    Ok(())
}

fn pubsub_channels(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    list_channels(ctx, args, Kind::Channel)
}

fn pubsub_shardchannels(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    list_channels(ctx, args, Kind::Shard)
}

fn pubsub_numsub(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    count_subscribers(ctx, args, Kind::Channel)
}

fn pubsub_shardnumsub(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    count_subscribers(ctx, args, Kind::Shard)
}

fn pubsub_numpat(ctx: &mut Ctx<'_>, _args: &[&[u8]]) -> CmdResult {
    let n = ctx.server.pubsub.pattern_count();
    ctx.reply.integer(n as i64);
    Ok(())
}

const HELP: &[&str] = &[
    "PUBSUB <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "CHANNELS [<pattern>]",
    "    Return the currently active channels matching a <pattern> (default: '*').",
    "NUMPAT",
    "    Return number of subscriptions to patterns.",
    "NUMSUB [<channel> ...]",
    "    Return the number of subscribers for the specified channels, excluding",
    "    pattern subscriptions(default: no channels).",
    "SHARDCHANNELS [<pattern>]",
    "    Return the currently active shard level channels matching a <pattern> (default: '*').",
    "SHARDNUMSUB [<shardchannel> ...]",
    "    Return the number of subscribers for the specified shard level channel(s)",
    "HELP",
    "    Prints this help.",
];

fn pubsub_help(ctx: &mut Ctx<'_>, _args: &[&[u8]]) -> CmdResult {
    crate::commands::introspection::reply_help(&mut ctx.reply, HELP);
    Ok(())
}

/// Drops every subscription of a client that is going away (disconnect) or resets (RESET).
/// Writes no reply; messages still queued are dropped too, so that a RESET connection
/// starts clean (a RESP2 client must not find a message where it expects a reply).
pub fn unsubscribe_all(server: &NodeState, client: &mut Client) {
    let id = client.id();
    for kind in [Kind::Channel, Kind::Pattern, Kind::Shard] {
        for name in set_of(client, kind).drain() {
            server.pubsub.unsubscribe(kind, &name, id);
        }
    }
    client.shared.pushes.lock().clear();
    sync_counters(client);
}

#[cfg(test)]
mod tests {
    use crate::command_framework::{dispatch, table};
    use crate::node_state::stats::LocalStats;
    use crate::node_state::{Client, ClientShared};
    use crate::server::Server;
    use std::sync::Arc;

    fn test_client(server: &Server) -> Client {
        let addr: std::net::SocketAddr = "127.0.0.1:1".parse().unwrap();
        let shared = ClientShared::new(server.clients.next_id(), addr, addr);
        Client::new(Arc::new(shared), true)
    }

    /// Runs one request through the dispatcher, as a connection does; returns the reply.
    fn request(server: &Server, client: &mut Client, args: &[&str]) -> String {
        let mut out = bytes::BytesMut::new();
        let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        dispatch::execute(server, client, &mut out, &args, &mut LocalStats::default());
        String::from_utf8_lossy(&out).into_owned()
    }

    #[test]
    fn queued_messages_precede_the_unsubscribe_confirmation() {
        // No connection drains the subscriber's queue here, so the messages wait in it, as
        // they may while a connection is busy; UNSUBSCRIBE must put them ahead of its reply.
        crate::commands::install_table();
        let server = Server::new(crate::config::Config::default());
        let (mut sub, mut publisher) = (test_client(&server), test_client(&server));
        request(&server, &mut sub, &["SUBSCRIBE", "c"]);
        assert!(sub.subscribed);
        assert_eq!(
            request(&server, &mut publisher, &["PUBLISH", "c", "m1"]),
            ":1\r\n"
        );
        assert_eq!(
            request(&server, &mut sub, &["UNSUBSCRIBE", "c"]),
            "*3\r\n$7\r\nmessage\r\n$1\r\nc\r\n$2\r\nm1\r\n\
             *3\r\n$11\r\nunsubscribe\r\n$1\r\nc\r\n:0\r\n"
        );
        assert!(!sub.subscribed && sub.shared.pushes.lock().is_empty());
        assert_eq!(sub.shared.subscription_count(), 0);
        assert_eq!(
            request(&server, &mut publisher, &["PUBLISH", "c", "m2"]),
            ":0\r\n"
        );

        // RESET drops what is still queued: the connection starts clean.
        request(&server, &mut sub, &["PSUBSCRIBE", "*"]);
        request(&server, &mut publisher, &["PUBLISH", "c", "m3"]);
        assert!(!sub.shared.pushes.lock().is_empty());
        assert_eq!(request(&server, &mut sub, &["RESET"]), "+RESET\r\n");
        assert!(sub.shared.pushes.lock().is_empty() && !sub.subscribed);
        assert_eq!(server.pubsub.pattern_count(), 0);
    }

    #[test]
    fn table_entries_resolve_with_redis_arity() {
        let sub = table::lookup(b"SUBSCRIBE").unwrap();
        assert!(!sub.arity_ok(1) && sub.arity_ok(3));
        let pubsub = table::lookup(b"pubsub").unwrap();
        let numpat = table::lookup_sub(pubsub, b"NUMPAT").unwrap();
        assert_eq!(numpat.name, "pubsub|numpat");
        assert!(numpat.arity_ok(2) && !numpat.arity_ok(3));
        assert!(table::lookup_sub(pubsub, b"help").is_some());
    }

    #[test]
    fn shard_channels_are_keys_for_slot_routing() {
        let ss = table::lookup(b"ssubscribe").unwrap();
        let args: [&[u8]; 3] = [b"ssubscribe", b"a", b"b"];
        assert_eq!(ss.key_positions(&args).as_slice(), &[1, 2]);
        let sp = table::lookup(b"spublish").unwrap();
        let args: [&[u8]; 3] = [b"spublish", b"ch", b"msg"];
        assert_eq!(sp.key_positions(&args).as_slice(), &[1]);
    }
}
