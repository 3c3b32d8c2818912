//! Disconnecting a user's clients, as Redis does when the user is deleted (ACL DELUSER),
//! replaced (ACL LOAD), or loses a channel its subscriptions need (ACL SETUSER). The client
//! running the command gets its reply first, then its connection closes.

use crate::command_framework::Ctx;
use crate::node_state::acl::{User, DEFAULT_USER};
use crate::node_state::pubsub::Kind;
use crate::node_state::ClientShared;
use std::sync::Arc;

/// Whether the client is authenticated as `user` (clients of `default` hold no handle).
fn belongs(shared: &ClientShared, user: &Arc<User>) -> bool {
    if user.name == DEFAULT_USER {
        shared.user.lock().is_none()
    } else {
        shared.is_user(user)
    }
}

fn close(ctx: &mut Ctx<'_>, shared: &ClientShared) {
    if shared.id == ctx.client.id() {
        ctx.effects.close = true;
    } else {
        shared.kill();
    }
}

/// Closes every connection authenticated as one of `users`.
pub fn users(ctx: &mut Ctx<'_>, users: &[Arc<User>]) {
    if users.is_empty() {
        return;
    }
    for shared in ctx.server.clients.all() {
        if users.iter().any(|u| belongs(&shared, u)) {
            close(ctx, &shared);
        }
    }
}

/// Closes the connections of `user` subscribed to a channel, shard channel or pattern its
/// rules no longer allow.
pub fn revoked_subscribers(ctx: &mut Ctx<'_>, user: &Arc<User>) {
    if user.rules().all_channels {
        return;
    }
    let refused = ctx
        .server
        .pubsub
        .subscribers_refused(&|shared| belongs(shared, user), &|kind, name| {
            user.rules().channel_allowed(name, kind == Kind::Pattern)
        });
    for shared in refused {
        close(ctx, &shared);
    }
}
