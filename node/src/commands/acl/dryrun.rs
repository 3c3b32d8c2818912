//! ACL DRYRUN username command [arg ...]: whether the user could run it, without running
//! it or logging anything.

use crate::command_framework::acl_check::denial;
use crate::command_framework::error::err;
use crate::command_framework::{args, dispatch, CmdError, CmdResult, Ctx};
use crate::node_state::acl::Denial;

pub fn dryrun(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let Some(user) = ctx.server.acl.user(args[2]) else {
        return err(format!("ERR User '{}' not found", args::text(args[2])));
    };
    let request = &args[3..];
    let spec = dispatch::resolve(request).map_err(|e| match e {
        CmdError::WrongArity(name) => CmdError::new(format!(
            "ERR wrong number of arguments for '{name}' command"
        )),
        _ => CmdError::new(format!(
            "ERR Command '{}' not found",
            args::text(request[0])
        )),
    })?;
    let verdict = denial(&user.rules(), spec, request);
    match verdict {
        Ok(()) => ctx.reply.ok(),
        Err(Denial::Command) => ctx.reply.bulk(
            format!(
                "This user has no permissions to run the '{}' command",
                spec.name
            )
            .as_bytes(),
        ),
        Err(Denial::Key(i)) => ctx.reply.bulk(
            format!(
                "This user has no permissions to access the '{}' key",
                args::text(request[i])
            )
            .as_bytes(),
        ),
        Err(Denial::Channel(i)) => ctx.reply.bulk(
            format!(
                "This user has no permissions to access the '{}' channel",
                args::text(request[i])
            )
            .as_bytes(),
        ),
    }
    Ok(())
}
