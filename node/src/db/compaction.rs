//! Compaction of the slot tables' allocations: moving every table's record array and index
//! to fresh, densely packed allocations once the keyspace stops growing, so that the slabs
//! their growth left sparse are emptied and their pages returned.
//!
//! Why it is needed: 16,384 tables grow side by side, each through several of jemalloc's
//! size classes, and a class's slab (4 to 128 allocations of that size) is freed only when
//! every allocation in it has moved on. Tables that stop growing in a class strand the rest
//! of their slabs: after a million keys, 10.8 MB of jemalloc's `active` bytes (5.9%) were
//! such holes (`MEMORY MALLOC-STATS`, `scripts/memory-per-key.sh`). Redis's answer is
//! `activedefrag`, which needs a jemalloc patch to ask how full a slab is; this asks
//! nothing of jemalloc: it moves every table, in address order, into an arena of its own,
//! with its thread cache off (so that no move lands in the hole the previous one left),
//! where the moved tables are packed one after another.
//!
//! It runs on its own thread and takes one shard's lock per table moved (a few hundred
//! nanoseconds to copy a table of 60 keys), so commands wait at most that long; nothing on
//! a command's path changes.

use super::databases::Dbs;
use super::keyspace::{Keyspace, SHARD_COUNT};
use std::sync::OnceLock;
use std::time::Duration;
use tikv_jemalloc_ctl::{epoch, stats, Access as _, AsName as _};

/// How often the compaction thread reads the allocator's totals.
pub const CHECK_INTERVAL: Duration = Duration::from_millis(250);
/// Fewest stranded bytes (`active` less `allocated`) worth a pass, whatever the dataset.
pub const MIN_WASTE_BYTES: u64 = 8 << 20;
/// Stranded bytes worth a pass as a fraction of the bytes allocated (1/32: 3.1%).
pub const WASTE_DIVISOR: u64 = 32;
/// The keyspace counts as settled when `allocated` moved by less than this fraction of
/// itself (1/200: 0.5%) over one [`CHECK_INTERVAL`]: a pass during a bulk load would be
/// undone by the growth that follows it.
pub const SETTLED_DIVISOR: u64 = 200;

/// The allocator's totals, in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Totals {
    pub allocated: u64,
    pub active: u64,
}

impl Totals {
    /// jemalloc's figures now (advances its statistics epoch).
    pub fn read() -> Option<Totals> {
        epoch::advance().ok()?;
        Some(Totals {
            allocated: stats::allocated::read().ok()? as u64,
            active: stats::active::read().ok()? as u64,
        })
    }

    /// Bytes in pages jemalloc holds for allocations that are not there.
    pub fn stranded(&self) -> u64 {
        self.active.saturating_sub(self.allocated)
    }
}

/// When to compact: decided from successive [`Totals`] readings.
#[derive(Debug, Default)]
pub struct Policy {
    last: Option<Totals>,
    /// Stranded bytes a pass could not reclaim (they are not the tables'): the next pass
    /// waits for this much more than its threshold.
    floor: u64,
}

impl Policy {
    /// Whether to compact now, given this reading.
    pub fn due(&mut self, now: Totals) -> bool {
        let last = self.last.replace(now);
        let Some(last) = last else {
            return false;
        };
        let settled = now.allocated.abs_diff(last.allocated) <= now.allocated / SETTLED_DIVISOR;
        let threshold = MIN_WASTE_BYTES.max(now.allocated / WASTE_DIVISOR);
        settled && now.stranded() > self.floor + threshold
    }

    /// Records the reading after a pass.
    pub fn compacted(&mut self, after: Totals) {
        self.floor = after.stranded();
        self.last = Some(after);
    }
}

/// Moves every table of every database to fresh allocations, in the order of their record
/// arrays' addresses (so each old slab is emptied in one stretch, not all of them at the
/// end). Returns the tables moved.
pub fn compact(dbs: Dbs<'_>) -> usize {
    let keyspaces: Vec<&Keyspace> = dbs.iter().collect();
    let mut tables: Vec<(usize, usize, usize, usize)> = Vec::new();
    for (db, keyspace) in keyspaces.iter().enumerate() {
        for shard in 0..SHARD_COUNT {
            let guard = keyspace.lock_shard(shard);
            tables.extend(
                guard
                    .table_addresses()
                    .map(|(table, address)| (address, db, shard, table)),
            );
        }
    }
    tables.sort_unstable();
    let mut moved = 0;
    for (address, db, shard, table) in tables {
        if keyspaces[db]
            .lock_shard(shard)
            .relocate_table(table, address)
        {
            moved += 1;
        }
    }
    moved
}

/// The arena compaction allocates in: one for the process, created on first use.
static ARENA: OnceLock<Option<u32>> = OnceLock::new();

