//! Connection commands: PING ECHO QUIT AUTH HELLO SELECT RESET.

use crate::command_framework::args::{self, is};
use crate::command_framework::ctx::DB_OUT_OF_RANGE;
use crate::command_framework::error::err;
use crate::command_framework::spec::{command, flags::*, KeySpec};
use crate::command_framework::{CmdError, CmdResult, CommandSpec, Ctx};
use crate::node_state::acl::log::{Context, Reason};
use crate::node_state::acl::DEFAULT_USER;
use proto::resp::ProtocolVersion;

/// The Redis version we answer as, so clients enable the features we implement.
pub const REDIS_COMPAT_VERSION: &str = "7.0.15";

pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        since: "1.0.0",
        ..command(
            "ping",
            -1,
            FAST | SUBSCRIBED_OK,
            KeySpec::None,
            ping,
            "connection",
            "Returns the server's liveliness response.",
        )
    },
    command(
        "echo",
        2,
        LOADING | STALE | FAST,
        KeySpec::None,
        echo,
        "connection",
        "Returns the given string.",
    ),
    command(
        "quit",
        -1,
        NO_AUTH | TXN_CONTROL | SUBSCRIBED_OK | FAST | STALE | LOADING,
        KeySpec::None,
        quit,
        "connection",
        "Closes the connection.",
    ),
    CommandSpec {
        secrets: Some(auth_secret_positions),
        ..command(
            "auth",
            -2,
            NO_AUTH | FAST | STALE | LOADING | NOSCRIPT,
            KeySpec::None,
            auth,
            "connection",
            "Authenticates the connection.",
        )
    },
    CommandSpec {
        since: "6.0.0",
        secrets: Some(hello_secret_positions),
        ..command(
            "hello",
            -1,
            NO_AUTH | FAST | STALE | LOADING | NOSCRIPT,
            KeySpec::None,
            hello,
            "connection",
            "Handshakes with the Redis server.",
        )
    },
    command(
        "select",
        2,
        FAST | LOADING | STALE,
        KeySpec::None,
        select,
        "connection",
        "Changes the selected database.",
    ),
    CommandSpec {
        since: "6.2.0",
        ..command(
            "reset",
            1,
            NO_AUTH | TXN_CONTROL | SUBSCRIBED_OK | FAST | STALE | LOADING | NOSCRIPT,
            KeySpec::None,
            reset,
            "connection",
            "Resets the connection.",
        )
    },
];

fn ping(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    if args.len() > 2 {
        return Err(CmdError::WrongArity("ping".into()));
    }
    // A RESP2 client in subscribed mode gets PING's answer as a message-like array.
    if ctx.client.subscribed && !ctx.reply.is_resp3() {
        ctx.reply.array(2);
        ctx.reply.bulk(b"pong");
        ctx.reply.bulk(args.get(1).copied().unwrap_or(b""));
        return Ok(());
    }
    match args.get(1) {
        Some(msg) => ctx.reply.bulk(msg),
        None => ctx.reply.simple(b"PONG"),
    }
    Ok(())
}

fn echo(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    ctx.reply.bulk(args[1]);
    Ok(())
}

fn quit(ctx: &mut Ctx<'_>, _args: &[&[u8]]) -> CmdResult {
    ctx.reply.ok();
    ctx.effects.close = true;
    Ok(())
}

/// Logs the client in as `user` if `pass` is its password; a failure is answered
/// WRONGPASS and recorded in the ACL LOG (every guess of a brute force is counted there).
fn log_in(ctx: &mut Ctx<'_>, user: &[u8], pass: &[u8]) -> CmdResult {
    if let Some(found) = ctx.server.acl.authenticate(user, pass) {
        ctx.client.log_in(found);
        return Ok(());
    }
    let context = if ctx.client.multi.is_some() {
        Context::Multi
    } else {
        Context::Toplevel
    };
    ctx.server.acl.log.add(
        Reason::Auth,
        context,
        b"AUTH",
        user,
        crate::clock::unix_millis(),
        format!(
            "id={} addr={} laddr={}",
            ctx.client.id(),
            ctx.client.shared.peer,
            ctx.client.shared.local
        ),
        ctx.server.config.read().acllog_max_len as usize,
    );
    err("WRONGPASS invalid username-password pair or user is disabled.")
}

fn auth(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let (user, pass) = match args.len() {
        2 => (DEFAULT_USER.as_bytes(), args[1]),
        3 => (args[1], args[2]),
        _ => return Err(CmdError::Syntax),
    };
    // The old one-argument form with no password configured is a mistake, as in Redis.
    if args.len() == 2 && ctx.server.acl.default_user().rules().nopass {
        return err("ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?");
    }
    log_in(ctx, user, pass)?;
    ctx.reply.ok();
    Ok(())
}

