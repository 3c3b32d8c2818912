//! The ACL check every request passes before it runs or is queued (called by the
//! dispatcher's admission, for TCP and fabric clients alike, and by EXEC for each queued
//! command): the client's user must be allowed the command, its keys (by the access the
//! command's key specs give them) and its channels. Refusals are logged in the ACL LOG.

use super::key_access;
use super::spec::CommandSpec;
use super::CmdError;
use crate::clock::unix_millis;
use crate::node_state::acl::log::{Context, Reason};
use crate::node_state::acl::rules::{KEY_READ, KEY_WRITE};
use crate::node_state::acl::{catalog, Denial, Request, Rules, User};
use crate::node_state::{Client, NodeState};
use smallvec::SmallVec;
use std::sync::Arc;

/// The user a client's commands are checked against.
pub fn user_of<'a>(server: &'a NodeState, client: &'a Client) -> &'a Arc<User> {
    client
        .user
        .as_ref()
        .unwrap_or_else(|| server.acl.default_user())
}

/// Whether the client's user may run `args` (`redis.acl_check_cmd`): no ACL LOG entry.
pub fn allowed(server: &NodeState, client: &Client, spec: &CommandSpec, args: &[&[u8]]) -> bool {
    let user = user_of(server, client);
    user.unrestricted() || denial(&user.rules(), spec, args).is_ok()
}

/// Checks the request against the client's user; a refusal is logged and answered
/// NOPERM with Redis 7.0's text.
///
/// Inlined for its first test (a user allowed everything, as the default user is): the call
/// and frame of the whole check cost a command ~20 instructions for that one load
/// (callgrind). The same split is made, for the same reason, by `redirect::check` (no
/// cluster), `eviction::make_room` (no `maxmemory`), `pause_hold` (no pause) and
/// `sync_acks::hold_for_acks` (no `repl-sync-acks`).
#[inline]
pub fn check(
    server: &NodeState,
    client: &Client,
    spec: &CommandSpec,
    args: &[&[u8]],
    context: Context,
) -> Result<(), CmdError> {
    let user = user_of(server, client);
    if user.unrestricted() {
        return Ok(());
    }
    check_rules(server, client, user, spec, args, context)
}

/// [`check`] for `user`, the client's, who has rules.
fn check_rules(
    server: &NodeState,
    client: &Client,
    user: &User,
    spec: &CommandSpec,
    args: &[&[u8]],
    context: Context,
) -> Result<(), CmdError> {
    let rules = user.rules();
    let Err(denial) = denial(&rules, spec, args) else {
        return Ok(());
    };
    drop(rules);
    let (reason, object): (Reason, &[u8]) = match denial {
        Denial::Command => (Reason::Command, spec.name.as_bytes()),
        Denial::Key(i) => (Reason::Key, args[i]),
        Denial::Channel(i) => (Reason::Channel, args[i]),
    };
    server.acl.log.add(
        reason,
        context,
        object,
        user.name.as_bytes(),
        unix_millis(),
        client_info(client),
        server.config.read().acllog_max_len as usize,
    );
    if context == Context::Lua {
        // Redis 7.0's `scriptVerifyACL` texts: the script's error names the script, not a
        // NOPERM of the caller's own command.
        return Err(CmdError::new(match denial {
            Denial::Command => {
                "ERR The user executing the script can't run this command or subcommand"
            }
            Denial::Key(_) => {
                "ERR The user executing the script can't access at least one of the keys mentioned in the command"
            }
            Denial::Channel(_) => {
                "ERR The user executing the script can't publish to the channel mentioned in the command"
            }
        }));
    }
    Err(CmdError::new(match denial {
        Denial::Command => format!(
            "NOPERM this user has no permissions to run the '{}' command",
            spec.name
        ),
        Denial::Key(_) => {
            "NOPERM this user has no permissions to access one of the keys used as arguments".into()
        }
        Denial::Channel(_) => {
            "NOPERM this user has no permissions to access one of the channels used as arguments"
                .into()
        }
    }))
}

/// Why `rules` refuse the request, if they do (ACL DRYRUN asks this without logging).
pub fn denial(rules: &Rules, spec: &CommandSpec, args: &[&[u8]]) -> Result<(), Denial> {
    if rules.unrestricted() {
        return Ok(());
    }
    let catalog = catalog::get();
    let Some(command) = catalog.id(spec.name) else {
        // Every spec of the table is in the catalog; refuse what is not, to be safe.
        return Err(Denial::Command);
    };
    let mut keys: SmallVec<[(usize, u8); 16]> = SmallVec::new();
    if !rules.all_keys && !SHARD_CHANNEL_COMMANDS.contains(&spec.name) {
        for (nth, i) in spec.key_positions(args).into_iter().enumerate() {
            if i < args.len() {
                keys.push((i, key_flags(key_access::flags_of_key(spec, args, i, nth))));
            }
        }
    }
    let channels = channel_positions(spec, args);
    rules.check(
        catalog,
        &Request {
            command,
            args,
            keys: &keys,
            channels: &channels,
        },
    )
}

