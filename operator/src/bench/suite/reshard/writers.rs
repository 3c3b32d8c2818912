//! Optional writers during the move (`--writers N`): each thread writes `SET w:<t>:<j>
//! <round>` over its own keys in the moving slots, one write at a time, unpaced, routed by
//! slot and following MOVED (the map entry updated), ASK (`ASKING` then the write at the
//! named node) and TRYAGAIN (again after a millisecond), as a cluster client does. It
//! records each key's last acknowledged round and each write's latency (first send to its
//! acknowledgement, redirects included): what an application sees of the move.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use proto::resp::Frame;

use super::super::sync_client::{error_text, SyncClient};

/// Keys per writer.
pub const KEYS_PER_WRITER: usize = 1000;
/// Latencies kept per writer (memory bound); past it only the max grows.
const LATENCIES_KEPT: usize = 2_000_000;
/// Attempts of one write (redirects and TRYAGAIN) before it counts as failed.
const ATTEMPTS_MAX: usize = 1000;
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);

/// What one writer ends with.
#[derive(Debug, Default)]
pub struct Written {
    /// Each key and its last acknowledged round (0: never acknowledged).
    pub acked: Vec<(String, u64)>,
    pub writes: u64,
    pub failed: u64,
    pub redirects: u64,
    pub latencies_us: Vec<u64>,
    pub max_us: u64,
    pub first_error: Option<String>,
}

pub struct Writers {
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<Written>>,
}

impl Writers {
    /// `count` writers over keys whose slots `moving` says are moving; `map` routes them.
    pub fn start(count: usize, moving: impl Fn(u16) -> bool, map: &[u16]) -> Writers {
        let stop = Arc::new(AtomicBool::new(false));
        let threads = (0..count)
            .map(|t| {
                let keys: Vec<String> = (0..)
                    .map(|j| format!("w:{t}:{j}"))
                    .filter(|k| moving(proto::slot::key_slot(k.as_bytes())))
                    .take(KEYS_PER_WRITER)
                    .collect();
                let (stop, map) = (stop.clone(), map.to_vec());
                std::thread::spawn(move || run(keys, map, &stop))
            })
            .collect();
        Writers { stop, threads }
    }

    pub fn finish(self) -> Vec<Written> {
        self.stop.store(true, Relaxed);
        self.threads
            .into_iter()
            .map(|t| t.join().unwrap_or_default())
            .collect()
    }
}

fn run(keys: Vec<String>, mut map: Vec<u16>, stop: &AtomicBool) -> Written {
    let mut out = Written {
        acked: keys.iter().map(|k| (k.clone(), 0)).collect(),
        ..Written::default()
    };
    let mut conns: HashMap<u16, SyncClient> = HashMap::new();
    let mut round = 0u64;
    while !stop.load(Relaxed) {
        round += 1;
        for (i, key) in keys.iter().enumerate() {
            if stop.load(Relaxed) {
                break;
            }
            let started = Instant::now();
            out.writes += 1;
            match write(key, round, &mut map, &mut conns, &mut out.redirects) {
                Ok(()) => {
                    out.acked[i].1 = round;
                    let us = started.elapsed().as_micros() as u64;
                    out.max_us = out.max_us.max(us);
                    if out.latencies_us.len() < LATENCIES_KEPT {
                        out.latencies_us.push(us);
                    }
                }
                Err(e) => {
                    out.failed += 1;
                    out.first_error.get_or_insert(e);
                }
            }
        }
    }
    out
}

fn write(
    key: &str,
    round: u64,
    map: &mut [u16],
    conns: &mut HashMap<u16, SyncClient>,
    redirects: &mut u64,
) -> Result<(), String> {
    let slot = usize::from(proto::slot::key_slot(key.as_bytes()));
    let value = round.to_string();
    let mut asking: Option<u16> = None;
    for _ in 0..ATTEMPTS_MAX {
        let port = asking.unwrap_or(map[slot]);
        let c = match conns.entry(port) {
            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::hash_map::Entry::Vacant(e) => {
                e.insert(SyncClient::connect(port, WRITE_TIMEOUT).map_err(|e| e.to_string())?)
            }
        };
        let set = vec!["SET".to_string(), key.to_string(), value.clone()];
        let reply = match asking.take() {
            Some(_) => c
                .pipeline(&[vec!["ASKING".to_string()], set])
                .map(|mut r| r.pop().unwrap_or(Frame::Null)),
            None => c.request(&set),
        };
        let reply = reply.map_err(|e| {
            conns.remove(&port);
            e.to_string()
        })?;
        let Some(error) = error_text(&reply) else {
            return Ok(());
        };
        let mut words = error.split_whitespace();
        let code = words.next().unwrap_or("");
        let target = words
            .nth(1)
            .and_then(|a| a.rsplit_once(':'))
            .and_then(|(_, p)| p.parse::<u16>().ok());
        match (code, target) {
            ("MOVED", Some(to)) => {
                *redirects += 1;
                map[slot] = to;
            }
            ("ASK", Some(to)) => {
                *redirects += 1;
                asking = Some(to);
            }
            ("TRYAGAIN", _) => std::thread::sleep(Duration::from_millis(1)),
            _ => return Err(format!("SET {key}: {error}")),
        }
    }
    Err(format!(
        "SET {key}: not acknowledged after {ATTEMPTS_MAX} attempts"
    ))
}

/// Reads every acknowledged key back (from its owner in `map`, following MOVED): a key
/// whose value is below its acknowledged round, or missing, is lost. Returns (checked, lost).
pub fn read_back(written: &[Written], map: &[u16]) -> Result<(u64, u64), String> {
    let mut conns: HashMap<u16, SyncClient> = HashMap::new();
    let (mut checked, mut lost) = (0, 0);
    for w in written {
        for (key, round) in w.acked.iter().filter(|(_, r)| *r > 0) {
            let slot = usize::from(proto::slot::key_slot(key.as_bytes()));
            let mut port = map[slot];
            let mut value = None;
            for _ in 0..5 {
                let c = match conns.entry(port) {
                    std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
                    std::collections::hash_map::Entry::Vacant(e) => e.insert(
                        SyncClient::connect(port, WRITE_TIMEOUT).map_err(|e| e.to_string())?,
                    ),
                };
                let reply = c.request(&["GET", key]).map_err(|e| e.to_string())?;
                match error_text(&reply) {
                    Some(e) => match super::keys::moved_port(&e) {
                        Some(to) => port = to,
                        None => return Err(format!("GET {key}: {e}")),
                    },
                    None => {
                        value = reply
                            .as_bytes()
                            .and_then(|b| std::str::from_utf8(b).ok()?.parse::<u64>().ok());
                        break;
                    }
                }
            }
            checked += 1;
            if value.is_none_or(|v| v < *round) {
                lost += 1;
            }
        }
    }
    Ok((checked, lost))
}
