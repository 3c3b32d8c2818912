//! GetSlotStats: per slot, the keys and bytes this node holds and the keyed commands it
//! served per second. Keys and bytes are read on request (a walk of the slot's table: no
//! counter on the write path); ops/s are differences of the per-slot served counters
//! (`cluster::slot_ops`), sampled once per [`RATE_INTERVAL`].

use crate::server::Server;
use parking_lot::Mutex;
use proto::admin::v1 as pb;
use proto::slot::SLOT_COUNT;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tonic::Status;

/// Over what interval ops/s are measured.
pub const RATE_INTERVAL: Duration = Duration::from_secs(1);

/// The last interval's rates, per slot (empty until the second sample).
static RATES: Mutex<Vec<f64>> = Mutex::new(Vec::new());

/// Samples the served counters every [`RATE_INTERVAL`] until shutdown.
pub async fn sample_rates(server: Arc<Server>) {
    let Some(cluster) = server.cluster.as_ref() else {
        return;
    };
    cluster.slot_ops.start_counting();
    let mut prev = (cluster.slot_ops.snapshot(), Instant::now());
    let mut ticker = tokio::time::interval(RATE_INTERVAL);
    loop {
        tokio::select! {
            _ = ticker.tick() => {}
            _ = server.shutdown.wait() => return,
        }
        let now = (cluster.slot_ops.snapshot(), Instant::now());
        let secs = now.1.duration_since(prev.1).as_secs_f64();
        if secs > 0.0 {
            let rates = now
                .0
                .iter()
                .zip(&prev.0)
                .map(|(n, p)| n.saturating_sub(*p) as f64 / secs)
                .collect();
            *RATES.lock() = rates;
        }
        prev = now;
    }
}

/// The slots asked for, checked: each range within 0..16383 and in order. Empty: the
/// slots this node owns.
pub fn requested_slots(server: &Server, ranges: &[pb::SlotRange]) -> Result<Vec<u16>, Status> {
    if ranges.is_empty() {
        let Some(cluster) = server.cluster.as_ref() else {
            return Ok((0..SLOT_COUNT as u16).collect());
        };
        let t = cluster.topology.read();
        return Ok(t
            .slots
            .ranges_of(t.myself_index())
            .into_iter()
            .flat_map(|(a, b)| a..=b)
            .collect());
    }
    let mut slots = Vec::new();
    for r in ranges {
        if r.start > r.end || r.end >= SLOT_COUNT as u32 {
            return Err(Status::invalid_argument(format!(
                "slot range {}-{} is not within 0-{}",
                r.start,
                r.end,
                SLOT_COUNT - 1
            )));
        }
        slots.extend(r.start as u16..=r.end as u16);
        // Overlapping ranges could repeat the whole table many times over.
        if slots.len() > SLOT_COUNT {
            return Err(Status::invalid_argument(format!(
                "more than {SLOT_COUNT} slots asked for (overlapping ranges?)"
            )));
        }
    }
    Ok(slots)
}

/// The last sampled ops/s of every slot (empty until the admin API's sampler ran).
pub fn rates() -> Vec<f64> {
    RATES.lock().clone()
}

/// GetSlotStats walks running at once: each walks up to every slot's table on a blocking
/// thread, so callers in a loop could otherwise keep many threads busy.
pub const SLOT_STATS_WALKS_MAX: usize = 2;
static WALKS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// One of the [`SLOT_STATS_WALKS_MAX`] walks; the place is given back when dropped.
pub struct Walk(());

impl Walk {
    /// A place for one walk, or RESOURCE_EXHAUSTED when all are taken.
    pub fn begin() -> Result<Walk, Status> {
        use std::sync::atomic::Ordering;
        let taken = WALKS.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
            (n < SLOT_STATS_WALKS_MAX).then_some(n + 1)
        });
        match taken {
            Ok(_) => Ok(Walk(())),
            Err(_) => Err(Status::resource_exhausted(format!(
                "{SLOT_STATS_WALKS_MAX} GetSlotStats calls are running already; try again"
            ))),
        }
    }
}

impl Drop for Walk {
    fn drop(&mut self) {
        WALKS.fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
    }
}

/// The stats of `slots` (blocking: walks their tables).
pub fn slot_stats(server: &Server, slots: &[u16]) -> pb::GetSlotStatsResponse {
    let rates = RATES.lock().clone();
    let (owners, me) = match server.cluster.as_ref() {
        Some(c) => {
            let t = c.topology.read();
            let owners: Vec<String> = slots
                .iter()
                .map(|s| t.owner(*s).map(|n| n.id.to_string()).unwrap_or_default())
                .collect();
            (owners, t.myself().id.to_string())
        }
        None => (vec![String::new(); slots.len()], String::new()),
    };
    let stats = slots
        .iter()
        .zip(owners)
        .map(|(&slot, owner_id)| {
            let (keys, bytes) = server.keyspace.slot_footprint(slot);
            pb::SlotStats {
                slot: slot.into(),
                keys,
                bytes,
                ops_per_sec: rates.get(slot as usize).copied().unwrap_or(0.0),
                owner_id,
            }
        })
        .collect();
    pb::GetSlotStatsResponse {
        answered_by: me,
        slots: stats,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn walks_at_once_are_bounded_and_given_back() {
        let held: Vec<Walk> = (0..SLOT_STATS_WALKS_MAX)
            .map(|_| Walk::begin().unwrap())
            .collect();
        let refused = Walk::begin().err().unwrap();
        assert_eq!(refused.code(), tonic::Code::ResourceExhausted);
        drop(held);
        assert!(Walk::begin().is_ok());
    }
}