/// Commands whose key positions hold shard channels, there for slot routing only (Redis
/// 7.0 marks them `not_key`): ACL rules check them as channels, not keys.
const SHARD_CHANNEL_COMMANDS: &[&str] = &["spublish", "ssubscribe", "sunsubscribe"];

/// What ACL rules need of a key, from its key-spec flags: `access` reads its data;
/// `insert`, `update` and `delete` write it (Redis 7.0's mapping).
fn key_flags(spec_flags: &[&str]) -> u8 {
    spec_flags.iter().fold(0, |flags, f| match *f {
        "access" => flags | KEY_READ,
        "insert" | "update" | "delete" => flags | KEY_WRITE,
        _ => flags,
    })
}

/// The channels a command names, and whether each is a pattern: PUBLISH's and SPUBLISH's
/// channel, (S)SUBSCRIBE's channels, PSUBSCRIBE's patterns. Unsubscribing needs no right.
fn channel_positions(spec: &CommandSpec, args: &[&[u8]]) -> SmallVec<[(usize, bool); 4]> {
    match spec.name {
        "publish" | "spublish" if args.len() > 1 => SmallVec::from_slice(&[(1, false)]),
        "subscribe" | "ssubscribe" => (1..args.len()).map(|i| (i, false)).collect(),
        "psubscribe" => (1..args.len()).map(|i| (i, true)).collect(),
        _ => SmallVec::new(),
    }
}

/// The client as an ACL LOG entry describes it (a subset of CLIENT LIST's fields).
fn client_info(client: &Client) -> String {
    let shared = &client.shared;
    format!(
        "id={} addr={} laddr={} name={} age={} idle={} db=0 user={} resp={}",
        shared.id,
        shared.peer,
        shared.local,
        shared.name.lock().clone().unwrap_or_default(),
        shared.created.elapsed().as_secs(),
        shared.idle_secs(),
        shared.username(),
        if client.protocol == proto::resp::ProtocolVersion::Resp3 {
            3
        } else {
            2
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command_framework::dispatch::resolve;

    fn verdict(rules: &str, args: &[&str]) -> Result<(), Denial> {
        crate::commands::install_table();
        let mut r = Rules::new(false);
        for op in rules.split_whitespace() {
            r.apply(catalog::get(), op, false).unwrap();
        }
        let a: Vec<&[u8]> = args.iter().map(|s| s.as_bytes()).collect();
        denial(&r, resolve(&a).unwrap(), &a)
    }

    /// Goal: a write-only user cannot read through writes that hand data out, a read-only
    /// one cannot write through reads that store, and shard channels are channels.
    #[test]
    fn key_access_follows_what_the_command_does_with_the_key() {
        let w = "on +@all %W~*";
        assert_eq!(verdict(w, &["set", "k", "v"]), Ok(()));
        assert_eq!(verdict(w, &["get", "k"]), Err(Denial::Key(1)));
        assert_eq!(verdict(w, &["set", "k", "v", "get"]), Err(Denial::Key(1)));
        assert_eq!(
            verdict(w, &["bitfield", "k", "get", "u4", "0"]),
            Err(Denial::Key(1))
        );
        assert_eq!(
            verdict(w, &["georadius", "k", "0", "0", "1", "km"]),
            Err(Denial::Key(1))
        );
        assert_eq!(
            verdict(w, &["migrate", "h", "1", "k", "0", "100"]),
            Err(Denial::Key(3))
        );
        let r = "on +@all %R~src ~dst";
        assert_eq!(verdict(r, &["copy", "src", "dst"]), Ok(()));
        assert_eq!(verdict(r, &["copy", "dst", "src"]), Err(Denial::Key(2)));
        assert_eq!(verdict(r, &["exists", "src"]), Ok(()));
        let s = "on +@all allkeys resetchannels &orders";
        assert_eq!(
            verdict(
                "on +@all resetchannels &orders",
                &["spublish", "orders", "m"]
            ),
            Ok(())
        );
        assert_eq!(
            verdict(s, &["spublish", "other", "m"]),
            Err(Denial::Channel(1))
        );
        assert_eq!(
            verdict(s, &["ssubscribe", "orders", "x"]),
            Err(Denial::Channel(2))
        );
    }
}
