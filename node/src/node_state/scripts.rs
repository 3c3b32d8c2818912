//! The node's script state that every connection thread shares: the script cache that EVALSHA
//! reads (bodies by SHA1), and the script running now, which other clients find BUSY once it
//! has run longer than `busy-reply-threshold`, and which SCRIPT KILL stops.
//!
//! Compiling and running scripts is the Lua engine's; this is only data, so that the
//! dispatcher (which answers BUSY) does not depend on the Lua engine.

use indexmap::IndexMap;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

/// Most scripts the cache holds. Redis 7.0 never bounds its cache; a client generating a new
/// script per call would grow it without end.
pub const MAX_CACHED_SCRIPTS: usize = 10_000;
/// Most bytes of script bodies the cache holds.
pub const MAX_CACHED_BYTES: usize = 64 * 1024 * 1024;

/// A script body, shared by the cache and the threads compiling it.
pub type Body = Arc<[u8]>;

struct Cached {
    body: Body,
    /// Loaded by SCRIPT LOAD: a client said it will EVALSHA it, so the cache keeps it while
    /// there are scripts only EVAL brought in to evict instead.
    loaded: bool,
}

/// Why a script could not be cached.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CacheError {
    #[error("ERR script cache full: it holds {MAX_CACHED_SCRIPTS} scripts or {MAX_CACHED_BYTES} bytes loaded by SCRIPT LOAD; SCRIPT FLUSH to make room")]
    Full,
}

#[derive(Default)]
pub struct ScriptCache {
    scripts: Mutex<Entries>,
    /// Bumped by SCRIPT FLUSH: each thread's Lua state is rebuilt when it sees a new value.
    generation: AtomicU64,
}

#[derive(Default)]
struct Entries {
    by_sha: IndexMap<[u8; 40], Cached>,
    bytes: usize,
}

impl ScriptCache {
    /// The body of the script `sha` (40 lower-case hex digits).
    pub fn get(&self, sha: &[u8; 40]) -> Option<Body> {
        self.scripts.lock().by_sha.get(sha).map(|c| c.body.clone())
    }

    pub fn contains(&self, sha: &[u8; 40]) -> bool {
        self.scripts.lock().by_sha.contains_key(sha)
    }

    /// Caches `body` under `sha`. At the limits, the oldest scripts that only EVAL brought in
    /// are evicted first (a later EVALSHA of them answers NOSCRIPT, which clients handle by
    /// sending the body again); when SCRIPT LOAD's alone fill the cache, the new script is
    /// refused.
    pub fn insert(&self, sha: [u8; 40], body: Body, loaded: bool) -> Result<(), CacheError> {
        let mut entries = self.scripts.lock();
        if let Some(cached) = entries.by_sha.get_mut(&sha) {
            cached.loaded |= loaded;
            return Ok(());
        }
        let size = body.len();
        while entries.by_sha.len() >= MAX_CACHED_SCRIPTS || entries.bytes + size > MAX_CACHED_BYTES
        {
            let Some(victim) = entries.by_sha.iter().position(|(_, c)| !c.loaded) else {
                return Err(CacheError::Full);
            };
            if let Some((_, gone)) = entries.by_sha.shift_remove_index(victim) {
                entries.bytes -= gone.body.len();
            }
        }
        entries.bytes += size;
        entries.by_sha.insert(sha, Cached { body, loaded });
        Ok(())
    }

    /// SCRIPT FLUSH: forgets every script, and tells every thread to rebuild its Lua state.
    pub fn flush(&self) {
        let mut entries = self.scripts.lock();
        entries.by_sha.clear();
        entries.bytes = 0;
        self.generation.fetch_add(1, Relaxed);
    }

    pub fn generation(&self) -> u64 {
        self.generation.load(Relaxed)
    }

    /// (scripts, bytes) cached, for INFO.
    pub fn size(&self) -> (usize, usize) {
        let entries = self.scripts.lock();
        (entries.by_sha.len(), entries.bytes)
    }
}

/// The script running now, if any. One script runs at a time: a script locks every shard.
#[derive(Default)]
pub struct RunningScript {
    /// Unix ms when the running script started; 0 while none runs. One relaxed load on the
    /// dispatcher's path.
    started_ms: AtomicU64,
    /// The running script has made a write: SCRIPT KILL can no longer stop it.
    wrote: AtomicBool,
    /// SCRIPT KILL asked the running script to stop; its instruction hook raises the error.
    kill: Arc<AtomicBool>,
    /// The running script is a function (FCALL): FUNCTION KILL stops it, not SCRIPT KILL.
    function: AtomicBool,
    /// FUNCTION STATS's `running_script` while a function runs.
    running_function: Mutex<Option<RunningFunction>>,
}

/// A function running now, as FUNCTION STATS shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunningFunction {
    pub name: String,
    /// The FCALL's arguments (the first [`MAX_SHOWN_ARGS`], each cut to [`MAX_SHOWN_ARG`]).
    pub command: Vec<Vec<u8>>,
    pub started_ms: u64,
}

/// Most arguments of a running FCALL that FUNCTION STATS shows.
pub const MAX_SHOWN_ARGS: usize = 64;
/// Longest argument shown, in bytes.
pub const MAX_SHOWN_ARG: usize = 1024;

/// What SCRIPT KILL found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KillOutcome {
    Killed,
    NotBusy,
    Unkillable,
    /// SCRIPT KILL of a function or FUNCTION KILL of an EVAL: answered BUSY.
    OtherKind,
}

/// Redis's answer to other clients while a script runs past `busy-reply-threshold`.
pub const BUSY_ERROR: &str =
    "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.";
