//! Readings of the process and host for INFO, from /proc and the process CPU clock (no libc
//! calls). Each reading degrades to zero or "unknown" where /proc is missing, as INFO must
//! always answer.

/// Clock ticks per second of /proc/self/stat's CPU times. Linux fixes USER_HZ at 100 on
/// every architecture it exposes to user space.
const USER_HZ: u64 = 100;
/// Page size assumed for /proc/self/statm (4 KiB on the x86-64 and arm64 hosts we run on).
const PAGE_SIZE: u64 = 4096;

/// CPU time used, in microseconds.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct CpuTimes {
    pub user: u64,
    pub sys: u64,
    pub children_user: u64,
    pub children_sys: u64,
}

/// Parses /proc/self/stat: fields 14-17 (utime, stime, cutime, cstime) after the command
/// name, which is parenthesised and may itself contain spaces or parentheses.
pub fn parse_cpu_times(stat: &str) -> Option<CpuTimes> {
    let after_name = &stat[stat.rfind(')')? + 1..];
    // Field 3 (state) is the first after the name, so field n is at index n - 3.
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    let ticks = |n: usize| -> Option<u64> { fields.get(n - 3)?.parse::<u64>().ok() };
    let micros = |t: u64| t.saturating_mul(1_000_000 / USER_HZ);
    Some(CpuTimes {
        user: micros(ticks(14)?),
        sys: micros(ticks(15)?),
        children_user: micros(ticks(16)?),
        children_sys: micros(ticks(17)?),
    })
}

pub fn cpu_times() -> CpuTimes {
    let ticks = std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|s| parse_cpu_times(&s))
        .unwrap_or_default();
    let clock = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
    let total_micros = (clock.tv_sec.max(0) as u64)
        .saturating_mul(1_000_000)
        .saturating_add(clock.tv_nsec.max(0) as u64 / 1_000);
    let split = with_precise_total(ticks, total_micros);
    // Each reading re-splits the total by the ticks, so user or sys alone could go back a
    // little between two INFO calls; monitors read a counter going back as a reset.
    static LAST: parking_lot::Mutex<(u64, u64)> = parking_lot::Mutex::new((0, 0));
    let mut last = LAST.lock();
    let (user, sys) = never_backwards(*last, (split.user, split.sys));
    *last = (user, sys);
    CpuTimes { user, sys, ..split }
}

/// Keeps a (user, sys) split from going below the previous one, as the kernel's
/// `cputime_adjust` does: the part that would shrink keeps its value and the other takes the
/// rest of the (never shrinking) total.
pub fn never_backwards(prev: (u64, u64), next: (u64, u64)) -> (u64, u64) {
    let total = (next.0 + next.1).max(prev.0 + prev.1);
    if next.1 < prev.1 {
        (total - prev.1, prev.1)
    } else if next.0 < prev.0 {
        (prev.0, total - prev.0)
    } else {
        (next.0, total - next.0)
    }
}

/// /proc's user and sys times count 10 ms ticks, too coarse for a benchmark's CPU per request;
/// the process CPU clock counts nanoseconds but does not split them. Splits the clock's total
/// in the ticks' proportion, as the kernel's own `cputime_adjust` does for getrusage (all to
/// user while no tick was counted). The children's times stay in ticks.
pub fn with_precise_total(ticks: CpuTimes, total_micros: u64) -> CpuTimes {
    let counted = ticks.user.saturating_add(ticks.sys);
    let user = if counted == 0 {
        total_micros
    } else {
        (u128::from(total_micros) * u128::from(ticks.user) / u128::from(counted)) as u64
    };
    CpuTimes {
        user,
        sys: total_micros - user,
        ..ticks
    }
}

/// Seconds with six decimals, as INFO's used_cpu_* fields read.
pub fn format_seconds(micros: u64) -> String {
    format!("{}.{:06}", micros / 1_000_000, micros % 1_000_000)
}

