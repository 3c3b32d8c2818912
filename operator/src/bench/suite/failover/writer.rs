//! The failover suite's writer: continuous writes of unique keys `fo:<seq>` with unique
//! values, one at a time (paced), routed by slot (MOVED followed, the slot map refreshed from
//! CLUSTER SLOTS); records every acknowledged write for the lost-write check.

use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use proto::resp::Frame;
use rand::seq::SliceRandom;

use super::super::sync_client::{error_text, slot_ports, SyncClient};

/// A write held longer than this is not acknowledged.
const WRITE_TIMEOUT: Duration = Duration::from_secs(2);
/// The slot map is refreshed at most this often.
const MAP_REFRESH_MIN: Duration = Duration::from_millis(100);
/// A node that refused a connection is skipped this long.
const DOWN_RETRY: Duration = Duration::from_millis(50);
/// CLUSTER SLOTS for a refresh may take this long per node.
const REFRESH_TIMEOUT: Duration = Duration::from_millis(500);
/// Bound on recorded writes (memory).
pub const WRITES_MAX: usize = 5_000_000;

/// One acknowledged write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Acked {
    pub key: String,
    pub value: String,
    /// Known to be on a replica: our node acknowledges only replicated writes
    /// (`repl-sync-acks 1`); for redis-server, its `WAIT 1 <ms>` answered at least 1.
    pub synced: bool,
}

/// What the writer thread shares with the driver.
#[derive(Debug, Default)]
pub struct WriterState {
    pub acked: Mutex<Vec<Acked>>,
    /// Attempts not acknowledged (error, timeout, refused).
    pub failed: AtomicU64,
    pub stop: AtomicBool,
    pub error: Mutex<Option<String>>,
}

impl WriterState {
    pub fn acked_len(&self) -> usize {
        self.acked.lock().unwrap().len()
    }

    pub fn acked_range(&self, from: usize, to: usize) -> Vec<Acked> {
        self.acked.lock().unwrap()[from..to].to_vec()
    }

    pub fn failed(&self) -> u64 {
        self.failed.load(Ordering::Relaxed)
    }
}

/// How the writer writes.
#[derive(Clone, Debug)]
pub struct WriterConfig {
    pub ports: Vec<u16>,
    /// `WAIT 1 <wait_ms>` after each SET (redis-server, which has no synchronous replication);
    /// `None` for our node.
    pub wait_ms: Option<u64>,
    /// Writes per second; 0 = unpaced.
    pub rate: f64,
}

struct Writer {
    config: WriterConfig,
    state: Arc<WriterState>,
    slot_port: Vec<u16>,
    conns: HashMap<u16, SyncClient>,
    down_until: HashMap<u16, Instant>,
    last_refresh: Option<Instant>,
}

/// Starts the writer on its own thread.
pub fn spawn(config: WriterConfig, state: Arc<WriterState>) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut writer = Writer {
            config,
            state,
            slot_port: vec![0; proto::slot::SLOT_COUNT],
            conns: HashMap::new(),
            down_until: HashMap::new(),
            last_refresh: None,
        };
        writer.run();
    })
}

impl Writer {
    fn run(&mut self) {
        self.refresh();
        let period =
            (self.config.rate > 0.0).then(|| Duration::from_secs_f64(1.0 / self.config.rate));
        let mut next_at = Instant::now();
        let mut seq: u64 = 0;
        while !self.state.stop.load(Ordering::Relaxed) && self.state.acked_len() < WRITES_MAX {
            if let Some(period) = period {
                let now = Instant::now();
                if next_at > now {
                    std::thread::sleep(next_at - now);
                }
                // Behind by more than a second (a stall): do not burst to catch up.
                next_at = (next_at + period).max(Instant::now() - Duration::from_secs(1));
            }
            seq += 1;
            let key = format!("fo:{seq}");
            let value = format!("{seq}:{:012x}", rand::random::<u64>() & 0xFFFF_FFFF_FFFF);
            self.write_one(key, value);
        }
    }

