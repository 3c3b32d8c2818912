//! The open-files limit, raised at start as redis-server does (`adjustOpenFilesLimit`): every
//! client, every fabric connection's endpoint and every pending handshake socket at the
//! fabric port holds descriptors, and a soft limit below the hard one would refuse them
//! first. Only the soft limit is raised, to the hard one (no privilege needed).

use nix::sys::resource::{getrlimit, setrlimit, Resource};

/// Raises the soft RLIMIT_NOFILE to the hard limit; logs what it did.
pub fn raise_open_files_limit() {
    match getrlimit(Resource::RLIMIT_NOFILE) {
        Ok((soft, hard)) if soft < hard => match setrlimit(Resource::RLIMIT_NOFILE, hard, hard) {
            Ok(()) => tracing::info!(from = soft, to = hard, "open files limit raised"),
            Err(e) => tracing::warn!(soft, hard, error = %e, "cannot raise the open files limit"),
        },
        Ok(_) => {}
        Err(e) => tracing::warn!(error = %e, "cannot read the open files limit"),
    }
}
