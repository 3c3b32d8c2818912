//! The running log: the dispatcher appends each request's writes (RESP, as the replication
//! stream encodes them) to a buffer while the request's shards are still held, and the bytes
//! reach the current increment file later, in one `write` for many requests.
//!
//! Offsets count bytes appended since the process started (they never go back, across
//! stops and starts of the log): `appended` (in the buffer), `written` (handed to the file),
//! `synced` (fdatasync'ed). A client remembers the `appended` offset after its last command
//! and its replies leave only once the log is far enough ([`AppendLog::gate`]):
//!
//! - `appendfsync always`: `synced` must reach it. The fsync thread is the group commit:
//!   while it syncs, more requests append, and its next round covers all of them;
//!   connections wait for it (TCP asynchronously, fabric pollers by looking again).
//! - `everysec` and `no`: `written` must reach it (the connection writes the buffer itself,
//!   at most one `write` per batch of replies; a TCP connection yields first, so that the
//!   clients served meanwhile share it), so a process crash loses nothing answered; the
//!   thread fsyncs once a second (`everysec`) or leaves it to the OS (`no`).
//!
//! A rewrite switches to a new increment at its instant ([`AppendLog::switch_at_instant`]):
//! bytes appended before it go to the old file, which is fsynced before it is let go, the
//! rest to the new one.
//!
//! Lock order: keyspace shards, then `pending`; `writer`, then `pending`. `pending` is held
//! only to copy bytes; no I/O happens under it.

use crate::config::FsyncPolicy;
use crate::replication::outgoing::Outgoing;
use parking_lot::{Condvar, Mutex};
use std::fs::File;
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Capacity the write buffer keeps between writes; a burst's larger buffer is released.
pub const BUFFER_KEEP_BYTES: usize = 4 << 20;
/// How often the fsync thread looks even when nobody asks (`everysec`, and bytes no reply
/// waits for: active expiry's and eviction's DELs).
pub const FSYNC_INTERVAL: Duration = Duration::from_secs(1);

/// An increment being appended to.
pub struct IncrFile {
    file: File,
    /// The same open file (a duplicated descriptor), fdatasync'ed without the writer's lock
    /// so that writes go on during an fsync.
    sync: Arc<File>,
    pub path: PathBuf,
    /// Bytes in the file.
    pub size: u64,
}

impl IncrFile {
    /// `file` must be open for appending and hold `size` bytes.
    pub fn new(file: File, path: PathBuf, size: u64) -> std::io::Result<Self> {
        let sync = Arc::new(file.try_clone()?);
        Ok(IncrFile {
            file,
            sync,
            path,
            size,
        })
    }

    /// Writes `bytes` whole, or removes what part of them reached the file so that the
    /// next write starts at a command boundary.
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        if bytes.is_empty() {
            return Ok(());
        }
        if let Err(e) = (&self.file).write_all(bytes) {
            if let Err(t) = self.file.set_len(self.size) {
                tracing::error!(
                    path = %self.path.display(),
                    error = %t,
                    "cannot remove a short write from the AOF; it may not load next time"
                );
            }
            return Err(e);
        }
        self.size += bytes.len() as u64;
        Ok(())
    }
}

#[derive(Debug, thiserror::Error)]
#[error("{action} {path}: {source}")]
pub struct LogError {
    action: &'static str,
    path: PathBuf,
    source: std::io::Error,
}

struct Pending {
    /// Appends are taken (the log runs).
    open: bool,
    buf: Vec<u8>,
    /// The offset of `buf[0]`.
    start: u64,
    /// From this offset on, bytes go to this new increment (a rewrite's instant).
    switch: Option<(u64, IncrFile)>,
    /// The database the last append selected (Redis's `aof_selected_db`); None at the
    /// start of every increment and after a start, so that the first write in it selects
    /// its database (see `Outgoing::encode_into`).
    selected_db: Option<usize>,
}

struct Writer {
    current: Option<IncrFile>,
    /// The buffer the pending bytes are swapped into for writing, reused.
    spare: Vec<u8>,
}

/// What a connection must see to before its replies leave.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gate {
    Open,
    /// `everysec`/`no`: the log written up to this offset ([`AppendLog::write_upto`]). A
    /// transport that can let other clients append first (a yield) shares the `write`.
    Write(u64),
    /// `always`: not before `synced` reaches this offset (the fsync is asked for).
    WaitSync(u64),
}

