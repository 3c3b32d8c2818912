//! INFO commandstats and latencystats: per command, the calls, their time, the calls refused
//! before running (`rejected_calls`) and the calls that answered an error (`failed_calls`),
//! and a latency histogram for percentiles, as Redis 7.0 keeps them.
//!
//! Counting is on every command's path, so no lock and no shared cache line is touched per
//! command: each thread that runs commands owns a table of counters that only it writes
//! (plain load-then-store on atomics, no read-modify-write), registered once per thread.
//! INFO sums the tables; CONFIG RESETSTAT records the sums as a baseline that INFO
//! subtracts, since a reset cannot write into counters other threads own.

use parking_lot::Mutex;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, OnceLock};

/// A command (or subcommand) as the statistics count it: an entry of the static command
/// table, told apart by its address (no hashing of names on every command's path).
pub trait CountedCommand: Sync {
    /// `name` or `parent|sub`.
    fn counted_name(&self) -> &'static str;
}

/// The address that identifies `command` in the tables.
fn key_of(command: &'static dyn CountedCommand) -> usize {
    command as *const dyn CountedCommand as *const () as usize
}

/// Threads that get a table of their own. Commands run on the io-threads, the fabric pollers
/// and a few service threads; should more threads than this ever run commands, the rest share
/// one table updated with atomic adds (correct, only slower).
pub const COMMAND_STATS_THREADS_MAX: usize = 256;

/// Latency histogram: exact below `SUB_BUCKETS` ns, then `SUB_BUCKETS` buckets per power of
/// two (within 1/16 = 6.25%, near Redis's two significant digits), up to 2^`TOP_EXPONENT` ns
/// (18 minutes); longer calls count in the last bucket.
const SUB_BITS: u32 = 4;
const SUB_BUCKETS: usize = 1 << SUB_BITS;
const TOP_EXPONENT: u32 = 40;
const BUCKETS: usize = SUB_BUCKETS + (TOP_EXPONENT - SUB_BITS + 1) as usize * SUB_BUCKETS;

fn bucket_of(ns: u64) -> usize {
    if ns < SUB_BUCKETS as u64 {
        return ns as usize;
    }
    let exponent = (63 - ns.leading_zeros()).min(TOP_EXPONENT);
    let sub = if exponent == TOP_EXPONENT && ns >> TOP_EXPONENT > 1 {
        SUB_BUCKETS - 1
    } else {
        ((ns >> (exponent - SUB_BITS)) as usize) & (SUB_BUCKETS - 1)
    };
    SUB_BUCKETS + (exponent - SUB_BITS) as usize * SUB_BUCKETS + sub
}

/// The highest duration (ns) that falls in bucket `b`.
fn bucket_top(b: usize) -> u64 {
    if b < SUB_BUCKETS {
        return b as u64;
    }
    let exponent = (b - SUB_BUCKETS) / SUB_BUCKETS + SUB_BITS as usize;
    let sub = ((b - SUB_BUCKETS) % SUB_BUCKETS) as u64;
    let step = 1u64 << (exponent - SUB_BITS as usize);
    ((SUB_BUCKETS as u64 + sub) << (exponent - SUB_BITS as usize)) + step - 1
}

/// One command's counters in one thread's table.
#[derive(Default)]
struct Counters {
    calls: AtomicU64,
    nanos: AtomicU64,
    rejected: AtomicU64,
    failed: AtomicU64,
    /// Allocated on the command's first call in this thread (most commands never run).
    histogram: OnceLock<Box<[AtomicU64]>>,
}

/// The counters of the commands one thread (or the overflow of threads) ran.
struct Table {
    /// Only the owning thread writes: load + store is enough. The overflow table is shared.
    single_writer: bool,
    counters: Box<[Counters]>,
}

impl Table {
    fn new(commands: usize, single_writer: bool) -> Self {
        Table {
            single_writer,
            counters: (0..commands).map(|_| Counters::default()).collect(),
        }
    }

    fn bump(&self, counter: &AtomicU64, n: u64) {
        if self.single_writer {
            counter.store(counter.load(Relaxed).wrapping_add(n), Relaxed);
        } else {
            counter.fetch_add(n, Relaxed);
        }
    }
}

