//! The lost-write check: every acknowledged write is read back from its key's current owner
//! (by CLUSTER SLOTS); a key that is missing or holds another value is lost.

use std::time::Duration;

use anyhow::{anyhow, bail};
use proto::resp::Frame;

use super::super::sync_client::{error_text, frame_text, slot_ports, SyncClient};
use super::writer::Acked;

/// GETs per pipeline when reading keys back.
const VERIFY_BATCH: usize = 500;
/// Lost writes shown by name in the report.
const EXAMPLES_MAX: usize = 5;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LostWrites {
    pub lost: u64,
    /// Of those, the ones known to have been on a replica.
    pub lost_synced: u64,
    pub examples: Vec<String>,
}

/// Reads `entries` back from their owners. Fails if a key cannot be read at all.
pub fn read_back(ports: &[u16], entries: &[Acked]) -> anyhow::Result<LostWrites> {
    let mut owners = None;
    for &port in ports {
        let map = SyncClient::connect(port, Duration::from_secs(2))
            .and_then(|mut c| c.request(&["CLUSTER", "SLOTS"]))
            .and_then(|reply| slot_ports(&reply));
        if let Ok(map) = map {
            owners = Some(map);
            break;
        }
    }
    let owners = owners.unwrap_or_else(|| vec![0; proto::slot::SLOT_COUNT]);
    // Grouped by owner, owners in the order first met.
    let mut by_port: Vec<(u16, Vec<&Acked>)> = Vec::new();
    for entry in entries {
        let port = owners[usize::from(proto::slot::key_slot(entry.key.as_bytes()))];
        match by_port.iter_mut().find(|(p, _)| *p == port) {
            Some((_, list)) => list.push(entry),
            None => by_port.push((port, vec![entry])),
        }
    }
    let mut out = LostWrites::default();
    for (port, items) in by_port {
        if port == 0 {
            bail!("read-back: slots without an owner");
        }
        let mut c = SyncClient::connect(port, Duration::from_secs(10))
            .map_err(|e| anyhow!("read-back: {e:#}"))?;
        for batch in items.chunks(VERIFY_BATCH) {
            let gets: Vec<Vec<&str>> = batch.iter().map(|e| vec!["GET", e.key.as_str()]).collect();
            let replies = c
                .pipeline(&gets)
                .map_err(|e| anyhow!("read-back on port {port}: {e:#}"))?;
            for (entry, got) in batch.iter().zip(replies) {
                if let Some(message) = error_text(&got) {
                    bail!("read-back: GET {} on port {port}: {message}", entry.key);
                }
                let value = match &got {
                    Frame::Null | Frame::NullBulk => None,
                    other => frame_text(other),
                };
                if value.as_deref() != Some(entry.value.as_str()) {
                    out.lost += 1;
                    out.lost_synced += u64::from(entry.synced);
                    if out.examples.len() < EXAMPLES_MAX {
                        out.examples.push(format!(
                            "{}: wrote {:?}, read {}",
                            entry.key,
                            entry.value,
                            value.map_or("None".to_string(), |v| format!("{v:?}"))
                        ));
                    }
                }
            }
        }
    }
    Ok(out)
}