fn hello(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let mut version = None;
    let mut i = 1;
    if let Some(v) = args.get(1) {
        let n = args::int(v)
            .map_err(|_| CmdError::new("ERR Protocol version is not an integer or out of range"))?;
        version = Some(match n {
            2 => ProtocolVersion::Resp2,
            3 => ProtocolVersion::Resp3,
            _ => return err("NOPROTO unsupported protocol version"),
        });
        i = 2;
    }
    let mut name = None;
    while i < args.len() {
        let more = args.len() - i - 1;
        if is(args[i], "auth") && more >= 2 {
            log_in(ctx, args[i + 1], args[i + 2])?;
            i += 3;
        } else if is(args[i], "setname") && more >= 1 {
            name = Some(super::introspection::validate_client_name(args[i + 1])?);
            i += 2;
        } else {
            return err(format!(
                "ERR Syntax error in HELLO option '{}'",
                args::text(args[i])
            ));
        }
    }
    if !ctx.client.authenticated {
        return err("NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time");
    }
    if let Some(name) = name {
        *ctx.client.shared.name.lock() = name;
    }
    if let Some(v) = version {
        ctx.client.set_protocol(v);
        ctx.reply.set_version(v);
    }
    let r = &mut ctx.reply;
    r.map(7);
    r.bulk(b"server");
    r.bulk(b"redis");
    r.bulk(b"version");
    r.bulk(REDIS_COMPAT_VERSION.as_bytes());
    r.bulk(b"proto");
    r.integer(if ctx.client.protocol == ProtocolVersion::Resp3 {
        3
    } else {
        2
    });
    r.bulk(b"id");
    r.integer(ctx.client.id() as i64);
    r.bulk(b"mode");
    r.bulk(b"standalone");
    r.bulk(b"role");
    r.bulk(b"master");
    r.bulk(b"modules");
    r.array(0);
    Ok(())
}

fn select(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let cluster = ctx.server.cluster.is_some();
    let index = match super::keys::other_db::db_index(ctx, args[1], None) {
        Err(e) if cluster && e.to_string() == DB_OUT_OF_RANGE => {
            return err("ERR SELECT is not allowed in cluster mode");
        }
        other => other?,
    };
    // Inside EXEC or a script the rest of the request runs in the new database.
    if index != ctx.db.db_index() && (ctx.in_exec || ctx.client.in_script) {
        ctx.switch_db(index)?;
    }
    ctx.client.select(index);
    ctx.reply.ok();
    Ok(())
}

fn reset(ctx: &mut Ctx<'_>, _args: &[&[u8]]) -> CmdResult {
    ctx.client.multi = None;
    ctx.client.select(0);
    ctx.client.cluster_asking = false;
    ctx.client.cluster_readonly = false;
    ctx.client
        .shared
        .in_multi
        .store(false, std::sync::atomic::Ordering::Relaxed);
    if let Some(handle) = ctx.client.watch.take() {
        ctx.server.watches.unwatch_all(handle);
    }
    super::pubsub::unsubscribe_all(ctx.server, ctx.client);
    ctx.server
        .tracking
        .disable(&ctx.client.shared, &mut ctx.client.tracking);
    ctx.server.monitors.remove(ctx.client.id());
    *ctx.client.shared.name.lock() = None;
    ctx.client.set_protocol(ProtocolVersion::Resp2);
    // Back to the default user, authenticated only if it needs no password.
    ctx.client.user = None;
    *ctx.client.shared.user.lock() = None;
    ctx.client.authenticated = !ctx.server.acl.default_needs_auth();
    ctx.reply.set_version(ProtocolVersion::Resp2);
    ctx.reply.simple(b"RESET");
    Ok(())
}

/// AUTH's secrets: every argument (the password, or the username and password). Redis
/// redacts the two it reads; a malformed AUTH with more is redacted whole here, as its
/// arguments are as likely to be secrets.
fn auth_secret_positions(args: &[&[u8]]) -> smallvec::SmallVec<[usize; 2]> {
    (1..args.len()).collect()
}

/// HELLO's secrets: the username and password after each `AUTH` option, read as the
/// handler reads the options.
fn hello_secret_positions(args: &[&[u8]]) -> smallvec::SmallVec<[usize; 2]> {
    let mut secrets = smallvec::SmallVec::new();
    let mut i = 2;
    while i < args.len() {
        let more = args.len() - i - 1;
        if is(args[i], "auth") && more >= 2 {
            secrets.extend([i + 1, i + 2]);
            i += 3;
        } else if is(args[i], "setname") && more >= 1 {
            i += 2;
        } else {
            break;
        }
    }
    secrets
}