    fn refresh(&mut self) {
        let now = Instant::now();
        if self.last_refresh.is_some_and(|t| now - t < MAP_REFRESH_MIN) {
            return;
        }
        self.last_refresh = Some(now);
        let mut ports = self.config.ports.clone();
        ports.shuffle(&mut rand::thread_rng());
        for port in ports {
            let map = SyncClient::connect(port, REFRESH_TIMEOUT)
                .and_then(|mut c| c.request(&["CLUSTER", "SLOTS"]))
                .and_then(|reply| slot_ports(&reply));
            if let Ok(map) = map {
                // Slots the reply does not list keep their last known owner.
                for (slot, owner) in map.into_iter().enumerate() {
                    if owner != 0 {
                        self.slot_port[slot] = owner;
                    }
                }
                return;
            }
        }
    }

    fn conn(&mut self, port: u16) -> Option<&mut SyncClient> {
        if self
            .down_until
            .get(&port)
            .is_some_and(|t| *t > Instant::now())
        {
            return None;
        }
        if let Entry::Vacant(slot) = self.conns.entry(port) {
            match SyncClient::connect(port, WRITE_TIMEOUT) {
                Ok(c) => {
                    slot.insert(c);
                }
                Err(_) => {
                    self.down_until.insert(port, Instant::now() + DOWN_RETRY);
                    return None;
                }
            }
        }
        self.conns.get_mut(&port)
    }

    fn write_one(&mut self, key: String, value: String) {
        let port = self.slot_port[usize::from(proto::slot::key_slot(key.as_bytes()))];
        let wait_ms = self.config.wait_ms;
        let replies = match (port != 0).then(|| self.conn(port)).flatten() {
            None => {
                self.state.failed.fetch_add(1, Ordering::Relaxed);
                self.refresh();
                return;
            }
            Some(c) => match wait_ms {
                Some(ms) => c.pipeline(&[
                    vec!["SET".to_string(), key.clone(), value.clone()],
                    vec!["WAIT".to_string(), "1".to_string(), ms.to_string()],
                ]),
                None => c.request(&["SET", &key, &value]).map(|r| vec![r]),
            },
        };
        let replies = match replies {
            Ok(replies) => replies,
            Err(_) => {
                self.conns.remove(&port);
                self.down_until.insert(port, Instant::now() + DOWN_RETRY);
                self.state.failed.fetch_add(1, Ordering::Relaxed);
                self.refresh();
                return;
            }
        };
        if matches!(&replies[0], Frame::Simple(s) if s.as_ref() == b"OK") {
            // As the Python driver did: a WAIT reply that is not an integer (none comes from
            // redis-server) does not mark the write unreplicated.
            let synced = match replies.get(1) {
                Some(Frame::Integer(n)) => *n >= 1,
                _ => true,
            };
            self.state
                .acked
                .lock()
                .unwrap()
                .push(Acked { key, value, synced });
            return;
        }
        self.state.failed.fetch_add(1, Ordering::Relaxed);
        match error_text(&replies[0]).as_deref().and_then(moved_target) {
            Some((slot, target)) => self.slot_port[usize::from(slot)] = target,
            None => self.refresh(),
        }
    }
}

/// `MOVED <slot> <host>:<port>` as (slot, port).
fn moved_target(error: &str) -> Option<(u16, u16)> {
    let mut words = error.split_whitespace();
    if words.next()? != "MOVED" {
        return None;
    }
    let slot: u16 = words.next()?.parse().ok()?;
    let port = words.next()?.rsplit_once(':')?.1.parse().ok()?;
    (usize::from(slot) < proto::slot::SLOT_COUNT).then_some((slot, port))
}

#[cfg(test)]
mod tests {
    use super::moved_target;

    #[test]
    fn moved_replies() {
        assert_eq!(
            moved_target("MOVED 3999 127.0.0.1:7001"),
            Some((3999, 7001))
        );
        assert_eq!(moved_target("ASK 3999 127.0.0.1:7001"), None);
        assert_eq!(moved_target("MOVED 99999 127.0.0.1:7001"), None);
        assert_eq!(moved_target("MOVED 1"), None);
    }
}
