//! CLIENT ID | SETNAME | GETNAME | LIST | INFO | KILL | SETINFO | NO-EVICT | REPLY | HELP;
//! PAUSE, UNPAUSE and UNBLOCK are in `client_control`; TRACKING, CACHING, GETREDIR and
//! TRACKINGINFO in `client_tracking`.

use super::{client_control, client_tracking};
use crate::command_framework::args::{self, is};
use crate::command_framework::error::err;
use crate::command_framework::spec::{command, flags::*, KeySpec};
use crate::command_framework::{CmdError, CmdResult, CommandSpec, Ctx};
use crate::node_state::tracking::client_state::{BCAST, BROKEN_REDIRECT, ON};
use crate::node_state::ClientShared;
use std::fmt::Write;
use std::sync::atomic::Ordering::Relaxed;

const FLAGS: u32 = NOSCRIPT | LOADING | STALE;
const CONNECTION: &str = "connection";

pub static SUBCOMMANDS: &[CommandSpec] = &[
    CommandSpec { since: "5.0.0", ..command("client|id", 2, FLAGS, KeySpec::None, id, CONNECTION, "Returns the unique client ID of the connection.") },
    CommandSpec { since: "2.6.9", ..command("client|setname", 3, FLAGS, KeySpec::None, setname, CONNECTION, "Sets the connection name.") },
    CommandSpec { since: "2.6.9", ..command("client|getname", 2, FLAGS, KeySpec::None, getname, CONNECTION, "Returns the name of the connection.") },
    CommandSpec { since: "2.4.0", ..command("client|list", -2, ADMIN | FLAGS, KeySpec::None, list, CONNECTION, "Lists open connections.") },
    CommandSpec { since: "6.2.0", ..command("client|info", 2, FLAGS, KeySpec::None, info, CONNECTION, "Returns information about the connection.") },
    CommandSpec { since: "2.4.0", ..command("client|kill", -3, ADMIN | FLAGS, KeySpec::None, kill, CONNECTION, "Terminates open connections.") },
    CommandSpec { since: "7.2.0", ..command("client|setinfo", 4, FLAGS, KeySpec::None, setinfo, CONNECTION, "Sets information specific to the client or connection.") },
    CommandSpec { since: "7.0.0", ..command("client|no-evict", 3, ADMIN | FLAGS, KeySpec::None, no_evict, CONNECTION, "Sets the client eviction mode of the connection.") },
    CommandSpec { since: "6.0.0", ..command("client|getredir", 2, FLAGS, KeySpec::None, client_tracking::getredir, CONNECTION, "Returns the client ID to which the connection's tracking notifications are redirected.") },
    CommandSpec { since: "6.0.0", ..command("client|tracking", -3, FLAGS, KeySpec::None, client_tracking::tracking, CONNECTION, "Controls server-assisted client-side caching for the connection.") },
    CommandSpec { since: "6.0.0", ..command("client|caching", 3, FLAGS, KeySpec::None, client_tracking::caching, CONNECTION, "Instructs the server whether to track the keys in the next request.") },
    CommandSpec { since: "6.2.0", ..command("client|trackinginfo", 2, FLAGS, KeySpec::None, client_tracking::trackinginfo, CONNECTION, "Returns information about server-assisted client-side caching for the connection.") },
    CommandSpec { since: "2.9.50", ..command("client|pause", -3, ADMIN | FLAGS, KeySpec::None, client_control::pause, CONNECTION, "Suspends commands processing.") },
    CommandSpec { since: "6.2.0", ..command("client|unpause", 2, ADMIN | FLAGS, KeySpec::None, client_control::unpause, CONNECTION, "Resumes processing commands from paused clients.") },
    CommandSpec { since: "5.0.0", ..command("client|unblock", -3, ADMIN | FLAGS, KeySpec::None, client_control::unblock, CONNECTION, "Unblocks a client blocked by a blocking command from a different connection.") },
    CommandSpec { since: "3.2.0", ..command("client|reply", 3, FLAGS, KeySpec::None, reply, CONNECTION, "Instructs the server whether to reply to commands.") },
    CommandSpec { since: "5.0.0", ..command("client|help", 2, LOADING | STALE, KeySpec::None, help, CONNECTION, "Returns helpful text about the different subcommands.") },
];

