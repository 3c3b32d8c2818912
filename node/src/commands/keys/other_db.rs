//! The commands that reach a database besides the client's: MOVE key db, SWAPDB a b, and
//! COPY's `DB` option (in `copy.rs`). Each holds both databases for the whole command
//! (`Ctx::hold_dbs`), so the stream carries it as one write, as Redis propagates them.

use crate::command_framework::args;
use crate::command_framework::ctx::DB_OUT_OF_RANGE;
use crate::command_framework::error::err;
use crate::command_framework::{CmdError, CmdResult, Ctx};
use crate::config::keyspace_events::GENERIC;
use crate::db::keyspace::shard_of_slot;
use crate::db::Locked;

/// Redis's answer to an int argument past 32 bits (`getIntFromObjectOrReply`).
pub const NOT_AN_INT: &str =
    "ERR value is out of range, value must between -2147483648 and 2147483647";

/// A database index argument, read as Redis reads it (an int), within `databases`. A bad
/// number is answered `invalid` if given (SWAPDB's texts), else as Redis answers a bad int.
pub fn db_index(
    ctx: &Ctx<'_>,
    arg: &[u8],
    invalid: Option<&'static str>,
) -> Result<usize, CmdError> {
    let bad = |default: CmdError| invalid.map_or(default, CmdError::new);
    let n = args::int(arg).map_err(|_| bad(CmdError::NotInteger))?;
    let n = i32::try_from(n).map_err(|_| bad(CmdError::new(NOT_AN_INT)))?;
    usize::try_from(n)
        .ok()
        .filter(|&i| i < ctx.server.extra_dbs.count())
        .ok_or_else(|| CmdError::new(DB_OUT_OF_RANGE))
}

/// MOVE key db: 1 if the key moved, 0 if it is absent here or present there.
pub fn move_key(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    if ctx.server.cluster.is_some() {
        return err("ERR MOVE is not allowed in cluster mode");
    }
    let key = args[1];
    let target = db_index(ctx, args[2], None)?;
    let source = ctx.db.db_index();
    if target == source {
        return err("ERR source and destination objects are the same");
    }
    let shard = shard_of_slot(proto::slot::key_slot(key));
    ctx.hold_dbs(&[target], Some(&[shard]))?;
    let Some(entry) = ctx.db.get(key).map(|e| e.clone()) else {
        ctx.reply.integer(0);
        return Ok(());
    };
    let there = ctx.held_db(target).expect("held above");
    if there.get_shared(key).is_some() {
        ctx.reply.integer(0);
        return Ok(());
    }
    there.insert(key, entry);
    ctx.db.remove(key);
    ctx.modified_in(source, key, GENERIC, "move_from");
    ctx.modified_in(target, key, GENERIC, "move_to");
    ctx.reply.integer(1);
    Ok(())
}

/// SWAPDB a b: the two databases exchange their keys; clients connected to one now see
/// the other's. Watches of keys in either fail, and blocked clients look again.
pub fn swapdb(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    if ctx.server.cluster.is_some() {
        return err("ERR SWAPDB is not allowed in cluster mode");
    }
    let a = db_index(ctx, args[1], Some("ERR invalid first DB index"))?;
    let b = db_index(ctx, args[2], Some("ERR invalid second DB index"))?;
    if a == b {
        ctx.reply.ok();
        return Ok(());
    }
    ctx.hold_dbs(&[a, b], None)?;
    let Ctx {
        db,
        held,
        server,
        effects,
        reply,
        ..
    } = &mut *ctx;
    let mut views: Vec<&mut Locked<'_>> = std::iter::once(db).chain(held.iter_mut()).collect();
    views.retain(|v| v.db_index() == a || v.db_index() == b);
    let [x, y] = &mut views[..] else {
        return err(DB_OUT_OF_RANGE);
    };
    let keys = |v: &mut Locked<'_>| v.shards_mut().map(|(_, s)| s.keys).sum::<usize>();
    let any = keys(x) + keys(y) > 0;
    if server.watches.active() {
        // A watched key of either database that exists in either changes.
        let (xi, yi) = (x.db_index(), y.db_index());
        let (xv, yv) = (&**x, &**y);
        server.watches.touch_where(|d, key| {
            (d == xi || d == yi) && (xv.get_shared(key).is_some() || yv.get_shared(key).is_some())
        });
    }
    crate::db::databases::swap(x, y);
    if any && server.blocking.active() {
        server.blocking.wake_all();
    }
    effects.dirty += 1;
    reply.ok();
    Ok(())
}