/// One command's totals across threads.
#[derive(Clone, Default, PartialEq, Debug)]
pub struct CommandTotals {
    pub calls: u64,
    pub usec: u64,
    pub rejected_calls: u64,
    pub failed_calls: u64,
    /// Bucket counts (empty: never timed).
    histogram: Vec<u64>,
}

impl CommandTotals {
    /// The histogram as LATENCY HISTOGRAM reports it: for bucket bounds 1024 ns, 2048 ns,
    /// ... (powers of two, as Redis iterates its HDR histogram), `(bound in µs, calls below
    /// the bound)` wherever that count grows.
    pub fn power_of_two_cdf(&self) -> Vec<(u64, u64)> {
        let total: u64 = self.histogram.iter().sum();
        let mut out = Vec::new();
        let (mut below, mut b, mut previous) = (0u64, 0usize, 0u64);
        let mut bound: u64 = 1024;
        while previous < total {
            while b < self.histogram.len() && bucket_top(b) < bound {
                below += self.histogram[b];
                b += 1;
            }
            if b == self.histogram.len() {
                below = total;
            }
            if below > previous {
                out.push(((bound - 1) / 1000, below));
                previous = below;
            }
            bound = bound.saturating_mul(2);
        }
        out
    }

    /// The duration (µs) at `percentile` of this command's calls, as HDR histograms answer it:
    /// the smallest bucket top that at least that share of the calls does not exceed.
    pub fn percentile_usec(&self, percentile: f64) -> f64 {
        let total: u64 = self.histogram.iter().sum();
        if total == 0 {
            return 0.0;
        }
        let wanted = ((percentile / 100.0) * total as f64).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (b, n) in self.histogram.iter().enumerate() {
            seen += n;
            if seen >= wanted {
                return bucket_top(b) as f64 / 1000.0;
            }
        }
        0.0
    }
}

/// Every command's counters, for one server.
pub struct CommandStats {
    /// Tells this server's thread tables apart from another server's in the same process.
    id: u64,
    /// Command (or subcommand) spec address -> its index in the tables.
    index: HashMap<usize, usize, ahash::RandomState>,
    specs: Vec<&'static dyn CountedCommand>,
    tables: Mutex<Vec<Arc<Table>>>,
    overflow: Arc<Table>,
    /// The totals at the last CONFIG RESETSTAT.
    baseline: Mutex<Vec<CommandTotals>>,
    /// `latency-tracking`: whether calls are added to the latency histograms.
    latency_tracking: AtomicBool,
}

/// This thread's table in one server, and the command it counted last there.
struct ThreadTable {
    server: u64,
    table: Arc<Table>,
    /// `(key_of(spec), index)` of the last command counted: a run of one command (a
    /// pipeline of SETs, a benchmark) then skips the hash lookup, whose probe missed the
    /// cache often enough to cost ~3% of a pipelined SET's CPU.
    last: Cell<(usize, usize)>,
}

thread_local! {
    /// This thread's table in each server (by server id) that it ran commands for.
    static THREAD_TABLES: RefCell<Vec<ThreadTable>> = const { RefCell::new(Vec::new()) };
}

impl CommandStats {
    /// Counters for `specs`, every command and subcommand of the table.
    pub fn new(specs: Vec<&'static dyn CountedCommand>) -> Self {
        static NEXT_ID: AtomicU64 = AtomicU64::new(1);
        let index = specs
            .iter()
            .enumerate()
            .map(|(i, s)| (key_of(*s), i))
            .collect();
        CommandStats {
            id: NEXT_ID.fetch_add(1, Relaxed),
            index,
            overflow: Arc::new(Table::new(specs.len(), false)),
            specs,
            tables: Mutex::new(Vec::new()),
            baseline: Mutex::new(Vec::new()),
            latency_tracking: AtomicBool::new(true),
        }
    }

    /// `latency-tracking yes|no`.
    pub fn set_latency_tracking(&self, on: bool) {
        self.latency_tracking.store(on, Relaxed);
    }

    pub fn latency_tracking(&self) -> bool {
        self.latency_tracking.load(Relaxed)
    }

    /// The index of `spec` in the tables.
    fn index_of(&self, key: usize, spec: &'static dyn CountedCommand) -> Option<usize> {
        let found = self.index.get(&key).copied();
        debug_assert!(
            found.is_some(),
            "{} is not in the command table",
            spec.counted_name()
        );
        found
    }