pub struct AppendLog {
    /// Mirrors `Pending::open` for a lock-free look (a primary with a backlog and no AOF
    /// feeds the stream without touching this log's lock). Set with every shard held, so a
    /// write holding its shards sees it.
    open: AtomicBool,
    pending: Mutex<Pending>,
    writer: Mutex<Writer>,
    appended: AtomicU64,
    written: AtomicU64,
    synced: AtomicU64,
    /// `appendfsync`, as [`FsyncPolicy`] discriminants.
    policy: AtomicU8,
    /// Asks the fsync thread for a round (a reply waits).
    wake: Mutex<bool>,
    wake_cv: Condvar,
    /// Woken after every fsync round: connections waiting for theirs.
    synced_notify: tokio::sync::Notify,
    /// The last write or fsync failed (INFO `aof_last_write_status:err`; writes are refused).
    failed: AtomicBool,
    last_error: Mutex<Option<String>>,
    /// Bytes in the current increment, for INFO and the automatic rewrite.
    current_size: AtomicU64,
}

impl Default for AppendLog {
    fn default() -> Self {
        AppendLog {
            open: AtomicBool::new(false),
            pending: Mutex::new(Pending {
                open: false,
                buf: Vec::new(),
                start: 0,
                switch: None,
                selected_db: None,
            }),
            writer: Mutex::new(Writer {
                current: None,
                spare: Vec::new(),
            }),
            appended: AtomicU64::new(0),
            written: AtomicU64::new(0),
            synced: AtomicU64::new(0),
            policy: AtomicU8::new(policy_code(FsyncPolicy::EverySec)),
            wake: Mutex::new(false),
            wake_cv: Condvar::new(),
            synced_notify: tokio::sync::Notify::new(),
            failed: AtomicBool::new(false),
            last_error: Mutex::new(None),
            current_size: AtomicU64::new(0),
        }
    }
}

fn policy_code(p: FsyncPolicy) -> u8 {
    match p {
        FsyncPolicy::Always => 0,
        FsyncPolicy::EverySec => 1,
        FsyncPolicy::No => 2,
    }
}

impl AppendLog {
    pub fn set_policy(&self, p: FsyncPolicy) {
        self.policy.store(policy_code(p), Ordering::Relaxed);
        self.wake_thread();
    }

    pub fn policy(&self) -> FsyncPolicy {
        match self.policy.load(Ordering::Relaxed) {
            0 => FsyncPolicy::Always,
            1 => FsyncPolicy::EverySec,
            _ => FsyncPolicy::No,
        }
    }

    /// Appends one request's writes (call with its shards held). The offset just past
    /// them, or None when the log does not run.
    pub fn append(&self, outgoing: &Outgoing) -> Option<u64> {
        if !self.open.load(Ordering::Relaxed) {
            return None;
        }
        let mut p = self.pending.lock();
        if !p.open {
            return None;
        }
        let p = &mut *p;
        outgoing.encode_log_into(&mut p.buf, &mut p.selected_db);
        let end = p.start + p.buf.len() as u64;
        self.appended.store(end, Ordering::Release);
        Some(end)
    }

    /// The offset of the last byte appended (what a client's replies wait for).
    #[inline]
    pub fn appended(&self) -> u64 {
        self.appended.load(Ordering::Acquire)
    }

    /// Bytes appended and not yet written (INFO `aof_buffer_length`).
    pub fn buffered(&self) -> u64 {
        self.appended()
            .saturating_sub(self.written.load(Ordering::Acquire))
    }

    pub fn current_size(&self) -> u64 {
        self.current_size.load(Ordering::Relaxed)
    }

    /// Starts the log on `file` (at start-up, after the AOF loaded: its last increment).
    pub fn open(&self, file: IncrFile) {
        let mut w = self.writer.lock();
        let mut p = self.pending.lock();
        debug_assert!(p.buf.is_empty() && p.switch.is_none());
        self.current_size.store(file.size, Ordering::Relaxed);
        w.current = Some(file);
        p.selected_db = None;
        p.open = true;
        self.open.store(true, Ordering::Relaxed);
    }

    /// At a rewrite's instant (every shard held): bytes appended from now on belong to
    /// `next`; the log runs from now on if it did not. The caller made sure no earlier
    /// switch is still unwritten ([`AppendLog::write_pending`] succeeded since).
    pub fn switch_at_instant(&self, next: IncrFile) {
        let mut p = self.pending.lock();
        debug_assert!(p.switch.is_none(), "an earlier switch is unwritten");
        let at = p.start + p.buf.len() as u64;
        p.switch = Some((at, next));
        p.selected_db = None;
        p.open = true;
        self.open.store(true, Ordering::Relaxed);
    }

