//! `repl-sync-acks N`: a write is answered only once N replicas acknowledged its offset, so
//! that every answered write is on a replica when its primary dies (failover promotes the
//! replica holding most). The reply is already in the client's output when the command
//! returns; the client is blocked with that output held (transports write nothing while the
//! block lasts), released when the acknowledgements arrive, and at `repl-sync-timeout` the
//! held reply is replaced by `-NOREPLICAS`. A write that finds fewer than N replicas
//! streaming is refused before it runs (the dispatcher's admission), as Redis's
//! `min-replicas-to-write`.

use super::Server;
use crate::command_framework::ctx::{BlockRequest, TimeoutReply, SYNC_ACKS_TIMEOUT_ERROR};
use crate::node_state::client::Client;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

/// After a command ran: a block holding its reply when it wrote under `repl-sync-acks` and
/// its acknowledgements are not all in yet. `offset_before` is the client's last write offset
/// before the command, `held_from` where the command's reply starts in the output.
///
/// Inlined for its first tests (see `command_framework::acl_check::check`).
#[inline]
pub fn hold_for_acks(
    server: &Server,
    client: &Client,
    offset_before: u64,
    held_from: usize,
) -> Option<BlockRequest> {
    let wanted = server.hot.repl_sync_acks.load(Relaxed);
    // Inside MULTI nothing ran yet (EXEC is the write); the primary's own stream is never
    // held (a replica answers nothing to it).
    if wanted == 0 || client.repl_offset <= offset_before || client.multi.is_some() {
        return None;
    }
    hold_write_for_acks(server, client, wanted, held_from)
}

/// [`hold_for_acks`] for a write under `repl-sync-acks` (`wanted`).
fn hold_write_for_acks(
    server: &Server,
    client: &Client,
    wanted: u64,
    held_from: usize,
) -> Option<BlockRequest> {
    if client.primary_link {
        return None;
    }
    // Every wanted acknowledgement is waited for, including a replica the cluster holds
    // FAIL: the dispatcher refused the write if fewer replicas were streaming, and one
    // that died since answers the client `-NOREPLICAS` at the timeout, never OK.
    let wanted = wanted as usize;
    let offset = client.repl_offset;
    let timeout_reply = TimeoutReply::SyncAcks {
        offset,
        wanted,
        held_from,
    };
    match server.replication.wait(&client.shared, offset, wanted) {
        Ok(Ok(_)) => None,
        Ok(Err(_)) => Some(BlockRequest {
            keys: Vec::new(),
            timeout: Some(Duration::from_millis(
                server.hot.repl_sync_timeout_ms.load(Relaxed).max(1),
            )),
            retry: Vec::new(),
            timeout_reply,
        }),
        // Too many clients waiting: answer at once as if the time ran out.
        Err(e) => {
            tracing::warn!(error = %e, "a synchronous write could not wait for its acks");
            Some(BlockRequest {
                keys: Vec::new(),
                timeout: Some(Duration::ZERO),
                retry: Vec::new(),
                timeout_reply,
            })
        }
    }
}

/// Whether a held write's acknowledgements are all in (the wake-up check).
pub fn acknowledged(server: &Server, offset: u64, wanted: usize) -> bool {
    server.replication.count_acked(offset) >= wanted
}

/// The held reply replaced by the timeout's error.
pub fn time_out(
    output: &mut bytes::BytesMut,
    protocol: proto::resp::ProtocolVersion,
    held_from: usize,
) {
    output.truncate(held_from.min(output.len()));
    let mut reply = proto::resp::Reply::new(output, protocol);
    reply.error(SYNC_ACKS_TIMEOUT_ERROR);
}