/// Points the calling thread at the compaction arena and turns its thread cache off: what
/// the moves of [`compact`] need to land packed (see the module's comment). Call once, on
/// the thread that compacts.
pub fn prepare_thread() -> tikv_jemalloc_ctl::Result<()> {
    let created = *ARENA.get_or_init(|| b"arenas.create\0".name().read().ok());
    let arena: u32 = match created {
        Some(arena) => arena,
        None => b"arenas.create\0".name().read()?,
    };
    b"thread.arena\0".name().write(arena)?;
    b"thread.tcache.enabled\0".name().write(false)
}

/// One compaction check: compacts `dbs` if `policy` says it is due.
pub fn step(policy: &mut Policy, dbs: Dbs<'_>) {
    let Some(now) = Totals::read() else { return };
    if !policy.due(now) {
        return;
    }
    let moved = compact(dbs);
    if let Err(e) = purge_now() {
        tracing::debug!(error = %e, "emptied slabs are left to jemalloc's decay");
    }
    let after = Totals::read().unwrap_or(now);
    tracing::debug!(
        moved,
        stranded_before = now.stranded(),
        stranded_after = after.stranded(),
        "compacted the slot tables"
    );
    policy.compacted(after);
}

/// Returns every arena's dirty pages to the system now, rather than over the decay time
/// (what compaction just emptied is a few megabytes at once, not churn worth keeping):
/// setting an arena's decay time to 0 purges it, then its own setting is put back.
/// (`arena.<i>.purge` would say it directly but takes a raw, `unsafe` mallctl call.)
fn purge_now() -> tikv_jemalloc_ctl::Result<()> {
    for arena in 0..tikv_jemalloc_ctl::arenas::narenas::read()? {
        let name = format!("arena.{arena}.dirty_decay_ms\0");
        let decay: isize = match name.name().read() {
            Ok(decay) => decay,
            // An index no arena was created at (jemalloc numbers arenas up to narenas).
            Err(_) => continue,
        };
        name.name().write(0isize)?;
        name.name().write(decay)?;
    }
    Ok(())
}

/// Starts the compaction thread. Every [`CHECK_INTERVAL`] it calls `with_dbs` with a
/// [`step`] to run over the node's databases; `with_dbs` returns false (without running
/// it) once the node is gone, which ends the thread.
pub fn spawn(
    mut with_dbs: impl FnMut(&mut dyn FnMut(Dbs<'_>)) -> bool + Send + 'static,
) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name("compaction".into())
        .spawn(move || {
            if let Err(e) = prepare_thread() {
                tracing::warn!(error = %e, "no arena for compaction; tables are not compacted");
                return;
            }
            let mut policy = Policy::default();
            loop {
                // This thread serves no command: sleeping here delays nothing but itself.
                std::thread::sleep(CHECK_INTERVAL);
                if !with_dbs(&mut |dbs| step(&mut policy, dbs)) {
                    return;
                }
            }
        })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::{Access, Entry, Value};

    const MIB: u64 = 1 << 20;

    fn totals(allocated_mib: u64, active_mib: u64) -> Totals {
        Totals {
            allocated: allocated_mib * MIB,
            active: active_mib * MIB,
        }
    }

    /// Goal: a pass only once growth has stopped and enough is stranded, and not again for
    /// what a pass could not reclaim.
    #[test]
    fn the_policy_waits_for_a_settled_keyspace_and_new_waste() {
        let mut policy = Policy::default();
        assert!(
            !policy.due(totals(100, 120)),
            "no earlier reading to compare"
        );
        assert!(!policy.due(totals(150, 170)), "still growing");
        assert!(policy.due(totals(150, 170)), "settled, 20 MiB stranded");
        policy.compacted(totals(150, 158));
        assert!(!policy.due(totals(150, 165)), "7 MiB above what stayed");
        assert!(!policy.due(totals(150, 158)));
        assert!(policy.due(totals(150, 175)), "17 MiB above what stayed");
        let mut small = Policy::default();
        small.due(totals(10, 17));
        assert!(!small.due(totals(10, 17)), "7 MiB: below the floor");
    }

    /// Goal: compaction moves tables without changing a key. Method: fill a keyspace,
    /// compact it, read every key back.
    #[test]
    fn compaction_moves_tables_and_keeps_every_key() {
        let keyspace = Keyspace::new();
        let keys = 20_000;
        for i in 0..keys {
            let key = format!("key:{i}");
            let slot = proto::slot::key_slot(key.as_bytes());
            let mut shard = keyspace.lock_shard(crate::db::keyspace::shard_of_slot(slot));
            shard.table_mut(slot).insert(
                key.as_bytes(),
                Entry::new(Value::Int(i)),
                Access::fresh(0),
            );
        }
        let moved = compact(Dbs::from(&keyspace));
        assert!(moved > 10_000, "{moved} tables moved");
        for i in 0..keys {
            let key = format!("key:{i}");
            let slot = proto::slot::key_slot(key.as_bytes());
            let shard = keyspace.lock_shard(crate::db::keyspace::shard_of_slot(slot));
            match shard.table(slot).get(key.as_bytes()).map(|e| &e.value) {
                Some(Value::Int(n)) => assert_eq!(*n, i),
                _ => panic!("{key} lost"),
            }
        }
    }
}