    /// Renames the current increment's recorded path (a temporary one put in place).
    pub fn renamed(&self, path: PathBuf) {
        if let Some(cur) = self.writer.lock().current.as_mut() {
            cur.path = path;
        }
    }

    /// Hands the buffered bytes to the file(s). Returns the `written` offset.
    pub fn write_pending(&self) -> Result<u64, LogError> {
        let mut w = self.writer.lock();
        self.write_locked(&mut w)
    }

    fn write_locked(&self, w: &mut Writer) -> Result<u64, LogError> {
        let (start, switch, bytes) = {
            let mut p = self.pending.lock();
            let mut bytes = std::mem::take(&mut w.spare);
            std::mem::swap(&mut p.buf, &mut bytes);
            let start = p.start;
            p.start += bytes.len() as u64;
            (start, p.switch.take(), bytes)
        };
        let end = start + bytes.len() as u64;
        let mut done = 0usize;
        if let Some((at, next)) = switch {
            let before = (at.saturating_sub(start) as usize).min(bytes.len());
            if let Some(cur) = w.current.as_mut() {
                // The old increment is complete: durable before it is let go, whatever the
                // policy, so that `synced` never covers bytes of a file nobody syncs.
                if let Err(source) = cur.write(&bytes[..before]) {
                    let e = LogError {
                        action: "cannot write",
                        path: cur.path.clone(),
                        source,
                    };
                    self.put_back(bytes, 0, start, Some((at, next)));
                    return Err(e);
                }
                if let Err(source) = cur.sync.sync_data() {
                    let e = LogError {
                        action: "cannot fsync",
                        path: cur.path.clone(),
                        source,
                    };
                    // Its bytes are in it; the switch (and the fsync) comes again.
                    self.put_back(bytes, before, start, Some((at, next)));
                    return Err(e);
                }
            }
            self.current_size.store(next.size, Ordering::Relaxed);
            w.current = Some(next);
            done = before;
        }
        if done < bytes.len() {
            match w.current.as_mut() {
                Some(cur) => {
                    if let Err(source) = cur.write(&bytes[done..]) {
                        let e = LogError {
                            action: "cannot write",
                            path: cur.path.clone(),
                            source,
                        };
                        self.put_back(bytes, done, start, None);
                        return Err(e);
                    }
                    self.current_size.store(cur.size, Ordering::Relaxed);
                }
                None => debug_assert!(false, "bytes appended to a log without a file"),
            }
        }
        self.written.store(end, Ordering::Release);
        let mut bytes = bytes;
        bytes.clear();
        if bytes.capacity() > BUFFER_KEEP_BYTES {
            bytes = Vec::new();
        }
        w.spare = bytes;
        Ok(end)
    }

    /// A failed write: `bytes[from..]` (offset `start + from` on) go back in front of what
    /// was appended since, to be written again.
    fn put_back(&self, bytes: Vec<u8>, from: usize, start: u64, switch: Option<(u64, IncrFile)>) {
        let mut p = self.pending.lock();
        let mut again = bytes[from..].to_vec();
        again.extend_from_slice(&p.buf);
        p.buf = again;
        p.start = start + from as u64;
        if switch.is_some() {
            p.switch = switch;
        }
    }

    /// Writes what is buffered and fdatasyncs it: one group-commit round.
    pub fn sync(&self) -> Result<(), LogError> {
        let (end, handle) = {
            let mut w = self.writer.lock();
            let end = self.write_locked(&mut w)?;
            let handle = w.current.as_ref().map(|c| (c.sync.clone(), c.path.clone()));
            (end, handle)
        };
        if let Some((file, path)) = handle {
            file.sync_data().map_err(|source| LogError {
                action: "cannot fsync",
                path,
                source,
            })?;
        }
        self.synced.fetch_max(end, Ordering::AcqRel);
        self.synced_notify.notify_waiters();
        Ok(())
    }

