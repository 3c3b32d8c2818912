//! Closing libfabric shm's key-less path into this process.
//!
//! shm moves large RMA data with cross-memory attach (`process_vm_writev/readv` on the raw
//! virtual address), and its "fast RMA" path does so without looking at the key at all. The
//! kernel allows CMA into a process only to whoever may ptrace it: same uid *and* a dumpable
//! target, or CAP_SYS_PTRACE. So a process that opens `ofi:shm` (or `ofi:efa`, which embeds shm
//! for peers on the same host) makes itself non-dumpable: then only root can reach it that
//! way, and shm falls back to its key-checked command path. Side effects, documented in the
//! README: no core dumps, and same-uid debuggers cannot attach.
//!
//! The trust boundary on shm stays the Unix user even so: a same-uid process can map the
//! 0600 `/dev/shm` segments, where in-flight messages sit.
#![allow(unsafe_code)]

use crate::error::BusError;

/// Marks the process non-dumpable (`prctl(PR_SET_DUMPABLE, 0)`).
pub fn forbid_cross_memory_attach(provider: &'static str) -> Result<(), BusError> {
    // SAFETY: prctl with PR_SET_DUMPABLE takes plain integers and touches no memory of ours.
    let rc = unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) };
    if rc != 0 {
        return Err(BusError::Unavailable {
            provider,
            reason: format!(
                "cannot make the process non-dumpable (prctl: {}), so shm's cross-memory \
                 attach would stay open to same-user processes",
                std::io::Error::last_os_error()
            ),
        });
    }
    Ok(())
}
