//! Whether CLIENT PAUSE holds a request, checked before it runs (see
//! `node_state::client_pause`).
//!
//! Redis checks the pause after its refusals (unknown command, arity, authentication,
//! MULTI's refusals) and before queueing into MULTI: a refused request is answered at once,
//! and a write queued into a transaction is held as it would be run. Cluster redirects and
//! the checks after them are not made first here: a request a pause holds gets its MOVED or
//! READONLY when the pause ends.

use super::ctx::{BlockRequest, TimeoutReply};
use super::dispatch::{admit, resolve};
use super::spec::{flags, CommandSpec};
use crate::clock::unix_millis;
use crate::node_state::{Client, NodeState};
use std::time::Duration;

/// The wait for a request CLIENT PAUSE holds now, or None to run it.
///
/// Inlined for its first test, no pause (see `acl_check::check`).
#[inline]
pub fn pause_hold(server: &NodeState, client: &Client, args: &[&[u8]]) -> Option<BlockRequest> {
    // A replica's link to its primary is never held: replication goes on through a pause.
    if !server.client_pause.maybe_set() || client.primary_link {
        return None;
    }
    pause_hold_while_set(server, client, args)
}

/// [`pause_hold`] while a pause may be set.
fn pause_hold_while_set(
    server: &NodeState,
    client: &Client,
    args: &[&[u8]],
) -> Option<BlockRequest> {
    let pause = &server.client_pause;
    let now = unix_millis();
    let Some((_, end)) = pause.in_force(now) else {
        pause.lapse(now);
        return None;
    };
    let spec = resolve(args).ok()?;
    admit(server, client, spec).ok()?;
    let writes = writes_or_may_replicate(spec, client);
    if !pause.holds(writes, now) {
        return None;
    }
    Some(BlockRequest {
        keys: Vec::new(),
        // Redis's pause holds through its end millisecond.
        timeout: Some(Duration::from_millis(end - now + 1)),
        retry: Vec::new(),
        timeout_reply: TimeoutReply::Paused { writes },
    })
}

/// Redis's `is_may_replicate_command`: a write, a command that may replicate, or EXEC of a
/// transaction that queued a write.
fn writes_or_may_replicate(spec: &CommandSpec, client: &Client) -> bool {
    spec.has(flags::WRITE | flags::MAY_REPLICATE)
        || (spec.name == "exec" && client.multi.as_ref().is_some_and(|m| m.write))
}