    /// Runs `f` on this thread's table and the command's counters.
    fn with_counters(&self, spec: &'static dyn CountedCommand, f: impl FnOnce(&Table, &Counters)) {
        let key = key_of(spec);
        THREAD_TABLES.with(|cell| {
            // Borrowed, not cloned: an `Arc` clone per command was two atomic operations
            // on the command path.
            if let Some(mine) = cell.borrow().iter().find(|t| t.server == self.id) {
                let (last_key, last_index) = mine.last.get();
                let i = if last_key == key {
                    last_index
                } else {
                    let Some(i) = self.index_of(key, spec) else {
                        return;
                    };
                    mine.last.set((key, i));
                    i
                };
                f(&mine.table, &mine.table.counters[i]);
                return;
            }
            let Some(i) = self.index_of(key, spec) else {
                return;
            };
            let table = self.register_thread();
            f(&table, &table.counters[i]);
            cell.borrow_mut().push(ThreadTable {
                server: self.id,
                table,
                last: Cell::new((key, i)),
            });
        });
    }

    #[cold]
    fn register_thread(&self) -> Arc<Table> {
        let mut tables = self.tables.lock();
        if tables.len() >= COMMAND_STATS_THREADS_MAX {
            return self.overflow.clone();
        }
        let t = Arc::new(Table::new(self.specs.len(), true));
        tables.push(t.clone());
        t
    }

    /// A call of `spec` that ran for `nanos`; `failed` if it answered an error.
    pub fn record(&self, spec: &'static dyn CountedCommand, nanos: u64, failed: bool) {
        let track_latency = self.latency_tracking();
        self.with_counters(spec, |t, c| {
            t.bump(&c.calls, 1);
            t.bump(&c.nanos, nanos);
            if failed {
                t.bump(&c.failed, 1);
            }
            if !track_latency {
                return;
            }
            let histogram = c
                .histogram
                .get_or_init(|| (0..BUCKETS).map(|_| AtomicU64::new(0)).collect());
            t.bump(&histogram[bucket_of(nanos)], 1);
        });
    }

    /// A call of `spec` refused before it ran (arity, authentication, MULTI, OOM, routing).
    pub fn record_rejected(&self, spec: &'static dyn CountedCommand) {
        self.with_counters(spec, |t, c| t.bump(&c.rejected, 1));
    }

    fn raw_totals(&self) -> Vec<CommandTotals> {
        let mut totals = vec![CommandTotals::default(); self.specs.len()];
        let tables = self.tables.lock();
        for table in tables.iter().chain(std::iter::once(&self.overflow)) {
            for (total, c) in totals.iter_mut().zip(table.counters.iter()) {
                total.calls += c.calls.load(Relaxed);
                total.usec += c.nanos.load(Relaxed);
                total.rejected_calls += c.rejected.load(Relaxed);
                total.failed_calls += c.failed.load(Relaxed);
                if let Some(h) = c.histogram.get() {
                    if total.histogram.is_empty() {
                        total.histogram = vec![0; BUCKETS];
                    }
                    for (sum, n) in total.histogram.iter_mut().zip(h.iter()) {
                        *sum += n.load(Relaxed);
                    }
                }
            }
        }
        totals
    }