    /// Stops the log: everything appended is written and fsynced, the file closed. Replies
    /// waiting for the log go (nothing more will be written for them).
    pub fn close(&self) -> Result<(), LogError> {
        let mut w = self.writer.lock();
        self.pending.lock().open = false;
        self.open.store(false, Ordering::Relaxed);
        let mut result = self.write_locked(&mut w).map(|_| ());
        if let Some(cur) = w.current.take() {
            if let Err(source) = cur.sync.sync_data() {
                result = result.and(Err(LogError {
                    action: "cannot fsync",
                    path: cur.path.clone(),
                    source,
                }));
            }
        }
        {
            let mut p = self.pending.lock();
            // What a failed write left is lost with the log.
            p.start += p.buf.len() as u64;
            p.buf = Vec::new();
            p.switch = None;
        }
        let end = self.appended();
        self.written.fetch_max(end, Ordering::AcqRel);
        self.synced.fetch_max(end, Ordering::AcqRel);
        self.current_size.store(0, Ordering::Relaxed);
        self.synced_notify.notify_waiters();
        result
    }

    /// What replies covering the log up to `offset` need before they leave.
    pub fn gate(&self, offset: u64) -> Gate {
        if offset == 0 || offset <= self.synced.load(Ordering::Acquire) {
            return Gate::Open;
        }
        if self.policy() == FsyncPolicy::Always {
            self.wake_thread();
            return Gate::WaitSync(offset);
        }
        if self.written.load(Ordering::Acquire) < offset {
            return Gate::Write(offset);
        }
        Gate::Open
    }

    /// Writes the buffer if `offset` is not written yet (one `write` for everything
    /// appended, whoever appended it).
    pub fn write_upto(&self, offset: u64) {
        if self.written.load(Ordering::Acquire) >= offset {
            return;
        }
        match self.write_pending() {
            Ok(_) => self.note_ok(),
            Err(e) => self.note_error(&e),
        }
    }

    /// Under `always`, asks for a sync of writes no reply waits for (a replica's applied
    /// stream, active expiry's DELs), so they are not left for the thread's next second.
    pub fn nudge(&self) {
        if self.policy() == FsyncPolicy::Always
            && self.appended() > self.synced.load(Ordering::Acquire)
        {
            self.wake_thread();
        }
    }

    /// Whether `offset` is durable (a fabric poller looking again).
    pub fn synced_past(&self, offset: u64) -> bool {
        self.synced.load(Ordering::Acquire) >= offset
    }

    /// Waits until `synced` reaches `offset` (a TCP connection under `always`).
    pub async fn wait_synced(&self, offset: u64) {
        loop {
            let notified = self.synced_notify.notified();
            let mut notified = std::pin::pin!(notified);
            notified.as_mut().enable();
            if self.synced_past(offset) {
                return;
            }
            notified.await;
        }
    }

    fn wake_thread(&self) {
        let mut wake = self.wake.lock();
        if !*wake {
            *wake = true;
            self.wake_cv.notify_one();
        }
    }

    /// How long the fsync thread may sleep after a turn.
    pub(super) fn next_wait(&self, last_sync: Instant) -> Duration {
        match self.policy() {
            FsyncPolicy::EverySec => FSYNC_INTERVAL
                .saturating_sub(last_sync.elapsed())
                .max(Duration::from_millis(1)),
            FsyncPolicy::Always | FsyncPolicy::No => FSYNC_INTERVAL,
        }
    }

    /// The fsync thread's wait: until a reply asks for a round or `timeout` passes.
    pub(super) fn wait_for_work(&self, timeout: Duration) {
        let mut wake = self.wake.lock();
        if !*wake {
            let _ = self.wake_cv.wait_for(&mut wake, timeout);
        }
        *wake = false;
    }

    pub fn write_failed(&self) -> bool {
        self.failed.load(Ordering::Relaxed)
    }

    pub fn last_error(&self) -> Option<String> {
        self.last_error.lock().clone()
    }

    fn note_error(&self, e: &LogError) {
        if !self.failed.swap(true, Ordering::Relaxed) {
            tracing::error!("error writing the AOF: {e}; writes are refused until it works again");
        }
        *self.last_error.lock() = Some(e.to_string());
    }

    fn note_ok(&self) {
        if self.failed.swap(false, Ordering::Relaxed) {
            tracing::warn!("AOF write error looks solved: writes are accepted again");
        }
    }