fn id(ctx: &mut Ctx<'_>, _args: &[&[u8]]) -> CmdResult {
    ctx.reply.integer(ctx.client.id() as i64);
    Ok(())
}

/// CLIENT REPLY ON | OFF | SKIP (see `server::reply_mode`): the connection applies the mode
/// once the command has run; only ON's OK is sent.
fn reply(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    use crate::node_state::reply_mode::ReplyMode;
    let mode = if is(args[2], "on") {
        ReplyMode::On
    } else if is(args[2], "off") {
        ReplyMode::Off
    } else if is(args[2], "skip") {
        ReplyMode::SkipNext
    } else {
        return Err(CmdError::Syntax);
    };
    ctx.client.reply_mode_set = Some(mode);
    ctx.reply.ok();
    Ok(())
}

fn setname(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let name = super::validate_client_name(args[2])?;
    *ctx.client.shared.name.lock() = name;
    ctx.reply.ok();
    Ok(())
}

fn getname(ctx: &mut Ctx<'_>, _args: &[&[u8]]) -> CmdResult {
    let name = ctx.client.shared.name.lock().clone();
    match name {
        Some(n) => ctx.reply.bulk(n.as_bytes()),
        None => ctx.reply.null(),
    }
    Ok(())
}

/// Client kinds as CLIENT LIST TYPE and CLIENT KILL TYPE name them. A replica's link to its
/// primary is `master`; replicas' links on a primary are fabric threads, not clients.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ClientType {
    Normal,
    Replica,
    Master,
    PubSub,
}

impl ClientType {
    fn parse(name: &[u8]) -> Result<ClientType, CmdError> {
        Ok(match args::lower(name).as_str() {
            "normal" => ClientType::Normal,
            "slave" | "replica" => ClientType::Replica,
            "master" => ClientType::Master,
            "pubsub" => ClientType::PubSub,
            _ => {
                return err(format!("ERR Unknown client type '{}'", args::text(name)));
            }
        })
    }

    fn of(client: &ClientShared) -> ClientType {
        if client
            .primary_link
            .load(std::sync::atomic::Ordering::Relaxed)
        {
            ClientType::Master
        } else if client
            .stream_consumer
            .load(std::sync::atomic::Ordering::Relaxed)
        {
            ClientType::Replica
        } else if client.subscription_count() > 0 {
            ClientType::PubSub
        } else {
            ClientType::Normal
        }
    }
}

/// What the current client knows about itself that others cannot see.
struct Caller {
    id: u64,
    queued: usize,
    /// Its unread input from the running command on (its `qbuf`).
    input: usize,
}

/// One line of CLIENT LIST / CLIENT INFO in Redis 7.0's field order. Fields this node does
/// not track (fd, buffer internals) carry plausible constants.
fn describe(c: &ClientShared, caller: &Caller, out: &mut String) {
    let mut flags = String::new();
    match ClientType::of(c) {
        ClientType::PubSub => flags.push('P'),
        // Redis's CLIENT_MASTER flag: the replica's link to its primary.
        ClientType::Master => flags.push('M'),
        // Redis's CLIENT_SLAVE flag: a connection the replication stream is served on.
        ClientType::Replica => flags.push('S'),
        _ => {}
    }
    let in_multi = c.in_multi.load(Relaxed);
    if in_multi {
        flags.push('x');
    }
    if c.blocked.load(Relaxed) {
        flags.push('b');
    }
    let tracking = c.tracking.flags();
    for (bit, letter) in [(ON, 't'), (BROKEN_REDIRECT, 'R'), (BCAST, 'B')] {
        if tracking & ON != 0 && tracking & bit != 0 {
            flags.push(letter);
        }
    }
    if c.no_evict.load(Relaxed) {
        flags.push('e');
    }
    if flags.is_empty() {
        flags.push('N');
    }
    let multi = if c.id == caller.id && in_multi {
        caller.queued as i64
    } else if in_multi {
        0
    } else {
        -1
    };
    let qbuf = if c.id == caller.id {
        caller.input
    } else {
        c.query_buffer.load(Relaxed)
    };
    let omem = c.pushes.lock().len();
    let name = c.name.lock().clone().unwrap_or_default();
    let cmd = *c.last_command.lock();
    let _ = writeln!(
        out,
        "id={} addr={} laddr={} fd={} name={} age={} idle={} flags={} db={} sub={} psub={} ssub={} multi={} qbuf={} qbuf-free=0 argv-mem=0 multi-mem=0 rbs=16384 rbp=0 obl=0 oll=0 omem={} tot-mem={} events=r cmd={} user={} redir={} resp={}",
        c.id,
        c.peer,
        c.local,
        c.id + 7,
        name,
        c.created.elapsed().as_secs(),
        c.idle_secs(),
        flags,
        c.db.load(Relaxed),
        c.subscriptions.load(Relaxed),
        c.pattern_subscriptions.load(Relaxed),
        c.shard_subscriptions.load(Relaxed),
        multi,
        qbuf,
        omem,
        2 * 16384 + qbuf + omem,
        cmd,
        c.username(),
        c.tracking.redirect_shown(),
        c.protocol.load(Relaxed),
    );
}

