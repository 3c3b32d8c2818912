//! SIGTERM and SIGINT, taken by `sigwait` on a thread of the node's own.
//!
//! A signal handler is process-wide and the last `sigaction` wins: libfabric's psm provider
//! pulls in libinfinipath, whose load installs a SIGTERM/SIGINT handler that exits the
//! process with status 1, and a handler installed before it (tokio's) is chained to it. So
//! the node does not handle these signals at all: it blocks them in the main thread before
//! any other thread exists (every thread, the runtime's and any a library starts later,
//! inherits the mask), and one thread takes them with `sigwait`. A blocked signal is never
//! delivered to a handler, whoever installed it.

use nix::sys::signal::{SigSet, Signal};
use tokio::sync::mpsc;

/// Signals queued for the node before it reads them: a stop needs one, a second one cuts
/// the wait for replicas short; more are the same request again.
const QUEUED_SIGNALS_MAX: usize = 4;

/// The stop signals, as they arrive.
pub struct StopSignals {
    received: mpsc::Receiver<Signal>,
}

impl StopSignals {
    /// Blocks SIGTERM and SIGINT in the calling thread and starts the thread that waits for
    /// them. Call first thing in `main`'s thread, before any other thread is started.
    pub fn install() -> std::io::Result<StopSignals> {
        let set = stop_set();
        set.thread_block().map_err(std::io::Error::from)?;
        let (tx, received) = mpsc::channel(QUEUED_SIGNALS_MAX);
        std::thread::Builder::new()
            .name("node-signals".into())
            .spawn(move || loop {
                match set.wait() {
                    // Full: the node has stop requests it has not read yet; this adds none.
                    Ok(signal) => {
                        if let Err(mpsc::error::TrySendError::Closed(_)) = tx.try_send(signal) {
                            return;
                        }
                    }
                    Err(e) => {
                        tracing::error!(error = %e, "sigwait failed; stop signals are ignored");
                        return;
                    }
                }
            })?;
        Ok(StopSignals { received })
    }

    /// The next stop signal's name; pending forever once the signal thread is gone.
    pub async fn next(&mut self) -> &'static str {
        match self.received.recv().await {
            Some(signal) => signal.as_str(),
            None => std::future::pending().await,
        }
    }
}

fn stop_set() -> SigSet {
    let mut set = SigSet::empty();
    set.add(Signal::SIGTERM);
    set.add(Signal::SIGINT);
    set
}
