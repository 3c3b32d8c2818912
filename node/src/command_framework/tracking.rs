//! What one command means to CLIENT TRACKING, reported by the dispatcher after each command
//! (each command of an EXEC too) with its keys still locked, so that no read can slip
//! between a change and its invalidation, and no change between a read and its entry:
//! keys it found expired and keys it changed invalidate their readers (and are kept for
//! BCAST clients, told at the end of the request), and a read command's keys are
//! remembered for a tracking caller.

use super::spec::{flags, CommandSpec};
use super::Ctx;
use crate::db::Key;

/// Changed keys a request keeps for BCAST clients before it tells them what it has so far
/// (a DEL of millions of keys is told in pieces, never dropped: a dropped key would leave
/// stale caches).
pub const BCAST_CHANGES_PER_MESSAGE: usize = 10_000;

pub(super) fn after_command(
    ctx: &mut Ctx<'_>,
    spec: &CommandSpec,
    args: &[&[u8]],
    expired: &[Key],
    modified_before: usize,
) {
    let server = ctx.server;
    let tracking = &server.tracking;
    let me = ctx.client.id();
    let bcast = tracking.broadcasting();
    let effects = &mut ctx.effects;
    // Expiry came first, and no client made it: NOLOOP does not hide it.
    let expired = expired.iter().map(|k| (k, None));
    let changed = effects.modified[modified_before..]
        .iter()
        // Tracking names keys without their database, as Redis's does.
        .map(|(_, k)| (k, Some(me)));
    for (key, writer) in expired.chain(changed) {
        tracking.invalidate(&server.clients, key, writer);
        if bcast {
            effects.tracking_changes.push((key.clone(), writer));
            if effects.tracking_changes.len() >= BCAST_CHANGES_PER_MESSAGE {
                tracking.broadcast(&server.clients, &effects.tracking_changes);
                effects.tracking_changes.clear();
            }
        }
    }
    let client = &ctx.client;
    // A read-only script (EVAL_RO, FCALL_RO) remembers nothing itself: the reads it makes
    // do, each remembering the keys the script declared (`script_keys`), as Redis does.
    if spec.has(flags::READONLY)
        && !super::dispatch::is_script(spec)
        && client.tracking.remembers(client.shared.tracking.flags())
    {
        if client.in_script {
            let keys = &client.tracking.script_keys;
            tracking.remember(me, keys.iter().map(|k| &k[..]));
        } else {
            let positions = spec.key_positions(args);
            tracking.remember(me, positions.iter().map(|&i| args[i]));
        }
    }
}