fn caller(ctx: &Ctx<'_>) -> Caller {
    Caller {
        id: ctx.client.id(),
        queued: ctx.client.multi.as_ref().map_or(0, |m| m.queued.len()),
        input: ctx.client.input_from_command,
    }
}

/// CLIENT LIST [TYPE type] | [ID id [id ...]].
fn list(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let mut only_type = None;
    let mut only_ids: Option<Vec<u64>> = None;
    if args.len() == 4 && is(args[2], "type") {
        only_type = Some(ClientType::parse(args[3])?);
    } else if args.len() > 3 && is(args[2], "id") {
        let mut ids = Vec::with_capacity(args.len() - 3);
        for a in &args[3..] {
            // Non-positive ids name no client; only text that is no number is an error.
            let n = args::int(a).map_err(|_| CmdError::new("ERR Invalid client ID"))?;
            if let Ok(id) = u64::try_from(n) {
                ids.push(id);
            }
        }
        only_ids = Some(ids);
    } else if args.len() != 2 {
        return Err(CmdError::Syntax);
    }
    let me = caller(ctx);
    let mut out = String::new();
    let clients = match &only_ids {
        Some(ids) => ids
            .iter()
            .filter_map(|id| ctx.server.clients.get(*id))
            .collect(),
        None => ctx.server.clients.all(),
    };
    for c in clients {
        if only_type.is_some_and(|t| t != ClientType::of(&c)) {
            continue;
        }
        describe(&c, &me, &mut out);
    }
    ctx.reply.verbatim(out.as_bytes());
    Ok(())
}

fn info(ctx: &mut Ctx<'_>, _args: &[&[u8]]) -> CmdResult {
    let me = caller(ctx);
    let mut out = String::new();
    describe(&ctx.client.shared, &me, &mut out);
    ctx.reply.verbatim(out.as_bytes());
    Ok(())
}

/// Which clients a CLIENT KILL names.
#[derive(Debug, Default)]
struct KillFilter {
    addr: Option<String>,
    laddr: Option<String>,
    id: Option<u64>,
    kind: Option<ClientType>,
    skip_me: bool,
}

impl KillFilter {
    /// The old form `CLIENT KILL addr` (which may kill the caller) or the new form of
    /// option/value pairs (which skips the caller unless SKIPME no).
    fn parse(args: &[&[u8]]) -> Result<KillFilter, CmdError> {
        if args.len() == 1 {
            return Ok(KillFilter {
                addr: Some(args::text(args[0])),
                ..KillFilter::default()
            });
        }
        let mut f = KillFilter {
            skip_me: true,
            ..KillFilter::default()
        };
        for pair in args.chunks(2) {
            let [option, value] = pair else {
                return Err(CmdError::Syntax);
            };
            if is(option, "id") {
                let n = args::int(value)
                    .ok()
                    .filter(|n| *n > 0)
                    .ok_or_else(|| CmdError::new("ERR client-id should be greater than 0"))?;
                f.id = Some(n as u64);
            } else if is(option, "type") {
                f.kind = Some(ClientType::parse(value)?);
            } else if is(option, "addr") {
                f.addr = Some(args::text(value));
            } else if is(option, "laddr") {
                f.laddr = Some(args::text(value));
            } else if is(option, "user") {
                // `default` is the only user this node has.
                if *value != b"default" {
                    return err(format!("ERR No such user '{}'", args::text(value)));
                }
            } else if is(option, "skipme") {
                f.skip_me = if is(value, "yes") {
                    true
                } else if is(value, "no") {
                    false
                } else {
                    return Err(CmdError::Syntax);
                };
            } else {
                return Err(CmdError::Syntax);
            }
        }
        Ok(f)
    }

