//! ACL SETUSER, GETUSER, DELUSER.

use super::disconnect;
use crate::command_framework::error::err;
use crate::command_framework::{CmdError, CmdResult, Ctx};
use crate::node_state::acl::{catalog, SetUserRefused};

/// ACL SETUSER username [rule ...]: all rules or none.
pub fn setuser(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let all_channels = ctx.server.config.read().acl_pubsub_all_channels;
    let (user, _before) = ctx
        .server
        .acl
        .set_user(args[2], &args[3..], all_channels)
        .map_err(|refused| match refused {
            SetUserRefused::Rule(e) => CmdError::new(format!(
                "ERR Error in ACL SETUSER modifier '{}': {}",
                e.rule, e.error
            )),
            SetUserRefused::Acl(e) => CmdError::new(e.to_string()),
        })?;
    disconnect::revoked_subscribers(ctx, &user);
    ctx.reply.ok();
    Ok(())
}

/// ACL GETUSER username: flags, passwords (hashes), commands, keys, channels, selectors;
/// null for an unknown user.
pub fn getuser(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let Some(user) = ctx.server.acl.user(args[2]) else {
        ctx.reply.null();
        return Ok(());
    };
    let rules = user.rules().clone();
    let r = &mut ctx.reply;
    r.map(6);
    r.bulk(b"flags");
    let flags = rules.flags();
    r.array(flags.len());
    for f in flags {
        r.bulk(f.as_bytes());
    }
    r.bulk(b"passwords");
    r.array(rules.passwords.len());
    for p in &rules.passwords {
        r.bulk(p.as_bytes());
    }
    r.bulk(b"commands");
    r.bulk(rules.commands.describe(catalog::get()).as_bytes());
    r.bulk(b"keys");
    r.bulk(rules.describe_keys().as_bytes());
    r.bulk(b"channels");
    r.bulk(rules.describe_channels().as_bytes());
    r.bulk(b"selectors");
    r.array(0);
    Ok(())
}

/// ACL DELUSER username [username ...]: how many existed; their connections are closed.
pub fn deluser(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let removed = match ctx.server.acl.delete_users(&args[2..]) {
        Ok(removed) => removed,
        Err(e) => return err(e.to_string()),
    };
    disconnect::users(ctx, &removed);
    ctx.reply.integer(removed.len() as i64);
    Ok(())
}