/// The same while a function runs.
pub const BUSY_FUNCTION_ERROR: &str =
    "BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE.";
pub const NOTBUSY_ERROR: &str = "NOTBUSY No scripts in execution right now.";
pub const UNKILLABLE_ERROR: &str = "UNKILLABLE Sorry the script already executed write commands against the dataset. You can either wait the script termination or kill the server in a hard way using the SHUTDOWN NOSAVE command.";

impl RunningScript {
    /// Marks a script started at `now_ms`; returns the flag its hook polls for SCRIPT KILL.
    pub fn start(&self, now_ms: u64) -> Arc<AtomicBool> {
        self.kill.store(false, Relaxed);
        self.wrote.store(false, Relaxed);
        self.function.store(false, Relaxed);
        self.started_ms.store(now_ms.max(1), Relaxed);
        self.kill.clone()
    }

    /// Marks the function `name` started at `now_ms` by the FCALL `args`.
    pub fn start_function(&self, now_ms: u64, name: &str, args: &[&[u8]]) -> Arc<AtomicBool> {
        let command = args
            .iter()
            .take(MAX_SHOWN_ARGS)
            .map(|a| a[..a.len().min(MAX_SHOWN_ARG)].to_vec())
            .collect();
        *self.running_function.lock() = Some(RunningFunction {
            name: name.to_string(),
            command,
            started_ms: now_ms,
        });
        let flag = self.start(now_ms);
        self.function.store(true, Relaxed);
        flag
    }

    pub fn finish(&self) {
        self.started_ms.store(0, Relaxed);
        self.kill.store(false, Relaxed);
        if self.function.swap(false, Relaxed) {
            *self.running_function.lock() = None;
        }
    }

    /// The function running now, if one is.
    pub fn running_function(&self) -> Option<RunningFunction> {
        if !self.running() || !self.function.load(Relaxed) {
            return None;
        }
        self.running_function.lock().clone()
    }

    /// The BUSY text for other clients: it names the KILL that stops what runs.
    pub fn busy_error(&self) -> &'static str {
        if self.function.load(Relaxed) {
            BUSY_FUNCTION_ERROR
        } else {
            BUSY_ERROR
        }
    }

    pub fn has_written(&self) -> bool {
        self.wrote.load(Relaxed)
    }

    pub fn note_write(&self) {
        self.wrote.store(true, Relaxed);
    }

    /// Whether a script has run for longer than `threshold_ms` at `now_ms`.
    pub fn busy(&self, now_ms: u64, threshold_ms: u64) -> bool {
        let started = self.started_ms.load(Relaxed);
        started != 0 && now_ms.saturating_sub(started) >= threshold_ms
    }

    pub fn running(&self) -> bool {
        self.started_ms.load(Relaxed) != 0
    }

    /// SCRIPT KILL (`function` false) or FUNCTION KILL (`function` true).
    pub fn kill(&self, function: bool) -> KillOutcome {
        if !self.running() {
            return KillOutcome::NotBusy;
        }
        if self.wrote.load(Relaxed) {
            return KillOutcome::Unkillable;
        }
        if self.function.load(Relaxed) != function {
            return KillOutcome::OtherKind;
        }
        self.kill.store(true, Relaxed);
        KillOutcome::Killed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sha(n: usize) -> [u8; 40] {
        let mut s = [b'0'; 40];
        let digits = format!("{n:040}");
        s.copy_from_slice(digits.as_bytes());
        s
    }

    #[test]
    fn eval_scripts_are_evicted_first_and_loaded_ones_fill_it_up() {
        let cache = ScriptCache::default();
        let body: Body = Arc::from(&b"return 1"[..]);
        cache.insert(sha(0), body.clone(), false).unwrap();
        for i in 1..MAX_CACHED_SCRIPTS {
            cache.insert(sha(i), body.clone(), true).unwrap();
        }
        assert_eq!(cache.size().0, MAX_CACHED_SCRIPTS);
        cache
            .insert(sha(MAX_CACHED_SCRIPTS), body.clone(), true)
            .unwrap();
        assert!(!cache.contains(&sha(0)), "the EVAL-only script made room");
        assert_eq!(
            cache.insert(sha(MAX_CACHED_SCRIPTS + 1), body, true),
            Err(CacheError::Full)
        );
        cache.flush();
        assert_eq!(cache.size(), (0, 0));
        assert_eq!(cache.generation(), 1);
    }

    #[test]
    fn kill_stops_only_a_script_that_has_not_written() {
        let running = RunningScript::default();
        assert_eq!(running.kill(false), KillOutcome::NotBusy);
        let flag = running.start(1_000);
        assert!(running.busy(6_000, 5_000) && !running.busy(5_999, 5_000));
        assert_eq!(running.kill(true), KillOutcome::OtherKind);
        assert_eq!(running.kill(false), KillOutcome::Killed);
        assert!(flag.load(Relaxed));
        running.start(2_000);
        running.note_write();
        assert_eq!(running.kill(false), KillOutcome::Unkillable);
        running.finish();
        assert!(!running.busy(u64::MAX, 0));
        running.start_function(3_000, "f", &[b"fcall", b"f", b"0"]);
        assert_eq!(running.busy_error(), BUSY_FUNCTION_ERROR);
        assert_eq!(running.kill(false), KillOutcome::OtherKind);
        assert_eq!(running.running_function().unwrap().name, "f");
        assert_eq!(running.kill(true), KillOutcome::Killed);
        running.finish();
        assert!(running.running_function().is_none());
    }
}