    fn matches(&self, c: &ClientShared, me: u64) -> bool {
        !(self.addr.as_ref().is_some_and(|a| *a != c.peer.to_string())
            || self
                .laddr
                .as_ref()
                .is_some_and(|a| *a != c.local.to_string())
            || self.id.is_some_and(|id| id != c.id)
            || self.kind.is_some_and(|k| k != ClientType::of(c))
            || (self.skip_me && c.id == me))
    }
}

fn kill(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let old_form = args.len() == 3;
    let filter = KillFilter::parse(&args[2..])?;
    let me = ctx.client.id();
    let mut killed = 0;
    let mut kill_me = false;
    for c in ctx.server.clients.all() {
        if !filter.matches(&c, me) {
            continue;
        }
        killed += 1;
        if c.id == me {
            // Our own connection closes after this reply is written.
            kill_me = true;
        } else {
            c.kill();
        }
    }
    if old_form {
        if killed == 0 {
            return err("ERR No such client");
        }
        ctx.reply.ok();
    } else {
        ctx.reply.integer(killed);
    }
    ctx.effects.close |= kill_me;
    Ok(())
}

/// CLIENT SETINFO LIB-NAME|LIB-VER value (Redis 7.2; client libraries send it and ignore
/// failures, so it is accepted although the 7.0 CLIENT LIST line does not show it).
fn setinfo(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let (attr, value) = (args[2], args[3]);
    let slot = if is(attr, "lib-name") {
        &ctx.client.shared.lib_name
    } else if is(attr, "lib-ver") {
        &ctx.client.shared.lib_ver
    } else {
        return err(format!("ERR Unrecognized option '{}'", args::text(attr)));
    };
    if value.len() > crate::node_state::client::MAX_CLIENT_NAME_LEN
        || value.iter().any(|&b| !(b'!'..=b'~').contains(&b))
    {
        return err(format!(
            "ERR {} cannot contain spaces, newlines or special characters.",
            args::text(attr)
        ));
    }
    *slot.lock() = (!value.is_empty()).then(|| args::text(value));
    ctx.reply.ok();
    Ok(())
}

/// CLIENT NO-EVICT ON|OFF: recorded (CLIENT LIST flag `e`); this node never evicts clients
/// to free memory, so it changes nothing else.
fn no_evict(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let on = if is(args[2], "on") {
        true
    } else if is(args[2], "off") {
        false
    } else {
        return Err(CmdError::Syntax);
    };
    ctx.client.shared.no_evict.store(on, Relaxed);
    ctx.reply.ok();
    Ok(())
}

const HELP: &[&str] = &[
    "CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "CACHING (YES|NO)",
    "    Enable/disable tracking of the keys for next command in OPTIN/OPTOUT modes.",
    "GETREDIR",
    "    Return the client ID we are redirecting to when tracking is enabled.",
    "GETNAME",
    "    Return the name of the current connection.",
    "ID",
    "    Return the ID of the current connection.",
    "INFO",
    "    Return information about the current client connection.",
    "KILL <ip:port>",
    "    Kill connection made from <ip:port>.",
    "KILL <option> <value> [<option> <value> [...]]",
    "    Kill connections. Options are:",
    "    * ADDR (<ip:port>|<unixsocket>:0)",
    "      Kill connections made from the specified address",
    "    * LADDR (<ip:port>|<unixsocket>:0)",
    "      Kill connections made to specified local address",
    "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
    "      Kill connections by type.",
    "    * USER <username>",
    "      Kill connections authenticated by <username>.",
    "    * SKIPME (YES|NO)",
    "      Skip killing current connection (default: yes).",
    "LIST [options ...]",
    "    Return information about client connections. Options:",
    "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
    "      Return clients of specified type.",
    "REPLY (ON|OFF|SKIP)",
    "    Control the replies sent to the current connection.",
    "SETNAME <name>",
    "    Assign the name <name> to the current connection.",
    "SETINFO <option> <value>",
    "    Set client meta attr. Options are:",
    "    * LIB-NAME: the client lib name.",
    "    * LIB-VER: the client lib version.",
    "PAUSE <timeout> [WRITE|ALL]",
    "    Suspend all, or just write, clients for <timeout> milliseconds.",
    "UNPAUSE",
    "    Stop the current client pause, resuming traffic.",
    "UNBLOCK <clientid> [TIMEOUT|ERROR]",
    "    Unblock the specified blocked client.",
    "TRACKING (ON|OFF) [REDIRECT <id>] [BCAST] [PREFIX <prefix> [...]]",
    "         [OPTIN] [OPTOUT] [NOLOOP]",
    "    Control server assisted client side caching.",
    "TRACKINGINFO",
    "    Report tracking status for the current connection.",
    "NO-EVICT (ON|OFF)",
    "    Protect current client connection from eviction.",
    "HELP",
    "    Prints this help.",
];

