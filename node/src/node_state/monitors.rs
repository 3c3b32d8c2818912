//! MONITOR: the clients that watch every command the node runs. The dispatcher formats each
//! command once as Redis does (`+<secs>.<micros> [0 <addr>] "arg" ...`) and queues the line
//! on every monitor's push queue, the one pub/sub messages use: a monitor that stops reading
//! is closed once [`super::client::PUSH_QUEUE_LIMIT`] bytes wait for it, as Redis's
//! `client-output-buffer-limit` closes it, so it cannot make the node's memory grow.

use super::client::ClientShared;
use parking_lot::RwLock;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;

#[derive(Default)]
pub struct Monitors {
    clients: RwLock<Vec<Arc<ClientShared>>>,
    /// `clients.len()`, read without the lock by every command.
    count: AtomicUsize,
}

impl Monitors {
    /// Whether any client monitors (one relaxed load per command).
    pub fn active(&self) -> bool {
        self.count.load(Relaxed) > 0
    }

    /// Registers a monitor; false if it already was one (MONITOR again changes nothing).
    pub fn add(&self, client: &Arc<ClientShared>) -> bool {
        let mut clients = self.clients.write();
        if clients.iter().any(|c| c.id == client.id) {
            return false;
        }
        clients.push(client.clone());
        self.count.store(clients.len(), Relaxed);
        true
    }

    /// Forgets a client (it left or was killed); nothing if it did not monitor.
    pub fn remove(&self, client_id: u64) {
        if !self.active() {
            return;
        }
        let mut clients = self.clients.write();
        clients.retain(|c| c.id != client_id);
        self.count.store(clients.len(), Relaxed);
    }

    pub fn count(&self) -> usize {
        self.count.load(Relaxed)
    }

    /// Shows a command `client` ran (its secrets already redacted) to every monitor; `None`
    /// for a command a script ran, shown from `lua` as Redis shows it.
    pub fn feed(&self, client: Option<&ClientShared>, args: &[&[u8]]) {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        let from = client.map_or_else(|| "lua".to_string(), |c| c.peer.to_string());
        let line = format_line(now, &from, args);
        for monitor in self.clients.read().iter() {
            if !monitor.is_killed() {
                monitor.push(&line);
            }
        }
    }
}

/// One MONITOR line: `+<secs>.<micros> [0 <addr>] "arg" "arg"\r\n`. Database 0 always: the
/// node has one.
pub fn format_line(since_epoch: std::time::Duration, addr: &str, args: &[&[u8]]) -> Vec<u8> {
    let mut line = format!(
        "+{}.{:06} [0 {addr}]",
        since_epoch.as_secs(),
        since_epoch.subsec_micros()
    )
    .into_bytes();
    for arg in args {
        line.push(b' ');
        quote_into(&mut line, arg);
    }
    line.extend_from_slice(b"\r\n");
    line
}

/// Appends `arg` quoted as Redis's `sdscatrepr` does: `\\`, `\"`, `\n`, `\r`, `\t`, `\a`,
/// `\b` escaped by name, other unprintable bytes as `\xHH`. Printable means the C locale's
/// `isprint`: 0x20..=0x7e.
fn quote_into(out: &mut Vec<u8>, arg: &[u8]) {
    out.push(b'"');
    for &b in arg {
        match b {
            b'\\' | b'"' => out.extend_from_slice(&[b'\\', b]),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0x07 => out.extend_from_slice(b"\\a"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x20..=0x7e => out.push(b),
            _ => out.extend_from_slice(format!("\\x{b:02x}").as_bytes()),
        }
    }
    out.push(b'"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn lines_are_formatted_and_quoted_as_redis_does() {
        let at = Duration::new(1339518083, 107_412_000);
        let line = format_line(at, "127.0.0.1:60866", &[b"keys", b"*"]);
        assert_eq!(
            line,
            b"+1339518083.107412 [0 127.0.0.1:60866] \"keys\" \"*\"\r\n"
        );
        let line = format_line(
            Duration::new(5, 3_000),
            "[::1]:7",
            &[b"set", b"a\"b\\c", b"\r\n\t\x07\x08\x00\xff\x7f"],
        );
        assert_eq!(
            String::from_utf8(line).unwrap(),
            "+5.000003 [0 [::1]:7] \"set\" \"a\\\"b\\\\c\" \"\\r\\n\\t\\a\\b\\x00\\xff\\x7f\"\r\n"
        );
    }

    #[test]
    fn monitors_register_once_and_leave() {
        let addr = "127.0.0.1:1".parse().unwrap();
        let m = Monitors::default();
        let a = Arc::new(ClientShared::new(1, addr, addr));
        assert!(!m.active());
        assert!(m.add(&a));
        assert!(!m.add(&a));
        assert_eq!(m.count(), 1);
        let b = ClientShared::new(2, addr, addr);
        m.feed(Some(&b), &[b"ping"]);
        assert!(a.pushes.lock().ends_with(b"[0 127.0.0.1:1] \"ping\"\r\n"));
        m.remove(1);
        assert!(!m.active());
    }
}
