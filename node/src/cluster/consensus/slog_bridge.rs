//! raft-rs logs through `slog`; the project logs through `tracing`. This drain forwards each
//! slog record as a tracing event (target `raft`) with the record's key-values appended to
//! the message, so raft's elections and conf changes show up with the rest of the node's logs.

use std::fmt::{self, Write as _};

/// Longest text of key-values forwarded per record; raft's records carry a handful of short
/// fields, the bound only stops a pathological value from growing a log line without end.
pub const KV_TEXT_MAX: usize = 1024;

/// The slog drain; build a logger with [`logger`].
#[derive(Debug, Clone, Copy, Default)]
pub struct TracingDrain;

/// A slog logger whose records go to tracing.
pub fn logger() -> slog::Logger {
    slog::Logger::root(TracingDrain, slog::o!())
}

impl slog::Drain for TracingDrain {
    type Ok = ();
    type Err = slog::Never;

    fn log(
        &self,
        record: &slog::Record<'_>,
        values: &slog::OwnedKVList,
    ) -> Result<(), slog::Never> {
        let mut kv = KvText(String::new());
        // Serialising into a String cannot fail but for our own bound, which just truncates.
        let _ = slog::KV::serialize(&record.kv(), record, &mut kv);
        let _ = slog::KV::serialize(values, record, &mut kv);
        let message = record.msg();
        let kv = kv.0;
        match record.level() {
            slog::Level::Critical | slog::Level::Error => {
                tracing::error!(target: "raft", "{message}{kv}")
            }
            slog::Level::Warning => tracing::warn!(target: "raft", "{message}{kv}"),
            slog::Level::Info => tracing::info!(target: "raft", "{message}{kv}"),
            slog::Level::Debug => tracing::debug!(target: "raft", "{message}{kv}"),
            slog::Level::Trace => tracing::trace!(target: "raft", "{message}{kv}"),
        }
        Ok(())
    }
}

/// Collects ` key=value` pairs, up to [`KV_TEXT_MAX`] bytes.
struct KvText(String);

impl slog::Serializer for KvText {
    fn emit_arguments(&mut self, key: slog::Key, val: &fmt::Arguments<'_>) -> slog::Result {
        if self.0.len() < KV_TEXT_MAX {
            let _ = write!(self.0, " {key}={val}");
            if self.0.len() > KV_TEXT_MAX {
                let mut cut = KV_TEXT_MAX;
                while !self.0.is_char_boundary(cut) {
                    cut -= 1;
                }
                self.0.truncate(cut);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::sync::{Arc, Mutex};

    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn slog_records_arrive_as_tracing_events_with_their_fields() {
        let captured = Captured::default();
        let sink = captured.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || sink.clone())
            .with_max_level(tracing::Level::TRACE)
            .with_ansi(false)
            .finish();
        tracing::subscriber::with_default(subscriber, || {
            let log = slog::Logger::new(&logger(), slog::o!("raft_id" => 7));
            slog::info!(log, "became leader"; "term" => 3);
            slog::warn!(log, "dropping"; "long" => "x".repeat(5000));
        });
        let text = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
        assert!(
            text.contains("INFO raft: became leader term=3 raft_id=7"),
            "{text}"
        );
        assert!(text.contains("WARN raft: dropping long=xxx"), "{text}");
        assert!(text.len() < 2 * KV_TEXT_MAX + 400, "{}", text.len());
    }
}