    /// One turn of the fsync thread. `last_sync` is when the log was last known synced.
    pub(super) fn turn(&self, last_sync: &mut Instant) {
        let unsynced = self.appended() > self.synced.load(Ordering::Acquire);
        let result = match self.policy() {
            FsyncPolicy::Always if unsynced => self.sync(),
            FsyncPolicy::EverySec if !unsynced => {
                *last_sync = Instant::now();
                Ok(())
            }
            FsyncPolicy::EverySec if last_sync.elapsed() >= FSYNC_INTERVAL => {
                *last_sync = Instant::now();
                self.sync()
            }
            FsyncPolicy::No if self.buffered() > 0 => self.write_pending().map(|_| ()),
            _ => Ok(()),
        };
        match result {
            Ok(()) => self.note_ok(),
            Err(e) if self.policy() == FsyncPolicy::Always => {
                // As Redis: an answered write must be on disk, and this one cannot be.
                tracing::error!(
                    "can't recover from AOF write error when the AOF fsync policy is 'always': {e}. Exiting..."
                );
                std::process::exit(1);
            }
            Err(e) => self.note_error(&e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replication::propagate::WriteEffect;

    fn temp_incr(dir: &std::path::Path, name: &str) -> IncrFile {
        let path = dir.join(name);
        File::create(&path).unwrap();
        let f = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        IncrFile::new(f, path, 0).unwrap()
    }

    fn set(key: &str) -> Outgoing {
        let mut o = Outgoing::default();
        o.command(0, &[b"SET", key.as_bytes(), b"v"], &WriteEffect::None)
            .unwrap();
        o
    }

    /// Goal: offsets, the switch to a new increment at an instant, and close behave as the
    /// module says. Method: appends around a switch, then the files' contents.
    #[test]
    fn bytes_go_to_the_increment_of_their_side_of_the_switch() {
        let dir = tempfile::tempdir().unwrap();
        let log = AppendLog::default();
        assert_eq!(log.append(&set("lost")), None, "a closed log takes nothing");
        log.open(temp_incr(dir.path(), "one"));
        let a = log.append(&set("a")).unwrap();
        log.switch_at_instant(temp_incr(dir.path(), "two"));
        let b = log.append(&set("b")).unwrap();
        assert!(b > a);
        log.set_policy(FsyncPolicy::EverySec);
        assert_eq!(
            log.gate(b),
            Gate::Write(b),
            "everysec: written on the way out"
        );
        log.write_upto(b);
        assert_eq!(log.buffered(), 0);
        assert_eq!(log.gate(b), Gate::Open);
        log.set_policy(FsyncPolicy::Always);
        let c = log.append(&set("c")).unwrap();
        assert_eq!(log.gate(c), Gate::WaitSync(c));
        assert!(!log.synced_past(c));
        log.sync().unwrap();
        assert!(log.synced_past(c));
        assert_eq!(log.gate(c), Gate::Open);
        let d = log.append(&set("d")).unwrap();
        log.close().unwrap();
        assert!(log.synced_past(d), "closing settles what waited");
        assert_eq!(log.append(&set("e")), None);
        let one = std::fs::read(dir.path().join("one")).unwrap();
        let two = std::fs::read(dir.path().join("two")).unwrap();
        let enc = |k: &str| {
            let mut v = Vec::new();
            set(k).encode_into(&mut v, &mut Some(0));
            v
        };
        // Each increment's first write selects its database (a replay starts knowing none).
        let select = b"*2\r\n$6\r\nSELECT\r\n$1\r\n0\r\n".to_vec();
        assert_eq!(one, [select.clone(), enc("a")].concat());
        assert_eq!(two, [select, enc("b"), enc("c"), enc("d")].concat());
    }

    /// Goal: a write that fails loses nothing and says so (the dispatcher then refuses
    /// writes). Method: an increment opened read-only, so every write fails.
    #[test]
    fn a_failed_write_keeps_the_bytes_and_reports_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("readonly");
        File::create(&path).unwrap();
        let readonly = File::open(&path).unwrap();
        let log = AppendLog::default();
        log.open(IncrFile::new(readonly, path, 0).unwrap());
        log.set_policy(FsyncPolicy::EverySec);
        let a = log.append(&set("a")).unwrap();
        assert_eq!(log.gate(a), Gate::Write(a));
        log.write_upto(a);
        assert!(log.write_failed());
        assert!(log.last_error().is_some_and(|e| e.contains("readonly")));
        assert_eq!(log.buffered(), a, "the bytes wait to be written again");
        assert!(log.write_pending().is_err(), "still failing");
        assert_eq!(log.buffered(), a);
    }
}
