//! ACL SAVE and ACL LOAD with the `aclfile` (relative to `dir`, as the node's other
//! files), and the load at start-up. The format is `node_state::acl::file`'s; the file is
//! read and written (atomically, 0600) through the node's `AclFile` service.

use super::disconnect;
use crate::command_framework::error::err;
use crate::command_framework::{CmdResult, Ctx};
use crate::node_state::acl::{catalog, file};
use crate::node_state::services::{AclFile, NodeServices};
use crate::node_state::NodeState;
use std::path::PathBuf;

const NO_ACL_FILE: &str = "ERR This Redis instance is not configured to use an ACL file. You may want to specify users via the ACL SETUSER command and then issue a CONFIG REWRITE (assuming you have a Redis configuration file set) in order to store users in the Redis configuration.";

/// The ACL file's path, if one is configured.
fn path(server: &NodeState) -> Option<PathBuf> {
    let config = server.config.read();
    (!config.aclfile.is_empty()).then(|| config.dir.join(&config.aclfile))
}

/// Reads and applies the ACL file: all users or none. Returns the replaced users.
fn load_file(
    server: &NodeState,
    files: &dyn AclFile,
) -> Result<Vec<std::sync::Arc<crate::node_state::acl::User>>, String> {
    let Some(path) = path(server) else {
        return Ok(Vec::new());
    };
    let text = files.read(&path)?;
    let all_channels = server.config.read().acl_pubsub_all_channels;
    let users = file::parse(
        &text,
        &path.display().to_string(),
        catalog::get(),
        all_channels,
    )?;
    Ok(server.acl.replace_all(users))
}

/// Loads the `aclfile` at start, if one is configured: a missing or invalid file refuses
/// the start, as in Redis.
pub fn load_at_start(node: &dyn NodeServices) -> Result<(), String> {
    load_file(node.state(), node.acl_file()).map(|_| ())
}

pub fn load(ctx: &mut Ctx<'_>, _args: &[&[u8]]) -> CmdResult {
    if path(ctx.server).is_none() {
        return err(NO_ACL_FILE);
    }
    match load_file(ctx.server, ctx.services.acl_file()) {
        Ok(replaced) => {
            disconnect::users(ctx, &replaced);
            ctx.reply.ok();
            Ok(())
        }
        Err(e) => err(format!("ERR {e}")),
    }
}

pub fn save(ctx: &mut Ctx<'_>, _args: &[&[u8]]) -> CmdResult {
    let Some(path) = path(ctx.server) else {
        return err(NO_ACL_FILE);
    };
    let text = file::render(&ctx.server.acl.describe_all());
    if let Err(e) = ctx.services.acl_file().write(&path, &text) {
        tracing::warn!(path = %path.display(), error = %e, "ACL SAVE failed");
        return err("ERR There was an error trying to save the ACLs. Please check the server logs for more information");
    }
    ctx.reply.ok();
    Ok(())
}
