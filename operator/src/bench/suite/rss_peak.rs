//! The peak resident set of a server process over a run, sampled from /proc by a thread of
//! its own: the fabric suite reports how much a node grows per connected client while the
//! clients are busy (VmHWM would not do: it never falls, so a later run would inherit an
//! earlier one's peak).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// How often the resident set is read: often enough to catch a run's buffers at their
/// largest, cheap enough (one small /proc read) not to load the machine under test.
const SAMPLE_EVERY: Duration = Duration::from_millis(20);

/// The process's resident set (VmRSS) in KiB.
pub fn vmrss_kb(pid: u32) -> Option<u64> {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
}

/// Samples one process's VmRSS until [`RssPeak::finish`].
pub struct RssPeak {
    pid: u32,
    stop: Arc<AtomicBool>,
    peak_kb: Arc<AtomicU64>,
    sampler: Option<JoinHandle<()>>,
}

impl RssPeak {
    pub fn start(pid: u32) -> RssPeak {
        let stop = Arc::new(AtomicBool::new(false));
        let peak_kb = Arc::new(AtomicU64::new(vmrss_kb(pid).unwrap_or(0)));
        let sampler = {
            let (stop, peak_kb) = (stop.clone(), peak_kb.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    if let Some(kb) = vmrss_kb(pid) {
                        peak_kb.fetch_max(kb, Ordering::Relaxed);
                    }
                    std::thread::sleep(SAMPLE_EVERY);
                }
            })
        };
        RssPeak {
            pid,
            stop,
            peak_kb,
            sampler: Some(sampler),
        }
    }

    /// The largest VmRSS seen, in KiB (0 when /proc could not be read at all), the state
    /// at this call included: a sampler thread starved of CPU on a loaded machine may not
    /// have run since the process grew.
    pub fn finish(mut self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(sampler) = self.sampler.take() {
            let _ = sampler.join();
        }
        if let Some(kb) = vmrss_kb(self.pid) {
            self.peak_kb.fetch_max(kb, Ordering::Relaxed);
        }
        self.peak_kb.load(Ordering::Relaxed)
    }
}

impl Drop for RssPeak {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sees_this_process_grow() {
        let me = std::process::id();
        let before = vmrss_kb(me).expect("own /proc status");
        let sampler = RssPeak::start(me);
        // 64 MiB touched page by page: the sampler must see most of it.
        let mut block = vec![0u8; 64 << 20];
        for i in (0..block.len()).step_by(4096) {
            block[i] = 1;
        }
        std::hint::black_box(&mut block);
        std::thread::sleep(SAMPLE_EVERY * 5);
        let peak = sampler.finish();
        std::hint::black_box(&block);
        drop(block);
        assert!(
            peak >= before + 48 * 1024,
            "before {before} KiB, peak {peak} KiB"
        );
        assert_eq!(vmrss_kb(u32::MAX), None);
    }
}
