//! ACL LOG [count | RESET].

use crate::clock::unix_millis;
use crate::command_framework::args::{self, is};
use crate::command_framework::error::err;
use crate::command_framework::{CmdResult, Ctx};

pub fn log(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let count = match args.get(2) {
        None => None,
        Some(a) if is(a, "reset") => {
            ctx.server.acl.log.reset();
            ctx.reply.ok();
            return Ok(());
        }
        Some(a) => match args::int(a) {
            Ok(n) if n >= 0 => Some(n as usize),
            _ => return err("ERR value is out of range, must be positive"),
        },
    };
    if args.len() > 3 {
        return err("ERR syntax error");
    }
    let now = unix_millis();
    let entries = ctx.server.acl.log.latest(count);
    let r = &mut ctx.reply;
    r.array(entries.len());
    for e in entries {
        r.map(7);
        r.bulk(b"count");
        r.integer(e.count as i64);
        r.bulk(b"reason");
        r.bulk(e.reason.name().as_bytes());
        r.bulk(b"context");
        r.bulk(e.context.name().as_bytes());
        r.bulk(b"object");
        r.bulk(e.object.as_bytes());
        r.bulk(b"username");
        r.bulk(e.username.as_bytes());
        r.bulk(b"age-seconds");
        r.double(now.saturating_sub(e.at_ms) as f64 / 1000.0);
        r.bulk(b"client-info");
        r.bulk(e.client_info.as_bytes());
    }
    Ok(())
}