    /// `(name, totals)` of every command called or rejected since the last reset, in name
    /// order (subcommands as `parent|sub`), with `usec` in microseconds.
    pub fn totals(&self) -> Vec<(&'static str, CommandTotals)> {
        let raw = self.raw_totals();
        let baseline = self.baseline.lock();
        let mut out: Vec<(&'static str, CommandTotals)> = Vec::new();
        for (i, mut t) in raw.into_iter().enumerate() {
            if let Some(b) = baseline.get(i) {
                t.calls -= b.calls;
                t.usec -= b.usec;
                t.rejected_calls -= b.rejected_calls;
                t.failed_calls -= b.failed_calls;
                for (n, old) in t.histogram.iter_mut().zip(b.histogram.iter()) {
                    *n -= old;
                }
            }
            if t.calls == 0 && t.rejected_calls == 0 && t.failed_calls == 0 {
                continue;
            }
            t.usec /= 1000;
            out.push((self.specs[i].counted_name(), t));
        }
        out.sort_by_key(|(name, _)| *name);
        out
    }

    /// CONFIG RESETSTAT.
    pub fn reset(&self) {
        let raw = self.raw_totals();
        *self.baseline.lock() = raw;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command_framework::table;

    #[test]
    fn buckets_are_ordered_and_hold_their_values() {
        let mut last_top = None;
        for b in 0..BUCKETS {
            let top = bucket_top(b);
            assert!(last_top.is_none_or(|t| t < top), "bucket {b}");
            assert_eq!(bucket_of(top), b, "bucket {b} top {top}");
            last_top = Some(top);
        }
        for ns in [
            0,
            1,
            15,
            16,
            17,
            999,
            1000,
            1_000_000,
            123_456_789,
            u64::MAX,
        ] {
            let b = bucket_of(ns);
            assert!(b < BUCKETS);
            if ns <= bucket_top(BUCKETS - 1) {
                assert!(
                    ns <= bucket_top(b) && (b == 0 || ns > bucket_top(b - 1)),
                    "{ns}"
                );
            }
        }
        // Within 1/16 of the value.
        let top = bucket_top(bucket_of(1_000_000));
        assert!((1_000_000..=1_062_500).contains(&top), "{top}");
    }

    #[test]
    fn calls_from_several_threads_add_up_and_reset_starts_from_zero() {
        crate::commands::install_table();
        let stats = Arc::new(CommandStats::new(table::counted()));
        let get = table::lookup(b"get").expect("get");
        let config_get = table::lookup_sub(table::lookup(b"config").expect("config"), b"get")
            .expect("config get");
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let stats = stats.clone();
                std::thread::spawn(move || {
                    for i in 0..1000u64 {
                        stats.record(get, 1000 + i, i % 10 == 0);
                    }
                    stats.record_rejected(get);
                })
            })
            .collect();
        for t in threads {
            t.join().expect("thread");
        }
        stats.record(config_get, 5_000_000, false);
        let totals = stats.totals();
        let names: Vec<_> = totals.iter().map(|(n, _)| *n).collect();
        assert_eq!(names, ["config|get", "get"]);
        let g = &totals[1].1;
        assert_eq!((g.calls, g.rejected_calls, g.failed_calls), (4000, 4, 400));
        // 4 x (1000 x 1000 + 0..999) ns.
        assert_eq!(g.usec, (4 * (1000 * 1000 + 999 * 1000 / 2)) / 1000);
        let p50 = g.percentile_usec(50.0);
        assert!((1.4..=1.6).contains(&p50), "{p50}");
        assert!(g.percentile_usec(99.9) >= g.percentile_usec(99.0));
        // 1000..1023 ns below 1024 ns, the rest below 2048 ns.
        assert_eq!(g.power_of_two_cdf(), [(1, 4 * 24), (2, 4000)]);
        assert!((5000.0..=5320.0).contains(&totals[0].1.percentile_usec(50.0)));

        stats.reset();
        assert!(stats.totals().is_empty());
        stats.record(get, 10, false);
        let after = stats.totals();
        assert_eq!(after.len(), 1);
        assert_eq!((after[0].1.calls, after[0].1.usec), (1, 0));
        assert_eq!(after[0].1.percentile_usec(50.0), 0.01);
    }

    /// The last-command shortcut of a thread's table never counts a call under another
    /// command, nor in another server's table: commands interleaved in runs and alone, on
    /// two servers from one thread.
    #[test]
    fn interleaved_commands_and_servers_count_apart() {
        crate::commands::install_table();
        let one = CommandStats::new(table::counted());
        let two = CommandStats::new(table::counted());
        let get = table::lookup(b"get").expect("get");
        let set = table::lookup(b"set").expect("set");
        let config_get = table::lookup_sub(table::lookup(b"config").expect("config"), b"get")
            .expect("config get");
        let order = [get, get, set, get, set, set, set, config_get, get];
        for spec in order {
            one.record(spec, 1, false);
            two.record(set, 1, false);
        }
        one.record_rejected(set);
        let calls = |stats: &CommandStats| -> Vec<(&str, u64, u64)> {
            stats
                .totals()
                .into_iter()
                .map(|(n, t)| (n, t.calls, t.rejected_calls))
                .collect()
        };
        assert_eq!(
            calls(&one),
            [("config|get", 1, 0), ("get", 4, 0), ("set", 4, 1)]
        );
        assert_eq!(calls(&two), [("set", 9, 0)]);
    }
}
