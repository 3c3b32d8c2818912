//! The rogue's way around libfabric shm altogether: cross-memory attach
//! (`process_vm_readv/writev`), what shm's key-less "fast RMA" path does for it. Aimed at
//! addresses known to be mapped in the victim (the rogue's own advert on shm is a real
//! virtual address of the victim's), so only the kernel's permission check can stop it: a
//! non-dumpable victim refuses anyone without CAP_SYS_PTRACE.
#![allow(unsafe_code)]

/// What the CMA attempts came to.
#[derive(Clone, Debug, Default)]
pub struct CmaReport {
    pub attempts: u64,
    pub succeeded: u64,
    /// The errors seen (errno values), for the log.
    pub errors: Vec<i32>,
}

impl CmaReport {
    pub fn line(&self) -> String {
        format!(
            "rogue-cma: {} attempts, {} succeeded, errors {:?}",
            self.attempts, self.succeeded, self.errors
        )
    }
}

/// Reads `len` bytes at each address of process `pid`, then writes the buffer back (what was
/// read, or zeros): either one succeeding is a breach.
pub fn try_cma(pid: i32, addrs: &[u64], len: usize) -> CmaReport {
    let mut report = CmaReport::default();
    let mut buf = vec![0u8; len];
    for &addr in addrs {
        for write in [false, true] {
            report.attempts += 1;
            let local = libc::iovec {
                iov_base: buf.as_mut_ptr().cast(),
                iov_len: len,
            };
            let remote = libc::iovec {
                iov_base: addr as *mut libc::c_void,
                iov_len: len,
            };
            // SAFETY: `local` names our own live buffer of `len` bytes; the remote iovec is
            // only an address in another process, which the kernel checks (it is never
            // dereferenced here).
            let n = unsafe {
                if write {
                    libc::process_vm_writev(pid, &local, 1, &remote, 1, 0)
                } else {
                    libc::process_vm_readv(pid, &local, 1, &remote, 1, 0)
                }
            };
            if n >= 0 {
                report.succeeded += 1;
            } else {
                let errno = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
                if !report.errors.contains(&errno) {
                    report.errors.push(errno);
                }
            }
        }
    }
    report
}
