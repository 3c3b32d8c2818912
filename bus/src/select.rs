//! Choosing a provider at run time by its `fabric-provider` name, for the binaries: the node
//! serves with whichever provider its config names, `operator` connects with the one its
//! `--fabric` flag names. The code above the providers is generic over [`Provider`]; this file
//! is the one place that turns a name into a concrete type.

use std::net::SocketAddr;
use std::time::Duration;

use crate::config::EndpointConfig;
use crate::error::{BusError, Result};
use crate::ofi::{OfiKind, OfiProvider};
use crate::provider::Provider;
use crate::stream::{Stream, StreamStats};
use crate::verbs::{VerbsOptions, VerbsProvider};

/// The names `fabric-provider` and `--fabric` accept.
pub const PROVIDER_NAMES: &[&str] = &["auto", "verbs", "ofi:tcp", "ofi:shm", "ofi:efa"];

/// Code to run with a concrete provider (a generic closure, which Rust has no syntax for).
pub trait WithProvider {
    type Output;
    fn run<P: Provider>(self, provider: P) -> Self::Output;
}

/// Opens the provider called `name` and runs `job` with it. `auto` takes verbs when an RDMA
/// device is present and `ofi:tcp` otherwise. Unknown names are `Invalid`; a provider this
/// host lacks is `Unavailable` with the reason.
pub fn with_provider<J: WithProvider>(name: &str, job: J) -> Result<J::Output> {
    match name.to_ascii_lowercase().as_str() {
        "verbs" => Ok(job.run(VerbsProvider::open(&VerbsOptions::default())?)),
        "auto" => match VerbsProvider::open(&VerbsOptions::default()) {
            Ok(p) => Ok(job.run(p)),
            Err(e) => {
                tracing::info!(reason = %e, "fabric-provider auto: no verbs, using ofi:tcp");
                Ok(job.run(OfiProvider::open(OfiKind::Tcp)?))
            }
        },
        other => match OfiKind::from_name(other) {
            Some(kind) => Ok(job.run(OfiProvider::open(kind)?)),
            None => Err(BusError::Invalid {
                what: "fabric provider",
                reason: format!("{name:?} is not one of {}", PROVIDER_NAMES.join(", ")),
            }),
        },
    }
}

/// A byte stream whose provider was chosen at run time: [`Stream`]'s methods, object-safe.
pub trait ByteStream: Send {
    /// The provider's name.
    fn provider(&self) -> &str;
    /// See [`Stream::progress`].
    fn progress(&mut self, now: Duration) -> Result<()>;
    /// See [`Stream::readable`].
    fn readable(&self) -> usize;
    /// See [`Stream::read`].
    fn read(&mut self, buf: &mut [u8]) -> Result<usize>;
    /// See [`Stream::write`].
    fn write(&mut self, data: &[u8]) -> Result<usize>;
    /// See [`Stream::flush`].
    fn flush(&mut self) -> Result<()>;
    /// See [`Stream::wait`].
    fn wait(&mut self, timeout: Duration) -> Result<()>;
    /// See [`Stream::is_closed`].
    fn is_closed(&self) -> bool;
    /// See [`Stream::begin_goodbye`].
    fn begin_goodbye(&mut self) -> Result<()>;
    /// See [`Stream::goodbye_delivered`].
    fn goodbye_delivered(&self) -> bool;
    /// See [`Stream::stats`] (a client watches `control_received` to tell a live server,
    /// which sends a keepalive every 3 s, from one that is gone).
    fn stats(&self) -> StreamStats;
}

/// A client stream together with the provider that owns its memory registrations. Fields drop
/// in order: the stream (its connection and regions) before the provider.
struct OwnedStream<P: Provider> {
    stream: Stream<P::Conn>,
    provider: P,
}

impl<P: Provider> ByteStream for OwnedStream<P> {
    fn provider(&self) -> &str {
        self.provider.name()
    }
    fn progress(&mut self, now: Duration) -> Result<()> {
        self.stream.progress(now)
    }
    fn readable(&self) -> usize {
        self.stream.readable()
    }
    fn read(&mut self, buf: &mut [u8]) -> Result<usize> {
        self.stream.read(buf)
    }
    fn write(&mut self, data: &[u8]) -> Result<usize> {
        self.stream.write(data)
    }
    fn flush(&mut self) -> Result<()> {
        self.stream.flush()
    }
    fn wait(&mut self, timeout: Duration) -> Result<()> {
        self.stream.wait(timeout)
    }
    fn is_closed(&self) -> bool {
        self.stream.is_closed()
    }
    fn begin_goodbye(&mut self) -> Result<()> {
        self.stream.begin_goodbye()
    }
    fn goodbye_delivered(&self) -> bool {
        self.stream.goodbye_delivered()
    }
    fn stats(&self) -> StreamStats {
        self.stream.stats().clone()
    }
}

struct ConnectJob {
    to: SocketAddr,
    rx_size: usize,
    timeout: Duration,
}

impl WithProvider for ConnectJob {
    type Output = Result<Box<dyn ByteStream>>;
    fn run<P: Provider>(self, provider: P) -> Self::Output {
        let conn =
            provider.connect_for_stream(self.to, &EndpointConfig::default(), self.timeout)?;
        let mut stream = Stream::client(conn, self.rx_size)?;
        // Servers on providers without connection state (ofi) drop silent clients.
        stream.set_client_keepalive(true);
        Ok(Box::new(OwnedStream { stream, provider }))
    }
}

/// Connects a client Stream to a node's fabric listener at `to` with the provider `name`.
pub fn connect_stream(
    name: &str,
    to: SocketAddr,
    rx_size: usize,
    timeout: Duration,
) -> Result<Box<dyn ByteStream>> {
    with_provider(
        name,
        ConnectJob {
            to,
            rx_size,
            timeout,
        },
    )?
}

#[cfg(test)]
mod tests {
    use super::*;

    struct NameJob;
    impl WithProvider for NameJob {
        type Output = String;
        fn run<P: Provider>(self, provider: P) -> String {
            provider.name().to_owned()
        }
    }

    /// Unknown names are refused with the list of valid ones; verbs on a host without RDMA
    /// (every CI machine) is Unavailable, not a panic.
    #[test]
    fn names_are_checked() {
        let err = with_provider("ib", NameJob).unwrap_err();
        assert!(err.to_string().contains("ofi:tcp"), "{err}");
        if let Err(e) = with_provider("verbs", NameJob) {
            assert!(matches!(e, BusError::Unavailable { .. }), "{e}");
        }
    }
}
