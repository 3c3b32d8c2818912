//! A migration link's setup calls, the same over either carrier: `CLUSTER SYNCSLOTS
//! ESTABLISH` until the target has applied the batch's begin, and (over the TCP control
//! connection) `CLUSTER SYNCSLOTS FABRIC`, where the target serves clients on the fabric.

use crate::cluster::migration::MigrationId;
use crate::node_state::fabric_serving::FabricEndpoint;
use crate::server::repl_link::control::{Caller, Control, ControlError};
use proto::resp::Frame;
use std::time::{Duration, Instant};

/// How long the target may take to apply the batch's `MigrationBegin` (it learns the log
/// a moment after the source).
const ESTABLISH_WAIT: Duration = Duration::from_secs(10);
const ESTABLISH_RETRY: Duration = Duration::from_millis(1);

/// Makes the connection behind `caller` batch `batch`'s import link of migration `id`.
pub fn establish(caller: &mut dyn Caller, id: MigrationId, batch: u32) -> Result<(), String> {
    let id_text = id.to_string();
    let batch_text = batch.to_string();
    let connected = Instant::now();
    let deadline = connected + ESTABLISH_WAIT;
    let mut attempts = 0u32;
    loop {
        attempts += 1;
        let reply = caller.call(&[
            b"CLUSTER",
            b"SYNCSLOTS",
            b"ESTABLISH",
            id_text.as_bytes(),
            batch_text.as_bytes(),
        ]);
        match reply {
            Ok(Frame::Integer(1)) => break,
            Ok(Frame::Integer(0)) if Instant::now() < deadline => {
                // Background thread owning its loop: the target has not applied the
                // batch's begin yet.
                std::thread::sleep(ESTABLISH_RETRY)
            }
            Ok(Frame::Integer(0)) => {
                return Err(format!(
                    "the target did not apply batch {batch} within {ESTABLISH_WAIT:?}"
                ))
            }
            Ok(other) => return Err(format!("the target answered {other:?} to ESTABLISH")),
            Err(ControlError::Refused(why)) => return Err(format!("the target refused: {why}")),
            Err(e) => return Err(format!("link to the target: {e}")),
        }
    }
    tracing::trace!(
        migration = %id,
        batch,
        attempts,
        waited_us = connected.elapsed().as_micros() as u64,
        "import link established"
    );
    Ok(())
}

/// Where the target serves clients on the fabric; None when it does not (or is a node
/// that does not know the question).
pub fn fabric_endpoint(control: &mut Control) -> Result<Option<FabricEndpoint>, String> {
    match control.call(&[b"CLUSTER", b"SYNCSLOTS", b"FABRIC"]) {
        Ok(Frame::Array(items)) if items.is_empty() => Ok(None),
        Ok(Frame::Array(items)) => match items.as_slice() {
            [Frame::Bulk(provider), Frame::Bulk(ip), Frame::Integer(port)] => {
                let port = u16::try_from(*port)
                    .ok()
                    .filter(|p| *p != 0)
                    .ok_or_else(|| format!("the target named fabric port {port}"))?;
                let ip = std::str::from_utf8(ip)
                    .ok()
                    .and_then(|t| t.parse().ok())
                    .ok_or_else(|| format!("the target named fabric address {ip:?}"))?;
                Ok(Some(FabricEndpoint {
                    provider: String::from_utf8_lossy(provider).into_owned(),
                    ip,
                    port,
                }))
            }
            _ => Err(format!("the target's fabric endpoint is {items:?}")),
        },
        Ok(other) => Err(format!("the target's fabric endpoint is {other:?}")),
        Err(ControlError::Refused(_)) => Ok(None),
        Err(e) => Err(format!("asking the target for its fabric endpoint: {e}")),
    }
}
