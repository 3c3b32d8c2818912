//! Timing one failover: after the kill, the killed primary's replica is probed every
//! [`PROBE_INTERVAL`] with CLUSTER NODES (promoted when it flags itself `myself,master`) and a
//! SET of a key in one of the killed primary's slots; failover time = kill -> first OK.

use std::time::{Duration, Instant};

use anyhow::bail;
use proto::resp::Frame;

use super::super::sync_client::{error_text, frame_text, SyncClient};
use super::health::cluster_nodes;

/// Failover time resolution.
const PROBE_INTERVAL: Duration = Duration::from_millis(5);
/// A probe write held longer than this counts as not yet.
const PROBE_TIMEOUT: Duration = Duration::from_secs(1);

/// Failure detection plus election take a few node timeouts; beyond this, no failover.
pub fn failover_timeout(node_timeout_ms: u64) -> Duration {
    Duration::from_millis((30 * node_timeout_ms).max(30_000))
}

/// Kill -> promotion and kill -> first accepted write.
#[derive(Clone, Copy, Debug)]
pub struct FailoverTimes {
    pub promoted: Duration,
    pub wrote: Duration,
}

/// Whether the node flags itself `myself,master` in CLUSTER NODES.
fn myself_is_primary(c: &mut SyncClient) -> anyhow::Result<bool> {
    Ok(cluster_nodes(c)?
        .iter()
        .find(|n| n.has_flag("myself"))
        .is_some_and(|n| n.has_flag("master")))
}

/// Probes until a write succeeds or `timeout` after `killed_at`; calls `restart` once, as
/// soon as the replica is promoted (or a write succeeded): a node that answers writes only
/// once a replica acknowledged them (`repl-sync-acks 1`) needs the killed node back as its
/// replica.
pub fn probe_failover(
    replica_port: u16,
    victim_port: u16,
    probe_key: &str,
    timeout: Duration,
    killed_at: Instant,
    restart: &mut dyn FnMut(),
) -> anyhow::Result<FailoverTimes> {
    let deadline = killed_at + timeout;
    let (mut promoted, mut wrote) = (None, None);
    let mut restarted = false;
    let mut conn: Option<SyncClient> = None;
    let mut n = 0u64;
    let mut last = "nothing".to_string();
    while Instant::now() < deadline {
        let now = Instant::now();
        let attempt = (|| -> anyhow::Result<()> {
            if conn.is_none() {
                conn = Some(SyncClient::connect(replica_port, PROBE_TIMEOUT)?);
            }
            let c = conn.as_mut().expect("connected above");
            if promoted.is_none() && myself_is_primary(c)? {
                promoted = Some(now - killed_at);
            }
            n += 1;
            let reply = c.request(&["SET", probe_key, &format!("probe-{n}")])?;
            if matches!(&reply, Frame::Simple(s) if s.as_ref() == b"OK") {
                wrote = Some(killed_at.elapsed());
            } else {
                last = error_text(&reply)
                    .or_else(|| frame_text(&reply))
                    .unwrap_or_else(|| format!("{reply:?}"));
            }
            Ok(())
        })();
        if let Err(e) = attempt {
            last = format!("{e:#}");
            conn = None;
        }
        if wrote.is_some() && promoted.is_none() {
            promoted = wrote;
        }
        if !restarted && (wrote.is_some() || promoted.is_some()) {
            restart();
            restarted = true;
        }
        if let (Some(promoted), Some(wrote)) = (promoted, wrote) {
            return Ok(FailoverTimes { promoted, wrote });
        }
        std::thread::sleep(PROBE_INTERVAL);
    }
    let state = match promoted {
        Some(p) => format!("promoted after {} ms but no write accepted", p.as_millis()),
        None => "replica never promoted".to_string(),
    };
    bail!(
        "no failover within {} s of killing port {victim_port} ({state}; replica port \
         {replica_port}; its last answer to SET {probe_key}: {last})",
        timeout.as_secs()
    )
}