/// Resident set size in bytes (/proc/self/statm, second field, in pages).
pub fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map(|pages| pages.saturating_mul(PAGE_SIZE))
        .unwrap_or(0)
}

/// Parses /proc/meminfo's `MemTotal:  N kB` into bytes.
pub fn parse_mem_total(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb.saturating_mul(1024))
}

pub fn total_system_memory() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| parse_mem_total(&s))
        .unwrap_or(0)
}

/// `Linux 6.1.0-18-amd64 x86_64`, as Redis prints uname's sysname, release and machine.
pub fn os_description() -> String {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into());
    let sysname = match std::env::consts::OS {
        "linux" => "Linux",
        other => other,
    };
    format!("{sysname} {release} {}", std::env::consts::ARCH)
}

/// Redis's `bytesToHuman`: `1023B`, `1.50K`, `2.00M`, `3.25G`...
pub fn bytes_to_human(n: u64) -> String {
    const UNITS: [(u32, char); 5] = [(10, 'K'), (20, 'M'), (30, 'G'), (40, 'T'), (50, 'P')];
    if n < 1024 {
        return format!("{n}B");
    }
    for (shift, unit) in UNITS {
        if n < 1u64 << (shift + 10) {
            return format!("{:.2}{unit}", n as f64 / (1u64 << shift) as f64);
        }
    }
    format!("{n}B")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_times_from_proc_stat() {
        let stat = "4242 (node (io)) S 1 4242 4242 0 -1 4194560 2000 0 0 0 250 75 3 1 20 0 9 0 100 1000 200";
        let t = parse_cpu_times(stat).unwrap();
        assert_eq!(
            t,
            CpuTimes {
                user: 2_500_000,
                sys: 750_000,
                children_user: 30_000,
                children_sys: 10_000
            }
        );
        assert_eq!(format_seconds(t.sys), "0.750000");
        assert_eq!(format_seconds(12_000_001), "12.000001");
        assert!(parse_cpu_times("garbage").is_none());
        assert!(parse_cpu_times("1 (x) S 1").is_none());
    }

    /// The clock's total is split as the ticks are; without ticks it is all user time.
    #[test]
    fn precise_total_split_like_the_ticks() {
        let ticks = CpuTimes {
            user: 30_000,
            sys: 10_000,
            children_user: 5,
            children_sys: 6,
        };
        let t = with_precise_total(ticks, 41_234);
        assert_eq!((t.user, t.sys), (30_925, 10_309));
        assert_eq!((t.children_user, t.children_sys), (5, 6));
        let t = with_precise_total(CpuTimes::default(), 1_234);
        assert_eq!((t.user, t.sys), (1_234, 0));
        let now = cpu_times();
        assert!(now.user + now.sys > 0, "a running test has used some CPU");
        // Neither part goes back when a later split leans the other way.
        assert_eq!(never_backwards((100, 50), (90, 70)), (100, 60));
        assert_eq!(never_backwards((100, 50), (130, 40)), (120, 50));
        assert_eq!(never_backwards((100, 50), (110, 60)), (110, 60));
        assert_eq!(never_backwards((100, 50), (0, 0)), (100, 50));
    }

    #[test]
    fn meminfo_total() {
        let m = "MemTotal:       24683584 kB\nMemFree:         1000 kB\n";
        assert_eq!(parse_mem_total(m), Some(24683584 * 1024));
        assert_eq!(parse_mem_total("nothing"), None);
    }

    #[test]
    fn human_bytes_as_redis() {
        assert_eq!(bytes_to_human(0), "0B");
        assert_eq!(bytes_to_human(1023), "1023B");
        assert_eq!(bytes_to_human(1024), "1.00K");
        assert_eq!(bytes_to_human(1_114_240), "1.06M");
        assert_eq!(bytes_to_human(25_275_990_016), "23.54G");
    }

    #[test]
    fn live_readings_are_sane() {
        assert!(rss_bytes() > 0);
        assert!(total_system_memory() > 0);
        assert!(os_description().starts_with("Linux "));
    }
}