fn help(ctx: &mut Ctx<'_>, _args: &[&[u8]]) -> CmdResult {
    super::reply_help(&mut ctx.reply, HELP);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filter(words: &[&str]) -> Result<KillFilter, String> {
        let a: Vec<&[u8]> = words.iter().map(|w| w.as_bytes()).collect();
        KillFilter::parse(&a).map_err(|e| e.to_string())
    }

    #[test]
    fn kill_filters_parse_as_redis() {
        let old = filter(&["127.0.0.1:5000"]).unwrap();
        assert_eq!(old.addr.as_deref(), Some("127.0.0.1:5000"));
        assert!(!old.skip_me);
        let new = filter(&["ID", "7", "TYPE", "normal"]).unwrap();
        assert_eq!(
            (new.id, new.kind, new.skip_me),
            (Some(7), Some(ClientType::Normal), true)
        );
        assert!(!filter(&["skipme", "no"]).unwrap().skip_me);
        assert_eq!(
            filter(&["id", "0"]).unwrap_err(),
            "ERR client-id should be greater than 0"
        );
        assert_eq!(
            filter(&["type", "foo"]).unwrap_err(),
            "ERR Unknown client type 'foo'"
        );
        assert_eq!(
            filter(&["user", "bob"]).unwrap_err(),
            "ERR No such user 'bob'"
        );
        assert_eq!(
            filter(&["skipme", "maybe"]).unwrap_err(),
            "ERR syntax error"
        );
        assert_eq!(filter(&["foo", "bar"]).unwrap_err(), "ERR syntax error");
        assert_eq!(
            filter(&["id", "1", "type"]).unwrap_err(),
            "ERR syntax error"
        );
    }

    #[test]
    fn list_line_has_the_redis_7_fields_in_order() {
        let c = ClientShared::new(
            3,
            "127.0.0.1:52555".parse().unwrap(),
            "127.0.0.1:6379".parse().unwrap(),
        );
        *c.last_command.lock() = "client|list";
        let mut out = String::new();
        describe(
            &c,
            &Caller {
                id: 3,
                queued: 0,
                input: 0,
            },
            &mut out,
        );
        let fields: Vec<&str> = out
            .trim_end()
            .split(' ')
            .map(|f| f.split('=').next().unwrap())
            .collect();
        assert_eq!(
            fields,
            [
                "id",
                "addr",
                "laddr",
                "fd",
                "name",
                "age",
                "idle",
                "flags",
                "db",
                "sub",
                "psub",
                "ssub",
                "multi",
                "qbuf",
                "qbuf-free",
                "argv-mem",
                "multi-mem",
                "rbs",
                "rbp",
                "obl",
                "oll",
                "omem",
                "tot-mem",
                "events",
                "cmd",
                "user",
                "redir",
                "resp"
            ]
        );
        assert!(
            out.starts_with("id=3 addr=127.0.0.1:52555 laddr=127.0.0.1:6379 "),
            "{out}"
        );
        assert!(
            out.contains(" flags=N db=0 sub=0 psub=0 ssub=0 multi=-1 "),
            "{out}"
        );
        assert!(
            out.ends_with(" cmd=client|list user=default redir=-1 resp=2\n"),
            "{out}"
        );
    }
}
