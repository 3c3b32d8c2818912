//! Graceful shutdown: one signal every task listens to.

use tokio::sync::watch;

pub struct Shutdown {
    tx: watch::Sender<bool>,
    /// SHUTDOWN NOSAVE/SAVE/default as asked by the command that triggered it.
    pub mode: parking_lot::Mutex<ShutdownMode>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ShutdownMode {
    /// Save if save rules are configured (Redis's default).
    #[default]
    Default,
    Save,
    NoSave,
}

impl Default for Shutdown {
    fn default() -> Self {
        Shutdown {
            tx: watch::channel(false).0,
            mode: parking_lot::Mutex::new(ShutdownMode::Default),
        }
    }
}

impl Shutdown {
    pub fn trigger(&self, mode: ShutdownMode) {
        *self.mode.lock() = mode;
        self.tx.send_replace(true);
    }

    pub fn is_triggered(&self) -> bool {
        *self.tx.borrow()
    }

    pub fn subscribe(&self) -> watch::Receiver<bool> {
        self.tx.subscribe()
    }

    /// Resolves once shutdown has been triggered.
    pub async fn wait(&self) {
        let mut rx = self.subscribe();
        let _ = rx.wait_for(|v| *v).await;
    }
}
